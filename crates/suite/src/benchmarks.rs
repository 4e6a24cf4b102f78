//! Benchmarks beyond throughput and start-up, on the simulator: weighted fairness across disk zones, iozone-style
//! phases, video playback under load, and interleaved readers.

use crate::experiment::Experiment;
use crate::result::{Measured, RunResult};
use crate::scenario::ScenarioError;
use crate::timeline::{DROP_LEAD, STARTUP_WARMUP};
use bfq_sched::{Time, SEC};
use bfq_sim::{HostConfig, Simulation};
use bfq_workload::fio::{JobConfig, Pattern};
use bfq_workload::interleaved::{InterleavedReader, S_INTERLEAVED_MEASURE_NS, S_INTERLEAVED_WARMUP_NS};
use bfq_workload::iozone::{iozone_threads, Iozone, IozonePhase};
use bfq_workload::noise::{Noise, NoiseConfig, S_NOISE_BS_BYTES, S_NOISE_COUNT};
use bfq_workload::readers::Reader;
use bfq_workload::video::{VideoConfig, VideoPlayer, S_CLIP_DURATION_NS};
use bfq_workload::workloads::{self, WorkloadSettings};
use bfq_workload::{rng, FileSpec, FlowSpec, Placement};
use std::collections::BTreeMap;

/// Default simulated duration of a fairness run, ns.
pub const FAIRNESS_DURATION: Time = 30 * SEC;

