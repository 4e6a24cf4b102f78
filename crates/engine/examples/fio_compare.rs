//! Compares the engine (policy noop) with fio's io_uring engine on the same loop device, in one run.
//!
//! As root: creates a fully written file in /var/tmp, attaches it with `losetup --direct-io=on`, sets that loop
//! device's scheduler to `none`, then runs, interleaved (the order alternating between repetitions), fio and the
//! engine on two jobs: 4 KiB O_DIRECT random reads at queue depth 32, and 1 MiB sequential reads at queue depth 8,
//! each time-based. Before each pair of runs it reads the whole device once (`dd iflag=direct`), so that both runs
//! of a pair start from the same cache state below the loop device. It prints every run, the medians and the engine/fio ratios, then detaches the loop device and
//! deletes the file, also on error or Ctrl-C.
//!
//! `--policies noop,bfq` runs the engine once per listed policy in each repetition (default: noop only), so that
//! the table also gives each policy's IOPS against the first one's (paired within each repetition). A policy
//! written `name+lead` runs the engine with [`EngineConfig::lead`] (leader/followers), so `noop,noop+lead` pairs
//! the two designs.
//!
//! `--device PATH` uses an existing block device (for example one made by `bfq loopdev create --fs none DIR`,
//! as `DIR/device`) instead of making a file and a loop device; its scheduler is set to `none`, and it is neither
//! detached nor deleted at the end.
//!
//! Besides IOPS, each run's CPU time per request is printed: the engine process's own (user + system, all its
//! threads), and fio's job CPU (`usr_cpu + sys_cpu` of its JSON report times the run time).
//!
//! ```text
//! cargo run -p bfq-engine --release --example fio_compare -- [--size-mib 1024] [--runtime 10] [--reps 3] \
//!     [--policies noop,bfq,noop+lead,bfq+lead] [--job randread|read] [--device /dev/loopN]
//! ```

use bfq_engine::{AlignedBuf, Engine, EngineConfig, FlowOptions};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

type Res<T> = Result<T, String>;

/// Deletes the backing file on drop.
struct FileGuard(PathBuf);
impl Drop for FileGuard {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Detaches the loop device on drop.
struct LoopGuard(String);
impl Drop for LoopGuard {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
        // Detaching completes asynchronously; wait (a little) until the device has let go of its file.
        let backing = format!("/sys/block/{}/loop/backing_file", self.0.trim_start_matches("/dev/"));
        for _ in 0..50 {
            if !Path::new(&backing).exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("warning: {} still attached after losetup -d", self.0);
    }
}

#[derive(Clone, Copy)]
struct Job {
    name: &'static str,
    fio_rw: &'static str,
    bs: usize,
    qd: usize,
    random: bool,
}

const JOBS: [Job; 2] = [
    Job {
        name: "randread 4k qd32",
        fio_rw: "randread",
        bs: 4096,
        qd: 32,
        random: true,
    },
    Job {
        name: "read 1m qd8",
        fio_rw: "read",
        bs: 1 << 20,
        qd: 8,
        random: false,
    },
];

/// Result of one run: operations and bytes per second.
#[derive(Clone, Copy, Debug)]
struct Run {
    iops: f64,
    bw: f64,
    /// CPU time per request, in nanoseconds.
    cpu_ns: f64,
}

fn arg(args: &[String], name: &str, default: u64) -> Res<u64> {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .ok_or(format!("{name} needs a value"))?
            .parse()
            .map_err(|e| format!("{name}: {e}")),
        None => Ok(default),
    }
}

fn fill_file(path: &Path, size: u64) -> Res<()> {
    let mut f = File::create(path).map_err(|e| format!("create {}: {e}", path.display()))?;
    let mut chunk = vec![0u8; 1 << 20];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut off = 0;
    while off < size {
        if STOP.load(Ordering::SeqCst) {
            return Err("interrupted".into());
        }
        for w in chunk.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all(&chunk).map_err(|e| e.to_string())?;
        off += chunk.len() as u64;
    }
    f.sync_all().map_err(|e| e.to_string())
}

