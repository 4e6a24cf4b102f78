//! Trace replay (`bfq replay`): a block trace, read by [`bfq_workload::trace`], replayed as one process per flow
//! on any target, and measured per flow and in total (docs/TRACES.md).
//!
//! - On `sim:DEV` the replay area is the device's whole capacity (or `area_bytes`), one file placed at sector 0,
//!   so a trace offset that fits is the same device sector; the simulator issues each request at its exact
//!   scheduled time (virtual time), so the lateness is 0.
//! - On `engine:DIR` and `kernel:DIR` the area is one file in `DIR/bfq-files/` (written in full once, reused),
//!   of `area_bytes` or, by default, the trace's footprint capped at half the file system's free space; the
//!   device checks, scheduler switch and restore are the real targets' ([`crate::real`]). The lateness (issue
//!   time minus scheduled time) is measured and reported.
//!
//! Reported per flow (rows named after the flows) and in total (row `all`): throughput (bytes completed over
//! the replay's span, from the first issue to the last completion, so that the flows' figures add up to the
//! total), latency percentiles p50/p90/p99/p99.9 and the mean (issue to completion, from an HDR histogram with 3
//! significant digits), the slowdown against the trace's recorded response times where it has them (mean replay
//! latency over mean recorded response time, on the requests that have one), and for open-loop replays the issue
//! lateness (median and maximum).

use crate::experiment::Experiment;
use crate::real::RealError;
use crate::result::{Measured, RunResult};
use crate::scenario::ScenarioError;
use crate::target::Target;
use bfq_sched::{Time, SEC};
use bfq_workload::trace::replay::{self, Pacing, ReplayOptions, ReplayPlan};
use bfq_workload::trace::Trace;
use bfq_workload::{FileSpec, Placement, Process, ProcessReport};
use hdrhistogram::Histogram;
use std::sync::Arc;

/// Default time a replay may run past its last scheduled request before it is stopped, ns.
pub const DEFAULT_TIMEOUT: Time = 60 * SEC;
/// Name of the replay file (in `DIR/bfq-files/` on the real targets).
pub const AREA_FILE: &str = "replay-area";
/// Start of the replay on the real targets, ns after the runner starts: every flow's thread is up by then.
pub const REAL_START: Time = SEC / 5;
/// Smallest default replay area on a real target, bytes.
pub const MIN_REAL_AREA: u64 = 1 << 20;
/// Largest latency the histograms hold, ns (one hour); longer ones are counted at this value.
const MAX_LATENCY_NS: u64 = 3600 * SEC;
/// Row label of the totals.
pub const TOTAL_ROW: &str = "all";

/// A trace to replay and how: the [`crate::Work`] of a replay experiment.
#[derive(Clone, PartialEq)]
pub struct ReplayWork {
    /// The trace's label in reports (its file name).
    pub label: String,
    /// The trace.
    pub trace: Arc<Trace>,
    /// Pacing, speed, mapping, flows.
    pub options: ReplayOptions,
    /// Replay area, bytes; `None` for the target's default (module doc).
    pub area_bytes: Option<u64>,
    /// How long the replay may run past its last scheduled request, ns.
    pub timeout: Time,
}

