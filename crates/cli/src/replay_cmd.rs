//! `bfq replay TRACE`: a block trace replayed under each scheduler on one or more targets, with the suite's reports
//! (docs/TRACES.md).

use crate::progress;
use anyhow::{anyhow, bail, Result};
use bfq_suite::cmdline;
use bfq_suite::experiment::{Experiment, Work};
use bfq_suite::limits;
use bfq_suite::replay::{self, ReplayWork};
use bfq_suite::report::outdir::ReportDir;
use bfq_suite::report::{write_all, ReportMeta};
use bfq_suite::suite::{printed_tables, Benchmark};
use bfq_suite::target::Target;
use bfq_workload::trace::replay::{FlowKey, Mapping, Pacing, ReplayOptions, MAX_FLOWS, MAX_SPEED};
use bfq_workload::trace::{ParseOptions, TraceEvent, TraceFormat, MAX_TRACE_REQUESTS};
use std::path::PathBuf;
use std::sync::Arc;

/// Shown after `bfq replay --help`.
const AFTER_HELP: &str = "\
Formats (--format auto guesses from the first bytes):
  blkparse  blkparse's default text output; issue (D) events, or queue (Q) events with --events queue
  blktrace  blktrace's binary files DEV.blktrace.N (give one of them, or DEV: every CPU's file is read)
  msr       MSR Cambridge CSV: Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime (has response times)
  fiu       FIU traces: ts pid process lba size R/W major minor md5

Flows are processes (pid) where the trace has them, else volumes; offsets are mapped onto the replay area (the
simulated device's capacity; on engine:/kernel: one file in DIR/bfq-files, by default the trace's footprint up to
half the free space) by wrapping (offset modulo the area) or scaling. Reported per flow and in total (row `all`):
throughput, latency p50/p90/p99/p99.9 and mean, the slowdown against the trace's recorded response times (MSR; blk
traces with their completions), and the issue lateness of open-loop replays (replay.txt).

Examples:
  bfq replay fixtures/traces/loop-fio.blkparse --target sim:seagate-hdd
  bfq replay fixtures/traces/loop-fio.blktrace.0 --sched bfq,mq-deadline --mode closed --target nvme
  bfq replay hm_1.csv --format msr --flows region:1024 --map scale --speed 4 --max-requests 100000
  bfq replay fixtures/traces/loop-fio.blkparse --target engine:/mnt/bfq,kernel:/mnt/bfq --sched bfq,none";

/// Arguments of `bfq replay`.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP, allow_negative_numbers = true)]
pub struct ReplayArgs {
    /// The trace file (blktrace output: DEV.blktrace.N or the base name DEV).
    trace: PathBuf,
    /// Trace format: auto, blkparse, blktrace, msr or fiu.
    #[arg(long, default_value = "auto", value_name = "FORMAT")]
    format: String,
    /// blkparse and blktrace: the event that is a request, issue (D) or queue (Q).
    #[arg(long, default_value = "issue", value_name = "issue|queue")]
    events: String,
    /// Where to run: sim:<device preset or TOML file>, engine:<dir> or kernel:<dir>; comma-separated or repeated.
    #[arg(long, value_name = "TARGET[,TARGET...]", default_value = "sim:seagate-hdd")]
    target: Vec<String>,
    /// Schedulers, comma-separated (see `bfq schedulers`; kernel: targets take none, mq-deadline, kyber, bfq).
    #[arg(
        long,
        value_name = "A,B,...",
        default_value = "bfq,cfq,deadline,noop,mq-deadline,kyber"
    )]
    sched: String,
    /// Scheduler tunable as key=value (repeatable); applies to every chosen scheduler that has the key.
    #[arg(long = "tune", value_name = "KEY=VALUE")]
    tune: Vec<String>,
    /// open: each request at its recorded time (divided by --speed); closed: per flow, after the previous
    /// request completed plus the recorded gap.
    #[arg(long, default_value = "open", value_name = "open|closed")]
    mode: String,
    /// Time scale: recorded times and gaps are divided by it (2 = twice as fast).
    #[arg(long, default_value_t = 1.0, value_name = "FACTOR")]
    speed: f64,
    /// Offset mapping onto the replay area: wrap (offset modulo the area) or scale (times area/footprint when
    /// the footprint is larger).
    #[arg(long, default_value = "wrap", value_name = "wrap|scale")]
    map: String,
    /// Replay area (e.g. 512M, 4G); default: the simulated device's capacity, or on real targets the trace's
    /// footprint up to half the free space.
    #[arg(long, value_name = "SIZE")]
    area: Option<String>,
    /// Flow key: auto (pid, else volume), pid, process, volume, region (1 GiB regions) or region:MIB.
    #[arg(long, default_value = "auto", value_name = "KEY")]
    flows: String,
    /// Flows kept apart; the ones with the fewest requests beyond it are merged into `other`.
    #[arg(long, default_value_t = bfq_workload::trace::replay::DEFAULT_MAX_FLOWS, value_name = "N")]
    max_flows: usize,
    /// Replay only the first N requests (in time) of the trace.
    #[arg(long, value_name = "N")]
    max_requests: Option<usize>,
    /// Seconds the replay may run past its last scheduled request before it is stopped (unfinished requests are
    /// reported).
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    timeout: f64,
    /// Directory for the report, tables, charts, JSON and CSV (default: bfq-results/replay).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the results as JSON (the total, then each flow, per target and scheduler) instead of the tables.
    #[arg(long)]
    json: bool,
    /// Seed of the simulation.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Worker threads for simulator targets (default: every core); real targets run one at a time.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Real targets: allow a device that `bfq loopdev` did not create (its scheduler is restored afterwards).
    #[arg(long)]
    allow_device: bool,
}

fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Checks every option and reads the trace, before any run.
fn experiments(a: &ReplayArgs) -> Result<Vec<Experiment>> {
    let format = match a.format.trim() {
        "auto" => None,
        f => Some(
            TraceFormat::parse(f)
                .ok_or_else(|| anyhow!("unknown trace format '{f}': use auto, blkparse, blktrace, msr or fiu"))?,
        ),
    };
    let event = match a.events.trim() {
        "issue" | "D" => TraceEvent::Issue,
        "queue" | "Q" => TraceEvent::Queue,
        e => bail!("unknown --events '{e}': use issue (D) or queue (Q)"),
    };
    let pacing = Pacing::parse(&a.mode).ok_or_else(|| anyhow!("unknown --mode '{}': use open or closed", a.mode))?;
    let mapping = Mapping::parse(&a.map).ok_or_else(|| anyhow!("unknown --map '{}': use wrap or scale", a.map))?;
    let flow_key = FlowKey::parse(&a.flows).ok_or_else(|| {
        anyhow!(
            "unknown --flows '{}': use auto, pid, process, volume, region or region:MIB (1..=1073741824)",
            a.flows
        )
    })?;
    if !(a.speed.is_finite() && a.speed > 0.0 && a.speed <= MAX_SPEED) {
        bail!("--speed {} is out of range: give a number in (0, {MAX_SPEED}]", a.speed);
    }
    if !(1..=MAX_FLOWS).contains(&a.max_flows) {
        bail!("--max-flows {} is out of range: give 1..={MAX_FLOWS}", a.max_flows);
    }
    if let Some(n) = a.max_requests {
        if !(1..=MAX_TRACE_REQUESTS).contains(&n) {
            bail!("--max-requests {n} is out of range: give 1..={MAX_TRACE_REQUESTS}");
        }
    }
    if !(a.timeout.is_finite() && a.timeout > 0.0 && a.timeout <= limits::MAX_DURATION_S) {
        bail!(
            "--timeout {} is out of range: give seconds in (0, {}]",
            a.timeout,
            limits::MAX_DURATION_S
        );
    }
    let area = a
        .area
        .as_deref()
        .map(|s| bfq_suite::real::loopdev::parse_size(s).map_err(|e| anyhow!("--area {e}")))
        .transpose()?;
    if area.is_some_and(|b| b < 4096) {
        bail!("--area must be at least 4K");
    }
    let mut targets = Vec::new();
    for t in &a.target {
        targets.extend(Target::parse_list(t)?);
    }
    if let Some(bytes) = area {
        for t in &targets {
            if let Target::Sim(d) = t {
                if let Ok(cfg) = bfq_sim::device::resolve(d) {
                    let capacity = cfg.build().info().capacity_sectors.saturating_mul(512);
                    if bytes > capacity {
                        bail!(
                            "--area {} is larger than the {capacity} bytes of {t}: give at most the device's capacity",
                            a.area.as_deref().unwrap_or_default()
                        );
                    }
                }
            }
        }
    }
    let schedulers = list(&a.sched);
    bfq_suite::suite::check_runs(&targets, &schedulers, &a.tune, Benchmark::Replay)?;
    if a.allow_device && targets.iter().all(Target::is_sim) {
        bail!("--allow-device applies to the real targets (engine:DIR, kernel:DIR) only, and every --target here is a simulator");
    }
    let opts = ParseOptions {
        event,
        max_requests: a.max_requests.unwrap_or(MAX_TRACE_REQUESTS),
        truncate: a.max_requests.is_some(),
    };
    let (label, trace) = replay::load_trace(&a.trace, format, &opts)?;
    let options = ReplayOptions {
        pacing,
        speed: a.speed,
        mapping,
        flow_key,
        max_flows: a.max_flows,
    };
    let work = Arc::new(ReplayWork {
        label,
        trace: Arc::new(trace),
        options,
        area_bytes: area,
        // Checked above: (0, MAX_DURATION_S] seconds.
        timeout: (a.timeout * 1e9).round() as u64,
    });
    let mut exps = Vec::new();
    for t in &targets {
        for s in &schedulers {
            let mut exp = Experiment::new(t.clone(), s, Work::Replay(work.clone()));
            exp.settings.seed = a.seed;
            exp.settings.real.allow_device = a.allow_device;
            exp.tunables = bfq_suite::suite::tunables_for(s, &a.tune, Benchmark::Replay);
            exps.push(exp);
        }
    }
    Ok(exps)
}

