//! A SATA SSD (Plextor M5 class) with parallel flash units, a link cap, a DRAM write buffer, and an internal queue
//! that prefetches sequential streams and serves requests continuing them first.
//!
//! # How it works
//! A command passes through four stages, each a resource with a "free at" time:
//! 1. **Controller** (one, serial): `controller_read_us` / `controller_write_us` per command. This bounds random
//!    IOPS at high queue depth (90 K reads/s at 11 µs).
//! 2. **Flash units** (`channels * dies_per_channel`): a read occupies the unit holding each of its pages
//!    (`page_kib`, striped round-robin over units) for `read_us`. Writes are acknowledged from the DRAM buffer and
//!    programmed in the background at `program_mb_s`; when `write_buffer_kib` of unprogrammed data is pending, the
//!    controller stops taking commands until there is room.
//! 3. **Link** (one, serial): the data crosses SATA at `link_mb_s` (the sequential cap).
//! 4. A fixed `base_latency_us` (host interface and firmware latency that overlaps with other commands).
//!
//! The controller takes the next command from its internal queue only when the link backlog is below
//! `controller_lookahead_us` (it has only so much buffer for data waiting for the link). Which command it takes is
//! the firmware's choice: the oldest command that **continues a detected sequential stream** (its start is where the
//! stream's last read ended), else the oldest command; a command that has waited `stream_max_wait_us` is taken
//! before any other. Up to `streams` streams are tracked (least recently used replaced); a stream is detected on its
//! second contiguous read, and from then on the controller **prefetches** the next `prefetch_kib` of the stream into
//! its buffer, keeping at least half of that ahead; a read whose data was prefetched skips the flash stage (or waits
//! only for the prefetch in flight). Prefetches occupy the flash units like reads, so they also delay random reads.
//!
//! This is why, with noop or deadline filling the device's queue with requests of sequential readers, a random
//! reader's request waits behind stream continuations up to `stream_max_wait_us` each time (the BFQ results page:
//! "the device prefetches requests, and, among internally-queued requests, privileges sequential ones").

use std::collections::VecDeque;

use bfq_sched::{DeviceInfo, Direction, Time};
use serde::{Deserialize, Serialize};

use super::config::{check_common, check_f, check_u, DeviceError};
use super::{clamp_request, f64_ns, ps_per_sector, xfer_ns, DevRequest, Device};

/// Parameters of a SATA SSD. Times in the unit named by the suffix, rates in MB/s (10^6 bytes per second).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdConfig {
    /// Name reported in [`DeviceInfo`].
    pub name: String,
    /// Capacity in 512-byte sectors.
    pub capacity_sectors: u64,
    /// NCQ tags.
    pub queue_depth: u32,
    /// Scheduler tags (`nr_requests`).
    pub nr_requests: u32,
    /// Largest request, sectors.
    pub max_sectors: u32,
    /// Flash channels.
    pub channels: u32,
    /// Dies per channel (each an independent unit).
    pub dies_per_channel: u32,
    /// Flash page (striping unit), KiB.
    pub page_kib: u32,
    /// Time a unit is busy reading one page (array read plus channel transfer), µs.
    pub read_us: f64,
    /// Controller time per read command, µs.
    pub controller_read_us: f64,
    /// Controller time per write command, µs.
    pub controller_write_us: f64,
    /// Fixed latency added to every command, not occupying any shared resource, µs.
    pub base_latency_us: f64,
    /// Link (SATA) payload rate, MB/s.
    pub link_mb_s: f64,
    /// Sustained program (write) rate of the flash array, MB/s.
    pub program_mb_s: f64,
    /// DRAM write buffer, KiB.
    pub write_buffer_kib: u32,
    /// The controller takes a new command only while the link backlog is below this, µs.
    pub controller_lookahead_us: f64,
    /// Sequential streams tracked (0 disables detection, prefetch and favouring).
    pub streams: u32,
    /// Data prefetched ahead of a detected stream, KiB.
    pub prefetch_kib: u32,
    /// A command waiting this long is served before stream continuations, µs.
    pub stream_max_wait_us: f64,
}