impl std::fmt::Debug for ReplayWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayWork")
            .field("label", &self.label)
            .field("requests", &self.trace.requests.len())
            .field("options", &self.options)
            .field("area_bytes", &self.area_bytes)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ReplayWork {
    /// Replays `trace` labelled `label` with `options`, the target's default area and [`DEFAULT_TIMEOUT`].
    pub fn new(label: impl Into<String>, trace: Trace, options: ReplayOptions) -> ReplayWork {
        ReplayWork {
            label: label.into(),
            trace: Arc::new(trace),
            options,
            area_bytes: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Issue lateness of an open-loop replay: issue time minus scheduled time.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Lateness {
    /// Median, ns.
    pub median_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// Largest, ns.
    pub max_ns: u64,
    /// Requests measured.
    pub requests: u64,
}

/// What one replay measured.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayOutcome {
    /// The total (row `all`) first, then one result per flow; `app` is the trace's label, `workload` the row.
    pub results: Vec<RunResult>,
    /// How the trace was replayed: pacing, mapping, flows (lines for the report's `replay.txt` and the terminal).
    pub notes: Vec<String>,
    /// Issue lateness, for open-loop replays.
    pub lateness: Option<Lateness>,
    /// The issue time of every request minus its scheduled time, ns, in trace order (open loop; empty otherwise).
    pub lateness_ns: Vec<i64>,
}

impl ReplayOutcome {
    /// The total's result.
    pub fn total(&self) -> &RunResult {
        &self.results[0]
    }
}

/// Runs a replay experiment on its target.
pub fn run(exp: &Experiment) -> Result<ReplayOutcome, ScenarioError> {
    let crate::experiment::Work::Replay(work) = &exp.work else {
        return Err(ScenarioError::Input(format!(
            "the {} benchmark is not a trace replay",
            exp.work.benchmark()
        )));
    };
    match &exp.target {
        Target::Sim(device) => run_sim(exp, work, device),
        Target::Engine(dir) => Ok(run_real::<crate::real::EngineBackend>(exp, work, dir)?),
        Target::Kernel(dir) => {
            if crate::target::kernel_scheduler(&exp.scheduler).is_none() {
                return Err(ScenarioError::Input(format!(
                    "scheduler '{}' does not exist in the kernel: use none (noop), mq-deadline, kyber or bfq",
                    exp.scheduler
                )));
            }
            Ok(run_real::<crate::real::KernelBackend>(exp, work, dir)?)
        }
    }
}

fn plan_for(work: &ReplayWork, area: u64) -> Result<ReplayPlan, ScenarioError> {
    replay::plan(&work.trace, &work.options, area).map_err(|e| ScenarioError::Input(e.to_string()))
}

fn run_sim(exp: &Experiment, work: &ReplayWork, device: &str) -> Result<ReplayOutcome, ScenarioError> {
    let dev_cfg = bfq_sim::device::resolve(device)?;
    let (dev, policy, wbt_target) = crate::scenario::sim_stack(exp, &dev_cfg)?;
    let info = dev.info();
    let capacity = info.capacity_sectors.saturating_mul(512);
    let area = match work.area_bytes {
        Some(a) if a > capacity => {
            return Err(ScenarioError::Input(format!(
                "replay area of {a} bytes is larger than the {capacity} bytes of sim:{device}"
            )))
        }
        Some(a) => a,
        None => capacity,
    };
    let plan = plan_for(work, area)?;
    let host = bfq_sim::HostConfig {
        time_policy: exp.settings.time_policy,
        wbt_target,
        ..bfq_sim::HostConfig::default()
    };
    let mut sim = bfq_sim::Simulation::new(dev, policy, host, exp.settings.seed);
    let file = sim.add_file(&FileSpec {
        name: AREA_FILE.into(),
        size: plan.area_bytes,
        placement: Placement::At(0.0),
        prewritten: true,
    })?;
    let pids: Vec<_> = replay::processes(&plan, file, 0)
        .into_iter()
        .map(|p| sim.spawn(0, Box::new(p) as Box<dyn Process>))
        .collect();
    let deadline = plan.span().saturating_add(work.timeout);
    for &pid in &pids {
        sim.run_until_exit(pid, deadline);
    }
    let reports: Vec<ProcessReport> = pids.iter().map(|&p| sim.report(p).unwrap_or_default()).collect();
    let mut out = measure(exp, work, &plan, &reports, 0, dev_cfg.name());
    out.notes.push(format!(
        "simulated device {} ({} bytes); the replay file starts at sector 0",
        dev_cfg.name(),
        capacity
    ));
    Ok(out)
}

/// The default replay area on a real target: the trace's footprint rounded up to MiB, at most half of the free
/// space (counting a replay file already there as free), at least [`MIN_REAL_AREA`].
pub fn default_real_area(extent: u64, free: u64) -> u64 {
    let mib = 1u64 << 20;
    let want = extent.div_ceil(mib).saturating_mul(mib);
    want.min(free / 2 / mib * mib).max(MIN_REAL_AREA)
}

fn run_real<B: crate::real::TargetBackend>(
    exp: &Experiment,
    work: &ReplayWork,
    dir: &std::path::Path,
) -> Result<ReplayOutcome, RealError> {
    use crate::real::{files, kernel::check_device, sched::switch_scheduler, sys, Runner};
    sys::require_root(B::NEEDS_ROOT)?;
    if !dir.is_dir() {
        return Err(RealError::Invalid(format!(
            "{} is not a directory: give the mount point made by `bfq loopdev create`",
            dir.display()
        )));
    }
    let dev = sys::BlockDev::of_dir(dir)?;
    check_device(&dev, dir, exp.settings.real.allow_device)?;
    let area = match work.area_bytes {
        Some(a) => a,
        None => {
            let existing = std::fs::metadata(dir.join(files::FILES_SUBDIR).join(AREA_FILE)).map_or(0, |m| m.len());
            default_real_area(work.trace.extent_bytes(), sys::free_bytes(dir)? + existing)
        }
    };
    let plan = replay::plan(&work.trace, &work.options, area).map_err(|e| RealError::Invalid(e.to_string()))?;
    let spec = FileSpec {
        name: AREA_FILE.into(),
        size: plan.area_bytes,
        placement: Placement::Contiguous,
        prewritten: true,
    };
    let files = files::prepare_files(dir, &[spec])?;
    let backend = B::open_for(exp, &files)?;
    let (sched, tunables) = B::device_scheduler(exp);
    let guard = switch_scheduler(&dev, sched, tunables)?;
    let lock = sys::MemoryLock::lock();
    sys::sync_all();
    let run = (|| {
        let mut runner = Runner::new(backend);
        let mut ids = Vec::new();
        for p in replay::processes(&plan, 0, REAL_START) {
            ids.push(runner.spawn(0, Box::new(p))?);
        }
        let deadline = REAL_START + plan.span().saturating_add(work.timeout);
        for &id in &ids {
            if runner.wait_exit(id, deadline).is_none() {
                runner.cancel(id);
            }
        }
        Ok::<_, RealError>(runner.finish())
    })();
    drop(lock);
    let restored = guard.restore();
    let outcomes = run?;
    restored?;
    if let Some(o) = outcomes.iter().find(|o| o.error.is_some()) {
        return Err(RealError::Process {
            name: o.name.clone(),
            why: o.error.clone().unwrap_or_default(),
        });
    }
    let reports: Vec<ProcessReport> = outcomes.into_iter().map(|o| o.report).collect();
    let mut out = measure(exp, work, &plan, &reports, REAL_START, dev.name.clone());
    out.notes.push(format!(
        "device {} under {}; the replay file {} ({} bytes; {} MB written to prepare it)",
        dev.name,
        dir.display(),
        files.paths[0].display(),
        plan.area_bytes,
        files.written_bytes / 1_000_000
    ));
    Ok(out)
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("valid histogram bounds")
}

/// Figures of one flow or of the total.
#[derive(Default)]
struct Acc {
    lat: Option<Histogram<u64>>,
    lat_sum: u128,
    resp_sum: u128,
    resp_lat_sum: u128,
    resp_n: u64,
    requests: u64,
    done: u64,
    errors: u64,
    bytes: [u64; 2],
}

impl Acc {
    fn add(&mut self, r: &replay::ReplayRequest, t: &bfq_workload::RequestTiming) {
        self.requests += 1;
        let Some(done) = t.completed else { return };
        self.done += 1;
        if !t.ok {
            self.errors += 1;
            return;
        }
        let lat = done.saturating_sub(t.issued);
        self.lat
            .get_or_insert_with(histogram)
            .saturating_record(lat.clamp(1, MAX_LATENCY_NS));
        self.lat_sum += u128::from(lat);
        self.bytes[r.dir.index()] += r.len;
        if let Some(resp) = r.response_ns {
            self.resp_sum += u128::from(resp);
            self.resp_lat_sum += u128::from(lat);
            self.resp_n += 1;
        }
    }

    fn measured(&self, device: &str, span_ns: u64) -> Measured {
        let secs = span_ns.max(1) as f64 / 1e9;
        let mut m =
            Measured::on(device).with_mbps([self.bytes[0] as f64 / secs / 1e6, self.bytes[1] as f64 / secs / 1e6]);
        let x = &mut m.extra;
        x.insert("requests".into(), self.requests as f64);
        if let Some(h) = &self.lat {
            for (key, q) in [
                ("latency_p50_ms", 0.5),
                ("latency_p90_ms", 0.9),
                ("latency_p99_ms", 0.99),
                ("latency_p999_ms", 0.999),
            ] {
                x.insert(key.into(), h.value_at_quantile(q) as f64 / 1e6);
            }
            x.insert("latency_mean_ms".into(), self.lat_sum as f64 / h.len() as f64 / 1e6);
        }
        if self.resp_n > 0 && self.resp_sum > 0 {
            x.insert("slowdown".into(), self.resp_lat_sum as f64 / self.resp_sum as f64);
        }
        if self.errors > 0 {
            x.insert("errors".into(), self.errors as f64);
        }
        if self.done < self.requests {
            x.insert("unfinished".into(), (self.requests - self.done) as f64);
            m.timed_out = true;
        }
        m
    }
}

/// Turns the flows' reports into results: the total first, then one per flow, all labelled with the trace.
fn measure(
    exp: &Experiment,
    work: &ReplayWork,
    plan: &ReplayPlan,
    reports: &[ProcessReport],
    start_at: Time,
    device: impl Into<String>,
) -> ReplayOutcome {
    let device = device.into();
    let open = plan.options.pacing == Pacing::Open;
    let mut total = Acc::default();
    let mut flows: Vec<Acc> = Vec::new();
    let (mut first, mut last) = (u64::MAX, 0u64);
    let mut late = histogram();
    let mut lateness_ns = vec![0i64; work.trace.requests.len()];
    let mut late_max = 0u64;
    for (f, rep) in plan.flows.iter().zip(reports) {
        let mut acc = Acc::default();
        for (r, t) in f.requests.iter().zip(&rep.requests) {
            acc.add(r, t);
            total.add(r, t);
            if t.completed.is_some() {
                first = first.min(t.issued);
                last = last.max(t.completed.unwrap_or(0));
                if open {
                    let sched = start_at + r.at;
                    let d = t.issued as i64 - sched as i64;
                    lateness_ns[r.trace_index as usize] = d;
                    let l = d.max(0) as u64;
                    late_max = late_max.max(l);
                    late.saturating_record(l.min(MAX_LATENCY_NS));
                }
            }
        }
        flows.push(acc);
    }
    let span = last.saturating_sub(if first == u64::MAX { last } else { first });
    let lateness = (open && !late.is_empty()).then(|| Lateness {
        median_ns: if late_max == 0 { 0 } else { late.value_at_quantile(0.5) },
        p99_ns: if late_max == 0 { 0 } else { late.value_at_quantile(0.99) },
        max_ns: late_max,
        requests: late.len(),
    });
    let label = |mut r: RunResult, row: &str| {
        r.workload = row.to_string();
        r.app = Some(work.label.clone());
        r
    };
    let mut m = total.measured(&device, span);
    if let Some(l) = &lateness {
        m.extra.insert("lateness_median_ms".into(), l.median_ns as f64 / 1e6);
        m.extra.insert("lateness_max_ms".into(), l.max_ns as f64 / 1e6);
    }
    let mut results = vec![label(RunResult::new(exp, m), TOTAL_ROW)];
    for (f, acc) in plan.flows.iter().zip(&flows) {
        results.push(label(RunResult::new(exp, acc.measured(&device, span)), &f.name));
    }
    let notes = vec![
        format!(
            "trace {} ({} format): {} requests over {:.3} s, {} other lines or records skipped{}",
            work.label,
            plan.format,
            work.trace.requests.len(),
            work.trace.span_ns() as f64 / 1e9,
            work.trace.skipped,
            if work.trace.truncated {
                ", cut at --max-requests"
            } else {
                ""
            }
        ),
        format!(
            "pacing {} loop at speed {}; flows by {} ({} flows{})",
            plan.options.pacing.name(),
            plan.options.speed,
            plan.flow_key.name(),
            plan.flows.len(),
            if plan.merged_flows > 0 {
                format!(", {} small ones merged into `other`", plan.merged_flows)
            } else {
                String::new()
            }
        ),
        format!("offsets: {}", plan.mapping_text()),
    ];
    ReplayOutcome {
        results,
        notes,
        lateness,
        lateness_ns: if open { lateness_ns } else { Vec::new() },
    }
}

/// Largest trace file read, bytes: a trace is read whole into memory.
pub const MAX_TRACE_FILE_BYTES: u64 = 2 << 30;

/// The files of a trace at `path`: the file itself, or for blktrace output (`DEV.blktrace.N`, or the base name
/// `DEV` when `DEV.blktrace.0` exists) every CPU's file of `DEV`, in CPU order. Returns the trace's label (its file
/// name, or `DEV` for blktrace output) and the paths.
pub fn trace_files(path: &std::path::Path) -> Result<(String, Vec<std::path::PathBuf>), ScenarioError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = match name.rsplit_once(".blktrace.") {
        Some((base, cpu)) if cpu.parse::<u32>().is_ok() && path.is_file() => Some(base.to_string()),
        _ if !path.exists() && path.with_file_name(format!("{name}.blktrace.0")).is_file() => Some(name.clone()),
        _ => None,
    };
    let Some(base) = base else {
        if !path.is_file() {
            return Err(ScenarioError::Input(format!(
                "trace {} is not a readable file (blktrace output: give DEV.blktrace.0 or the base name DEV)",
                path.display()
            )));
        }
        return Ok((name, vec![path.to_path_buf()]));
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let mut cpus: Vec<(u32, std::path::PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| ScenarioError::Input(format!("cannot list {}: {e}", dir.display())))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let cpu = n.strip_prefix(&format!("{base}.blktrace."))?.parse::<u32>().ok()?;
            Some((cpu, e.path()))
        })
        .collect();
    cpus.sort();
    Ok((base, cpus.into_iter().map(|(_, p)| p).collect()))
}

