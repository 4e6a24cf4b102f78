//! `bfq suite <benchmark>`: one benchmark on one or more targets, with the same reports as `bfq reproduce`.

use crate::progress;
use anyhow::Result;
use bfq_suite::report::outdir::ReportDir;
use bfq_suite::request::{suite_meta, write_report, SuiteRequest, DEFAULT_SCHEDULERS, DEFAULT_TARGET};
use bfq_suite::suite::{plan, printed_tables, run_jobs};
use std::path::PathBuf;

/// Shown after `bfq suite --help`.
const AFTER_HELP: &str = "\
Benchmarks and their defaults:
  throughput   aggregate throughput of background readers/writers (MB/s)
               workloads 1r-seq,10r-seq,10r-rand,5r5w-seq,5r5w-rand; 20 s runs (paper profile: 120 s, 10 reps)
  startup      cold-cache start-up time of --apps (default xterm; bash, konsole, gnome-terminal, lowriter,
               oowriter = lowriter, or a profile file) under idle,10r-seq,10r-rand,5r5w-seq,5r5w-rand; X = no start
               within 60 s; also the aggregate throughput during the test
  video        frame-drop rate (%) of a 20 s video clip under the same workloads, with S's noise command (15 MiB
               read bypassing the cache, plus a sync) every 4 s
  fairness     shares of weighted sequential readers; workloads [WEIGHTS-]ZONE: 1:2:4-outer,1:2:4-inner,
               1:2:4-mixed; 30 s runs; low_latency=0 where a scheduler has it, as S does
  interleaved  aggregate throughput of N readers reading one area in interleaved 16 KiB blocks (direct I/O, like
               a VM's I/O threads); workloads 3r,5r,6r,7r,9r; 5 s warm-up then 30 s
  iozone       write, re-write, read and re-read KB/s with 1 and 10 threads (workloads 1-thread,10-thread);
               --file-size per thread (default 6 GiB for 1 thread, 1 GiB each for 10); --cpu-time adds the policy's
               CPU time per request (written to cpu.json, never to results.json)

Targets: sim:<device preset or TOML file> (a bare preset name means sim), engine:<dir>, kernel:<dir>; give several,
comma-separated or repeated, to see them side by side in one report.

Examples:
  bfq suite startup --sched bfq,cfq,noop --apps xterm,oowriter --reps 3
  bfq suite throughput --target sim:seagate-hdd,plextor-ssd --profile paper
  bfq suite iozone --target plextor-ssd --sched cfq,deadline,anticipatory,noop --cpu-time";

/// Arguments of `bfq suite`.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP, allow_negative_numbers = true)]
pub struct SuiteArgs {
    /// Benchmark: throughput, startup, video, fairness, interleaved or iozone.
    benchmark: String,
    /// Where to run: sim:<device preset or TOML file>, engine:<dir> or kernel:<dir>; comma-separated or repeated.
    #[arg(long, value_name = "TARGET[,TARGET...]", default_value = DEFAULT_TARGET)]
    target: Vec<String>,
    /// Schedulers, comma-separated (see `bfq schedulers`).
    #[arg(long, value_name = "A,B,...", default_value = DEFAULT_SCHEDULERS)]
    sched: String,
    /// Workloads, comma-separated (default: the benchmark's, see below).
    #[arg(long, value_name = "W,...")]
    workloads: Option<String>,
    /// Applications for the startup benchmark, comma-separated (default: xterm).
    #[arg(long, value_name = "APP,...")]
    apps: Option<String>,
    /// Repetitions of each measurement, 1..=100 (default: 2 for throughput, startup and video; 10 with --profile
    /// paper; 1 otherwise). Repetition i uses seed + i.
    #[arg(long, value_name = "N")]
    reps: Option<String>,
    /// Directory for the report, tables, charts, JSON and CSV (default: bfq-results/<benchmark>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Settings era for throughput and startup: paper (SYSTOR'12: 5000 MiB files, one shared 50000 MiB random
    /// file, no writer cap, no periodic sync), s2013 (S of November 2013, seed 004's: the same files, 16500 KiB/s
    /// writer cap, no periodic sync, 60 s runs) or current (S 3.6).
    #[arg(long, value_name = "paper|s2013|current")]
    profile: Option<String>,
    /// Seed of the first repetition.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Worker threads (default: every core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Scheduler tunable as key=value (repeatable); applies to every chosen scheduler that has the key.
    #[arg(long = "tune", value_name = "KEY=VALUE")]
    tune: Vec<String>,
    /// Measured simulated seconds: the throughput run, the video clip, the fairness run or the interleaved
    /// measurement (not for startup and iozone).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// iozone file size per thread, MiB.
    #[arg(long, value_name = "MIB")]
    file_size: Option<u64>,
    /// Measure the wall-clock CPU time spent inside the policy (throughput, startup, iozone). Written to cpu.json
    /// and the iozone tables only; results.json stays reproducible.
    #[arg(long)]
    cpu_time: bool,
    /// Real targets: allow a device that `bfq loopdev` did not create (its scheduler is restored afterwards).
    #[arg(long)]
    allow_device: bool,
    /// Real targets, startup: time this real command instead of replaying the profile (e.g. 'xterm /bin/true');
    /// caches are dropped first. Only files under the target directory see the target's scheduler.
    #[arg(long, value_name = "CMD")]
    app_cmd: Option<String>,
    /// Real targets: multiply the background workload's file sizes (e.g. 0.1 on a small loop device).
    #[arg(long, value_name = "FACTOR")]
    file_scale: Option<f64>,
    /// Startup: background warm-up before the application starts, seconds (default 15), on every target.
    #[arg(long, value_name = "SECONDS")]
    warmup: Option<f64>,
}

impl SuiteArgs {
    /// The options as the library (and the Python package) takes them.
    fn request(&self) -> SuiteRequest {
        SuiteRequest {
            benchmark: self.benchmark.clone(),
            targets: self.target.clone(),
            schedulers: vec![self.sched.clone()],
            workloads: self.workloads.clone().map(|w| vec![w]),
            apps: self.apps.clone().map(|a| vec![a]),
            reps: self.reps.clone(),
            profile: self.profile.clone(),
            seed: self.seed,
            tunables: self.tune.clone(),
            duration_s: self.duration,
            file_size_mib: self.file_size,
            cpu_time: self.cpu_time,
            allow_device: self.allow_device,
            app_cmd: self.app_cmd.clone(),
            file_scale: self.file_scale,
            warmup_s: self.warmup,
        }
    }
}

/// Runs `bfq suite`.
pub fn run(a: SuiteArgs) -> Result<()> {
    let cfg = a.request().config()?;
    let jobs = plan(&cfg)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bfq-results").join(cfg.benchmark.name()));
    // Checked before any run: a bad --out must not throw away minutes of work.
    let report_dir = ReportDir::prepare(&out)?;

    // Real targets measure wall-clock time on a real device: their runs must not overlap each other or anything else.
    let threads = SuiteRequest::threads(&cfg, a.jobs, jobs.len())?;
    eprintln!(
        "{}: {} runs on {} target(s) with {threads} threads",
        cfg.benchmark.name(),
        jobs.len(),
        cfg.targets.len()
    );
    let start = std::time::Instant::now();
    let bar = progress::Bar::stderr();
    let results = run_jobs(&jobs, threads, &|done, total| bar.update(done, total));
    bar.finish();
    let results = results?;
    let meta = suite_meta(&cfg, bfq_suite::cmdline::from_env());
    let files = write_report(report_dir, &out, &results, &meta)?;
    print!("{}", printed_tables(&results, &meta));
    println!(
        "{} runs in {:.1} s; {} files in {} (open {})",
        results.len(),
        start.elapsed().as_secs_f64(),
        files.len(),
        out.display(),
        out.join("report.html").display()
    );
    Ok(())
}