impl SsdConfig {
    /// The Plextor M5 Pro 256 GB preset (sources in docs/DEVICES.md).
    pub fn plextor_m5() -> SsdConfig {
        SsdConfig {
            name: "plextor-ssd".into(),
            capacity_sectors: 500_118_192,
            queue_depth: 32,
            nr_requests: 64,
            max_sectors: 1024,
            // Plextor M-series reviews: Marvell 88SS9174-class controller, 8 channels; 4 dies per channel is an
            // estimate.
            channels: 8,
            dies_per_channel: 4,
            page_kib: 8,
            // Estimates chosen so that QD1 4 KiB read = 11 + 70 + 8 + 10 = ~100 us (client SATA SSDs of
            // 2013-2015: under ~10 K IOPS at QD1; docs/DEVICES.md, SATA SSD).
            read_us: 70.0,
            // 1 / 11 us = 90.9 K IOPS (Tom's Hardware M5 Pro review: 90 883 measured 4 KiB QD32 reads).
            controller_read_us: 11.0,
            // 1 / 11.9 us = 84 K IOPS (Tom's Hardware M5 Pro review: 84 081 measured 4 KiB QD32 writes).
            controller_write_us: 11.9,
            base_latency_us: 10.0,
            // 515 MB/s sequential peak of the Plextor SSD S's bandwidth-latency defaults were tuned for.
            link_mb_s: 515.0,
            // Rated sequential write of the M5 Pro 256 GB (estimate from the 450 MB/s class rating).
            program_mb_s: 450.0,
            write_buffer_kib: 16_384,
            controller_lookahead_us: 150.0,
            streams: 16,
            prefetch_kib: 512,
            stream_max_wait_us: 25_000.0,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), DeviceError> {
        check_common(
            "",
            self.capacity_sectors,
            self.queue_depth,
            self.nr_requests,
            self.max_sectors,
        )?;
        check_u("", "channels", self.channels as u64, 1, 1024)?;
        check_u("", "dies_per_channel", self.dies_per_channel as u64, 1, 1024)?;
        check_u("", "page_kib", self.page_kib as u64, 1, 1024)?;
        check_f("", "read_us", self.read_us, 0.0, 1.0e6)?;
        check_f("", "controller_read_us", self.controller_read_us, 0.0, 1.0e6)?;
        check_f("", "controller_write_us", self.controller_write_us, 0.0, 1.0e6)?;
        check_f("", "base_latency_us", self.base_latency_us, 0.0, 1.0e6)?;
        check_f("", "link_mb_s", self.link_mb_s, 0.1, 1.0e6)?;
        check_f("", "program_mb_s", self.program_mb_s, 0.1, 1.0e6)?;
        check_u("", "write_buffer_kib", self.write_buffer_kib as u64, 4, 1 << 24)?;
        check_f("", "controller_lookahead_us", self.controller_lookahead_us, 0.0, 1.0e7)?;
        check_u("", "streams", self.streams as u64, 0, 1024)?;
        check_u("", "prefetch_kib", self.prefetch_kib as u64, 0, 1 << 20)?;
        check_f("", "stream_max_wait_us", self.stream_max_wait_us, 0.0, 1.0e9)
    }
}

/// Flash units, controller, link and write buffer as "free at" times. Shared by the SATA and NVMe models.
#[derive(Debug, Clone)]
pub(crate) struct Pipeline {
    units: Vec<Time>,
    page_sectors: u64,
    read_ns: Time,
    ctrl_read: Time,
    ctrl_write: Time,
    base: Time,
    link_ps: u64,
    prog_ps: u64,
    buffer_ns: Time,
    pub(crate) ctrl_free: Time,
    pub(crate) link_free: Time,
    /// When all accepted write data will have been programmed.
    prog_done: Time,
}

/// The parameters a [`Pipeline`] is built from (times in ns, rates in MB/s).
pub(crate) struct PipelineParams {
    pub units: u32,
    pub page_kib: u32,
    pub read_ns: Time,
    pub ctrl_read: Time,
    pub ctrl_write: Time,
    pub base: Time,
    pub link_mb_s: f64,
    pub program_mb_s: f64,
    pub write_buffer_kib: u32,
}

impl Pipeline {
    pub(crate) fn new(p: PipelineParams) -> Pipeline {
        let prog_ps = ps_per_sector(p.program_mb_s);
        Pipeline {
            units: vec![0; p.units.max(1) as usize],
            page_sectors: (p.page_kib as u64 * 2).max(1),
            read_ns: p.read_ns,
            ctrl_read: p.ctrl_read,
            ctrl_write: p.ctrl_write,
            base: p.base,
            link_ps: ps_per_sector(p.link_mb_s),
            prog_ps,
            buffer_ns: xfer_ns(p.write_buffer_kib as u64 * 2, prog_ps),
            ctrl_free: 0,
            link_free: 0,
            prog_done: 0,
        }
    }

