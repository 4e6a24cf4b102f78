//! The record of one measured run, the unit every report is built from.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One repetition of one scenario on one target with one scheduler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Benchmark: `throughput`, `startup`, `video`, `fairness`, `interleaved` or `iozone`.
    pub benchmark: String,
    /// Target, e.g. `sim:seagate-hdd`, `engine:/mnt/x`, `kernel:/mnt/x`.
    pub target: String,
    /// Device name (preset or real device).
    pub device: String,
    /// Scheduler name as given (e.g. `bfq`, `none`).
    pub scheduler: String,
    /// Tunables applied, as `key=value`.
    pub tunables: Vec<String>,
    /// Background workload, e.g. `10r-seq`, `0r0w`.
    pub workload: String,
    /// Foreground application, for start-up runs.
    pub app: Option<String>,
    /// Repetition index, from 0.
    pub rep: u32,
    /// Seed of the run.
    pub seed: u64,
    /// Application start-up time (s); `None` if there was no application or it timed out.
    pub startup_s: Option<f64>,
    /// The application did not start before the timeout (shown as X).
    pub timed_out: bool,
    /// Aggregate device throughput during the measurement window, MB/s (10^6 B/s).
    pub throughput_mbps: f64,
    /// Read part of the throughput, MB/s.
    pub read_mbps: f64,
    /// Write part of the throughput, MB/s.
    pub write_mbps: f64,
    /// Wall-clock CPU time inside the policy per request, ns; `None` when not measured (kept out of the
    /// deterministic results).
    pub sched_cpu_ns_per_request: Option<f64>,
    /// Further benchmark-specific quantities (frame-drop rate in %, per-flow shares, iozone KB/s, ...).
    pub extra: BTreeMap<String, f64>,
}
