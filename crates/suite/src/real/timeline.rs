//! The S timeline in real time, for any [`IoBackend`]: what [`super::run_kernel`] runs and what an engine target
//! reuses.
//!
//! 1. [`prepare`]: build the background workload (era settings, file sizes times `file_scale`) and the application
//!    profile, and create or reuse their files in `DIR/bfq-files/`.
//! 2. [`run_timeline`]: `sync` and drop caches; start the background processes at t = 0.
//!    - With an application (a profile replay, or a real command `app_cmd`): at `warmup − 4.2 s` the throughput
//!      window opens (S samples iostat over its whole iteration: `sleep 3; sleep 1`, then 0.2 s); at
//!      `warmup − 0.2 s` caches are dropped (without `sync`, as S does); at `warmup` the application starts. Its
//!      start-up time is, for a profile, the replay's own measure (start to last completion) and, for a command,
//!      the wall clock from spawning `/bin/sh -c CMD` to its exit. Past [`STARTUP_TIMEOUT`] (60 s) the result is X
//!      (`timed_out`) and the command's process group is killed. The window closes at the application's end, plus
//!      2 s if it took less than 2 s (S sleeps so that iostat gets samples).
//!    - Without one: the run lasts `duration`; the window is `[min(1 s, duration/2), duration]`.
//! 3. Throughput = sectors read and written by the device during the window, from `/sys/block/<dev>/stat` deltas
//!    (what iostat reports), in MB/s (10^6 B/s). The processes' own byte counts over the same window are reported
//!    too (`extra.proc_read_mbps`, `extra.proc_write_mbps`): they include page-cache hits, the device figures do
//!    not.

use super::files::{prepare_files, FileSet};
use super::runner::{IoBackend, Runner};
use super::sys::{self, BlockDev, DiskStat};
use super::{RealError, RealScenario};
use crate::result::RunResult;
use crate::scenario::{load_profile, Era, ITERATION_LEAD, STARTUP_TIMEOUT};
use bfq_sched::{Time, SEC};
use bfq_workload::profile::Profile;
use bfq_workload::startup::Startup;
use bfq_workload::workloads::{self, RandFiles, Workload, WorkloadSettings};
use bfq_workload::FileId;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How long before the application S drops caches, ns (its `time sleep 0.2` after `echo 3 > drop_caches`).
pub const DROP_LEAD: Time = SEC / 5;

/// Extra window after an application that took less than this, ns (S sleeps 2 s more to get iostat samples).
pub const SHORT_APP_TAIL: Time = 2 * SEC;

/// Smallest scaled file, bytes.
const MIN_SCALED_FILE_BYTES: u64 = 1 << 20;

/// A scenario ready to run: its processes and its files on disk.
pub struct Prepared {
    /// The background workload (files `0..workload.files.len()`).
    pub workload: Workload,
    /// The application profile to replay, if any (files from `app_base` on).
    pub profile: Option<Arc<Profile>>,
    /// First file id of the profile's files.
    pub app_base: FileId,
    /// Every file, created.
    pub files: FileSet,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("workload", &self.workload)
            .field("app_base", &self.app_base)
            .field("files", &self.files)
            .finish()
    }
}

/// Scales a size by `scale`, to a multiple of 1 MiB and at least 1 MiB.
fn scaled(bytes: u64, scale: f64) -> u64 {
    let mib = 1u64 << 20;
    let v = ((bytes as f64 * scale) / mib as f64).round() as u64 * mib;
    v.max(MIN_SCALED_FILE_BYTES)
}

/// The era's workload settings for a run with or without an application, file sizes times `scale`.
pub fn settings_for(era: Era, with_app: bool, scale: f64) -> WorkloadSettings {
    let mut s = match (era, with_app) {
        (Era::Paper, _) => WorkloadSettings::paper(),
        (Era::Current, true) => WorkloadSettings::s36(),
        (Era::Current, false) => WorkloadSettings::s36_throughput(),
    };
    if scale != 1.0 {
        s.file_bytes = scaled(s.file_bytes, scale);
        if let RandFiles::Shared(b) = s.rand_files {
            s.rand_files = RandFiles::Shared(scaled(b, scale));
        }
    }
    s
}

/// Builds the scenario's processes and creates (or reuses) its files under `sc.dir`; `rotational` decides the
/// writer cap as in the simulator.
pub fn prepare(sc: &RealScenario, rotational: bool) -> Result<Prepared, RealError> {
    sc.validate()?;
    let with_app = sc.app.is_some() || sc.app_cmd.is_some();
    let settings = settings_for(sc.era, with_app, sc.file_scale);
    let workload = workloads::build(&sc.workload, &settings, rotational, 0, sc.seed)
        .map_err(|e| RealError::Invalid(format!("workload '{}': {}", sc.workload, e)))?;
    let app_base = workload.files.len() as FileId;
    let profile = match (&sc.app, &sc.app_cmd) {
        (Some(app), None) => Some(Arc::new(
            load_profile(app).map_err(|e| RealError::Invalid(e.to_string()))?,
        )),
        _ => None,
    };
    let mut specs = workload.files.clone();
    if let Some(p) = &profile {
        specs.extend(p.files.iter().cloned());
    }
    let files = prepare_files(&sc.dir, &specs)?;
    Ok(Prepared {
        workload,
        profile,
        app_base,
        files,
    })
}

