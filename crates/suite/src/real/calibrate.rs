//! `bfq calibrate`: measures a real device with fio-like probes and fits the simulator's `measured` device model.
//!
//! 1. [`measure`] (root): O_DIRECT probes through Linux AIO on a 1 GiB test file in `DIR/bfq-files/` (or on a raw
//!    test device): random reads of 4-256 KiB and sequential 1 MiB reads at depth 1, 4 KiB random reads at depths
//!    2-32, sequential 1 MiB reads at depth 8, random 4 KiB and sequential 1 MiB writes at depth 1, sequential 1 MiB
//!    writes at depth 8. Each probe runs for [`CalibrateOptions::probe_s`] and reports IOPS, MB/s and its latency
//!    distribution. The device's `rotational` flag, `write_cache` mode, `nr_requests` and `max_sectors_kb` come from
//!    sysfs.
//! 2. [`check`]: refuses absurd results (no completions, impossible rates, depth 32 slower than depth 1 by half).
//! 3. [`fit`] (pure; tested on a recorded fixture): the `measured` model ([`MeasuredConfig`]) from a
//!    [`Calibration`].
//! 4. [`reproduce`]: what the fitted model gives in the simulator for the checked probes (4 KiB reads at depth 1 and
//!    32, sequential 1 MiB reads at depth 1), for the report and the tests.

use super::aio::Aio;
use super::sys::{self, io_err, AlignedBuf, BlockDev};
use super::RealError;
use bfq_sched::{Direction, Time};
use bfq_sim::device::{DevRequest, Device, DeviceConfig, MeasuredConfig};
use serde::{Deserialize, Serialize};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Size of the probe file (and of the region probed on a raw device), bytes.
pub const PROBE_REGION_BYTES: u64 = 1 << 30;

/// Default length of one probe, seconds.
pub const DEFAULT_PROBE_S: f64 = 2.0;

/// The relative error the fitted model may have on the checked probes in the simulator.
pub const REPRODUCE_TOLERANCE: f64 = 0.15;

/// What to calibrate and how long each probe runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrateOptions {
    /// A directory on the device (a `bfq loopdev` mount) or a raw block device made by `bfq loopdev --fs none`.
    pub target: PathBuf,
    /// Allow a device that `bfq loopdev` did not make (a directory on it only: raw devices must be ours).
    pub allow_device: bool,
    /// Length of each probe, seconds (0.2 to 30).
    pub probe_s: f64,
}

/// One probe's specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeSpec {
    /// Writes instead of reads.
    pub write: bool,
    /// Sequential offsets instead of uniformly random aligned ones.
    pub seq: bool,
    /// Request size, KiB.
    pub kib: u32,
    /// Requests kept in flight.
    pub depth: u32,
}

impl ProbeSpec {
    /// A short name: `randread-4k-qd1`, `seqwrite-1024k-qd8`.
    pub fn name(&self) -> String {
        format!(
            "{}{}-{}k-qd{}",
            if self.seq { "seq" } else { "rand" },
            if self.write { "write" } else { "read" },
            self.kib,
            self.depth
        )
    }
}

/// The probes `measure` runs, in order.
pub fn probe_plan() -> Vec<ProbeSpec> {
    let p = |write, seq, kib, depth| ProbeSpec { write, seq, kib, depth };
    let mut v = vec![
        p(false, false, 4, 1),
        p(false, false, 16, 1),
        p(false, false, 64, 1),
        p(false, false, 256, 1),
        p(false, true, 1024, 1),
    ];
    v.extend([2, 4, 8, 16, 32].map(|d| p(false, false, 4, d)));
    v.extend([
        p(false, true, 1024, 8),
        p(true, false, 4, 1),
        p(true, true, 1024, 1),
        p(true, true, 1024, 8),
    ]);
    v
}

/// One probe's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// What ran.
    pub spec: ProbeSpec,
    /// Completed requests.
    pub ios: u64,
    /// Length, s.
    pub secs: f64,
    /// Requests per second.
    pub iops: f64,
    /// MB/s (10^6 bytes per second).
    pub mb_s: f64,
    /// Mean completion latency, µs.
    pub mean_us: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
}

