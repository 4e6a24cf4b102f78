//! The `bfq` command line.

use anyhow::{bail, Result};
use bfq_sched::policies;
use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

mod calibrate_cmd;
mod loopdev;
mod progress;
mod record;
mod replay_cmd;
mod suite_cmd;
mod validate_cmd;

/// Budget Fair Queueing and its peers: policies, a storage simulator, a real I/O engine and a benchmark suite.
#[derive(Parser)]
#[command(name = "bfq", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List every scheduling policy with its tunables and defaults.
    Schedulers {
        /// Show only this policy.
        name: Option<String>,
    },
    /// Run one experiment on the simulator.
    Run(RunArgs),
    /// Run the main job: the seeds' reference matrix on the simulator, with report and claims checklist.
    Reproduce(ReproduceArgs),
    /// Record a real command's cold-cache start-up I/O into an application profile (needs root):
    /// bfq record [--out PROFILE] -- CMD [ARGS...]
    Record(record::RecordArgs),
    /// Run one benchmark (throughput, startup, video, fairness, interleaved, iozone) on one or more targets.
    Suite(suite_cmd::SuiteArgs),
    /// Make or remove a loop device for the real targets (needs root).
    Loopdev(loopdev::LoopdevArgs),
    /// Measure a real device (a `bfq loopdev` directory or raw device; needs root) and write a device model
    /// (TOML, model "measured") that the simulator accepts.
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// Run the throughput and start-up matrix on the kernel (kernel:DIR, needs root) and on the simulator with a
    /// device model, and report per cell the ratio, ranking agreement and latency demerit figure.
    Validate(validate_cmd::ValidateArgs),
    /// Replay a block trace (blkparse, blktrace, MSR Cambridge, FIU) under each scheduler on one or more targets.
    Replay(replay_cmd::ReplayArgs),
    /// Internal: the kernel target's application replay in its own process (reads a JSON spec on stdin, writes a
    /// JSON report on stdout). Started by `bfq suite --target kernel:DIR startup`, not by hand.
    #[command(name = "replay-app", hide = true)]
    ReplayApp,
}

fn main() -> ExitCode {
    // Output piped into a reader that stops early (`bfq schedulers | head`) ends the program quietly, as a Unix
    // filter does, instead of a panic on the broken pipe: restore SIGPIPE's default action, which Rust ignores.
    // SAFETY: called first, before any thread exists; `signal` only changes this process's disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return parse_error(e),
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line whatever the message quotes (user input with a newline, a file name with control bytes).
            eprintln!("bfq: {}", bfq_sched::text::one_line(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

/// Help and version go to stdout as clap prints them. Every usage error is one line on stderr, like every other
/// input error of bfq: clap's first line (`--reps -5` does not parse, an unknown argument, a missing value), its tip
/// if it has one, and the help command of the subcommand that was being parsed, instead of clap's usage block.
fn parse_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        // `bfq` or `bfq suite` alone: the help is the answer, as clap gives it, but the command did nothing.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(2)
        }
        _ => {
            eprintln!("bfq: {}", one_line_usage_error(&e.to_string()));
            ExitCode::from(2)
        }
    }
}

