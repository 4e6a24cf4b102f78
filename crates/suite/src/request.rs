//! What a user asks for, before it is checked: the options of `bfq run` ([`RunRequest`]) and of `bfq suite`
//! ([`SuiteRequest`]) as plain values, turned here into [`Experiment`]s and a [`SuiteConfig`] with the one-line
//! messages of the command line.
//!
//! The `bfq` binary and the Python package (`python/`) both go through these types, so that the same inputs give the
//! same experiments, the same numbers and the same error messages, whichever front end was used.

use crate::experiment::{Experiment, RealOptions, Settings, Work};
use crate::limits;
use crate::report::outdir::ReportDir;
use crate::report::{write_all, ReportMeta};
use crate::result::RunResult;
use crate::scenario::{load_profile, Era, ScenarioError};
use crate::suite::{Benchmark, SuiteConfig};
use crate::target::Target;
use crate::timeline::STARTUP_WARMUP;
use bfq_workload::workloads::WorkloadSpec;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Target of `bfq suite` when none is given.
pub const DEFAULT_TARGET: &str = "sim:seagate-hdd";
/// Schedulers of `bfq suite` when none are given (the seeds' four), comma-separated.
pub const DEFAULT_SCHEDULERS: &str = "bfq,cfq,deadline,noop";

/// The options of `bfq run`: one simulated throughput run, or one start-up of an application under a background
/// workload. [`RunRequest::default`] holds the command line's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRequest {
    /// Device preset or device TOML file.
    pub device: String,
    /// Scheduler name.
    pub sched: String,
    /// Background workload (`10r-seq`).
    pub workload: String,
    /// Application whose start-up is measured; `None` measures throughput only.
    pub app: Option<String>,
    /// Seed of every random stream.
    pub seed: u64,
    /// Scheduler tunables as `key=value`.
    pub tunables: Vec<String>,
    /// Settings era, `paper` or `current`.
    pub profile: String,
    /// Simulated seconds of a throughput run (checked by [`limits::duration_ns`]).
    pub duration_s: f64,
    /// Measure the wall-clock CPU time spent inside the policy (not reproducible).
    pub cpu_time: bool,
    /// The host kernel's timer tick, ticks per second ([`Settings::timer_hz`]); `None`: exact timers.
    pub hz: Option<u32>,
}

impl Default for RunRequest {
    /// The defaults of `bfq run`: bfq on the Seagate HDD under `10r-seq`, no application, seed 1, the current era,
    /// 20 s.
    fn default() -> Self {
        RunRequest {
            device: "seagate-hdd".to_string(),
            sched: "bfq".to_string(),
            workload: "10r-seq".to_string(),
            app: None,
            seed: 1,
            tunables: Vec::new(),
            profile: "current".to_string(),
            duration_s: 20.0,
            cpu_time: false,
            hz: None,
        }
    }
}

impl RunRequest {
    /// The experiment asked for, with the duration and the era checked (in that order, as `bfq run` checks them).
    pub fn experiment(&self) -> Result<Experiment, ScenarioError> {
        let duration = limits::duration_ns(self.duration_s).map_err(|e| ScenarioError::Input(e.to_string()))?;
        let work = Work::background(&self.workload, self.app.as_deref());
        let mut exp = Experiment::new(Target::Sim(self.device.clone()), &self.sched, work);
        exp.settings.seed = self.seed;
        exp.tunables = self.tunables.clone();
        exp.settings.era = Era::parse(&self.profile)?;
        exp.settings.duration = Some(duration);
        exp.settings.time_policy = self.cpu_time;
        exp.settings.timer_hz = self.hz;
        Ok(exp)
    }

    /// Checks everything [`RunRequest::run`] would refuse, without simulating: the duration, the era, the device, the
    /// scheduler with its tunables on that device, the workload and the application, in the order the run meets
    /// them, with the same messages.
    pub fn check(&self) -> Result<(), ScenarioError> {
        RunChecker::default().check(self)
    }

    /// Runs the experiment on the simulator.
    pub fn run(&self) -> Result<RunResult, ScenarioError> {
        self.experiment()?.run()
    }
}

/// Checks many [`RunRequest`]s as [`RunRequest::check`] does, each device, scheduler setting, workload and
/// application once (a sweep repeats them in thousands of points).
#[derive(Default)]
pub struct RunChecker {
    devices: HashMap<String, bfq_sched::DeviceInfo>,
    schedulers: HashSet<(String, String, Vec<String>)>,
    workloads: HashSet<String>,
    apps: HashSet<String>,
}

