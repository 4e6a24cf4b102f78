//! An NVMe SSD: the [`SataSsd`](super::ssd::SataSsd) pipeline (controller, flash units, link, write buffer) with a
//! fast controller, many units and a PCIe link, served in arrival order (no stream favouring, no prefetch).
//!
//! # How it works
//! Each command is taken by the controller in submission order when it is free (`controller_read_us` /
//! `controller_write_us` each), reads its pages on the units holding them (`read_us` per page, pages striped over
//! `channels * dies_per_channel` units), crosses the link at `link_mb_s`, and completes `base_latency_us` later.
//! Writes are acknowledged once in the DRAM buffer and programmed at `program_mb_s`; a full buffer stalls the
//! controller. Because the order is fixed at submission, everything is computed in `submit` (O(pages), no
//! allocation); completions leave in submission order.

use std::collections::VecDeque;

use bfq_sched::{DeviceInfo, Direction, Time};
use serde::{Deserialize, Serialize};

use super::config::{check_common, check_f, check_u, DeviceError};
use super::ssd::{Pipeline, PipelineParams};
use super::{clamp_request, f64_ns, DevRequest, Device};

/// Parameters of an NVMe SSD. Times in the unit named by the suffix, rates in MB/s (10^6 bytes per second).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmeConfig {
    /// Name reported in [`DeviceInfo`].
    pub name: String,
    /// Capacity in 512-byte sectors.
    pub capacity_sectors: u64,
    /// Tags offered to the scheduler (the device itself accepts any number).
    pub queue_depth: u32,
    /// Scheduler tags (`nr_requests`).
    pub nr_requests: u32,
    /// Largest request, sectors.
    pub max_sectors: u32,
    /// Flash channels.
    pub channels: u32,
    /// Dies per channel.
    pub dies_per_channel: u32,
    /// Flash page (striping unit), KiB.
    pub page_kib: u32,
    /// Time a unit is busy reading one page, µs.
    pub read_us: f64,
    /// Controller time per read command, µs.
    pub controller_read_us: f64,
    /// Controller time per write command, µs.
    pub controller_write_us: f64,
    /// Fixed latency added to every command, µs.
    pub base_latency_us: f64,
    /// PCIe payload rate, MB/s.
    pub link_mb_s: f64,
    /// Sustained program rate, MB/s.
    pub program_mb_s: f64,
    /// DRAM/SLC write buffer, KiB.
    pub write_buffer_kib: u32,
}

impl NvmeConfig {
    /// A modern PCIe 3.0 x4 NVMe SSD (estimates; see docs/DEVICES.md).
    pub fn modern() -> NvmeConfig {
        NvmeConfig {
            name: "nvme".into(),
            capacity_sectors: 1_953_525_168,
            queue_depth: 256,
            nr_requests: 256,
            max_sectors: 1024,
            channels: 8,
            dies_per_channel: 16,
            page_kib: 16,
            // QD1 4 KiB read: 1.8 + 60 + 1.4 + 17 = ~80 us.
            read_us: 60.0,
            // 1 / 1.8 us = 555 K IOPS at high queue depth.
            controller_read_us: 1.8,
            controller_write_us: 2.0,
            base_latency_us: 17.0,
            // ~3 GB/s sequential read (PCIe 3.0 x4 payload).
            link_mb_s: 3000.0,
            program_mb_s: 2000.0,
            write_buffer_kib: 262_144,
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
        check_u("", "write_buffer_kib", self.write_buffer_kib as u64, 4, 1 << 26)
    }
}

/// A simulated NVMe SSD. Build with [`Nvme::new`].
#[derive(Debug, Clone)]
pub struct Nvme {
    info: DeviceInfo,
    pipe: Pipeline,
    done: VecDeque<(Time, u64)>,
}

impl Nvme {
    /// Builds the device. Out-of-range parameters are clamped.
    pub fn new(cfg: &NvmeConfig) -> Nvme {
        Nvme {
            info: DeviceInfo {
                name: cfg.name.clone(),
                rotational: false,
                queue_depth: cfg.queue_depth.max(1),
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
            done: VecDeque::with_capacity(cfg.queue_depth.max(1) as usize),
        }
    }
}

impl Device for Nvme {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, rq: DevRequest, now: Time) {
        let (sector, len) = clamp_request(rq.sector, rq.sectors, self.info.capacity_sectors);
        let t = self.pipe.ctrl_free.max(now);
        let done = match rq.dir {
            Direction::Read => {
                let ctrl_end = self.pipe.read_ctrl_end(t);
                let (p0, p1) = self.pipe.pages(sector, sector + len);
                let flash_done = self.pipe.reserve_read(p0, p1, ctrl_end);
                self.pipe.commit_read(t, len, flash_done)
            }
            Direction::Write => self.pipe.commit_write(t, len),
        };
        self.done.push_back((done, rq.tag));
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

    #[test]
    fn headline_figures() {
        let c = NvmeConfig::modern();
        let cap = c.capacity_sectors;
        // QD1 4 KiB random read: controller + page read + link + base, nothing overlaps.
        let mut d = Nvme::new(&c);
        let mut rng = Lcg::new(1);
        let q1 = closed_loop(&mut d, 1, 20_000, |_| (Direction::Read, rng.below(cap / 8) * 8, 8));
        let lat_us = c.controller_read_us + c.read_us + 4096.0 / c.link_mb_s + c.base_latency_us;
        let got_us = q1.mean_latency as f64 / 1e3;
        assert!(
            (got_us / lat_us - 1.0).abs() < 0.02 && got_us < 85.0,
            "QD1 {got_us} us vs {lat_us}"
        );
        // QD256: the controller bounds IOPS at 1 / controller_read_us (> 500 K).
        let mut d = Nvme::new(&c);
        let mut rng = Lcg::new(2);
        let q256 = closed_loop(&mut d, 256, 400_000, |_| (Direction::Read, rng.below(cap / 8) * 8, 8));
        let bound = 1e6 / c.controller_read_us;
        assert!(
            q256.iops > 0.95 * bound && q256.iops > 500_000.0,
            "QD256 {} IOPS",
            q256.iops
        );
        // Sequential 128 KiB reads: the link cap.
        let mut d = Nvme::new(&c);
        let seq = closed_loop(&mut d, 32, 20_000, |i| (Direction::Read, i * 256, 256));
        assert!((seq.mb_s / c.link_mb_s - 1.0).abs() < 0.02, "seq {} MB/s", seq.mb_s);
        // Sequential writes: the program rate once the buffer is full.
        let mut d = Nvme::new(&c);
        let w = closed_loop(&mut d, 32, 60_000, |i| (Direction::Write, i * 256, 256));
        assert!(
            w.mb_s > 0.95 * c.program_mb_s && w.mb_s < 1.3 * c.program_mb_s,
            "seq write {} MB/s",
            w.mb_s
        );
    }

    #[test]
    fn deterministic() {
        let c = NvmeConfig::modern();
        let go = || {
            let mut d = Nvme::new(&c);
            let mut rng = Lcg::new(3);
            let r = closed_loop(&mut d, 64, 50_000, |i| {
                let dir = if i % 3 == 0 { Direction::Write } else { Direction::Read };
                (dir, rng.below(c.capacity_sectors + 100), rng.below(1024) as u32)
            });
            (r.elapsed, r.mean_latency)
        };
        assert_eq!(go(), go());
    }
}
