//! A rotating disk: zoned recording, a Ruemmler–Wilkes seek curve, platter angle from absolute time, head switches,
//! a segmented read cache with readahead while idle, a write-back cache destaged while idle, and NCQ reordering
//! (shortest positioning time first with an aging bound).
//!
//! # How it works
//! - **Geometry.** `zones` zones of equal cylinder count; sectors per track fall linearly from the outer zone (derived
//!   from `outer_mb_s`) to the inner zone (from `inner_mb_s`). The cylinders per zone follow from the capacity:
//!   `ceil(capacity / (heads * sum(spt)))`. LBAs fill a track, then the next head of the cylinder, then the next
//!   cylinder, outer zone first. Each track is skewed by the head-switch time so that a sequential transfer loses
//!   exactly one head switch per track: sustained rate = `spt * 512 / (revolution + head_switch)`.
//! - **Rotation.** The platter angle is `now mod revolution`; sector `s` of a track passes under the head at
//!   `(track * skew + s * revolution / spt) mod revolution`. Rotational latency is thus determined by time.
//! - **Seek.** [`SeekCurve`]: `a + b*sqrt(d)` below a boundary distance, `c + e*d` above, fitted to the track-to-track,
//!   average and full-stroke times (see [`SeekCurve::fit`]). A head change on the same cylinder costs a head switch;
//!   writes add a settle time.
//! - **Read cache.** `cache_segments` segments of `segment_kib`. A media read fills a segment (a free one, else the
//!   least recently used; a hit uses the segment that served it); if the drive then has
//!   nothing to do, the head keeps reading ahead into that segment (at the media rate, up to one segment beyond the
//!   last request) until another command moves it. A read wholly in a segment transfers at `interface_mb_s`; a read
//!   continuing the running readahead completes when the head reaches its end (or at interface speed if the data is
//!   already there). A write drops the segments it overlaps (they become free) and stops a readahead that would
//!   reach its sectors.
//! - **Write cache.** With `write_cache_kib > 0`, a write that fits in the free write cache completes after the
//!   command overhead plus its transfer at interface speed; the dirty data is written to the media (destaged, in
//!   pieces of at most 512 KiB, nearest first) only when no host command is queued and the drive has had no host
//!   command for [`DESTAGE_IDLE_NS`] (or the cache is half full). When the cache is full, writes are queued as media
//!   writes like reads (write-through). With `write_cache_kib = 0` every write is a media write.
//! - **Queueing.** Up to `queue_depth` commands are queued. The drive serves the queued command with the shortest
//!   positioning time (seek + rotational wait; cache hits count as zero), except that the oldest command, once older
//!   than `ncq_age_limit_ms`, is served first. It makes that choice at its [`DecisionPoint`]: when the current
//!   command starts its media transfer (among the commands queued then) or when it completes. Service is not
//!   preemptive. A command arriving at an idle drive pays `command_overhead_us`; queued commands' overhead overlaps
//!   the previous command.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use bfq_sched::{DeviceInfo, Direction, Time};
use serde::{Deserialize, Serialize};

use super::{clamp_request, f64_ns, ps_per_sector, xfer_ns, DevRequest, Device};

/// Nanoseconds per minute, to turn rpm into a revolution time.
const NS_PER_MINUTE: f64 = 60.0e9;
/// Largest piece of dirty data written to the media in one destage operation, in sectors (512 KiB, an estimate).
const DESTAGE_MAX_SECTORS: u64 = 1024;
/// The drive writes cached data to the media only after it has had no host command for this long (ns), unless the
/// write cache is at least half full: a drive that destaged in every microsecond gap between a process's dependent
/// reads would make each of them wait for a random write. 10 ms is an estimate (firmware idle timers are not
/// published); it is longer than a request's service and shorter than the 2 s `sync` period of S's workloads.
pub const DESTAGE_IDLE_NS: Time = 10_000_000;
/// How many dirty extents the destage picker examines (bounds the per-operation cost).
const DESTAGE_SCAN: usize = 64;
/// Integration steps when averaging the seek curve over random seeks.
const SEEK_MEAN_STEPS: u32 = 4096;

/// Parameters of a rotating disk. Times in the unit named by the suffix, rates in MB/s (10^6 bytes per second).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HddConfig {
    /// Name reported in [`DeviceInfo`].
    pub name: String,
    /// Capacity in 512-byte sectors.
    pub capacity_sectors: u64,
    /// Spindle speed, revolutions per minute.
    pub rpm: u32,
    /// Recording surfaces (heads).
    pub heads: u32,
    /// Number of recording zones (ZBR), at least 1.
    pub zones: u32,
    /// Sustained sequential transfer rate in the outermost zone, MB/s.
    pub outer_mb_s: f64,
    /// Sustained sequential transfer rate in the innermost zone, MB/s.
    pub inner_mb_s: f64,
    /// Seek time over one cylinder, ms.
    pub track_to_track_ms: f64,
    /// Average seek time over random (uniform start and end cylinder) seeks, ms.
    pub average_seek_ms: f64,
    /// Seek time over the full stroke, ms.
    pub full_stroke_ms: f64,
    /// Head switch time (also the track skew), ms.
    pub head_switch_ms: f64,
    /// Extra settle time before writing, ms.
    pub write_settle_ms: f64,
    /// Controller overhead for a command reaching an idle drive, µs.
    pub command_overhead_us: f64,
    /// Interface (link) rate for cache transfers, MB/s.
    pub interface_mb_s: f64,
    /// Number of read-cache segments.
    pub cache_segments: u32,
    /// Size of one read-cache segment (and the readahead window), KiB.
    pub segment_kib: u32,
    /// Write-back cache size, KiB; 0 disables write caching.
    pub write_cache_kib: u32,
    /// Hardware queue depth (NCQ tags; 1 = no command queueing).
    pub queue_depth: u32,
    /// A queued command older than this (at the decision point) is chosen next regardless of position, oldest
    /// first, ms. Default 2400: the HGST Ultrastar manuals' command aging limit, 0x30 units of 50 ms
    /// (`../shared/docs/fidelity.md` §4; docs/DEVICES.md).
    pub ncq_age_limit_ms: f64,
    /// When the drive fixes the next queued command (see [`DecisionPoint`]).
    pub decision_point: DecisionPoint,
    /// Scheduler tags (`nr_requests`).
    pub nr_requests: u32,
    /// Largest request, sectors (`max_sectors_kb * 2`).
    pub max_sectors: u32,
}

/// The moment a queueing drive fixes which queued command it serves next.
///
/// Drive patents (Quantum US5729718, HGST US6640258, Maxtor US6697913, HGST US6804751; `../shared/docs/fidelity.md`
/// §4) choose the next command while the current one is still being served. A command that reaches the drive after
/// that moment cannot be chosen next, only after next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecisionPoint {
    /// The next command is fixed when the current command starts its media transfer (after its seek and rotational
    /// wait; at once for a cache hit), among the commands queued at that moment. If none was queued then, the first
    /// command to arrive afterwards (with any arriving at the same instant) is the choice. The desktop drives of the
    /// seeds' era.
    TransferStart,
    /// The next command is chosen when the current one completes, among everything queued then.
    Completion,
}

impl HddConfig {
    /// One revolution, ns.
    pub fn revolution_ns(&self) -> Time {
        f64_ns(1.0 / self.rpm.max(1) as f64, NS_PER_MINUTE).max(1)
    }
}

/// Ruemmler–Wilkes seek curve in milliseconds: `a + b*sqrt(d)` for `d < boundary`, `c + e*d` from `boundary` on,
/// and 0 for `d = 0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeekCurve {
    /// Short-seek constant, ms.
    pub a_ms: f64,
    /// Short-seek coefficient of sqrt(distance), ms per sqrt(cylinder).
    pub b_ms: f64,
    /// Long-seek constant, ms.
    pub c_ms: f64,
    /// Long-seek slope, ms per cylinder.
    pub e_ms: f64,
    /// Boundary between the two regimes, cylinders.
    pub boundary: f64,
    /// Largest distance (cylinders - 1).
    pub max_distance: u32,
}

