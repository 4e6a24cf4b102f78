//! The real targets' [`Testbed`]: the S timeline of [`crate::timeline`] in real time, for any [`IoBackend`].
//!
//! 1. [`prepare`]: build the background workload (era settings, file sizes times `file_scale`) and the application
//!    profile, and create or reuse their files in `DIR/bfq-files/`.
//! 2. [`run_timeline`]: `sync` and drop caches, then the timeline's steps, each when the runner's clock reaches
//!    its time. The application is a profile replay (its start-up time is the replay's own measure: start to last
//!    completion) or a real command `app_cmd` (the wall clock from spawning `/bin/sh -c CMD` to its exit; past the
//!    timeout its process group is killed).
//! 3. Throughput = sectors read and written by the device during the window, from `/sys/block/<dev>/stat` deltas
//!    (what iostat reports), in MB/s (10^6 B/s). The processes' own byte counts over the same window are reported
//!    too (`extra.proc_read_mbps`, `extra.proc_write_mbps`): they include page-cache hits, the device figures do
//!    not.

use super::app_process::{run_child, AppSpec};
use super::files::{prepare_files, FileSet};
use super::runner::{IoBackend, ProcId, Runner};
use super::sys::{self, BlockDev, CpuStat, DiskStat};
use super::{RealError, RealRun};
use crate::result::Measured;
use crate::scenario::{load_profile, Era};
use crate::timeline::{self, Plan, Span, Testbed};
use bfq_sched::Time;
use bfq_workload::profile::Profile;
use bfq_workload::startup::Startup;
use bfq_workload::workloads::{self, RandFiles, Workload, WorkloadSettings};
use bfq_workload::{FileId, Process};
use std::sync::Arc;
use std::time::Duration;

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
    let mut s = era.settings(with_app);
    if scale != 1.0 {
        s.file_bytes = scaled(s.file_bytes, scale);
        if let RandFiles::Shared(b) = s.rand_files {
            s.rand_files = RandFiles::Shared(scaled(b, scale));
        }
    }
    s
}

/// Builds the run's processes and creates (or reuses) its files under `run.dir`; `rotational` decides the writer
/// cap as in the simulator.
pub fn prepare(run: &RealRun, rotational: bool) -> Result<Prepared, RealError> {
    let exp = run.exp;
    let with_app = run.app.is_some();
    let settings = settings_for(exp.settings.era, with_app, exp.settings.real.file_scale);
    let workload = workloads::build(run.workload, &settings, rotational, 0, exp.settings.seed)
        .map_err(|e| RealError::Invalid(format!("workload '{}': {}", run.workload, e)))?;
    let app_base = workload.files.len() as FileId;
    let profile = match (run.app, &exp.settings.real.app_cmd) {
        (Some(app), None) => Some(Arc::new(load_profile(app)?)),
        _ => None,
    };
    let mut specs = workload.files.clone();
    if let Some(p) = &profile {
        specs.extend(p.files.iter().cloned());
    }
    let files = prepare_files(run.dir, &specs)?;
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
    /// CPU time of the application's own process (user + system), s, when it ran as one.
    cpu_s: Option<f64>,
    /// Wall time from spawning the application's process to its exit, s, when it ran as one.
    wall_s: Option<f64>,
    /// The application's request latencies, ns, when it ran as a process.
    latencies_ns: Vec<u64>,
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
                cpu_s: None,
                wall_s: Some((end - start) as f64 / 1e9),
                latencies_ns: Vec::new(),
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
                cpu_s: None,
                wall_s: None,
                latencies_ns: Vec::new(),
            }
        }
    };
    Ok(out)
}

/// Replays `app` (files `paths`) in its own process `exe replay-app` until `deadline` (runner time).
fn run_app_process<B: IoBackend>(
    runner: &Runner<B>,
    exe: &std::path::Path,
    app: &str,
    paths: Vec<std::path::PathBuf>,
    deadline: Time,
) -> Result<AppEnd, RealError> {
    let start = runner.now();
    let spec = AppSpec {
        app: app.to_string(),
        paths,
        timeout_ns: deadline.saturating_sub(start),
    };
    let until = std::time::Instant::now() + Duration::from_nanos(spec.timeout_ns);
    let child = run_child(exe, &spec, until)?;
    let end = runner.now();
    Ok(match child.report {
        Some(r) if r.startup_ns.is_some() => AppEnd {
            startup_s: r.startup_ns.map(|ns| ns as f64 / 1e9),
            timed_out: false,
            end,
            errors: r.errors,
            cpu_s: Some(r.user_s + r.sys_s),
            wall_s: Some(child.wall_ns as f64 / 1e9),
            latencies_ns: r.latencies_ns,
        },
        r => AppEnd {
            startup_s: None,
            timed_out: true,
            end: deadline.min(end),
            errors: r.map_or(0, |r| r.errors),
            cpu_s: None,
            wall_s: None,
            latencies_ns: Vec::new(),
        },
    })
}

