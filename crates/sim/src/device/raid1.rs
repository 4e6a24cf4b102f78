//! Two identical disks mirrored like Linux md raid1.
//!
//! # How it works
//! - **Reads** go to one mirror, chosen like md's `read_balance`: a read that starts where the previous read sent to
//!   a mirror ended stays on that mirror (sequential reads stick to one disk); otherwise an idle mirror (no request
//!   pending) is preferred, the one whose head is nearer if both are idle; otherwise the mirror whose last request
//!   ended nearest to the read's start.
//! - **Writes** go to both mirrors and complete when both have completed them.
//! - Each mirror is a full [`Hdd`] with its own NCQ queue, caches and head position.
//!
//! This is the pair without member schedulers: one scheduler feeds it as one device with `queue_depth` tags
//! (device-level tests and headline figures). The simulated benchmarks run [`super::Md1`], md with a scheduler on
//! each member disk, as Linux does.

use std::cell::Cell;

use bfq_sched::slab::{Slab, SlabKey};
use bfq_sched::{DeviceInfo, Direction, Time};
use serde::{Deserialize, Serialize};

use super::hdd::{Hdd, HddConfig};
use super::{clamp_request, DevRequest, Device};

/// Parameters of a RAID1 pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Raid1Config {
    /// Name reported in [`DeviceInfo`].
    pub name: String,
    /// Tags offered to the scheduler for the pair.
    pub queue_depth: u32,
    /// Scheduler tags (`nr_requests`).
    pub nr_requests: u32,
    /// Each of the two mirrors.
    pub disk: HddConfig,
}

bfq_sched::slab_key!(
    /// A request on the pair; its slot index is the tag its halves carry on the mirrors.
    struct SlotKey
);

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    tag: u64,
    remaining: u8,
}

/// A simulated RAID1 pair. Build with [`Raid1::new`].
#[derive(Debug)]
pub struct Raid1 {
    info: DeviceInfo,
    disks: [Hdd; 2],
    slots: Slab<SlotKey, Slot>,
    pending: [u32; 2],
    /// Where the last read sent to each mirror ended (md's `next_seq_sect`).
    next_seq: [u64; 2],
    /// Where the last request sent to each mirror ended (md's `head_position`).
    head_pos: [u64; 2],
    /// Outstanding writes of which one mirror has not completed its half.
    half_writes: u32,
    /// Requests sent to each mirror, per direction: `[disk][Direction::index()]`.
    sent: [[u64; 2]; 2],
    /// Cached answer of `next_completion` (invalidated by `submit` and `pop_completion`).
    next_cache: Cell<Option<Option<Time>>>,
}

impl Raid1 {
    /// Builds the pair.
    pub fn new(cfg: &Raid1Config) -> Raid1 {
        let a = Hdd::new(&cfg.disk);
        // The spindles are not synchronized: the second platter runs a third of a revolution apart (arbitrary).
        let b = Hdd::new(&cfg.disk);
        let b = {
            let phase = b.revolution_ns() / 3;
            b.with_phase(phase)
        };
        let di = a.info();
        Raid1 {
            info: DeviceInfo {
                name: cfg.name.clone(),
                rotational: true,
                queue_depth: cfg.queue_depth.max(1),
                nr_requests: cfg.nr_requests.max(1),
                max_sectors: di.max_sectors,
                capacity_sectors: di.capacity_sectors,
            },
            disks: [a, b],
            slots: Slab::with_capacity(cfg.queue_depth as usize),
            pending: [0; 2],
            next_seq: [u64::MAX; 2],
            head_pos: [0; 2],
            half_writes: 0,
            sent: [[0; 2]; 2],
            next_cache: Cell::new(None),
        }
    }

    /// Requests sent so far to each mirror: `[disk][0 = reads, 1 = writes]`.
    pub fn sent_per_disk(&self) -> [[u64; 2]; 2] {
        self.sent
    }

    fn choose_read_disk(&self, sector: u64) -> usize {
        if let Some(i) = (0..2).find(|&i| self.next_seq[i] == sector) {
            return i;
        }
        let dist = |i: usize| self.head_pos[i].abs_diff(sector);
        let nearer = if dist(1) < dist(0) { 1 } else { 0 };
        match (self.pending[0] == 0, self.pending[1] == 0) {
            (true, false) => 0,
            (false, true) => 1,
            // Both idle or both busy: the nearer head.
            _ => nearer,
        }
    }

