//! `bfq suite`: one benchmark, on one or more targets, for a list of schedulers, with repetitions.
//!
//! A [`SuiteConfig`] (what the command line says) is turned by [`plan`] into [`Experiment`]s, each one repetition
//! of one (target, scheduler, workload or parameter) combination; [`run_jobs`] runs them in parallel and the
//! results go to the same reports as `bfq reproduce` ([`crate::report::write_all`]). `bfq reproduce` plans the same
//! [`Experiment`]s.
//!
//! Defaults per benchmark follow S (docs/BENCHMARKS.md, one section per benchmark): see
//! [`Benchmark::default_workloads`] and [`default_reps`].

use crate::benchmarks::Zones;
use crate::report::{self, Figure, ReportMeta};
use crate::result::RunResult;
use crate::scenario::{load_profile, Era, ScenarioError};
use crate::target::Target;
use crate::timeline::STARTUP_WARMUP;
use bfq_sched::{Time, SEC};
use bfq_workload::workloads::WorkloadSpec;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

pub use crate::benchmarks::FAIRNESS_DURATION;
pub use crate::experiment::{Experiment, RealOptions, Settings, Work};
pub use crate::result::Benchmark;

impl Benchmark {
    /// Parses a benchmark name.
    pub fn parse(text: &str) -> Result<Benchmark, ScenarioError> {
        Benchmark::ALL
            .into_iter()
            .find(|b| b.name() == text.trim())
            .ok_or_else(|| {
                ScenarioError::Input(format!(
                    "unknown benchmark '{text}': choose one of {}",
                    Benchmark::ALL.map(Benchmark::name).join(", ")
                ))
            })
    }

    /// The workloads run when none are given: S's matrix for throughput (`1r-seq` as the reference, then the four
    /// heavy ones), start-up and video (idle and the four heavy ones); weights 1:2:4 in the outer, inner and mixed
    /// zones for fairness; S's 3, 5, 6, 7 and 9 interleaved readers; iozone with 1 and 10 threads (seed 003).
    pub fn default_workloads(self) -> &'static [&'static str] {
        match self {
            Benchmark::Throughput => &["1r-seq", "10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"],
            Benchmark::Startup | Benchmark::Video => &["idle", "10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"],
            Benchmark::Fairness => &["1:2:4-outer", "1:2:4-inner", "1:2:4-mixed"],
            Benchmark::Interleaved => &["3r", "5r", "6r", "7r", "9r"],
            Benchmark::Iozone => &["1-thread", "10-thread"],
            Benchmark::Replay => &[crate::replay::TOTAL_ROW],
        }
    }
}

/// Default application of the start-up benchmark.
pub const DEFAULT_APPS: [&str; 1] = ["xterm"];

/// Default iozone file size per thread, bytes, by thread count: together larger than the simulated host's 4 GiB
/// page cache, so reads reach the device as in seed 003 (24 GiB per thread on a 12 GiB machine there).
pub fn default_iozone_file_size(threads: u32) -> u64 {
    if threads <= 1 {
        6 << 30
    } else {
        (8u64 << 30).div_ceil(u64::from(threads)).max(1 << 30)
    }
}

/// Default repetitions: S@2011 repeated each measurement 10 times (paper profile); S 3.6 runs throughput and
/// start-up tests 2 times; video 2 times; the other benchmarks, whose simulated runs differ only by their random
/// streams, once.
pub fn default_reps(benchmark: Benchmark, era: Era) -> u32 {
    match (benchmark, era) {
        (Benchmark::Throughput | Benchmark::Startup, Era::Paper) => 10,
        (Benchmark::Throughput | Benchmark::Startup | Benchmark::Video, _) => 2,
        _ => 1,
    }
}

/// Default simulated duration of a throughput run, ns: 120 s with the paper profile (SYSTOR'12), 60 s with S of
/// 2013 (its `DURATION` default since 2013-08-28), 20 s with the current one (as `bfq reproduce`; S 3.6's own 10 s
/// give only four iostat samples).
pub fn default_throughput_duration(era: Era) -> Time {
    match era {
        Era::Paper => 120 * SEC,
        Era::S2013 => 60 * SEC,
        Era::Current => 20 * SEC,
    }
}

