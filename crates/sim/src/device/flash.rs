//! A microSD card or an eMMC without command queueing: one command at a time, in arrival order.
//!
//! # How it works
//! - Every command costs `command_overhead_us`, then its transfer at `read_mb_s` or `write_mb_s`.
//! - A read that does not start where the previous read ended pays `read_access_us` (page read and address
//!   translation for a new location); a sequential read streams.
//! - Writes are cheap only when they continue one of the `open_blocks` erase blocks (allocation units of
//!   `erase_block_kib`) being written sequentially. Any other write forces the card to merge an erase block
//!   (read-modify-write: copy the untouched pages of the block and erase), costing `merge_ms`; the block is then open
//!   for sequential writing (least recently used open block closed).
//! - The card accepts more commands than one (`queue_depth` in [`DeviceInfo`] is what the host driver keeps
//!   outstanding) but serves them strictly one after another, so queue depth gives no gain.
//!
//! Everything is computed at submission (arrival order is service order): O(open_blocks) per request, no
//! allocation.

use std::collections::VecDeque;

use bfq_sched::{DeviceInfo, Direction, Time};
use serde::{Deserialize, Serialize};

use super::config::{check_common, check_f, check_u, DeviceError};
use super::{clamp_request, f64_ns, ps_per_sector, xfer_ns, DevRequest, Device};

/// Most erase blocks a model keeps open for sequential writing.
const MAX_OPEN_BLOCKS: usize = 16;

/// Parameters of a microSD card or eMMC. Times in the unit named by the suffix, rates in MB/s (10^6 bytes/s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlashConfig {
    /// Name reported in [`DeviceInfo`].
    pub name: String,
    /// Capacity in 512-byte sectors.
    pub capacity_sectors: u64,
    /// Requests the host driver keeps outstanding (served one at a time anyway).
    pub queue_depth: u32,
    /// Scheduler tags (`nr_requests`).
    pub nr_requests: u32,
    /// Largest request, sectors.
    pub max_sectors: u32,
    /// Per-command overhead (command, response, host driver), µs.
    pub command_overhead_us: f64,
    /// Extra time of a read not continuing the previous read, µs.
    pub read_access_us: f64,
    /// Sequential read transfer rate, MB/s.
    pub read_mb_s: f64,
    /// Sequential write transfer rate, MB/s.
    pub write_mb_s: f64,
    /// Erase block (allocation unit), KiB.
    pub erase_block_kib: u32,
    /// Erase blocks that can be open for sequential writing at once (1 to 16).
    pub open_blocks: u32,
    /// Cost of a write that does not continue an open erase block (block merge), ms.
    pub merge_ms: f64,
}

impl FlashConfig {
    /// Transcend class 6 microSDHC (sources in docs/DEVICES.md).
    pub fn transcend_microsd() -> FlashConfig {
        FlashConfig {
            name: "transcend-microsd".into(),
            // 8 GB card (estimate).
            capacity_sectors: 15_659_008,
            // Linux mmc of the 3.13 era keeps the current request plus one prepared request.
            queue_depth: 2,
            nr_requests: 64,
            // 128 KiB (estimate of a typical SD host's limit).
            max_sectors: 256,
            command_overhead_us: 100.0,
            // 4 KiB random read = 100 + 850 + 4096 B / 18 MB/s = ~1.18 ms -> ~850 IOPS (Tom's Hardware microSDHC
            // review: 4 KiB random reads at most 3.4 MB/s; docs/DEVICES.md, microSD and eMMC).
            read_access_us: 850.0,
            // Tom's Hardware microSDHC review: sequential read 15-20 MB/s for good class 6 cards.
            read_mb_s: 18.0,
            // Class 6 guarantees 6 MB/s sequential writes; 8 MB/s is an estimate.
            write_mb_s: 8.0,
            erase_block_kib: 4096,
            open_blocks: 2,
            // Merging a 4 MiB allocation unit at ~16 MB/s internal copy rate: ~250 ms (estimate) -> 4 random
            // writes/s, "a few KB/s" as measured in Tom's Hardware microSDHC review (docs/DEVICES.md, microSD
            // and eMMC).
            merge_ms: 250.0,
        }
    }

