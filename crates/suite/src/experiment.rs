//! What to run: one [`Experiment`] is one repetition of one measurement on one target, the unit of work of
//! `bfq run`, `bfq suite` and `bfq reproduce`, on the simulator and on the real targets alike.

use crate::benchmarks::{run_fairness, run_interleaved, run_iozone, run_video, Zones};
use crate::result::{Benchmark, RunResult};
use crate::scenario::{Era, ScenarioError};
use crate::target::{run_real, Target};
use crate::timeline::STARTUP_WARMUP;
use bfq_sched::Time;

/// What one experiment measures, with the benchmark's parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    /// Aggregate throughput of a background workload.
    Throughput {
        /// Workload name (`10r-seq`).
        workload: String,
    },
    /// Start-up time of an application under a background workload.
    Startup {
        /// Workload name (`idle`, `10r-seq`).
        workload: String,
        /// Application name or profile file.
        app: String,
    },
    /// Video frame-drop rate under a background workload.
    Video {
        /// Workload name.
        workload: String,
    },
    /// Weighted sequential readers in disk zones.
    Fairness {
        /// Weight of each reader.
        weights: Vec<u32>,
        /// Where their files are.
        zones: Zones,
    },
    /// Interleaved strided readers.
    Interleaved {
        /// Number of readers.
        readers: u32,
    },
    /// iozone phases.
    Iozone {
        /// Threads.
        threads: u32,
        /// File size per thread, bytes.
        file_size: u64,
    },
    /// A block trace replayed as one process per flow (`bfq replay`, docs/TRACES.md).
    Replay(std::sync::Arc<crate::replay::ReplayWork>),
}

impl Work {
    /// A background workload alone (throughput) or with an application starting up.
    pub fn background(workload: &str, app: Option<&str>) -> Work {
        match app {
            Some(app) => Work::Startup {
                workload: workload.to_string(),
                app: app.to_string(),
            },
            None => Work::Throughput {
                workload: workload.to_string(),
            },
        }
    }

    /// The benchmark this work belongs to.
    pub fn benchmark(&self) -> Benchmark {
        match self {
            Work::Throughput { .. } => Benchmark::Throughput,
            Work::Startup { .. } => Benchmark::Startup,
            Work::Video { .. } => Benchmark::Video,
            Work::Fairness { .. } => Benchmark::Fairness,
            Work::Interleaved { .. } => Benchmark::Interleaved,
            Work::Iozone { .. } => Benchmark::Iozone,
            Work::Replay(_) => Benchmark::Replay,
        }
    }

    /// The workload label recorded in [`RunResult::workload`]: the background workload's name, or the benchmark's
    /// parameters (`1:2:4-mixed`, `5r-interleaved`, `10-thread`).
    pub fn label(&self) -> String {
        match self {
            Work::Throughput { workload } | Work::Startup { workload, .. } | Work::Video { workload } => {
                workload.clone()
            }
            Work::Fairness { weights, zones } => {
                let w = weights.iter().map(u32::to_string).collect::<Vec<_>>().join(":");
                format!("{w}-{}", zones.name())
            }
            Work::Interleaved { readers } => format!("{readers}r-interleaved"),
            Work::Iozone { threads, .. } => format!("{threads}-thread"),
            Work::Replay(_) => crate::replay::TOTAL_ROW.to_string(),
        }
    }

    /// The application that starts up, for start-up work.
    pub fn app(&self) -> Option<&str> {
        match self {
            Work::Startup { app, .. } => Some(app),
            _ => None,
        }
    }

    /// The background workload, for throughput and start-up work.
    pub fn background_workload(&self) -> Option<&str> {
        match self {
            Work::Throughput { workload } | Work::Startup { workload, .. } => Some(workload),
            _ => None,
        }
    }
}

/// One repetition of one measurement on one target: what to run, where, with which scheduler and settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    /// Where to run.
    pub target: Target,
    /// Scheduler name (on `kernel:` targets, mapped to the kernel's name by [`crate::target::kernel_scheduler`]).
    pub scheduler: String,
    /// Tunables as `key=value`.
    pub tunables: Vec<String>,
    /// What to measure.
    pub work: Work,
    /// Repetition index, recorded in the result.
    pub rep: u32,
    /// How to run it.
    pub settings: Settings,
}