/// The cross-check of one probe against fio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FioCheck {
    /// The probe compared.
    pub spec: ProbeSpec,
    /// Our IOPS.
    pub ours_iops: f64,
    /// fio's IOPS for the same job.
    pub fio_iops: f64,
}

/// Everything a calibration measured; [`fit`] turns it into a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Device name (`loop0`).
    pub device: String,
    /// Capacity, 512-byte sectors.
    pub capacity_sectors: u64,
    /// `queue/rotational`.
    pub rotational: bool,
    /// `queue/write_cache` (`write back` or `write through`).
    pub write_cache: String,
    /// `queue/nr_requests`.
    pub nr_requests: u32,
    /// `queue/max_sectors_kb` in sectors.
    pub max_sectors: u32,
    /// The probes, in [`probe_plan`] order.
    pub probes: Vec<Probe>,
    /// The fio cross-check, if fio was available.
    pub fio: Option<FioCheck>,
    /// Load average (1 min) when the calibration started.
    pub loadavg_1m: Option<f64>,
}

/// A calibration that cannot be turned into a model; the message says why and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CalibrationError(pub String);

impl Calibration {
    /// The probe with this spec.
    pub fn probe(&self, write: bool, seq: bool, kib: u32, depth: u32) -> Option<&Probe> {
        let want = ProbeSpec { write, seq, kib, depth };
        self.probes.iter().find(|p| p.spec == want)
    }
}

/// Refuses results no device gives: a probe without enough completions, a rate or latency out of any device's
/// range, depth 32 at less than half the 4 KiB IOPS of depth 1, or fio disagreeing by more than 2x.
pub fn check(c: &Calibration) -> Result<(), CalibrationError> {
    let bad = |p: &Probe, why: &str| {
        CalibrationError(format!(
            "probe {} gave an absurd result ({} IOPS, {:.1} MB/s, mean {:.1} µs: {why}); the machine may have been busy \
             or the device misbehaved: run bfq calibrate again on a quieter machine",
            p.spec.name(),
            p.iops.round(),
            p.mb_s,
            p.mean_us
        ))
    };
    for p in &c.probes {
        if p.ios < 20 {
            return Err(bad(p, "fewer than 20 completions"));
        }
        if !(p.iops.is_finite() && p.iops > 0.0 && p.iops < 20.0e6) {
            return Err(bad(p, "IOPS outside (0, 20 M)"));
        }
        if p.mb_s.is_nan() || p.mb_s >= 200_000.0 {
            return Err(bad(p, "more than 200 GB/s"));
        }
        if !(p.mean_us.is_finite() && p.mean_us >= 0.5 && p.mean_us < 10.0e6) {
            return Err(bad(p, "mean latency outside [0.5 µs, 10 s]"));
        }
    }
    for (w, s, k) in [
        (false, false, 4),
        (false, false, 16),
        (false, false, 64),
        (false, false, 256),
    ] {
        if c.probe(w, s, k, 1).is_none() {
            return Err(CalibrationError(format!(
                "the calibration has no {} probe: record it again with bfq calibrate",
                ProbeSpec {
                    write: w,
                    seq: s,
                    kib: k,
                    depth: 1
                }
                .name()
            )));
        }
    }
    let need = |w, s, k, d| {
        c.probe(w, s, k, d).ok_or_else(|| {
            CalibrationError(format!(
                "the calibration has no {} probe: record it again with bfq calibrate",
                ProbeSpec {
                    write: w,
                    seq: s,
                    kib: k,
                    depth: d
                }
                .name()
            ))
        })
    };
    let q1 = need(false, false, 4, 1)?;
    let q32 = need(false, false, 4, 32)?;
    need(false, true, 1024, 1)?;
    need(false, true, 1024, 8)?;
    need(true, false, 4, 1)?;
    need(true, true, 1024, 1)?;
    need(true, true, 1024, 8)?;
    if q32.iops < 0.5 * q1.iops {
        return Err(bad(q32, "depth 32 gave less than half the IOPS of depth 1"));
    }
    if let Some(f) = &c.fio {
        let r = f.ours_iops / f.fio_iops;
        if !(0.5..=2.0).contains(&r) {
            return Err(CalibrationError(format!(
                "probe {} disagrees with fio: {:.0} IOPS here, {:.0} with fio (ratio {r:.2}); the machine may have been \
                 busy: run bfq calibrate again on a quieter machine",
                f.spec.name(),
                f.ours_iops,
                f.fio_iops
            )));
        }
    }
    Ok(())
}

