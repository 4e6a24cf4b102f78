//! The kernel target's application in its own process, as a real application (and S's replayer) runs.
//!
//! A start-up run of `kernel:DIR` that replays a profile forks and execs the bfq binary as
//! `bfq replay-app` ([`APP_SUBCOMMAND`]) when [`crate::experiment::RealOptions::app_exe`] names it. The parent
//! writes one [`AppSpec`] (JSON) to the child's standard input; the child locks itself in memory, opens the
//! profile's files (buffered and O_DIRECT), replays the profile with the same [`Startup`] process and the same
//! [`KernelBackend`] as the in-thread replay, and writes one [`AppReport`] (JSON) to its standard output. The
//! start-up time is the replay's own measure (first request to last completion), taken in the child.
//!
//! Why a process: the kernel's I/O schedulers see an application through its task and I/O context. A replay on a
//! thread of the runner shares the runner's process with the background readers, its page faults and its CPU time;
//! a separate process is what S measured and what a user's application is.

use super::files::FileSet;
use super::kernel::KernelBackend;
use super::runner::Runner;
use super::sys::{self, io_err, MemoryLock};
use super::RealError;
use crate::scenario::load_profile;
use bfq_sched::Time;
use bfq_workload::startup::Startup;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The hidden subcommand of the bfq binary that runs [`child_main`].
pub const APP_SUBCOMMAND: &str = "replay-app";

/// Extra time the parent gives the child past the start-up deadline before killing it, ns (the child stops at
/// its own deadline and still has to report).
pub const KILL_GRACE_NS: Time = 5_000_000_000;

/// What the child replays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppSpec {
    /// Profile name or file (as `load_profile` takes it).
    pub app: String,
    /// The profile's files, in the profile's file order (file 0 first).
    pub paths: Vec<PathBuf>,
    /// Longest start-up before the replay is cancelled, ns.
    pub timeout_ns: Time,
}

/// What the child measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppReport {
    /// Start-up time, ns: the replay's first request to its last completion; `None` if it timed out.
    pub startup_ns: Option<Time>,
    /// Failed operations of the replay.
    pub errors: u64,
    /// Bytes the replay read.
    pub read_bytes: u64,
    /// CPU time of the child in user mode, s (its whole life, exec and memory locking included).
    pub user_s: f64,
    /// CPU time of the child in kernel mode, s.
    pub sys_s: f64,
    /// Whether `mlockall` succeeded in the child.
    pub mlocked: bool,
    /// Each completed request's latency (issue to completion), ns, in completion order.
    #[serde(default)]
    pub latencies_ns: Vec<u64>,
}

/// The child's side: replays `spec` on this process and returns the report. Needs root only for what the kernel
/// asks (O_DIRECT on files it can read, `mlockall`).
pub fn child_main(spec: &AppSpec) -> Result<AppReport, RealError> {
    let profile = Arc::new(load_profile(&spec.app)?);
    if profile.files.len() != spec.paths.len() {
        return Err(RealError::Invalid(format!(
            "application {} has {} files but {} paths were given",
            spec.app,
            profile.files.len(),
            spec.paths.len()
        )));
    }
    let lock = MemoryLock::lock();
    let set = FileSet {
        paths: spec.paths.clone(),
        sizes: vec![0; spec.paths.len()],
        written_bytes: 0,
    };
    let backend = KernelBackend::open(&set)?;
    let mut runner = Runner::new(backend);
    let id = runner.spawn(0, Box::new(Startup::new(profile, 0, 0)))?;
    let exited = runner.wait_exit(id, spec.timeout_ns);
    if exited.is_none() {
        runner.cancel(id);
    }
    let read_bytes = runner.bytes().0;
    let outcomes = runner.finish();
    let o = outcomes.get(id);
    if let Some(why) = o.and_then(|o| o.error.clone()) {
        return Err(RealError::Process {
            name: spec.app.clone(),
            why,
        });
    }
    let (user_s, sys_s) = sys::cpu_times(libc::RUSAGE_SELF);
    Ok(AppReport {
        startup_ns: exited.and(o.and_then(|o| o.report.startup_ns)),
        errors: o.map_or(0, |o| o.report.errors),
        read_bytes,
        user_s,
        sys_s,
        mlocked: lock.locked(),
        latencies_ns: o
            .map(|o| crate::validate::latencies_ns(&o.report.requests))
            .unwrap_or_default(),
    })
}

/// The end of the child as the parent saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildEnd {
    /// The child's report; `None` if it was killed at the deadline.
    pub report: Option<AppReport>,
    /// Wall time from spawning the child to its exit, ns (exec, memory locking and opening files included).
    pub wall_ns: Time,
}