/// How the application part of a run ended.
struct AppEnd {
    startup_s: Option<f64>,
    timed_out: bool,
    end: Time,
    errors: u64,
}

/// Runs `cmd` with `/bin/sh -c` in its own process group; waits until it exits or `deadline` (runner time).
fn run_command_timed<B: IoBackend>(runner: &Runner<B>, cmd: &str, deadline: Time) -> Result<AppEnd, RealError> {
    use std::os::unix::process::CommandExt;
    let start = runner.now();
    let mut child = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(cmd)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(sys::io_err(format!("cannot start `{cmd}`")))?;
    let pgid = child.id() as libc::pid_t;
    // A Ctrl-C must not leave the command running in its own group.
    let kill_guard = super::cleanup::Cleanup::register(format!("kill `{cmd}`"), move || {
        // SAFETY: signals our own child's process group.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        Ok(())
    });
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let st = child.wait();
        let _ = tx.send(());
        st
    });
    let got = rx.recv_timeout(Duration::from_nanos(deadline.saturating_sub(start)));
    let end = runner.now();
    let out = match got {
        Ok(()) => {
            let status = waiter.join().ok().and_then(Result::ok);
            // The leader is reaped: its group id may be reused, so it must not be signalled any more.
            kill_guard.disarm();
            AppEnd {
                startup_s: Some((end - start) as f64 / 1e9),
                timed_out: false,
                end,
                errors: u64::from(!status.is_some_and(|s| s.success())),
            }
        }
        Err(_) => {
            // The leader is still running (or a zombie not yet reaped), so the group id is still ours.
            let _ = kill_guard.run();
            let _ = waiter.join();
            AppEnd {
                startup_s: None,
                timed_out: true,
                end: deadline,
                errors: 0,
            }
        }
    };
    Ok(out)
}