impl SeekCurve {
    /// Fits the curve to three datasheet figures over `cylinders` cylinders.
    ///
    /// Constraints: `t(1) = track_to_track`, `t(D) = full_stroke` (D = cylinders - 1), the two pieces meet at the
    /// boundary B with equal value and equal slope (`e = b / (2 sqrt B)`), and the mean over random seeks (start and
    /// end cylinder uniform, so distance density `2(D-d)/D^2`) equals `average`. For a given B the first three fix
    /// a, b, c, e in closed form; B is then found by bisection (on log B) on the mean, which grows with B from about
    /// `t1 + (tfull - t1)/3` (almost linear) to about `t1 + 8/15 (tfull - t1)` (square root over the whole stroke).
    /// An average outside that range gives the nearest achievable curve.
    pub fn fit(track_to_track_ms: f64, average_ms: f64, full_stroke_ms: f64, cylinders: u32) -> SeekCurve {
        let d_max = cylinders.saturating_sub(1).max(2);
        let d = d_max as f64;
        let t1 = track_to_track_ms.max(0.0);
        let tfull = full_stroke_ms.max(t1);
        let make = |boundary: f64| -> SeekCurve {
            let sb = boundary.sqrt();
            let denom = (sb - 1.0) + (d - boundary) / (2.0 * sb);
            let b = if denom > 0.0 { (tfull - t1) / denom } else { 0.0 };
            let a = t1 - b;
            let e = b / (2.0 * sb);
            let c = a + b * sb - e * boundary;
            SeekCurve {
                a_ms: a,
                b_ms: b,
                c_ms: c,
                e_ms: e,
                boundary,
                max_distance: d_max,
            }
        };
        let (mut lo, mut hi) = (1.0f64.ln(), d.ln());
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if make(mid.exp()).mean_random_ms() < average_ms {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        make((0.5 * (lo + hi)).exp())
    }

    /// Seek time over `distance` cylinders, ms.
    pub fn time_ms(&self, distance: u32) -> f64 {
        if distance == 0 {
            return 0.0;
        }
        let x = distance.min(self.max_distance) as f64;
        if x < self.boundary {
            self.a_ms + self.b_ms * x.sqrt()
        } else {
            self.c_ms + self.e_ms * x
        }
    }

    /// Seek time over `distance` cylinders, ns.
    #[inline]
    pub fn time_ns(&self, distance: u32) -> Time {
        f64_ns(self.time_ms(distance), 1.0e6)
    }

    /// Mean seek time over random seeks (uniform start and end cylinders), ms, by midpoint integration.
    pub fn mean_random_ms(&self) -> f64 {
        let d = self.max_distance as f64;
        let h = d / SEEK_MEAN_STEPS as f64;
        let mut sum = 0.0;
        for i in 0..SEEK_MEAN_STEPS {
            let x = (i as f64 + 0.5) * h;
            let t = if x < self.boundary {
                self.a_ms + self.b_ms * x.sqrt()
            } else {
                self.c_ms + self.e_ms * x
            };
            sum += t * 2.0 * (d - x) / (d * d) * h;
        }
        sum
    }
}

/// One recording zone.
#[derive(Debug, Clone, Copy)]
struct Zone {
    first_lba: u64,
    first_cyl: u32,
    first_track: u64,
    spt: u32,
}

/// Where a sector lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Pos {
    cyl: u32,
    head: u32,
    /// Time within a revolution at which the sector passes under the head, ns.
    angle: Time,
    /// Sectors per track in its zone.
    spt: u32,
    /// Sector index within its track.
    in_track: u32,
}

/// A queued media command.
#[derive(Debug, Clone, Copy)]
struct Op {
    tag: u64,
    seq: u64,
    dir: Direction,
    sector: u64,
    sectors: u64,
    arrival: Time,
    pos: Pos,
}

/// A range of dirty sectors in the write cache.
#[derive(Debug, Clone, Copy)]
struct Extent {
    sector: u64,
    sectors: u64,
}

/// A read-cache segment: valid sectors `[start, end)` (while a readahead runs into it, more beyond `end`).
#[derive(Debug, Clone, Copy, Default)]
struct Segment {
    start: u64,
    end: u64,
    lru: u64,
}

/// The head reading ahead into segment `seg`: sector `from` passed under it at `t0`; it stops at `limit`.
#[derive(Debug, Clone, Copy)]
struct Stream {
    seg: usize,
    from: u64,
    t0: Time,
    limit: u64,
    /// Sectors per track where the stream started (the rate).
    spt: u32,
}

/// What the head is doing.
#[derive(Debug, Clone, Copy)]
struct InService {
    /// `Some((seq, tag))` for a host command, `None` for a destage.
    host: Option<(u64, u64)>,
    end: Time,
    destaged: u64,
    /// The decision point of this operation (see [`DecisionPoint`]): the next command is chosen among those that
    /// arrived by then, ns.
    decide_at: Time,
}

/// How a command would be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Entirely in cache segment `seg`.
    Hit { seg: usize },
    /// Continues the running readahead.
    Stream,
    /// Needs the media from `from` on (the part before `from` is in segment `seg`, if any).
    Media { from: u64, seg: Option<usize> },
}

#[derive(Debug, Clone, Copy)]
struct Plan {
    end: Time,
    positioning: Time,
    kind: Kind,
}

/// A simulated rotating disk. Build with [`Hdd::new`].
#[derive(Debug, Clone)]
pub struct Hdd {
    info: DeviceInfo,
    rev: Time,
    heads: u32,
    zones: Vec<Zone>,
    cylinders: u32,
    seek: SeekCurve,
    /// Seek times for distances below this many cylinders, precomputed, ns.
    seek_table: Vec<Time>,
    head_switch: Time,
    write_settle: Time,
    overhead: Time,
    iface_ps: u64,
    seg_cap: u64,
    write_cache_cap: u64,
    age_limit: Time,
    decision: DecisionPoint,
    /// Platter angle at time 0, ns into a revolution (mirrors' spindles are not synchronized).
    phase: Time,

    // State.
    head_cyl: u32,
    head_head: u32,
    /// The last media transfer ended at this sector at this time (the head is exactly there then).
    last_media_end: (u64, Time),
    in_service: Option<InService>,
    queue: Vec<Op>,
    destage: Vec<Extent>,
    dirty: u64,
    /// Last host activity (a command arriving or completing), ns: destaging waits [`DESTAGE_IDLE_NS`] after it.
    host_active_at: Time,
    /// A destage is due at this time if the drive stays idle until then.
    destage_at: Option<Time>,
    segments: Vec<Segment>,
    stream: Option<Stream>,
    lru_clock: u64,
    done: super::DoneHeap,
    seq: u64,
    /// [`Device::next_completion`]'s answer, kept until a `submit`, or a `pop_completion` that advances the drive,
    /// clears it. The answer is a function of the state alone, which only those calls change;
    /// computing it can mean planning every queued command ([`Hdd::pick`] during a destage), and an array asks each
    /// member for it on every step.
    next_memo: super::NextMemo,
}

/// Sectors per track of each zone, outer to inner, so that a track passes in one revolution plus one head switch
/// at the zone's rate.
fn zone_spts(cfg: &HddConfig) -> Vec<u32> {
    let rev = cfg.revolution_ns();
    let head_switch = f64_ns(cfg.head_switch_ms, 1.0e6);
    let nz = cfg.zones.max(1);
    let spt_for =
        |mb_s: f64| -> f64 { (mb_s.max(0.001) * 1.0e6 * (rev + head_switch) as f64 / 1.0e9 / 512.0).max(1.0) };
    let (spt_outer, spt_inner) = (spt_for(cfg.outer_mb_s), spt_for(cfg.inner_mb_s));
    (0..nz)
        .map(|i| {
            let f = if nz == 1 { 0.0 } else { i as f64 / (nz - 1) as f64 };
            (spt_outer + (spt_inner - spt_outer) * f).round().max(1.0) as u32
        })
        .collect()
}

/// Cylinders per zone that the geometry needs to hold the capacity, before any clamping.
pub(crate) fn cylinders_per_zone_needed(cfg: &HddConfig) -> u64 {
    let heads = u64::from(cfg.heads.max(1));
    let per_cyl_all: u64 = zone_spts(cfg).iter().map(|&s| u64::from(s) * heads).sum();
    cfg.capacity_sectors.max(1).div_ceil(per_cyl_all.max(1))
}

/// Most cylinders per zone the model can address (cylinder numbers are `u32`).
pub(crate) fn max_cylinders_per_zone(cfg: &HddConfig) -> u64 {
    u64::from(u32::MAX) / u64::from(cfg.zones.max(1))
}

