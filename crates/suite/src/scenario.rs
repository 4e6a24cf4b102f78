//! Throughput and start-up experiments on the simulator: the [`Testbed`] of virtual time, under the S timeline
//! of [`crate::timeline`]; also the settings eras, application profiles and the suite's error type.

use crate::experiment::Experiment;
use crate::real::RealError;
use crate::result::{Measured, RunResult};
use crate::suite::default_throughput_duration;
use crate::target::TargetError;
use crate::timeline::{self, Plan, Testbed};
use bfq_sched::text::one_line;
use bfq_sched::Time;
use bfq_sim::{HostConfig, Pid, SimError, Simulation};
use bfq_workload::profile::{self, Profile, ProfileError};
use bfq_workload::startup::Startup;
use bfq_workload::workloads::{self, WorkloadError, WorkloadSettings};
use bfq_workload::{FileId, Process};
use std::sync::Arc;

/// Which era of the S suite's settings to use (docs/BENCHMARKS.md, Eras).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// SYSTOR'12 paper: 5000 MiB sequential files, one shared 50000 MiB random file, no writer cap, no periodic
    /// sync.
    Paper,
    /// S as of November 2013, the version seed 004 used with BFQ v7r2 under Linux 3.13: the 2011 files, a
    /// 16 500 KiB/s writer cap on every device, no periodic sync, 60 s throughput runs
    /// ([`bfq_workload::WorkloadSettings::s2013`]).
    S2013,
    /// S 3.6: 500 MiB files, 4000 KB/s writer cap on rotational devices, a `sync` every 2 s when writers run.
    Current,
}

impl Era {
    /// Parses `paper`, `s2013` or `current`.
    pub fn parse(s: &str) -> Result<Era, ScenarioError> {
        match s {
            "paper" => Ok(Era::Paper),
            "s2013" => Ok(Era::S2013),
            "current" => Ok(Era::Current),
            _ => Err(ScenarioError::Input(format!(
                "unknown profile '{s}': use paper, s2013 or current"
            ))),
        }
    }
    /// Name as accepted by [`Era::parse`].
    pub fn name(self) -> &'static str {
        match self {
            Era::Paper => "paper",
            Era::S2013 => "s2013",
            Era::Current => "current",
        }
    }
    /// The read latency target of writeback throttling (blk-wbt) that a kernel of this era gives `scheduler` on
    /// `device`, ns, or `None` without it: the current era's kernels enable it on blk-mq devices for none (our
    /// noop), mq-deadline and kyber, with 75 ms on rotational devices and 2 ms on others; BFQ disables it when
    /// chosen; the legacy elevators of the paper era (3.13) have none (`../shared/docs/fidelity.md` §4,
    /// [`bfq_sim::host::wbt`]).
    pub fn wbt_target(self, scheduler: &str, device: &bfq_sched::DeviceInfo) -> Option<bfq_sched::Time> {
        let name = bfq_sched::registry::find(scheduler).map(|d| d.name)?;
        (self == Era::Current && matches!(name, "noop" | "mq-deadline" | "kyber"))
            .then(|| bfq_sim::host::WbtConfig::default_for(device.rotational, device.queue_depth).min_lat)
    }

    /// [`Era::wbt_target`] unless `override_us` sets the target (µs; 0: off).
    pub fn wbt_target_or(
        self,
        override_us: Option<u64>,
        scheduler: &str,
        device: &bfq_sched::DeviceInfo,
    ) -> Option<bfq_sched::Time> {
        match override_us {
            Some(0) => None,
            Some(us) => Some(us.saturating_mul(1_000)),
            None => self.wbt_target(scheduler, device),
        }
    }

    /// The era's background workload settings, for a run with or without an application.
    pub fn settings(self, with_app: bool) -> WorkloadSettings {
        match (self, with_app) {
            (Era::Paper, _) => WorkloadSettings::paper(),
            (Era::S2013, _) => WorkloadSettings::s2013(),
            (Era::Current, true) => WorkloadSettings::s36(),
            (Era::Current, false) => WorkloadSettings::s36_throughput(),
        }
    }
}

