//! `bfq validate`: the same matrix on the real kernel and on the simulator with a device model, compared cell by
//! cell.
//!
//! For every benchmark (throughput, start-up), workload and scheduler, [`run`] measures `reps` repetitions on
//! `kernel:DIR` and `reps` simulations (seeds `seed..seed + reps`) on `sim:MODEL`, with the same warm-up, duration
//! and file scale, and [`summarize`] reports per cell the real median and spread, the simulated median, their ratio,
//! and for start-up the demerit figure of the application's read-latency distributions; per (benchmark, workload)
//! whether the schedulers rank the same way; and one summary line. The figure of merit follows Ruemmler and Wilkes
//! (1994): the root-mean-square horizontal distance between the simulated and the measured response-time
//! distributions, as a fraction of the mean measured response time. Here both distributions are taken at
//! [`LATENCY_QUANTILES`] quantile mid-points (2.5 %, 7.5 %, ... 97.5 %) of the pooled repetitions, so the horizontal
//! distance is the difference of the quantiles at each level.

use crate::experiment::{Experiment, Work};
use crate::result::{Benchmark, RunResult};
use crate::scenario::ScenarioError;
use crate::target::Target;
use bfq_sched::Time;
use bfq_workload::RequestTiming;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Quantile levels of a stored latency distribution: mid-points `(i + 0.5) / LATENCY_QUANTILES`.
pub const LATENCY_QUANTILES: usize = 20;

/// The default matrix's workloads.
pub const DEFAULT_WORKLOADS: [&str; 5] = ["idle", "10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"];

/// The default matrix's schedulers (the kernel's four).
pub const DEFAULT_SCHEDULERS: [&str; 4] = ["none", "mq-deadline", "kyber", "bfq"];

/// Latencies (completion - issue) of completed requests, ns.
pub fn latencies_ns(reqs: &[RequestTiming]) -> Vec<u64> {
    reqs.iter()
        .filter_map(|r| r.completed.map(|c| c.saturating_sub(r.issued)))
        .collect()
}

/// The [`LATENCY_QUANTILES`] quantile mid-points of `lat_ns`, µs (empty for no latencies).
pub fn quantiles_us(lat_ns: &[u64]) -> Vec<f64> {
    if lat_ns.is_empty() {
        return Vec::new();
    }
    let mut v = lat_ns.to_vec();
    v.sort_unstable();
    (0..LATENCY_QUANTILES)
        .map(|i| {
            let q = (i as f64 + 0.5) / LATENCY_QUANTILES as f64;
            let k = ((q * v.len() as f64) as usize).min(v.len() - 1);
            v[k] as f64 / 1e3
        })
        .collect()
}

fn q_key(i: usize) -> String {
    format!("app_lat_q{i:02}_us")
}

/// Adds the distribution of `lat_ns` to a run's `extra`: `app_lat_q00_us` ... and `app_lat_mean_us`.
pub fn insert_latencies(extra: &mut BTreeMap<String, f64>, lat_ns: &[u64]) {
    if lat_ns.is_empty() {
        return;
    }
    for (i, q) in quantiles_us(lat_ns).into_iter().enumerate() {
        extra.insert(q_key(i), q);
    }
    let mean = lat_ns.iter().sum::<u64>() as f64 / lat_ns.len() as f64 / 1e3;
    extra.insert("app_lat_mean_us".into(), mean);
}

/// A run's stored latency quantiles, µs, if it has them.
pub fn run_quantiles(r: &RunResult) -> Option<Vec<f64>> {
    (0..LATENCY_QUANTILES)
        .map(|i| r.extra.get(&q_key(i)).copied())
        .collect()
}

/// Pools several runs' quantile vectors: the quantile-wise mean (each run weighs the same).
fn pool(qs: &[Vec<f64>]) -> Option<Vec<f64>> {
    if qs.is_empty() {
        return None;
    }
    Some(
        (0..LATENCY_QUANTILES)
            .map(|i| qs.iter().map(|q| q[i]).sum::<f64>() / qs.len() as f64)
            .collect(),
    )
}

/// The demerit figure: RMS over the quantile levels of (simulated - measured), divided by the measured mean, as a
/// fraction (0.1 = 10 %). `None` without data or with a zero mean.
pub fn demerit(real_q: &[f64], sim_q: &[f64], real_mean_us: f64) -> Option<f64> {
    if real_q.is_empty() || real_q.len() != sim_q.len() || real_mean_us.is_nan() || real_mean_us <= 0.0 {
        return None;
    }
    let ms = real_q.iter().zip(sim_q).map(|(r, s)| (s - r).powi(2)).sum::<f64>() / real_q.len() as f64;
    Some(ms.sqrt() / real_mean_us)
}

