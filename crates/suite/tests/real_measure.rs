//! Side-by-side measurement on the kernel target (ignored by default: it takes minutes and needs a device).
//!
//! ```text
//! bfq loopdev create --size 8G /mnt/bfq
//! BFQ_REAL_DIR=/mnt/bfq cargo test -p bfq-suite --release --test real_measure -- --ignored --nocapture
//! bfq loopdev remove /mnt/bfq
//! ```
//!
//! Settings (environment): `BFQ_REAL_DIR` (required), `BFQ_REAL_SCHEDS` (default `bfq,none`; a scheduler may carry
//! tunables after a colon, `bfq:low_latency=0:slice_idle=0`), `BFQ_REAL_WORKLOAD`
//! (comma-separated, default `10r-seq`), `BFQ_REAL_APP` (`xterm`), `BFQ_REAL_REPS` (5), `BFQ_REAL_WARMUP_S` (15), `BFQ_REAL_FILE_SCALE`
//! (1.0), `BFQ_REAL_APP_CMD` (a real command timed instead of the profile, e.g. `xterm /bin/true`), `BFQ_REAL_OUT` (a JSON-lines file for every result). The order of the schedulers rotates between
//! repetitions; the table shows median, min and max over repetitions.

use bfq_sched::SEC;
use bfq_suite::real::run_kernel;
use bfq_suite::target::Target;
use bfq_suite::{Experiment, Work};
use std::io::Write;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[test]
#[ignore = "a measurement: needs BFQ_REAL_DIR on a bfq loopdev device and takes minutes"]
fn startup_side_by_side() {
    // Run only on request (`--ignored`): without its device that request cannot be met, which is a failure.
    let dir = std::env::var("BFQ_REAL_DIR").expect("set BFQ_REAL_DIR to a directory made by `bfq loopdev create`");
    let scheds: Vec<String> = env_or("BFQ_REAL_SCHEDS", "bfq,none")
        .split(',')
        .map(str::to_string)
        .collect();
    let workloads: Vec<String> = env_or("BFQ_REAL_WORKLOAD", "10r-seq")
        .split(',')
        .map(str::to_string)
        .collect();
    let app = env_or("BFQ_REAL_APP", "xterm");
    let app_cmd = std::env::var("BFQ_REAL_APP_CMD").ok();
    let reps: u32 = env_or("BFQ_REAL_REPS", "5").parse().expect("BFQ_REAL_REPS");
    let warmup: f64 = env_or("BFQ_REAL_WARMUP_S", "15").parse().expect("BFQ_REAL_WARMUP_S");
    let scale: f64 = env_or("BFQ_REAL_FILE_SCALE", "1.0")
        .parse()
        .expect("BFQ_REAL_FILE_SCALE");
    let mut out = std::env::var("BFQ_REAL_OUT")
        .ok()
        .map(|p| std::fs::File::create(p).expect("creates BFQ_REAL_OUT"));
    for workload in &workloads {
        let mut startups: Vec<Vec<f64>> = vec![Vec::new(); scheds.len()];
        let mut thr: Vec<Vec<f64>> = vec![Vec::new(); scheds.len()];
        let mut xs = vec![0u32; scheds.len()];
        for rep in 0..reps {
            for k in 0..scheds.len() {
                let i = (k + rep as usize) % scheds.len();
                let mut parts = scheds[i].split(':');
                let name = parts.next().unwrap_or_default();
                let label = app_cmd.as_deref().unwrap_or(&app);
                let work = Work::background(workload, Some(label));
                let mut sc = Experiment::new(Target::Kernel(dir.clone().into()), name, work);
                sc.tunables = parts.map(str::to_string).collect();
                sc.settings.real.app_cmd = app_cmd.clone();
                sc.settings.warmup = (warmup * SEC as f64) as u64;
                sc.settings.real.file_scale = scale;
                sc.rep = rep;
                sc.settings.seed = 1 + u64::from(rep);
                let r = run_kernel(&sc).expect("runs");
                eprintln!(
                    "{workload} rep {rep} {:<20} start-up {:>8} s  throughput {:>7.1} MB/s (read {:.1}, write {:.1})",
                    scheds[i],
                    r.startup_s.map_or("X".to_string(), |s| format!("{s:.3}")),
                    r.throughput_mbps,
                    r.read_mbps,
                    r.write_mbps
                );
                match r.startup_s {
                    Some(s) => startups[i].push(s),
                    None => xs[i] += 1,
                }
                thr[i].push(r.throughput_mbps);
                if let Some(f) = out.as_mut() {
                    writeln!(f, "{}", serde_json::to_string(&r).expect("encodes")).expect("writes");
                }
            }
        }
        let label = app_cmd.as_deref().unwrap_or(&app);
        println!(
            "\n{label} start-up under {workload} on kernel:{dir}, {reps} repetitions, warm-up {warmup} s, file scale {scale}"
        );
        println!(
            "{:<20} {:>10} {:>10} {:>10} {:>4} {:>16}",
            "scheduler", "median s", "min s", "max s", "X", "median MB/s"
        );
        for (i, s) in scheds.iter().enumerate() {
            let mut v = startups[i].clone();
            let (mn, mx) = v
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
            println!(
                "{:<20} {:>10.3} {:>10.3} {:>10.3} {:>4} {:>16.1}",
                s,
                median(&mut v),
                mn,
                mx,
                xs[i],
                median(&mut thr[i].clone())
            );
        }
    }
}