/// How an experiment runs; `bfq suite` gives every experiment of a run the same settings (but for the seed, which
/// grows with the repetition).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Settings era of the background workloads (throughput and start-up).
    pub era: Era,
    /// Measured duration, ns, where the benchmark has one (throughput run, video clip, fairness run, interleaved
    /// measurement); `None` for the benchmark's default.
    pub duration: Option<Time>,
    /// Background warm-up before the application starts, ns (start-up).
    pub warmup: Time,
    /// Seed of every random stream.
    pub seed: u64,
    /// Measure the policy's wall-clock CPU time per request (simulator: throughput, start-up, iozone); not
    /// reproducible.
    pub time_policy: bool,
    /// Start-up runs: add the application's read-latency distribution to `extra` (`app_lat_q00_us` ...
    /// `app_lat_q19_us`, see [`crate::validate::LATENCY_QUANTILES`], and `app_lat_mean_us`), for `bfq validate`.
    /// Off by default, so that the suite's results stay as they were.
    pub app_latency: bool,
    /// Options of the real targets (the simulator ignores them).
    pub real: RealOptions,
    /// Simulator: the queue's writeback-throttling latency target (`wbt_lat_usec`), µs, 0 to switch it off;
    /// `None` for what the era's kernel gives the scheduler ([`crate::Era::wbt_target`]).
    pub wbt_lat_us: Option<u64>,
    /// The simulated host kernel's timer tick, ticks per second (`CONFIG_HZ`): the idle timers of the policies
    /// whose kernel armed them in jiffies (bfq-v7r2, cfq) fire on a tick of 1000/HZ ms and their `HZ / 125`
    /// defaults truncate ([`bfq_sched::tick`]). `None` (the default): exact high-resolution timers. Simulator
    /// only; recorded in [`crate::RunResult::scenario`] as `HZ=<n>`.
    pub timer_hz: Option<u32>,
    /// The device's own reordering of its internal queue (the SATA SSD model's preference for commands that
    /// continue a sequential stream). `false` makes the device serve its queue oldest first (prefetching stays);
    /// only the SSD model has such a queue. Simulator only; recorded as `device_reordering=off`.
    pub device_reordering: bool,
    /// Simulator: the host's largest readahead window (`read_ahead_kb`), KiB; `None` for the default (128 KiB).
    /// Recorded as `read_ahead_kb=<n>` (seed 003's tables ran with a 16 MiB window).
    pub read_ahead_kb: Option<u64>,
    /// Simulator: the host runs 2.6.18's writeback, seed 003's kernel (RHEL 5's 2.6.18): a writer over the dirty
    /// limit writes dirty pages back itself (before 3.2's I/O-less throttling), `dirty_ratio` is 40 %, and there is
    /// no blk-wbt ([`crate::scenario::linux_2_6_18_writeback`]). Recorded as `kernel=2.6.18`.
    pub kernel_2_6_18: bool,
}

impl Settings {
    /// The scenario settings that differ from the defaults, as `key=value` labels for
    /// [`crate::RunResult::scenario`]: `profile=<era>` (an era other than the current one), `HZ=<n>`,
    /// `device_reordering=off`, `read_ahead_kb=<n>`, `kernel=2.6.18`.
    pub fn scenario_labels(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.era != Era::Current {
            out.push(format!("profile={}", self.era.name()));
        }
        if let Some(hz) = self.timer_hz {
            out.push(format!("HZ={hz}"));
        }
        if !self.device_reordering {
            out.push("device_reordering=off".to_string());
        }
        if let Some(kb) = self.read_ahead_kb {
            out.push(format!("read_ahead_kb={kb}"));
        }
        if self.kernel_2_6_18 {
            out.push("kernel=2.6.18".to_string());
        }
        out
    }
}

impl Default for Settings {
    /// The current era, the benchmark's default duration, the 15 s warm-up, seed 1, no CPU timing, the era's
    /// writeback throttling.
    fn default() -> Self {
        Settings {
            era: Era::Current,
            duration: None,
            warmup: STARTUP_WARMUP,
            seed: 1,
            time_policy: false,
            app_latency: false,
            real: RealOptions::default(),
            wbt_lat_us: None,
            timer_hz: None,
            device_reordering: true,
            read_ahead_kb: None,
            kernel_2_6_18: false,
        }
    }
}

/// Options that only the real targets (`engine:DIR`, `kernel:DIR`) use.
#[derive(Debug, Clone, PartialEq)]
pub struct RealOptions {
    /// Allow a device that `bfq loopdev` did not create (its scheduler is still restored afterwards).
    pub allow_device: bool,
    /// A real command whose start-up is timed instead of replaying the profile (`xterm /bin/true`); the
    /// application name stays the label.
    pub app_cmd: Option<String>,
    /// Multiplies the background workload's file sizes (rounded to MiB, at least 1 MiB; quick runs on small loop
    /// devices); application files are not scaled.
    pub file_scale: f64,
    /// The bfq binary that replays a kernel-target start-up's profile in its own process (`bfq replay-app`, see
    /// [`crate::real::app_process`]); `None` replays it on a thread of the runner. The engine target always replays
    /// on a thread (its I/O must go through the engine).
    pub app_exe: Option<std::path::PathBuf>,
}

impl Default for RealOptions {
    fn default() -> Self {
        RealOptions {
            allow_device: false,
            app_cmd: None,
            file_scale: 1.0,
            app_exe: crate::real::app_process::default_app_exe(),
        }
    }
}

impl Experiment {
    /// An experiment without tunables, repetition 0, with the default [`Settings`].
    pub fn new(target: Target, scheduler: &str, work: Work) -> Experiment {
        Experiment {
            target,
            scheduler: scheduler.to_string(),
            tunables: Vec::new(),
            work,
            rep: 0,
            settings: Settings::default(),
        }
    }

    /// An experiment on the simulator with device preset or TOML file `device` (see [`Experiment::new`]).
    pub fn sim(device: &str, scheduler: &str, work: Work) -> Experiment {
        Experiment::new(Target::Sim(device.to_string()), scheduler, work)
    }

    /// Runs the experiment on its target: the simulator, or a real target through [`run_real`].
    pub fn run(&self) -> Result<RunResult, ScenarioError> {
        if let Work::Replay(_) = &self.work {
            // Every target: the total's result (the per-flow ones come with `crate::replay::run`).
            return crate::replay::run(self).map(|o| o.results[0].clone());
        }
        let device = match &self.target {
            Target::Sim(device) => device.as_str(),
            real => return run_real(real, self),
        };
        match &self.work {
            Work::Throughput { .. } | Work::Startup { .. } => crate::scenario::run_sim(self),
            Work::Video { workload } => run_video(self, device, workload),
            Work::Fairness { weights, zones } => run_fairness(self, device, weights, *zones),
            Work::Interleaved { readers } => run_interleaved(self, device, *readers),
            Work::Iozone { threads, file_size } => run_iozone(self, device, *threads, *file_size),
            Work::Replay(_) => unreachable!("replays returned above"),
        }
    }
}