/// What to validate.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidateConfig {
    /// The kernel target's directory (a `bfq loopdev` mount).
    pub kernel_dir: PathBuf,
    /// The device model (TOML, e.g. from `bfq calibrate`).
    pub model: PathBuf,
    /// Benchmarks: throughput and/or startup.
    pub benchmarks: Vec<Benchmark>,
    /// Background workloads.
    pub workloads: Vec<String>,
    /// Schedulers, by the kernel's names.
    pub schedulers: Vec<String>,
    /// Application for start-up.
    pub app: String,
    /// Repetitions on each side.
    pub reps: u32,
    /// Seed of the first repetition.
    pub seed: u64,
    /// Background warm-up before the application starts, ns (both sides).
    pub warmup: Time,
    /// Throughput run length, ns (both sides).
    pub duration: Time,
    /// Factor on the background files' sizes (both sides).
    pub file_scale: f64,
    /// Allow a kernel directory on a device `bfq loopdev` did not create.
    pub allow_device: bool,
}

/// The experiments of one cell on one side.
fn experiments(cfg: &ValidateConfig, target: &Target, b: Benchmark, w: &str, s: &str) -> Vec<Experiment> {
    (0..cfg.reps)
        .map(|rep| {
            let app = (b == Benchmark::Startup).then_some(cfg.app.as_str());
            let side = Side {
                warmup: cfg.warmup,
                duration: cfg.duration,
                file_scale: cfg.file_scale,
                allow_device: cfg.allow_device,
            };
            experiment(target, w, s, app, rep, cfg.seed + u64::from(rep), &side)
        })
        .collect()
}

/// The settings both sides of a validation share.
struct Side {
    warmup: Time,
    duration: Time,
    file_scale: f64,
    allow_device: bool,
}

/// One run of a cell: background workload `w` under scheduler `s` on `target`, with application `app` for a
/// start-up run.
fn experiment(target: &Target, w: &str, s: &str, app: Option<&str>, rep: u32, seed: u64, side: &Side) -> Experiment {
    let mut e = Experiment::new(target.clone(), s, Work::background(w, app));
    e.rep = rep;
    e.settings.seed = seed;
    e.settings.warmup = side.warmup;
    e.settings.duration = Some(side.duration);
    e.settings.app_latency = true;
    e.settings.real.file_scale = side.file_scale;
    e.settings.real.allow_device = side.allow_device;
    e
}