impl Hdd {
    /// Builds the disk. Out-of-range parameters are clamped (validation in [`super::DeviceConfig`] reports them).
    pub fn new(cfg: &HddConfig) -> Hdd {
        let rev = cfg.revolution_ns();
        let head_switch = f64_ns(cfg.head_switch_ms, 1.0e6);
        let heads = cfg.heads.max(1);
        let nz = cfg.zones.max(1);
        let capacity = cfg.capacity_sectors.max(1);
        let spts = zone_spts(cfg);
        // Validation refuses a geometry that needs more cylinders than the model addresses; the clamp only keeps
        // an unvalidated description from panicking.
        let cyls_per_zone = cylinders_per_zone_needed(cfg).clamp(1, max_cylinders_per_zone(cfg)) as u32;
        let mut zones = Vec::with_capacity(nz as usize);
        let (mut lba, mut cyl, mut track) = (0u64, 0u32, 0u64);
        for &spt in &spts {
            zones.push(Zone {
                first_lba: lba,
                first_cyl: cyl,
                first_track: track,
                spt,
            });
            lba += cyls_per_zone as u64 * heads as u64 * spt as u64;
            cyl += cyls_per_zone;
            track += cyls_per_zone as u64 * heads as u64;
        }
        let cylinders = cyl;
        let seek = SeekCurve::fit(
            cfg.track_to_track_ms,
            cfg.average_seek_ms,
            cfg.full_stroke_ms,
            cylinders,
        );
        let seek_table = (0..4096u32.min(cylinders.max(1))).map(|d| seek.time_ns(d)).collect();
        let queue_depth = cfg.queue_depth.max(1);
        Hdd {
            info: DeviceInfo {
                name: cfg.name.clone(),
                rotational: true,
                queue_depth,
                nr_requests: cfg.nr_requests.max(1),
                max_sectors: cfg.max_sectors.max(1),
                capacity_sectors: capacity,
            },
            rev,
            heads,
            zones,
            cylinders,
            seek,
            seek_table,
            head_switch,
            write_settle: f64_ns(cfg.write_settle_ms, 1.0e6),
            overhead: f64_ns(cfg.command_overhead_us, 1.0e3),
            iface_ps: ps_per_sector(cfg.interface_mb_s),
            seg_cap: (cfg.segment_kib as u64 * 2).max(1),
            write_cache_cap: cfg.write_cache_kib as u64 * 2,
            age_limit: f64_ns(cfg.ncq_age_limit_ms, 1.0e6).max(1),
            decision: cfg.decision_point,
            phase: 0,
            head_cyl: 0,
            head_head: 0,
            last_media_end: (u64::MAX, 0),
            in_service: None,
            queue: Vec::with_capacity(queue_depth as usize + 1),
            destage: Vec::with_capacity(DESTAGE_SCAN),
            dirty: 0,
            host_active_at: 0,
            destage_at: None,
            segments: vec![Segment::default(); cfg.cache_segments as usize],
            stream: None,
            lru_clock: 0,
            done: BinaryHeap::with_capacity(queue_depth as usize + 1),
            seq: 0,
            next_memo: super::NextMemo::default(),
        }
    }

    /// The same disk with its platter at `phase_ns` into a revolution at time 0 (instead of 0).
    pub fn with_phase(mut self, phase_ns: Time) -> Hdd {
        self.phase = phase_ns % self.rev;
        self.next_memo.clear();
        self
    }

    /// Number of cylinders derived from capacity and zones.
    pub fn cylinders(&self) -> u32 {
        self.cylinders
    }

    /// The fitted seek curve.
    pub fn seek_curve(&self) -> &SeekCurve {
        &self.seek
    }

    /// One revolution, ns.
    pub fn revolution_ns(&self) -> Time {
        self.rev
    }

    /// Sectors per track in the outermost and innermost zones.
    pub fn spt_range(&self) -> (u32, u32) {
        (self.zones[0].spt, self.zones[self.zones.len() - 1].spt)
    }

    /// Sustained media rate at `sector`, bytes per second (one head switch per track included).
    pub fn media_rate_bytes_per_s(&self, sector: u64) -> f64 {
        let spt = self.locate(sector).spt as f64;
        spt * 512.0 * 1.0e9 / (self.rev + self.head_switch) as f64
    }

    fn locate(&self, lba: u64) -> Pos {
        let zi = self.zones.partition_point(|z| z.first_lba <= lba).saturating_sub(1);
        let z = &self.zones[zi];
        let off = lba - z.first_lba;
        let spt = z.spt as u64;
        let track_in_zone = off / spt;
        let in_track = (off % spt) as u32;
        let cyl = (z.first_cyl as u64 + track_in_zone / self.heads as u64).min(self.cylinders.saturating_sub(1) as u64);
        let head = (track_in_zone % self.heads as u64) as u32;
        let track = z.first_track + track_in_zone;
        let skew = (track as u128 * self.head_switch as u128 % self.rev as u128) as Time;
        let angle = (skew + in_track as u64 * self.rev / spt) % self.rev;
        Pos {
            cyl: cyl as u32,
            head,
            angle,
            spt: z.spt,
            in_track,
        }
    }

    #[inline]
    fn seek_ns(&self, d: u32) -> Time {
        match self.seek_table.get(d as usize) {
            Some(&t) => t,
            None => self.seek.time_ns(d),
        }
    }

    /// Media transfer of `len` sectors starting at `pos`: one sector time each plus a head switch per track crossed.
    #[inline]
    fn transfer_ns(&self, pos: &Pos, len: u64) -> Time {
        let spt = pos.spt as u64;
        let crossings = (pos.in_track as u64 + len - 1) / spt;
        len * self.rev / spt + crossings * self.head_switch
    }

    /// Where the stream's head is at `t` (sector), capped at its limit.
    #[inline]
    fn stream_frontier(&self, s: &Stream, t: Time) -> u64 {
        let done = (t.saturating_sub(s.t0) as u128 * s.spt as u128 / (self.rev + self.head_switch) as u128) as u64;
        (s.from + done).min(s.limit)
    }

    /// When the stream's head reaches `sector`.
    #[inline]
    fn stream_time(&self, s: &Stream, sector: u64) -> Time {
        let n = sector.saturating_sub(s.from) as u128;
        s.t0 + (n * (self.rev + self.head_switch) as u128).div_ceil(s.spt as u128) as Time
    }

    /// Valid end of segment `i` at time `t`.
    #[inline]
    fn seg_end(&self, i: usize, t: Time) -> u64 {
        match &self.stream {
            Some(s) if s.seg == i => self.stream_frontier(s, t),
            _ => self.segments[i].end,
        }
    }

    /// Valid start of segment `i` at time `t`: a running readahead overwrites the segment as a ring, so only the
    /// last `seg_cap` sectors before its frontier stay cached.
    #[inline]
    fn seg_start(&self, i: usize, t: Time) -> u64 {
        match &self.stream {
            Some(s) if s.seg == i => self.segments[i]
                .start
                .max(self.stream_frontier(s, t).saturating_sub(self.seg_cap)),
            _ => self.segments[i].start,
        }
    }

    /// Head position (cylinder, head) at `t`.
    #[inline]
    fn head_at(&self, t: Time) -> (u32, u32) {
        match &self.stream {
            Some(s) => {
                let p = self.locate(self.stream_frontier(s, t).min(self.info.capacity_sectors - 1));
                (p.cyl, p.head)
            }
            None => (self.head_cyl, self.head_head),
        }
    }

    /// Seek plus rotational wait to reach `pos` when the command may start moving at `t`, ns.
    fn position_ns(&self, sector: u64, pos: &Pos, dir: Direction, t: Time) -> Time {
        if self.last_media_end == (sector, t) {
            return 0;
        }
        let (hc, hh) = self.head_at(t);
        let d = hc.abs_diff(pos.cyl);
        let mut seek = if d == 0 {
            if hh != pos.head {
                self.head_switch
            } else {
                0
            }
        } else {
            self.seek_ns(d)
        };
        if dir == Direction::Write {
            seek += self.write_settle;
        }
        let arrive = t + seek;
        let rot = (pos.angle + self.rev - (arrive + self.phase) % self.rev) % self.rev;
        seek + rot
    }

    /// How `op` would be served if started at `t` (`idle`: the drive was idle, so the command overhead is paid).
    fn plan(&self, op: &Op, t: Time, idle: bool) -> Plan {
        let ovh = if idle { self.overhead } else { 0 };
        let op_end = op.sector + op.sectors;
        let iface = xfer_ns(op.sectors, self.iface_ps);
        if op.dir == Direction::Read {
            if let Some(s) = &self.stream {
                let running = t < self.stream_time(s, s.limit);
                if running && op.sector >= self.seg_start(s.seg, t) && op.sector <= self.stream_frontier(s, t) {
                    let end = (t + ovh + iface).max(self.stream_time(s, op_end));
                    return Plan {
                        end,
                        positioning: 0,
                        kind: Kind::Stream,
                    };
                }
            }
            for i in 0..self.segments.len() {
                let vend = self.seg_end(i, t);
                if op.sector >= self.seg_start(i, t) && op.sector < vend {
                    if op_end <= vend {
                        return Plan {
                            end: t + ovh + iface,
                            positioning: 0,
                            kind: Kind::Hit { seg: i },
                        };
                    }
                    let from = vend;
                    let pos = self.locate(from);
                    let positioning = self.position_ns(from, &pos, op.dir, t + ovh);
                    let hit_ns = xfer_ns(from - op.sector, self.iface_ps);
                    let end = t + ovh + positioning.max(hit_ns) + self.transfer_ns(&pos, op_end - from);
                    return Plan {
                        end,
                        positioning: ovh + positioning,
                        kind: Kind::Media { from, seg: Some(i) },
                    };
                }
            }
        }
        let positioning = self.position_ns(op.sector, &op.pos, op.dir, t + ovh);
        let end = t + ovh + positioning + self.transfer_ns(&op.pos, op.sectors);
        Plan {
            end,
            positioning: ovh + positioning,
            kind: Kind::Media {
                from: op.sector,
                seg: None,
            },
        }
    }