impl RunChecker {
    /// Checks `req` (see [`RunRequest::check`]).
    pub fn check(&mut self, req: &RunRequest) -> Result<(), ScenarioError> {
        let exp = req.experiment()?;
        let info = match self.devices.get(&req.device) {
            Some(info) => info.clone(),
            None => {
                let info = bfq_sim::device::resolve(&req.device)?.build().info();
                self.devices.insert(req.device.clone(), info.clone());
                info
            }
        };
        let key = (req.device.clone(), exp.scheduler.clone(), exp.tunables.clone());
        if !self.schedulers.contains(&key) {
            bfq_sched::build(&exp.scheduler, &info, &exp.tunables)?;
            self.schedulers.insert(key);
        }
        if !self.workloads.contains(&req.workload) {
            WorkloadSpec::parse(&req.workload).map_err(|error| ScenarioError::Workload {
                workload: req.workload.clone(),
                error,
            })?;
            self.workloads.insert(req.workload.clone());
        }
        if let Some(app) = &req.app {
            if !self.apps.contains(app) {
                load_profile(app)?;
                self.apps.insert(app.clone());
            }
        }
        Ok(())
    }
}

/// The text `bfq run --json` prints for a result (without the final newline).
pub fn result_json(r: &RunResult) -> String {
    // A RunResult holds strings, numbers, booleans, lists and a map with string keys: it always serialises.
    serde_json::to_string_pretty(r).expect("a RunResult serialises to JSON")
}

/// The options of `bfq suite`, as given: lists may hold comma-separated items, numbers the user typed as text are
/// text, so that [`SuiteRequest::config`] gives the command line's messages. [`SuiteRequest::new`] holds the
/// command line's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteRequest {
    /// Benchmark name.
    pub benchmark: String,
    /// Targets, each one or more comma-separated (`sim:seagate-hdd,plextor-ssd`).
    pub targets: Vec<String>,
    /// Schedulers, each one or more comma-separated.
    pub schedulers: Vec<String>,
    /// Workloads (comma-separated items allowed); `None` for the benchmark's.
    pub workloads: Option<Vec<String>>,
    /// Applications of the startup benchmark (comma-separated items allowed); `None` for xterm.
    pub apps: Option<Vec<String>>,
    /// Repetitions as typed; `None` for the benchmark's default.
    pub reps: Option<String>,
    /// Settings era, `paper` or `current`; `None` for current.
    pub profile: Option<String>,
    /// Seed of the first repetition.
    pub seed: u64,
    /// Tunables `key=value`, each applied to every chosen scheduler that has the key.
    pub tunables: Vec<String>,
    /// Measured simulated seconds; `None` for the benchmark's.
    pub duration_s: Option<f64>,
    /// iozone file size per thread, MiB.
    pub file_size_mib: Option<u64>,
    /// Measure the policy's wall-clock CPU time.
    pub cpu_time: bool,
    /// Real targets: allow a device `bfq loopdev` did not create.
    pub allow_device: bool,
    /// Real targets, startup: a real command to time instead of the profile.
    pub app_cmd: Option<String>,
    /// Real targets: factor on the background file sizes.
    pub file_scale: Option<f64>,
    /// Background warm-up before the application starts, seconds.
    pub warmup_s: Option<f64>,
}

impl SuiteRequest {
    /// `benchmark` with every option at the command line's default.
    pub fn new(benchmark: &str) -> SuiteRequest {
        SuiteRequest {
            benchmark: benchmark.to_string(),
            targets: vec![DEFAULT_TARGET.to_string()],
            schedulers: vec![DEFAULT_SCHEDULERS.to_string()],
            workloads: None,
            apps: None,
            reps: None,
            profile: None,
            seed: 1,
            tunables: Vec::new(),
            duration_s: None,
            file_size_mib: None,
            cpu_time: false,
            allow_device: false,
            app_cmd: None,
            file_scale: None,
            warmup_s: None,
        }
    }

