//! `bfq calibrate`: measures a real device with fio-like probes and fits the simulator's `measured` device model.
//!
//! 1. [`measure`] (root): O_DIRECT probes through Linux AIO on a 1 GiB test file in `DIR/bfq-files/` (or on a raw
//!    test device): random reads of 4-256 KiB and sequential 1 MiB reads at depth 1, 4 KiB random reads at depths
//!    2-32, sequential 1 MiB reads at depth 8, random 4 KiB and sequential 1 MiB writes at depth 1, sequential 1 MiB
//!    writes at depth 8. Each probe runs for [`CalibrateOptions::probe_s`] and reports IOPS, MB/s and its latency
//!    distribution. Then the page-cache streams probe ([`StreamProbe`]): eight buffered sequential readers, counted
//!    at the device. The device's `rotational` flag, `write_cache` mode, `nr_requests`, `max_sectors_kb` and
//!    `read_ahead_kb` come from sysfs.
//! 2. [`check`]: refuses absurd results (no completions, impossible rates, depth 32 slower than depth 1 by half).
//! 3. [`fit`] (pure; tested on a recorded fixture): the `measured` model ([`MeasuredConfig`]) from a
//!    [`Calibration`].
//! 4. [`reproduce`]: what the fitted model gives in the simulator for the checked probes (4 KiB reads at depth 1 and
//!    32, sequential 1 MiB reads at depth 1), for the report and the tests.

use super::aio::Aio;
use super::sys::{self, io_err, AlignedBuf, BlockDev};
use super::RealError;
use bfq_sched::{Direction, Time};
use bfq_sim::device::{Completions, DevRequest, Device, DeviceConfig, HostCosts, MeasuredConfig};
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

/// Number of readers in the page-cache streams probe ([`StreamProbe`]).
pub const STREAMS: u32 = 8;

/// Size of each reader's `read()` in the page-cache streams probe, KiB. The device's requests are readahead's
/// whatever the call size (up to `read_ahead_kb`, split at `max_sectors_kb`); 128 KiB keeps the probe's own system
/// calls few (the suite's readers use fio's 4 KiB default; their requests are formed the same way).
pub const STREAM_READ_KIB: u32 = 128;

/// The page-cache streams probe: [`STREAMS`] readers, each reading its own part of the probe file sequentially
/// with buffered `read()` calls of [`STREAM_READ_KIB`], so that the kernel's readahead forms the requests, as it
/// does for the suite's background readers. Measured at the device (its `stat` counters), because the O_DIRECT
/// probes cannot show what these requests get: a user buffer is made of 4 KiB pages, so an O_DIRECT request holds
/// at most `max_segments` of them (128 x 4 KiB = 512 KiB on a loop device), while page-cache requests are built
/// from large folios and reach `max_sectors_kb`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamProbe {
    /// Readers.
    pub streams: u32,
    /// Length, s.
    pub secs: f64,
    /// Read requests the device completed.
    pub device_ios: u64,
    /// Bytes the device read, per second (MB/s, 10^6 bytes).
    pub device_mb_s: f64,
    /// Mean size of the device's read requests, KiB.
    pub request_kib: f64,
    /// Mean time a read request spent in the device (its `stat` read ticks over its reads), µs.
    pub device_latency_us: f64,
}

/// Sizes of the pair probe's two readers, KiB ([`PairProbe`]).
pub const PAIR_KIB: [u32; 2] = [4, 1024];

/// The smallest ratio of the small reader's median latency to the large one's at which the pair probe takes the
/// device to report completions only when drained. A device that reports each request as it ends gives the small
/// reader at most its own time plus what is left of one large request (about half of it on average, 0.5 to 0.6 of
/// the large reader's latency), and a device that serves the two in parallel gives it its idle time; a host that
/// reports when drained gives both the same latency (ratio 1; session 10 measured 1.00 in 5 of 5 runs on this
/// machine, docs/VALIDATION.md).
pub const DRAINED_RATIO: f64 = 0.9;