/// Simulates again, with the device model `model`, every kernel run of an earlier validation (`runs`, e.g. a
/// validation.json's): the same benchmark, workload, scheduler, application, repetition and seed, with `warmup` and
/// `duration` (give the values the kernel runs used) and the file scale each kernel run recorded. The kernel is not
/// touched. Returns the kernel runs, each followed by its new simulation, ready for [`summarize`].
pub fn resimulate(
    runs: Vec<RunResult>,
    model: &Path,
    warmup: Time,
    duration: Time,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<RunResult>, ScenarioError> {
    let sim = Target::Sim(check_model(model)?);
    let kernel: Vec<RunResult> = runs.into_iter().filter(|r| !r.target.starts_with("sim:")).collect();
    if kernel.is_empty() {
        return Err(ScenarioError::Input(
            "the validation has no kernel runs to simulate again: give a validation.json written by bfq validate"
                .into(),
        ));
    }
    let total = kernel.len();
    let mut out = Vec::with_capacity(2 * total);
    for (i, k) in kernel.into_iter().enumerate() {
        progress(&format!(
            "[{}/{total}] sim {} {} {} rep {}",
            i + 1,
            k.benchmark,
            k.workload,
            k.scheduler,
            k.rep
        ));
        let side = Side {
            warmup,
            duration,
            file_scale: k.extra.get("file_scale").copied().unwrap_or(1.0),
            allow_device: false,
        };
        let app = match k.benchmark {
            Benchmark::Startup => k.app.as_deref(),
            _ => None,
        };
        let e = experiment(&sim, &k.workload, &k.scheduler, app, k.rep, k.seed, &side);
        let r = e.run()?;
        out.push(k);
        out.push(r);
    }
    Ok(out)
}

/// Checks that the device model loads; returns it as a simulator target's device spec.
fn check_model(model: &Path) -> Result<String, ScenarioError> {
    let spec = model.to_string_lossy().into_owned();
    bfq_sim::device::resolve(&spec).map_err(|e| {
        ScenarioError::Input(format!(
            "--model {}: {} (give a device TOML such as `bfq calibrate` writes, or a preset name)",
            model.display(),
            bfq_sched::text::one_line(&e.to_string())
        ))
    })?;
    Ok(spec)
}

/// Checks the configuration before anything runs: the model loads, the directory exists, the names are known.
pub fn check(cfg: &ValidateConfig) -> Result<(), ScenarioError> {
    if !cfg.kernel_dir.is_dir() {
        return Err(ScenarioError::Input(format!(
            "{} is not a directory: give --target kernel:DIR with the mount point made by `bfq loopdev create`",
            cfg.kernel_dir.display()
        )));
    }
    check_model(&cfg.model)?;
    for s in &cfg.schedulers {
        if crate::target::kernel_scheduler(s).is_none() {
            return Err(ScenarioError::Input(format!(
                "scheduler '{s}' does not exist in the kernel: use none, mq-deadline, kyber or bfq"
            )));
        }
    }
    if cfg.benchmarks.is_empty() || cfg.workloads.is_empty() || cfg.schedulers.is_empty() || cfg.reps == 0 {
        return Err(ScenarioError::Input(
            "nothing to validate: give at least one benchmark, workload and scheduler and --reps 1 or more".into(),
        ));
    }
    for b in &cfg.benchmarks {
        if !matches!(b, Benchmark::Throughput | Benchmark::Startup) {
            return Err(ScenarioError::Input(format!(
                "benchmark {b} cannot be validated against the kernel: use throughput and/or startup"
            )));
        }
    }
    Ok(())
}

/// Runs the matrix, kernel then simulator for each cell; `progress` gets one line per run. Returns every run.
pub fn run(cfg: &ValidateConfig, progress: &mut dyn FnMut(&str)) -> Result<Vec<RunResult>, ScenarioError> {
    check(cfg)?;
    let kernel = Target::Kernel(cfg.kernel_dir.clone());
    let sim = Target::Sim(cfg.model.to_string_lossy().into_owned());
    let cells: Vec<(Benchmark, &String, &String)> = cfg
        .benchmarks
        .iter()
        .flat_map(|&b| {
            cfg.workloads
                .iter()
                .flat_map(move |w| cfg.schedulers.iter().map(move |s| (b, w, s)))
        })
        .collect();
    let total = cells.len() * cfg.reps as usize;
    let mut out = Vec::with_capacity(2 * total);
    let mut done = 0;
    for (b, w, s) in cells {
        for e in experiments(cfg, &kernel, b, w, s) {
            done += 1;
            progress(&format!("[{done}/{total}] kernel {b} {w} {s} rep {}", e.rep));
            let r = crate::target::run_real(&kernel, &e)?;
            out.push(r);
        }
        for e in experiments(cfg, &sim, b, w, s) {
            out.push(e.run()?);
        }
    }
    Ok(out)
}

/// One cell: a benchmark, workload and scheduler, measured and simulated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// `throughput` or `startup`.
    pub benchmark: Benchmark,
    /// Background workload.
    pub workload: String,
    /// Scheduler.
    pub scheduler: String,
    /// Unit of the values: `s` (start-up time) or `MB/s` (throughput).
    pub unit: String,
    /// Measured values, one per repetition (timed-out start-ups left out).
    pub real: Vec<f64>,
    /// Simulated values, one per seed.
    pub sim: Vec<f64>,
    /// Median of `real`.
    pub real_median: Option<f64>,
    /// Smallest and largest of `real`.
    pub real_min: Option<f64>,
    /// Largest of `real`.
    pub real_max: Option<f64>,
    /// Median of `sim`.
    pub sim_median: Option<f64>,
    /// `sim_median / real_median`.
    pub ratio: Option<f64>,
    /// Whether the schedulers rank the same in this cell's row (the same for every cell of the row).
    pub ranking_agrees: Option<bool>,
    /// Start-up: the demerit figure of the application's read-latency distributions (fraction of the measured
    /// mean).
    pub demerit: Option<f64>,
    /// Start-up: the pooled measured latency quantiles, µs.
    pub real_latency_us: Vec<f64>,
    /// Start-up: the pooled simulated latency quantiles, µs.
    pub sim_latency_us: Vec<f64>,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    /// The kernel target.
    pub kernel: String,
    /// The simulator target.
    pub sim: String,
    /// Every cell, in matrix order.
    pub cells: Vec<Cell>,
    /// The summary line.
    pub summary: String,
    /// Every run, kernel and simulator.
    pub runs: Vec<RunResult>,
}

fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// Order of schedulers by value (ascending; ties by name).
fn ranking(vals: &[(String, f64)]) -> Vec<String> {
    let mut v = vals.to_vec();
    v.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    v.into_iter().map(|x| x.0).collect()
}

/// Builds the comparison from the runs of [`run`] (or a recorded fixture).
pub fn summarize(runs: Vec<RunResult>) -> Validation {
    let is_sim = |r: &RunResult| r.target.starts_with("sim:");
    let kernel = runs
        .iter()
        .find(|r| !is_sim(r))
        .map(|r| r.target.clone())
        .unwrap_or_default();
    let sim = runs
        .iter()
        .find(|r| is_sim(r))
        .map(|r| r.target.clone())
        .unwrap_or_default();
    let mut order: Vec<(Benchmark, String, String)> = Vec::new();
    for r in &runs {
        let k = (r.benchmark, r.workload.clone(), r.scheduler.clone());
        if !order.contains(&k) {
            order.push(k);
        }
    }
    let value = |r: &RunResult| match r.benchmark {
        Benchmark::Startup => r.startup_s,
        _ => Some(r.throughput_mbps),
    };
    let mut cells: Vec<Cell> = order
        .iter()
        .map(|(b, w, s)| {
            let of = |want_sim: bool| -> Vec<&RunResult> {
                runs.iter()
                    .filter(|r| is_sim(r) == want_sim && r.benchmark == *b && &r.workload == w && &r.scheduler == s)
                    .collect()
            };
            let (kr, sr) = (of(false), of(true));
            let real: Vec<f64> = kr.iter().filter_map(|r| value(r)).collect();
            let simv: Vec<f64> = sr.iter().filter_map(|r| value(r)).collect();
            let (real_median, sim_median) = (median(&real), median(&simv));
            let rq = pool(&kr.iter().filter_map(|r| run_quantiles(r)).collect::<Vec<_>>());
            let sq = pool(&sr.iter().filter_map(|r| run_quantiles(r)).collect::<Vec<_>>());
            let rmean = median(
                &kr.iter()
                    .filter_map(|r| r.extra.get("app_lat_mean_us").copied())
                    .collect::<Vec<_>>(),
            );
            let demerit = match (&rq, &sq, rmean) {
                (Some(a), Some(b), Some(m)) => demerit(a, b, m),
                _ => None,
            };
            Cell {
                benchmark: *b,
                workload: w.clone(),
                scheduler: s.clone(),
                unit: if *b == Benchmark::Startup { "s" } else { "MB/s" }.into(),
                real_min: real.iter().copied().min_by(f64::total_cmp),
                real_max: real.iter().copied().max_by(f64::total_cmp),
                ratio: match (real_median, sim_median) {
                    (Some(r), Some(s)) if r > 0.0 => Some(s / r),
                    _ => None,
                },
                real,
                sim: simv,
                real_median,
                sim_median,
                ranking_agrees: None,
                demerit,
                real_latency_us: rq.unwrap_or_default(),
                sim_latency_us: sq.unwrap_or_default(),
            }
        })
        .collect();
    // Ranking per (benchmark, workload) row.
    let mut rows: Vec<(Benchmark, String)> = Vec::new();
    for c in &cells {
        if !rows.contains(&(c.benchmark, c.workload.clone())) {
            rows.push((c.benchmark, c.workload.clone()));
        }
    }
    let (mut agree, mut ranked) = (0, 0);
    for (b, w) in &rows {
        let row: Vec<&Cell> = cells.iter().filter(|c| c.benchmark == *b && &c.workload == w).collect();
        let real: Option<Vec<(String, f64)>> = row
            .iter()
            .map(|c| c.real_median.map(|v| (c.scheduler.clone(), v)))
            .collect();
        let simr: Option<Vec<(String, f64)>> = row
            .iter()
            .map(|c| c.sim_median.map(|v| (c.scheduler.clone(), v)))
            .collect();
        // A row whose measured values are all equal (idle throughput: 0 MB/s everywhere) has no ranking.
        let verdict = match (real, simr) {
            (Some(a), Some(b)) if row.len() > 1 && a.iter().any(|x| x.1 != a[0].1) => Some(ranking(&a) == ranking(&b)),
            _ => None,
        };
        if let Some(v) = verdict {
            ranked += 1;
            agree += usize::from(v);
        }
        for c in cells.iter_mut().filter(|c| c.benchmark == *b && &c.workload == w) {
            c.ranking_agrees = verdict;
        }
    }
    let ratios: Vec<f64> = cells.iter().filter_map(|c| c.ratio).collect();
    let within2 = ratios.iter().filter(|r| (0.5..=2.0).contains(*r)).count();
    let med_err = median(&ratios.iter().map(|r| (r.ln()).abs().exp() - 1.0).collect::<Vec<_>>());
    let demerits: Vec<f64> = cells.iter().filter_map(|c| c.demerit).collect();
    let summary = format!(
        "{} cells: {within2}/{} simulated medians within 2x of the kernel's (median |error| {}); scheduler ranking agrees in {agree}/{ranked} rows; start-up latency demerit median {} (min {}, max {}, {} cells)",
        cells.len(),
        ratios.len(),
        med_err.map_or("-".into(), |e| format!("{:.0} %", 100.0 * e)),
        median(&demerits).map_or("-".into(), |d| format!("{:.0} %", 100.0 * d)),
        demerits.iter().copied().min_by(f64::total_cmp).map_or("-".into(), |d| format!("{:.0} %", 100.0 * d)),
        demerits.iter().copied().max_by(f64::total_cmp).map_or("-".into(), |d| format!("{:.0} %", 100.0 * d)),
        demerits.len()
    );
    Validation {
        kernel,
        sim,
        cells,
        summary,
        runs,
    }
}

