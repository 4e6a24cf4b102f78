//! One experiment on the simulator: a device, a scheduler, a background workload and optionally an application
//! starting up, following the S suite's timeline (`suite.md` §1.2–1.4).

use crate::result::RunResult;
use bfq_sched::{Time, SEC};
use bfq_sim::{HostConfig, Simulation};
use bfq_workload::profile::{self, Profile};
use bfq_workload::startup::Startup;
use bfq_workload::workloads::{self, WorkloadSettings};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Which era of the S suite's settings to use (`suite.md` §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// SYSTOR'12 paper: 5000 MiB sequential files, one shared 50000 MiB random file, no writer cap, no periodic
    /// sync.
    Paper,
    /// S 3.6: 500 MiB files, 4000 KB/s writer cap on rotational devices, a `sync` every 2 s when writers run.
    Current,
}

impl Era {
    /// Parses `paper` or `current`.
    pub fn parse(s: &str) -> Result<Era, ScenarioError> {
        match s {
            "paper" => Ok(Era::Paper),
            "current" => Ok(Era::Current),
            _ => Err(ScenarioError::Invalid(format!(
                "unknown profile '{s}': use paper or current"
            ))),
        }
    }
    /// Name as accepted by [`Era::parse`].
    pub fn name(self) -> &'static str {
        match self {
            Era::Paper => "paper",
            Era::Current => "current",
        }
    }
}

/// Errors setting up or running a scenario.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    /// A bad parameter; the message says which and what to use instead.
    #[error("{0}")]
    Invalid(String),
    /// A simulator target was handed to the real-target runner.
    #[error("target {target} is not a real target: real runs take engine:DIR or kernel:DIR")]
    Unavailable {
        /// The target, as written on the command line (`engine:/mnt/x`).
        target: String,
    },
}

/// Start-up timeout (s): S's `run_main_benchmarks` passes 60 s; past it the result is shown as X.
pub const STARTUP_TIMEOUT: Time = 60 * SEC;

/// Background warm-up before an application starts (ns). S waits BFQ's raising time plus 4 s (other schedulers:
/// 7 s) so that the background flows are in steady state; 15 s covers BFQ's 10.5 s default raising on HDDs for
/// every scheduler alike.
pub const STARTUP_WARMUP: Time = 15 * SEC;

/// Time of an S start-up iteration before the command starts (ns): `sleep 3`, `sleep 1`, then 0.2 s after
/// dropping caches.
pub const ITERATION_LEAD: Time = 4 * SEC + SEC / 5;

/// Throughput samples discarded at each end of a paper-era run, ns: S@2011 dropped the first 3 and the last 3 of
/// its 2 s iostat samples (`suite.md` §1.4).
pub const PAPER_DISCARD: Time = 6 * SEC;

/// Parameters of one simulated experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct SimScenario {
    /// Device preset name or path to a TOML description.
    pub device: String,
    /// Scheduler name.
    pub scheduler: String,
    /// Tunables as `key=value`.
    pub tunables: Vec<String>,
    /// Background workload (`idle`, `10r-seq`, `5r5w-rand`, ...).
    pub workload: String,
    /// Application to start (`xterm`, `bash`, ...), or a path to a profile file.
    pub app: Option<String>,
    /// Seed of every random stream.
    pub seed: u64,
    /// Settings era.
    pub era: Era,
    /// Without an application: simulated duration (ns); measurement starts after the first second (paper era: the
    /// first and last [`PAPER_DISCARD`] are left out when the run is long enough).
    pub duration: Time,
    /// Background warm-up before the application starts (ns).
    pub warmup: Time,
    /// Measure wall-clock policy CPU time (makes `sched_cpu_ns_per_request` non-deterministic).
    pub time_policy: bool,
    /// Repetition index recorded in the result.
    pub rep: u32,
}

impl SimScenario {
    /// A scenario with the defaults of `bfq run`.
    pub fn new(device: &str, scheduler: &str, workload: &str) -> Self {
        SimScenario {
            device: device.to_string(),
            scheduler: scheduler.to_string(),
            tunables: Vec::new(),
            workload: workload.to_string(),
            app: None,
            seed: 1,
            era: Era::Current,
            duration: 20 * SEC,
            warmup: STARTUP_WARMUP,
            time_policy: false,
            rep: 0,
        }
    }
}

/// Loads an application profile by name (a synthetic profile) or from a file.
pub fn load_profile(app: &str) -> Result<Profile, ScenarioError> {
    if let Some(p) = profile::synthetic(app) {
        return Ok(p);
    }
    let path = std::path::Path::new(app);
    if path.exists() {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError::Invalid(format!("cannot read profile {app}: {e}")))?;
        return Profile::parse(&text).map_err(|e| ScenarioError::Invalid(format!("profile {app}: {e}")));
    }
    Err(ScenarioError::Invalid(format!(
        "unknown application '{app}': use bash, xterm, konsole, gnome-terminal, lowriter (oowriter), or a profile file"
    )))
}