/// Fits the `measured` model to a checked calibration: the read table from the depth-1 random probes (4-256 KiB)
/// and the depth-1 sequential 1 MiB probe, the write table from the depth-1 write probes, the parallelism from
/// 4 KiB IOPS at depth 32 times the depth-1 service time, the link rates from the depth-8 sequential probes (at
/// least the depth-1 bandwidth). Nothing is tuned: every field is one measured figure or a product of two.
pub fn fit(c: &Calibration, name: &str) -> Result<MeasuredConfig, CalibrationError> {
    check(c)?;
    let get = |w, s, k, d| c.probe(w, s, k, d).expect("checked");
    let mut read_us: Vec<[f64; 2]> = [4, 16, 64, 256]
        .iter()
        .map(|&k| [f64::from(k), get(false, false, k, 1).mean_us])
        .collect();
    let seq1 = get(false, true, 1024, 1);
    read_us.push([1024.0, seq1.mean_us]);
    let w4 = get(true, false, 4, 1);
    let w1m = get(true, true, 1024, 1);
    let write_us = vec![[4.0, w4.mean_us], [1024.0, w1m.mean_us]];
    let q32 = get(false, false, 4, 32);
    let parallelism = (q32.iops * get(false, false, 4, 1).mean_us / 1e6).clamp(1.0, 32.0);
    let max_read_mb_s = get(false, true, 1024, 8).mb_s.max(seq1.mb_s);
    let max_write_mb_s = get(true, true, 1024, 8).mb_s.max(w1m.mb_s);
    let cfg = MeasuredConfig {
        name: name.to_string(),
        capacity_sectors: c.capacity_sectors.max(2048),
        rotational: c.rotational,
        queue_depth: c.nr_requests.clamp(1, 65_536),
        nr_requests: c.nr_requests.clamp(1, 1 << 20),
        max_sectors: c.max_sectors.clamp(8, 1 << 16),
        parallelism,
        read_us,
        write_us,
        max_read_mb_s,
        max_write_mb_s,
    };
    DeviceConfig::Measured(cfg.clone()).validate().map_err(|e| {
        CalibrationError(format!(
            "the fitted model is invalid ({e}): the calibration is unusable"
        ))
    })?;
    Ok(cfg)
}

/// Runs `spec` for `n` requests against a simulated device, closed loop (a new request as each completes), and
/// returns (IOPS, MB/s). Random offsets come from a fixed linear congruential sequence (deterministic).
pub fn simulate_probe(cfg: &DeviceConfig, spec: ProbeSpec, n: u64) -> (f64, f64) {
    let mut dev = cfg.build();
    let sectors = spec.kib * 2;
    let region = (PROBE_REGION_BYTES / 512).min(dev.info().capacity_sectors);
    let slots = (region / u64::from(sectors)).max(1);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next_seq = 0u64;
    let mut offset = || {
        if spec.seq {
            next_seq = (next_seq + 1) % slots;
            next_seq * u64::from(sectors)
        } else {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % slots * u64::from(sectors)
        }
    };
    let dir = if spec.write { Direction::Write } else { Direction::Read };
    let depth = u64::from(spec.depth.max(1)).min(u64::from(dev.info().queue_depth.max(1)));
    let (mut now, mut sent, mut done): (Time, u64, u64) = (0, 0, 0);
    let mut submit = |dev: &mut dyn Device, tag: u64, now: Time| {
        let sector = offset();
        dev.submit(
            DevRequest {
                tag,
                dir,
                sector,
                sectors,
            },
            now,
        );
    };
    while sent < depth.min(n) {
        submit(dev.as_mut(), sent, now);
        sent += 1;
    }
    while done < n {
        let Some(t) = dev.next_completion() else { break };
        now = now.max(t);
        while dev.pop_completion(now).is_some() {
            done += 1;
            if sent < n {
                submit(dev.as_mut(), sent, now);
                sent += 1;
            }
        }
    }
    let secs = (now.max(1)) as f64 / 1e9;
    let iops = done as f64 / secs;
    (iops, iops * f64::from(spec.kib) * 1024.0 / 1e6)
}