    /// SanDisk SEM16G-class eMMC 4.5 (estimates; see docs/DEVICES.md).
    pub fn sandisk_emmc() -> FlashConfig {
        FlashConfig {
            name: "sandisk-emmc".into(),
            capacity_sectors: 30_535_680,
            queue_depth: 2,
            nr_requests: 64,
            max_sectors: 1024,
            command_overhead_us: 50.0,
            // 4 KiB random read = 50 + 250 + 34 = ~334 us -> ~3 K IOPS.
            read_access_us: 250.0,
            read_mb_s: 120.0,
            write_mb_s: 45.0,
            erase_block_kib: 4096,
            open_blocks: 4,
            // ~200 random writes/s (estimate).
            merge_ms: 5.0,
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
        check_f("", "command_overhead_us", self.command_overhead_us, 0.0, 1.0e7)?;
        check_f("", "read_access_us", self.read_access_us, 0.0, 1.0e7)?;
        check_f("", "read_mb_s", self.read_mb_s, 0.01, 1.0e5)?;
        check_f("", "write_mb_s", self.write_mb_s, 0.01, 1.0e5)?;
        check_u("", "erase_block_kib", self.erase_block_kib as u64, 4, 1 << 20)?;
        check_u("", "open_blocks", self.open_blocks as u64, 1, MAX_OPEN_BLOCKS as u64)?;
        check_f("", "merge_ms", self.merge_ms, 0.0, 1.0e5)
    }
}

/// An erase block open for sequential writing: the next sector expected.
#[derive(Debug, Clone, Copy, Default)]
struct OpenBlock {
    next: u64,
    lru: u64,
}

/// A simulated microSD card or eMMC. Build with [`Flash::new`].
#[derive(Debug, Clone)]
pub struct Flash {
    info: DeviceInfo,
    overhead: Time,
    read_access: Time,
    read_ps: u64,
    write_ps: u64,
    merge: Time,
    open: [OpenBlock; MAX_OPEN_BLOCKS],
    n_open: usize,
    clock: u64,
    last_read_end: u64,
    busy_until: Time,
    done: VecDeque<(Time, u64)>,
}

impl Flash {
    /// Builds the card. Out-of-range parameters are clamped.
    pub fn new(cfg: &FlashConfig) -> Flash {
        Flash {
            info: DeviceInfo {
                name: cfg.name.clone(),
                rotational: false,
                queue_depth: cfg.queue_depth.max(1),
                nr_requests: cfg.nr_requests.max(1),
                max_sectors: cfg.max_sectors.max(1),
                capacity_sectors: cfg.capacity_sectors.max(1),
            },
            overhead: f64_ns(cfg.command_overhead_us, 1e3),
            read_access: f64_ns(cfg.read_access_us, 1e3),
            read_ps: ps_per_sector(cfg.read_mb_s),
            write_ps: ps_per_sector(cfg.write_mb_s),
            merge: f64_ns(cfg.merge_ms, 1e6),
            open: [OpenBlock { next: u64::MAX, lru: 0 }; MAX_OPEN_BLOCKS],
            n_open: (cfg.open_blocks as usize).clamp(1, MAX_OPEN_BLOCKS),
            clock: 0,
            last_read_end: u64::MAX,
            busy_until: 0,
            done: VecDeque::with_capacity(cfg.queue_depth.max(1) as usize),
        }
    }

    /// Service time of a write of `len` sectors at `sector`; updates the open blocks.
    fn write_cost(&mut self, sector: u64, len: u64) -> Time {
        self.clock += 1;
        let xfer = xfer_ns(len, self.write_ps);
        let open = &mut self.open[..self.n_open];
        if let Some(b) = open.iter_mut().find(|b| b.next == sector) {
            b.next = sector + len;
            b.lru = self.clock;
            return self.overhead + xfer;
        }
        // Not a continuation: merge a block, then keep it open from here on.
        let victim = (0..open.len()).min_by_key(|&i| open[i].lru).unwrap_or(0);
        open[victim] = OpenBlock {
            next: sector + len,
            lru: self.clock,
        };
        self.overhead + self.merge + xfer
    }
}

impl Device for Flash {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, rq: DevRequest, now: Time) {
        let (sector, len) = clamp_request(rq.sector, rq.sectors, self.info.capacity_sectors);
        let cost = match rq.dir {
            Direction::Read => {
                let access = if sector == self.last_read_end {
                    0
                } else {
                    self.read_access
                };
                self.last_read_end = sector + len;
                self.overhead + access + xfer_ns(len, self.read_ps)
            }
            Direction::Write => self.write_cost(sector, len),
        };
        self.busy_until = self.busy_until.max(now) + cost;
        self.done.push_back((self.busy_until, rq.tag));
    }

