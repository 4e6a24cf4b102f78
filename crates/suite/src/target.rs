//! Where a benchmark runs: the simulator with a device model, the engine (our policies driving real I/O on a
//! directory), or the Linux kernel's own schedulers (real processes on a directory of a loop or real device).
//!
//! Targets are written `sim:<preset or TOML file>`, `engine:<directory>` and `kernel:<directory>`; a bare name is a
//! simulator device (`seagate-hdd` = `sim:seagate-hdd`). Several targets can be given at once, separated by commas,
//! and their results land side by side in one report.
//!
//! Simulator targets run in the simulator; the real ones go through one seam, [`run_real`]: `kernel:DIR` runs the
//! same processes on real threads against the kernel's own scheduler (see [`crate::real`]).

use crate::real::RealScenario;
use crate::result::RunResult;
use crate::scenario::ScenarioError;
use crate::suite::{Job, Work};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// A place to run benchmarks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The simulator with a device preset name or a path to a device TOML file.
    Sim(String),
    /// The engine: our policies drive io_uring I/O on files in this directory.
    Engine(PathBuf),
    /// The kernel's schedulers: real processes do I/O on files in this directory (on a loop or real device).
    Kernel(PathBuf),
}

/// A target that could not be understood or used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// The text is not a target; the message says what to write instead.
    #[error("bad target '{given}': {why}")]
    Parse {
        /// The text given.
        given: String,
        /// What is wrong, and what to write instead.
        why: String,
    },
    /// A simulator target whose device is not a preset or a readable TOML description.
    #[error("target {target}: {why}")]
    Device {
        /// The target.
        target: String,
        /// The device model's error.
        why: String,
    },
}

const KINDS: &str = "use sim:<device preset or TOML file>, engine:<directory> or kernel:<directory>";

impl Target {
    /// Parses one target: `sim:<device>`, `engine:<dir>`, `kernel:<dir>`, or a bare device name (simulator).
    pub fn parse(text: &str) -> Result<Target, TargetError> {
        let given = text.trim();
        let err = |why: String| TargetError::Parse {
            given: given.to_string(),
            why,
        };
        if given.is_empty() {
            return Err(err(format!("empty target: {KINDS}")));
        }
        let Some((kind, rest)) = given.split_once(':') else {
            return Ok(Target::Sim(given.to_string()));
        };
        let rest = rest.trim();
        match kind {
            "sim" if rest.is_empty() => Err(err(
                "sim: needs a device preset or TOML file, e.g. sim:seagate-hdd".to_string()
            )),
            "sim" => Ok(Target::Sim(rest.to_string())),
            "engine" | "kernel" if rest.is_empty() => {
                Err(err(format!("{kind}: needs a directory, e.g. {kind}:/mnt/x")))
            }
            "engine" => Ok(Target::Engine(PathBuf::from(rest))),
            "kernel" => Ok(Target::Kernel(PathBuf::from(rest))),
            other => Err(err(format!("unknown target kind '{other}': {KINDS}"))),
        }
    }

    /// Parses a comma-separated list of targets (`sim:seagate-hdd,kernel:/mnt/x`); empty items are errors.
    pub fn parse_list(text: &str) -> Result<Vec<Target>, TargetError> {
        text.split(',').map(Target::parse).collect()
    }

    /// Whether this is a simulator target.
    pub fn is_sim(&self) -> bool {
        matches!(self, Target::Sim(_))
    }

    /// Checks what can be checked before running: a simulator target's device must resolve to a model.
    /// Real targets are checked by their runner.
    pub fn check(&self) -> Result<(), TargetError> {
        match self {
            Target::Sim(dev) => bfq_sim::device::resolve(dev)
                .map(|_| ())
                .map_err(|e| TargetError::Device {
                    target: self.to_string(),
                    why: e.to_string(),
                }),
            Target::Engine(_) | Target::Kernel(_) => Ok(()),
        }
    }
}

impl fmt::Display for Target {
    /// The canonical form, as recorded in [`RunResult::target`]: `sim:seagate-hdd`, `engine:/mnt/x`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Sim(dev) => write!(f, "sim:{dev}"),
            Target::Engine(dir) => write!(f, "engine:{}", dir.display()),
            Target::Kernel(dir) => write!(f, "kernel:{}", dir.display()),
        }
    }
}

impl FromStr for Target {
    type Err = TargetError;
    fn from_str(s: &str) -> Result<Target, TargetError> {
        Target::parse(s)
    }
}

/// Runs one benchmark job on a real target (`engine:` or `kernel:`). This is the only place where real targets
/// plug into the suite: everything else (planning, repetitions, statistics, reports) is shared with the simulator.
/// [`Job`] says what to run (scheduler, tunables, benchmark and its parameters, seed, repetition); the result must
/// carry `target` = `target.to_string()`.
///
/// `kernel:DIR` runs throughput and start-up through [`crate::real::run_kernel`] (the kernel's own scheduler),
/// `engine:DIR` through [`crate::real::run_engine`] (our policy in the io_uring engine).
pub fn run_real(target: &Target, job: &Job) -> Result<RunResult, ScenarioError> {
    let (dir, kernel) = match target {
        Target::Kernel(dir) => (dir, true),
        Target::Engine(dir) => (dir, false),
        Target::Sim(_) => {
            return Err(ScenarioError::Unavailable {
                target: target.to_string(),
            })
        }
    };
    let (workload, app) = match &job.work {
        Work::Throughput { workload } => (workload.clone(), None),
        Work::Startup { workload, app } => (workload.clone(), Some(app.clone())),
        other => {
            return Err(ScenarioError::Invalid(format!(
                "the {} benchmark runs on sim:<device> targets only; real targets run throughput and startup",
                other.benchmark().name()
            )))
        }
    };
    // The kernel target switches the kernel's scheduler; the engine target runs our own policy of that name.
    let sched = if kernel {
        kernel_scheduler(&job.scheduler).ok_or_else(|| {
            ScenarioError::Invalid(format!(
                "scheduler '{}' does not exist in the kernel: use none (noop), mq-deadline, kyber or bfq",
                job.scheduler
            ))
        })?
    } else {
        job.scheduler.as_str()
    };
    let mut sc = RealScenario::new(dir.clone(), sched, &workload);
    sc.tunables = job.tunables.clone();
    sc.app = app;
    sc.app_cmd = job.real.app_cmd.clone().filter(|_| sc.app.is_some());
    sc.era = job.era;
    sc.duration = job.duration.unwrap_or(sc.duration);
    if let Some(w) = job.real.warmup {
        sc.warmup = w;
    }
    sc.seed = job.seed;
    sc.rep = job.rep;
    sc.allow_device = job.real.allow_device;
    sc.file_scale = job.real.file_scale;
    let run = if kernel {
        crate::real::run_kernel(&sc)
    } else {
        crate::real::run_engine(&sc)
    };
    let mut r = run.map_err(|e| ScenarioError::Invalid(e.to_string()))?;
    // Report the scheduler under the name the user gave, so that it lines up with the simulator's column.
    r.scheduler = job.scheduler.clone();
    r.target = target.to_string();
    Ok(r)
}

/// The kernel's name for scheduler `name`: `none` for noop (blk-mq has no noop), the same for mq-deadline, kyber
/// and bfq; `None` for schedulers the kernel no longer has (cfq, deadline, anticipatory).
pub fn kernel_scheduler(name: &str) -> Option<&'static str> {
    match name {
        "none" | "noop" => Some("none"),
        "mq-deadline" => Some("mq-deadline"),
        "kyber" => Some("kyber"),
        "bfq" => Some("bfq"),
        _ => None,
    }
}