/// One row of [`reproduce`]: a checked probe, measured and simulated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reproduced {
    /// The probe.
    pub spec: ProbeSpec,
    /// Measured: IOPS for 4 KiB probes, MB/s for 1 MiB ones.
    pub measured: f64,
    /// The model in the simulator, same unit.
    pub simulated: f64,
}

impl Reproduced {
    /// Simulated / measured - 1.
    pub fn error(&self) -> f64 {
        self.simulated / self.measured - 1.0
    }
}

/// The model's figures for the acceptance probes: 4 KiB random reads at depth 1 and 32 (IOPS), sequential 1 MiB
/// reads at depth 1 (MB/s).
pub fn reproduce(c: &Calibration, cfg: &MeasuredConfig) -> Vec<Reproduced> {
    let dc = DeviceConfig::Measured(cfg.clone());
    [(4, 1, false), (4, 32, false), (1024, 1, true)]
        .into_iter()
        .filter_map(|(kib, depth, seq)| {
            let p = c.probe(false, seq, kib, depth)?;
            let (iops, mb) = simulate_probe(&dc, p.spec, 20_000);
            let (measured, simulated) = if kib == 4 { (p.iops, iops) } else { (p.mb_s, mb) };
            Some(Reproduced {
                spec: p.spec,
                measured,
                simulated,
            })
        })
        .collect()
}

/// The model as a TOML file the simulator reads, with the calibration's figures as comments.
pub fn to_toml(c: &Calibration, cfg: &MeasuredConfig) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "# Measured by `bfq calibrate` on {} (rotational {}, write cache: {}, load average {}).\n",
        c.device,
        c.rotational,
        c.write_cache,
        c.loadavg_1m.map_or("?".to_string(), |l| format!("{l:.2}"))
    ));
    s.push_str("# probe: IOPS, MB/s, mean / p50 / p99 latency µs\n");
    for p in &c.probes {
        s.push_str(&format!(
            "#   {:<20} {:>10.0} {:>9.1} {:>9.1} {:>9.1} {:>9.1}\n",
            p.spec.name(),
            p.iops,
            p.mb_s,
            p.mean_us,
            p.p50_us,
            p.p99_us
        ));
    }
    if let Some(f) = &c.fio {
        s.push_str(&format!(
            "# fio cross-check {}: {:.0} IOPS here, {:.0} with fio\n",
            f.spec.name(),
            f.ours_iops,
            f.fio_iops
        ));
    }
    s.push_str(&DeviceConfig::Measured(cfg.clone()).to_toml_string());
    s
}

/// Where the probes run: a file on a mounted file system, or a raw device.
struct ProbeTarget {
    dev: BlockDev,
    path: PathBuf,
    region: u64,
}