/// The pair probe: two O_DIRECT readers at depth 1 side by side, a random one of [`PAIR_KIB`]`[0]` and a
/// sequential one of [`PAIR_KIB`]`[1]`. It tells when the device reports completions ([`Completions`]): with each
/// request as it ends, the small reads come back well before the large ones; with all at once when the device
/// drains, both readers see the same latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairProbe {
    /// Reads each reader completed: small, large.
    pub ios: [u64; 2],
    /// Median latency of each reader, µs: small, large.
    pub p50_us: [f64; 2],
}

impl PairProbe {
    /// When the device reports completions, by [`DRAINED_RATIO`].
    pub fn completions(&self) -> Completions {
        if self.p50_us[1] > 0.0 && self.p50_us[0] >= DRAINED_RATIO * self.p50_us[1] {
            Completions::WhenDrained
        } else {
            Completions::Each
        }
    }
}

/// Sizes of the host probe's two `read()` calls, KiB ([`HostProbe`]).
pub const HOST_KIB: [u32; 2] = [4, 128];

/// The host probe: the CPU time of a buffered `read()` served from the page cache, for calls of [`HOST_KIB`] (the
/// median over batches of calls on a cached part of the probe file). The device plays no part; the simulated host
/// charges the fitted line, `syscall_ns + copy_ns_per_kib x KiB`, for every read it serves from its cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostProbe {
    /// Median time per call, ns: small, large.
    pub ns_per_call: [f64; 2],
}