    /// Pages `[first, last)` covering sectors `[sector, end)`.
    #[inline]
    pub(crate) fn pages(&self, sector: u64, end: u64) -> (u64, u64) {
        (sector / self.page_sectors, end.div_ceil(self.page_sectors))
    }

    #[inline]
    fn unit(&self, page: u64) -> usize {
        (page % self.units.len() as u64) as usize
    }

    /// When reading pages `[p0, p1)` would finish if started no earlier than `t` (pure).
    pub(crate) fn read_done(&self, p0: u64, p1: u64, t: Time) -> Time {
        let n = self.units.len() as u64;
        let mut done = t;
        // Page i of the request is the (i / n)-th on its unit within this request.
        for (i, page) in (p0..p1).enumerate() {
            let u = self.unit(page);
            let k = i as u64 / n + 1;
            done = done.max(self.units[u].max(t) + k * self.read_ns);
        }
        done
    }

    /// Reserves the units to read pages `[p0, p1)` from `t` on; returns when the last page is read.
    pub(crate) fn reserve_read(&mut self, p0: u64, p1: u64, t: Time) -> Time {
        let mut done = t;
        for page in p0..p1 {
            let u = self.unit(page);
            let f = self.units[u].max(t) + self.read_ns;
            self.units[u] = f;
            done = done.max(f);
        }
        done
    }

    /// Completion of a read taken by the controller at `t` whose flash data is ready at `flash_ready(ctrl_end)`.
    /// Pure; [`Pipeline::commit_read`] applies it.
    #[inline]
    pub(crate) fn read_completion(&self, len: u64, flash_done: Time) -> Time {
        self.link_free.max(flash_done) + xfer_ns(len, self.link_ps) + self.base
    }

    /// The controller finishes a read command taken at `t`.
    #[inline]
    pub(crate) fn read_ctrl_end(&self, t: Time) -> Time {
        t + self.ctrl_read
    }

    /// Commits a read: controller busy until `t + ctrl_read`, link until the data has crossed.
    pub(crate) fn commit_read(&mut self, t: Time, len: u64, flash_done: Time) -> Time {
        self.ctrl_free = t + self.ctrl_read;
        self.link_free = self.link_free.max(flash_done) + xfer_ns(len, self.link_ps);
        self.link_free + self.base
    }

    /// Completion of a write taken at `t` (pure), and the controller's free time after it.
    pub(crate) fn write_plan(&self, t: Time, len: u64) -> (Time, Time) {
        let ctrl_end = t + self.ctrl_write;
        // Room in the buffer: the backlog of unprogrammed data must fit in the buffer.
        let room = self.prog_done.saturating_sub(self.buffer_ns).max(ctrl_end);
        let link_end = self.link_free.max(room) + xfer_ns(len, self.link_ps);
        (link_end + self.base, room)
    }

