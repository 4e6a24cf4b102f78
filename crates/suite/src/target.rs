//! Where a benchmark runs: the simulator with a device model, the engine (our policies driving real I/O on a
//! directory), or the Linux kernel's own schedulers (real processes on a directory of a loop or real device).
//!
//! Targets are written `sim:<preset or TOML file>`, `engine:<directory>` and `kernel:<directory>`; a bare name is a
//! simulator device (`seagate-hdd` = `sim:seagate-hdd`). Several targets can be given at once, separated by commas,
//! and their results land side by side in one report.
//!
//! Simulator targets run in the simulator; the real ones go through one seam, [`run_real`]: `kernel:DIR` runs the
//! same processes on real threads against the kernel's own scheduler (see [`crate::real`]).

use crate::experiment::Experiment;
use crate::result::RunResult;
use crate::scenario::ScenarioError;
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
    #[error(
        "bad target '{}': {}",
        bfq_sched::text::one_line(given),
        bfq_sched::text::one_line(why)
    )]
    Parse {
        /// The text given.
        given: String,
        /// What is wrong, and what to write instead.
        why: String,
    },
    /// A simulator target whose device is not a preset or a readable TOML description.
    #[error("target {}: {}", bfq_sched::text::one_line(target), bfq_sched::text::one_line(why))]
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

/// Runs one experiment on a real target (`engine:` or `kernel:`). This is the only place where real targets
/// plug into the suite: everything else (planning, repetitions, statistics, reports) is shared with the simulator.
/// The result carries `target` = `target.to_string()` and the scheduler under the name the user gave, so that it
/// lines up with the simulator's column.
///
/// `kernel:DIR` runs throughput and start-up through [`crate::real::run_kernel`] (the kernel's own scheduler),
/// `engine:DIR` through [`crate::real::run_engine`] (our policy in the io_uring engine).
pub fn run_real(target: &Target, exp: &Experiment) -> Result<RunResult, ScenarioError> {
    let kernel = match target {
        Target::Kernel(_) => true,
        Target::Engine(_) => false,
        Target::Sim(_) => {
            return Err(ScenarioError::Unavailable {
                target: target.to_string(),
            })
        }
    };
    if exp.work.background_workload().is_none() {
        return Err(ScenarioError::Input(format!(
            "the {} benchmark runs on sim:<device> targets only; real targets run throughput and startup",
            exp.work.benchmark()
        )));
    }
    if kernel && kernel_scheduler(&exp.scheduler).is_none() {
        return Err(ScenarioError::Input(format!(
            "scheduler '{}' does not exist in the kernel: use none (noop), mq-deadline, kyber or bfq",
            exp.scheduler
        )));
    }
    let on_target;
    let exp = if &exp.target == target {
        exp
    } else {
        on_target = Experiment {
            target: target.clone(),
            ..exp.clone()
        };
        &on_target
    };
    let r = if kernel {
        crate::real::run_kernel(exp)?
    } else {
        crate::real::run_engine(exp)?
    };
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