/// Runs the prepared scenario on `backend` with the S timeline (module documentation) and returns its result,
/// labelled with `target` and the device `dev`. The caller has set up the device (scheduler) and locked memory.
pub fn run_timeline<B: IoBackend>(
    sc: &RealScenario,
    dev: &BlockDev,
    prepared: Prepared,
    backend: B,
    target: String,
) -> Result<RunResult, RealError> {
    let Prepared {
        workload,
        profile,
        app_base,
        files,
    } = prepared;
    let with_app = sc.app.is_some() || sc.app_cmd.is_some();
    sys::sync_all();
    sys::drop_caches()?;
    let mut runner = Runner::new(backend);
    let mut names = Vec::new();
    for p in workload.processes {
        names.push(p.flow().name);
        runner.spawn(0, p)?;
    }
    let mut app_errors = 0u64;
    let (startup_s, timed_out, window, s0, s1, b0, b1) = if with_app {
        let start = sc.warmup;
        let w0 = start.saturating_sub(ITERATION_LEAD);
        runner.sleep_until(w0);
        let (s0, b0) = (dev.stat()?, runner.bytes());
        runner.sleep_until(start.saturating_sub(DROP_LEAD));
        sys::drop_caches()?;
        runner.sleep_until(start);
        let end = match (&sc.app_cmd, &profile) {
            (Some(cmd), _) => run_command_timed(&runner, cmd, start + STARTUP_TIMEOUT)?,
            (None, Some(prof)) => {
                let id = runner.spawn(start, Box::new(Startup::new(prof.clone(), app_base, start)))?;
                match runner.wait_exit(id, start + STARTUP_TIMEOUT) {
                    Some(t) => AppEnd {
                        startup_s: None, // filled from the replay's report below
                        timed_out: false,
                        end: t,
                        errors: 0,
                    },
                    None => {
                        runner.cancel(id);
                        AppEnd {
                            startup_s: None,
                            timed_out: true,
                            end: start + STARTUP_TIMEOUT,
                            errors: 0,
                        }
                    }
                }
            }
            (None, None) => unreachable!("with_app implies an app or a command"),
        };
        app_errors += end.errors;
        let tail = if end.end.saturating_sub(start) < SHORT_APP_TAIL {
            SHORT_APP_TAIL
        } else {
            0
        };
        let w1 = end.end.max(start + 1) + tail;
        runner.sleep_until(w1);
        let (s1, b1) = (dev.stat()?, runner.bytes());
        (end.startup_s, end.timed_out, (w0, w1), s0, s1, b0, b1)
    } else {
        let w0 = SEC.min(sc.duration / 2);
        runner.sleep_until(w0);
        let (s0, b0) = (dev.stat()?, runner.bytes());
        runner.sleep_until(sc.duration);
        let (s1, b1) = (dev.stat()?, runner.bytes());
        (None, false, (w0, sc.duration), s0, s1, b0, b1)
    };
    let outcomes = runner.finish();
    if let Some(o) = outcomes.iter().find(|o| o.error.is_some()) {
        return Err(RealError::Invalid(format!(
            "process {} could not run: {}",
            o.name,
            o.error.as_deref().unwrap_or("")
        )));
    }
    // A replayed start-up reports its own time (first request to last completion).
    let mut startup_s = startup_s;
    if profile.is_some() && sc.app_cmd.is_none() && !timed_out {
        let app = outcomes.get(names.len());
        startup_s = app.and_then(|o| o.report.startup_ns).map(|ns| ns as f64 / 1e9);
        app_errors += app.map_or(0, |o| o.report.errors);
    }
    let d: DiskStat = s1.since(&s0);
    let secs = (window.1.saturating_sub(window.0)).max(1) as f64 / 1e9;
    let read = (d.read_sectors * sys::STAT_SECTOR_BYTES) as f64 / secs / 1e6;
    let write = (d.write_sectors * sys::STAT_SECTOR_BYTES) as f64 / secs / 1e6;
    let mut extra = BTreeMap::new();
    extra.insert("window_s".to_string(), secs);
    extra.insert("device_read_ios".to_string(), d.read_ios as f64);
    extra.insert("device_write_ios".to_string(), d.write_ios as f64);
    if d.read_ios > 0 {
        extra.insert(
            "read_latency_mean_ms".to_string(),
            d.read_ticks_ms as f64 / d.read_ios as f64,
        );
    }
    extra.insert(
        "proc_read_mbps".to_string(),
        b1.0.saturating_sub(b0.0) as f64 / secs / 1e6,
    );
    extra.insert(
        "proc_write_mbps".to_string(),
        b1.1.saturating_sub(b0.1) as f64 / secs / 1e6,
    );
    extra.insert(
        "io_errors".to_string(),
        (outcomes.iter().map(|o| o.report.errors).sum::<u64>() + app_errors) as f64,
    );
    extra.insert("file_scale".to_string(), sc.file_scale);
    extra.insert("files_written_mb".to_string(), files.written_bytes as f64 / 1e6);
    Ok(RunResult {
        benchmark: if with_app { "startup" } else { "throughput" }.to_string(),
        target,
        device: dev.name.clone(),
        scheduler: sc.scheduler.clone(),
        tunables: sc.tunables.clone(),
        workload: sc.workload.clone(),
        app: sc.app.clone().or_else(|| sc.app_cmd.clone()),
        rep: sc.rep,
        seed: sc.seed,
        startup_s,
        timed_out,
        throughput_mbps: read + write,
        read_mbps: read,
        write_mbps: write,
        sched_cpu_ns_per_request: None,
        extra,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_timed_and_killed_at_the_deadline() {
        use crate::real::runner::FixedLatencyBackend;
        let runner = Runner::new(FixedLatencyBackend { latency_ns: 1 });
        let ok = run_command_timed(&runner, "true", runner.now() + 10 * SEC).expect("runs");
        assert!(!ok.timed_out && ok.errors == 0);
        assert!(ok.startup_s.is_some_and(|s| s > 0.0 && s < 5.0));
        let failed = run_command_timed(&runner, "exit 3", runner.now() + 10 * SEC).expect("runs");
        assert_eq!((failed.timed_out, failed.errors), (false, 1));
        let t0 = std::time::Instant::now();
        let deadline = runner.now() + SEC / 5;
        let slow = run_command_timed(&runner, "sleep 30; sleep 30", deadline).expect("runs");
        assert!(slow.timed_out && slow.startup_s.is_none());
        assert_eq!(slow.end, deadline);
        assert!(t0.elapsed() < Duration::from_secs(5), "the command's group was killed");
    }

    #[test]
    fn settings_scale_file_sizes() {
        let s = settings_for(Era::Current, true, 0.01);
        assert_eq!(s.file_bytes, 5 << 20);
        assert!(s.maxrate_kib_s.is_some());
        assert!(settings_for(Era::Current, false, 1.0).maxrate_kib_s.is_none());
        let p = settings_for(Era::Paper, false, 0.001);
        assert_eq!(p.file_bytes, 5 << 20);
        assert_eq!(p.rand_files, RandFiles::Shared(50 << 20));
        assert_eq!(scaled(100, 0.5), 1 << 20);
    }
}
