//! Reports built from [`RunResult`]s: S-compatible text tables, JSON and CSV, SVG bar charts and one HTML page.
//!
//! Everything here is a pure function from results to strings, except [`write_all`], which writes those strings
//! to a directory. Output is deterministic: the same results give the same bytes (no timestamps, ordered maps only).
//!
//! Results are grouped into [`Figure`]s: one figure per (benchmark, target, device, application, quantity), e.g.
//! "start-up time of xterm on sim:seagate-hdd". A figure's rows are background workloads, its columns schedulers,
//! and each cell summarises the repetitions of that combination ([`Summary`]), or is X when a repetition timed
//! out (S writes no stat file on a timeout; docs/BENCHMARKS.md, Reports).

pub mod csv;
pub mod html;
pub mod outdir;
pub mod svg;
pub mod table;

#[cfg(test)]
pub(crate) mod testdata;
#[cfg(test)]
#[cfg(test)]
pub(crate) mod xmlcheck;

use crate::result::{Benchmark, RunResult};
use crate::stats::Summary;
use bfq_workload::fio::Pattern;
use bfq_workload::workloads::WorkloadSpec;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Metadata about the run that produced the results, shown in the HTML report and used by the tables.
///
/// It deliberately has no date, so that a report is a deterministic function of its inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportMeta {
    /// Title of the HTML report.
    pub title: String,
    /// Command line that produced the results.
    pub command: String,
    /// Scenario seed.
    pub seed: u64,
    /// Start-up timeout in seconds, named in the tables' X explanation (S's `run_main_benchmarks` passes 60).
    pub startup_timeout_s: f64,
    /// Given idle-device start-up references per application, seconds. When an application has one, it is the
    /// reference line of its start-up charts; otherwise each scheduler's own idle-workload average is.
    pub startup_reference_s: BTreeMap<String, f64>,
    /// Which published figure or table each figure reproduces (shown with the figure); empty for none.
    pub sources: Vec<SourceNote>,
}

/// Names the published figure or table a group of figures reproduces, e.g. "seed 004, figure 2".
#[derive(Debug, Clone, PartialEq)]
pub struct SourceNote {
    /// Benchmark of the figures.
    pub benchmark: Benchmark,
    /// Device of the figures (any target).
    pub device: String,
    /// Application, for start-up figures.
    pub app: Option<String>,
    /// The quantity; `None` for every quantity of the group.
    pub quantity: Option<Quantity>,
    /// What is reproduced.
    pub text: String,
}

impl SourceNote {
    /// A note for every quantity of (benchmark, device, app).
    pub fn new(benchmark: Benchmark, device: &str, app: Option<&str>, text: impl Into<String>) -> SourceNote {
        SourceNote {
            benchmark,
            device: device.to_string(),
            app: app.map(str::to_string),
            quantity: None,
            text: text.into(),
        }
    }

    /// The same note, for one quantity only.
    pub fn only(mut self, quantity: Quantity) -> SourceNote {
        self.quantity = Some(quantity);
        self
    }

    fn matches(&self, key: &GroupKey, quantity: &Quantity) -> bool {
        self.benchmark == key.benchmark
            && self.device == key.device
            && self.app == key.app
            && (self.quantity.is_none() || self.quantity.as_ref() == Some(quantity))
    }
}

impl ReportMeta {
    /// Metadata with the given command line and seed, the default title and the timeline's start-up timeout
    /// ([`crate::timeline::STARTUP_TIMEOUT`], 60 s).
    pub fn new(command: impl Into<String>, seed: u64) -> ReportMeta {
        ReportMeta {
            title: "bfq benchmark report".to_string(),
            command: command.into(),
            seed,
            startup_timeout_s: crate::timeline::STARTUP_TIMEOUT as f64 / 1e9,
            startup_reference_s: BTreeMap::new(),
            sources: Vec::new(),
        }
    }
}

impl Default for ReportMeta {
    fn default() -> ReportMeta {
        ReportMeta::new("", 0)
    }
}

/// One line of the optional checklist section of the HTML report (e.g. "bfq beats cfq on start-up time").
#[derive(Debug, Clone, PartialEq)]
pub struct ChecklistItem {
    /// What is checked.
    pub text: String,
    /// Whether the check passed.
    pub pass: bool,
    /// Measured values or an explanation.
    pub detail: String,
    /// For a claim about BFQ judged with the seed's era (`bfq-v7r2`): the same check with the newest `bfq`, shown
    /// beside it.
    pub newest: Option<EraCheck>,
}