/// The simulation of `exp` on `device` and the device's name.
fn simulation(exp: &Experiment, device: &str, time_policy: bool) -> Result<(Simulation, String), ScenarioError> {
    let cfg = crate::scenario::device_config(exp, device)?;
    let (dev, policy, wbt_target) = crate::scenario::sim_stack(exp, &cfg)?;
    let host = HostConfig {
        time_policy,
        wbt_target,
        ..crate::scenario::host_config(exp, &cfg)
    };
    Ok((
        Simulation::new(dev, policy, host, exp.settings.seed),
        cfg.name().to_string(),
    ))
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
/// `zones` says), for `exp.settings.duration` ns (default [`FAIRNESS_DURATION`]). Reports each reader's share of the bytes read and its weight's share, as
/// `extra` keys `share_<i>` and `weight_share_<i>` (percent), and the largest deviation `max_share_error_pct`.
pub fn run_fairness(exp: &Experiment, device: &str, weights: &[u32], zones: Zones) -> Result<RunResult, ScenarioError> {
    let (mut sim, dev_name) = simulation(exp, device, false)?;
    let (duration, seed) = (exp.settings.duration.unwrap_or(FAIRNESS_DURATION), exp.settings.seed);
    let size = 2u64 << 30;
    let mut pids = Vec::new();
    for (i, &w) in weights.iter().enumerate() {
        let spec = FileSpec {
            name: format!("fair{i}"),
            size,
            placement: Placement::At(zones.position(i, weights.len())),
            prewritten: true,
        };
        let f = sim.add_file(&spec)?;
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
    let mut r = Measured::on(dev_name).with_mbps(m.mbps_between(0, duration));
    let mut worst: f64 = 0.0;
    for (i, (&b, &w)) in bytes.iter().zip(weights).enumerate() {
        let share = 100.0 * b as f64 / total as f64;
        let want = 100.0 * f64::from(w) / f64::from(wsum);
        worst = worst.max((share / want - 1.0).abs() * 100.0);
        r.extra.insert(format!("share_{i}_pct"), share);
        r.extra.insert(format!("weight_share_{i}_pct"), want);
    }
    r.extra.insert("max_share_error_pct".into(), worst);
    Ok(RunResult::new(exp, r))
}

/// Size of each thread's file in seed 003's runs (`iozone -s24g`), bytes: the distance between the threads' files.
pub const IOZONE_SEED_FILE_BYTES: u64 = 24 << 30;

/// iozone `-s <file_size> -r 512k -i 0 -i 1 -t <threads>`: each thread writes, re-writes, reads and re-reads its own
/// file, the threads starting each phase together once all have finished the previous one (iozone's throughput
/// mode). Reports per-phase throughput in KB/s (iozone's "children see throughput": the sum of each thread's rate)
/// as `extra` keys `write_kbps`, `rewrite_kbps`, `read_kbps`, `reread_kbps`. Thread i's file starts
/// i x [`IOZONE_SEED_FILE_BYTES`] into the device when it fits there.
///
/// With `time_policy` the wall-clock CPU time spent inside the policy is measured and reported per request in
/// [`RunResult::sched_cpu_ns_per_request`] (iozone's `-+u` CPU cost column); that figure is not reproducible.
pub fn run_iozone(exp: &Experiment, device: &str, threads: u32, file_size: u64) -> Result<RunResult, ScenarioError> {
    run_iozone_on_host(exp, device, threads, file_size, &|_| {})
}

/// [`run_iozone`] with `tweak` applied to the simulated host's settings first (sensitivity studies of host
/// parameters, e.g. the 2.6.18 writeback chunk: `crates/suite/examples/iozone_host.rs`).
pub fn run_iozone_on_host(
    exp: &Experiment,
    device: &str,
    threads: u32,
    file_size: u64,
    tweak: &dyn Fn(&mut HostConfig),
) -> Result<RunResult, ScenarioError> {
    let time_policy = exp.settings.time_policy;
    let cfg = crate::scenario::device_config(exp, device)?;
    let (dev, policy, wbt_target) = crate::scenario::sim_stack(exp, &cfg)?;
    let mut host = HostConfig {
        time_policy,
        wbt_target,
        ..crate::scenario::host_config(exp, &cfg)
    };
    tweak(&mut host);
    let (mut sim, dev_name) = (
        Simulation::new(dev, policy, host, exp.settings.seed),
        cfg.name().to_string(),
    );
    let (files, procs) = iozone_threads(threads, 0, file_size, 512 << 10);
    let capacity = sim.device_info().capacity_sectors as f64 * 512.0;
    for (i, f) in files.iter().enumerate() {
        // The seed's threads each wrote a 24 GiB file, one after the other on the file system: concurrent
        // threads worked 24 GiB apart. The simulated files are smaller, so they are placed that far apart (where
        // the device holds it), keeping the seed's distance between the threads' positions.
        let mut f = f.clone();
        let at = (i as u64 * IOZONE_SEED_FILE_BYTES) as f64 / capacity;
        if i > 0 && at + (file_size as f64) / capacity < 1.0 {
            f.placement = Placement::At(at);
        }
        sim.add_file(&f)?;
    }
    // iozone's throughput mode runs one test at a time: every thread starts the phase together and the next phase
    // starts once the last thread has finished (a barrier), so each phase's threads compete only with each other.
    // Generous limit: every phase moves the whole file, at no less than 1 MB/s.
    let limit = 4 * file_size * u64::from(threads) / 1_000_000 * SEC + 60 * SEC;
    let mut rates: BTreeMap<String, f64> = BTreeMap::new();
    let mut start = 0;
    for phase in IozonePhase::WRITE_READ {
        let pids: Vec<_> = procs
            .iter()
            .map(|p| {
                let mut cfg = p.config().clone();
                cfg.phases = vec![phase];
                sim.spawn(start, Box::new(Iozone::new(cfg)))
            })
            .collect();
        for &p in &pids {
            if let Some(t) = sim.run_until_exit(p, limit) {
                start = start.max(t);
            }
        }
        for &p in &pids {
            if let Some(rep) = sim.report(p) {
                for ph in &rep.phases {
                    *rates.entry(format!("{}_kbps", ph.name)).or_default() += ph.bytes_per_s() / 1024.0;
                }
            }
        }
        start = start.max(sim.now());
    }
    let end = sim.now().max(1);
    let mut r = Measured::on(dev_name).with_mbps(sim.metrics().mbps_between(0, end));
    r.extra = rates;
    let inserted = sim.inserted_requests();
    r.sched_cpu_ns_per_request =
        (time_policy && inserted > 0).then(|| sim.metrics().sched_cpu_ns as f64 / inserted as f64);
    Ok(RunResult::new(exp, r))
}

/// Background warm-up before the video starts, ns: as for start-up, long enough for the background flows (and BFQ's
/// weight raising of them) to reach steady state.
pub const VIDEO_WARMUP: Time = STARTUP_WARMUP;

/// Slack after the clip's last frame before a video run is cut, ns (every frame is decided by its deadline, so a run
/// never needs it; it only bounds a broken one).
const VIDEO_SLACK: Time = 60 * SEC;

fn add_file(sim: &mut Simulation, spec: &FileSpec) -> Result<bfq_workload::FileId, ScenarioError> {
    Ok(sim.add_file(spec)?)
}

/// S's video test (docs/BENCHMARKS.md, video): while `workload` runs in the background (S 3.6 settings: writer
/// cap on rotational devices, `sync` every 2 s), a player plays `exp.settings.duration` ns (default: S's clip) of a video
/// file with cold caches, and every 4 s a
/// noise command reads 15 MiB of another file, bypassing the cache, with a `sync` in parallel. The player starts
/// after [`VIDEO_WARMUP`].
///
/// Reports `extra` keys `drop_rate_pct` (frames not shown by their deadline, percent of the clip's frames, what
/// mplayer `-framedrop` prints), `frames` (frames in the clip) and `dropped_frames`; the throughput is the
/// device's aggregate during playback.
pub fn run_video(exp: &Experiment, device: &str, workload: &str) -> Result<RunResult, ScenarioError> {
    let (mut sim, dev_name) = simulation(exp, device, false)?;
    let (clip, seed) = (exp.settings.duration.unwrap_or(S_CLIP_DURATION_NS), exp.settings.seed);
    let rotational = sim.device_info().rotational;
    let wl = workloads::build(workload, &WorkloadSettings::s36(), rotational, 0, seed).map_err(|error| {
        ScenarioError::Workload {
            workload: workload.to_string(),
            error,
        }
    })?;
    for f in &wl.files {
        add_file(&mut sim, f)?;
    }
    for p in wl.processes {
        sim.spawn(0, p);
    }
    // The clip: S's trailer from its seek position, for `clip` ns; the file holds the seek offset, the clip and
    // some slack.
    let mut cfg = VideoConfig::s_default(0, 0);
    let fps = u64::from(cfg.fps.max(1));
    cfg.frames = ((u128::from(clip) * u128::from(fps)) / u128::from(SEC)).max(1) as u64;
    let size = cfg.start_offset + (cfg.frames + fps) * cfg.frame_bytes();
    cfg.file = add_file(
        &mut sim,
        &FileSpec {
            name: "video".into(),
            size,
            placement: Placement::Contiguous,
            prewritten: true,
        },
    )?;
    cfg.file_size = size;
    let frames = cfg.frames;
    let noise_size = S_NOISE_BS_BYTES * S_NOISE_COUNT;
    let noise_file = add_file(
        &mut sim,
        &FileSpec {
            name: "smallfile".into(),
            size: noise_size,
            placement: Placement::Contiguous,
            prewritten: true,
        },
    )?;
    let start = VIDEO_WARMUP;
    // S drops the caches before each iteration, so the clip is read from the device.
    sim.drop_caches_at(start.saturating_sub(DROP_LEAD));
    sim.spawn(
        start,
        Box::new(Noise::new(NoiseConfig::s_default(noise_file, noise_size))),
    );
    let pid = sim.spawn(start, Box::new(VideoPlayer::new(cfg)));
    let limit = start + clip + VIDEO_SLACK;
    let end = sim.run_until_exit(pid, limit).unwrap_or(limit).max(start + 1);
    let (decided, dropped) = sim.report(pid).and_then(|r| r.frames).unwrap_or((0, 0));
    // Frames never decided (only if the run was cut) count as dropped.
    let shown = decided.saturating_sub(dropped);
    let lost = frames.saturating_sub(shown);
    let mut r = Measured::on(dev_name).with_mbps(sim.metrics().mbps_between(start, end));
    r.extra
        .insert("drop_rate_pct".into(), 100.0 * lost as f64 / frames as f64);
    r.extra.insert("frames".into(), frames as f64);
    r.extra.insert("dropped_frames".into(), lost as f64);
    Ok(RunResult::new(exp, r))
}

/// Bytes of the area interleaved readers share, at most (a quarter of a smaller device).
const INTERLEAVED_AREA_BYTES: u64 = 4 << 30;

/// S's interleaved I/O test (docs/BENCHMARKS.md, interleaved): `readers` processes read one area at the start of the device (the
/// fast outer zone of a disk) with direct 16 KiB reads, reader *i* taking blocks *i*, *i*+N, *i*+2N, …, so that
/// together they read it sequentially. After S's 5 s warm-up, the aggregate throughput is measured for
/// `exp.settings.duration` ns (default: S's measurement time).
///
/// Reports the aggregate throughput and, as `extra`, `mean_request_kib` (bytes moved per device request over the
/// whole run: above 16 KiB when a policy merged the readers' adjacent blocks into larger requests) and
/// `slowest_reader_share_pct` (the least-served reader's share of the bytes read, percent; 100/N when all are equal).
pub fn run_interleaved(exp: &Experiment, device: &str, readers: u32) -> Result<RunResult, ScenarioError> {
    let (mut sim, dev_name) = simulation(exp, device, false)?;
    let measure = exp.settings.duration.unwrap_or(S_INTERLEAVED_MEASURE_NS);
    let readers = readers.max(1);
    let capacity = sim.device_info().capacity_sectors * 512;
    let area = INTERLEAVED_AREA_BYTES.min(capacity / 4);
    let file = add_file(
        &mut sim,
        &FileSpec {
            name: "area".into(),
            size: area,
            placement: Placement::At(0.0),
            prewritten: true,
        },
    )?;
    let pids: Vec<_> = InterleavedReader::group(file, area, readers)
        .into_iter()
        .map(|p| sim.spawn(0, Box::new(p)))
        .collect();
    let start = S_INTERLEAVED_WARMUP_NS;
    let end = start + measure.max(1);
    sim.run_until(end);
    let m = sim.metrics();
    let mut r = Measured::on(dev_name).with_mbps(m.mbps_between(start, end));
    let [all_rd, all_wr] = m.bytes_between(0, end);
    let kib = (all_rd + all_wr) as f64 / 1024.0 / m.device_requests.max(1) as f64;
    r.extra.insert("mean_request_kib".into(), kib);
    let per: Vec<u64> = pids
        .iter()
        .map(|&p| sim.flow_of(p).and_then(|f| m.per_flow.get(&f)).map_or(0, |b| b.read))
        .collect();
    let total = per.iter().sum::<u64>().max(1);
    let slowest = per.iter().copied().min().unwrap_or(0);
    r.extra
        .insert("slowest_reader_share_pct".into(), 100.0 * slowest as f64 / total as f64);
    Ok(RunResult::new(exp, r))
}