impl HostProbe {
    /// The line through the two sizes' times: the per-KiB copy cost is the slope, the fixed cost what is left of
    /// the small call (at least 1 ns).
    pub fn costs(&self) -> HostCosts {
        let [a, b] = self.ns_per_call;
        let (ka, kb) = (f64::from(HOST_KIB[0]), f64::from(HOST_KIB[1]));
        let per_kib = ((b - a) / (kb - ka)).max(0.0);
        HostCosts {
            syscall_ns: (a - per_kib * ka).round().max(1.0) as u64,
            copy_ns_per_kib: per_kib.round() as u64,
        }
    }
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
    /// `queue/read_ahead_kb`, KiB (absent in calibrations recorded before it was read).
    #[serde(default)]
    pub read_ahead_kb: Option<u64>,
    /// The probes, in [`probe_plan`] order.
    pub probes: Vec<Probe>,
    /// The page-cache streams probe (absent in calibrations recorded before it existed).
    #[serde(default)]
    pub streams: Option<StreamProbe>,
    /// For a loop device in direct-I/O mode: the disk holding its backing file, with its scheduler, the tunables
    /// of it that `bfq` knows (as the disk had them), its request pool and its hardware tags. Absent for other
    /// devices and in calibrations recorded before it was read.
    #[serde(default)]
    pub backing: Option<bfq_sim::device::BackingConfig>,
    /// The pair probe (absent in calibrations recorded before it existed: completions are then taken as
    /// reported each as it ends).
    #[serde(default)]
    pub pair: Option<PairProbe>,
    /// The host probe (absent in calibrations recorded before it existed: the simulated host's defaults apply).
    #[serde(default)]
    pub host: Option<HostProbe>,
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
    if let Some(st) = &c.streams {
        let bad_streams = |why: &str| {
            CalibrationError(format!(
                "the page-cache streams probe {why} ({} requests, {:.1} MB/s, {:.0} KiB per request): the device or \
                 the machine misbehaved; run bfq calibrate again",
                st.device_ios, st.device_mb_s, st.request_kib
            ))
        };
        if st.device_ios == 0 || !(st.device_mb_s.is_finite() && st.device_mb_s > 0.0) {
            return Err(bad_streams("saw no reads at the device"));
        }
        if st.device_mb_s > 1.0e6 || !(st.request_kib.is_finite() && st.request_kib <= f64::from(c.max_sectors)) {
            return Err(bad_streams("gave absurd figures"));
        }
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
    // The read link: the best of the O_DIRECT sequential probes and the page-cache streams (whose requests are the
    // larger ones the suite's readers send; see [`StreamProbe`]).
    let max_read_mb_s = get(false, true, 1024, 8)
        .mb_s
        .max(seq1.mb_s)
        .max(c.streams.as_ref().map_or(0.0, |s| s.device_mb_s));
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
        read_ahead_kb: c
            .read_ahead_kb
            .map(|kb| kb.min(bfq_sim::device::measured::MAX_READ_AHEAD_KB)),
        backing: c.backing.clone(),
        completions: c.pair.as_ref().map_or(Completions::Each, PairProbe::completions),
        host: c.host.as_ref().map(HostProbe::costs),
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
    if let Some(st) = &c.streams {
        s.push_str(&format!(
            "#   page-cache streams: {} readers, {:.1} MB/s at the device, {:.0} KiB per request, {:.0} µs mean device \
             latency\n",
            st.streams, st.device_mb_s, st.request_kib, st.device_latency_us
        ));
    }
    if let Some(p) = &c.pair {
        s.push_str(&format!(
            "#   pair: {} KiB random and {} KiB sequential O_DIRECT readers at depth 1 side by side: median {:.1} and \
             {:.1} µs ({:?})\n",
            PAIR_KIB[0],
            PAIR_KIB[1],
            p.p50_us[0],
            p.p50_us[1],
            p.completions()
        ));
    }
    if let Some(h) = &c.host {
        let k = h.costs();
        s.push_str(&format!(
            "#   host: buffered read() from the page cache, {} KiB {:.0} ns, {} KiB {:.0} ns per call: {} ns + {} ns \
             per KiB\n",
            HOST_KIB[0], h.ns_per_call[0], HOST_KIB[1], h.ns_per_call[1], k.syscall_ns, k.copy_ns_per_kib
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

/// The disk under loop device `dev` when it runs in direct-I/O mode (`loop/dio` = 1): the device holding its
/// `loop/backing_file`, read from sysfs. `None` for other devices, a buffered loop device (its backing file's page
/// cache, not a disk queue, takes the requests), or a scheduler `bfq` does not have.
fn backing_of(dev: &BlockDev) -> Option<bfq_sim::device::BackingConfig> {
    use std::os::unix::fs::MetadataExt;
    let read = |p: PathBuf| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string());
    if read(dev.sys.join("loop/dio"))? != "1" {
        return None;
    }
    let file = read(dev.sys.join("loop/backing_file"))?;
    let st = std::fs::metadata(&file).ok()?.dev();
    let disk = BlockDev::from_numbers(libc::major(st), libc::minor(st)).ok()?;
    let q = disk.queue();
    let sched = read(q.join("scheduler"))?;
    let active = sched.split_once('[')?.1.split_once(']')?.0.to_string();
    let desc = bfq_sched::find(&active)?;
    let tunables = desc
        .tunables
        .iter()
        .filter_map(|t| Some(format!("{}={}", t.name, read(q.join("iosched").join(t.name))?)))
        .collect();
    let nr_tags: u32 = std::fs::read_dir(disk.sys.join("mq"))
        .ok()?
        .flatten()
        .filter_map(|e| read(e.path().join("nr_tags"))?.parse::<u32>().ok())
        .sum();
    Some(bfq_sim::device::BackingConfig {
        scheduler: active,
        tunables,
        nr_requests: read(q.join("nr_requests"))?.parse().ok()?,
        queue_depth: nr_tags.max(1),
    })
}

/// A block device's read counters from its sysfs `stat`: reads completed, sectors read, milliseconds spent reading.
fn read_counters(sys: &Path) -> Result<(u64, u64, u64), RealError> {
    let path = sys.join("stat");
    let text = std::fs::read_to_string(&path).map_err(io_err(format!("cannot read {}", path.display())))?;
    let f: Vec<u64> = text.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    match f.as_slice() {
        [reads, _, sectors, ticks, ..] => Ok((*reads, *sectors, *ticks)),
        _ => Err(RealError::Invalid(format!(
            "{} has fewer than 4 fields",
            path.display()
        ))),
    }
}

/// Drops the page-cache pages of `[offset, offset+len)` of `f` (clean pages: the probe only reads).
fn drop_pages(f: &std::fs::File, offset: u64, len: u64) {
    // SAFETY: posix_fadvise reads only its arguments; the descriptor is open for the call's duration.
    unsafe {
        libc::posix_fadvise(
            f.as_raw_fd(),
            offset as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        );
    }
}

/// Runs the page-cache streams probe ([`StreamProbe`]) on `path` over `region` bytes for `secs`, counting at the
/// device whose sysfs directory is `dev_sys`. Each reader has its own descriptor (its own readahead state) and its
/// own part of the file; at the end of its part it drops the part's pages and starts again, so that every read
/// comes from the device.
fn run_stream_probe(path: &Path, region: u64, dev_sys: &Path, secs: f64) -> Result<StreamProbe, RealError> {
    use std::os::unix::fs::FileExt;
    let part = region / u64::from(STREAMS) / (1 << 20) * (1 << 20);
    let bs = u64::from(STREAM_READ_KIB) * 1024;
    if part < bs {
        return Err(RealError::Invalid(format!(
            "the probe region ({} MiB) is too small for {STREAMS} streams",
            region >> 20
        )));
    }
    let files = (0..STREAMS)
        .map(|_| std::fs::File::open(path).map_err(io_err(format!("cannot open {}", path.display()))))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, f) in files.iter().enumerate() {
        drop_pages(f, i as u64 * part, part);
    }
    let (r0, s0, t0_ms) = read_counters(dev_sys)?;
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(secs);
    let results: Vec<std::io::Result<()>> = std::thread::scope(|scope| {
        let readers: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                scope.spawn(move || -> std::io::Result<()> {
                    let start = i as u64 * part;
                    let mut buf = vec![0u8; bs as usize];
                    let mut off = 0;
                    while Instant::now() < end {
                        if off + bs > part {
                            drop_pages(f, start, part);
                            off = 0;
                        }
                        let n = f.read_at(&mut buf, start + off)?;
                        if n == 0 {
                            return Err(std::io::Error::other("unexpected end of the probe file"));
                        }
                        off += n as u64;
                    }
                    Ok(())
                })
            })
            .collect();
        readers
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("a reader panicked")))
            })
            .collect()
    });
    let secs = t0.elapsed().as_secs_f64();
    for r in results {
        r.map_err(io_err(format!("page-cache streams probe on {}", path.display())))?;
    }
    let (r1, s1, t1_ms) = read_counters(dev_sys)?;
    let ios = r1.saturating_sub(r0);
    let sectors = s1.saturating_sub(s0);
    Ok(StreamProbe {
        streams: STREAMS,
        secs,
        device_ios: ios,
        device_mb_s: sectors as f64 * 512.0 / secs / 1e6,
        request_kib: if ios == 0 {
            0.0
        } else {
            sectors as f64 / 2.0 / ios as f64
        },
        device_latency_us: if ios == 0 {
            0.0
        } else {
            t1_ms.saturating_sub(t0_ms) as f64 * 1000.0 / ios as f64
        },
    })
}