fn fio(dev: &str, job: Job, runtime: u64) -> Res<(Run, String)> {
    let args = vec![
        format!("--name={}", job.fio_rw),
        format!("--filename={dev}"),
        "--ioengine=io_uring".into(),
        "--direct=1".into(),
        format!("--rw={}", job.fio_rw),
        format!("--bs={}", job.bs),
        format!("--iodepth={}", job.qd),
        "--time_based".into(),
        format!("--runtime={runtime}"),
        "--output-format=json".into(),
    ];
    let cmd = format!("fio {}", args.join(" "));
    let out = Command::new("fio")
        .args(&args)
        .output()
        .map_err(|e| format!("fio: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd}: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notices before the JSON document.
    let start = text.find('{').ok_or("fio printed no JSON")?;
    let v: serde_json::Value = serde_json::from_str(&text[start..]).map_err(|e| format!("fio JSON: {e}"))?;
    let read = &v["jobs"][0]["read"];
    let iops = read["iops"].as_f64().ok_or("no read.iops in fio output")?;
    let bw = read["bw_bytes"].as_f64().ok_or("no read.bw_bytes in fio output")?;
    let job0 = &v["jobs"][0];
    // usr_cpu and sys_cpu are percentages of the job's run time.
    let cpu_pct = job0["usr_cpu"].as_f64().unwrap_or(0.0) + job0["sys_cpu"].as_f64().unwrap_or(0.0);
    let run_s = job0["job_runtime"].as_f64().unwrap_or(0.0) / 1000.0;
    let ops = read["total_ios"].as_f64().unwrap_or(0.0).max(1.0);
    let cpu_ns = cpu_pct / 100.0 * run_s * 1e9 / ops;
    Ok((Run { iops, bw, cpu_ns }, cmd))
}

fn warm(dev: &str) -> Res<()> {
    let out = Command::new("dd")
        .args([
            &format!("if={dev}"),
            "of=/dev/null",
            "bs=1M",
            "iflag=direct",
            "status=none",
        ])
        .output()
        .map_err(|e| format!("dd: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("dd: {}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// CPU time (user + system) of this process so far, all threads, in nanoseconds.
fn cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn engine_run(dev: &Path, job: Job, runtime: u64, spec: &str) -> Res<Run> {
    let (policy, lead) = match spec.strip_suffix("+lead") {
        Some(p) => (p, true),
        None => (spec, false),
    };
    let cfg = EngineConfig {
        lead,
        ..EngineConfig::for_path(dev)
    };
    let engine = Engine::start_named::<&str>(policy, &[], cfg).map_err(|e| e.to_string())?;
    let file = engine.open(dev, false).map_err(|e| e.to_string())?;
    let flow = engine.flow(FlowOptions::named(job.name)).map_err(|e| e.to_string())?;
    let blocks = file.size_bytes() / job.bs as u64;
    let mut rng: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next_seq = 0u64;
    let mut next = |rng: &mut u64| -> u64 {
        if job.random {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            (*rng % blocks) * job.bs as u64
        } else {
            let o = next_seq * job.bs as u64;
            next_seq = (next_seq + 1) % blocks;
            o
        }
    };
    let (cpu0, t0) = (cpu_ns(), Instant::now());
    let end = t0 + Duration::from_secs(runtime);
    for _ in 0..job.qd {
        flow.submit_read(file, next(&mut rng), AlignedBuf::new(job.bs), 0)
            .map_err(|e| e.to_string())?;
    }
    let (mut ops, mut bytes) = (0u64, 0u64);
    let mut now = Instant::now();
    while flow.in_flight() > 0 {
        let c = flow.wait().map_err(|e| e.to_string())?;
        let n = c.result.map_err(|e| e.to_string())?;
        ops += 1;
        bytes += n as u64;
        // Reading the clock every 32 completions is plenty at these rates.
        if ops.is_multiple_of(32) {
            now = Instant::now();
        }
        if now < end && !STOP.load(Ordering::SeqCst) {
            flow.submit_read(file, next(&mut rng), c.buf, 0)
                .map_err(|e| e.to_string())?;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = (cpu_ns() - cpu0) as f64;
    drop(flow);
    let stats = engine.shutdown().map_err(|e| e.to_string())?;
    let per = |v: u64| v as f64 / stats.completed.max(1) as f64;
    eprintln!(
        "    engine {spec}: {} requests; per request: policy {:.0} ns, reactor sleeps {:.3}, stand-bys {:.4}, \
         kicks {:.3}, \
         client wake-ups {:.3}, client leads {:.3}, inline serves {:.3}",
        stats.completed,
        per(stats.policy_ns),
        per(stats.reactor_sleeps),
        per(stats.reactor_standbys),
        per(stats.reactor_kicks),
        per(stats.client_wakeups),
        per(stats.client_leads),
        per(stats.inline_serves)
    );
    Ok(Run {
        iops: ops as f64 / secs,
        bw: bytes as f64 / secs,
        cpu_ns: cpu / ops.max(1) as f64,
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("fio_compare: {e}");
        std::process::exit(1);
    }
}

fn real_main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let size_mib = arg(&args, "--size-mib", 1024)?;
    let runtime = arg(&args, "--runtime", 10)?;
    let reps = arg(&args, "--reps", 3)?.max(1);
    // `--job randread` or `--job read` runs one job only (for profiling).
    let only_job = args
        .iter()
        .position(|a| a == "--job")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let policies: Vec<String> = match args.iter().position(|a| a == "--policies") {
        Some(i) => args
            .get(i + 1)
            .ok_or("--policies needs a value, e.g. noop,bfq")?
            .split(',')
            .map(|p| p.trim().to_string())
            .collect(),
        None => vec!["noop".to_string()],
    };
    for p in &policies {
        if bfq_sched::find(p.strip_suffix("+lead").unwrap_or(p)).is_none() {
            return Err(format!("--policies: unknown policy {p} (see `bfq list`)"));
        }
    }
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        return Err("needs root (losetup and the loop device's sysfs scheduler); run with sudo".into());
    }
    for tool in ["fio", "losetup"] {
        if Command::new(tool).arg("--version").output().is_err() {
            return Err(format!("{tool} not found (apt-get install -y fio util-linux)"));
        }
    }
    // SAFETY: installs an async-signal-safe handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let given = args
        .iter()
        .position(|a| a == "--device")
        .map(|i| args.get(i + 1).ok_or("--device needs a path, e.g. /mnt/x/device"))
        .transpose()?;
    let (dev, _file_guard, _loop_guard) = match given {
        Some(d) => {
            let real = fs::canonicalize(d).map_err(|e| format!("--device {d}: {e}"))?;
            let dev = real.to_string_lossy().to_string();
            if !dev.starts_with("/dev/") {
                return Err(format!("--device {d}: {dev} is not a block device under /dev"));
            }
            (dev, None, None)
        }
        None => {
            let path = PathBuf::from(format!("/var/tmp/bfq-fio-compare-{}.img", std::process::id()));
            let file_guard = FileGuard(path.clone());
            eprintln!("writing {size_mib} MiB to {} ...", path.display());
            fill_file(&path, size_mib << 20)?;
            let out = Command::new("losetup")
                .args(["--direct-io=on", "--find", "--show"])
                .arg(&path)
                .output()
                .map_err(|e| format!("losetup: {e}"))?;
            if !out.status.success() {
                return Err(format!("losetup: {}", String::from_utf8_lossy(&out.stderr)));
            }
            let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let loop_guard = LoopGuard(dev.clone());
            (dev, Some(file_guard), Some(loop_guard))
        }
    };
    let name = dev.trim_start_matches("/dev/");
    fs::write(format!("/sys/block/{name}/queue/scheduler"), "none")
        .map_err(|e| format!("setting {name}'s scheduler to none: {e}"))?;
    let dio = fs::read_to_string(format!("/sys/block/{name}/loop/dio")).unwrap_or_default();
    eprintln!("{dev}: direct-io {} scheduler none", dio.trim());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();

    // results[job][who]: who 0 is fio, 1.. the engine with each policy.
    let contenders = 1 + policies.len();
    let mut results: Vec<Vec<Vec<Run>>> = vec![vec![Vec::new(); contenders]; JOBS.len()];
    let names: Vec<String> = std::iter::once("fio".to_string())
        .chain(policies.iter().map(|p| format!("engine {p}")))
        .collect();
    let mut cmds = Vec::new();
    let mut log = Vec::new();
    for r in 0..reps {
        for (j, job) in JOBS.iter().enumerate() {
            if only_job.as_deref().is_some_and(|o| !job.name.starts_with(o)) {
                continue;
            }
            // The order rotates between repetitions (fio first, then second, ...), and every other repetition
            // runs backwards, so that no contender always runs right after the warm-up.
            let mut order: Vec<usize> = (0..contenders).map(|k| (k + r as usize) % contenders).collect();
            if r % 2 == 1 {
                order.reverse();
            }
            // Read the whole device once first, so that both runs of the pair find the same caches below the
            // loop device (the host's, on a virtual machine) in the same state.
            warm(&dev)?;
            for who in order {
                if STOP.load(Ordering::SeqCst) {
                    return Err("interrupted".into());
                }
                let run = if who == 0 {
                    let (run, cmd) = fio(&dev, *job, runtime)?;
                    if r == 0 {
                        cmds.push(cmd);
                    }
                    run
                } else {
                    engine_run(Path::new(&dev), *job, runtime, &policies[who - 1])?
                };
                let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
                let line = format!(
                    "rep {r} {:<18} {:<17} {:>10.0} IOPS {:>8.1} MiB/s {:>7.0} ns CPU/request  load {}",
                    job.name,
                    names[who],
                    run.iops,
                    run.bw / (1 << 20) as f64,
                    run.cpu_ns,
                    load.split_whitespace().next().unwrap_or("?")
                );
                eprintln!("{line}");
                log.push(line);
                results[j][who].push(run);
            }
        }
    }
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "kernel {}, {} CPUs, load average at the end {}; {} MiB on {dev} (direct-io, scheduler none); \
         {reps} repetitions of {runtime} s, interleaved; engine: {}, one flow, tag limit 32",
        kernel.trim(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        fs::read_to_string(format!("/sys/block/{name}/size"))
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(size_mib, |sectors| (sectors * 512) >> 20),
        policies.join(", ")
    );
    println!();
    for line in &log {
        println!("    {line}");
    }
    println!();
    println!("| job | contender | median IOPS (min-max) | median MiB/s | / fio (medians) | median of paired ratios to fio (min-max) | median of paired ratios to engine {} | median CPU ns/request |", policies[0]);
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for (j, job) in JOBS.iter().enumerate() {
        if results[j][0].is_empty() {
            continue;
        }
        let fio_iops: Vec<f64> = results[j][0].iter().map(|r| r.iops).collect();
        let first: Vec<f64> = results[j][1].iter().map(|r| r.iops).collect();
        let fio_median = median(&mut fio_iops.clone());
        for (who, name) in names.iter().enumerate() {
            let iops: Vec<f64> = results[j][who].iter().map(|r| r.iops).collect();
            let mut bw: Vec<f64> = results[j][who].iter().map(|r| r.bw).collect();
            // Each repetition's run against the fio run (and the first policy's run) of the same repetition.
            let mut to_fio: Vec<f64> = fio_iops.iter().zip(&iops).map(|(f, e)| e / f).collect();
            let mut to_first: Vec<f64> = first.iter().zip(&iops).map(|(f, e)| e / f).collect();
            let mut cpu: Vec<f64> = results[j][who].iter().map(|r| r.cpu_ns).collect();
            let m = median(&mut iops.clone());
            let lo_hi = |v: &[f64]| {
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                (lo, hi)
            };
            let (ilo, ihi) = lo_hi(&iops);
            let (flo, fhi) = lo_hi(&to_fio);
            println!(
                "| {} | {name} | {:.0} ({:.0}-{:.0}) | {:.1} | {:.1}% | {:.1}% ({:.1}-{:.1}%) | {:.1}% | {:.0} |",
                job.name,
                m,
                ilo,
                ihi,
                median(&mut bw) / (1 << 20) as f64,
                100.0 * m / fio_median,
                100.0 * median(&mut to_fio),
                100.0 * flo,
                100.0 * fhi,
                100.0 * median(&mut to_first),
                median(&mut cpu)
            );
        }
    }
    println!();
    for c in cmds {
        println!("    {c}");
    }
    Ok(())
}