    /// The queued command to serve at `t`, chosen among the commands that had arrived by the decision point
    /// `decided` (or, if none had, among those that arrived first after it; `queue` is in arrival order): the oldest
    /// if it had waited past the age limit at that moment (first come, first served among aged commands), else the
    /// one with the shortest positioning time from where the head is at `t` (cache hits: zero; ties: oldest).
    fn pick(&self, t: Time, idle: bool, decided: Time) -> Option<(usize, Plan)> {
        let first = self.queue.first()?;
        let cutoff = decided.max(first.arrival);
        if cutoff.saturating_sub(first.arrival) >= self.age_limit {
            return Some((0, self.plan(first, t, idle)));
        }
        let mut best: Option<(usize, Plan)> = None;
        for (i, op) in self.queue.iter().enumerate() {
            if op.arrival > cutoff {
                break;
            }
            let p = self.plan(op, t, idle);
            let better = match &best {
                None => true,
                Some((_, b)) => p.positioning < b.positioning,
            };
            if better {
                best = Some((i, p));
                if p.positioning == 0 {
                    break;
                }
            }
        }
        best
    }

    /// Stops the running readahead at `t`, leaving its data in the segment and the head where it stopped.
    fn freeze_stream(&mut self, t: Time) {
        if let Some(s) = self.stream.take() {
            let end = self.stream_frontier(&s, t);
            let seg = &mut self.segments[s.seg];
            seg.end = end;
            seg.start = seg.start.max(end.saturating_sub(self.seg_cap));
            let p = self.locate(end.min(self.info.capacity_sectors - 1));
            self.head_cyl = p.cyl;
            self.head_head = p.head;
            self.last_media_end = (end, t);
        }
    }

    /// Drops read-cache data overlapping `[sector, sector + len)`.
    fn invalidate(&mut self, sector: u64, len: u64, t: Time) {
        let end = sector + len;
        if let Some(s) = &self.stream {
            let seg = &self.segments[s.seg];
            if seg.start < s.limit.max(end) && sector < s.limit && end > seg.start {
                self.freeze_stream(t);
            }
        }
        for seg in &mut self.segments {
            if seg.start < end && sector < seg.end {
                // Emptied, the segment is free: the next media read fills it before evicting valid data.
                *seg = Segment::default();
            }
        }
    }

    fn lru_segment(&self) -> Option<usize> {
        (0..self.segments.len()).min_by_key(|&i| self.segments[i].lru)
    }

    /// Starts serving `op` at `t` as planned.
    fn start(&mut self, op: Op, plan: Plan, t: Time, host: Option<(u64, u64)>, destaged: u64) {
        let op_end = op.sector + op.sectors;
        self.lru_clock += 1;
        match plan.kind {
            Kind::Hit { seg } => {
                // Served from the cache, which makes that segment the most recently used; a running readahead
                // goes on.
                self.segments[seg].lru = self.lru_clock;
            }
            Kind::Stream => {
                if let Some(s) = &mut self.stream {
                    s.limit = s.limit.max(op_end + self.seg_cap);
                    self.segments[s.seg].lru = self.lru_clock;
                }
            }
            Kind::Media { from, seg } => {
                self.freeze_stream(t);
                let last = self.locate(op_end - 1);
                self.head_cyl = last.cyl;
                self.head_head = last.head;
                self.last_media_end = (op_end, plan.end);
                if op.dir == Direction::Write {
                    self.invalidate(op.sector, op.sectors, t);
                } else {
                    let idx = seg.or_else(|| self.lru_segment());
                    if let Some(i) = idx {
                        let s = &mut self.segments[i];
                        if seg.is_none() {
                            s.start = op.sector;
                        }
                        s.end = op_end;
                        s.start = s.start.max(op_end.saturating_sub(self.seg_cap));
                        s.lru = self.lru_clock;
                        // After the transfer the head goes on reading ahead until something else moves it.
                        let cap = self.info.capacity_sectors;
                        if op_end < cap {
                            self.stream = Some(Stream {
                                seg: i,
                                from: op_end,
                                t0: plan.end,
                                limit: (op_end + self.seg_cap).min(cap),
                                spt: self.locate(op_end).spt,
                            });
                        }
                    }
                    let _ = from;
                }
            }
        }
        let decide_at = match self.decision {
            // The media transfer starts after the overhead, seek and rotational wait (cache hits: at once).
            DecisionPoint::TransferStart => (t + plan.positioning).min(plan.end),
            DecisionPoint::Completion => plan.end,
        };
        self.in_service = Some(InService {
            host,
            end: plan.end,
            destaged,
            decide_at,
        });
    }

    /// Chooses and starts the next operation at `t` if the head is free; `decided` is the decision point of the
    /// operation that just ended (`t` itself when the drive was idle).
    fn start_next(&mut self, t: Time, idle: bool, decided: Time) {
        if self.in_service.is_some() {
            return;
        }
        if let Some((i, plan)) = self.pick(t, idle, decided) {
            let op = self.queue.remove(i);
            self.start(op, plan, t, Some((op.seq, op.tag)), 0);
            return;
        }
        if self.destage.is_empty() {
            self.destage_at = None;
            return;
        }
        let due = self.host_active_at.saturating_add(DESTAGE_IDLE_NS);
        if t < due && self.dirty * 2 < self.write_cache_cap {
            self.destage_at = Some(due);
            return;
        }
        self.destage_at = None;
        // Destage the dirty extent nearest to the head.
        let mut best = (0usize, Time::MAX);
        for (i, e) in self.destage.iter().take(DESTAGE_SCAN).enumerate() {
            let pos = self.locate(e.sector);
            let c = self.position_ns(e.sector, &pos, Direction::Write, t);
            if c < best.1 {
                best = (i, c);
            }
        }
        let e = &mut self.destage[best.0];
        let len = e.sectors.min(DESTAGE_MAX_SECTORS);
        let sector = e.sector;
        if len == e.sectors {
            self.destage.swap_remove(best.0);
        } else {
            e.sector += len;
            e.sectors -= len;
        }
        let op = Op {
            tag: 0,
            seq: 0,
            dir: Direction::Write,
            sector,
            sectors: len,
            arrival: t,
            pos: self.locate(sector),
        };
        let plan = self.plan(&op, t, false);
        self.start(op, plan, t, None, len);
    }

    /// Processes everything that happens up to `now`.
    fn advance(&mut self, now: Time) {
        loop {
            if let Some(is) = self.in_service {
                if is.end > now {
                    break;
                }
                self.in_service = None;
                if let Some((seq, tag)) = is.host {
                    self.done.push(Reverse((is.end, seq, tag)));
                    self.host_active_at = self.host_active_at.max(is.end);
                }
                self.dirty = self.dirty.saturating_sub(is.destaged);
                self.start_next(is.end, false, is.decide_at);
                continue;
            }
            match self.destage_at {
                Some(t) if t <= now => {
                    self.start_next(t, false, t);
                    if self.in_service.is_none() {
                        break;
                    }
                }
                _ => break,
            }
        }
    }
}