/// The newest `bfq`'s result for a checklist line judged with the seed's era, and where the eras differ.
#[derive(Debug, Clone, PartialEq)]
pub struct EraCheck {
    /// Whether the newest `bfq` passes the same check.
    pub pass: bool,
    /// The check's line with the newest `bfq`'s figure.
    pub text: String,
    /// Its measured values.
    pub detail: String,
    /// Where the two eras' code differs for this claim, and why that matters.
    pub differs: String,
}

impl ChecklistItem {
    /// Builds an item.
    pub fn new(text: impl Into<String>, pass: bool, detail: impl Into<String>) -> ChecklistItem {
        ChecklistItem {
            text: text.into(),
            pass,
            detail: detail.into(),
            newest: None,
        }
    }
}

/// The quantity a figure shows.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Quantity {
    /// Application start-up time, seconds ([`RunResult::startup_s`]).
    StartupTime,
    /// Aggregate device throughput, MB/s ([`RunResult::throughput_mbps`]).
    AggregateThroughput,
    /// A benchmark-specific value from [`RunResult::extra`], by key.
    Extra(String),
}

impl Quantity {
    /// Human-readable name, e.g. "start-up time"; for an extra value its key without the unit suffix and with
    /// spaces for underscores (`frames_dropped_pct` → "frames dropped").
    pub fn name(&self) -> String {
        match self {
            Quantity::StartupTime => "start-up time".to_string(),
            Quantity::AggregateThroughput => "aggregate throughput".to_string(),
            Quantity::Extra(key) => {
                let stem = match unit_suffix(key) {
                    Some((suffix, _)) if key.len() > suffix.len() => &key[..key.len() - suffix.len()],
                    _ => key.as_str(),
                };
                stem.replace('_', " ")
            }
        }
    }

    /// Short identifier used in slugs and result-list names.
    pub fn id(&self) -> String {
        match self {
            Quantity::StartupTime => "time".to_string(),
            Quantity::AggregateThroughput => "throughput".to_string(),
            Quantity::Extra(key) => key.clone(),
        }
    }

    /// Unit: `s`, `MB/s`, or for extra values one inferred from the key's suffix (`_pct` → `%`, `_s` → `s`,
    /// `_ms` → `ms`, `_mbps` → `MB/s`, `_kbps` → `KB/s`, `_iops` → `IOPS`), else empty.
    pub fn unit(&self) -> &'static str {
        match self {
            Quantity::StartupTime => "s",
            Quantity::AggregateThroughput => "MB/s",
            Quantity::Extra(key) => unit_suffix(key).map(|(_, unit)| unit).unwrap_or(""),
        }
    }

    /// The value of this quantity in one run; `None` when the run does not have it.
    pub fn value_of(&self, run: &RunResult) -> Option<f64> {
        match self {
            Quantity::StartupTime => run.startup_s,
            Quantity::AggregateThroughput => Some(run.throughput_mbps),
            Quantity::Extra(key) => run.extra.get(key).copied(),
        }
    }
}

/// Unit suffixes of extra keys and their units.
const UNIT_SUFFIXES: [(&str, &str); 7] = [
    ("_pct", "%"),
    ("_percent", "%"),
    ("_ms", "ms"),
    ("_s", "s"),
    ("_mbps", "MB/s"),
    ("_kbps", "KB/s"),
    ("_iops", "IOPS"),
];

/// The unit suffix of an extra key (ASCII case-insensitive) and its unit.
fn unit_suffix(key: &str) -> Option<(&'static str, &'static str)> {
    let lower = key.to_ascii_lowercase();
    UNIT_SUFFIXES
        .iter()
        .copied()
        .find(|(suffix, _)| lower.ends_with(suffix))
}

/// One cell of a figure: the summary of one (workload, scheduler) combination over its repetitions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell {
    /// Every repetition completed; the summary of their values.
    Value(Summary),
    /// At least one repetition timed out (printed as X).
    TimedOut {
        /// Repetitions in total.
        runs: usize,
        /// Repetitions that timed out.
        timed_out: usize,
    },
    /// No run of this combination, or none had the quantity (printed as `-`).
    Missing,
}

impl Cell {
    /// The summary, if the cell has one.
    pub fn summary(&self) -> Option<&Summary> {
        match self {
            Cell::Value(s) => Some(s),
            _ => None,
        }
    }

    /// The average, if the cell has one.
    pub fn avg(&self) -> Option<f64> {
        self.summary().map(|s| s.avg)
    }
}

/// A horizontal reference value drawn across a chart (S's idle-device line).
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// What the value is, e.g. "idle" or "1r-seq"; the chart adds the scheduler.
    pub label: String,
    /// Value in the figure's unit.
    pub value: f64,
    /// Scheduler column whose reference this is (for colouring); `None` for a given reference.
    pub scheduler: Option<String>,
}