/// What `bfq suite` was asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteConfig {
    /// The benchmark.
    pub benchmark: Benchmark,
    /// Targets, side by side in the report.
    pub targets: Vec<Target>,
    /// Schedulers, in report order.
    pub schedulers: Vec<String>,
    /// Tunables `key=value`; each applies to every chosen scheduler that has the key.
    pub tunables: Vec<String>,
    /// Workloads (or the benchmark's parameters written as workloads); `None` for the defaults.
    pub workloads: Option<Vec<String>>,
    /// Applications (start-up only); `None` for xterm.
    pub apps: Option<Vec<String>>,
    /// Repetitions (1..=100); `None` for [`default_reps`].
    pub reps: Option<u32>,
    /// iozone file size per thread, bytes; `None` for [`default_iozone_file_size`].
    pub file_size: Option<u64>,
    /// The settings of every experiment: the era (paper only for throughput and start-up), the seed of repetition 0
    /// (repetition i uses seed + i), the duration (not for start-up and iozone), the warm-up (real targets only:
    /// the simulator always uses [`STARTUP_WARMUP`]), CPU timing (throughput, start-up, iozone) and the options of
    /// the real targets.
    pub settings: Settings,
}

impl SuiteConfig {
    /// A configuration with every option at its default: bfq, cfq, deadline and noop (the seeds' four) on `target`.
    pub fn new(benchmark: Benchmark, target: Target) -> SuiteConfig {
        SuiteConfig {
            benchmark,
            targets: vec![target],
            schedulers: ["bfq", "cfq", "deadline", "noop"].map(String::from).to_vec(),
            tunables: Vec::new(),
            workloads: None,
            apps: None,
            reps: None,
            file_size: None,
            settings: Settings::default(),
        }
    }
}

fn invalid(msg: String) -> ScenarioError {
    ScenarioError::Input(bfq_sched::text::one_line(&msg))
}

/// Parses a fairness workload `[W1:W2:...-]ZONE` (weights default 1:2:4; zone `outer`, `inner` or `mixed`).
pub fn parse_fairness(text: &str) -> Result<(Vec<u32>, Zones), ScenarioError> {
    let bad = |why: &str| {
        invalid(format!(
            "fairness workload '{text}': {why}; write [WEIGHTS-]ZONE, e.g. 1:2:4-mixed, with ZONE outer, inner or mixed \
             and 1 to 16 weights in 1..=1000"
        ))
    };
    let (weights, zone) = match text.trim().rsplit_once('-') {
        Some((w, z)) => (Some(w), z),
        None => (None, text.trim()),
    };
    let zones = match zone {
        "outer" => Zones::Outer,
        "inner" => Zones::Inner,
        "mixed" => Zones::Mixed,
        _ => return Err(bad("unknown zone")),
    };
    let weights: Vec<u32> = match weights {
        None => vec![1, 2, 4],
        Some(w) => w
            .split(':')
            .map(|x| x.trim().parse::<u32>().ok().filter(|v| (1..=1000).contains(v)))
            .collect::<Option<Vec<u32>>>()
            .ok_or_else(|| bad("bad weights"))?,
    };
    if weights.is_empty() || weights.len() > 16 {
        return Err(bad("bad number of weights"));
    }
    Ok((weights, zones))
}

/// Parses an interleaved workload: the number of readers, `5`, `5r` or `5r-interleaved` (1..=64).
pub fn parse_interleaved(text: &str) -> Result<u32, ScenarioError> {
    let t = text.trim();
    let n = t.strip_suffix("-interleaved").unwrap_or(t);
    let n = n.strip_suffix('r').unwrap_or(n);
    n.parse::<u32>().ok().filter(|n| (1..=64).contains(n)).ok_or_else(|| {
        invalid(format!(
            "interleaved workload '{text}': give the number of readers, 1 to 64, e.g. 5r"
        ))
    })
}

/// Parses an iozone workload: the number of threads, `10`, `10t`, `10-thread` or `10-threads` (1..=64).
pub fn parse_iozone(text: &str) -> Result<u32, ScenarioError> {
    let t = text.trim();
    let n = ["-threads", "-thread", "t"]
        .iter()
        .find_map(|s| t.strip_suffix(s))
        .unwrap_or(t);
    n.parse::<u32>().ok().filter(|n| (1..=64).contains(n)).ok_or_else(|| {
        invalid(format!(
            "iozone workload '{text}': give the number of threads, 1 to 64, e.g. 10-thread"
        ))
    })
}