    /// Checks the options and turns them into a suite configuration, with one-line errors. [`crate::suite::plan`]
    /// checks the rest.
    pub fn config(&self) -> Result<SuiteConfig, ScenarioError> {
        let input = |e: limits::OutOfRange| ScenarioError::Input(e.to_string());
        let benchmark = Benchmark::parse(&self.benchmark)?;
        let mut targets = Vec::new();
        for t in &self.targets {
            targets.extend(Target::parse_list(t)?);
        }
        let reps = match &self.reps {
            None => None,
            Some(r) => Some(r.trim().parse::<u32>().map_err(|_| {
                ScenarioError::Input(bfq_sched::text::one_line(&format!(
                    "--reps '{r}' is not a number: give 1..={}",
                    limits::MAX_REPS
                )))
            })?),
        };
        let duration = self.duration_s.map(limits::duration_ns).transpose().map_err(input)?;
        let file_size = self
            .file_size_mib
            .map(limits::iozone_file_bytes)
            .transpose()
            .map_err(input)?;
        let file_scale = self
            .file_scale
            .map(limits::file_scale)
            .transpose()
            .map_err(input)?
            .unwrap_or(1.0);
        let real = RealOptions {
            allow_device: self.allow_device,
            app_cmd: self.app_cmd.clone(),
            file_scale,
            ..RealOptions::default()
        };
        if targets.iter().all(Target::is_sim) {
            let real_only = [
                ("--allow-device", self.allow_device),
                ("--app-cmd", self.app_cmd.is_some()),
                ("--file-scale", self.file_scale.is_some()),
            ];
            if let Some((opt, _)) = real_only.iter().find(|(_, given)| *given) {
                return Err(ScenarioError::Input(format!(
                    "{opt} applies to the real targets (engine:DIR, kernel:DIR) only, and every --target here is a \
                     simulator: drop it, or add a real target"
                )));
            }
        }
        let era = self
            .profile
            .as_deref()
            .map(Era::parse)
            .transpose()?
            .unwrap_or(Era::Current);
        let warmup = self.warmup_s.map(limits::warmup_ns).transpose().map_err(input)?;
        Ok(SuiteConfig {
            benchmark,
            targets,
            schedulers: split_items(&self.schedulers),
            tunables: self.tunables.clone(),
            workloads: self.workloads.as_deref().map(split_items),
            apps: self.apps.as_deref().map(split_items),
            reps,
            file_size,
            settings: Settings {
                era,
                duration,
                seed: self.seed,
                time_policy: self.cpu_time,
                app_latency: false,
                real,
                warmup: warmup.unwrap_or(STARTUP_WARMUP),
                wbt_lat_us: None,
                ..Settings::default()
            },
        })
    }

    /// Worker threads for the planned `jobs` of `cfg` when `requested` were asked for (`None`: every core): checked
    /// against [`limits::jobs`], never more than the jobs, and one whenever a target is real (real targets measure
    /// wall-clock time on a real device, so their runs must not overlap).
    pub fn threads(cfg: &SuiteConfig, requested: Option<usize>, jobs: usize) -> Result<usize, ScenarioError> {
        let threads =
            limits::jobs(requested.unwrap_or_else(available_cores)).map_err(|e| ScenarioError::Input(e.to_string()))?;
        let real = cfg.targets.iter().any(|t| !matches!(t, Target::Sim(_)));
        Ok(if real { 1 } else { limits::worker_threads(threads, jobs) })
    }

    /// The `bfq suite` command line that asks for the same runs (shell-quoted), recorded in the report of a front end
    /// that has no command line of its own; `out` is the report directory.
    pub fn command_line(&self, out: Option<&str>) -> String {
        let mut a: Vec<String> = vec!["suite".into(), self.benchmark.clone()];
        let mut opt = |name: &str, value: String| {
            a.push(format!("--{name}"));
            a.push(value);
        };
        opt("target", self.targets.join(","));
        opt("sched", self.schedulers.join(","));
        if let Some(w) = &self.workloads {
            opt("workloads", w.join(","));
        }
        if let Some(x) = &self.apps {
            opt("apps", x.join(","));
        }
        if let Some(r) = &self.reps {
            opt("reps", r.clone());
        }
        if let Some(p) = &self.profile {
            opt("profile", p.clone());
        }
        opt("seed", self.seed.to_string());
        for t in &self.tunables {
            opt("tune", t.clone());
        }
        if let Some(d) = self.duration_s {
            opt("duration", d.to_string());
        }
        if let Some(f) = self.file_size_mib {
            opt("file-size", f.to_string());
        }
        if let Some(c) = &self.app_cmd {
            opt("app-cmd", c.clone());
        }
        if let Some(f) = self.file_scale {
            opt("file-scale", f.to_string());
        }
        if let Some(w) = self.warmup_s {
            opt("warmup", w.to_string());
        }
        if let Some(o) = out {
            opt("out", o.to_string());
        }
        if self.cpu_time {
            a.push("--cpu-time".into());
        }
        if self.allow_device {
            a.push("--allow-device".into());
        }
        crate::cmdline::join(a)
    }
}

