//! `bfq validate --target kernel:DIR --model FILE.toml`: the matrix on the kernel and on the simulator, compared.

use anyhow::{bail, Result};
use bfq_suite::result::Benchmark;
use bfq_suite::target::Target;
use bfq_suite::validate::{self, ValidateConfig, DEFAULT_SCHEDULERS, DEFAULT_WORKLOADS};
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `bfq validate`.
#[derive(clap::Args)]
#[command(
    after_help = "For every benchmark, workload and scheduler: --reps runs on the kernel (the loop device's own \
scheduler) and --reps simulations with the model (seeds --seed..), with the same warm-up, duration and file scale. \
Per cell: the kernel's median and spread, the simulated median, their ratio, whether the schedulers rank the same in \
that row, and for start-up the demerit figure (Ruemmler-Wilkes: RMS horizontal distance between the application's \
read-latency CDFs, as a fraction of the kernel's mean latency). Writes validation.txt, .json, .csv and .html to --out.\n\n\
Example:\n  sudo bfq calibrate /mnt/bfq --out loop.toml\n  sudo bfq validate --target kernel:/mnt/bfq --model loop.toml"
)]
pub struct ValidateArgs {
    /// The kernel target: kernel:DIR, with DIR made by `bfq loopdev create`.
    #[arg(long, required_unless_present = "from")]
    target: Option<String>,
    /// Device model for the simulator (TOML, e.g. written by `bfq calibrate`, or a preset name).
    #[arg(long, required_unless_present = "from")]
    model: Option<PathBuf>,
    /// Report again from a validation.json written earlier (no root; nothing runs on the kernel). With --model,
    /// its kernel runs are kept and the simulator side is run again with that model (same workloads, schedulers,
    /// seeds and file scale; give the --warmup and --duration the kernel runs used).
    #[arg(long, conflicts_with = "target")]
    from: Option<PathBuf>,
    /// Benchmarks, comma-separated: throughput, startup.
    #[arg(long, default_value = "throughput,startup")]
    benchmarks: String,
    /// Background workloads, comma-separated.
    #[arg(long, default_value_t = DEFAULT_WORKLOADS.join(","))]
    workloads: String,
    /// Schedulers, comma-separated (the kernel's: none, mq-deadline, kyber, bfq).
    #[arg(long, default_value_t = DEFAULT_SCHEDULERS.join(","))]
    sched: String,
    /// Application for the start-up benchmark (a profile name or file).
    #[arg(long, default_value = "xterm")]
    app: String,
    /// Repetitions on each side, 1 to 20.
    #[arg(long, default_value_t = 3)]
    reps: u32,
    /// Seed of the first repetition.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Background warm-up before the application starts, seconds (both sides).
    #[arg(long, default_value_t = 5.0)]
    warmup: f64,
    /// Length of a throughput run, seconds (both sides).
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Factor on the background files' sizes (both sides), as for `bfq suite --file-scale`.
    #[arg(long, default_value_t = 0.3)]
    file_scale: f64,
    /// Allow a directory on a device `bfq loopdev` did not create.
    #[arg(long)]
    allow_device: bool,
    /// Directory for validation.txt, .json, .csv and .html.
    #[arg(long, default_value = "bfq-results/validate")]
    out: PathBuf,
}

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

fn seconds(name: &str, v: f64) -> Result<u64> {
    if !(v.is_finite() && (0.5..=600.0).contains(&v)) {
        bail!("--{name} {v} is out of range: give 0.5 to 600 seconds");
    }
    Ok((v * 1e9) as u64)
}

/// Runs `bfq validate`.
pub fn run(args: ValidateArgs) -> Result<()> {
    if let Some(from) = &args.from {
        let text = std::fs::read_to_string(from).map_err(|e| {
            anyhow::anyhow!(
                "cannot read {} ({e}): give a validation.json written by bfq validate",
                from.display()
            )
        })?;
        let old: validate::Validation = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{} is not a validation.json written by bfq validate ({e})",
                from.display()
            )
        })?;
        let (runs, how) = match &args.model {
            Some(model) => {
                let t0 = Instant::now();
                let mut progress = |line: &str| eprintln!("[{:6.1} s] {line}", t0.elapsed().as_secs_f64());
                let warmup = seconds("warmup", args.warmup)?;
                let duration = seconds("duration", args.duration)?;
                let runs = validate::resimulate(old.runs, model, warmup, duration, &mut progress)?;
                (runs, format!("simulated again with {}", model.display()))
            }
            None => (old.runs, "reported again".to_string()),
        };
        let v = validate::summarize(runs);
        validate::write_files(&v, &args.out)?;
        print!("{}", validate::table(&v));
        println!(
            "kernel runs from {}, {how}; files in {}",
            from.display(),
            args.out.display()
        );
        return Ok(());
    }
    let (Some(target), Some(model)) = (&args.target, &args.model) else {
        bail!("give --target kernel:DIR and --model FILE.toml, or --from a validation.json");
    };
    let dir = match Target::parse(target)? {
        Target::Kernel(d) => d,
        other => bail!("--target {other}: validate compares against the kernel; give --target kernel:DIR"),
    };
    if !bfq_suite::real::sys::is_root() {
        bail!("bfq validate needs root (it switches the loop device's scheduler and drops caches): run it with sudo");
    }
    if !(1..=20).contains(&args.reps) {
        bail!("--reps {} is out of range: give 1 to 20", args.reps);
    }
    if !(args.file_scale.is_finite() && args.file_scale > 0.0 && args.file_scale <= bfq_suite::limits::MAX_FILE_SCALE) {
        bail!(
            "--file-scale {} is out of range: give a number in (0, {}]",
            args.file_scale,
            bfq_suite::limits::MAX_FILE_SCALE
        );
    }
    let benchmarks = list(&args.benchmarks)
        .iter()
        .map(|b| match b.as_str() {
            "throughput" => Ok(Benchmark::Throughput),
            "startup" => Ok(Benchmark::Startup),
            other => {
                bail!("--benchmarks: '{other}' cannot be validated against the kernel; use throughput and/or startup")
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let cfg = ValidateConfig {
        kernel_dir: dir,
        model: model.clone(),
        benchmarks,
        workloads: list(&args.workloads),
        schedulers: list(&args.sched),
        app: args.app.clone(),
        reps: args.reps,
        seed: args.seed,
        warmup: seconds("warmup", args.warmup)?,
        duration: seconds("duration", args.duration)?,
        file_scale: args.file_scale,
        allow_device: args.allow_device,
    };
    validate::check(&cfg)?;
    let t0 = Instant::now();
    let mut progress = |line: &str| eprintln!("[{:6.1} s] {line}", t0.elapsed().as_secs_f64());
    let runs = validate::run(&cfg, &mut progress)?;
    let v = validate::summarize(runs);
    validate::write_files(&v, &args.out)?;
    print!("{}", validate::table(&v));
    println!(
        "{} runs in {:.1} s; validation.txt, .json, .csv and .html in {}",
        v.runs.len(),
        t0.elapsed().as_secs_f64(),
        args.out.display()
    );
    Ok(())
}
