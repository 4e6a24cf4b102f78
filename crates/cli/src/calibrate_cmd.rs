//! `bfq calibrate DIR|DEVICE`: measure a real device and write a `measured` device model for the simulator.

use anyhow::{bail, Context, Result};
use bfq_suite::real::calibrate::{self, CalibrateOptions, Calibration, REPRODUCE_TOLERANCE};
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `bfq calibrate`.
#[derive(clap::Args)]
#[command(
    after_help = "Probes (O_DIRECT, Linux AIO, each --probe-seconds long): random reads of 4, 16, 64 and 256 KiB \
and sequential 1 MiB reads at depth 1; 4 KiB random reads at depths 2-32; sequential 1 MiB reads at depth 8; random \
4 KiB and sequential 1 MiB writes at depth 1; sequential 1 MiB writes at depth 8; then eight buffered sequential \
readers (the page-cache streams probe, counted at the device: the large requests readahead builds); then a 4 KiB \
and a 1 MiB reader side by side at depth 1 (the pair probe: whether the device reports each completion as it ends or \
all of them once it drains); then buffered reads from the page cache (the host probe: the CPU cost of a read() for \
the simulated host); then fio (if installed) repeats the first probe as a cross-check. The queue's read_ahead_kb is \
recorded for the simulated host. About 40 s with the default 2 s probes, plus writing a 1 GiB probe file once.\n\n\
Examples:\n  sudo bfq calibrate /mnt/bfq --out loop.toml\n  bfq run --device loop.toml --app xterm\n  \
bfq calibrate --from loop.json --out loop.toml     (fit again from saved measurements; no root)"
)]
pub struct CalibrateArgs {
    /// Directory on the device (made by `bfq loopdev create`), or a raw device made by `bfq loopdev --fs none`.
    #[arg(required_unless_present = "from")]
    target: Option<PathBuf>,
    /// Where to write the device model (TOML, model = "measured").
    #[arg(long, default_value = "calibrated.toml")]
    out: PathBuf,
    /// Also save the raw measurements (JSON) here, to fit again later with --from.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Fit from measurements saved with --save instead of measuring (no root needed).
    #[arg(long, conflicts_with = "target")]
    from: Option<PathBuf>,
    /// Device name written into the model (default: the measured device's name).
    #[arg(long)]
    name: Option<String>,
    /// Length of each probe, seconds (0.2 to 30).
    #[arg(long, default_value_t = calibrate::DEFAULT_PROBE_S)]
    probe_seconds: f64,
    /// Allow a directory on a device that `bfq loopdev` did not create.
    #[arg(long)]
    allow_device: bool,
}

/// Runs `bfq calibrate`.
pub fn run(args: CalibrateArgs) -> Result<()> {
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            bail!(
                "--out {}: directory {} does not exist; create it first",
                args.out.display(),
                dir.display()
            );
        }
    }
    let t0 = Instant::now();
    let cal: Calibration = match (&args.from, &args.target) {
        (Some(from), _) => {
            let text = std::fs::read_to_string(from).with_context(|| {
                format!(
                    "cannot read {} (give a file saved by bfq calibrate --save)",
                    from.display()
                )
            })?;
            serde_json::from_str(&text)
                .with_context(|| format!("{} is not a calibration saved by bfq calibrate --save", from.display()))?
        }
        (None, Some(target)) => {
            let opts = CalibrateOptions {
                target: target.clone(),
                allow_device: args.allow_device,
                probe_s: args.probe_seconds,
            };
            let mut progress = |line: &str| eprintln!("[{:5.1} s] {line}", t0.elapsed().as_secs_f64());
            calibrate::measure(&opts, &mut progress)?
        }
        (None, None) => bail!("give a directory or device to calibrate, or --from a saved calibration"),
    };
    if let Some(save) = &args.save {
        std::fs::write(save, serde_json::to_string_pretty(&cal)?)
            .with_context(|| format!("cannot write {}", save.display()))?;
    }
    let name = args.name.clone().unwrap_or_else(|| format!("{}-measured", cal.device));
    let cfg = calibrate::fit(&cal, &name)?;
    std::fs::write(&args.out, calibrate::to_toml(&cal, &cfg))
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!(
        "# bfq calibrate: {} ({} probes, load average {})",
        cal.device,
        cal.probes.len(),
        cal.loadavg_1m.map_or("?".into(), |l| format!("{l:.2}"))
    );
    println!("# probe                    IOPS      MB/s   mean us    p99 us");
    for p in &cal.probes {
        println!(
            "{:<22} {:>10.0} {:>9.1} {:>9.1} {:>9.1}",
            p.spec.name(),
            p.iops,
            p.mb_s,
            p.mean_us,
            p.p99_us
        );
    }
    if let Some(st) = &cal.streams {
        println!(
            "{:<22} {:>10.0} {:>9.1} {:>9.1}           (device requests of {:.0} KiB)",
            format!("pagecache-{}streams", st.streams),
            st.device_ios as f64 / st.secs,
            st.device_mb_s,
            st.device_latency_us,
            st.request_kib
        );
    }
    if let Some(p) = &cal.pair {
        println!(
            "# pair probe: {} KiB and {} KiB readers side by side, median {:.1} and {:.1} µs: completions {}",
            bfq_suite::real::calibrate::PAIR_KIB[0],
            bfq_suite::real::calibrate::PAIR_KIB[1],
            p.p50_us[0],
            p.p50_us[1],
            match p.completions() {
                bfq_sim::device::Completions::Each => "reported each as it ends",
                bfq_sim::device::Completions::WhenDrained => "reported together once the device drains",
            }
        );
    }
    if let Some(h) = &cal.host {
        let c = h.costs();
        println!(
            "# host probe: a buffered read() from the page cache costs {} ns + {} ns per KiB of CPU time",
            c.syscall_ns, c.copy_ns_per_kib
        );
    }
    if let Some(ra) = cal.read_ahead_kb {
        println!("# read_ahead_kb {ra} (the simulated host's readahead window with this model)");
    }
    if let Some(f) = &cal.fio {
        println!(
            "# fio cross-check {}: {:.0} IOPS here, {:.0} with fio ({:+.1} %)",
            f.spec.name(),
            f.ours_iops,
            f.fio_iops,
            100.0 * (f.ours_iops / f.fio_iops - 1.0)
        );
    } else {
        println!("# fio cross-check: not run (fio not installed, or fitted from saved measurements)");
    }
    println!(
        "# the model in the simulator (tolerance {:.0} %):",
        100.0 * REPRODUCE_TOLERANCE
    );
    let mut worst: f64 = 0.0;
    for r in calibrate::reproduce(&cal, &cfg) {
        let unit = if r.spec.kib == 4 { "IOPS" } else { "MB/s" };
        println!(
            "{:<22} measured {:>10.1} {unit}, simulated {:>10.1} {unit} ({:+.1} %)",
            r.spec.name(),
            r.measured,
            r.simulated,
            100.0 * r.error()
        );
        worst = worst.max(r.error().abs());
    }
    println!(
        "wrote {} (model \"measured\", parallelism {:.2}) in {:.1} s; use it with --device {} or --target sim:{}",
        args.out.display(),
        cfg.parallelism,
        t0.elapsed().as_secs_f64(),
        args.out.display(),
        args.out.display()
    );
    if worst > REPRODUCE_TOLERANCE {
        bail!(
            "the fitted model misses a probe by {:.0} % (> {:.0} %): the measurements are inconsistent; calibrate again on a quieter machine",
            100.0 * worst,
            100.0 * REPRODUCE_TOLERANCE
        );
    }
    Ok(())
}