fn open_target(opts: &CalibrateOptions) -> Result<ProbeTarget, RealError> {
    use std::os::unix::fs::FileTypeExt;
    let t = &opts.target;
    let meta = std::fs::metadata(t).map_err(|_| {
        RealError::Invalid(format!(
            "{} does not exist: give the directory made by `bfq loopdev create` (or its raw device)",
            t.display()
        ))
    })?;
    if meta.file_type().is_block_device() {
        use std::os::unix::fs::MetadataExt;
        let rdev = meta.rdev();
        let dev = BlockDev::from_numbers(libc::major(rdev), libc::minor(rdev))?;
        if super::loopdev::record_for_device(&dev).is_none() {
            return Err(RealError::Invalid(format!(
                "{} is not a device made by `bfq loopdev create --fs none`; calibrate writes to a raw device, so it \
                 only takes ours (for another device, give a directory on it with --allow-device)",
                t.display()
            )));
        }
        let dp = dev.dev_path();
        if sys::mounts()?.iter().any(|m| Path::new(&m.source) == dp) {
            return Err(RealError::Invalid(format!(
                "{} is mounted: give the mount's directory instead of the device",
                t.display()
            )));
        }
        let size = std::fs::read_to_string(dev.sys.join("size"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 512;
        if size < 64 << 20 {
            return Err(RealError::Invalid(format!(
                "{} is smaller than 64 MiB: make a larger test device",
                t.display()
            )));
        }
        return Ok(ProbeTarget {
            dev,
            path: dp,
            region: size.min(PROBE_REGION_BYTES) / (1 << 20) * (1 << 20),
        });
    }
    if !meta.is_dir() {
        return Err(RealError::Invalid(format!(
            "{} is neither a directory nor a block device: give the directory made by `bfq loopdev create`",
            t.display()
        )));
    }
    let dev = BlockDev::of_dir(t)?;
    if super::kernel::check_device(&dev, t, opts.allow_device).is_err() {
        return Err(RealError::Invalid(format!(
            "{} is on {}, which bfq loopdev did not create; calibrate writes a 1 GiB probe file there. Make a test \
             device with `bfq loopdev create --size 4G DIR` and give that DIR, or pass --allow-device if you mean it",
            t.display(),
            dev.dev_path().display()
        )));
    }
    let files = t.join(super::files::FILES_SUBDIR);
    std::fs::create_dir_all(&files).map_err(io_err(format!("cannot create {}", files.display())))?;
    let path = files.join("calibrate.dat");
    let free = sys::free_bytes(t)?;
    let have = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let region = PROBE_REGION_BYTES.min((free + have).saturating_sub(64 << 20) / (1 << 20) * (1 << 20));
    if region < 64 << 20 {
        return Err(RealError::Invalid(format!(
            "{} has less than 128 MiB free: calibrate needs up to 1 GiB for its probe file",
            t.display()
        )));
    }
    Ok(ProbeTarget { dev, path, region })
}

/// Writes the probe file in full (never sparse) unless it already has the size.
fn fill(path: &Path, region: u64, progress: &mut dyn FnMut(&str)) -> Result<(), RealError> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == region) {
        return Ok(());
    }
    progress(&format!(
        "writing the {} MiB probe file {}",
        region >> 20,
        path.display()
    ));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(io_err(format!("cannot create {}", path.display())))?;
    let chunk = 8u64 << 20;
    let buf = AlignedBuf::new(chunk as usize);
    let mut off = 0;
    use std::os::unix::fs::FileExt;
    while off < region {
        let n = chunk.min(region - off) as usize;
        f.write_all_at(&buf.as_slice()[..n], off)
            .map_err(io_err(format!("cannot write {}", path.display())))?;
        off += n as u64;
    }
    f.sync_all()
        .map_err(io_err(format!("cannot sync {}", path.display())))?;
    Ok(())
}

