//! Real targets: the suite's processes on real threads in real time, against a real file system on a loop device.
//!
//! - [`loopdev`]: `bfq loopdev create/remove`, the test devices the real targets may reconfigure.
//! - [`runner`]: the real-time executor of [`bfq_workload::Process`] state machines over an [`IoBackend`].
//! - [`kernel`]: the `kernel:DIR` target ([`run_kernel`]): plain `pread`/`pwrite`, the kernel's own schedulers.
//! - [`timeline`]: the S timeline (warm-up, cold caches, start-up, throughput window) for any backend.
//! - [`sched`]: switching the kernel scheduler and its tunables through sysfs, restored afterwards.
//! - [`files`]: the scenario's files, written in full and reused between runs.
//! - [`cleanup`]: undo actions that also run on Ctrl-C.
//!
//! Safety rules: only devices that `bfq loopdev` made are reconfigured (unless [`RealScenario::allow_device`]);
//! every change is undone on success, on error and on an interrupt. See `docs/REAL.md`.

pub mod aio;
pub mod cleanup;
pub mod engine;
pub mod files;
pub mod kernel;
pub mod loopdev;
pub mod runner;
pub mod sched;
pub mod sys;
pub mod timeline;

pub use engine::{run_engine, EngineBackend};
pub use kernel::{run_kernel, KernelBackend};
pub use runner::{Completion, FlowIo, IoBackend, Runner};

use crate::scenario::{Era, STARTUP_WARMUP};
use bfq_sched::{Time, SEC};
use std::path::PathBuf;

/// Errors of the real targets and of `bfq loopdev`. Messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum RealError {
    /// The action needs root.
    #[error("{0} needs root: run it as root (e.g. with sudo)")]
    NotRoot(String),
    /// A system call or file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// An external command failed.
    #[error("`{command}` failed ({status}){}", if stderr.is_empty() { String::new() } else { format!(": {stderr}") })]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard error.
        stderr: String,
    },
    /// A size that could not be parsed.
    #[error("invalid size {0}")]
    InvalidSize(String),
    /// The directory is on a device that `bfq loopdev` did not make.
    #[error(
        "{} is on {}, which bfq loopdev did not create; refusing to change its scheduler. Make a test device with \
         `bfq loopdev create --size 4G DIR` and use that DIR, or pass --allow-device if you really mean this device",
        dir.display(),
        device.display()
    )]
    NotOurDevice {
        /// The directory given.
        dir: PathBuf,
        /// The device under it.
        device: PathBuf,
    },
    /// A scheduler or tunable problem.
    #[error("{0}")]
    Scheduler(String),
    /// Restoring the previous scheduler settings failed.
    #[error("could not restore the previous scheduler settings: {0}")]
    Restore(String),
    /// Anything else; the message says what and what to do.
    #[error("{0}")]
    Invalid(String),
}

/// Largest accepted [`RealScenario::file_scale`] (the one range of `--file-scale`).
pub use crate::limits::MAX_FILE_SCALE;

/// One experiment on a real target.
#[derive(Debug, Clone, PartialEq)]
pub struct RealScenario {
    /// Directory on the device under test (a `bfq loopdev` mount); files go to `dir/bfq-files/`.
    pub dir: PathBuf,
    /// Kernel scheduler name (`none`, `mq-deadline`, `kyber`, `bfq`) for the kernel target.
    pub scheduler: String,
    /// Scheduler tunables as `key=value` (files of `queue/iosched/`).
    pub tunables: Vec<String>,
    /// Background workload (`idle`, `10r-seq`, `5r5w-rand`, ...).
    pub workload: String,
    /// Application profile to replay (`xterm`, ... or a profile file); the label when `app_cmd` is given.
    pub app: Option<String>,
    /// A real command whose start-up is timed instead (run with `/bin/sh -c`, e.g. `xterm /bin/true`).
    pub app_cmd: Option<String>,
    /// Settings era (file sizes, writer cap, periodic sync).
    pub era: Era,
    /// Without an application: length of the run, ns.
    pub duration: Time,
    /// Background warm-up before the application starts, ns.
    pub warmup: Time,
    /// Seed of every random stream.
    pub seed: u64,
    /// Repetition index recorded in the result.
    pub rep: u32,
    /// Allow a device that `bfq loopdev` did not make (its scheduler is still restored afterwards).
    pub allow_device: bool,
    /// Multiplies the background workload's file sizes (rounded to MiB, at least 1 MiB), for quick runs and tests;
    /// application files are not scaled.
    pub file_scale: f64,
}

impl RealScenario {
    /// A scenario with the simulator's defaults: 20 s runs, 15 s warm-up, S 3.6 settings, seed 1, full-size files.
    pub fn new(dir: impl Into<PathBuf>, scheduler: &str, workload: &str) -> Self {
        RealScenario {
            dir: dir.into(),
            scheduler: scheduler.to_string(),
            tunables: Vec::new(),
            workload: workload.to_string(),
            app: None,
            app_cmd: None,
            era: Era::Current,
            duration: 20 * SEC,
            warmup: STARTUP_WARMUP,
            seed: 1,
            rep: 0,
            allow_device: false,
            file_scale: 1.0,
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), RealError> {
        if !self.dir.is_dir() {
            return Err(RealError::Invalid(format!(
                "{} is not a directory: give the mount point made by `bfq loopdev create`",
                self.dir.display()
            )));
        }
        if !(self.file_scale.is_finite() && self.file_scale > 0.0 && self.file_scale <= MAX_FILE_SCALE) {
            return Err(RealError::Invalid(format!(
                "file scale {} is out of range: give a number in (0, {MAX_FILE_SCALE}]",
                self.file_scale
            )));
        }
        if self.app.is_none() && self.app_cmd.is_none() && self.duration == 0 {
            return Err(RealError::Invalid("duration 0: give a positive duration".into()));
        }
        if self.app_cmd.as_deref().is_some_and(|c| c.trim().is_empty()) {
            return Err(RealError::Invalid("empty app command".into()));
        }
        Ok(())
    }
}
