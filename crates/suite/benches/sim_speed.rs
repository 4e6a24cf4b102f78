//! Simulator speed (one thread): simulated requests per second of wall time with noop on the nvme preset, and the
//! wall time of a 60-second 10r-seq scenario on seagate-hdd. Run with `cargo bench -p bfq-suite --bench sim_speed`.

use bfq_sched::SEC;
use bfq_sim::{HostConfig, Simulation};
use bfq_suite::{Experiment, Work};
use bfq_workload::fio::{JobConfig, Pattern};
use bfq_workload::readers::Reader;
use bfq_workload::{rng, FileSpec, IoMode, Placement};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// 8 O_DIRECT 4 KiB random readers at depth 32 each on nvme with noop, for `secs` simulated seconds.
fn nvme_noop(secs: u64) -> (u64, f64) {
    let cfg = bfq_sim::device::resolve("nvme").expect("preset");
    let dev = cfg.build();
    let policy = bfq_sched::build::<&str>("noop", &dev.info(), &[]).expect("noop");
    let host = HostConfig {
        time_policy: false,
        ..HostConfig::default()
    };
    let mut sim = Simulation::new(dev, policy, host, 1);
    for i in 0..8 {
        let size = 8u64 << 30;
        let f = sim
            .add_file(&FileSpec {
                name: format!("f{i}"),
                size,
                placement: Placement::Contiguous,
                prewritten: true,
            })
            .expect("fits");
        let name = format!("r{i}");
        let mut job = JobConfig::new(name.clone(), f, size, Pattern::Random);
        job.mode = IoMode::Direct;
        job.iodepth = 32;
        sim.spawn(0, Box::new(Reader::new(job, rng::stream(1, &name))));
    }
    let t = Instant::now();
    sim.run_until(secs * SEC);
    (sim.metrics().device_requests, t.elapsed().as_secs_f64())
}

fn main() {
    // `-- nvme` (or `hdd`) runs only that part; `-- --runs N` changes the number of runs per figure (5), e.g. 1 under
    // callgrind.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .map_or(5, |v| v.parse::<usize>().expect("--runs takes a number").max(1));
    let only: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| ["nvme", "hdd"].contains(a))
        .collect();
    let part = |name: &str| only.is_empty() || only.contains(&name);
    if part("nvme") {
        nvme(runs);
    }
    if part("hdd") {
        hdd(runs);
    }
}

fn nvme(runs: usize) {
    let mut rates = Vec::new();
    let mut reqs = 0;
    for _ in 0..runs {
        let (n, wall) = nvme_noop(2);
        reqs = n;
        rates.push(n as f64 / wall);
    }
    println!(
        "nvme + noop, 8 random readers at QD32, 2 simulated s: {reqs} requests, median {:.2} M simulated requests/s of wall time (issue 19 target >= 8 M)",
        median(rates) / 1e6
    );
}

fn hdd(runs: usize) {
    let mut walls = Vec::new();
    for _ in 0..runs {
        let mut sc = Experiment::sim("seagate-hdd", "noop", Work::background("10r-seq", None));
        sc.settings.duration = Some(60 * SEC);
        let t = Instant::now();
        let r = sc.run().expect("runs");
        walls.push(t.elapsed().as_secs_f64());
        assert!(r.throughput_mbps > 0.0);
    }
    println!(
        "seagate-hdd + noop, 10r-seq, 60 simulated s: median {:.3} s of wall time (target < 1 s)",
        median(walls)
    );
    let mut walls = Vec::new();
    for _ in 0..runs {
        let mut sc = Experiment::sim("seagate-hdd", "bfq", Work::background("10r-seq", None));
        sc.settings.duration = Some(60 * SEC);
        let t = Instant::now();
        sc.run().expect("runs");
        walls.push(t.elapsed().as_secs_f64());
    }
    println!(
        "seagate-hdd + bfq, 10r-seq, 60 simulated s: median {:.3} s of wall time",
        median(walls)
    );
}