/// The tunables that apply to `sched`: those of `given` whose key it has, plus, for the fairness benchmark, S's
/// `low_latency=0` when it has that key and it was not given.
pub fn tunables_for(sched: &str, given: &[String], benchmark: Benchmark) -> Vec<String> {
    let Some(desc) = bfq_sched::find(sched) else {
        return Vec::new();
    };
    let has = |key: &str| desc.tunables.iter().any(|t| t.name == key);
    let key_of = |kv: &String| kv.split_once('=').map_or(kv.clone(), |(k, _)| k.trim().to_string());
    let mut out: Vec<String> = given.iter().filter(|kv| has(&key_of(kv))).cloned().collect();
    if benchmark == Benchmark::Fairness && has("low_latency") && !out.iter().any(|kv| key_of(kv) == "low_latency") {
        out.push("low_latency=0".to_string());
    }
    out
}

/// Refuses a list that names an item twice.
fn no_duplicates(option: &str, items: &[String]) -> Result<(), ScenarioError> {
    for (i, x) in items.iter().enumerate() {
        if items[..i].contains(x) {
            return Err(invalid(format!(
                "{option} names '{x}' twice: give each once (use --reps for repetitions)"
            )));
        }
    }
    Ok(())
}

/// Checks what every run of a suite or a replay shares, before any work: at least one target and scheduler, each
/// named once, targets that resolve, schedulers that exist (in the kernel too for `kernel:` targets), tunables
/// given once that apply to some chosen scheduler and whose values each simulated device's policy accepts.
pub fn check_runs(
    targets: &[Target],
    schedulers: &[String],
    tunables: &[String],
    b: Benchmark,
) -> Result<(), ScenarioError> {
    if targets.is_empty() {
        return Err(invalid(
            "no target: give --target sim:<device>, engine:<dir> or kernel:<dir>".into(),
        ));
    }
    for t in targets {
        t.check()?;
    }
    // A name given twice would run the same experiments twice with the same seeds and count them as extra
    // repetitions.
    let names: Vec<String> = targets.iter().map(ToString::to_string).collect();
    no_duplicates("--target", &names)?;
    no_duplicates("--sched", schedulers)?;
    let keys: Vec<String> = tunables
        .iter()
        .map(|kv| kv.split_once('=').map_or(kv.as_str(), |(k, _)| k).trim().to_string())
        .collect();
    no_duplicates("--tune", &keys)?;
    if schedulers.is_empty() {
        return Err(invalid("no scheduler: give --sched, e.g. bfq,cfq,deadline,noop".into()));
    }
    let real_kernel = targets.iter().any(|t| matches!(t, Target::Kernel(_)));
    for s in schedulers {
        if real_kernel && crate::target::kernel_scheduler(s).is_none() {
            return Err(invalid(format!(
                "scheduler '{s}' does not exist in the kernel: kernel:DIR targets take none (noop), mq-deadline, \
                 kyber or bfq"
            )));
        }
        if bfq_sched::find(s).is_none() {
            return Err(invalid(format!(
                "unknown scheduler '{s}': choose from {}",
                bfq_sched::policies()
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    for kv in tunables {
        if !schedulers
            .iter()
            .any(|s| tunables_for(s, std::slice::from_ref(kv), b).contains(kv))
        {
            return Err(invalid(format!(
                "tunable '{kv}' applies to none of {}: see `bfq schedulers` for each policy's tunables",
                schedulers.join(", ")
            )));
        }
    }
    // Tunable values are checked against each simulated device by building the policy once.
    for t in targets {
        if let Target::Sim(dev) = t {
            let info = bfq_sim::device::resolve(dev)?.build().info();
            for s in schedulers {
                bfq_sched::build(s, &info, &tunables_for(s, tunables, b))?;
            }
        }
    }
    Ok(())
}

/// Checks `cfg` and turns it into jobs: repetitions outermost, then applications, targets, schedulers and
/// workloads, so that a report shows the targets of one application side by side.
///
/// Every user error is found here, with a one-line message naming the bad value and what to use instead.
pub fn plan(cfg: &SuiteConfig) -> Result<Vec<Experiment>, ScenarioError> {
    let b = cfg.benchmark;
    check_runs(&cfg.targets, &cfg.schedulers, &cfg.tunables, b)?;
    if let Some(w) = &cfg.workloads {
        no_duplicates("--workloads", w)?;
    }
    if let Some(a) = &cfg.apps {
        no_duplicates("--apps", a)?;
    }
    let era = match (cfg.settings.era, b) {
        (e, Benchmark::Throughput | Benchmark::Startup) => e,
        (e @ (Era::Paper | Era::S2013), _) => {
            return Err(invalid(format!(
                "--profile {} applies to the throughput and startup benchmarks only, not {}",
                e.name(),
                b.name()
            )))
        }
        (_, _) => Era::Current,
    };
    let reps = cfg.reps.unwrap_or_else(|| default_reps(b, era));
    crate::limits::reps(reps).map_err(|e| invalid(e.to_string()))?;
    crate::limits::seeds(cfg.settings.seed, reps).map_err(|e| invalid(e.to_string()))?;
    if cfg.apps.is_some() && b != Benchmark::Startup {
        return Err(invalid(format!(
            "--apps applies to the startup benchmark only, not {}",
            b.name()
        )));
    }
    let duration = cfg.settings.duration;
    if duration.is_some() && matches!(b, Benchmark::Startup | Benchmark::Iozone) {
        return Err(invalid(format!(
            "--duration does not apply to {}: its runs last as long as {}",
            b.name(),
            if b == Benchmark::Startup {
                "the start-up"
            } else {
                "the file size makes them"
            }
        )));
    }
    if duration == Some(0) {
        return Err(invalid("--duration must be positive".into()));
    }
    if cfg.file_size.is_some() && b != Benchmark::Iozone {
        return Err(invalid(format!(
            "--file-size applies to the iozone benchmark only, not {}",
            b.name()
        )));
    }
    let apps: Vec<String> = match &cfg.apps {
        Some(a) if a.is_empty() => return Err(invalid("--apps is empty: give e.g. xterm,lowriter".into())),
        Some(a) => a.clone(),
        None => DEFAULT_APPS.map(String::from).to_vec(),
    };
    if b == Benchmark::Startup {
        for a in &apps {
            load_profile(a)?;
        }
    }
    let workloads: Vec<String> = match &cfg.workloads {
        Some(w) if w.is_empty() => return Err(invalid("--workloads is empty".into())),
        Some(w) => w.clone(),
        None => b.default_workloads().iter().map(|s| s.to_string()).collect(),
    };
    let mut works: Vec<Work> = Vec::new();
    for w in &workloads {
        works.push(match b {
            Benchmark::Throughput | Benchmark::Startup | Benchmark::Video => {
                WorkloadSpec::parse(w).map_err(|e| invalid(e.to_string()))?;
                match b {
                    Benchmark::Throughput => Work::Throughput { workload: w.clone() },
                    Benchmark::Video => Work::Video { workload: w.clone() },
                    _ => Work::Startup {
                        workload: w.clone(),
                        app: String::new(),
                    },
                }
            }
            Benchmark::Fairness => {
                let (weights, zones) = parse_fairness(w)?;
                Work::Fairness { weights, zones }
            }
            Benchmark::Interleaved => Work::Interleaved {
                readers: parse_interleaved(w)?,
            },
            Benchmark::Replay => {
                return Err(invalid(
                    "trace replays are run by `bfq replay TRACE`, not by `bfq suite`".into(),
                ))
            }
            Benchmark::Iozone => {
                let threads = parse_iozone(w)?;
                let file_size = cfg.file_size.unwrap_or_else(|| default_iozone_file_size(threads));
                if file_size < (1 << 20) {
                    return Err(invalid("--file-size must be at least 1 MiB".into()));
                }
                Work::Iozone { threads, file_size }
            }
        });
    }
    let app_list: Vec<Option<&String>> = if b == Benchmark::Startup {
        apps.iter().map(Some).collect()
    } else {
        vec![None]
    };
    let mut jobs = Vec::new();
    for rep in 0..reps {
        for app in &app_list {
            for target in &cfg.targets {
                for s in &cfg.schedulers {
                    for work in &works {
                        let work = match (work, app) {
                            (Work::Startup { workload, .. }, Some(a)) => Work::Startup {
                                workload: workload.clone(),
                                app: (*a).clone(),
                            },
                            (w, _) => w.clone(),
                        };
                        let warmup = match target {
                            Target::Sim(_) => STARTUP_WARMUP,
                            Target::Engine(_) | Target::Kernel(_) => cfg.settings.warmup,
                        };
                        jobs.push(Experiment {
                            target: target.clone(),
                            scheduler: s.clone(),
                            tunables: tunables_for(s, &cfg.tunables, b),
                            work,
                            rep,
                            settings: Settings {
                                era,
                                warmup,
                                seed: cfg.settings.seed + u64::from(rep),
                                ..cfg.settings.clone()
                            },
                        });
                    }
                }
            }
        }
    }
    Ok(jobs)
}

/// Runs `jobs` on `threads` worker threads, calling `progress(done, total)` after each, and returns every result
/// in job order. With `stop_on_error`, workers take no new job once one has failed, and jobs not run are reported
/// as `None`.
fn run_pool(
    jobs: &[Experiment],
    threads: usize,
    stop_on_error: bool,
    stop: &AtomicBool,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Vec<Option<Result<RunResult, ScenarioError>>> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let slots: Mutex<Vec<Option<Result<RunResult, ScenarioError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..crate::limits::worker_threads(threads, jobs.len()) {
            s.spawn(|| loop {
                if (stop_on_error && failed.load(Ordering::Relaxed)) || stop.load(Ordering::Relaxed) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let r = job.run();
                if r.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                if let Ok(mut v) = slots.lock() {
                    v[i] = Some(r);
                }
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, jobs.len());
            });
        }
    });
    slots.into_inner().unwrap_or_default()
}

/// Runs `jobs` on `threads` worker threads, calling `progress(done, total)` after each; results keep job order.
pub fn run_all(
    jobs: &[Experiment],
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Vec<Result<RunResult, ScenarioError>> {
    run_pool(jobs, threads, false, &AtomicBool::new(false), progress)
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(invalid("job did not run".into()))))
        .collect()
}

/// Runs `jobs` like [`run_all`] but stops at the first failure (an unavailable target fails at once, before the
/// other jobs have used minutes) and returns the first error in job order.
pub fn run_jobs(
    jobs: &[Experiment],
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<RunResult>, ScenarioError> {
    run_jobs_until(jobs, threads, &AtomicBool::new(false), progress)
}

/// Runs `jobs` like [`run_jobs`], and also takes no new job once `stop` is set (by another thread: an interrupt
/// from the user); the jobs running then finish, and the result is an error if any job did not run.
pub fn run_jobs_until(
    jobs: &[Experiment],
    threads: usize,
    stop: &AtomicBool,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<RunResult>, ScenarioError> {
    let mut results = Vec::with_capacity(jobs.len());
    let mut all_ran = true;
    for slot in run_pool(jobs, threads, true, stop, progress) {
        match slot {
            Some(Ok(r)) => results.push(r),
            Some(Err(e)) => return Err(e),
            None => all_ran = false,
        }
    }
    if !all_ran {
        return Err(invalid("job did not run".into()));
    }
    Ok(results)
}

/// The text `bfq suite` prints: the S-format table of every headline figure ([`report::is_headline`]), and the iozone
/// tables in seed 003's layout when there are iozone results.
///
/// With several targets, each headline quantity is instead one table with the targets side by side
/// ([`report::table::side_by_side`]).
pub fn printed_tables(results: &[RunResult], meta: &ReportMeta) -> String {
    let mut out = String::new();
    let figs = report::figures(results, meta);
    let headline: Vec<&Figure> = figs.iter().filter(|f| report::is_headline(f)).collect();
    match report::table::side_by_side(&headline) {
        Some(t) => out.push_str(&t),
        None => {
            for fig in headline {
                out.push_str(&report::table::s_table(fig, meta));
                out.push('\n');
            }
        }
    }
    if let Some(t) = report::table::iozone_tables(results) {
        out.push_str(&t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim() -> Target {
        Target::Sim("seagate-hdd".into())
    }

    #[test]
    fn parses_benchmark_parameters() {
        assert_eq!(parse_fairness("mixed").unwrap(), (vec![1, 2, 4], Zones::Mixed));
        assert_eq!(parse_fairness("1:1-outer").unwrap(), (vec![1, 1], Zones::Outer));
        assert!(parse_fairness("1:0-outer").is_err());
        assert!(parse_fairness("1:2-middle").is_err());
        assert_eq!(parse_interleaved("5r").unwrap(), 5);
        assert_eq!(parse_interleaved("7r-interleaved").unwrap(), 7);
        assert!(parse_interleaved("0r").is_err());
        assert_eq!(parse_iozone("10-thread").unwrap(), 10);
        assert_eq!(parse_iozone("1").unwrap(), 1);
        assert!(parse_iozone("many").is_err());
    }

    #[test]
    fn plan_orders_reps_then_apps_targets_schedulers_workloads() {
        let mut cfg = SuiteConfig::new(Benchmark::Startup, sim());
        cfg.targets.push(Target::Sim("plextor-ssd".into()));
        cfg.schedulers = vec!["bfq".into(), "noop".into()];
        cfg.apps = Some(vec!["xterm".into(), "oowriter".into()]);
        cfg.workloads = Some(vec!["idle".into(), "10r-seq".into()]);
        cfg.reps = Some(2);
        let jobs = plan(&cfg).unwrap();
        assert_eq!(jobs.len(), 2 * 2 * 2 * 2 * 2);
        assert_eq!(jobs[0].settings.seed, 1);
        assert_eq!(jobs[16].settings.seed, 2);
        assert_eq!(jobs[16].rep, 1);
        // The first eight jobs are xterm: both targets, before oowriter.
        assert!(jobs[..8]
            .iter()
            .all(|j| matches!(&j.work, Work::Startup { app, .. } if app == "xterm")));
        assert_eq!(jobs[4].target, Target::Sim("plextor-ssd".into()));
    }

    #[test]
    fn fairness_gets_s_low_latency_off_unless_given() {
        let mut cfg = SuiteConfig::new(Benchmark::Fairness, sim());
        cfg.workloads = Some(vec!["mixed".into()]);
        let jobs = plan(&cfg).unwrap();
        let of = |s: &str| jobs.iter().find(|j| j.scheduler == s).unwrap().tunables.clone();
        assert_eq!(of("bfq"), ["low_latency=0"]);
        assert_eq!(of("cfq"), ["low_latency=0"]);
        assert!(of("noop").is_empty());
        cfg.tunables = vec!["low_latency=1".into()];
        let jobs = plan(&cfg).unwrap();
        assert_eq!(
            jobs.iter().find(|j| j.scheduler == "bfq").unwrap().tunables,
            ["low_latency=1"]
        );
    }

    #[test]
    fn plan_rejects_bad_input_with_one_line_messages() {
        let base = SuiteConfig::new(Benchmark::Throughput, sim());
        let mut cases: Vec<(SuiteConfig, &str)> = Vec::new();
        let mut c = base.clone();
        c.schedulers = vec!["bfq".into(), "fastest".into()];
        cases.push((c, "unknown scheduler 'fastest'"));
        let mut c = base.clone();
        c.workloads = Some(vec!["12x-seq".into()]);
        cases.push((c, "unknown workload `12x-seq`"));
        let mut c = base.clone();
        c.reps = Some(0);
        cases.push((c, "--reps 0 is out of range"));
        let mut c = base.clone();
        c.targets = vec![Target::Sim("floppy".into())];
        cases.push((c, "target sim:floppy"));
        let mut c = base.clone();
        c.tunables = vec!["no_such_knob=1".into()];
        cases.push((c, "tunable 'no_such_knob=1' applies to none"));
        let mut c = base.clone();
        c.tunables = vec!["slice_idle=-5".into()];
        cases.push((c, "slice_idle"));
        let mut c = base.clone();
        c.apps = Some(vec!["xterm".into()]);
        cases.push((c, "--apps applies to the startup benchmark only"));
        let mut c = SuiteConfig::new(Benchmark::Startup, sim());
        c.apps = Some(vec!["emacs".into()]);
        cases.push((c, "unknown application 'emacs'"));
        let mut c = SuiteConfig::new(Benchmark::Video, sim());
        c.settings.era = Era::Paper;
        cases.push((c, "--profile paper applies to the throughput and startup"));
        for (cfg, want) in cases {
            let e = plan(&cfg).expect_err(want).to_string();
            assert!(e.contains(want), "{e:?} should contain {want:?}");
            assert!(!e.contains('\n'), "one line: {e:?}");
        }
    }
}