/// Folds clap's rendered error (`error: ...` with any continuation lines, an optional `tip: ...`, a
/// `Usage: bfq CMD [OPTIONS]` line and a pointer to `--help`) into one line: the error, the tip, and
/// `see bfq CMD --help`. Errors that clap renders without a usage line take the subcommand from the command line.
fn one_line_usage_error(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid command line");
    let mut out = first.strip_prefix("error: ").unwrap_or(first).to_string();
    let mut command = None;
    for line in lines {
        if let Some(tip) = line.strip_prefix("tip: ") {
            out.push_str("; ");
            out.push_str(tip);
        } else if let Some(usage) = line.strip_prefix("Usage: ") {
            // `bfq run [OPTIONS]`, `bfq suite <BENCHMARK> [OPTIONS]`: the words before the first placeholder.
            let words: Vec<&str> = usage
                .split_whitespace()
                .take_while(|w| !w.starts_with(['[', '<', '-']))
                .collect();
            command = Some(words.join(" "));
        } else if !line.starts_with("For more information") {
            // The list under "the following required arguments were not provided:".
            out.push(' ');
            out.push_str(line);
        }
    }
    let command = command.unwrap_or_else(|| {
        let sub = std::env::args()
            .nth(1)
            .filter(|a| Cli::command().get_subcommands().any(|c| c.get_name() == a.as_str()));
        sub.map_or_else(|| "bfq".to_string(), |s| format!("bfq {s}"))
    });
    format!("{out} (see {command} --help)")
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Schedulers { name } => schedulers(name.as_deref()),
        Cmd::Run(args) => run_one(args),
        Cmd::Reproduce(args) => reproduce(args),
        Cmd::Record(args) => record::record(args),
        Cmd::Suite(args) => suite_cmd::run(args),
        Cmd::Loopdev(args) => loopdev::run(args),
        Cmd::Calibrate(args) => calibrate_cmd::run(args),
        Cmd::Validate(args) => validate_cmd::run(args),
        Cmd::Replay(args) => replay_cmd::run(args),
        Cmd::ReplayApp => replay_app(),
    }
}

/// `bfq replay-app`: one [`bfq_suite::real::app_process::AppSpec`] on stdin, its report on stdout.
fn replay_app() -> Result<()> {
    use bfq_suite::real::app_process::{child_main, AppSpec};
    use std::io::Read;
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    let spec: AppSpec = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!("replay-app reads a JSON application spec on stdin ({e}); it is started by the kernel target")
    })?;
    let report = child_main(&spec)?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// Arguments of `bfq run`.
#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct RunArgs {
    /// Device preset (seagate-hdd, hitachi-hdd, seagate-raid1, enterprise-hdd, plextor-ssd, toshiba-1.8-hdd, transcend-microsd,
    /// sandisk-emmc, nvme, san-lun; docs/DEVICES.md) or path to a device TOML file.
    #[arg(long, default_value = "seagate-hdd")]
    device: String,
    /// Scheduler (see `bfq schedulers`).
    #[arg(long, default_value = "bfq")]
    sched: String,
    /// Background workload: idle, 1r-seq, 10r-seq, 10r-rand, 5r5w-seq, 5r5w-rand (or NrMw-seq/rand).
    #[arg(long, default_value = "10r-seq")]
    workload: String,
    /// Application whose cold-cache start-up is measured (bash, xterm, konsole, gnome-terminal, lowriter) or a
    /// profile file; without it the run measures throughput only.
    #[arg(long)]
    app: Option<String>,
    /// Seed of every random stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Scheduler tunable as key=value (repeatable), named as in sysfs.
    #[arg(long = "tune", value_name = "KEY=VALUE")]
    tune: Vec<String>,
    /// Settings era: paper (SYSTOR'12), s2013 (S of November 2013, seed 004's) or current (S 3.6).
    #[arg(long, default_value = "current")]
    profile: String,
    /// Simulated seconds when no application is given.
    #[arg(long, default_value_t = 20.0)]
    duration: f64,
    /// Measure the wall-clock CPU time spent inside the policy (the result is then not byte-reproducible).
    #[arg(long)]
    cpu_time: bool,
    /// The host kernel's timer tick (CONFIG_HZ, 1-10000): bfq-v7r2's and cfq's idle timers fire on a tick of
    /// 1000/HZ ms and their HZ/125-jiffy idle defaults truncate (docs/SCHEDULERS.md, "Timer tick"). Default: exact
    /// high-resolution timers.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10000))]
    hz: Option<u32>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl RunArgs {
    /// The run asked for, as the library (and the Python package) takes it.
    fn request(&self) -> bfq_suite::request::RunRequest {
        bfq_suite::request::RunRequest {
            device: self.device.clone(),
            sched: self.sched.clone(),
            workload: self.workload.clone(),
            app: self.app.clone(),
            seed: self.seed,
            tunables: self.tune.clone(),
            profile: self.profile.clone(),
            duration_s: self.duration,
            cpu_time: self.cpu_time,
            hz: self.hz,
        }
    }
}

