//! Synthetic results for the report tests.

use crate::result::{Benchmark, RunResult};
use std::collections::BTreeMap;

/// One run on `sim:seagate-hdd`: for `startup`, `value` is the start-up time of xterm (s) and the throughput is
/// derived from it; otherwise `value` is the aggregate throughput (MB/s).
pub fn run(benchmark: &str, scheduler: &str, workload: &str, rep: u32, value: f64) -> RunResult {
    let startup = benchmark == "startup";
    RunResult {
        benchmark: Benchmark::ALL
            .into_iter()
            .find(|b| b.name() == benchmark)
            .expect("a benchmark name"),
        target: "sim:seagate-hdd".to_string(),
        device: "seagate-hdd".to_string(),
        scheduler: scheduler.to_string(),
        tunables: Vec::new(),
        workload: workload.to_string(),
        app: startup.then(|| "xterm".to_string()),
        rep,
        seed: 42 + rep as u64,
        startup_s: startup.then_some(value),
        timed_out: false,
        throughput_mbps: if startup { 60.0 / (1.0 + value) } else { value },
        read_mbps: if startup { 50.0 / (1.0 + value) } else { value * 0.8 },
        write_mbps: if startup { 10.0 / (1.0 + value) } else { value * 0.2 },
        sched_cpu_ns_per_request: None,
        extra: BTreeMap::new(),
        scenario: Vec::new(),
    }
}

/// A start-up benchmark (xterm; bfq, cfq, deadline; four workloads; two repetitions, deadline timing out once
/// under 10r-rand) followed by a throughput benchmark (five workloads).
pub fn sample_results() -> Vec<RunResult> {
    let mut out = Vec::new();
    let startup: [(&str, [f64; 4]); 3] = [
        ("bfq", [0.21, 0.45, 0.62, 0.55]),
        ("cfq", [0.22, 3.9, 8.7, 5.1]),
        ("deadline", [0.20, 6.2, 30.5, 9.8]),
    ];
    for rep in 0..2 {
        for (sched, times) in &startup {
            for (w, t) in ["0r0w", "10r-seq", "10r-rand", "5r5w-seq"].iter().zip(times) {
                let mut r = run("startup", sched, w, rep, t * (1.0 + 0.05 * rep as f64));
                if *sched == "deadline" && *w == "10r-rand" && rep == 1 {
                    r.timed_out = true;
                    r.startup_s = None;
                }
                out.push(r);
            }
        }
    }
    let thr: [(&str, [f64; 5]); 3] = [
        ("bfq", [102.0, 98.5, 1.9, 60.2, 2.4]),
        ("cfq", [101.0, 75.3, 1.7, 44.0, 2.1]),
        ("deadline", [101.0, 40.1, 1.8, 38.9, 2.2]),
    ];
    for rep in 0..2 {
        for (sched, vals) in &thr {
            for (w, v) in ["1r-seq", "10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"]
                .iter()
                .zip(vals)
            {
                out.push(run("throughput", sched, w, rep, v * (1.0 - 0.02 * rep as f64)));
            }
        }
    }
    out
}
