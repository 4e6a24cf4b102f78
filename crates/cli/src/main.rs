//! The `bfq` command line.

use anyhow::{bail, Result};
use bfq_sched::{conformance, policies, DeviceInfo};
use clap::{Parser, Subcommand};
use std::process::ExitCode;

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
    /// Run the main job: the reference comparison on the simulator.
    Reproduce {
        /// Seed of the random sequences.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bfq: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Schedulers { name } => schedulers(name.as_deref()),
        Cmd::Run(args) => run_one(args),
        Cmd::Reproduce { seed } => reproduce(seed),
    }
}

/// Arguments of `bfq run`.
#[derive(clap::Args)]
struct RunArgs {
    /// Device preset (see `bfq devices`) or path to a device TOML file.
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
    /// Settings era: paper (SYSTOR'12) or current (S 3.6).
    #[arg(long, default_value = "current")]
    profile: String,
    /// Simulated seconds when no application is given.
    #[arg(long, default_value_t = 20.0)]
    duration: f64,
    /// Measure the wall-clock CPU time spent inside the policy (the result is then not byte-reproducible).
    #[arg(long)]
    cpu_time: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn run_one(a: RunArgs) -> Result<()> {
    if !(a.duration > 0.0 && a.duration <= 86_400.0) {
        bail!("--duration {} is out of range: give seconds in (0, 86400]", a.duration);
    }
    let mut sc = bfq_suite::scenario::SimScenario::new(&a.device, &a.sched, &a.workload);
    sc.app = a.app;
    sc.seed = a.seed;
    sc.tunables = a.tune;
    sc.era = bfq_suite::scenario::Era::parse(&a.profile)?;
    sc.duration = (a.duration * 1e9) as u64;
    sc.time_policy = a.cpu_time;
    let r = bfq_suite::scenario::run_sim(&sc)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
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

/// Until the simulator and suite land, the main job runs every policy through the conformance sequence on a
/// rotational and a solid-state device description and prints what it measured.
fn reproduce(seed: u64) -> Result<()> {
    println!("bfq reproduce: the simulator-based reference matrix is not built yet; running the policy");
    println!("conformance comparison instead (random flows, inserts, dispatches under tag limits, completions).");
    println!();
    println!(
        "{:<12} {:<6} {:>10} {:>10} {:>14} {:>14}",
        "policy", "device", "requests", "to device", "max read wait", "max write wait"
    );
    for p in policies() {
        for (label, dev) in [("hdd", DeviceInfo::hdd()), ("ssd", DeviceInfo::ssd())] {
            let cfg = conformance::Config::new(seed, dev);
            let r = conformance::run(p.name, &cfg).map_err(anyhow::Error::msg)?;
            let ms = |t: u64| format!("{:.1} ms", t as f64 / 1e6);
            println!(
                "{:<12} {:<6} {:>10} {:>10} {:>14} {:>14}",
                p.name,
                label,
                r.records.len(),
                r.device_requests,
                ms(r.max_wait(|x| x.dir == bfq_sched::Direction::Read)),
                ms(r.max_wait(|x| x.dir == bfq_sched::Direction::Write)),
            );
        }
    }
    Ok(())
}