/// Runs one probe on `path` over `region` bytes for `secs`.
fn run_probe(path: &Path, region: u64, spec: ProbeSpec, secs: f64) -> Result<Probe, RealError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(spec.write)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(io_err(format!("cannot open {} with O_DIRECT", path.display())))?;
    let fd = f.as_raw_fd();
    let bs = u64::from(spec.kib) * 1024;
    let slots = (region / bs).max(1);
    let depth = spec.depth.max(1) as usize;
    let mut aio = Aio::new(depth).map_err(io_err("cannot set up Linux AIO"))?;
    let mut bufs: Vec<AlignedBuf> = (0..depth).map(|_| AlignedBuf::new(bs as usize)).collect();
    let mut started = vec![Instant::now(); depth];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ (u64::from(spec.kib) << 8 | u64::from(spec.depth));
    let mut next_seq = 0u64;
    let mut next_offset = || {
        if spec.seq {
            let o = next_seq % slots * bs;
            next_seq += 1;
            o
        } else {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % slots * bs
        }
    };
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(secs);
    let mut lat_ns: Vec<u64> = Vec::with_capacity(1 << 16);
    let mut submit = |aio: &mut Aio, i: usize, bufs: &mut [AlignedBuf], started: &mut [Instant]| {
        started[i] = Instant::now();
        let ptr = bufs[i].as_mut_ptr();
        // SAFETY: buffer i stays allocated and unused until its completion (data = i) is reaped below, and the
        // file stays open until the function returns after every completion has been reaped.
        unsafe { aio.submit(fd, spec.write, ptr, bs, next_offset(), i as u64) }
    };
    for i in 0..depth {
        submit(&mut aio, i, &mut bufs, &mut started).map_err(io_err("io_submit"))?;
    }
    let mut last = t0;
    let mut failed = None;
    while aio.in_flight() > 0 {
        let Some(d) = aio.wait(Instant::now() + Duration::from_secs(30)) else {
            return Err(RealError::Invalid(format!(
                "probe {} got no completion in 30 s: the device is hung or far too slow to calibrate",
                spec.name()
            )));
        };
        let now = Instant::now();
        let i = d.data as usize;
        if d.res < 0 {
            failed = Some(std::io::Error::from_raw_os_error((-d.res) as i32));
        } else if now <= end {
            lat_ns.push((now - started[i]).as_nanos() as u64);
            last = now;
        }
        if now < end && failed.is_none() {
            submit(&mut aio, i, &mut bufs, &mut started).map_err(io_err("io_submit"))?;
        }
    }
    if let Some(e) = failed {
        return Err(RealError::Io {
            context: format!("probe {} on {}", spec.name(), path.display()),
            source: e,
        });
    }
    let secs = (last - t0).as_secs_f64().max(1e-9);
    lat_ns.sort_unstable();
    let n = lat_ns.len();
    let pct = |q: f64| {
        lat_ns
            .get(((n as f64 * q) as usize).min(n.saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
            / 1e3
    };
    let iops = n as f64 / secs;
    Ok(Probe {
        spec,
        ios: n as u64,
        secs,
        iops,
        mb_s: iops * bs as f64 / 1e6,
        mean_us: if n > 0 {
            lat_ns.iter().sum::<u64>() as f64 / n as f64 / 1e3
        } else {
            0.0
        },
        p50_us: pct(0.5),
        p99_us: pct(0.99),
    })
}

/// Runs fio for `spec` on `path` for `secs`; its IOPS, or `None` if fio is not installed.
fn fio_iops(path: &Path, region: u64, spec: ProbeSpec, secs: f64) -> Result<Option<f64>, RealError> {
    let rw = match (spec.write, spec.seq) {
        (false, false) => "randread",
        (false, true) => "read",
        (true, false) => "randwrite",
        (true, true) => "write",
    };
    let out = std::process::Command::new("fio")
        .args([
            "--name=bfq-calibrate",
            "--ioengine=libaio",
            "--direct=1",
            "--time_based",
            "--output-format=json",
        ])
        .arg(format!("--filename={}", path.display()))
        .arg(format!("--size={region}"))
        .arg(format!("--rw={rw}"))
        .arg(format!("--bs={}k", spec.kib))
        .arg(format!("--iodepth={}", spec.depth))
        .arg(format!("--runtime={}ms", (secs * 1000.0).round() as u64))
        .output();
    let out = match out {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("cannot run fio")(e)),
        Ok(o) => o,
    };
    if !out.status.success() {
        return Err(RealError::Command {
            command: format!("fio --rw={rw} --bs={}k --iodepth={}", spec.kib, spec.depth),
            status: out.status.to_string(),
            stderr: bfq_sched::text::one_line(String::from_utf8_lossy(&out.stderr).trim()),
        });
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| RealError::Invalid(format!("fio printed no JSON ({e})")))?;
    let side = if spec.write { "write" } else { "read" };
    Ok(v["jobs"][0][side]["iops"].as_f64())
}