impl Device for Hdd {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, rq: DevRequest, now: Time) {
        self.next_memo.clear();
        self.advance(now);
        self.host_active_at = now;
        let (sector, len) = clamp_request(rq.sector, rq.sectors, self.info.capacity_sectors);
        self.seq += 1;
        let seq = self.seq;
        if rq.dir == Direction::Write && self.write_cache_cap > 0 && self.dirty + len <= self.write_cache_cap {
            // Accepted into the write cache: done once transferred.
            let idle = self.in_service.is_none();
            let ovh = if idle { self.overhead } else { 0 };
            self.done
                .push(Reverse((now + ovh + xfer_ns(len, self.iface_ps), seq, rq.tag)));
            self.invalidate(sector, len, now);
            self.dirty += len;
            match self.destage.last_mut() {
                Some(e) if e.sector + e.sectors == sector => e.sectors += len,
                _ => self.destage.push(Extent { sector, sectors: len }),
            }
            self.start_next(now, false, now);
            return;
        }
        let op = Op {
            tag: rq.tag,
            seq,
            dir: rq.dir,
            sector,
            sectors: len,
            arrival: now,
            pos: self.locate(sector),
        };
        self.queue.push(op);
        self.start_next(now, true, now);
    }

    fn next_completion(&self) -> Option<Time> {
        self.next_memo.get_or(|| self.compute_next_completion())
    }

    fn pop_completion(&mut self, now: Time) -> Option<u64> {
        // Before the drive's next event nothing is due and `advance` would do nothing: return at once, keeping the
        // memo (the state is unchanged).
        if self.wake_time().is_none_or(|t| t > now) {
            return None;
        }
        self.next_memo.clear();
        self.advance(now);
        super::pop_due(&mut self.done, now)
    }
}