/// The real targets as a [`Testbed`]: each step waits for the runner's clock to reach its time, then acts; the
/// window is read from the device's counters and the processes' byte counts when it opens and closes.
struct RealBed<'a, B: IoBackend> {
    runner: Runner<B>,
    dev: &'a BlockDev,
    background: Vec<Box<dyn Process>>,
    app_cmd: Option<&'a str>,
    app: Option<(Arc<Profile>, FileId)>,
    /// Run the profile in its own process with this bfq binary (kernel target only).
    app_exe: Option<(&'a std::path::Path, &'a str, Vec<std::path::PathBuf>)>,
    app_id: Option<ProcId>,
    app_end: Option<AppEnd>,
    opened: Option<Sample>,
    closed: Option<Sample>,
}

/// Counters read when the window opens and closes.
#[derive(Debug, Clone, Copy)]
struct Sample {
    disk: DiskStat,
    /// Bytes (read, written) by the runner's processes.
    bytes: (u64, u64),
    /// The machine's CPU counters.
    cpu: Option<CpuStat>,
    /// CPU time (user + system) of this process's threads and of its reaped children, s.
    own_cpu_s: f64,
}

impl<B: IoBackend> RealBed<'_, B> {
    fn sample(&self) -> Result<Sample, RealError> {
        let (su, ss) = sys::cpu_times(libc::RUSAGE_SELF);
        let (cu, cs) = sys::cpu_times(libc::RUSAGE_CHILDREN);
        Ok(Sample {
            disk: self.dev.stat()?,
            bytes: self.runner.bytes(),
            cpu: CpuStat::read(),
            own_cpu_s: su + ss + cu + cs,
        })
    }
}

impl<B: IoBackend> Testbed for RealBed<'_, B> {
    type Error = RealError;
    fn start_background(&mut self) -> Result<(), RealError> {
        for p in std::mem::take(&mut self.background) {
            self.runner.spawn(0, p)?;
        }
        Ok(())
    }
    fn open_window(&mut self, t: Time) -> Result<(), RealError> {
        self.runner.sleep_until(t);
        self.opened = Some(self.sample()?);
        Ok(())
    }
    fn drop_caches_at(&mut self, t: Time) -> Result<(), RealError> {
        self.runner.sleep_until(t);
        sys::drop_caches()
    }
    fn run_app(&mut self, at: Time, deadline: Time) -> Result<Option<Time>, RealError> {
        self.runner.sleep_until(at);
        let end = match (self.app_cmd, &self.app) {
            (Some(cmd), _) => run_command_timed(&self.runner, cmd, deadline)?,
            (None, Some(_)) if self.app_exe.is_some() => {
                let (exe, app, paths) = self.app_exe.take().expect("checked");
                run_app_process(&self.runner, exe, app, paths, deadline)?
            }
            (None, Some((prof, base))) => {
                let id = self.runner.spawn(at, Box::new(Startup::new(prof.clone(), *base, at)))?;
                self.app_id = Some(id);
                match self.runner.wait_exit(id, deadline) {
                    Some(t) => AppEnd {
                        startup_s: None, // filled from the replay's report when the run finishes
                        timed_out: false,
                        end: t,
                        errors: 0,
                        cpu_s: None,
                        wall_s: None,
                        latencies_ns: Vec::new(),
                    },
                    None => {
                        self.runner.cancel(id);
                        AppEnd {
                            startup_s: None,
                            timed_out: true,
                            end: deadline,
                            errors: 0,
                            cpu_s: None,
                            wall_s: None,
                            latencies_ns: Vec::new(),
                        }
                    }
                }
            }
            (None, None) => unreachable!("a start-up run has an application or a command"),
        };
        let out = (!end.timed_out).then_some(end.end);
        self.app_end = Some(end);
        Ok(out)
    }
    fn run_until(&mut self, t: Time) -> Result<(), RealError> {
        self.runner.sleep_until(t);
        Ok(())
    }
    fn close_window(&mut self, t: Time) -> Result<(), RealError> {
        self.runner.sleep_until(t);
        self.closed = Some(self.sample()?);
        Ok(())
    }
}

