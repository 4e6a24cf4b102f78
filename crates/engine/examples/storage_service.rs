//! A storage service on the engine: foreground "get" requests (small random reads a client waits for) compete
//! with a background, compaction-like sequential scan of the same data file. Under bfq the foreground flow is
//! real-time class and the scan idle class, so gets are served ahead of the scan; under noop (one FIFO) gets
//! wait behind the scan's queued requests. Prints the gets' latency percentiles and the scan's throughput for
//! both policies.
//!
//! ```text
//! cargo run -p bfq-engine --release --example storage_service [-- DIR]
//! ```
//! DIR (default /var/tmp) must be on a file system that supports O_DIRECT (tmpfs often does not). The example
//! writes a 256 MiB file there and deletes it at the end.

use bfq_engine::{AlignedBuf, Engine, EngineConfig, EngineError, FileRef, FlowOptions};
use bfq_sched::IoClass;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Size of the data file, in bytes.
const FILE_BYTES: u64 = 256 << 20;
/// Size of one foreground get, in bytes.
const GET_BYTES: usize = 16 << 10;
/// Pause between two gets of the foreground client (think time).
const GET_INTERVAL: Duration = Duration::from_millis(2);
/// Size of one scan request, in bytes.
const SCAN_BYTES: usize = 512 << 10;
/// Scan requests kept in flight.
const SCAN_DEPTH: usize = 32;
/// How long each policy runs.
const RUN_TIME: Duration = Duration::from_secs(3);
/// Requests the engine lets reach the device at once.
const TAG_LIMIT: u32 = 8;

/// Deletes the data file on drop.
struct Cleanup(PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// A policy and how the two flows are set up under it.
struct Setup {
    label: &'static str,
    policy: &'static str,
    tunables: &'static [&'static str],
    gets: FlowOptions,
    scan: FlowOptions,
}

