//! The record of one measured run, the unit every report is built from, and the one place it is assembled
//! ([`RunResult::new`]).

use crate::experiment::Experiment;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A benchmark of the suite. Serialised (JSON, CSV) and written on the command line by its [`Benchmark::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Benchmark {
    /// Aggregate throughput of background readers and writers (S's `throughput-sync`).
    Throughput,
    /// Cold-cache start-up time of an application under background load (S's `comm_startup_lat`).
    Startup,
    /// Frame-drop rate of a video player under background load and periodic noise (S's `video_play_vs_comms`).
    Video,
    /// Shares of weighted sequential readers placed in chosen disk zones (S's `fairness`).
    Fairness,
    /// Aggregate throughput of readers interleaving strided accesses to one area (S's `interleaved_io`).
    Interleaved,
    /// iozone write, re-write, read and re-read throughput with 1 or more threads (seed 003).
    Iozone,
    /// A block trace replayed per flow (`bfq replay`, not a `bfq suite` benchmark).
    Replay,
}

impl Benchmark {
    /// Every benchmark of `bfq suite`, in help order ([`Benchmark::Replay`] is `bfq replay`'s).
    pub const ALL: [Benchmark; 6] = [
        Benchmark::Throughput,
        Benchmark::Startup,
        Benchmark::Video,
        Benchmark::Fairness,
        Benchmark::Interleaved,
        Benchmark::Iozone,
    ];

    /// Name as on the command line and in the JSON and CSV results.
    pub fn name(self) -> &'static str {
        match self {
            Benchmark::Throughput => "throughput",
            Benchmark::Startup => "startup",
            Benchmark::Video => "video",
            Benchmark::Fairness => "fairness",
            Benchmark::Interleaved => "interleaved",
            Benchmark::Iozone => "iozone",
            Benchmark::Replay => "replay",
        }
    }
}

impl std::fmt::Display for Benchmark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One repetition of one scenario on one target with one scheduler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Benchmark.
    pub benchmark: Benchmark,
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
    /// Scenario settings that differ from the defaults and are not the policy's tunables, as `key=value`
    /// ([`crate::experiment::Settings::scenario_labels`]: `HZ=100`, `device_reordering=off`); empty (and absent
    /// from the JSON) for the defaults. The report shows them with the tunables in the column label.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scenario: Vec<String>,
}

/// What a testbed measured in one run; [`RunResult::new`] labels it with the experiment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Measured {
    /// Device name (preset name or real block device).
    pub device: String,
    /// Application start-up time, s; `None` without an application or when it timed out.
    pub startup_s: Option<f64>,
    /// The application did not start before the timeout.
    pub timed_out: bool,
    /// Device read throughput in the measurement window, MB/s (10^6 B/s).
    pub read_mbps: f64,
    /// Device write throughput in the measurement window, MB/s (10^6 B/s).
    pub write_mbps: f64,
    /// Wall-clock CPU time inside the policy per request, ns, when measured.
    pub sched_cpu_ns_per_request: Option<f64>,
    /// Benchmark-specific quantities, see [`RunResult::extra`].
    pub extra: BTreeMap<String, f64>,
}

impl Measured {
    /// Nothing measured yet on `device`.
    pub fn on(device: impl Into<String>) -> Measured {
        Measured {
            device: device.into(),
            ..Measured::default()
        }
    }

    /// Sets the read and write throughput, MB/s.
    pub fn with_mbps(mut self, [read, write]: [f64; 2]) -> Measured {
        self.read_mbps = read;
        self.write_mbps = write;
        self
    }
}

impl RunResult {
    /// The result of experiment `exp`: what it ran (benchmark, target, scheduler, tunables, workload label,
    /// application, seed, repetition) with what was measured. The throughput is read plus write.
    pub fn new(exp: &Experiment, m: Measured) -> RunResult {
        RunResult {
            benchmark: exp.work.benchmark(),
            target: exp.target.to_string(),
            device: m.device,
            scheduler: exp.scheduler.clone(),
            tunables: exp.tunables.clone(),
            workload: exp.work.label(),
            app: exp.work.app().map(str::to_string),
            rep: exp.rep,
            seed: exp.settings.seed,
            startup_s: m.startup_s,
            timed_out: m.timed_out,
            throughput_mbps: m.read_mbps + m.write_mbps,
            read_mbps: m.read_mbps,
            write_mbps: m.write_mbps,
            sched_cpu_ns_per_request: m.sched_cpu_ns_per_request,
            extra: m.extra,
            scenario: exp.settings.scenario_labels(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchmarks::Zones;
    use crate::experiment::Work;

    #[test]
    fn benchmarks_serialise_as_their_names() {
        for b in Benchmark::ALL {
            let json = serde_json::to_string(&b).expect("serialises");
            assert_eq!(json, format!("\"{}\"", b.name()));
            assert_eq!(serde_json::from_str::<Benchmark>(&json).expect("parses"), b);
            assert_eq!(b.to_string(), b.name());
        }
    }

    #[test]
    fn results_are_labelled_from_the_experiment() {
        let mut exp = Experiment::sim(
            "seagate-hdd",
            "bfq",
            Work::Fairness {
                weights: vec![1, 2, 4],
                zones: Zones::Mixed,
            },
        );
        exp.tunables = vec!["low_latency=0".into()];
        exp.settings.seed = 7;
        exp.rep = 3;
        let mut m = Measured::on("seagate-hdd").with_mbps([30.0, 12.5]);
        m.extra.insert("max_share_error_pct".into(), 1.5);
        let r = RunResult::new(&exp, m);
        assert_eq!(r.benchmark, Benchmark::Fairness);
        assert_eq!(
            (r.target.as_str(), r.device.as_str()),
            ("sim:seagate-hdd", "seagate-hdd")
        );
        assert_eq!((r.workload.as_str(), r.app.as_deref()), ("1:2:4-mixed", None));
        assert_eq!((r.seed, r.rep), (7, 3));
        assert_eq!(r.tunables, ["low_latency=0"]);
        assert_eq!((r.read_mbps, r.write_mbps, r.throughput_mbps), (30.0, 12.5, 42.5));
        assert_eq!(r.extra["max_share_error_pct"], 1.5);
        let startup = Experiment::sim("seagate-hdd", "noop", Work::background("10r-seq", Some("xterm")));
        let r = RunResult::new(&startup, Measured::on("seagate-hdd"));
        assert_eq!(r.benchmark, Benchmark::Startup);
        assert_eq!((r.workload.as_str(), r.app.as_deref()), ("10r-seq", Some("xterm")));
        let json = serde_json::to_value(&r).expect("serialises");
        assert_eq!(json["benchmark"], "startup");
    }
}