/// Runs the prepared experiment on `backend` with the S timeline and returns what it measured on the device
/// `dev`. The caller has set up the device (scheduler) and locked memory.
pub fn run_timeline<B: IoBackend>(
    run: &RealRun,
    dev: &BlockDev,
    prepared: Prepared,
    backend: B,
) -> Result<Measured, RealError> {
    let Prepared {
        workload,
        profile,
        app_base,
        files,
    } = prepared;
    let exp = run.exp;
    // The kernel target replays the profile in its own process when the bfq binary is known.
    let app_exe = match (&exp.settings.real.app_exe, run.app, &profile) {
        (Some(bin), Some(app), Some(p)) if exp.settings.real.app_cmd.is_none() && backend.name() == "kernel" => {
            let paths = files.paths[app_base as usize..app_base as usize + p.files.len()].to_vec();
            Some((bin.as_path(), app, paths))
        }
        _ => None,
    };
    let load_1m = sys::loadavg_1m();
    sys::sync_all();
    sys::drop_caches()?;
    let mut bed = RealBed {
        runner: Runner::new(backend),
        dev,
        background: workload.processes,
        app_cmd: exp.settings.real.app_cmd.as_deref().filter(|_| run.app.is_some()),
        app: profile.map(|p| (p, app_base)),
        app_exe,
        app_id: None,
        app_end: None,
        opened: None,
        closed: None,
    };
    let plan = match run.app {
        Some(_) => Plan::Startup {
            warmup: exp.settings.warmup,
        },
        None => Plan::Throughput {
            duration: exp.settings.duration.unwrap_or(super::DEFAULT_DURATION),
            // The real targets have always measured `[1 s, duration]`, in both eras.
            paper_discard: false,
        },
    };
    let span: Span = timeline::run(&mut bed, plan)?;
    let (Some(o), Some(c)) = (bed.opened, bed.closed) else {
        unreachable!("the timeline opens and closes the window")
    };
    let RealBed {
        runner,
        app_id,
        app_end,
        ..
    } = bed;
    let outcomes = runner.finish();
    if let Some(o) = outcomes.iter().find(|o| o.error.is_some()) {
        return Err(RealError::Process {
            name: o.name.clone(),
            why: o.error.clone().unwrap_or_default(),
        });
    }
    let mut app_latencies = app_end.as_ref().map(|e| e.latencies_ns.clone()).unwrap_or_default();
    let mut app_errors = app_end.as_ref().map_or(0, |e| e.errors);
    let mut startup_s = app_end.as_ref().and_then(|e| e.startup_s);
    // A replayed start-up reports its own time (first request to last completion).
    if let (Some(id), false) = (app_id, span.timed_out) {
        let app = outcomes.get(id);
        startup_s = app.and_then(|o| o.report.startup_ns).map(|ns| ns as f64 / 1e9);
        if let Some(o) = app {
            app_latencies = crate::validate::latencies_ns(&o.report.requests);
        }
        app_errors += app.map_or(0, |o| o.report.errors);
    }
    let (s0, b0, s1, b1) = (o.disk, o.bytes, c.disk, c.bytes);
    let (w0, w1) = span.window;
    let d: DiskStat = s1.since(&s0);
    let secs = (w1.saturating_sub(w0)).max(1) as f64 / 1e9;
    let read = (d.read_sectors * sys::STAT_SECTOR_BYTES) as f64 / secs / 1e6;
    let write = (d.write_sectors * sys::STAT_SECTOR_BYTES) as f64 / secs / 1e6;
    let mut m = Measured::on(dev.name.clone()).with_mbps([read, write]);
    m.startup_s = startup_s;
    m.timed_out = span.timed_out;
    let extra = &mut m.extra;
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
    extra.insert("file_scale".to_string(), exp.settings.real.file_scale);
    // CPU: this loop device is CPU-bound, so every run says how busy the machine was.
    if let (Some(a), Some(b)) = (o.cpu, c.cpu) {
        if let Some(p) = b.busy_pct_since(&a) {
            extra.insert("cpu_busy_pct".to_string(), p);
        }
    }
    extra.insert("cpu_self_s".to_string(), c.own_cpu_s - o.own_cpu_s);
    if let Some(l) = load_1m {
        extra.insert("loadavg_1m".to_string(), l);
    }
    if exp.settings.app_latency && !app_latencies.is_empty() {
        crate::validate::insert_latencies(extra, &app_latencies);
    }
    if let Some(e) = &app_end {
        extra.insert("app_process".to_string(), if e.cpu_s.is_some() { 1.0 } else { 0.0 });
        if let Some(c) = e.cpu_s {
            extra.insert("app_cpu_s".to_string(), c);
        }
        if let Some(w) = e.wall_s {
            extra.insert("app_wall_s".to_string(), w);
        }
    }
    extra.insert("files_written_mb".to_string(), files.written_bytes as f64 / 1e6);
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bfq_sched::SEC;

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