/// The metadata of a `bfq suite` report: the title names the benchmark; `command` is the command line recorded.
pub fn suite_meta(cfg: &SuiteConfig, command: String) -> ReportMeta {
    ReportMeta {
        title: format!("bfq suite: {}", cfg.benchmark.name()),
        ..ReportMeta::new(command, cfg.settings.seed)
    }
}

/// Writes every report file of `results` into `dir` (prepared before the runs, at path `out`) and returns their
/// paths; the error is the command line's one-line message.
pub fn write_report(
    dir: ReportDir,
    out: &Path,
    results: &[RunResult],
    meta: &ReportMeta,
) -> Result<Vec<PathBuf>, ScenarioError> {
    dir.commit(|staging| write_all(staging, results, meta, &[]))
        .map_err(|e| ScenarioError::Input(format!("cannot write the report to {}: {e}", out.display())))
}

/// Every core of the machine (at least one).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The items of comma-separated lists, trimmed, empty ones dropped.
pub fn split_items(lists: &[String]) -> Vec<String> {
    lists
        .iter()
        .flat_map(|l| l.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_request_checks_in_the_order_the_run_meets_its_inputs() {
        let bad = |f: &dyn Fn(&mut RunRequest)| {
            let mut r = RunRequest::default();
            f(&mut r);
            let checked = r.check().expect_err("refused").to_string();
            let ran = r.run().expect_err("refused").to_string();
            assert_eq!(checked, ran, "check and run give the same message");
            checked
        };
        assert!(bad(&|r| r.duration_s = 0.0).starts_with("--duration 0 is out of range"));
        assert!(bad(&|r| r.profile = "future".into()).starts_with("unknown profile 'future'"));
        assert!(bad(&|r| r.device = "floppy".into()).starts_with("unknown device 'floppy'"));
        assert!(bad(&|r| r.sched = "fastest".into()).starts_with("unknown scheduler 'fastest'"));
        assert!(bad(&|r| r.tunables = vec!["slice_idle=-1".into()]).contains("slice_idle"));
        assert!(bad(&|r| r.workload = "3x".into()).starts_with("unknown workload `3x`"));
        assert!(bad(&|r| r.app = Some("emacs".into())).starts_with("unknown application 'emacs'"));
        // Two bad inputs: the first met wins, as in a run.
        assert!(bad(&|r| {
            r.device = "floppy".into();
            r.sched = "fastest".into();
        })
        .starts_with("unknown device"));
        assert_eq!(RunRequest::default().check().map_err(|e| e.to_string()), Ok(()));
    }

    #[test]
    fn suite_request_matches_the_command_line_defaults_and_lists() {
        let mut r = SuiteRequest::new("startup");
        r.schedulers = vec!["bfq, cfq".into(), "noop".into()];
        r.apps = Some(vec!["xterm".into(), "".into()]);
        let cfg = r.config().expect("valid");
        assert_eq!(cfg.schedulers, ["bfq", "cfq", "noop"]);
        assert_eq!(cfg.apps.as_deref(), Some(&["xterm".to_string()][..]));
        assert_eq!(cfg.targets, [Target::Sim("seagate-hdd".into())]);
        assert_eq!(SuiteRequest::threads(&cfg, Some(8), 3).expect("valid"), 3);
        assert!(SuiteRequest::threads(&cfg, Some(0), 3).is_err());
        r.reps = Some("many".into());
        assert_eq!(
            r.config().expect_err("bad reps").to_string(),
            "--reps 'many' is not a number: give 1..=100"
        );
        let mut r = SuiteRequest::new("throughput");
        r.file_scale = Some(0.5);
        assert!(r
            .config()
            .expect_err("sim only")
            .to_string()
            .starts_with("--file-scale applies"));
        assert_eq!(
            SuiteRequest::new("video").command_line(Some("my dir")),
            "bfq suite video --target sim:seagate-hdd --sched bfq,cfq,deadline,noop --seed 1 --out 'my dir'"
        );
    }
}