/// The parent's side: forks and execs `exe replay-app`, hands it `spec`, and waits for its report until
/// `deadline` (plus [`KILL_GRACE_NS`]), after which the child is killed.
pub fn run_child(exe: &Path, spec: &AppSpec, deadline: Instant) -> Result<ChildEnd, RealError> {
    let t0 = Instant::now();
    let mut child = Command::new(exe)
        .arg(APP_SUBCOMMAND)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err(format!("cannot start {} {APP_SUBCOMMAND}", exe.display())))?;
    let pid = child.id() as libc::pid_t;
    // A Ctrl-C must not leave the replay running.
    let kill_guard = super::cleanup::Cleanup::register(format!("kill {APP_SUBCOMMAND} {pid}"), move || {
        // SAFETY: signals our own child, not yet reaped while the guard is armed.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        Ok(())
    });
    let text = serde_json::to_string(spec).map_err(|e| RealError::Invalid(format!("application spec: {e}")))?;
    // The child may exit before it reads its spec (a bad binary, a crash at start): the write then fails with a
    // broken pipe, and the child's own exit status and message, collected below, are the error to report.
    let handed = match child.stdin.take() {
        Some(mut stdin) => stdin.write_all(text.as_bytes()),
        None => Ok(()),
    };
    let unread = match handed {
        Ok(()) => false,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => true,
        Err(e) => {
            let _ = kill_guard.run();
            let _ = child.wait();
            return Err(io_err("cannot hand the application spec to the replay process")(e));
        }
    };
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let mut err = String::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_string(&mut out);
        }
        if let Some(s) = stderr.as_mut() {
            let _ = s.read_to_string(&mut err);
        }
        (out, err)
    });
    let hard = deadline + Duration::from_nanos(KILL_GRACE_NS);
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if Instant::now() >= hard => break None,
            Ok(None) => std::thread::sleep(Duration::from_micros(200)),
            Err(e) => return Err(io_err("cannot wait for the replay process")(e)),
        }
    };
    let wall_ns = t0.elapsed().as_nanos() as Time;
    let Some(status) = status else {
        let _ = kill_guard.run();
        let _ = child.wait();
        let _ = reader.join();
        return Ok(ChildEnd { report: None, wall_ns });
    };
    kill_guard.disarm();
    let (out, err) = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(RealError::Process {
            name: format!("{APP_SUBCOMMAND} ({})", spec.app),
            why: format!("{status}: {}", bfq_sched::text::one_line(err.trim())),
        });
    }
    if unread {
        return Err(RealError::Process {
            name: format!("{APP_SUBCOMMAND} ({})", spec.app),
            why: "exited without reading its application spec".into(),
        });
    }
    let report: AppReport = serde_json::from_str(out.trim()).map_err(|e| RealError::Process {
        name: format!("{APP_SUBCOMMAND} ({})", spec.app),
        why: format!("unreadable report ({e}): {}", bfq_sched::text::one_line(out.trim())),
    })?;
    Ok(ChildEnd {
        report: Some(report),
        wall_ns,
    })
}

/// The bfq binary to run the application with: `BFQ_BIN` if set, else this program if it is `bfq`, else `None`
/// (then the profile is replayed on a thread of the runner).
pub fn default_app_exe() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BFQ_BIN") {
        return Some(PathBuf::from(p));
    }
    let me = std::env::current_exe().ok()?;
    (me.file_name()? == "bfq").then_some(me)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_and_report_round_trip_as_json() {
        let spec = AppSpec {
            app: "xterm".into(),
            paths: vec!["/mnt/x/bfq-files/a".into()],
            timeout_ns: 60_000_000_000,
        };
        let back: AppSpec = serde_json::from_str(&serde_json::to_string(&spec).expect("json")).expect("parses");
        assert_eq!(back, spec);
        let r = AppReport {
            startup_ns: None,
            errors: 1,
            read_bytes: 4096,
            user_s: 0.01,
            sys_s: 0.02,
            mlocked: true,
            latencies_ns: vec![1000, 2000],
        };
        let back: AppReport = serde_json::from_str(&serde_json::to_string(&r).expect("json")).expect("parses");
        assert_eq!(back, r);
    }

    #[test]
    fn a_failing_child_is_one_error_with_its_message() {
        let spec = AppSpec {
            app: "xterm".into(),
            paths: vec![],
            timeout_ns: 1_000_000_000,
        };
        // `false` ignores its input and fails: the error names the subcommand and the status.
        let e = run_child(Path::new("/bin/false"), &spec, Instant::now() + Duration::from_secs(5))
            .expect_err("fails")
            .to_string();
        assert!(e.contains(APP_SUBCOMMAND) && e.contains("exit status"), "{e}");
    }

    /// A child that exits at once, before or after the spec reaches its pipe, is an error naming the subcommand,
    /// never an I/O error about the pipe (which used to hide `false`'s exit status when it had already exited).
    #[test]
    fn a_child_that_never_reads_its_spec_is_one_error() {
        let spec = AppSpec {
            app: "xterm".into(),
            paths: vec![],
            timeout_ns: 1_000_000_000,
        };
        for _ in 0..20 {
            let e = run_child(Path::new("/bin/true"), &spec, Instant::now() + Duration::from_secs(5))
                .expect_err("no report")
                .to_string();
            assert!(e.contains(APP_SUBCOMMAND) && !e.contains("cannot hand"), "{e}");
        }
    }

    #[test]
    fn a_child_past_the_deadline_is_killed() {
        let spec = AppSpec {
            app: "xterm".into(),
            paths: vec![],
            timeout_ns: 0,
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let exe = dir.path().join("slow");
        std::fs::write(&exe, "#!/bin/sh\nexec sleep 30\n").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let t0 = Instant::now();
        let end = run_child(
            &exe,
            &spec,
            Instant::now() - Duration::from_nanos(KILL_GRACE_NS) + Duration::from_millis(200),
        )
        .expect("runs");
        assert!(end.report.is_none());
        assert!(t0.elapsed() < Duration::from_secs(10));
    }
}