fn fmt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// The per-cell table as text (one line per cell) and the summary line.
pub fn table(v: &Validation) -> String {
    let mut s = format!(
        "# bfq validate: {} against {}\n# benchmark  workload   scheduler    unit   real median (min-max)        sim median   ratio  ranking  demerit\n",
        v.kernel, v.sim
    );
    for c in &v.cells {
        let d = if c.unit == "s" { 3 } else { 0 };
        s.push_str(&format!(
            "{:<11} {:<10} {:<12} {:<6} {:>9} ({:>7}-{:>7})  {:>11}  {:>6}  {:<7}  {:>7}\n",
            c.benchmark.name(),
            c.workload,
            c.scheduler,
            c.unit,
            fmt(c.real_median, d),
            fmt(c.real_min, d),
            fmt(c.real_max, d),
            fmt(c.sim_median, d),
            fmt(c.ratio, 2),
            match c.ranking_agrees {
                Some(true) => "agrees",
                Some(false) => "differs",
                None => "-",
            },
            c.demerit.map_or("-".into(), |d| format!("{:.0} %", 100.0 * d)),
        ));
    }
    s.push_str(&format!("{}\n", v.summary));
    s
}

/// The cells as CSV (one row per cell; values of the repetitions joined with `;`).
pub fn csv(v: &Validation) -> Result<String, ScenarioError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let e = |e: csv::Error| ScenarioError::Input(format!("csv: {e}"));
    w.write_record([
        "benchmark",
        "workload",
        "scheduler",
        "unit",
        "real_median",
        "real_min",
        "real_max",
        "sim_median",
        "ratio",
        "ranking_agrees",
        "demerit",
        "real_values",
        "sim_values",
    ])
    .map_err(e)?;
    for c in &v.cells {
        let o = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x}"));
        let join = |x: &[f64]| x.iter().map(|v| format!("{v}")).collect::<Vec<_>>().join(";");
        w.write_record([
            c.benchmark.name().to_string(),
            c.workload.clone(),
            c.scheduler.clone(),
            c.unit.clone(),
            o(c.real_median),
            o(c.real_min),
            o(c.real_max),
            o(c.sim_median),
            o(c.ratio),
            c.ranking_agrees.map_or(String::new(), |b| b.to_string()),
            o(c.demerit),
            join(&c.real),
            join(&c.sim),
        ])
        .map_err(e)?;
    }
    let bytes = w.into_inner().map_err(|e| ScenarioError::Input(format!("csv: {e}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An SVG of two distributions side by side as CDFs (log-scaled latency axis): measured solid, simulated dashed.
fn cdf_svg(real: &[f64], sim: &[f64]) -> String {
    let (w, h, m) = (320.0, 160.0, 30.0);
    let all: Vec<f64> = real.iter().chain(sim).copied().filter(|v| *v > 0.0).collect();
    let (lo, hi) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    if all.is_empty() {
        return String::new();
    }
    let (lo, hi) = (lo.log10().floor(), hi.log10().ceil().max(lo.log10().floor() + 1.0));
    let x = |v: f64| m + (v.max(1e-9).log10() - lo) / (hi - lo) * (w - 2.0 * m);
    let y = |q: f64| h - m + -(q * (h - 2.0 * m));
    let path = |qs: &[f64]| {
        qs.iter()
            .enumerate()
            .map(|(i, v)| {
                format!(
                    "{}{:.1},{:.1}",
                    if i == 0 { "M" } else { "L" },
                    x(*v),
                    y((i as f64 + 0.5) / qs.len() as f64)
                )
            })
            .collect::<String>()
    };
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\">");
    s.push_str(&format!(
        "<line x1=\"{m}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>",
        h - m,
        w - m,
        h - m
    ));
    let mut d = lo;
    while d <= hi {
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{}\" font-size=\"9\" text-anchor=\"middle\">{}</text>",
            x(10f64.powf(d)),
            h - m + 12.0,
            esc(&format!("{} µs", 10f64.powf(d)))
        ));
        d += 1.0;
    }
    s.push_str(&format!(
        "<path d=\"{}\" fill=\"none\" stroke=\"#c33\" stroke-width=\"2\"/>",
        path(real)
    ));
    s.push_str(&format!(
        "<path d=\"{}\" fill=\"none\" stroke=\"#36c\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/>",
        path(sim)
    ));
    s.push_str("<text x=\"32\" y=\"14\" font-size=\"10\" fill=\"#c33\">kernel</text><text x=\"80\" y=\"14\" font-size=\"10\" fill=\"#36c\">simulator</text></svg>");
    s
}