fn run_one(a: RunArgs) -> Result<()> {
    let r = a.request().run()?;
    if a.json {
        println!("{}", bfq_suite::request::result_json(&r));
        return Ok(());
    }
    println!("device      {}", r.device);
    println!(
        "scheduler   {}{}",
        r.scheduler,
        if r.tunables.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.tunables.join(" "))
        }
    );
    println!("workload    {}", r.workload);
    if let Some(app) = &r.app {
        match r.startup_s {
            Some(s) => println!("start-up    {app}: {s:.3} s"),
            None => println!("start-up    {app}: X (did not start within 60 s)"),
        }
    }
    println!(
        "throughput  {:.2} MB/s (read {:.2}, write {:.2})",
        r.throughput_mbps, r.read_mbps, r.write_mbps
    );
    if let Some(ns) = r.sched_cpu_ns_per_request {
        println!("policy CPU  {ns:.0} ns per request");
    }
    Ok(())
}

fn schedulers(only: Option<&str>) -> Result<()> {
    let list: Vec<_> = match only {
        Some(n) => match bfq_sched::find(n) {
            Some(p) => vec![p],
            None => bail!(
                "unknown scheduler '{n}': choose one of {}",
                policies().iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
            ),
        },
        None => policies().iter().collect(),
    };
    for p in list {
        let alias = if p.aliases.is_empty() {
            String::new()
        } else {
            format!(" (alias: {})", p.aliases.join(", "))
        };
        println!("{}{alias}: {}", p.name, p.summary);
        println!("    follows: {}", p.kernel);
        if p.tunables.is_empty() {
            println!("    (no tunables)");
        }
        for t in p.tunables {
            println!(
                "    {:<24} default {:<14} range {:<22} {}",
                t.name,
                t.default_text(),
                t.range_text(),
                t.doc
            );
        }
        println!();
    }
    Ok(())
}

/// Arguments of `bfq reproduce`.
#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct ReproduceArgs {
    /// Directory for the report, tables, charts, JSON and CSV.
    #[arg(long, default_value = "bfq-results")]
    out: std::path::PathBuf,
    /// A small matrix (Seagate HDD and Plextor SSD, xterm only) that still backs every checklist line.
    #[arg(long)]
    quick: bool,
    /// Worker threads (default: every core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Repetitions of each scenario (default: 2, as S; 1 with --quick).
    #[arg(long)]
    reps: Option<u32>,
    /// Seed of the first repetition; repetition i uses seed + i.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Measure the policy's wall-clock CPU time per request in the iozone runs (seed 003's CPU cost column);
    /// written to cpu.json and the iozone tables only, so results.json stays reproducible.
    #[arg(long)]
    cpu_time: bool,
}

