//! Where `bfq reproduce` spends its time: runs the reproduce matrix one simulation after the other on this thread and
//! prints each job's CPU time (the thread's own, so a neighbour's load changes it little), the jobs grouped by
//! device and benchmark, the time 2 and 4 worker threads would take with these costs (in plan order, as
//! `bfq reproduce` hands jobs out, and longest first), the number of jobs that repeat another exactly, and the most
//! expensive jobs.
//!
//! ```sh
//! cargo run --release -p bfq-suite --example reproduce_costs -- [--quick] [--reps N] [--top N]
//! ```
//!
//! The full matrix takes as long as `bfq reproduce --jobs 1`.

use bfq_suite::reproduce::plan;
use bfq_suite::Experiment;
use std::collections::BTreeMap;

/// CPU time this thread has used, seconds.
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID needs nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn label(e: &Experiment) -> String {
    let mut s = format!(
        "{} {} {} {:?}",
        e.target,
        e.scheduler,
        e.work.benchmark().name(),
        e.work
    );
    if let Some(hz) = e.settings.timer_hz {
        s.push_str(&format!(" HZ={hz}"));
    }
    if !e.settings.device_reordering {
        s.push_str(" no-reordering");
    }
    s.push_str(&format!(" rep {}", e.rep));
    s
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let opt = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| {
                v.parse().unwrap_or_else(|_| panic!("{name} takes a number"))
            })
    };
    let reps = opt("--reps", if quick { 1 } else { 2 }) as u32;
    let top = opt("--top", 25) as usize;
    let p = plan(quick, reps, 1);
    let mut costs = Vec::new();
    let mut groups: BTreeMap<(String, String), (usize, f64)> = BTreeMap::new();
    let total_start = thread_cpu_s();
    for (i, job) in p.jobs.iter().enumerate() {
        let t = thread_cpu_s();
        job.run()
            .unwrap_or_else(|e| panic!("job {i} ({}) failed: {e}", label(job)));
        let cpu = thread_cpu_s() - t;
        let g = groups
            .entry((job.target.to_string(), job.work.benchmark().name().to_string()))
            .or_default();
        g.0 += 1;
        g.1 += cpu;
        costs.push((cpu, i));
    }
    let total = thread_cpu_s() - total_start;
    println!("{} jobs, {total:.2} s of CPU in all", p.jobs.len());
    println!();
    println!(
        "{:<28} {:<12} {:>5} {:>9} {:>7}",
        "target", "benchmark", "jobs", "CPU s", "share"
    );
    let mut rows: Vec<_> = groups.into_iter().collect();
    rows.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    for ((target, bench), (n, cpu)) in rows {
        println!(
            "{target:<28} {bench:<12} {n:>5} {cpu:>9.2} {:>6.1}%",
            100.0 * cpu / total
        );
    }
    println!();
    // How well the jobs spread over worker threads: the pool hands out jobs in plan order, each to the first thread
    // that is free (`suite::run_all`). The same list schedule with the measured costs, beside the bound no order
    // can beat (the larger of the total over the threads and the longest job) and longest first.
    let in_plan_order: Vec<f64> = {
        let mut v = vec![0.0; p.jobs.len()];
        for &(cpu, i) in &costs {
            v[i] = cpu;
        }
        v
    };
    let longest = in_plan_order.iter().copied().fold(0.0, f64::max);
    let mut sorted = in_plan_order.clone();
    sorted.sort_by(|a, b| b.total_cmp(a));
    for threads in [2usize, 4] {
        println!(
            "{threads} threads: {:.2} s in plan order, {:.2} s longest first, bound {:.2} s",
            makespan(&in_plan_order, threads),
            makespan(&sorted, threads),
            (total / threads as f64).max(longest)
        );
    }
    let mut seen = std::collections::HashSet::new();
    let repeated = p.jobs.iter().filter(|j| !seen.insert(format!("{j:?}"))).count();
    println!("{repeated} jobs repeat an earlier job of the plan exactly");
    println!();
    costs.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!("The {top} most expensive jobs (CPU s, job index, job):");
    for &(cpu, i) in costs.iter().take(top) {
        println!("{cpu:>8.3}  {i:>5}  {}", label(&p.jobs[i]));
    }
}

/// The time `threads` workers take for jobs of these costs, each job going in order to the first free worker.
fn makespan(costs: &[f64], threads: usize) -> f64 {
    let mut free_at = vec![0.0f64; threads.max(1)];
    for &c in costs {
        let w = (0..free_at.len())
            .min_by(|&a, &b| free_at[a].total_cmp(&free_at[b]))
            .unwrap_or(0);
        free_at[w] += c;
    }
    free_at.into_iter().fold(0.0, f64::max)
}