/// Runs the pair probe ([`PairProbe`]) on `path` over `region` bytes for `secs`.
fn run_pair_probe(path: &Path, region: u64, secs: f64) -> Result<PairProbe, RealError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(io_err(format!("cannot open {} with O_DIRECT", path.display())))?;
    let fd = f.as_raw_fd();
    let bs = PAIR_KIB.map(|k| u64::from(k) * 1024);
    let slots = bs.map(|b| (region / b).max(1));
    let mut aio = Aio::new(2).map_err(io_err("cannot set up Linux AIO"))?;
    let mut bufs = bs.map(|b| AlignedBuf::new(b as usize));
    let mut started = [Instant::now(); 2];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut seq = 0u64;
    let mut offset = |i: usize| {
        if i == 0 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % slots[0] * bs[0]
        } else {
            seq += 1;
            seq % slots[1] * bs[1]
        }
    };
    let mut submit = |aio: &mut Aio, i: usize, bufs: &mut [AlignedBuf; 2], started: &mut [Instant; 2]| {
        started[i] = Instant::now();
        let ptr = bufs[i].as_mut_ptr();
        // SAFETY: buffer i stays allocated and unused until its completion (data = i) is reaped below, and the
        // file stays open until the function returns after every completion has been reaped.
        unsafe { aio.submit(fd, false, ptr, bs[i], offset(i), i as u64) }
    };
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(secs);
    for i in 0..2 {
        submit(&mut aio, i, &mut bufs, &mut started).map_err(io_err("io_submit"))?;
    }
    let mut lat_ns: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    let mut failed = None;
    while aio.in_flight() > 0 {
        let Some(d) = aio.wait(Instant::now() + Duration::from_secs(30)) else {
            return Err(RealError::Invalid(
                "the pair probe got no completion in 30 s: the device is hung or far too slow to calibrate".into(),
            ));
        };
        let now = Instant::now();
        let i = (d.data as usize).min(1);
        if d.res < 0 {
            failed = Some(std::io::Error::from_raw_os_error((-d.res) as i32));
        } else if now <= end {
            lat_ns[i].push((now - started[i]).as_nanos() as u64);
        }
        if now < end && failed.is_none() {
            submit(&mut aio, i, &mut bufs, &mut started).map_err(io_err("io_submit"))?;
        }
    }
    if let Some(e) = failed {
        return Err(RealError::Io {
            context: format!("pair probe on {}", path.display()),
            source: e,
        });
    }
    let median = |v: &mut Vec<u64>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0) as f64 / 1e3
    };
    let ios = [lat_ns[0].len() as u64, lat_ns[1].len() as u64];
    let [mut a, mut b] = lat_ns;
    Ok(PairProbe {
        ios,
        p50_us: [median(&mut a), median(&mut b)],
    })
}