fn reproduce(a: ReproduceArgs) -> Result<()> {
    use bfq_suite::reproduce::{checklist, plan, run_all};
    let reps = bfq_suite::limits::reps(a.reps.unwrap_or(if a.quick { 1 } else { 2 }))?;
    bfq_suite::limits::seeds(a.seed, reps)?;
    let jobs = bfq_suite::limits::jobs(
        a.jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
    )?;
    // Checked before any simulation: a bad --out must not throw away minutes of work.
    let out = bfq_suite::report::outdir::ReportDir::prepare(&a.out)?;
    let mut p = plan(a.quick, reps, a.seed);
    for j in &mut p.jobs {
        j.settings.time_policy = a.cpu_time && matches!(j.work, bfq_suite::suite::Work::Iozone { .. });
    }
    for s in &p.skipped {
        eprintln!("skipping scheduler {s}: not implemented yet");
    }
    let jobs = bfq_suite::limits::worker_threads(jobs, p.jobs.len());
    eprintln!("running {} simulations on {jobs} threads", p.jobs.len());
    let start = std::time::Instant::now();
    let bar = progress::Bar::stderr();
    let results = run_all(&p.jobs, jobs, &|done, total| bar.update(done, total));
    bar.finish();
    let mut ok = Vec::new();
    for r in results {
        match r {
            Ok(r) => ok.push(r),
            Err(e) => bail!("a simulation failed: {e}"),
        }
    }
    let items = checklist(&ok);
    // Seed 003's CPU claim, from measured wall-clock time: beside the checklist (printed, and in its own file next to
    // cpu.json), never in results.json or the report, which stay byte-identical for the same inputs.
    let cpu_items = bfq_suite::reproduce::cpu_checklist(&ok);
    let verdict = |pass: bool| if pass { "PASS" } else { "FAIL" };
    let cpu_text: String = cpu_items
        .iter()
        .map(|i| format!("{} {}  [{}]\n", verdict(i.pass), i.text, i.detail))
        .collect();
    let meta = bfq_suite::report::ReportMeta {
        sources: bfq_suite::reproduce::sources(),
        ..bfq_suite::report::ReportMeta::new(bfq_suite::cmdline::from_env(), a.seed)
    };
    let files = out
        .commit(|dir| {
            let mut files = bfq_suite::report::write_all(dir, &ok, &meta, &items)?;
            if !cpu_items.is_empty() {
                let path = dir.join(CPU_CHECKLIST_FILE);
                std::fs::write(&path, &cpu_text)?;
                files.push(path);
            }
            Ok::<_, std::io::Error>(files)
        })
        .map_err(|e| anyhow::anyhow!("cannot write the report to {}: {e}", a.out.display()))?;
    println!(
        "{} runs in {:.1} s; {} files in {} (open {})",
        ok.len(),
        start.elapsed().as_secs_f64(),
        files.len(),
        a.out.display(),
        a.out.join("report.html").display()
    );
    println!();
    println!("Checklist of the seeds' claims:");
    let passed = items.iter().filter(|i| i.pass).count();
    for i in &items {
        println!("  {} {}  [{}]", verdict(i.pass), i.text, i.detail);
        if let Some(n) = &i.newest {
            println!("       newest: {} {}  [{}]", verdict(n.pass), n.text, n.detail);
            println!("       eras differ: {}", n.differs);
        }
    }
    println!("{passed} of {} claims pass.", items.len());
    println!();
    if cpu_items.is_empty() {
        println!(
            "Seed 003's CPU claim ({}): not measured; `--cpu-time` measures it (wall clock, not reproducible).",
            bfq_suite::reproduce::CPU_CLAIM.id
        );
    } else {
        println!(
            "Seed 003's CPU claim, measured on this machine (wall clock, not reproducible; {CPU_CHECKLIST_FILE}):"
        );
        print!("{}", cpu_text.lines().map(|l| format!("  {l}\n")).collect::<String>());
    }
    Ok(())
}

/// File of seed 003's CPU-claim lines, written beside cpu.json by `bfq reproduce --cpu-time` (not reproducible).
const CPU_CHECKLIST_FILE: &str = "cpu-checklist.txt";

#[cfg(test)]
mod tests {
    use super::*;

    /// `bfq run` without options asks for what the library's default request (the Python package's defaults) is.
    #[test]
    fn run_defaults_are_the_librarys() {
        let cli = Cli::try_parse_from(["bfq", "run"]).expect("parses");
        let Cmd::Run(args) = cli.cmd else { panic!("not a run") };
        assert_eq!(args.request(), bfq_suite::request::RunRequest::default());
    }
}