    fn next_completion(&self) -> Option<Time> {
        self.done.front().map(|&(t, _)| t)
    }

    fn pop_completion(&mut self, now: Time) -> Option<u64> {
        match self.done.front() {
            Some(&(t, tag)) if t <= now => {
                self.done.pop_front();
                Some(tag)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::testutil::{closed_loop, Lcg};

    fn rnd(seed: u64, cap: u64, dir: Direction) -> impl FnMut(u64) -> (Direction, u64, u32) {
        let mut rng = Lcg::new(seed);
        move |_| (dir, rng.below(cap / 8) * 8, 8)
    }

    #[test]
    fn microsd_figures() {
        let c = FlashConfig::transcend_microsd();
        let cap = c.capacity_sectors;
        // Sequential 128 KiB reads: overhead + transfer per request.
        let mut d = Flash::new(&c);
        let seq = closed_loop(&mut d, 2, 2_000, |i| (Direction::Read, i * 256, 256));
        let exp = 131072.0 / (c.command_overhead_us + 131072.0 / c.read_mb_s);
        assert!(
            (seq.mb_s / exp - 1.0).abs() < 0.01 && seq.mb_s > 15.0 && seq.mb_s < 20.0,
            "{}",
            seq.mb_s
        );
        // Sequential writes.
        let mut d = Flash::new(&c);
        let w = closed_loop(&mut d, 2, 1_000, |i| (Direction::Write, i * 256, 256));
        assert!(w.mb_s > 6.0 && w.mb_s < 10.0, "seq write {}", w.mb_s);
        // 4 KiB random reads: overhead + access + transfer -> ~850 IOPS, and QD32 gives nothing more.
        let mut d = Flash::new(&c);
        let q1 = closed_loop(&mut d, 1, 3_000, rnd(1, cap, Direction::Read));
        let exp = 1e6 / (c.command_overhead_us + c.read_access_us + 4096.0 / c.read_mb_s);
        assert!(
            (q1.iops / exp - 1.0).abs() < 0.01 && q1.iops > 750.0 && q1.iops < 950.0,
            "{}",
            q1.iops
        );
        let mut d = Flash::new(&c);
        let q32 = closed_loop(&mut d, 32, 3_000, rnd(1, cap, Direction::Read));
        assert!(q32.iops <= q1.iops * 1.01, "QD32 {} vs QD1 {}", q32.iops, q1.iops);
        // 4 KiB random writes: each merges a block -> 1 / merge_ms, a few KB/s.
        let mut d = Flash::new(&c);
        let rw = closed_loop(&mut d, 1, 40, rnd(2, cap, Direction::Write));
        assert!(
            rw.iops < 1e3 / c.merge_ms * 1.01 && rw.mb_s < 0.1,
            "{} IOPS {} MB/s",
            rw.iops,
            rw.mb_s
        );
    }

    #[test]
    fn emmc_figures() {
        let c = FlashConfig::sandisk_emmc();
        let cap = c.capacity_sectors;
        let mut d = Flash::new(&c);
        let seq = closed_loop(&mut d, 2, 2_000, |i| (Direction::Read, i * 1024, 1024));
        assert!(seq.mb_s > 100.0 && seq.mb_s < 150.0, "{}", seq.mb_s);
        let mut d = Flash::new(&c);
        let w = closed_loop(&mut d, 2, 1_000, |i| (Direction::Write, i * 1024, 1024));
        assert!(w.mb_s > 40.0 && w.mb_s < 50.0, "{}", w.mb_s);
        let mut d = Flash::new(&c);
        let r = closed_loop(&mut d, 1, 5_000, rnd(3, cap, Direction::Read));
        assert!(r.iops > 2_000.0 && r.iops < 4_000.0, "{}", r.iops);
        let mut d = Flash::new(&c);
        let rw = closed_loop(&mut d, 1, 200, rnd(4, cap, Direction::Write));
        assert!(rw.iops < 1e3 / c.merge_ms * 1.01, "{}", rw.iops);
    }

    #[test]
    fn deterministic() {
        let c = FlashConfig::transcend_microsd();
        let go = || {
            let mut d = Flash::new(&c);
            let mut rng = Lcg::new(5);
            let r = closed_loop(&mut d, 4, 3_000, |i| {
                let dir = if i % 7 == 0 { Direction::Write } else { Direction::Read };
                (dir, rng.below(c.capacity_sectors * 2), rng.below(300) as u32)
            });
            (r.elapsed, r.mean_latency)
        };
        assert_eq!(go(), go());
    }
}