/// One figure: a (benchmark, target, device, app, quantity) combination with workloads as rows and schedulers as
/// columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Benchmark.
    pub benchmark: Benchmark,
    /// Target, e.g. `sim:seagate-hdd`.
    pub target: String,
    /// Device name.
    pub device: String,
    /// Foreground application, if any.
    pub app: Option<String>,
    /// Quantity shown.
    pub quantity: Quantity,
    /// Human-readable title.
    pub title: String,
    /// File-name-safe identifier, unique within a report.
    pub slug: String,
    /// Row labels (workloads), S order first, then first-seen order.
    pub workloads: Vec<String>,
    /// Column labels (schedulers, with tunables in brackets when there are any), first-seen order.
    pub schedulers: Vec<String>,
    /// `cells[row][column]`.
    pub cells: Vec<Vec<Cell>>,
    /// The workload that is the reference case (`0r0w` for start-up time, `1r-seq` for throughput), if present.
    pub reference_workload: Option<String>,
    /// Reference lines for the chart.
    pub references: Vec<Reference>,
    /// The published figure or table this one reproduces, from [`ReportMeta::sources`].
    pub source: Option<String>,
}

impl Figure {
    /// The unit of the figure's quantity.
    pub fn unit(&self) -> &'static str {
        self.quantity.unit()
    }

    /// Cell at (workload, scheduler), by label.
    pub fn cell(&self, workload: &str, scheduler: &str) -> Option<&Cell> {
        let r = self.workloads.iter().position(|w| w == workload)?;
        let c = self.schedulers.iter().position(|s| s == scheduler)?;
        Some(&self.cells[r][c])
    }

    /// The short name used in `result_list.txt`: benchmark, application and quantity when not the benchmark's
    /// main one, e.g. `throughput`, `startup-xterm`, `startup-xterm-throughput`, `video-drop_rate_pct`.
    pub fn list_name(&self) -> String {
        let mut name = self.benchmark.name().to_string();
        if let Some(app) = &self.app {
            name.push('-');
            name.push_str(app);
        }
        let primary = match self.benchmark {
            Benchmark::Startup => Quantity::StartupTime,
            _ => Quantity::AggregateThroughput,
        };
        if self.quantity != primary || !matches!(self.benchmark, Benchmark::Startup | Benchmark::Throughput) {
            let id = self.quantity.id();
            if id != self.benchmark.name() {
                name.push('-');
                name.push_str(&id);
            }
        }
        name
    }
}

/// Column label of a run: the scheduler, with its tunables and then its scenario settings in brackets when it has
/// any (`bfq[slice_idle=0]`, `bfq-v7r2[HZ=100]`).
pub fn scheduler_label(run: &RunResult) -> String {
    if run.tunables.is_empty() && run.scenario.is_empty() {
        run.scheduler.clone()
    } else {
        let all: Vec<&str> = run.tunables.iter().chain(&run.scenario).map(String::as_str).collect();
        format!("{}[{}]", run.scheduler, all.join(","))
    }
}

/// S's workload order after idle: 1r-seq, 10r-seq, 10r-rand, 5r5w-seq, 5r5w-rand (ranks 1 to 5).
const S_WORKLOAD_ORDER: [(u32, u32, Pattern); 5] = [
    (1, 0, Pattern::Sequential),
    (10, 0, Pattern::Sequential),
    (10, 0, Pattern::Random),
    (5, 5, Pattern::Sequential),
    (5, 5, Pattern::Random),
];

/// Position of a workload in S's order (idle, 1r-seq, 10r-seq, 10r-rand, 5r5w-seq, 5r5w-rand); `None` for
/// others and for labels that are not background workloads (fairness zones, iozone threads, ...). Names are read by
/// [`WorkloadSpec::parse`], so `10r0w-seq` = `10r-seq` and `idle` = `0r0w`.
pub fn s_workload_rank(workload: &str) -> Option<usize> {
    let spec = WorkloadSpec::parse(workload).ok()?;
    if spec.is_idle() {
        return Some(0);
    }
    S_WORKLOAD_ORDER
        .iter()
        .position(|&(r, w, p)| r == spec.readers && w == spec.writers && p == spec.pattern)
        .map(|p| p + 1)
}

/// Whether a workload is the idle one (no background readers or writers): `idle`, `0r0w`, `0r0w-seq`, `0r-seq`.
pub fn is_idle_workload(workload: &str) -> bool {
    WorkloadSpec::parse(workload).is_ok_and(|w| w.is_idle())
}

