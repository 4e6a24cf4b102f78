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
        Cmd::Reproduce { seed } => reproduce(seed),
    }
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