    fn alloc_slot(&mut self, tag: u64, remaining: u8) -> u64 {
        u64::from(self.slots.insert(Slot { tag, remaining }).index())
    }

    /// The earliest time a request completes, found by running copies of the mirrors forward (needed only while a
    /// write has one half still outstanding, whose completion time depends on the other mirror's later work).
    fn simulate_next(&self) -> Option<Time> {
        let mut disks = [self.disks[0].clone(), self.disks[1].clone()];
        let mut remaining = vec![0u8; self.slots.slots()];
        for (key, s) in self.slots.iter() {
            remaining[key.index() as usize] = s.remaining;
        }
        loop {
            let (i, t) = (0..2)
                .filter_map(|i| disks[i].next_completion().map(|t| (i, t)))
                .min_by_key(|&(i, t)| (t, i))?;
            // A mirror may wake up for internal work (destaging) without completing anything.
            let Some(itag) = disks[i].pop_completion(t) else {
                continue;
            };
            let r = &mut remaining[itag as usize];
            bfq_sched::counter::dec(r, "raid1 remaining halves");
            if *r == 0 {
                return Some(t);
            }
        }
    }
}

impl Device for Raid1 {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, rq: DevRequest, now: Time) {
        self.next_cache.set(None);
        let (sector, len) = clamp_request(rq.sector, rq.sectors, self.info.capacity_sectors);
        let end = sector + len;
        match rq.dir {
            Direction::Read => {
                let i = self.choose_read_disk(sector);
                let itag = self.alloc_slot(rq.tag, 1);
                self.pending[i] += 1;
                self.next_seq[i] = end;
                self.head_pos[i] = end;
                self.sent[i][0] += 1;
                self.disks[i].submit(
                    DevRequest {
                        tag: itag,
                        dir: rq.dir,
                        sector,
                        sectors: len as u32,
                    },
                    now,
                );
            }
            Direction::Write => {
                let itag = self.alloc_slot(rq.tag, 2);
                self.half_writes += 1;
                for i in 0..2 {
                    self.pending[i] += 1;
                    self.head_pos[i] = end;
                    self.sent[i][1] += 1;
                    self.disks[i].submit(
                        DevRequest {
                            tag: itag,
                            dir: rq.dir,
                            sector,
                            sectors: len as u32,
                        },
                        now,
                    );
                }
            }
        }
    }

    fn next_completion(&self) -> Option<Time> {
        if let Some(c) = self.next_cache.get() {
            return c;
        }
        let c = if self.half_writes == 0 {
            // Every mirror completion completes a request.
            match (self.disks[0].next_completion(), self.disks[1].next_completion()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        } else {
            self.simulate_next()
        };
        self.next_cache.set(Some(c));
        c
    }

    fn pop_completion(&mut self, now: Time) -> Option<u64> {
        self.next_cache.set(None);
        loop {
            let (i, t) = (0..2)
                .filter_map(|i| self.disks[i].next_completion().map(|t| (i, t)))
                .filter(|&(_, t)| t <= now)
                .min_by_key(|&(i, t)| (t, i))?;
            let Some(itag) = self.disks[i].pop_completion(t) else {
                continue; // a wake-up for internal work: that disk's next event is now later than `now`
            };
            bfq_sched::counter::dec(&mut self.pending[i], "raid1 pending[member]");
            let key = u32::try_from(itag)
                .ok()
                .and_then(|t| self.slots.key_at(t))
                .unwrap_or_else(|| panic!("raid1: a mirror completed tag {itag}, which names no request"));
            let slot = &mut self.slots[key];
            bfq_sched::counter::dec(&mut slot.remaining, "raid1 slot remaining");
            if slot.remaining == 1 {
                // First half of a write: the request completes with the other mirror's half.
                bfq_sched::counter::dec(&mut self.half_writes, "raid1 half_writes");
                continue;
            }
            let tag = slot.tag;
            self.slots.remove(key);
            return Some(tag);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::config::preset;
    use crate::device::testutil::{closed_loop, run, Flow, Lcg};
    use crate::device::DeviceConfig;
    use bfq_sched::SEC;

    fn cfg() -> Raid1Config {
        match preset("seagate-raid1") {
            Some(DeviceConfig::Raid1(c)) => c,
            _ => panic!("preset"),
        }
    }

    #[test]
    fn random_reads_balance_across_mirrors() {
        let c = cfg();
        let cap = c.disk.capacity_sectors;
        let mut r = Raid1::new(&c);
        let mut rng = Lcg::new(1);
        let res = closed_loop(&mut r, 8, 4000, |_| (Direction::Read, rng.below(cap / 8) * 8, 8));
        let s = r.sent_per_disk();
        // Each mirror serves a fair share (md prefers idle disks, then nearer heads): at least 35% each.
        let total = (s[0][0] + s[1][0]) as f64;
        assert!(s[0][0] as f64 > 0.35 * total && s[1][0] as f64 > 0.35 * total, "{s:?}");
        // Two heads serve random reads faster than one disk at the same depth.
        let mut one = Hdd::new(&c.disk);
        let mut rng = Lcg::new(1);
        let single = closed_loop(&mut one, 8, 4000, |_| (Direction::Read, rng.below(cap / 8) * 8, 8));
        assert!(
            res.iops > 1.3 * single.iops,
            "raid {} vs disk {}",
            res.iops,
            single.iops
        );
    }

    #[test]
    fn sequential_reads_stick_to_one_mirror() {
        let c = cfg();
        let mut r = Raid1::new(&c);
        closed_loop(&mut r, 1, 1000, |i| (Direction::Read, 10_000 + i * 256, 256));
        let s = r.sent_per_disk();
        assert!(s[0][0] == 1000 || s[1][0] == 1000, "{s:?}");
        // Two sequential readers end up on different mirrors and stay there.
        let mut r = Raid1::new(&c);
        let stats = run(
            &mut r,
            vec![
                Flow::new(1, 0, |i| (Direction::Read, i * 256, 256)),
                Flow::new(1, 0, |i| (Direction::Read, 1_000_000_000 + i * 256, 256)),
            ],
            |s| s[0].completed + s[1].completed >= 2000,
            100 * SEC,
        );
        let s = r.sent_per_disk();
        let mut sent = [s[0][0], s[1][0]];
        let mut done = [stats[0].completed, stats[1].completed];
        sent.sort();
        done.sort();
        // Each mirror received exactly one flow's reads (the flow's completions, plus at most one in flight).
        assert!(
            sent[0].abs_diff(done[0]) <= 1 && sent[1].abs_diff(done[1]) <= 1,
            "{s:?} {done:?}"
        );
    }

    #[test]
    fn writes_hit_both_mirrors() {
        let c = cfg();
        let cap = c.disk.capacity_sectors;
        let mut r = Raid1::new(&c);
        let mut rng = Lcg::new(2);
        closed_loop(&mut r, 4, 3000, |i| {
            let dir = if i % 2 == 0 { Direction::Write } else { Direction::Read };
            (dir, rng.below(cap / 8) * 8, 8)
        });
        let s = r.sent_per_disk();
        assert_eq!(s[0][1], s[1][1]);
        assert!(s[0][1] >= 1500);
        // The write-cache-less pair completes a write only when both disks did: slower than one disk's write.
        let mut c2 = c.clone();
        c2.disk.write_cache_kib = 0;
        let mut pair = Raid1::new(&c2);
        let mut rng = Lcg::new(3);
        let rp = closed_loop(&mut pair, 1, 400, |_| (Direction::Write, rng.below(cap / 8) * 8, 8));
        let mut one = Hdd::new(&c2.disk);
        let mut rng = Lcg::new(3);
        let r1 = closed_loop(&mut one, 1, 400, |_| (Direction::Write, rng.below(cap / 8) * 8, 8));
        // Max of two independent positioning times exceeds one.
        assert!(
            rp.mean_latency > r1.mean_latency,
            "{} vs {}",
            rp.mean_latency,
            r1.mean_latency
        );
    }

    #[test]
    fn deterministic() {
        let c = cfg();
        let cap = c.disk.capacity_sectors;
        let go = || {
            let mut r = Raid1::new(&c);
            let mut rng = Lcg::new(9);
            let res = closed_loop(&mut r, 16, 3000, |i| {
                let dir = if i % 4 == 0 { Direction::Write } else { Direction::Read };
                (dir, rng.below(cap), 1 + rng.below(512) as u32)
            });
            (res.elapsed, res.mean_latency)
        };
        assert_eq!(go(), go());
    }
}