/// Calls per batch of the host probe, and batches per size.
const HOST_CALLS: u32 = 2_000;
const HOST_BATCHES: u32 = 25;

/// Runs the host probe ([`HostProbe`]) on the first MiBs of `path` (read once first, so that they are cached).
fn run_host_probe(path: &Path, region: u64) -> Result<HostProbe, RealError> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).map_err(io_err(format!("cannot open {}", path.display())))?;
    let span = region.min(16 << 20);
    let mut buf = vec![0u8; HOST_KIB[1] as usize * 1024];
    let mut off = 0;
    while off < span {
        let n = f
            .read_at(&mut buf, off)
            .map_err(io_err(format!("host probe on {}", path.display())))?;
        if n == 0 {
            break;
        }
        off += n as u64;
    }
    let cached = off.max(1);
    let mut ns_per_call = [0.0; 2];
    for (k, kib) in HOST_KIB.iter().enumerate() {
        let len = u64::from(*kib) * 1024;
        let mut per_batch = Vec::with_capacity(HOST_BATCHES as usize);
        let mut pos = 0u64;
        for _ in 0..HOST_BATCHES {
            let t = Instant::now();
            for _ in 0..HOST_CALLS {
                if pos + len > cached {
                    pos = 0;
                }
                f.read_at(&mut buf[..len as usize], pos)
                    .map_err(io_err(format!("host probe on {}", path.display())))?;
                pos += len;
            }
            per_batch.push(t.elapsed().as_nanos() as f64 / f64::from(HOST_CALLS));
        }
        per_batch.sort_by(f64::total_cmp);
        ns_per_call[k] = per_batch[per_batch.len() / 2];
    }
    Ok(HostProbe { ns_per_call })
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
            plan.len() + 3,
            spec.name(),
            opts.probe_s
        ));
        probes.push(run_probe(&t.path, t.region, *spec, opts.probe_s)?);
    }
    progress(&format!(
        "probe {}/{}: page-cache streams, {STREAMS} readers ({:.1} s)",
        plan.len() + 1,
        plan.len() + 3,
        opts.probe_s
    ));
    let streams = Some(run_stream_probe(&t.path, t.region, &t.dev.sys, opts.probe_s)?);
    progress(&format!(
        "probe {}/{}: pair, {} KiB and {} KiB readers side by side ({:.1} s)",
        plan.len() + 2,
        plan.len() + 3,
        PAIR_KIB[0],
        PAIR_KIB[1],
        opts.probe_s
    ));
    let pair = Some(run_pair_probe(&t.path, t.region, opts.probe_s)?);
    progress(&format!(
        "probe {}/{}: host, buffered reads from the page cache",
        plan.len() + 3,
        plan.len() + 3
    ));
    let host = Some(run_host_probe(&t.path, t.region)?);
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
        read_ahead_kb: read("read_ahead_kb").parse().ok(),
        probes,
        streams,
        backing: backing_of(&t.dev),
        pair,
        host,
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
    fn the_queues_readahead_window_carries_into_the_model_and_sets_the_simulated_requests() {
        // Calibrations recorded before the window was read have none: the host default then applies.
        let mut c = fixture();
        assert_eq!(c.read_ahead_kb, None);
        assert_eq!(fit(&c, "loop").expect("fits").read_ahead_kb, None);
        // A loop device bound by `bfq loopdev create` on Linux 6.18 has read_ahead_kb = 2560 (docs/VALIDATION.md).
        c.read_ahead_kb = Some(2560);
        let cfg = fit(&c, "loop").expect("fits");
        assert_eq!(cfg.read_ahead_kb, Some(2560));
        let text = to_toml(&c, &cfg);
        assert!(text.contains("read_ahead_kb = 2560"), "{text}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("loop.toml");
        std::fs::write(&path, &text).expect("write");
        let device = path.to_string_lossy().into_owned();
        // Mean request size of one sequential reader, KiB. Its reads ramp a readahead window up to read_ahead_kb;
        // a window larger than the largest request (max_sectors, 1280 KiB here) goes out in max_sectors pieces. So
        // the requests grow with the window up to 1280 KiB: 2560 KiB windows give requests ten times (1280 / 128)
        // those of 128 KiB windows (measured: 630 and 64 KiB mean). Any ratio above 5 shows the device's window in
        // use; 1 would mean it is ignored.
        let mean_request_kib = |read_ahead_kb: Option<u64>| {
            let mut e = crate::experiment::Experiment::sim(
                &device,
                "noop",
                crate::experiment::Work::background("1r-seq", None),
            );
            e.settings.duration = Some(bfq_sched::SEC);
            e.settings.read_ahead_kb = read_ahead_kb;
            let r = e.run().expect("runs");
            let requests = r.extra["device_requests"];
            r.read_mbps * 1e6 * r.extra["window_s"] / 1024.0 / requests
        };
        let device_window = mean_request_kib(None);
        let default_window = mean_request_kib(Some(128));
        assert!(
            device_window > 5.0 * default_window && device_window <= 1280.0 + 1.0,
            "device's 2560 KiB window: {device_window:.0} KiB per request; 128 KiB window: {default_window:.0}"
        );
    }

    /// A calibration recorded in session 8 on a 3 GiB `bfq loopdev` device with the page-cache streams probe, the
    /// queue's read_ahead_kb and the backing disk (helpers paused while it ran; docs/VALIDATION.md).
    fn fixture_with_streams() -> Calibration {
        serde_json::from_str(include_str!("../../tests/data/calibration-loop-streams.json")).expect("fixture parses")
    }

    #[test]
    fn the_page_cache_streams_set_the_read_link_that_large_requests_meet() {
        let c = fixture_with_streams();
        let st = c.streams.clone().expect("recorded with the streams probe");
        assert_eq!(c.read_ahead_kb, Some(2560));
        // The loop device runs in direct-I/O mode over a file on `vda`, whose scheduler is mq-deadline: the model
        // puts an instance of it below the loop device.
        let backing = c.backing.clone().expect("recorded with the backing disk");
        assert_eq!(backing.scheduler, "mq-deadline");
        assert!(backing.tunables.contains(&"read_expire=500".to_string()), "{backing:?}");
        let cfg = fit(&c, "loop").expect("fits");
        assert_eq!(cfg.backing.as_ref(), Some(&backing));
        assert!(to_toml(&c, &cfg).contains("[backing]"));
        assert_eq!(DeviceConfig::Measured(cfg.clone()).build().member_schedulers(), 1);
        // The O_DIRECT probes are checked as before.
        for r in reproduce(&c, &cfg) {
            assert!(
                r.error().abs() <= REPRODUCE_TOLERANCE,
                "{}: {:+.3}",
                r.spec.name(),
                r.error()
            );
        }
        // Requests of the streams' size, two per reader in flight (a readahead window and the next one), get the
        // rate the device gave them: the read link is set by them.
        let probe = ProbeSpec {
            write: false,
            seq: true,
            kib: st.request_kib.round() as u32,
            depth: 2 * st.streams,
        };
        let dc = DeviceConfig::Measured(cfg);
        let (_, mb) = simulate_probe(&dc, probe, 4_000);
        assert!(
            (mb / st.device_mb_s - 1.0).abs() <= REPRODUCE_TOLERANCE,
            "streams: measured {:.0} MB/s, simulated {mb:.0}",
            st.device_mb_s
        );
        // Without the probe the link is the O_DIRECT one: on this loop device an O_DIRECT request holds at most 128
        // user pages (512 KiB), and those requests reach only about 1.3 GB/s, so the model would give the large
        // page-cache requests little more than half their measured rate.
        let mut old = c.clone();
        old.streams = None;
        let (_, mb_old) = simulate_probe(&DeviceConfig::Measured(fit(&old, "loop").expect("fits")), probe, 4_000);
        assert!(mb_old < 0.7 * st.device_mb_s, "without the probe: {mb_old:.0} MB/s");
        // A probe that saw nothing at the device is refused, naming it.
        let mut bad = c.clone();
        if let Some(s) = bad.streams.as_mut() {
            s.device_ios = 0;
        }
        let e = check(&bad).expect_err("refused").to_string();
        assert!(e.contains("page-cache streams probe saw no reads"), "{e}");
        let mut bad = c;
        if let Some(s) = bad.streams.as_mut() {
            s.request_kib = 1.0e9;
        }
        assert!(check(&bad).expect_err("refused").to_string().contains("absurd"));
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

    #[test]
    fn the_pair_probe_decides_when_completions_are_reported() {
        // Older calibrations have no pair probe: each completion as it ends, as before.
        let mut c = fixture();
        assert_eq!(c.pair, None);
        assert_eq!(fit(&c, "loop").expect("fits").completions, Completions::Each);
        // Equal medians (this machine: 748.4 and 748.6 µs, session 11): the host reports once it drains.
        c.pair = Some(PairProbe {
            ios: [2672, 2672],
            p50_us: [748.4, 748.6],
        });
        let cfg = fit(&c, "loop").expect("fits");
        assert_eq!(cfg.completions, Completions::WhenDrained);
        let text = to_toml(&c, &cfg);
        assert!(text.contains("completions = \"when-drained\""), "{text}");
        assert_eq!(
            DeviceConfig::from_toml_str(&text).expect("reads back"),
            DeviceConfig::Measured(cfg)
        );
        // A device that reports each request as it ends gives the small reader about half the large one's
        // latency (it waits for what is left of one large read); one that serves both in parallel, its own idle
        // time. Neither is taken for a draining host.
        for small in [60.0, 420.0, 0.85 * 748.6] {
            c.pair = Some(PairProbe {
                ios: [10_000, 1_300],
                p50_us: [small, 748.6],
            });
            assert_eq!(
                fit(&c, "loop").expect("fits").completions,
                Completions::Each,
                "{small} µs"
            );
        }
    }

    #[test]
    fn the_host_probe_gives_the_simulated_host_its_read_costs() {
        let mut c = fixture();
        assert_eq!(
            fit(&c, "loop").expect("fits").host,
            None,
            "older calibrations keep the host's defaults"
        );
        // 4 KiB in 653 ns and 128 KiB in 6397 ns per call (this machine, session 11): the slope is the copy cost
        // per KiB, (6397 - 653) / 124 = 46.3 ns, and the fixed cost what is left of the 4 KiB call, 653 - 4 x 46.3
        // = 467.7 ns.
        c.host = Some(HostProbe {
            ns_per_call: [653.0, 6397.0],
        });
        let cfg = fit(&c, "loop").expect("fits");
        assert_eq!(
            cfg.host,
            Some(HostCosts {
                syscall_ns: 468,
                copy_ns_per_kib: 46
            })
        );
        let text = to_toml(&c, &cfg);
        assert!(
            text.contains("[host]") && text.contains("copy_ns_per_kib = 46"),
            "{text}"
        );
        assert_eq!(
            DeviceConfig::from_toml_str(&text).expect("reads back"),
            DeviceConfig::Measured(cfg)
        );
        // A large call no dearer than a small one gives no copy cost, never a negative one; the fixed cost stays
        // at least 1 ns.
        c.host = Some(HostProbe {
            ns_per_call: [900.0, 800.0],
        });
        assert_eq!(
            fit(&c, "loop").expect("fits").host,
            Some(HostCosts {
                syscall_ns: 900,
                copy_ns_per_kib: 0
            })
        );
    }
}