/// The simulated device of `exp`, the policy the host runs above it and the host's writeback-throttling target: for
/// md RAID1 the chosen policy runs on each member disk inside the device and the host runs a pass-through noop
/// without wbt (md is bio-based; the members' own wbt is not modelled); otherwise the host runs the chosen policy.
pub(crate) fn sim_stack(exp: &Experiment, cfg: &bfq_sim::device::DeviceConfig) -> Result<SimStack, ScenarioError> {
    let (dev, host) = cfg.build_stack(&exp.scheduler, &exp.tunables)?;
    let info = dev.info();
    Ok(match host {
        Some(name) => (dev, bfq_sched::build::<&str>(name, &info, &[])?, None),
        None => {
            let policy = bfq_sched::build(&exp.scheduler, &info, &exp.tunables)?;
            // 2.6.18 had no writeback throttling (blk-wbt came with 4.10) unless a target is asked for.
            let wbt = if exp.settings.kernel_2_6_18 && exp.settings.wbt_lat_us.is_none() {
                None
            } else {
                exp.settings
                    .era
                    .wbt_target_or(exp.settings.wbt_lat_us, &exp.scheduler, &info)
            };
            (dev, policy, wbt)
        }
    })
}

/// A simulated device, the host's policy above it and the host's writeback-throttling target (ns).
pub(crate) type SimStack = (
    Box<dyn bfq_sim::device::Device>,
    Box<dyn bfq_sched::Scheduler>,
    Option<bfq_sched::Time>,
);

/// Errors setting up or running an experiment. Bad user input keeps a one-line message saying what to use
/// instead; failures of the device model, the simulator or a real device keep their own error.
///
/// The message of every variant is complete and no variant reports a [`std::error::Error::source`], so that a
/// caller printing the whole chain (`{:#}` of `anyhow`) prints each cause once. Every message is one line: control
/// characters of the input it quotes are escaped ([`one_line`]).
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A bad parameter given by the user (unknown name, out-of-range value, options that do not go together);
    /// the message says which and what to use instead.
    #[error("{}", one_line(&.0.to_string()))]
    Input(String),
    /// A target that could not be understood or whose device model does not resolve.
    #[error("{}", one_line(&.0.to_string()))]
    Target(TargetError),
    /// A simulated device that is neither a preset nor a valid description.
    #[error("{}", one_line(&.0.to_string()))]
    Device(bfq_sim::device::DeviceError),
    /// A scheduler that does not exist, or a tunable it rejects.
    #[error("{}", one_line(&.0.to_string()))]
    Scheduler(bfq_sched::ConfigError),
    /// A background workload name that is not understood.
    #[error("{}", one_line(&error.to_string()))]
    Workload {
        /// The name given.
        workload: String,
        /// The workload grammar's error.
        error: WorkloadError,
    },
    /// An application whose profile could not be loaded.
    #[error("{}", one_line(&.0.to_string()))]
    App(AppError),
    /// The simulator could not be set up (e.g. the files do not fit on the device).
    #[error("{}", one_line(&.0.to_string()))]
    Sim(SimError),
    /// A real target failed (I/O error on the device, missing privileges, scheduler switch, ...).
    #[error("{}", one_line(&.0.to_string()))]
    Real(RealError),
    /// A simulator target was handed to the real-target runner.
    #[error(
        "target {} is not a real target: real runs take engine:DIR or kernel:DIR",
        one_line(target)
    )]
    Unavailable {
        /// The target, as written on the command line (`engine:/mnt/x`).
        target: String,
    },
}

/// `From` conversions into [`ScenarioError`] for the errors it wraps, each into its own variant.
macro_rules! wrap_errors {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        $(impl From<$ty> for ScenarioError {
            fn from(e: $ty) -> ScenarioError {
                ScenarioError::$variant(e)
            }
        })*
    };
}

wrap_errors!(
    Target(TargetError),
    Device(bfq_sim::device::DeviceError),
    Scheduler(bfq_sched::ConfigError),
    App(AppError),
    Sim(SimError),
    Real(RealError),
);

/// Why an application profile could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Neither a synthetic profile's name nor an existing file (bad user input).
    #[error(
        "unknown application '{}': use bash, xterm, konsole, gnome-terminal, lowriter (oowriter), or a profile file, \
         optionally followed by :zero-think",
        bfq_sched::text::one_line(.0)
    )]
    Unknown(String),
    /// The profile file could not be read.
    #[error("cannot read profile {path}: {error}")]
    Read {
        /// The path given.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The profile file could not be parsed.
    #[error("profile {path}: {error}")]
    Parse {
        /// The path given.
        path: String,
        /// What is wrong, and where.
        error: ProfileError,
    },
}