    /// Commits a write taken at `t`; returns its completion.
    pub(crate) fn commit_write(&mut self, t: Time, len: u64) -> Time {
        let (done, room) = self.write_plan(t, len);
        let link_start = self.link_free.max(room);
        self.ctrl_free = room;
        self.link_free = link_start + xfer_ns(len, self.link_ps);
        self.prog_done = self.prog_done.max(link_start) + xfer_ns(len, self.prog_ps);
        done
    }
}

/// A tracked sequential stream with up to two prefetched batches `[a0, a1)` ready at `ra` and `[a1, b1)` at `rb`.
#[derive(Debug, Clone, Copy, Default)]
struct StreamEntry {
    /// Where the stream's last read ended.
    next: u64,
    /// Seen at least two contiguous reads.
    detected: bool,
    a1: u64,
    ra: Time,
    b1: u64,
    rb: Time,
    lru: u64,
}

impl StreamEntry {
    /// End of the prefetched data.
    fn pf_end(&self) -> u64 {
        self.b1.max(self.a1)
    }
    /// When prefetched data up to `upto` is in the buffer.
    fn ready(&self, upto: u64) -> Time {
        if upto <= self.a1 {
            self.ra
        } else {
            self.ra.max(self.rb)
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    tag: u64,
    dir: Direction,
    sector: u64,
    sectors: u64,
    arrival: Time,
}

/// What taking a read would do (computed without changing state).
#[derive(Debug, Clone, Copy)]
struct ReadEval {
    stream: Option<usize>,
    /// First sector that must come from flash now (the part before it was prefetched).
    from_flash: u64,
    prefetch_ready: Time,
    completion: Time,
}

/// A simulated SATA SSD. Build with [`SataSsd::new`].
#[derive(Debug, Clone)]
pub struct SataSsd {
    info: DeviceInfo,
    pipe: Pipeline,
    lookahead: Time,
    max_wait: Time,
    prefetch_sectors: u64,
    streams: Vec<StreamEntry>,
    lru_clock: u64,
    queue: Vec<Queued>,
    done: VecDeque<(Time, u64)>,
    /// [`Device::next_completion`]'s answer, kept until a `submit`, or a `pop_completion` that advances the
    /// controller, clears it: a function of the state alone, which only those calls change, and with nothing completed yet
    /// computing it means choosing and evaluating the next command.
    next_memo: super::NextMemo,
}

impl SataSsd {
    /// Builds the SSD. Out-of-range parameters are clamped.
    pub fn new(cfg: &SsdConfig) -> SataSsd {
        let qd = cfg.queue_depth.max(1);
        SataSsd {
            info: DeviceInfo {
                name: cfg.name.clone(),
                rotational: false,
                queue_depth: qd,
                nr_requests: cfg.nr_requests.max(1),
                max_sectors: cfg.max_sectors.max(1),
                capacity_sectors: cfg.capacity_sectors.max(1),
            },
            pipe: Pipeline::new(PipelineParams {
                units: cfg.channels.max(1).saturating_mul(cfg.dies_per_channel.max(1)),
                page_kib: cfg.page_kib,
                read_ns: f64_ns(cfg.read_us, 1e3),
                ctrl_read: f64_ns(cfg.controller_read_us, 1e3),
                ctrl_write: f64_ns(cfg.controller_write_us, 1e3),
                base: f64_ns(cfg.base_latency_us, 1e3),
                link_mb_s: cfg.link_mb_s,
                program_mb_s: cfg.program_mb_s,
                write_buffer_kib: cfg.write_buffer_kib.max(4),
            }),
            lookahead: f64_ns(cfg.controller_lookahead_us, 1e3),
            max_wait: f64_ns(cfg.stream_max_wait_us, 1e3),
            prefetch_sectors: cfg.prefetch_kib as u64 * 2,
            streams: vec![StreamEntry::default(); cfg.streams as usize],
            lru_clock: 0,
            queue: Vec::with_capacity(qd as usize + 1),
            done: VecDeque::with_capacity(qd as usize + 1),
            next_memo: super::NextMemo::default(),
        }
    }

    /// Earliest time the controller may take a command (ignoring arrivals).
    #[inline]
    fn ctrl_ready(&self) -> Time {
        self.pipe
            .ctrl_free
            .max(self.pipe.link_free.saturating_sub(self.lookahead))
    }

    #[inline]
    fn continues_stream(&self, q: &Queued) -> bool {
        q.dir == Direction::Read && self.streams.iter().any(|s| s.detected && s.next == q.sector)
    }

    /// Index of the queued command the controller takes at `t` (all candidates arrived by `t`).
    fn pick(&self, t: Time) -> usize {
        let oldest = &self.queue[0];
        if t.saturating_sub(oldest.arrival) >= self.max_wait {
            return 0;
        }
        self.queue
            .iter()
            .take_while(|q| q.arrival <= t)
            .position(|q| self.continues_stream(q))
            .unwrap_or(0)
    }

    fn eval_read(&self, q: &Queued, t: Time) -> ReadEval {
        let end = q.sector + q.sectors;
        let ctrl_end = self.pipe.read_ctrl_end(t);
        let stream = self.streams.iter().position(|s| s.next == q.sector);
        let (mut from_flash, mut prefetch_ready) = (q.sector, ctrl_end);
        if let Some(i) = stream {
            let s = &self.streams[i];
            let pf_end = s.pf_end();
            if s.detected && pf_end > q.sector {
                let upto = end.min(pf_end);
                from_flash = upto;
                prefetch_ready = ctrl_end.max(s.ready(upto));
            }
        }
        let flash_done = if from_flash < end {
            let (p0, p1) = self.pipe.pages(from_flash, end);
            self.pipe.read_done(p0, p1, ctrl_end).max(prefetch_ready)
        } else {
            prefetch_ready
        };
        ReadEval {
            stream,
            from_flash,
            prefetch_ready,
            completion: self.pipe.read_completion(q.sectors, flash_done),
        }
    }

    /// Takes `q` at `t`: reserves resources, updates streams and prefetches; records the completion.
    fn take(&mut self, q: Queued, t: Time) {
        let done = match q.dir {
            Direction::Write => {
                // Data written invalidates prefetched copies of it (streams overlapping restart).
                let end = q.sector + q.sectors;
                for s in &mut self.streams {
                    if s.pf_end() > q.sector && s.next < end {
                        s.a1 = 0;
                        s.b1 = 0;
                    }
                }
                self.pipe.commit_write(t, q.sectors)
            }
            Direction::Read => self.take_read(q, t),
        };
        self.done.push_back((done, q.tag));
    }

    fn take_read(&mut self, q: Queued, t: Time) -> Time {
        let ev = self.eval_read(&q, t);
        let end = q.sector + q.sectors;
        let ctrl_end = self.pipe.read_ctrl_end(t);
        let flash_done = if ev.from_flash < end {
            let (p0, p1) = self.pipe.pages(ev.from_flash, end);
            self.pipe.reserve_read(p0, p1, ctrl_end).max(ev.prefetch_ready)
        } else {
            ev.prefetch_ready
        };
        let completion = self.pipe.commit_read(t, q.sectors, flash_done);
        debug_assert_eq!(completion, ev.completion);
        self.lru_clock += 1;
        let cap = self.info.capacity_sectors;
        match ev.stream {
            Some(i) => {
                let pf = self.prefetch_sectors;
                let s = &mut self.streams[i];
                s.detected = true;
                s.next = end;
                s.lru = self.lru_clock;
                // Keep at least half the prefetch window ahead: fetch the next batch when below.
                let pf_end = s.pf_end().max(end);
                if pf > 0 && pf_end < end + pf / 2 && pf_end < cap {
                    let target = (end + pf).min(cap);
                    let (p0, p1) = self.pipe.pages(pf_end, target);
                    let ready = self.pipe.reserve_read(p0, p1, ctrl_end);
                    let s = &mut self.streams[i];
                    if s.a1 <= end {
                        // First batch consumed: the second becomes the first.
                        s.a1 = s.b1.max(end);
                        s.ra = s.rb;
                    } else {
                        s.a1 = s.b1.max(s.a1);
                        s.ra = s.ra.max(s.rb);
                    }
                    s.b1 = target;
                    s.rb = ready;
                }
            }
            None => {
                if let Some(i) = (0..self.streams.len()).min_by_key(|&i| self.streams[i].lru) {
                    self.streams[i] = StreamEntry {
                        next: end,
                        lru: self.lru_clock,
                        ..StreamEntry::default()
                    };
                }
            }
        }
        completion
    }

    /// Lets the controller take every command it can take up to `now`.
    fn advance(&mut self, now: Time) {
        while let Some(first) = self.queue.first() {
            let t = self.ctrl_ready().max(first.arrival);
            if t > now {
                break;
            }
            let i = self.pick(t);
            let q = self.queue.remove(i);
            self.take(q, t);
        }
    }
}

impl Device for SataSsd {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, rq: DevRequest, now: Time) {
        self.next_memo.clear();
        self.advance(now);
        let (sector, sectors) = clamp_request(rq.sector, rq.sectors, self.info.capacity_sectors);
        self.queue.push(Queued {
            tag: rq.tag,
            dir: rq.dir,
            sector,
            sectors,
            arrival: now,
        });
        self.advance(now);
    }

    fn next_completion(&self) -> Option<Time> {
        self.next_memo.get_or(|| self.compute_next_completion())
    }

    fn pop_completion(&mut self, now: Time) -> Option<u64> {
        // Before the first completion and before the controller may take the first queued command, nothing is due
        // and `advance` would take nothing: return at once, keeping the memo (the state is unchanged).
        if self.wake_time().is_none_or(|t| t > now) {
            return None;
        }
        self.next_memo.clear();
        self.advance(now);
        match self.done.front() {
            Some(&(t, tag)) if t <= now => {
                self.done.pop_front();
                Some(tag)
            }
            _ => None,
        }
    }
}

impl SataSsd {
    /// The earliest time at which `advance` or `pop_completion` would change anything: the first completion, or
    /// the time the controller may take the first queued command (what `advance`'s loop tests).
    fn wake_time(&self) -> Option<Time> {
        let done = self.done.front().map(|&(t, _)| t);
        let take = self.queue.first().map(|q| self.ctrl_ready().max(q.arrival));
        match (done, take) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The earliest completion ([`Device::next_completion`] without its memo).
    fn compute_next_completion(&self) -> Option<Time> {
        // Completions leave the link in the order commands were taken, so the oldest taken completes first.
        if let Some(&(t, _)) = self.done.front() {
            return Some(t);
        }
        let first = self.queue.first()?;
        let t = self.ctrl_ready().max(first.arrival);
        let q = &self.queue[self.pick(t)];
        Some(match q.dir {
            Direction::Read => self.eval_read(q, t).completion,
            Direction::Write => self.pipe.write_plan(t, q.sectors).0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::testutil::{closed_loop, run, Flow, Lcg};
    use bfq_sched::{MS, SEC, US};

    fn plextor() -> SsdConfig {
        SsdConfig::plextor_m5()
    }

    fn random_4k(seed: u64, cap: u64, dir: Direction) -> impl FnMut(u64) -> (Direction, u64, u32) {
        let mut rng = Lcg::new(seed);
        move |_| (dir, rng.below(cap / 8) * 8, 8)
    }

    #[test]
    fn random_read_iops_qd1_and_qd32() {
        let c = plextor();
        let mut d = SataSsd::new(&c);
        let q1 = closed_loop(&mut d, 1, 20_000, random_4k(1, c.capacity_sectors, Direction::Read));
        // QD1: controller + page read + 4 KiB over the link + base latency, nothing overlaps.
        let lat = c.controller_read_us + c.read_us + 4096.0 / c.link_mb_s + c.base_latency_us;
        assert!(
            (q1.iops / (1e6 / lat) - 1.0).abs() < 0.02,
            "QD1 {} IOPS, expected {}",
            q1.iops,
            1e6 / lat
        );
        assert!(q1.iops > 9_000.0 && q1.iops < 11_000.0);
        let mut d = SataSsd::new(&c);
        let q32 = closed_loop(&mut d, 32, 100_000, random_4k(2, c.capacity_sectors, Direction::Read));
        // QD32: the controller is the bottleneck: 1 / controller_read_us.
        let bound = 1e6 / c.controller_read_us;
        assert!(
            q32.iops > 0.95 * bound && q32.iops <= bound * 1.001,
            "QD32 {} IOPS, bound {bound}",
            q32.iops
        );
        assert!(q32.iops > 85_000.0 && q32.iops < 95_000.0);
    }

    #[test]
    fn random_write_iops_qd32() {
        let c = plextor();
        let mut d = SataSsd::new(&c);
        let r = closed_loop(&mut d, 32, 100_000, random_4k(3, c.capacity_sectors, Direction::Write));
        // 4 KiB writes are absorbed by the buffer (344 MB/s < program rate): the controller bounds them.
        let bound = 1e6 / c.controller_write_us;
        assert!(
            r.iops > 0.95 * bound && r.iops <= bound * 1.001,
            "{} vs {bound}",
            r.iops
        );
    }

    #[test]
    fn sequential_read_is_link_bound() {
        let c = plextor();
        for depth in [4, 32] {
            let mut d = SataSsd::new(&c);
            let r = closed_loop(&mut d, depth, 5_000, |i| (Direction::Read, i * 256, 256));
            assert!((r.mb_s / c.link_mb_s - 1.0).abs() < 0.02, "QD{depth}: {} MB/s", r.mb_s);
        }
        // At QD1 the prefetch hides the flash read: only controller, link and base latency remain.
        let mut d = SataSsd::new(&c);
        let r = closed_loop(&mut d, 1, 5_000, |i| (Direction::Read, i * 256, 256));
        let per_rq_us = c.controller_read_us + 131072.0 / c.link_mb_s + c.base_latency_us;
        let expected = 131072.0 / per_rq_us;
        assert!(
            (r.mb_s / expected - 1.0).abs() < 0.03,
            "QD1 seq {} MB/s vs {expected}",
            r.mb_s
        );
    }

    #[test]
    fn sequential_write_is_program_bound() {
        let c = plextor();
        let mut d = SataSsd::new(&c);
        // Long enough to fill the buffer many times over: the program rate governs.
        let r = closed_loop(&mut d, 32, 40_000, |i| (Direction::Write, i * 256, 256));
        assert!((r.mb_s / c.program_mb_s - 1.0).abs() < 0.05, "{} MB/s", r.mb_s);
    }

    /// Mean latency of a QD1 random reader (think time 1 ms) alongside 10 sequential readers at depth 3 each.
    fn random_reader_latency(c: &SsdConfig, with_load: bool) -> Time {
        let mut d = SataSsd::new(c);
        let cap = c.capacity_sectors;
        let mut flows = vec![Flow::new(1, 1_000 * US, random_4k(9, cap, Direction::Read))];
        if with_load {
            for k in 0..10u64 {
                let base = 1_000_000 + k * 20_000_000;
                flows.push(Flow::new(3, 0, move |i| (Direction::Read, base + i * 256, 256)));
            }
        }
        let stats = run(&mut d, flows, |s| s[0].completed >= 200, 1000 * SEC);
        assert!(stats[0].completed >= 200);
        stats[0].mean_latency()
    }

    #[test]
    fn sequential_streams_are_favoured_over_a_random_reader() {
        let c = plextor();
        let idle = random_reader_latency(&c, false);
        let loaded = random_reader_latency(&c, true);
        let mut fifo = c.clone();
        fifo.stream_max_wait_us = 0.0;
        let loaded_fifo = random_reader_latency(&fifo, true);
        println!("random reader: idle {idle} ns, under 10 seq readers {loaded} ns (FIFO {loaded_fifo} ns)");
        // Alone: the QD1 latency, ~100 us.
        assert!(idle < 120 * US, "idle {idle}");
        // Under load with FIFO service the read waits for the link backlog (a few ms); with the firmware favouring
        // stream continuations it waits until it has aged past stream_max_wait_us.
        assert!(loaded_fifo < loaded, "fifo {loaded_fifo} vs favouring {loaded}");
        assert!(loaded as f64 >= 0.9 * c.stream_max_wait_us * 1e3, "loaded {loaded}");
        assert!(loaded > 50 * idle);
    }

    /// Submits one command at `t` and advances the drive until it completes; its latency, ns.
    fn latency(d: &mut SataSsd, dir: Direction, sector: u64, sectors: u32, t: Time) -> Time {
        crate::device::testutil::complete_one(d, dir, sector, sectors, t) - t
    }

    #[test]
    fn a_write_over_prefetched_data_sends_the_stream_back_to_flash() {
        // Ten 4 KiB reads in a row make a detected stream, and the drive keeps at least half its 512 KiB prefetch
        // window ahead of it.
        // The next read, 1 ms later, is served from that buffer: controller, link and base latency only, less than
        // one flash page read (read_us). A write that overlaps the prefetched data drops it (the buffer must not
        // serve stale data), so the next read needs the flash again and takes longer than a page read. A write
        // just past the prefetched data, or ending just where the stream continues, leaves the buffer alone.
        let c = plextor();
        let s0 = 1_000_000u64;
        let page_read = f64_ns(c.read_us, 1e3);
        for case in ["inside", "just past", "just before"] {
            let mut d = SataSsd::new(&c);
            let mut t = 0;
            for i in 0..10 {
                t += latency(&mut d, Direction::Read, s0 + i * 8, 8, t) + 10 * US;
            }
            let next = s0 + 80;
            let pf_end = d.streams.iter().find(|s| s.next == next).expect("the stream").pf_end();
            let window = c.prefetch_kib as u64 * 2; // sectors
            assert!(pf_end >= next + window / 2, "prefetched to {pf_end}");
            let w = match case {
                "inside" => next + 64,
                "just past" => pf_end,
                _ => next - 8,
            };
            t += latency(&mut d, Direction::Write, w, 8, t) + MS;
            let took = latency(&mut d, Direction::Read, next, 8, t);
            if case == "inside" {
                assert!(took > page_read, "{case}: {took} ns, from the prefetched copy");
            } else {
                assert!(took < page_read, "{case}: {took} ns, from flash");
            }
        }
    }

    #[test]
    fn deterministic_and_clamps() {
        let c = plextor();
        let go = || {
            let mut d = SataSsd::new(&c);
            let mut rng = Lcg::new(4);
            let r = closed_loop(&mut d, 32, 20_000, |i| {
                let dir = if i % 5 == 0 { Direction::Write } else { Direction::Read };
                (dir, rng.below(c.capacity_sectors * 2), rng.below(2048) as u32)
            });
            (r.elapsed, r.mean_latency)
        };
        assert_eq!(go(), go());
    }
}
