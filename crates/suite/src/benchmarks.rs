//! Benchmarks beyond throughput and start-up: weighted fairness across disk zones, and iozone-style phases.

use crate::result::RunResult;
use crate::scenario::ScenarioError;
use bfq_sched::{Time, SEC};
use bfq_sim::{HostConfig, Simulation};
use bfq_workload::fio::{JobConfig, Pattern};
use bfq_workload::iozone::iozone_threads;
use bfq_workload::readers::Reader;
use bfq_workload::{rng, FileSpec, FlowSpec, Placement};
use std::collections::BTreeMap;

fn simulation(
    device: &str,
    sched: &str,
    tunables: &[String],
    seed: u64,
) -> Result<(Simulation, String), ScenarioError> {
    let cfg = bfq_sim::device::resolve(device).map_err(|e| ScenarioError::Invalid(e.to_string()))?;
    let dev = cfg.build();
    let policy = bfq_sched::build(sched, &dev.info(), tunables).map_err(|e| ScenarioError::Invalid(e.to_string()))?;
    let host = HostConfig {
        time_policy: false,
        ..HostConfig::default()
    };
    Ok((Simulation::new(dev, policy, host, seed), cfg.name().to_string()))
}

fn base_result(
    benchmark: &str,
    device: &str,
    dev_name: &str,
    sched: &str,
    tunables: &[String],
    workload: String,
    seed: u64,
) -> RunResult {
    RunResult {
        benchmark: benchmark.to_string(),
        target: format!("sim:{device}"),
        device: dev_name.to_string(),
        scheduler: sched.to_string(),
        tunables: tunables.to_vec(),
        workload,
        app: None,
        rep: 0,
        seed,
        startup_s: None,
        timed_out: false,
        throughput_mbps: 0.0,
        read_mbps: 0.0,
        write_mbps: 0.0,
        sched_cpu_ns_per_request: None,
        extra: BTreeMap::new(),
    }
}

/// Where the fairness benchmark places its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zones {
    /// All files at the start of the device (the fast outer zone of a disk).
    Outer,
    /// All files near the end of the device (the slow inner zone).
    Inner,
    /// Files spread from the outer to the inner zone.
    Mixed,
}

impl Zones {
    /// Name used in workload labels.
    pub fn name(self) -> &'static str {
        match self {
            Zones::Outer => "outer",
            Zones::Inner => "inner",
            Zones::Mixed => "mixed",
        }
    }
    fn position(self, i: usize, n: usize) -> f64 {
        match self {
            Zones::Outer => 0.0,
            Zones::Inner => 0.9,
            Zones::Mixed => 0.9 * i as f64 / (n.max(2) - 1) as f64,
        }
    }
}

/// S's fairness test: sequential readers with the given weights (each reading its own 2 GiB file placed as
/// `zones` says), for `duration` ns. Reports each reader's share of the bytes read and its weight's share, as
/// `extra` keys `share_<i>` and `weight_share_<i>` (percent), and the largest deviation `max_share_error_pct`.
pub fn run_fairness(
    device: &str,
    sched: &str,
    tunables: &[String],
    weights: &[u32],
    zones: Zones,
    duration: Time,
    seed: u64,
) -> Result<RunResult, ScenarioError> {
    let (mut sim, dev_name) = simulation(device, sched, tunables, seed)?;
    let size = 2u64 << 30;
    let mut pids = Vec::new();
    for (i, &w) in weights.iter().enumerate() {
        let spec = FileSpec {
            name: format!("fair{i}"),
            size,
            placement: Placement::At(zones.position(i, weights.len())),
            prewritten: true,
        };
        let f = sim.add_file(&spec).map_err(|e| ScenarioError::Invalid(e.to_string()))?;
        let name = format!("reader{i}");
        let mut cfg = JobConfig::new(name.clone(), f, size, Pattern::Sequential);
        // S's fairness readers are `dd bs=1M`.
        cfg.bs = 1 << 20;
        let mut flow = FlowSpec::named(name.clone());
        flow.weight = Some(w);
        let r = Reader::new(cfg, rng::stream(seed, &name)).with_flow(flow);
        pids.push(sim.spawn(0, Box::new(r)));
    }
    sim.run_until(duration);
    let m = sim.metrics();
    let bytes: Vec<u64> = pids
        .iter()
        .map(|&p| sim.flow_of(p).and_then(|f| m.per_flow.get(&f)).map_or(0, |b| b.read))
        .collect();
    let total: u64 = bytes.iter().sum::<u64>().max(1);
    let wsum: u32 = weights.iter().sum::<u32>().max(1);
    let label = weights.iter().map(u32::to_string).collect::<Vec<_>>().join(":");
    let mut r = base_result(
        "fairness",
        device,
        &dev_name,
        sched,
        tunables,
        format!("{label}-{}", zones.name()),
        seed,
    );
    let mut worst: f64 = 0.0;
    for (i, (&b, &w)) in bytes.iter().zip(weights).enumerate() {
        let share = 100.0 * b as f64 / total as f64;
        let want = 100.0 * f64::from(w) / f64::from(wsum);
        worst = worst.max((share / want - 1.0).abs() * 100.0);
        r.extra.insert(format!("share_{i}_pct"), share);
        r.extra.insert(format!("weight_share_{i}_pct"), want);
    }
    r.extra.insert("max_share_error_pct".into(), worst);
    let [rd, wr] = m.mbps_between(0, duration);
    r.read_mbps = rd;
    r.write_mbps = wr;
    r.throughput_mbps = rd + wr;
    Ok(r)
}

/// iozone `-s <file_size> -r 512k -i 0 -i 1 -t <threads>`: each thread writes, re-writes, reads and re-reads its own
/// file. Reports per-phase throughput in KB/s (iozone's "children see throughput": the sum of each thread's rate)
/// as `extra` keys `write_kbps`, `rewrite_kbps`, `read_kbps`, `reread_kbps`.
pub fn run_iozone(
    device: &str,
    sched: &str,
    tunables: &[String],
    threads: u32,
    file_size: u64,
    seed: u64,
) -> Result<RunResult, ScenarioError> {
    let (mut sim, dev_name) = simulation(device, sched, tunables, seed)?;
    let (files, procs) = iozone_threads(threads, 0, file_size, 512 << 10);
    for f in &files {
        sim.add_file(f).map_err(|e| ScenarioError::Invalid(e.to_string()))?;
    }
    let pids: Vec<_> = procs.into_iter().map(|p| sim.spawn(0, Box::new(p))).collect();
    // Generous limit: every phase moves the whole file, at no less than 1 MB/s.
    let limit = 4 * file_size * u64::from(threads) / 1_000_000 * SEC + 60 * SEC;
    for &p in &pids {
        sim.run_until_exit(p, limit);
    }
    let mut r = base_result(
        "iozone",
        device,
        &dev_name,
        sched,
        tunables,
        format!("{threads}-thread"),
        seed,
    );
    let mut rates: BTreeMap<String, f64> = BTreeMap::new();
    for &p in &pids {
        if let Some(rep) = sim.report(p) {
            for ph in &rep.phases {
                *rates.entry(format!("{}_kbps", ph.name)).or_default() += ph.bytes_per_s() / 1024.0;
            }
        }
    }
    let end = sim.now().max(1);
    let [rd, wr] = sim.metrics().mbps_between(0, end);
    r.read_mbps = rd;
    r.write_mbps = wr;
    r.throughput_mbps = rd + wr;
    r.extra = rates;
    Ok(r)
}