/// Loads an application profile by name (a synthetic profile) or from a file. A name or path ending in
/// `:zero-think` ([`profile::ZERO_THINK_SUFFIX`]) gives the profile without think times (S's replay).
pub fn load_profile(app: &str) -> Result<Profile, AppError> {
    if let Some(base) = app.strip_suffix(profile::ZERO_THINK_SUFFIX) {
        return load_profile(base).map(Profile::without_think);
    }
    if let Some(p) = profile::synthetic(app) {
        return Ok(p);
    }
    let path = std::path::Path::new(app);
    // A name with a directory part or a `.profile` ending is a file the user meant: say it is missing, not that the
    // application is unknown.
    let looks_like_a_file = app.contains('/') || app.ends_with(".profile");
    if path.exists() || looks_like_a_file {
        let text = std::fs::read_to_string(path).map_err(|error| AppError::Read {
            path: app.to_string(),
            error,
        })?;
        return Profile::parse_file(&text).map_err(|error| AppError::Parse {
            path: app.to_string(),
            error,
        });
    }
    Err(AppError::Unknown(app.to_string()))
}

/// The simulator as a [`Testbed`]: steps are scheduled in virtual time, and the window's throughput is read from
/// the simulation's metrics afterwards.
struct SimBed {
    sim: Simulation,
    background: Vec<Box<dyn Process>>,
    app: Option<(Arc<Profile>, FileId)>,
    app_pid: Option<Pid>,
    startup_s: Option<f64>,
}