/// The HTML section: the per-cell table, the summary, and each start-up cell's latency CDFs side by side.
pub fn html(v: &Validation) -> String {
    let mut s = String::from("<!doctype html><meta charset=\"utf-8\"><title>bfq validate</title><style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:right}td:nth-child(-n+3){text-align:left}.cdfs{display:flex;flex-wrap:wrap}.cdfs figure{margin:4px}</style>");
    s.push_str(&format!(
        "<section id=\"validation\"><h2>Validation: {} against {}</h2><p>{}</p><table><tr><th>benchmark</th><th>workload</th><th>scheduler</th><th>real median</th><th>real min-max</th><th>simulated</th><th>ratio</th><th>ranking</th><th>demerit</th></tr>",
        esc(&v.kernel),
        esc(&v.sim),
        esc(&v.summary)
    ));
    for c in &v.cells {
        let d = if c.unit == "s" { 3 } else { 0 };
        s.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} {}</td><td>{}-{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            c.benchmark.name(),
            esc(&c.workload),
            esc(&c.scheduler),
            fmt(c.real_median, d),
            esc(&c.unit),
            fmt(c.real_min, d),
            fmt(c.real_max, d),
            fmt(c.sim_median, d),
            fmt(c.ratio, 2),
            c.ranking_agrees.map_or("-", |a| if a { "agrees" } else { "differs" }),
            c.demerit.map_or("-".into(), |d| format!("{:.0} %", 100.0 * d))
        ));
    }
    s.push_str("</table><h3>Application read-latency distributions (CDF; kernel solid, simulator dashed)</h3><div class=\"cdfs\">");
    for c in v
        .cells
        .iter()
        .filter(|c| !c.real_latency_us.is_empty() && !c.sim_latency_us.is_empty())
    {
        s.push_str(&format!(
            "<figure>{}<figcaption>{} {} (demerit {})</figcaption></figure>",
            cdf_svg(&c.real_latency_us, &c.sim_latency_us),
            esc(&c.workload),
            esc(&c.scheduler),
            c.demerit.map_or("-".into(), |d| format!("{:.0} %", 100.0 * d))
        ));
    }
    s.push_str("</div></section>\n");
    s
}