/// Runs `bfq replay`.
pub fn run(a: ReplayArgs) -> Result<()> {
    let exps = experiments(&a)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bfq-results").join("replay"));
    // Checked before any run: a bad --out must not throw away minutes of work.
    let report_dir = ReportDir::prepare(&out)?;
    let real = exps.iter().any(|e| !e.target.is_sim());
    let threads = if real {
        1
    } else {
        limits::worker_threads(
            limits::jobs(
                a.jobs
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            )?,
            exps.len(),
        )
    };
    eprintln!("replay: {} runs with {threads} threads", exps.len());
    let start = std::time::Instant::now();
    let bar = progress::Bar::stderr();
    let outcomes = replay::run_all(&exps, threads, &|done, total| bar.update(done, total));
    bar.finish();
    let outcomes = outcomes?;
    let results: Vec<_> = outcomes.iter().flat_map(|o| o.results.iter().cloned()).collect();
    let meta = ReportMeta {
        title: format!(
            "bfq replay: {}",
            results.first().and_then(|r| r.app.clone()).unwrap_or_default()
        ),
        ..ReportMeta::new(cmdline::from_env(), a.seed)
    };
    let notes = replay::replay_text(&outcomes);
    let files = report_dir
        .commit(|dir| {
            let mut files = write_all(dir, &results, &meta, &[])?;
            let path = dir.join(REPLAY_FILE);
            std::fs::write(&path, &notes)?;
            files.push(path);
            Ok::<_, std::io::Error>(files)
        })
        .map_err(|e| anyhow!("cannot write the report to {}: {e}", out.display()))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
        return Ok(());
    }
    print!("{notes}");
    println!();
    print!("{}", printed_tables(&results, &meta));
    println!(
        "{} runs in {:.1} s; {} files in {} (open {})",
        exps.len(),
        start.elapsed().as_secs_f64(),
        files.len(),
        out.display(),
        out.join("report.html").display()
    );
    Ok(())
}

/// The replay notes beside the report: how the trace was replayed, and the issue lateness per run.
const REPLAY_FILE: &str = "replay.txt";