impl Testbed for SimBed {
    type Error = std::convert::Infallible;
    fn start_background(&mut self) -> Result<(), Self::Error> {
        for p in self.background.drain(..) {
            self.sim.spawn(0, p);
        }
        Ok(())
    }
    fn open_window(&mut self, _t: Time) -> Result<(), Self::Error> {
        Ok(())
    }
    fn drop_caches_at(&mut self, t: Time) -> Result<(), Self::Error> {
        self.sim.drop_caches_at(t);
        Ok(())
    }
    fn run_app(&mut self, at: Time, deadline: Time) -> Result<Option<Time>, Self::Error> {
        let Some((prof, base)) = self.app.clone() else {
            return Ok(None);
        };
        let pid = self.sim.spawn(at, Box::new(Startup::new(prof, base, at)));
        self.app_pid = Some(pid);
        let end = self.sim.run_until_exit(pid, deadline);
        let done = self.sim.report(pid).and_then(|r| r.startup_ns);
        Ok(match (end, done) {
            (Some(e), Some(ns)) => {
                self.startup_s = Some(ns as f64 / 1e9);
                Some(e)
            }
            _ => None,
        })
    }
    fn run_until(&mut self, t: Time) -> Result<(), Self::Error> {
        self.sim.run_until(t);
        Ok(())
    }
    fn close_window(&mut self, _t: Time) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// The simulated host of `exp` on `device`: the default host with `exp`'s CPU timing and timer tick, and its
/// readahead window ([`crate::experiment::Settings`]), else the one recorded with a measured device (the kernel's
/// `read_ahead_kb` for that device), else the default; a measured device's recorded CPU costs of a buffered read
/// replace the default ones.
pub(crate) fn host_config(exp: &Experiment, device: &bfq_sim::device::DeviceConfig) -> HostConfig {
    let default = HostConfig::default();
    let costs = device.host_costs();
    let host = HostConfig {
        syscall_ns: costs.map_or(default.syscall_ns, |c| c.syscall_ns),
        copy_ns_per_kib: costs.map_or(default.copy_ns_per_kib, |c| c.copy_ns_per_kib),
        time_policy: exp.settings.time_policy,
        timer_hz: exp.settings.timer_hz,
        read_ahead_kb: exp
            .settings
            .read_ahead_kb
            .or(device.read_ahead_kb())
            .unwrap_or(default.read_ahead_kb),
        ..default
    };
    if exp.settings.kernel_2_6_18 {
        linux_2_6_18_writeback(host)
    } else {
        host
    }
}

/// CPUs of seed 003's host (an IBM x3650 with "4 CPUs"), for 2.6.18's writeback chunk.
pub const SEED_003_CPUS: u64 = 4;

/// `host` with 2.6.18's writeback (seed 003's RHEL 5 kernel, [`crate::experiment::Settings::kernel_2_6_18`]):
/// throttled writers write dirty pages back themselves in chunks of `sync_writeback_pages()` (6 MiB here,
/// [`bfq_sim::host::WriterWriteback::linux_2_6_18`]), and the dirty limit is 2.6.18's `vm_dirty_ratio` default of
/// 40 % (the background ratio, 10 %, is the same as today's). docs/DEVICES.md, "Host: 2.6.18 writeback".
pub fn linux_2_6_18_writeback(host: HostConfig) -> HostConfig {
    HostConfig {
        dirty_ratio: 40,
        dirty_background_ratio: 10,
        dirty_throttle: bfq_sim::host::DirtyThrottle::WriteBack(bfq_sim::host::WriterWriteback::linux_2_6_18(
            host.memory_bytes,
            SEED_003_CPUS,
        )),
        ..host
    }
}

/// The device preset or TOML file `device` with `exp`'s device settings applied: with
/// [`crate::experiment::Settings::device_reordering`] off, the SSD model serves its internal queue oldest first
/// (`stream_max_wait_us = 0`); a model without such a queue is an input error.
pub(crate) fn device_config(exp: &Experiment, device: &str) -> Result<bfq_sim::device::DeviceConfig, ScenarioError> {
    let mut cfg = bfq_sim::device::resolve(device)?;
    if !exp.settings.device_reordering {
        match &mut cfg {
            bfq_sim::device::DeviceConfig::Ssd(c) => c.stream_max_wait_us = 0.0,
            other => {
                return Err(ScenarioError::Input(format!(
                    "device_reordering=off applies to the SSD model (its stream-favouring queue) only, not to {}",
                    other.name()
                )))
            }
        }
    }
    Ok(cfg)
}

/// Runs a throughput or start-up experiment (`exp.work`) on the simulator target `exp.target`.
pub fn run_sim(exp: &Experiment) -> Result<RunResult, ScenarioError> {
    let crate::target::Target::Sim(device) = &exp.target else {
        return Err(ScenarioError::Input(format!(
            "target {} is not a simulator target",
            exp.target
        )));
    };
    let (Some(workload), app) = (exp.work.background_workload(), exp.work.app()) else {
        return Err(ScenarioError::Input(format!(
            "the {} benchmark is not a throughput or start-up run",
            exp.work.benchmark()
        )));
    };
    let dev_cfg = device_config(exp, device)?;
    let (dev, policy, wbt_target) = sim_stack(exp, &dev_cfg)?;
    let info = dev.info();
    let host = HostConfig {
        wbt_target,
        ..host_config(exp, &dev_cfg)
    };
    let mut sim = Simulation::new(dev, policy, host, exp.settings.seed);
    let wl = workloads::build(
        workload,
        &exp.settings.era.settings(app.is_some()),
        info.rotational,
        0,
        exp.settings.seed,
    )
    .map_err(|error| ScenarioError::Workload {
        workload: workload.to_string(),
        error,
    })?;
    for f in &wl.files {
        sim.add_file(f)?;
    }
    let app = match app {
        Some(app) => {
            let prof = Arc::new(load_profile(app)?);
            let base = wl.files.len() as FileId;
            for f in &prof.files {
                sim.add_file(f)?;
            }
            Some((prof, base))
        }
        None => None,
    };
    let plan = match app {
        Some(_) => Plan::Startup {
            warmup: exp.settings.warmup,
        },
        None => Plan::Throughput {
            duration: exp
                .settings
                .duration
                .unwrap_or(default_throughput_duration(exp.settings.era)),
            paper_discard: exp.settings.era == Era::Paper,
        },
    };
    let mut bed = SimBed {
        sim,
        background: wl.processes,
        app,
        app_pid: None,
        startup_s: None,
    };
    let Ok(span) = timeline::run(&mut bed, plan);
    let (w0, w1) = span.window;
    let sim = &bed.sim;
    let m = sim.metrics();
    let mut measured = Measured::on(dev_cfg.name()).with_mbps(m.mbps_between(w0, w1));
    measured.startup_s = bed.startup_s;
    measured.timed_out = span.timed_out;
    let extra = &mut measured.extra;
    extra.insert("block_requests".to_string(), m.block_requests as f64);
    extra.insert("device_requests".to_string(), m.device_requests as f64);
    extra.insert("read_latency_mean_ms".to_string(), m.latency[0].mean_ns() as f64 / 1e6);
    extra.insert("read_latency_max_ms".to_string(), m.latency[0].max_ns as f64 / 1e6);
    // The longest a request waited in the policy before its dispatch (seed 001's bounded wait); writes only for
    // runs that wrote.
    extra.insert("read_wait_max_ms".to_string(), m.dispatch_wait_max[0] as f64 / 1e6);
    if m.latency[1].count > 0 {
        extra.insert("write_wait_max_ms".to_string(), m.dispatch_wait_max[1] as f64 / 1e6);
    }
    extra.insert("window_s".to_string(), (w1 - w0) as f64 / 1e9);
    if exp.settings.app_latency {
        if let Some(r) = bed.app_pid.and_then(|pid| sim.report(pid)) {
            crate::validate::insert_latencies(extra, &crate::validate::latencies_ns(&r.requests));
        }
    }
    let inserted = sim.inserted_requests();
    measured.sched_cpu_ns_per_request =
        (exp.settings.time_policy && inserted > 0).then(|| m.sched_cpu_ns as f64 / inserted as f64);
    Ok(RunResult::new(exp, measured))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::Work;

    #[test]
    fn an_unreadable_profile_keeps_its_io_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let app = dir.path().to_string_lossy().into_owned();
        // A directory exists but cannot be read as a profile: an I/O error, not bad input.
        match load_profile(&app) {
            Err(AppError::Read { path, error }) => {
                assert_eq!(path, app);
                assert_eq!(error.raw_os_error(), Some(libc::EISDIR), "{error}");
            }
            other => panic!("expected a read error, got {other:?}"),
        }
        // A path that does not exist is a missing file, not an unknown application.
        match load_profile("/nonexistent-dir/app.profile") {
            Err(AppError::Read { error, .. }) => assert_eq!(error.kind(), std::io::ErrorKind::NotFound),
            other => panic!("expected a read error, got {other:?}"),
        }
        // `:zero-think` gives the same requests with every think time 0 (S's replay); the derived think times are
        // not all 0 (xterm's recording has CPU gaps of up to milliseconds).
        let with = load_profile("xterm").expect("synthetic");
        let without = load_profile("xterm:zero-think").expect("synthetic, zero think");
        assert!(with.requests.iter().any(|r| r.think_us > 0));
        assert!(without.requests.iter().all(|r| r.think_us == 0));
        assert_eq!(
            with.requests
                .iter()
                .map(|r| (r.file, r.offset, r.len))
                .collect::<Vec<_>>(),
            without
                .requests
                .iter()
                .map(|r| (r.file, r.offset, r.len))
                .collect::<Vec<_>>()
        );
        assert!(matches!(load_profile("emacs:zero-think"), Err(AppError::Unknown(_))));
        let e = ScenarioError::from(load_profile("emacs").expect_err("unknown"));
        assert!(matches!(e, ScenarioError::App(AppError::Unknown(_))), "{e:?}");
        assert!(
            e.to_string().starts_with("unknown application 'emacs': use bash"),
            "{e}"
        );
    }

    #[test]
    fn simulator_errors_keep_their_kind_and_message() {
        let run = |device: &str, sched: &str, workload: &str| {
            Experiment::sim(device, sched, Work::background(workload, None))
                .run()
                .expect_err("fails")
        };
        let e = run("floppy", "noop", "1r-seq");
        assert!(matches!(e, ScenarioError::Device(_)), "{e:?}");
        // The message is whole: printing the chain adds nothing.
        assert!(std::error::Error::source(&e).is_none());
        let e = run("seagate-hdd", "fastest", "1r-seq");
        assert!(matches!(e, ScenarioError::Scheduler(_)), "{e:?}");
        assert!(e.to_string().starts_with("unknown scheduler 'fastest'"), "{e}");
        let e = run("seagate-hdd", "noop", "12x-seq");
        assert!(matches!(e, ScenarioError::Workload { .. }), "{e:?}");
        // The grammar's own message, as `suite` prints it (it used to be the bare name: "workload '12x-seq': 12x-seq").
        assert!(
            e.to_string().starts_with("unknown workload `12x-seq`: expected idle"),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_none());
    }
}