/// Whether a workload is one sequential reader (`1r-seq`, `1r0w-seq`), the throughput reference case.
pub fn is_one_seq_reader(workload: &str) -> bool {
    s_workload_rank(workload) == Some(1)
}

/// Orders labels: those with an S rank first by rank, then the others in first-seen order.
fn order_workloads(first_seen: Vec<String>) -> Vec<String> {
    let mut indexed: Vec<(usize, usize, String)> = first_seen
        .into_iter()
        .enumerate()
        .map(|(i, w)| (s_workload_rank(&w).unwrap_or(usize::MAX), i, w))
        .collect();
    indexed.sort();
    indexed.into_iter().map(|(_, _, w)| w).collect()
}

/// Longest slug, bytes: file names add at most `-table.txt` to it, far below the 255 bytes Linux file systems allow,
/// whatever a target's name (a device TOML path can be long).
pub const MAX_SLUG_BYTES: usize = 120;

/// Turns text into a file-name-safe slug: lowercase ASCII letters and digits separated by single dashes. A slug
/// longer than [`MAX_SLUG_BYTES`] is cut and ends in 16 hex digits of a hash (FNV-1a, 64 bits) of the whole slug,
/// so that two long titles still get two names.
pub fn slug(text: &str) -> String {
    let full = full_slug(text);
    if full.len() <= MAX_SLUG_BYTES {
        return full;
    }
    let hash = full.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut cut = full[..MAX_SLUG_BYTES - 17].trim_end_matches('-').to_string();
    cut.push_str(&format!("-{hash:016x}"));
    cut
}

fn full_slug(text: &str) -> String {
    let mut out = String::new();
    for ch in text.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        out.push_str("figure");
    }
    out
}

/// Key of a figure group before the quantity is chosen.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey {
    benchmark: Benchmark,
    target: String,
    device: String,
    app: Option<String>,
}

/// Where the scheduler runs on a simulated target, when not directly above the device: md RAID1 runs it on each
/// member disk (docs/DEVICES.md, "md RAID1").
fn scheduler_level(target: &str) -> Option<&'static str> {
    let device = target.strip_prefix("sim:")?;
    match bfq_sim::device::resolve(device).ok()? {
        bfq_sim::device::DeviceConfig::Raid1(_) => Some("md; the scheduler runs on each member disk"),
        _ => None,
    }
}