/// Writes `validation.json`, `validation.csv`, `validation.html` and `validation.txt` into `out`.
pub fn write_files(v: &Validation, out: &Path) -> Result<(), ScenarioError> {
    let io = |p: &Path| {
        let p = p.display().to_string();
        move |e: std::io::Error| ScenarioError::Input(format!("cannot write {p}: {e}"))
    };
    std::fs::create_dir_all(out).map_err(io(out))?;
    let json = serde_json::to_string_pretty(v).map_err(|e| ScenarioError::Input(format!("json: {e}")))?;
    for (name, text) in [
        ("validation.json", json),
        ("validation.csv", csv(v)?),
        ("validation.html", html(v)),
        ("validation.txt", table(v)),
    ] {
        let p = out.join(name);
        std::fs::write(&p, text).map_err(io(&p))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bfq_sched::SEC;

    #[test]
    fn a_recorded_validation_is_simulated_again_with_another_model() {
        let old: Validation =
            serde_json::from_str(include_str!("../tests/data/validation-loop-2x2.json")).expect("fixture parses");
        let kernel: Vec<RunResult> = old
            .runs
            .iter()
            .filter(|r| !r.target.starts_with("sim:"))
            .cloned()
            .collect();
        assert_eq!(kernel.len(), 4);
        let mut lines = 0;
        let runs = resimulate(old.runs, Path::new("nvme"), SEC, SEC, &mut |_| lines += 1).expect("runs");
        assert_eq!(lines, 4, "one progress line per kernel run");
        // Each kernel run is kept as recorded and followed by its simulation: same cell, repetition and seed.
        assert_eq!(runs.len(), 8);
        for (pair, k) in runs.chunks(2).zip(&kernel) {
            assert_eq!(&pair[0], k);
            let s = &pair[1];
            assert_eq!(s.target, "sim:nvme");
            assert_eq!(
                (s.benchmark, &s.workload, &s.scheduler, s.rep, s.seed, &s.app),
                (k.benchmark, &k.workload, &k.scheduler, k.rep, k.seed, &k.app)
            );
        }
        let v = summarize(runs);
        assert_eq!(v.cells.len(), 4);
        assert!(v
            .cells
            .iter()
            .all(|c| c.real_median.is_some() && c.sim_median.is_some()));
        // Errors name the problem before anything runs.
        let e = resimulate(kernel.clone(), Path::new("floppy"), SEC, SEC, &mut |_| {}).expect_err("bad model");
        assert!(e.to_string().starts_with("--model floppy:"), "{e}");
        let sims: Vec<RunResult> = v
            .runs
            .iter()
            .filter(|r| r.target.starts_with("sim:"))
            .cloned()
            .collect();
        let e = resimulate(sims, Path::new("nvme"), SEC, SEC, &mut |_| {}).expect_err("no kernel runs");
        assert!(e.to_string().contains("no kernel runs"), "{e}");
    }

    #[test]
    fn quantiles_and_demerit() {
        let lat: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let q = quantiles_us(&lat);
        assert_eq!(q.len(), LATENCY_QUANTILES);
        assert_eq!((q[0], q[19]), (3.0, 98.0));
        assert_eq!(demerit(&q, &q, 50.0), Some(0.0));
        let shifted: Vec<f64> = q.iter().map(|v| v + 10.0).collect();
        let d = demerit(&q, &shifted, 50.0).expect("some");
        assert!((d - 0.2).abs() < 1e-12, "{d}");
        assert_eq!(demerit(&q, &shifted, 0.0), None);
        let mut extra = BTreeMap::new();
        insert_latencies(&mut extra, &lat);
        assert_eq!(extra.get("app_lat_mean_us"), Some(&50.5));
        assert_eq!(extra.len(), LATENCY_QUANTILES + 1);
    }

    fn run(target: &str, b: Benchmark, w: &str, s: &str, v: f64, lat: Option<f64>) -> RunResult {
        let mut extra = BTreeMap::new();
        if let Some(l) = lat {
            insert_latencies(&mut extra, &[(l * 1000.0) as u64, (2.0 * l * 1000.0) as u64]);
        }
        RunResult {
            benchmark: b,
            target: target.into(),
            device: "d".into(),
            scheduler: s.into(),
            tunables: vec![],
            scenario: vec![],
            workload: w.into(),
            app: (b == Benchmark::Startup).then(|| "xterm".into()),
            rep: 0,
            seed: 1,
            startup_s: (b == Benchmark::Startup).then_some(v),
            timed_out: false,
            throughput_mbps: if b == Benchmark::Startup { 0.0 } else { v },
            read_mbps: 0.0,
            write_mbps: 0.0,
            sched_cpu_ns_per_request: None,
            extra,
        }
    }

    #[test]
    fn cells_ratios_ranking_and_summary() {
        let k = "kernel:/mnt/x";
        let m = "sim:m.toml";
        let runs = vec![
            run(k, Benchmark::Startup, "10r-seq", "bfq", 1.0, Some(100.0)),
            run(k, Benchmark::Startup, "10r-seq", "bfq", 3.0, Some(100.0)),
            run(k, Benchmark::Startup, "10r-seq", "none", 4.0, Some(300.0)),
            run(m, Benchmark::Startup, "10r-seq", "bfq", 1.0, Some(110.0)),
            run(m, Benchmark::Startup, "10r-seq", "none", 2.0, Some(300.0)),
            run(k, Benchmark::Throughput, "10r-seq", "bfq", 100.0, None),
            run(k, Benchmark::Throughput, "10r-seq", "none", 200.0, None),
            run(m, Benchmark::Throughput, "10r-seq", "bfq", 300.0, None),
            run(m, Benchmark::Throughput, "10r-seq", "none", 250.0, None),
        ];
        let v = summarize(runs);
        assert_eq!(v.cells.len(), 4);
        let c = &v.cells[0];
        assert_eq!(
            (c.real_median, c.real_min, c.real_max, c.sim_median),
            (Some(2.0), Some(1.0), Some(3.0), Some(1.0))
        );
        assert_eq!(c.ratio, Some(0.5));
        assert_eq!(c.ranking_agrees, Some(true));
        // The latency quantiles differ by 10 µs (low half) and 20 µs (high half) over a measured mean of 150 µs.
        let d = c.demerit.expect("demerit");
        assert!((d - (250.0f64).sqrt() / 150.0).abs() < 1e-9, "{d}");
        assert_eq!(v.cells[2].ranking_agrees, Some(false));
        assert!(
            v.summary.starts_with("4 cells: 3/4 simulated medians within 2x"),
            "{}",
            v.summary
        );
        assert!(v.summary.contains("ranking agrees in 1/2 rows"), "{}", v.summary);
        let t = table(&v);
        assert!(t.contains("differs") && t.contains("agrees"), "{t}");
        let c = csv(&v).expect("csv");
        assert_eq!(c.lines().count(), 5);
        let h = html(&v);
        assert!(h.contains("<section id=\"validation\"") && h.contains("<svg"), "{h}");
        let dir = tempfile::tempdir().expect("tempdir");
        write_files(&v, dir.path()).expect("writes");
        let back: Validation =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("validation.json")).expect("json"))
                .expect("parses");
        assert_eq!(back, v);
    }

    /// A two-by-two validation recorded on this project's development machine (`bfq validate --benchmarks
    /// startup,throughput --workloads 10r-seq --sched bfq,none --reps 1` on a 6 GiB loop device): summarizing its
    /// runs again gives the recorded cells and summary.
    #[test]
    fn a_recorded_validation_summarizes_to_the_same_report() {
        let recorded: Validation =
            serde_json::from_str(include_str!("../tests/data/validation-loop-2x2.json")).expect("fixture parses");
        let again = summarize(recorded.runs.clone());
        assert_eq!(again.summary, recorded.summary);
        assert_eq!(again.cells.len(), 4);
        let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(1.0),
            (a, b) => a == b,
        };
        for (a, b) in again.cells.iter().zip(&recorded.cells) {
            assert_eq!(
                (a.real_median, a.sim_median, a.ranking_agrees),
                (b.real_median, b.sim_median, b.ranking_agrees)
            );
            assert!(close(a.ratio, b.ratio) && close(a.demerit, b.demerit), "{a:?} vs {b:?}");
        }
        for c in &again.cells {
            let (r, s) = (c.real_median.expect("real"), c.sim_median.expect("sim"));
            assert!((c.ratio.expect("ratio") - s / r).abs() < 1e-12);
            assert_eq!(c.real.len(), 1);
            if c.benchmark == Benchmark::Startup {
                assert_eq!(c.real_latency_us.len(), LATENCY_QUANTILES);
                assert!(c.demerit.is_some_and(|d| d > 0.0));
            } else {
                assert!(c.demerit.is_none());
            }
        }
        assert!(again.summary.starts_with("4 cells: "), "{}", again.summary);
        let t = table(&again);
        assert_eq!(t.lines().count(), 2 + 4 + 1, "{t}");
    }

    #[test]
    fn bad_input_is_refused_before_anything_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = ValidateConfig {
            kernel_dir: dir.path().to_path_buf(),
            model: "nvme".into(),
            benchmarks: vec![Benchmark::Startup],
            workloads: vec!["idle".into()],
            schedulers: vec!["bfq".into()],
            app: "xterm".into(),
            reps: 1,
            seed: 1,
            warmup: 1,
            duration: 1,
            file_scale: 1.0,
            allow_device: false,
        };
        assert!(check(&cfg).is_ok());
        let bad = |c: ValidateConfig, want: &str| {
            let e = check(&c).expect_err(want).to_string();
            assert!(e.contains(want), "{e}");
        };
        bad(
            ValidateConfig {
                kernel_dir: "/nonexistent".into(),
                ..cfg.clone()
            },
            "is not a directory",
        );
        bad(
            ValidateConfig {
                model: "/nonexistent.toml".into(),
                ..cfg.clone()
            },
            "--model",
        );
        bad(
            ValidateConfig {
                schedulers: vec!["cfq".into()],
                ..cfg.clone()
            },
            "does not exist in the kernel",
        );
        bad(ValidateConfig { reps: 0, ..cfg.clone() }, "nothing to validate");
        bad(
            ValidateConfig {
                benchmarks: vec![Benchmark::Video],
                ..cfg
            },
            "cannot be validated",
        );
    }
}