/// Runs `sc` on the simulator.
pub fn run_sim(sc: &SimScenario) -> Result<RunResult, ScenarioError> {
    let dev_cfg = bfq_sim::device::resolve(&sc.device).map_err(|e| ScenarioError::Invalid(e.to_string()))?;
    let device = dev_cfg.build();
    let info = device.info();
    let policy =
        bfq_sched::build(&sc.scheduler, &info, &sc.tunables).map_err(|e| ScenarioError::Invalid(e.to_string()))?;
    let host = HostConfig {
        time_policy: sc.time_policy,
        ..HostConfig::default()
    };
    let mut sim = Simulation::new(device, policy, host, sc.seed);
    let settings = match (sc.era, sc.app.is_some()) {
        (Era::Paper, _) => WorkloadSettings::paper(),
        (Era::Current, true) => WorkloadSettings::s36(),
        (Era::Current, false) => WorkloadSettings::s36_throughput(),
    };
    let wl = workloads::build(&sc.workload, &settings, info.rotational, 0, sc.seed)
        .map_err(|e| ScenarioError::Invalid(format!("workload '{}': {}", sc.workload, e.0)))?;
    for f in &wl.files {
        sim.add_file(f).map_err(|e| ScenarioError::Invalid(e.to_string()))?;
    }
    for p in wl.processes {
        sim.spawn(0, p);
    }
    let (startup_s, timed_out, window) = match &sc.app {
        Some(app) => {
            let prof = Arc::new(load_profile(app)?);
            let start = sc.warmup;
            let base = wl.files.len() as u32;
            let st = Startup::new(prof, base, start);
            for f in st.files() {
                sim.add_file(&f).map_err(|e| ScenarioError::Invalid(e.to_string()))?;
            }
            // Caches are dropped just before the command runs (S drops them without a sync, then waits 0.2 s).
            sim.drop_caches_at(start.saturating_sub(SEC / 5));
            let pid = sim.spawn(start, Box::new(st));
            let end = sim.run_until_exit(pid, start + STARTUP_TIMEOUT);
            let done = sim.report(pid).and_then(|r| r.startup_ns);
            // S samples iostat over the whole iteration: 3 s + 1 s of sleep and 0.2 s before the command, the
            // command, and 2 s more when it took under 2 s. The throughput is measured over that same span.
            let (startup, timed_out, cmd_end) = match (end, done) {
                (Some(e), Some(ns)) => (Some(ns as f64 / 1e9), false, e.max(start + 1)),
                _ => (None, true, start + STARTUP_TIMEOUT),
            };
            let tail = if cmd_end - start < 2 * SEC { 2 * SEC } else { 0 };
            sim.run_until(cmd_end + tail);
            (
                startup,
                timed_out,
                (start.saturating_sub(ITERATION_LEAD), cmd_end + tail),
            )
        }
        None => {
            sim.run_until(sc.duration);
            let window = match sc.era {
                Era::Paper if sc.duration > 2 * PAPER_DISCARD + SEC => (PAPER_DISCARD, sc.duration - PAPER_DISCARD),
                _ => (SEC.min(sc.duration / 2), sc.duration),
            };
            (None, false, window)
        }
    };
    let m = sim.metrics();
    let [read, write] = m.mbps_between(window.0, window.1);
    let mut extra = BTreeMap::new();
    extra.insert("block_requests".to_string(), m.block_requests as f64);
    extra.insert("device_requests".to_string(), m.device_requests as f64);
    extra.insert("read_latency_mean_ms".to_string(), m.latency[0].mean_ns() as f64 / 1e6);
    extra.insert("read_latency_max_ms".to_string(), m.latency[0].max_ns as f64 / 1e6);
    extra.insert("window_s".to_string(), (window.1 - window.0) as f64 / 1e9);
    let inserted = sim.inserted_requests();
    let sched_cpu = (sc.time_policy && inserted > 0).then(|| m.sched_cpu_ns as f64 / inserted as f64);
    Ok(RunResult {
        benchmark: if sc.app.is_some() { "startup" } else { "throughput" }.to_string(),
        target: format!("sim:{}", sc.device),
        device: dev_cfg.name().to_string(),
        scheduler: sc.scheduler.clone(),
        tunables: sc.tunables.clone(),
        workload: sc.workload.clone(),
        app: sc.app.clone(),
        rep: sc.rep,
        seed: sc.seed,
        startup_s,
        timed_out,
        throughput_mbps: read + write,
        read_mbps: read,
        write_mbps: write,
        sched_cpu_ns_per_request: sched_cpu,
        extra,
    })
}