impl Hdd {
    /// The earliest time at which `advance` or `pop_completion` would change anything: a finished command, the end
    /// of the operation in service, or a pending destage of an idle drive (what `advance` and `pop_due` test).
    fn wake_time(&self) -> Option<Time> {
        let done = self.done.peek().map(|Reverse((t, _, _))| *t);
        let own = match &self.in_service {
            Some(is) => Some(is.end),
            None => self.destage_at,
        };
        match (done, own) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The earliest time the drive must be advanced: a finished command, the end of the command in service, or a
    /// pending destage ([`Device::next_completion`] without its memo).
    fn compute_next_completion(&self) -> Option<Time> {
        let cached = self.done.peek().map(|Reverse((t, _, _))| *t);
        let head = match &self.in_service {
            Some(is) if is.host.is_some() => Some(is.end),
            // A destage is in progress: the first host command completes after it (nothing else can start first).
            Some(is) => self.pick(is.end, false, is.decide_at).map(|(_, p)| p.end),
            None => None,
        };
        // A pending destage is not a completion, but the drive must be advanced then to start it.
        let destage = if self.in_service.is_none() {
            self.destage_at
        } else {
            None
        };
        [cached, head, destage].into_iter().flatten().min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::config::preset;
    use crate::device::testutil::{closed_loop, complete_one as serve, write_all, Lcg};
    use crate::device::DeviceConfig;
    use bfq_sched::{MS, SEC};

    fn seagate() -> HddConfig {
        match preset("seagate-hdd") {
            Some(DeviceConfig::Hdd(c)) => c,
            _ => panic!("seagate-hdd preset missing"),
        }
    }

    #[test]
    fn seek_curve_meets_its_targets() {
        let cfg = seagate();
        let hdd = Hdd::new(&cfg);
        let s = hdd.seek_curve();
        // The fit's constraints, within integration and bisection error.
        assert!(
            (s.time_ms(1) - cfg.track_to_track_ms).abs() < 0.01,
            "t(1) = {}",
            s.time_ms(1)
        );
        assert!((s.time_ms(s.max_distance) - cfg.full_stroke_ms).abs() < 0.01);
        assert!(
            (s.mean_random_ms() - cfg.average_seek_ms).abs() < 0.02,
            "mean {}",
            s.mean_random_ms()
        );
        // Monotone and continuous at the boundary.
        let b = s.boundary as u32;
        assert!((s.time_ms(b) - s.time_ms(b + 1)).abs() < 0.01);
        let mut prev = 0.0;
        for d in (0..s.max_distance).step_by(997) {
            assert!(s.time_ms(d) >= prev);
            prev = s.time_ms(d);
        }
    }

    #[test]
    fn sequential_rate_outer_about_twice_inner() {
        let cfg = seagate();
        let probe = Hdd::new(&cfg);
        let cap = cfg.capacity_sectors;
        let rate = |start: u64| {
            let mut d = Hdd::new(&cfg);
            // 512 KiB reads back to back at depth 2: the rate must be the media rate of that zone.
            let r = closed_loop(&mut d, 2, 400, |i| (Direction::Read, start + i * 1024, 1024));
            r.mb_s
        };
        let outer = rate(0);
        let inner = rate(cap - 400 * 1024 - 1);
        // Expected: spt*512 bytes per (revolution + head switch), which the config sets to outer_mb_s/inner_mb_s.
        let exp_outer = probe.media_rate_bytes_per_s(0) / 1e6;
        let exp_inner = probe.media_rate_bytes_per_s(cap - 1) / 1e6;
        assert!((outer / exp_outer - 1.0).abs() < 0.03, "outer {outer} vs {exp_outer}");
        assert!((inner / exp_inner - 1.0).abs() < 0.05, "inner {inner} vs {exp_inner}");
        assert!((outer / cfg.outer_mb_s - 1.0).abs() < 0.03);
        let ratio = outer / inner;
        assert!(ratio > 1.7 && ratio < 2.3, "outer/inner = {ratio}");
    }

    #[test]
    fn rereading_a_long_stream_goes_back_to_the_media() {
        // A readahead stream keeps only the last segment's worth of sectors behind its frontier. After streaming
        // 64 MiB (far more than one 1 MiB segment), reading the start again must come from the platter at the
        // media rate, not from the cache at the interface rate.
        let cfg = seagate();
        let media = Hdd::new(&cfg).media_rate_bytes_per_s(0) / 1e6;
        let span = 64u64 << 11; // 64 MiB in sectors
        let mut d = Hdd::new(&cfg);
        let r = closed_loop(&mut d, 1, 2 * (span / 256), |i| {
            (Direction::Read, (i * 256) % span, 256)
        });
        assert!(
            r.mb_s < media * 1.02,
            "two passes ran at {} MB/s, above the media rate {media}",
            r.mb_s
        );
    }

    #[test]
    fn sequential_qd1_streams_through_readahead() {
        // Reads one at a time, each continuing the last: no rotational loss (only the first read seeks). Each takes the longer of (command
        // overhead + transfer at interface speed) and the media time of its sectors, since the readahead keeps the
        // head streaming between commands.
        let cfg = seagate();
        let probe = Hdd::new(&cfg);
        let media = probe.media_rate_bytes_per_s(0);
        for sectors in [8u32, 128] {
            let mut d = Hdd::new(&cfg);
            let r = closed_loop(&mut d, 1, 20_000, |i| (Direction::Read, i * sectors as u64, sectors));
            let bytes = sectors as f64 * 512.0;
            let per_rq_s = (cfg.command_overhead_us * 1e-6 + bytes / (cfg.interface_mb_s * 1e6)).max(bytes / media);
            let expected = bytes / per_rq_s / 1e6;
            assert!(
                (r.mb_s / expected - 1.0).abs() < 0.03,
                "{sectors} sectors: {} MB/s vs {expected}",
                r.mb_s
            );
        }
    }

    #[test]
    fn random_read_qd1_is_seek_plus_half_rotation() {
        let cfg = seagate();
        let mut d = Hdd::new(&cfg);
        let cap = cfg.capacity_sectors;
        let mut rng = Lcg::new(7);
        let r = closed_loop(&mut d, 1, 3000, |_| (Direction::Read, rng.below(cap / 8) * 8, 8));
        // Expected: average seek + half a revolution + command overhead + a 4 KiB media transfer (negligible).
        // Random LBAs are uniform over sectors, not cylinders, so the outer (denser) zones are chosen more often and
        // the mean seek is a little shorter than the datasheet's uniform-cylinder average: allow 10%.
        let expected_ms = cfg.average_seek_ms + 30.0 / cfg.rpm as f64 * 1e3 + cfg.command_overhead_us / 1e3;
        let mean_ms = r.mean_latency as f64 / 1e6;
        assert!(
            (mean_ms / expected_ms - 1.0).abs() < 0.10,
            "mean {mean_ms} ms vs {expected_ms} ms"
        );
    }

    #[test]
    fn ncq_raises_random_read_iops() {
        let cfg = seagate();
        let cap = cfg.capacity_sectors;
        let iops = |depth: u32| {
            let mut d = Hdd::new(&cfg);
            let mut rng = Lcg::new(11);
            closed_loop(&mut d, depth, 4000, |_| (Direction::Read, rng.below(cap / 8) * 8, 8)).iops
        };
        let (q1, q31) = (iops(1), iops(31));
        // With 31 choices the shortest positioning time is a fraction of the average seek + half rotation; drives
        // gain 1.5x-2.5x. Demand at least 1.5x.
        assert!(q31 > 1.5 * q1, "QD1 {q1} IOPS, QD31 {q31} IOPS");
    }

    #[test]
    fn ncq_gain_on_random_reads_holds_for_both_decision_points() {
        // Deciding at transfer start leaves one fewer candidate (the command resubmitted at the last completion
        // arrives after the decision point) out of 31: shortest positioning among 30 or 31 random commands is
        // about as short, so both keep NCQ's gain over depth 1, and within a few percent of each other.
        let cap = seagate().capacity_sectors;
        let iops = |depth: u32, decision: DecisionPoint| {
            let mut cfg = seagate();
            cfg.decision_point = decision;
            let mut d = Hdd::new(&cfg);
            let mut rng = Lcg::new(11);
            closed_loop(&mut d, depth, 4000, |_| (Direction::Read, rng.below(cap / 8) * 8, 8)).iops
        };
        for decision in [DecisionPoint::TransferStart, DecisionPoint::Completion] {
            let (q1, q31) = (iops(1, decision), iops(31, decision));
            assert!(q31 > 1.5 * q1, "{decision:?}: QD1 {q1} IOPS, QD31 {q31} IOPS");
        }
        let (ts, c) = (
            iops(31, DecisionPoint::TransferStart),
            iops(31, DecisionPoint::Completion),
        );
        assert!((ts / c - 1.0).abs() < 0.1, "transfer start {ts} IOPS, completion {c}");
    }

    #[test]
    fn a_command_arriving_after_the_decision_point_is_served_after_next() {
        // A far read A is served first (idle drive). B, far from A's end, is queued before A's transfer starts;
        // C, which continues A exactly (zero positioning), arrives during A's transfer. Deciding at transfer start,
        // the drive has fixed B before C arrived: B, then C. Deciding at completion, C wins on positioning.
        let order = |decision: DecisionPoint| {
            let mut cfg = seagate();
            cfg.decision_point = decision;
            cfg.cache_segments = 0; // no readahead: C is a media read either way
            let mut d = Hdd::new(&cfg);
            let rq = |tag, sector, sectors| DevRequest {
                tag,
                dir: Direction::Read,
                sector,
                sectors,
            };
            d.submit(rq(1, 500_000_000, 2048), 0);
            d.submit(rq(2, 1_500_000_000, 8), 10_000);
            // A's positioning takes milliseconds (a long seek from cylinder 0); its 1 MiB transfer about 7.5 ms
            // more: 2 ms before A completes is inside its transfer.
            let a_end = d.next_completion().unwrap();
            d.submit(rq(3, 500_002_048, 8), a_end - 2 * MS);
            let mut out = Vec::new();
            while let Some(t) = d.next_completion() {
                if let Some(tag) = d.pop_completion(t) {
                    out.push(tag);
                }
            }
            out
        };
        assert_eq!(order(DecisionPoint::TransferStart), vec![1, 2, 3]);
        assert_eq!(order(DecisionPoint::Completion), vec![1, 3, 2]);
    }

    #[test]
    fn aging_bounds_the_wait() {
        // A far request queued behind a busy sequential stream is served within the age limit (+ one service).
        let cfg = seagate();
        let mut d = Hdd::new(&cfg);
        let far = cfg.capacity_sectors - 100;
        let mut lat_far = 0;
        let r = crate::device::testutil::run(
            &mut d,
            vec![
                crate::device::testutil::Flow::new(30, 0, |i| (Direction::Read, i * 256, 256)),
                crate::device::testutil::Flow::new(1, 0, move |_| (Direction::Read, far, 8)),
            ],
            |stats| {
                lat_far = stats[1].max_latency;
                stats[1].completed >= 3
            },
            30 * SEC,
        );
        assert!(r[1].completed >= 3);
        assert!(
            lat_far <= (cfg.ncq_age_limit_ms as u64 + 40) * MS,
            "far read waited {lat_far} ns"
        );
    }

    #[test]
    fn read_cache_hit_after_idle_readahead() {
        let cfg = seagate();
        let mut d = Hdd::new(&cfg);
        d.submit(
            DevRequest {
                tag: 1,
                dir: Direction::Read,
                sector: 1_000_000,
                sectors: 8,
            },
            0,
        );
        let t1 = d.next_completion().unwrap();
        assert_eq!(d.pop_completion(t1), Some(1));
        // Idle for 20 ms: the readahead fills the segment (1 MiB takes ~7 ms at the outer rate).
        let t2 = t1 + 20 * MS;
        d.submit(
            DevRequest {
                tag: 2,
                dir: Direction::Read,
                sector: 1_000_008,
                sectors: 128,
            },
            t2,
        );
        let t3 = d.next_completion().unwrap();
        // A hit costs the overhead plus 64 KiB at interface speed.
        assert_eq!(t3 - t2, hit_ns(&cfg, 128));
        assert_eq!(d.pop_completion(t3), Some(2));
    }

    #[test]
    fn write_cache_absorbs_and_destages() {
        let cfg = seagate();
        let mut d = Hdd::new(&cfg);
        d.submit(
            DevRequest {
                tag: 1,
                dir: Direction::Write,
                sector: 5_000,
                sectors: 8,
            },
            0,
        );
        let t = d.next_completion().unwrap();
        // Cached: overhead + transfer at interface speed, far below a rotation.
        assert!(t < MS);
        assert_eq!(d.pop_completion(t), Some(1));
        // A read right after is served at once: the drive destages only after DESTAGE_IDLE_NS without host
        // commands (a random 4 KiB read at QD1 is a seek plus rotation, well under 30 ms).
        d.submit(
            DevRequest {
                tag: 2,
                dir: Direction::Read,
                sector: 900_000_000,
                sectors: 8,
            },
            t,
        );
        let t2 = d.next_completion().unwrap();
        assert!(t2 - t < 30 * MS, "the read waited for a destage: {} ns", t2 - t);
        assert_eq!(d.pop_completion(t2), Some(2));
        assert_eq!(d.dirty, 8, "nothing destaged while the host was busy");
        // Idle for DESTAGE_IDLE_NS after the read: the drive wakes up to destage, completing nothing for the host.
        let due = d.next_completion().unwrap();
        assert_eq!(due, t2 + DESTAGE_IDLE_NS);
        assert_eq!(d.pop_completion(due), None);
        assert_eq!(d.next_completion(), None);
        assert_eq!(d.pop_completion(due + 100 * MS), None);
        assert_eq!(d.dirty, 0);
    }

    #[test]
    fn write_through_when_cache_disabled() {
        let mut cfg = seagate();
        cfg.write_cache_kib = 0;
        let mut d = Hdd::new(&cfg);
        let mut rng = Lcg::new(3);
        let cap = cfg.capacity_sectors;
        let r = closed_loop(&mut d, 1, 500, |_| (Direction::Write, rng.below(cap / 8) * 8, 8));
        // Like random reads plus the write settle time.
        let expected_ms = cfg.average_seek_ms + 30.0 / cfg.rpm as f64 * 1e3 + cfg.write_settle_ms;
        let mean_ms = r.mean_latency as f64 / 1e6;
        assert!((mean_ms / expected_ms - 1.0).abs() < 0.15, "{mean_ms} vs {expected_ms}");
    }

    #[test]
    fn edge_configurations_do_not_panic() {
        // No read cache, one zone, one head, no write cache, tiny capacity, no NCQ; then the opposite extremes.
        let mut small = seagate();
        small.cache_segments = 0;
        small.zones = 1;
        small.heads = 1;
        small.write_cache_kib = 0;
        small.capacity_sectors = 2048;
        small.queue_depth = 1;
        small.head_switch_ms = 0.0;
        let mut big = seagate();
        big.zones = 1000;
        big.heads = 64;
        big.segment_kib = 1;
        big.write_cache_kib = 4;
        for cfg in [small, big] {
            let mut d = Hdd::new(&cfg);
            let mut rng = Lcg::new(1);
            let r = closed_loop(&mut d, 4, 2000, |i| {
                let dir = if i % 2 == 0 { Direction::Write } else { Direction::Read };
                (dir, rng.below(cfg.capacity_sectors + 50), rng.below(2000) as u32)
            });
            assert!(r.iops > 0.0);
        }
    }

    #[test]
    fn deterministic_and_handles_out_of_range() {
        let cfg = seagate();
        let run = || {
            let mut d = Hdd::new(&cfg);
            let mut rng = Lcg::new(5);
            let mut out = Vec::new();
            let r = closed_loop(&mut d, 8, 2000, |i| {
                let dir = if i % 3 == 0 { Direction::Write } else { Direction::Read };
                (dir, rng.below(cfg.capacity_sectors * 2), 1 + (rng.below(300) as u32))
            });
            out.push(r.elapsed);
            out.push(r.mean_latency);
            out
        };
        assert_eq!(run(), run());
    }

    /// At most how long a read of the 8 sectors that follow the head's track takes, ns: the command overhead, a
    /// track-to-track seek should they start on the next track, a revolution of rotational wait, and 1 ms for the
    /// transfer (27 µs at the outer zone's rate) and margin. A seek from anywhere far (16-18 ms across the disk)
    /// exceeds it.
    fn settled_read_bound(cfg: &HddConfig) -> Time {
        f64_ns(cfg.command_overhead_us, 1e3) + f64_ns(cfg.track_to_track_ms, 1e6) + cfg.revolution_ns() + MS
    }

    /// A read of `sectors` served from the read cache: the command overhead and the transfer at interface speed, ns.
    fn hit_ns(cfg: &HddConfig, sectors: u64) -> Time {
        f64_ns(cfg.command_overhead_us, 1e3) + xfer_ns(sectors, ps_per_sector(cfg.interface_mb_s))
    }

    /// A segment's worth of sectors.
    fn segment(cfg: &HddConfig) -> u64 {
        cfg.segment_kib as u64 * 2
    }

    #[test]
    fn a_write_drops_the_cached_data_it_overlaps_and_nothing_next_to_it() {
        // A read at S, 20 ms of idle readahead (one 1 MiB segment takes about 7 ms at the outer rate), then a far
        // read that moves the head away: the segment keeps the last segment's worth before where the readahead
        // stopped, [S + 8, S + 8 + segment). A cached write makes the sectors it overlaps stale, so the model drops
        // the segment and reading them goes back to the media (a seek of hundreds of millions of sectors: many
        // ms); a write that only touches the segment, ending at its first sector or starting at its end, leaves it
        // whole, and the read is a hit.
        let cfg = seagate();
        let s = 1_000_000u64;
        let (first, end) = (s + 8, s + 8 + segment(&cfg));
        for (what, w, dropped) in [
            ("ends at its first sector", first - 8, false),
            ("starts at its end", end, false),
            ("overlaps it", first + 1000, true),
        ] {
            let mut d = Hdd::new(&cfg);
            let t = serve(&mut d, Direction::Read, s, 8, 0);
            let t = serve(&mut d, Direction::Read, 500_000_000, 8, t + 20 * MS);
            let t = serve(&mut d, Direction::Write, w, 8, t + MS) + MS;
            let took = serve(&mut d, Direction::Read, first, 128, t) - t;
            if dropped {
                assert!(took > hit_ns(&cfg, 128) + MS, "a write that {what}: read in {took} ns");
            } else {
                assert_eq!(took, hit_ns(&cfg, 128), "a write that {what}");
            }
        }
    }

    #[test]
    fn a_write_ahead_of_the_readahead_stops_it_where_the_head_is() {
        // After a read at S the head reads ahead toward S + 8 + segment. A cached write to sectors in that stretch,
        // ahead of the head, ends the readahead where the head is, so the stale sectors are never taken into the
        // cache: 20 ms later (the readahead would have passed them) reading them needs the media, whose transfer
        // alone is slower than the interface, while the sectors read before the write are still a hit. A write
        // just past the stretch, or just before the segment, leaves the readahead running: the stretch is cached
        // (and, the segment being a ring, the first read's sectors have been overwritten by then).
        let cfg = seagate();
        let s = 1_000_000u64;
        let limit = s + 8 + segment(&cfg);
        let probe = s + 1000;
        for (what, w, stops) in [
            ("ahead of the head", probe, true),
            ("at the readahead's limit", limit, false),
            ("just before the segment", s - 8, false),
        ] {
            let mut d = Hdd::new(&cfg);
            let t = serve(&mut d, Direction::Read, s, 8, 0);
            let t = serve(&mut d, Direction::Write, w, 8, t) + 20 * MS;
            if stops {
                let kept = serve(&mut d, Direction::Read, s, 8, t) - t;
                assert_eq!(
                    kept,
                    hit_ns(&cfg, 8),
                    "a write {what}: the first read's sectors stay cached"
                );
            }
            let t = t + MS;
            let took = serve(&mut d, Direction::Read, probe, 8, t) - t;
            if stops {
                assert!(
                    took > hit_ns(&cfg, 8),
                    "a write {what}: the stale sectors came from the cache"
                );
            } else {
                assert_eq!(took, hit_ns(&cfg, 8), "a write {what} stopped the readahead");
            }
        }
    }

    #[test]
    fn an_interrupted_readahead_holds_what_passed_under_the_head() {
        // A read at S ends at t1; the head then reads ahead from S + 8 at the media rate (spt sectors per
        // revolution plus head switch). A far read 4 ms later stops it: the segment holds the sectors that passed
        // under the head by then, 4 ms at the media rate. 8 sectors 64 below that point are a hit; 8 sectors 64
        // above it must come from the media (a long seek back from the far read).
        let cfg = seagate();
        let s = 1_000_000u64;
        let per_s = Hdd::new(&cfg).media_rate_bytes_per_s(s) / 512.0;
        let mut d = Hdd::new(&cfg);
        let t1 = serve(&mut d, Direction::Read, s, 8, 0);
        let passed = s + 8 + (4.0e-3 * per_s) as u64;
        let t = serve(&mut d, Direction::Read, 500_000_000, 8, t1 + 4 * MS) + MS;
        let below = serve(&mut d, Direction::Read, passed - 72, 8, t) - t;
        assert_eq!(below, hit_ns(&cfg, 8), "sectors the head had passed are cached");
        let t = t + below + MS;
        let above = serve(&mut d, Direction::Read, passed + 64, 8, t) - t;
        assert!(
            above > hit_ns(&cfg, 8) + MS,
            "sectors the head had not reached came from the cache: {above} ns"
        );
    }

    #[test]
    fn a_read_partly_in_the_cache_sends_the_cached_part_while_the_head_reaches_the_rest() {
        // After a read at S and 30 ms of idle readahead, one segment's worth, [S + 8, S + 8 + segment), is cached.
        // A read of that segment plus 64 sectors beyond it transfers the cached part over the interface while the
        // head positions for the rest, then reads the rest from the media: done after the command overhead, the
        // longer of the two, and the media transfer. With a slow interface (50 MB/s: 1 MiB takes 21 ms, more than
        // a revolution's 8.3 ms of positioning) the cached part is the longer, so the time is exact.
        let mut cfg = seagate();
        cfg.interface_mb_s = 50.0;
        let s = 1_000_000u64;
        let seg = segment(&cfg);
        let mut d = Hdd::new(&cfg);
        let t = serve(&mut d, Direction::Read, s, 8, 0) + 30 * MS;
        let cached = xfer_ns(seg, ps_per_sector(cfg.interface_mb_s));
        assert!(cached > d.revolution_ns() + f64_ns(cfg.head_switch_ms, 1e6));
        let rest = d.transfer_ns(&d.locate(s + 8 + seg), 64);
        let took = serve(&mut d, Direction::Read, s + 8, (seg + 64) as u32, t) - t;
        assert_eq!(took, f64_ns(cfg.command_overhead_us, 1e3) + cached + rest);
    }

    #[test]
    fn a_cache_hit_makes_its_segment_the_last_to_be_evicted() {
        // Two segments, B (low sectors) then A (higher) read and cached. The next media read, C, replaces the least
        // recently used one, a cache hit counting as a use: after a hit in B it replaces A; after a hit in B and
        // then one in A it replaces B. The other stays a hit, the replaced one needs the media again (a seek of
        // hundreds of millions of sectors). (B's segment starts below A's sectors: a hit must refresh the segment
        // that holds its sectors, not the first one that starts below them.)
        let mut cfg = seagate();
        cfg.cache_segments = 2;
        let (b, a, c) = (1_000_000u64, 300_000_000u64, 600_000_000u64);
        for (hits, kept, replaced) in [(vec![b], b, a), (vec![b, a], a, b)] {
            let mut d = Hdd::new(&cfg);
            let t = serve(&mut d, Direction::Read, b, 8, 0);
            let mut t = serve(&mut d, Direction::Read, a, 8, t + 20 * MS) + 20 * MS;
            for &h in &hits {
                let hit = serve(&mut d, Direction::Read, h + 100, 8, t) - t;
                assert_eq!(hit, hit_ns(&cfg, 8));
                t += MS;
            }
            let t = serve(&mut d, Direction::Read, c, 8, t) + MS;
            let again = serve(&mut d, Direction::Read, kept + 200, 8, t) - t;
            assert_eq!(
                again,
                hit_ns(&cfg, 8),
                "hits {hits:?}: the segment used last was replaced"
            );
            let t = t + again + MS;
            let gone = serve(&mut d, Direction::Read, replaced + 200, 8, t) - t;
            assert!(
                gone > hit_ns(&cfg, 8) + MS,
                "hits {hits:?}: the least recently used segment was kept"
            );
        }
    }

    #[test]
    fn a_segment_a_write_empties_is_filled_before_valid_data_is_evicted() {
        // Two segments, A then B cached (A least recently used). A write into B's data empties B's segment; the
        // next media read, C, fills that free segment rather than evicting A, so A is still a hit.
        let mut cfg = seagate();
        cfg.cache_segments = 2;
        let (a, b, c) = (1_000_000u64, 300_000_000u64, 600_000_000u64);
        let mut d = Hdd::new(&cfg);
        let t = serve(&mut d, Direction::Read, a, 8, 0);
        let t = serve(&mut d, Direction::Read, b, 8, t + 20 * MS) + 20 * MS;
        let t = serve(&mut d, Direction::Write, b + 500, 8, t) + MS;
        let t = serve(&mut d, Direction::Read, c, 8, t) + MS;
        let a_again = serve(&mut d, Direction::Read, a + 200, 8, t) - t;
        assert_eq!(
            a_again,
            hit_ns(&cfg, 8),
            "valid data was evicted while a segment was free"
        );
    }

    #[test]
    fn a_half_full_write_cache_is_destaged_while_the_host_keeps_the_drive_busy() {
        // Destaging waits for DESTAGE_IDLE_NS without host commands, unless the write cache is at least half full.
        // Fill it with contiguous 512 KiB writes to one piece below half, or to exactly half, then keep the host
        // busy with back-to-back reads for 200 ms: below half nothing is destaged; at half the drive destages
        // between the reads until it is below half again.
        let cfg = seagate();
        let cap = cfg.write_cache_kib as u64 * 2;
        let piece = 1024u64;
        for pieces in [cap / 2 / piece - 1, cap / 2 / piece] {
            let mut d = Hdd::new(&cfg);
            let mut t = 0;
            for i in 0..pieces {
                t = serve(&mut d, Direction::Write, 50_000_000 + i * piece, piece as u32, t);
            }
            let mut rng = Lcg::new(9);
            while t < 200 * MS {
                t = serve(&mut d, Direction::Read, rng.below(cfg.capacity_sectors / 8) * 8, 8, t);
            }
            if pieces * piece * 2 < cap {
                assert_eq!(d.dirty, pieces * piece, "destaged below half while the host was busy");
            } else {
                assert!(d.dirty * 2 < cap, "still {} dirty sectors of {cap}", d.dirty);
            }
        }
    }

    #[test]
    fn writes_are_acknowledged_from_the_cache_until_it_is_exactly_full() {
        // 4 KiB writes submitted at once: as long as each fits in the free write cache it completes after the
        // command overhead and its transfer at interface speed. The one that would overfill it waits as a media
        // write behind the destage of 512 KiB that started when the cache reached half (at least that piece's
        // 0.4 revolution of transfer), so it completes milliseconds later.
        let cfg = seagate();
        let cap = cfg.write_cache_kib as u64 * 2;
        let n = cap / 8;
        let writes: Vec<(u64, u32)> = (0..=n).map(|i| (i * 8, 8)).collect();
        let at = write_all(&mut Hdd::new(&cfg), &writes);
        let acked = hit_ns(&cfg, 8);
        assert!(at[..n as usize].iter().all(|&t| t <= acked), "a write that fits waited");
        assert!(
            at[n as usize] > acked + MS,
            "the write past the cache's size completed at {} ns",
            at[n as usize]
        );
    }

    #[test]
    fn a_long_cached_write_is_destaged_piece_by_piece_where_it_was_written() {
        // Two contiguous 512 KiB writes cached at time 0 make one dirty extent of 1 MiB near the outer edge. After
        // DESTAGE_IDLE_NS without host commands the drive writes it out in pieces of at most 512 KiB, each
        // continuing the last, and then holds nothing dirty: well within a second. Its head is then at the
        // extent's end, so a read of the sectors after it needs at most a rotation (plus the overhead and a
        // track-to-track seek should it cross a track), not a seek from anywhere else (18 ms across the disk).
        let cfg = seagate();
        let s = 1_000_000u64;
        let mut d = Hdd::new(&cfg);
        write_all(&mut d, &[(s, 1024), (s + 1024, 1024)]);
        while d.pop_completion(SEC).is_some() {}
        assert_eq!(d.dirty, 0);
        assert!(
            d.destage.is_empty() && d.in_service.is_none(),
            "still destaging a second later"
        );
        let bound = settled_read_bound(&cfg);
        let took = serve(&mut d, Direction::Read, s + 2048, 8, SEC) - SEC;
        assert!(took < bound, "the read took {took} ns (bound {bound})");
    }

    #[test]
    fn after_a_write_the_head_rests_on_the_cylinder_of_its_last_sector() {
        // A write-through write ending at the last sector of the first cylinder (heads x sectors per track of the
        // outer zone): the head stays on that cylinder, where the next command's seek starts from, not on the
        // next one, where the write's end boundary lies.
        let mut cfg = seagate();
        cfg.write_cache_kib = 0;
        let mut d = Hdd::new(&cfg);
        let per_cylinder = u64::from(d.heads) * u64::from(d.spt_range().0);
        assert_eq!((d.locate(per_cylinder - 1).cyl, d.locate(per_cylinder).cyl), (0, 1));
        serve(&mut d, Direction::Write, per_cylinder - 8, 8, 0);
        assert_eq!(d.head_at(SEC), (0, d.heads - 1));
    }

    #[test]
    fn completions_at_the_same_time_are_reported_in_arrival_order() {
        // Two equal cached writes submitted together complete at the same instant (each pays the command overhead
        // and its transfer, the drive being idle): the drive reports the one that came first first, whatever its
        // tag.
        let cfg = seagate();
        let mut d = Hdd::new(&cfg);
        for (tag, sector) in [(7, 1_000_000), (3, 2_000_000)] {
            d.submit(
                DevRequest {
                    tag,
                    dir: Direction::Write,
                    sector,
                    sectors: 8,
                },
                0,
            );
        }
        let t = d.next_completion().expect("the acknowledgements");
        assert_eq!(t, hit_ns(&cfg, 8));
        assert_eq!((d.pop_completion(t), d.pop_completion(t)), (Some(7), Some(3)));
    }

    #[test]
    fn cached_writes_are_destaged_nearest_first_each_where_it_was_written() {
        // Two 4 KiB writes cached at time 0, one near the outer edge (N) and one near the inner edge (F), in
        // either order. After DESTAGE_IDLE_NS without host commands the drive writes them out nearest to the head
        // first (parked at cylinder 0: N, then F), each at its own sectors, so the head ends on F's track. A read of
        // the sectors after F then needs at most a rotation (plus the overhead and a track-to-track seek should it
        // cross a track); from N's cylinder it would need a seek of nearly the full stroke (18 ms, over twice a
        // revolution of 8.3 ms).
        let cfg = seagate();
        let (near, far) = (1_000_000u64, cfg.capacity_sectors - 1_000_000);
        let bound = settled_read_bound(&cfg);
        for order in [[far, near], [near, far]] {
            let mut d = Hdd::new(&cfg);
            write_all(&mut d, &[(order[0], 8), (order[1], 8)]);
            let t = SEC;
            while d.pop_completion(t).is_some() {}
            assert_eq!(d.dirty, 0, "{order:?}: not destaged");
            let took = serve(&mut d, Direction::Read, far + 8, 8, t) - t;
            assert!(took < bound, "{order:?}: the read took {took} ns (bound {bound})");
        }
    }
}

#[cfg(test)]
mod fit_report {
    /// Prints the fitted geometry and seek curve of the disk presets (run with `--ignored --nocapture`).
    #[test]
    #[ignore]
    fn print_fits() {
        for name in ["seagate-hdd", "hitachi-hdd", "toshiba-1.8-hdd"] {
            if let Some(crate::device::DeviceConfig::Hdd(c)) = crate::device::preset(name) {
                let d = super::Hdd::new(&c);
                let s = d.seek_curve();
                println!(
                    "{name}: {} cylinders, spt {:?}, rev {} ns; seek a={:.4} b={:.5} c={:.4} e={:.3e} boundary={:.0} \
                     t(1)={:.3} t(B)={:.3} t(D)={:.3} mean={:.3} ms",
                    d.cylinders(),
                    d.spt_range(),
                    d.revolution_ns(),
                    s.a_ms,
                    s.b_ms,
                    s.c_ms,
                    s.e_ms,
                    s.boundary,
                    s.time_ms(1),
                    s.time_ms(s.boundary as u32),
                    s.time_ms(s.max_distance),
                    s.mean_random_ms()
                );
            }
        }
    }
}