struct Outcome {
    gets: Vec<Duration>,
    scan_mib_s: f64,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn write_data(path: &Path) -> std::io::Result<()> {
    let mut f = File::create(path)?;
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    for _ in 0..FILE_BYTES >> 20 {
        f.write_all(&chunk)?;
    }
    f.sync_all()
}

/// The compaction-like scan: sequential reads over the whole file, `SCAN_DEPTH` in flight, until `stop`.
fn scan(
    engine: &Engine,
    file: FileRef,
    opts: FlowOptions,
    stop: &AtomicBool,
    bytes: &AtomicU64,
) -> Result<(), EngineError> {
    let flow = engine.flow(opts)?;
    let mut next = 0u64;
    let mut advance = || {
        let o = next;
        next = (next + SCAN_BYTES as u64) % FILE_BYTES;
        o
    };
    for _ in 0..SCAN_DEPTH {
        flow.submit_read(file, advance(), AlignedBuf::new(SCAN_BYTES), 0)?;
    }
    while flow.in_flight() > 0 {
        let c = flow.wait()?;
        bytes.fetch_add(c.result? as u64, Ordering::Relaxed);
        if !stop.load(Ordering::Relaxed) {
            flow.submit_read(file, advance(), c.buf, 0)?;
        }
    }
    Ok(())
}

/// The foreground client: a 16 KiB get at a random offset every 2 ms, timing each.
fn serve_gets(engine: &Engine, file: FileRef, opts: FlowOptions, until: Instant) -> Result<Vec<Duration>, EngineError> {
    let flow = engine.flow(opts)?;
    let mut buf = AlignedBuf::new(GET_BYTES);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut lat = Vec::new();
    while Instant::now() < until {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = (x % (FILE_BYTES / GET_BYTES as u64)) * GET_BYTES as u64;
        let t0 = Instant::now();
        flow.read(file, off, &mut buf)?;
        lat.push(t0.elapsed());
        std::thread::sleep(GET_INTERVAL);
    }
    Ok(lat)
}

fn run(setup: &Setup, path: &Path) -> Result<Outcome, EngineError> {
    let policy = setup.policy;
    // LEAD=1 runs the engine with leader/followers (EngineConfig::lead).
    let cfg = EngineConfig {
        tag_limit: TAG_LIMIT,
        lead: std::env::var("LEAD").is_ok_and(|v| v == "1"),
        ..EngineConfig::for_path(path)
    };
    let engine = Arc::new(Engine::start_named(policy, setup.tunables, cfg)?);
    let file = engine.open(path, false)?;
    let stop = Arc::new(AtomicBool::new(false));
    let bytes = Arc::new(AtomicU64::new(0));
    let scanner = {
        let (engine, stop, bytes) = (Arc::clone(&engine), Arc::clone(&stop), Arc::clone(&bytes));
        let opts = setup.scan.clone();
        std::thread::spawn(move || scan(&engine, file, opts, &stop, &bytes))
    };
    // Let the scan fill the queues first, then measure.
    std::thread::sleep(Duration::from_millis(300));
    let b0 = bytes.load(Ordering::Relaxed);
    let t0 = Instant::now();
    let gets = serve_gets(&engine, file, setup.gets.clone(), t0 + RUN_TIME);
    let scan_mib_s = (bytes.load(Ordering::Relaxed) - b0) as f64 / t0.elapsed().as_secs_f64() / (1 << 20) as f64;
    stop.store(true, Ordering::Relaxed);
    let scanned = scanner.join().unwrap_or(Err(EngineError::ShutDown));
    let mut gets = gets?;
    scanned?;
    gets.sort();
    Ok(Outcome { gets, scan_mib_s })
}

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "/var/tmp".into()));
    let path = dir.join(format!("bfq-storage-service-{}.dat", std::process::id()));
    let _cleanup = Cleanup(path.clone());
    if let Err(e) = write_data(&path) {
        eprintln!("cannot write {}: {e}", path.display());
        std::process::exit(1);
    }
    println!(
        "foreground: {} KiB gets every {} ms; background: {} KiB sequential scan, {} in flight; {} tags; {} s each",
        GET_BYTES >> 10,
        GET_INTERVAL.as_millis(),
        SCAN_BYTES >> 10,
        SCAN_DEPTH,
        TAG_LIMIT,
        RUN_TIME.as_secs()
    );
    let be = |name: &str| FlowOptions::named(name);
    let setups = [
        Setup {
            label: "noop (one FIFO)",
            policy: "noop",
            tunables: &[],
            gets: be("gets"),
            scan: be("compaction"),
        },
        Setup {
            label: "bfq, gets weight 1000, scan weight 100",
            policy: "bfq",
            tunables: &[],
            gets: be("gets").weight(1000),
            scan: be("compaction").weight(100),
        },
        Setup {
            label: "bfq, gets RT class, scan IDLE class",
            policy: "bfq",
            tunables: &[],
            gets: be("gets").class(IoClass::Rt, 0),
            scan: be("compaction").class(IoClass::Idle, 7),
        },
        Setup {
            label: "bfq slice_idle=0, weights 1000/100",
            policy: "bfq",
            tunables: &["slice_idle=0"],
            gets: be("gets").weight(1000),
            scan: be("compaction").weight(100),
        },
    ];
    let dev = bfq_engine::device_info_for(&path);
    println!(
        "device {}: rotational {}, nr_requests {}",
        dev.name, dev.rotational, dev.nr_requests
    );
    println!(
        "{:<40} {:>6} {:>8} {:>8} {:>8} {:>11}",
        "setup", "gets", "p50 ms", "p99 ms", "max ms", "scan MiB/s"
    );
    for setup in &setups {
        match run(setup, &path) {
            Ok(o) => {
                let ms = |d: Duration| d.as_secs_f64() * 1000.0;
                println!(
                    "{:<40} {:>6} {:>8.2} {:>8.2} {:>8.2} {:>11.0}",
                    setup.label,
                    o.gets.len(),
                    ms(percentile(&o.gets, 0.5)),
                    ms(percentile(&o.gets, 0.99)),
                    ms(o.gets.last().copied().unwrap_or_default()),
                    o.scan_mib_s
                );
            }
            Err(e) => {
                eprintln!("{}: {e}", setup.label);
                std::process::exit(1);
            }
        }
    }
}