/// Reads the trace at `path` (see [`trace_files`]) in `format`, or the format detected from its first bytes.
/// Errors name the file and say where it is wrong (`FILE: line N: ...`, `FILE: record N at byte B: ...`).
pub fn load_trace(
    path: &std::path::Path,
    format: Option<bfq_workload::trace::TraceFormat>,
    opts: &bfq_workload::trace::ParseOptions,
) -> Result<(String, Trace), ScenarioError> {
    use bfq_workload::trace::{self as tr, TraceFormat};
    let (label, paths) = trace_files(path)?;
    let mut data = Vec::with_capacity(paths.len());
    for p in &paths {
        let len = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        if len > MAX_TRACE_FILE_BYTES {
            return Err(ScenarioError::Input(format!(
                "trace {} is {len} bytes: at most {MAX_TRACE_FILE_BYTES} bytes are read; cut it (e.g. with head)",
                p.display()
            )));
        }
        let bytes =
            std::fs::read(p).map_err(|e| ScenarioError::Input(format!("cannot read trace {}: {e}", p.display())))?;
        data.push((p.display().to_string(), bytes));
    }
    let format = match format {
        Some(f) => f,
        None => TraceFormat::detect(&data[0].1).ok_or_else(|| {
            ScenarioError::Input(format!(
                "cannot tell the format of trace {}: give --format blkparse, blktrace, msr or fiu",
                paths[0].display()
            ))
        })?,
    };
    let trace = match format {
        TraceFormat::Blktrace => {
            let files: Vec<(&str, &[u8])> = data.iter().map(|(n, d)| (n.as_str(), d.as_slice())).collect();
            tr::blktrace::parse_files(&files, opts)
        }
        f => {
            if data.len() > 1 {
                return Err(ScenarioError::Input(format!(
                    "trace {} is blktrace output: give --format blktrace (or auto), not {f}",
                    path.display()
                )));
            }
            tr::parse(f, &data[0].1, opts).map_err(|e| e.in_file(data[0].0.clone()))
        }
    };
    let trace = trace.map_err(|e| ScenarioError::Input(e.to_string()))?;
    Ok((label, trace))
}

