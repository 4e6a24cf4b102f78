//! Real targets: the suite's processes on real threads in real time, against a real file system on a loop device.
//!
//! - [`loopdev`]: `bfq loopdev create/remove`, the test devices the real targets may reconfigure.
//! - [`app_process`]: the kernel target's application replayed in its own process (`bfq replay-app`).
//! - [`calibrate`]: `bfq calibrate`, probes of a real device and the simulator model fitted to them.
//! - [`runner`]: the real-time executor of [`bfq_workload::Process`] state machines over an [`IoBackend`].
//! - [`kernel`]: the `kernel:DIR` target ([`run_kernel`]): plain `pread`/`pwrite`, the kernel's own schedulers.
//! - [`engine`]: the `engine:DIR` target ([`run_engine`]): our policies in the io_uring engine.
//! - [`run_target`]: the steps both targets share (checks, files, scheduler switch and restore, memory lock), over
//!   a [`TargetBackend`].
//! - [`timeline`]: the real-time [`crate::timeline::Testbed`] (warm-up, cold caches, start-up, throughput window) for
//!   any backend.
//! - [`sched`]: switching the kernel scheduler and its tunables through sysfs, restored afterwards.
//! - [`files`]: the scenario's files, written in full and reused between runs.
//! - [`cleanup`]: undo actions that also run on Ctrl-C.
//!
//! Safety rules: only devices that `bfq loopdev` made are reconfigured (unless
//! [`crate::experiment::RealOptions::allow_device`]); every change is undone on success, on error and on an
//! interrupt. See `docs/REAL.md`.

pub mod aio;
pub mod app_process;
pub mod calibrate;
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

use crate::experiment::Experiment;
use crate::result::RunResult;
use crate::target::Target;
use bfq_sched::{Time, SEC};
use files::FileSet;
use kernel::check_device;
use sched::switch_scheduler;
use std::path::{Path, PathBuf};
use sys::{BlockDev, MemoryLock};
use timeline::{prepare, run_timeline};

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
    /// A process of the run could not run (its flow could not be opened).
    #[error("process {name} could not run: {why}")]
    Process {
        /// The process's flow name.
        name: String,
        /// Why.
        why: String,
    },
    /// A sysfs file or path of the device that is not as the kernel documents it.
    #[error("{why} {}", path.display())]
    Sysfs {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong with it (`cannot parse`, `odd sysfs path`).
        why: &'static str,
    },
    /// An application whose profile could not be loaded.
    #[error("{0}")]
    App(crate::scenario::AppError),
    /// The io_uring engine failed to start, open a file or open a flow.
    #[error("engine: {0}")]
    Engine(bfq_engine::EngineError),
    /// A bad parameter or state the user can fix; the message says what and what to do.
    #[error("{0}")]
    Invalid(String),
}

impl From<crate::scenario::AppError> for RealError {
    fn from(e: crate::scenario::AppError) -> RealError {
        RealError::App(e)
    }
}

impl From<bfq_engine::EngineError> for RealError {
    fn from(e: bfq_engine::EngineError) -> RealError {
        RealError::Engine(e)
    }
}

/// Largest accepted [`crate::experiment::RealOptions::file_scale`] (the one range of `--file-scale`).
pub use crate::limits::MAX_FILE_SCALE;

/// Length of a throughput run on a real target when the experiment gives none, ns (in both eras).
pub const DEFAULT_DURATION: Time = 20 * SEC;

/// An [`Experiment`] checked for a real target: its directory, background workload and application.
#[derive(Debug, Clone, Copy)]
pub struct RealRun<'a> {
    /// The experiment.
    pub exp: &'a Experiment,
    /// Directory on the device under test (a `bfq loopdev` mount); files go to `dir/bfq-files/`.
    pub dir: &'a Path,
    /// Background workload (`idle`, `10r-seq`, ...).
    pub workload: &'a str,
    /// Application that starts up (a profile to replay, or the label of `exp.settings.real.app_cmd`).
    pub app: Option<&'a str>,
}