fn figure_title(key: &GroupKey, quantity: &Quantity) -> String {
    let mut on = if key.target.ends_with(&key.device) || key.device.is_empty() {
        key.target.clone()
    } else {
        format!("{} (device {})", key.target, key.device)
    };
    if let Some(level) = scheduler_level(&key.target) {
        on = format!("{on} ({level})");
    }
    match (quantity, &key.app) {
        (q, Some(trace)) if key.benchmark == Benchmark::Replay => {
            format!("{} replaying {trace} on {on}", capitalise(&q.name()))
        }
        (Quantity::StartupTime, Some(app)) => format!("Start-up time of {app} on {on}"),
        (Quantity::StartupTime, None) => format!("Start-up time on {on}"),
        (Quantity::AggregateThroughput, _) if key.benchmark == Benchmark::Throughput => {
            format!("Aggregate throughput on {on} (throughput benchmark)")
        }
        (Quantity::AggregateThroughput, Some(app)) if key.benchmark == Benchmark::Startup => {
            format!("Aggregate throughput during {app} start-up on {on}")
        }
        (q, Some(app)) => format!(
            "{} with {app} on {on} ({} benchmark)",
            capitalise(&q.name()),
            key.benchmark
        ),
        (q, None) => format!("{} on {on} ({} benchmark)", capitalise(&q.name()), key.benchmark),
    }
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Groups results into figures, in first-seen order of (benchmark, target, device, app), and within each group
/// start-up time (start-up benchmark only), aggregate throughput, then the extra keys in sorted order.
pub fn figures(results: &[RunResult], meta: &ReportMeta) -> Vec<Figure> {
    let mut keys: Vec<GroupKey> = Vec::new();
    let mut runs_of: BTreeMap<GroupKey, Vec<&RunResult>> = BTreeMap::new();
    for run in results {
        let key = GroupKey {
            benchmark: run.benchmark,
            target: run.target.clone(),
            device: run.device.clone(),
            app: run.app.clone(),
        };
        if !runs_of.contains_key(&key) {
            keys.push(key.clone());
        }
        runs_of.entry(key).or_default().push(run);
    }

    let mut out = Vec::new();
    let mut used_slugs: BTreeSet<String> = BTreeSet::new();
    for key in keys {
        let runs = &runs_of[&key];
        let mut quantities = Vec::new();
        if key.benchmark == Benchmark::Startup || runs.iter().any(|r| r.startup_s.is_some()) {
            quantities.push(Quantity::StartupTime);
        }
        quantities.push(Quantity::AggregateThroughput);
        let extras: BTreeSet<&String> = runs.iter().flat_map(|r| r.extra.keys()).collect();
        quantities.extend(extras.into_iter().map(|k| Quantity::Extra(k.clone())));

        for quantity in quantities {
            let mut figure = build_figure(&key, quantity, runs, meta);
            let mut candidate = figure.slug.clone();
            let mut n = 2;
            while used_slugs.contains(&candidate) {
                candidate = format!("{}-{n}", figure.slug);
                n += 1;
            }
            used_slugs.insert(candidate.clone());
            figure.slug = candidate;
            out.push(figure);
        }
    }
    out
}

fn build_figure(key: &GroupKey, quantity: Quantity, runs: &[&RunResult], meta: &ReportMeta) -> Figure {
    let mut workloads_seen: Vec<String> = Vec::new();
    let mut schedulers: Vec<String> = Vec::new();
    let mut by_cell: BTreeMap<(String, String), Vec<&RunResult>> = BTreeMap::new();
    for run in runs {
        let sched = scheduler_label(run);
        if !workloads_seen.contains(&run.workload) {
            workloads_seen.push(run.workload.clone());
        }
        if !schedulers.contains(&sched) {
            schedulers.push(sched.clone());
        }
        by_cell.entry((run.workload.clone(), sched)).or_default().push(run);
    }
    let workloads = order_workloads(workloads_seen);

    let cells: Vec<Vec<Cell>> = workloads
        .iter()
        .map(|w| {
            schedulers
                .iter()
                .map(|s| match by_cell.get(&(w.clone(), s.clone())) {
                    None => Cell::Missing,
                    Some(reps) => {
                        let timed_out = reps.iter().filter(|r| r.timed_out).count();
                        if timed_out > 0 {
                            Cell::TimedOut {
                                runs: reps.len(),
                                timed_out,
                            }
                        } else {
                            let values: Vec<f64> = reps.iter().filter_map(|r| quantity.value_of(r)).collect();
                            Summary::of(&values).map(Cell::Value).unwrap_or(Cell::Missing)
                        }
                    }
                })
                .collect()
        })
        .collect();

    let reference_workload = match quantity {
        Quantity::StartupTime => workloads.iter().find(|w| is_idle_workload(w)).cloned(),
        Quantity::AggregateThroughput if key.benchmark == Benchmark::Throughput => {
            workloads.iter().find(|w| is_one_seq_reader(w)).cloned()
        }
        _ => None,
    };

    let given = match (&quantity, &key.app) {
        (Quantity::StartupTime, Some(app)) => meta.startup_reference_s.get(app).copied(),
        _ => None,
    };
    let references = if let Some(value) = given {
        vec![Reference {
            label: "idle reference".to_string(),
            value,
            scheduler: None,
        }]
    } else if let Some(ref_w) = &reference_workload {
        let row = workloads.iter().position(|w| w == ref_w).unwrap_or(0);
        let what = if matches!(quantity, Quantity::StartupTime) {
            "idle"
        } else {
            ref_w.as_str()
        };
        schedulers
            .iter()
            .zip(&cells[row])
            .filter_map(|(s, c)| {
                c.avg().map(|value| Reference {
                    label: what.to_string(),
                    value,
                    scheduler: Some(s.clone()),
                })
            })
            .collect()
    } else {
        Vec::new()
    };

    let title = figure_title(key, &quantity);
    let mut slug_text = key.benchmark.name().to_string();
    if let Some(app) = &key.app {
        let _ = write!(slug_text, "-{app}");
    }
    let _ = write!(slug_text, "-{}-{}", quantity.id(), key.target);
    if !key.target.ends_with(&key.device) {
        let _ = write!(slug_text, "-{}", key.device);
    }

    Figure {
        benchmark: key.benchmark,
        target: key.target.clone(),
        device: key.device.clone(),
        app: key.app.clone(),
        title,
        slug: slug(&slug_text),
        workloads,
        schedulers,
        cells,
        reference_workload,
        references,
        source: {
            let notes: Vec<&str> = meta
                .sources
                .iter()
                .filter(|n| n.matches(key, &quantity))
                .map(|n| n.text.as_str())
                .collect();
            (!notes.is_empty()).then(|| notes.join("; "))
        },
        quantity,
    }
}

/// Whether `fig` shows one of its benchmark's headline quantities, the ones `bfq suite` prints: start-up time and
/// the throughput during it; aggregate throughput (throughput, interleaved); drop rate (video); each reader's share
/// and the largest deviation (fairness); the iozone phases; the throughput, the median and 99th-percentile latency
/// and the slowdown of a trace replay.
pub fn is_headline(fig: &Figure) -> bool {
    let extra = |k: &str| matches!(&fig.quantity, Quantity::Extra(x) if x == k);
    match fig.benchmark {
        Benchmark::Startup => matches!(fig.quantity, Quantity::StartupTime | Quantity::AggregateThroughput),
        Benchmark::Throughput => fig.quantity == Quantity::AggregateThroughput,
        Benchmark::Video => extra("drop_rate_pct"),
        Benchmark::Interleaved => fig.quantity == Quantity::AggregateThroughput || extra("mean_request_kib"),
        Benchmark::Fairness => {
            matches!(&fig.quantity, Quantity::Extra(x) if x.starts_with("share_") || x == "max_share_error_pct")
        }
        Benchmark::Iozone => false,
        Benchmark::Replay => {
            fig.quantity == Quantity::AggregateThroughput
                || extra("latency_p50_ms")
                || extra("latency_p99_ms")
                || extra("slowdown")
        }
    }
}

/// Writes every report file into `dir` (created if missing) and returns their paths in the order written:
/// `results.json`, `results.csv`, `summary.csv`, `result_list.txt`, `summary.txt`, then per figure
/// `<slug>-table.txt` and `<slug>.svg`, and last `report.html`.
///
/// The bytes written depend only on the arguments.
pub fn write_all(
    dir: &Path,
    results: &[RunResult],
    meta: &ReportMeta,
    checklist: &[ChecklistItem],
) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let figs = figures(results, meta);
    let palette = svg::Palette::for_figures(&figs);
    let mut written = Vec::new();
    let mut put = |name: &str, contents: &str| -> std::io::Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, contents)?;
        written.push(path);
        Ok(())
    };

    // The deterministic files never hold wall-clock figures: measured policy CPU times go to cpu.json only.
    let deterministic: Vec<RunResult> = results
        .iter()
        .map(|r| RunResult {
            sched_cpu_ns_per_request: None,
            ..r.clone()
        })
        .collect();
    let mut json = serde_json::to_string_pretty(&deterministic).map_err(std::io::Error::other)?;
    json.push('\n');
    put("results.json", &json)?;
    put("results.csv", &csv::runs_csv(&deterministic))?;
    put("summary.csv", &csv::summary_csv(&figs))?;
    put("result_list.txt", &table::result_list(&figs))?;
    put("summary.txt", &table::summary_table(&figs))?;
    if let Some(cpu) = cpu_json(results) {
        put(CPU_FILE, &cpu)?;
    }
    let iozone = table::iozone_tables(results);
    if let Some(t) = &iozone {
        put(IOZONE_FILE, t)?;
    }
    let headline: Vec<&Figure> = figs.iter().filter(|f| is_headline(f)).collect();
    let side = table::side_by_side(&headline);
    if let Some(t) = &side {
        put(SIDE_BY_SIDE_FILE, t)?;
    }
    for fig in &figs {
        put(&format!("{}-table.txt", fig.slug), &table::s_table(fig, meta))?;
        put(&format!("{}.svg", fig.slug), &svg::bar_chart(fig, &palette))?;
    }
    put(
        "report.html",
        &html::report_html_with(&figs, meta, checklist, side.as_deref(), iozone.as_deref()),
    )?;
    Ok(written)
}

