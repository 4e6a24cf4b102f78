//! Seed 003's iozone (`-r512 -i 0 -i 1 -t N`) on the simulated SAN LUN under the four 2.6.18 schedulers, with one
//! host setting changed: the sensitivity tables of docs/DEVICES.md ("Host: 2.6.18 writeback").
//!
//! `cargo run --release -p bfq-suite --example iozone_host -- [io-less] [chunk_mib=N] [dirty_ratio=N]
//! [congestion_ms=N] [submit_us=N] [threads=N] [size_mib=N] [tunable=K=V] [device=NAME] [sched=A,B]`; prints KB/s per phase and scheduler, as seed 003's tables.

use bfq_sim::host::DirtyThrottle;
use bfq_suite::benchmarks::run_iozone_on_host;
use bfq_suite::reproduce::{IOZONE_DEVICE, IOZONE_READ_AHEAD_KB, IOZONE_SEED_SCHEDULERS};
use bfq_suite::{Experiment, Work};

fn main() {
    let mut io_less = false;
    let (mut chunk_mib, mut dirty_ratio, mut congestion_ms, mut submit_us) = (None, None, None, None);
    let (mut threads, mut device) = (10u32, IOZONE_DEVICE.to_string());
    let mut size_mib: Option<u64> = None;
    let mut tunables: Vec<String> = Vec::new();
    let mut scheds: Vec<String> = IOZONE_SEED_SCHEDULERS.iter().map(|s| s.to_string()).collect();
    for a in std::env::args().skip(1) {
        let num = |s: &str| -> f64 { s.parse().unwrap_or_else(|_| panic!("{a}: expected a number after '='")) };
        match a.split_once('=') {
            None if a == "io-less" => io_less = true,
            Some(("chunk_mib", v)) => chunk_mib = Some(num(v)),
            Some(("dirty_ratio", v)) => dirty_ratio = Some(num(v) as u64),
            Some(("congestion_ms", v)) => congestion_ms = Some(num(v)),
            Some(("submit_us", v)) => submit_us = Some(num(v)),
            Some(("threads", v)) => threads = num(v) as u32,
            Some(("device", v)) => device = v.to_string(),
            Some(("size_mib", v)) => size_mib = Some(num(v) as u64),
            Some(("tunable", v)) => tunables.push(v.to_string()),
            Some(("sched", v)) => scheds = v.split(',').map(str::to_string).collect(),
            _ => {
                eprintln!("unknown argument {a}: use io-less, chunk_mib=N, dirty_ratio=N, congestion_ms=N, submit_us=N, threads=N, size_mib=N, tunable=K=V, device=NAME, sched=A,B");
                std::process::exit(2);
            }
        }
    }
    let file_size: u64 = size_mib.map_or(if threads == 1 { 6 << 30 } else { 1 << 30 }, |m| m << 20);
    println!("# scheduler        write   re-write       read    re-read   (KB/s)");
    for s in scheds.iter().map(String::as_str) {
        let mut e = Experiment::sim(&device, s, Work::Iozone { threads, file_size });
        e.settings.read_ahead_kb = Some(IOZONE_READ_AHEAD_KB);
        e.settings.kernel_2_6_18 = true;
        e.tunables = tunables.clone();
        let tweak = |h: &mut bfq_sim::HostConfig| {
            if io_less {
                h.dirty_throttle = DirtyThrottle::Sleep;
            }
            if let DirtyThrottle::WriteBack(w) = &mut h.dirty_throttle {
                if let Some(c) = chunk_mib {
                    w.chunk_pages = ((c * 256.0) as u64).max(1);
                }
                if let Some(us) = submit_us {
                    w.submit_ns_per_page = (us * 1e3) as u64;
                }
                if let Some(ms) = congestion_ms {
                    w.congestion_wait = (ms * 1e6) as u64;
                }
            }
            if let Some(r) = dirty_ratio {
                h.dirty_ratio = r;
            }
        };
        let r = run_iozone_on_host(&e, &device, threads, file_size, &tweak).unwrap_or_else(|err| panic!("{s}: {err}"));
        let v = |k: &str| r.extra.get(k).copied().unwrap_or(0.0);
        // With one thread the run lasts the sum of the phases' times, so the device's mean rates give its bytes.
        let secs: f64 = ["write_kbps", "rewrite_kbps", "read_kbps", "reread_kbps"]
            .iter()
            .map(|k| file_size as f64 / 1024.0 / v(k).max(1.0))
            .sum();
        let device_reads = if threads == 1 {
            format!(
                "  device reads {:.2} GiB",
                r.read_mbps * 1e6 * secs / (1u64 << 30) as f64
            )
        } else {
            String::new()
        };
        println!(
            "  {s:<13} {:>10.0} {:>10.0} {:>10.0} {:>10.0}{device_reads}",
            v("write_kbps"),
            v("rewrite_kbps"),
            v("read_kbps"),
            v("reread_kbps")
        );
    }
}