impl<'a> RealRun<'a> {
    /// Checks `exp` for a real target: an `engine:` or `kernel:` directory that exists, a throughput or start-up
    /// benchmark, a file scale in range, a positive duration, a non-empty command.
    pub fn new(exp: &'a Experiment) -> Result<RealRun<'a>, RealError> {
        let dir = match &exp.target {
            Target::Engine(d) | Target::Kernel(d) => d.as_path(),
            Target::Sim(_) => {
                return Err(RealError::Invalid(format!(
                    "target {} is not a real target: real runs take engine:DIR or kernel:DIR",
                    exp.target
                )))
            }
        };
        let Some(workload) = exp.work.background_workload() else {
            return Err(RealError::Invalid(format!(
                "the {} benchmark runs on sim:<device> targets only; real targets run throughput and startup",
                exp.work.benchmark()
            )));
        };
        let app = exp.work.app();
        if !dir.is_dir() {
            return Err(RealError::Invalid(format!(
                "{} is not a directory: give the mount point made by `bfq loopdev create`",
                dir.display()
            )));
        }
        let scale = exp.settings.real.file_scale;
        if !(scale.is_finite() && scale > 0.0 && scale <= MAX_FILE_SCALE) {
            return Err(RealError::Invalid(format!(
                "file scale {scale} is out of range: give a number in (0, {MAX_FILE_SCALE}]"
            )));
        }
        if app.is_none() && exp.settings.duration == Some(0) {
            return Err(RealError::Invalid("duration 0: give a positive duration".into()));
        }
        if app.is_some()
            && exp
                .settings
                .real
                .app_cmd
                .as_deref()
                .is_some_and(|c| c.trim().is_empty())
        {
            return Err(RealError::Invalid("empty app command".into()));
        }
        Ok(RealRun {
            exp,
            dir,
            workload,
            app,
        })
    }
}

/// The backend of a real target: how it opens for an experiment, and which kernel scheduler the device under test
/// runs meanwhile.
pub trait TargetBackend: IoBackend + Sized {
    /// What the target does that needs root, for the error message.
    const NEEDS_ROOT: &'static str;
    /// Opens the backend for `exp` over its prepared `files`.
    fn open_for(exp: &Experiment, files: &FileSet) -> Result<Self, RealError>;
    /// The kernel scheduler and its tunables set on the device while `exp` runs.
    fn device_scheduler(exp: &Experiment) -> (&str, &[String]);
}

/// Runs `exp` on a real target with backend `B`; the steps both real targets share. Checks root, the experiment
/// ([`RealRun::new`]) and the device (one `bfq loopdev` made, unless allowed), prepares the files, opens the
/// backend, switches the device's kernel scheduler (restored afterwards, also on failure and Ctrl-C), locks the
/// runner in memory, runs the S timeline, and notes whether the lock held (`extra.mlocked`). A restore failure is
/// reported after a run failure.
pub fn run_target<B: TargetBackend>(exp: &Experiment) -> Result<RunResult, RealError> {
    sys::require_root(B::NEEDS_ROOT)?;
    let run = RealRun::new(exp)?;
    let dev = BlockDev::of_dir(run.dir)?;
    check_device(&dev, run.dir, exp.settings.real.allow_device)?;
    let prepared = prepare(&run, dev.rotational())?;
    let backend = B::open_for(exp, &prepared.files)?;
    let (sched, tunables) = B::device_scheduler(exp);
    let guard = switch_scheduler(&dev, sched, tunables)?;
    let lock = MemoryLock::lock();
    let r = run_timeline(&run, &dev, prepared, backend).map(|mut m| {
        m.extra.insert("mlocked".into(), if lock.locked() { 1.0 } else { 0.0 });
        RunResult::new(exp, m)
    });
    drop(lock);
    let restored = guard.restore();
    let r = r?;
    restored?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::Work;
    use crate::scenario::ScenarioError;

    fn on(dir: &Path, work: Work) -> Experiment {
        Experiment::new(Target::Kernel(dir.to_path_buf()), "bfq", work)
    }

    #[test]
    fn real_runs_are_checked_before_anything_is_touched() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ok = on(tmp.path(), Work::background("idle", Some("bash")));
        let run = RealRun::new(&ok).expect("a valid experiment");
        assert_eq!((run.dir, run.workload, run.app), (tmp.path(), "idle", Some("bash")));
        let bad = |exp: Experiment, want: &str| {
            let e = RealRun::new(&exp).expect_err(want).to_string();
            assert!(e.contains(want), "{e:?} should contain {want:?}");
        };
        bad(
            on(&tmp.path().join("missing"), Work::background("idle", None)),
            "is not a directory",
        );
        let video = Work::Video {
            workload: "idle".into(),
        };
        bad(on(tmp.path(), video), "sim:<device> targets only");
        let mut e = on(tmp.path(), Work::background("idle", None));
        e.settings.duration = Some(0);
        bad(e, "duration 0");
        let mut e = ok.clone();
        e.settings.real.file_scale = 0.0;
        bad(e, "file scale 0 is out of range");
        let mut e = ok.clone();
        e.settings.real.app_cmd = Some("  ".into());
        bad(e, "empty app command");
        bad(
            Experiment {
                target: Target::Sim("seagate-hdd".into()),
                ..ok
            },
            "not a real target",
        );
    }

    #[test]
    fn device_io_errors_stay_io_errors_through_the_suite() {
        let e = ScenarioError::from(RealError::Io {
            context: "cannot read /sys/block/loop0/stat".into(),
            source: std::io::Error::from_raw_os_error(libc::EIO),
        });
        match &e {
            ScenarioError::Real(RealError::Io { source, .. }) => assert_eq!(source.raw_os_error(), Some(libc::EIO)),
            other => panic!("expected an I/O error, got {other:?}"),
        }
        assert!(e.to_string().starts_with("cannot read /sys/block/loop0/stat: "), "{e}");
        // The message is whole: printing the chain does not repeat the I/O error.
        assert!(std::error::Error::source(&e).is_none());
    }
}