/// Runs replay experiments on `threads` worker threads (real targets: give 1), calling `progress(done, total)`
/// after each; outcomes keep the experiments' order. Stops at the first failure and returns it.
pub fn run_all(
    exps: &[Experiment],
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<ReplayOutcome>, ScenarioError> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let slots: std::sync::Mutex<Vec<Option<Result<ReplayOutcome, ScenarioError>>>> =
        std::sync::Mutex::new((0..exps.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..crate::limits::worker_threads(threads, exps.len()) {
            s.spawn(|| loop {
                if failed.load(Ordering::Relaxed) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(exp) = exps.get(i) else { break };
                let r = run(exp);
                if r.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                if let Ok(mut v) = slots.lock() {
                    v[i] = Some(r);
                }
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, exps.len());
            });
        }
    });
    let mut out = Vec::with_capacity(exps.len());
    for slot in slots.into_inner().unwrap_or_default() {
        match slot {
            Some(Ok(o)) => out.push(o),
            Some(Err(e)) => return Err(e),
            None => {}
        }
    }
    if out.len() != exps.len() {
        return Err(ScenarioError::Input("a replay did not run".into()));
    }
    Ok(out)
}

/// The text of `replay.txt`: how the trace was replayed, and per target and scheduler the lateness of an
/// open-loop replay (deterministic for the simulator, measured on the real targets).
pub fn replay_text(outcomes: &[ReplayOutcome]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if let Some(first) = outcomes.first() {
        for n in &first.notes[..first.notes.len().saturating_sub(1)] {
            let _ = writeln!(out, "{n}");
        }
    }
    // The target's own note (device, replay file) once per target: from its first run.
    let mut seen: Vec<&str> = Vec::new();
    for o in outcomes {
        let t = o.total();
        if seen.contains(&t.target.as_str()) {
            continue;
        }
        seen.push(&t.target);
        if let Some(n) = o.notes.last() {
            let _ = writeln!(out, "{}: {n}", t.target);
        }
    }
    for o in outcomes {
        let t = o.total();
        let label = crate::report::scheduler_label(t);
        match &o.lateness {
            Some(l) => {
                let _ = writeln!(
                    out,
                    "{} {label}: issue lateness median {:.3} ms, p99 {:.3} ms, max {:.3} ms over {} requests",
                    t.target,
                    l.median_ns as f64 / 1e6,
                    l.p99_ns as f64 / 1e6,
                    l.max_ns as f64 / 1e6,
                    l.requests
                );
            }
            None => {
                let _ = writeln!(out, "{} {label}: closed loop (no schedule to be late for)", t.target);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::Work;
    use bfq_workload::trace::{fiu, ParseOptions};

    fn trace() -> Trace {
        let mut text = String::new();
        for i in 0..200u64 {
            // Two processes: a sequential reader and a random-ish writer, 1 ms apart.
            text.push_str(&fiu::line(i * 1_000_000, 10, "reader", i * 8, 8, false));
            text.push_str(&fiu::line(
                i * 1_000_000 + 500_000,
                20,
                "writer",
                (i * 7919 % 1000) * 64,
                8,
                true,
            ));
        }
        fiu::parse(&text, &ParseOptions::default()).expect("parses")
    }

    fn exp(sched: &str, options: ReplayOptions) -> Experiment {
        let work = ReplayWork::new("t.fiu", trace(), options);
        Experiment::sim("nvme", sched, Work::Replay(Arc::new(work)))
    }

    #[test]
    fn the_simulator_issues_every_request_at_its_recorded_time() {
        let o = run(&exp("bfq", ReplayOptions::default())).expect("runs");
        let l = o.lateness.expect("open loop");
        assert_eq!((l.median_ns, l.max_ns, l.requests), (0, 0, 400));
        assert!(o.lateness_ns.iter().all(|&d| d == 0));
        let names: Vec<&str> = o.results.iter().map(|r| r.workload.as_str()).collect();
        assert_eq!(names, ["all", "reader-10", "writer-20"]);
        let t = o.total();
        assert_eq!(t.extra["requests"], 400.0);
        assert!(!t.timed_out);
        // The flows' throughputs add up to the total (same span).
        let sum: f64 = o.results[1..].iter().map(|r| r.throughput_mbps).sum();
        assert!((sum - t.throughput_mbps).abs() < 1e-9 * t.throughput_mbps.max(1.0));
        // Percentiles are ordered.
        let p = |k: &str| t.extra[k];
        assert!(p("latency_p50_ms") <= p("latency_p90_ms") && p("latency_p90_ms") <= p("latency_p99_ms"));
        assert!(p("latency_p99_ms") <= p("latency_p999_ms"));
        assert!(!t.extra.contains_key("slowdown"), "FIU has no response times");
    }

    #[test]
    fn the_real_default_area_is_the_footprint_within_half_the_free_space() {
        let mib = 1 << 20;
        assert_eq!(default_real_area(537_591_808, 10 << 30), 513 * mib, "rounded up to MiB");
        assert_eq!(
            default_real_area(537_591_808, 1 << 30),
            512 * mib,
            "half the free space"
        );
        assert_eq!(default_real_area(100, 0), MIN_REAL_AREA);
    }

    #[test]
    fn blktrace_output_is_found_by_any_cpu_file_or_its_base_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        for cpu in [1, 0, 10] {
            std::fs::write(dir.path().join(format!("sda.blktrace.{cpu}")), b"").expect("writes");
        }
        std::fs::write(dir.path().join("sdb.blktrace.0"), b"").expect("writes");
        let names = |p: &std::path::Path| {
            let (label, files) = trace_files(p).expect("found");
            let names: Vec<String> = files
                .iter()
                .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
                .collect();
            (label, names)
        };
        let want = (
            "sda".to_string(),
            vec![
                "sda.blktrace.0".into(),
                "sda.blktrace.1".into(),
                "sda.blktrace.10".into(),
            ],
        );
        assert_eq!(names(&dir.path().join("sda")), want);
        assert_eq!(names(&dir.path().join("sda.blktrace.1")), want);
        std::fs::write(dir.path().join("t.csv"), b"").expect("writes");
        assert_eq!(
            names(&dir.path().join("t.csv")),
            ("t.csv".to_string(), vec!["t.csv".to_string()])
        );
        let e = trace_files(&dir.path().join("nothing")).expect_err("missing");
        assert!(e.to_string().contains("is not a readable file"), "{e}");
    }

    #[test]
    fn closed_loop_never_issues_earlier_than_open_loop() {
        let open = run(&exp("noop", ReplayOptions::default())).expect("runs");
        let closed = run(&exp(
            "noop",
            ReplayOptions {
                pacing: Pacing::Closed,
                ..ReplayOptions::default()
            },
        ))
        .expect("runs");
        assert!(closed.lateness.is_none());
        // Closed loop adds each request's service time to the recorded gaps: the replay cannot end sooner, and the
        // same bytes over a longer span is no more throughput.
        assert!(closed.total().throughput_mbps <= open.total().throughput_mbps * (1.0 + 1e-9));
    }
}