/// File of the measured policy CPU times (written only when some run measured them; not reproducible).
pub const CPU_FILE: &str = "cpu.json";
/// File of the headline tables with the targets side by side (written only when the results span several targets).
pub const SIDE_BY_SIDE_FILE: &str = "targets-side-by-side.txt";
/// File of the iozone tables in seed 003's layout (written only when there are iozone results).
pub const IOZONE_FILE: &str = "iozone-tables.txt";

/// One run's measured policy CPU time, as written to [`CPU_FILE`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CpuRecord {
    /// Benchmark.
    pub benchmark: Benchmark,
    /// Target.
    pub target: String,
    /// Scheduler column label (with tunables).
    pub scheduler: String,
    /// Workload.
    pub workload: String,
    /// Application, if any.
    pub app: Option<String>,
    /// Repetition.
    pub rep: u32,
    /// Wall-clock time inside the policy per request, ns.
    pub sched_cpu_ns_per_request: f64,
}

/// The [`CPU_FILE`] contents: every run that measured its policy CPU time, or `None` if none did.
pub fn cpu_json(results: &[RunResult]) -> Option<String> {
    let records: Vec<CpuRecord> = results
        .iter()
        .filter_map(|r| {
            r.sched_cpu_ns_per_request.map(|ns| CpuRecord {
                benchmark: r.benchmark,
                target: r.target.clone(),
                scheduler: scheduler_label(r),
                workload: r.workload.clone(),
                app: r.app.clone(),
                rep: r.rep,
                sched_cpu_ns_per_request: ns,
            })
        })
        .collect();
    if records.is_empty() {
        return None;
    }
    let mut json = serde_json::to_string_pretty(&records).ok()?;
    json.push('\n');
    Some(json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata::{run, sample_results};

    #[test]
    fn workload_ranks_follow_s_order() {
        let names = ["0r0w", "1r-seq", "10r-seq", "10r0w-rand", "5r5w-seq", "5r5w-rand"];
        for (i, n) in names.iter().enumerate() {
            assert_eq!(s_workload_rank(n), Some(i), "{n}");
        }
        assert_eq!(s_workload_rank("0r0w-seq"), Some(0));
        assert_eq!(s_workload_rank("idle"), Some(0));
        assert_eq!(s_workload_rank("3r-seq"), None);
        assert_eq!(s_workload_rank("weird"), None);
        // Labels of the other benchmarks have no rank.
        for label in ["1:2:4-outer", "5r-interleaved", "1-thread", "10-thread"] {
            assert_eq!(s_workload_rank(label), None, "{label}");
            assert!(!is_idle_workload(label), "{label}");
        }
        // Read by the one workload parser: no suffix means -seq, case does not matter (the report's former own
        // parser ranked neither).
        assert_eq!(s_workload_rank("1r"), Some(1));
        assert_eq!(s_workload_rank("10R0W-RAND"), Some(3));
        assert!(is_one_seq_reader("1r0w-seq"));
        assert!(is_idle_workload("0r0w-rand") && is_idle_workload("idle"));
        assert!(!is_idle_workload("none"));
    }

    #[test]
    fn rows_prefer_s_order_then_first_seen() {
        let results = vec![
            run("throughput", "bfq", "custom-b", 0, 1.0),
            run("throughput", "bfq", "5r5w-seq", 0, 1.0),
            run("throughput", "bfq", "custom-a", 0, 1.0),
            run("throughput", "bfq", "10r-seq", 0, 1.0),
            run("throughput", "bfq", "1r-seq", 0, 1.0),
        ];
        let figs = figures(&results, &ReportMeta::default());
        assert_eq!(figs.len(), 1);
        assert_eq!(
            figs[0].workloads,
            ["1r-seq", "10r-seq", "5r5w-seq", "custom-b", "custom-a"]
        );
    }

    #[test]
    fn groups_into_figures_with_x_cells_and_references() {
        let figs = figures(&sample_results(), &ReportMeta::default());
        let titles: Vec<&str> = figs.iter().map(|f| f.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Start-up time of xterm on sim:seagate-hdd",
                "Aggregate throughput during xterm start-up on sim:seagate-hdd",
                "Aggregate throughput on sim:seagate-hdd (throughput benchmark)",
            ]
        );
        let startup = &figs[0];
        assert_eq!(startup.schedulers, ["bfq", "cfq", "deadline"]);
        assert_eq!(startup.workloads, ["0r0w", "10r-seq", "10r-rand", "5r5w-seq"]);
        assert!(matches!(
            startup.cell("10r-rand", "deadline"),
            Some(Cell::TimedOut { runs: 2, timed_out: 1 })
        ));
        let s = startup.cell("10r-seq", "bfq").unwrap().summary().unwrap();
        assert_eq!(s.n, 2);
        assert_eq!(startup.reference_workload.as_deref(), Some("0r0w"));
        assert_eq!(startup.references.len(), 3);
        assert_eq!(startup.references[0].label, "idle");
        assert_eq!(startup.references[0].scheduler.as_deref(), Some("bfq"));
        let thr = &figs[2];
        assert_eq!(thr.reference_workload.as_deref(), Some("1r-seq"));
        assert_eq!(thr.list_name(), "throughput");
        assert_eq!(figs[0].list_name(), "startup-xterm");
        assert_eq!(figs[1].list_name(), "startup-xterm-throughput");
        let slugs: BTreeSet<&str> = figs.iter().map(|f| f.slug.as_str()).collect();
        assert_eq!(slugs.len(), figs.len());
        assert_eq!(figs[0].slug, "startup-xterm-time-sim-seagate-hdd");
    }

    #[test]
    fn given_reference_replaces_per_scheduler_idle_lines() {
        let mut meta = ReportMeta::default();
        meta.startup_reference_s.insert("xterm".into(), 0.25);
        let figs = figures(&sample_results(), &meta);
        assert_eq!(figs[0].references.len(), 1);
        assert_eq!(figs[0].references[0].value, 0.25);
    }

    #[test]
    fn tunables_make_separate_columns_and_extras_make_figures() {
        let mut a = run("video", "bfq", "10r-seq", 0, 1.0);
        a.extra.insert("drop_rate_pct".into(), 3.0);
        let mut b = a.clone();
        b.tunables = vec!["slice_idle=0".into()];
        let figs = figures(&[a, b], &ReportMeta::default());
        assert_eq!(figs.len(), 2);
        assert_eq!(figs[1].quantity, Quantity::Extra("drop_rate_pct".into()));
        assert_eq!(figs[1].unit(), "%");
        assert_eq!(figs[1].quantity.name(), "drop rate");
        assert_eq!(figs[1].title, "Drop rate on sim:seagate-hdd (video benchmark)");
        assert_eq!(figs[1].schedulers, ["bfq", "bfq[slice_idle=0]"]);
    }

    #[test]
    fn source_notes_label_matching_figures() {
        let mut meta = ReportMeta::default();
        meta.sources.push(
            SourceNote::new(Benchmark::Startup, "seagate-hdd", Some("xterm"), "seed 004, figure 2")
                .only(Quantity::StartupTime),
        );
        meta.sources.push(SourceNote::new(
            Benchmark::Throughput,
            "seagate-hdd",
            None,
            "seed 004, figure 1",
        ));
        meta.sources.push(SourceNote::new(
            Benchmark::Throughput,
            "plextor-ssd",
            None,
            "seed 004, figure 7",
        ));
        let figs = figures(&sample_results(), &meta);
        assert_eq!(figs[0].source.as_deref(), Some("seed 004, figure 2"));
        assert_eq!(
            figs[1].source, None,
            "throughput during start-up is not the seed's figure"
        );
        assert_eq!(figs[2].source.as_deref(), Some("seed 004, figure 1"));
        let t = table::s_table(&figs[0], &meta);
        assert_eq!(t.lines().nth(1), Some("# Reproduces: seed 004, figure 2"));
    }

    #[test]
    fn cpu_times_stay_out_of_the_deterministic_files() {
        let mut a = run("iozone", "bfq", "1-thread", 0, 1.0);
        a.sched_cpu_ns_per_request = Some(123.0);
        let b = run("iozone", "noop", "1-thread", 0, 1.0);
        assert!(cpu_json(std::slice::from_ref(&b)).is_none());
        let dir = std::env::temp_dir().join(format!("bfq-cpu-test-{}", std::process::id()));
        let files = write_all(&dir, &[a, b], &ReportMeta::default(), &[]).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(names.contains(&CPU_FILE.to_string()));
        assert!(names.contains(&IOZONE_FILE.to_string()));
        let json = std::fs::read_to_string(dir.join("results.json")).unwrap();
        assert!(!json.contains("123"), "{json}");
        let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
        assert!(!csv.contains("123"));
        let cpu = std::fs::read_to_string(dir.join(CPU_FILE)).unwrap();
        assert!(cpu.contains("\"sched_cpu_ns_per_request\": 123.0"), "{cpu}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn slugs_are_file_name_safe() {
        assert_eq!(
            slug("Start-up: xterm on sim:seagate-hdd!"),
            "start-up-xterm-on-sim-seagate-hdd"
        );
        assert_eq!(slug("///"), "figure");
    }

    #[test]
    fn long_slugs_are_capped_and_stay_distinct() {
        // A device TOML deep in a tree made chart names past the file system's 255-byte limit (issue 16, defect 3).
        let deep = format!(
            "startup-xterm-startup_time-sim:/{}/device.toml",
            "very-long-directory/".repeat(20)
        );
        let other = deep.replace("device.toml", "device2.toml");
        let (a, b) = (slug(&deep), slug(&other));
        assert!(a.len() <= MAX_SLUG_BYTES && b.len() <= MAX_SLUG_BYTES, "{a} {b}");
        assert_ne!(a, b, "the hash keeps two long titles apart");
        assert!(
            a.starts_with("startup-xterm-startup-time-sim-very-long-directory"),
            "{a}"
        );
        assert_eq!(slug(&deep), a, "deterministic");
    }
}