/// Measures the device under `opts.target` (root). `progress` gets one line per step.
pub fn measure(opts: &CalibrateOptions, progress: &mut dyn FnMut(&str)) -> Result<Calibration, RealError> {
    sys::require_root("bfq calibrate (it writes with O_DIRECT to the test device)")?;
    if !(opts.probe_s.is_finite() && (0.2..=30.0).contains(&opts.probe_s)) {
        return Err(RealError::Invalid(format!(
            "probe length {} s is out of range: give 0.2 to 30 seconds",
            opts.probe_s
        )));
    }
    let t = open_target(opts)?;
    let q = t.dev.queue();
    let read = |f: &str| {
        std::fs::read_to_string(q.join(f))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let loadavg_1m = sys::loadavg_1m();
    if t.path.is_file() || !t.path.exists() {
        fill(&t.path, t.region, progress)?;
    }
    let plan = probe_plan();
    let mut probes = Vec::with_capacity(plan.len());
    for (i, spec) in plan.iter().enumerate() {
        progress(&format!(
            "probe {}/{}: {} ({:.1} s)",
            i + 1,
            plan.len(),
            spec.name(),
            opts.probe_s
        ));
        probes.push(run_probe(&t.path, t.region, *spec, opts.probe_s)?);
    }
    let spec = plan[0];
    progress(&format!("cross-check: fio {} ({:.1} s)", spec.name(), opts.probe_s));
    let fio = fio_iops(&t.path, t.region, spec, opts.probe_s)?.map(|fio_iops| FioCheck {
        spec,
        ours_iops: probes[0].iops,
        fio_iops,
    });
    if fio.is_none() {
        progress("fio is not installed: no cross-check (apt-get install fio)");
    }
    let size = std::fs::read_to_string(t.dev.sys.join("size"))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    Ok(Calibration {
        device: t.dev.name.clone(),
        capacity_sectors: size,
        rotational: t.dev.rotational(),
        write_cache: read("write_cache"),
        nr_requests: read("nr_requests").parse().unwrap_or(128),
        max_sectors: read("max_sectors_kb").parse::<u32>().map(|k| k * 2).unwrap_or(256),
        probes,
        fio,
        loadavg_1m,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A calibration recorded on this project's development machine (a 6 GiB `bfq loopdev` device).
    pub(crate) fn fixture() -> Calibration {
        serde_json::from_str(include_str!("../../tests/data/calibration-loop.json")).expect("fixture parses")
    }

    #[test]
    fn the_fitted_model_reproduces_the_checked_probes_within_15_percent() {
        let c = fixture();
        let cfg = fit(&c, "loop-fixture").expect("fits");
        let rows = reproduce(&c, &cfg);
        assert_eq!(rows.len(), 3);
        for r in &rows {
            assert!(
                r.error().abs() <= REPRODUCE_TOLERANCE,
                "{}: measured {:.1}, simulated {:.1} ({:+.1} %)",
                r.spec.name(),
                r.measured,
                r.simulated,
                100.0 * r.error()
            );
        }
        // The TOML reads back as the same model.
        let text = to_toml(&c, &cfg);
        assert_eq!(
            DeviceConfig::from_toml_str(&text).expect("the simulator accepts it"),
            DeviceConfig::Measured(cfg)
        );
    }

    #[test]
    fn absurd_results_are_refused_with_the_probe_named() {
        let mut c = fixture();
        c.probes[0].iops = 1.0e9;
        let e = check(&c).expect_err("refused").to_string();
        assert!(e.contains("randread-4k-qd1") && e.contains("absurd"), "{e}");
        let mut c = fixture();
        let i = c.probes.iter().position(|p| p.spec.depth == 32).expect("qd32");
        c.probes[i].iops = c.probes[0].iops * 0.1;
        assert!(check(&c).expect_err("refused").to_string().contains("depth 32"));
        let mut c = fixture();
        c.fio = Some(FioCheck {
            spec: c.probes[0].spec,
            ours_iops: 1000.0,
            fio_iops: 5000.0,
        });
        assert!(check(&c)
            .expect_err("refused")
            .to_string()
            .contains("disagrees with fio"));
        let mut c = fixture();
        c.probes.retain(|p| p.spec.depth != 32);
        assert!(check(&c)
            .expect_err("refused")
            .to_string()
            .contains("no randread-4k-qd32"));
    }

    #[test]
    fn the_plan_names_its_probes() {
        let names: Vec<String> = probe_plan().iter().map(ProbeSpec::name).collect();
        assert_eq!(names.len(), 14);
        assert_eq!(names[0], "randread-4k-qd1");
        assert!(names.contains(&"seqread-1024k-qd8".to_string()));
        assert!(names.contains(&"seqwrite-1024k-qd1".to_string()));
    }

    #[test]
    fn a_missing_target_is_one_line_naming_the_fix() {
        let opts = CalibrateOptions {
            target: "/nonexistent/bfq".into(),
            allow_device: false,
            probe_s: 1.0,
        };
        let e = open_target(&opts).err().expect("refused").to_string();
        assert!(e.contains("does not exist") && e.contains("bfq loopdev create"), "{e}");
    }
}
