//! A SAN logical unit: a storage controller with a write-back cache in front of a striped array of disks, reached
//! over one Fibre Channel link (seed 003's device class: two FC LUNs of a SAN array under Linux 2.6.18).
//!
//! # How it works
//! - **Striping.** The LUN's sectors are cut into `chunk_kib` chunks dealt round-robin over `members` identical
//!   [`Hdd`]s: chunk `c` lives on member `c mod members` at member chunk `c / members`. Parity is not modelled (a
//!   RAID 0 layout; RAID 5's parity writes would lower every write figure alike).
//! - **Link.** Every host command crosses the link at `link_mb_s` (each direction on its own, as FC is full duplex)
//!   and pays `controller_us` of controller time.
//! - **Reads** are split at chunk boundaries and sent to the members at once; the read completes when its last piece
//!   is in the controller and its data has crossed the link. The members' own read caches and prefetch work as in
//!   [`Hdd`].
//! - **Writes** complete once their data is in the controller's write cache (`write_cache_mib`); the controller then
//!   writes them to the members (destages) on its own. Each member has a destage queue in the order the data
//!   arrived; a piece that continues the queue's last piece on the same disk is coalesced with it (up to
//!   [`COALESCE_MAX_SECTORS`]), and at most `destage_depth` destage writes are outstanding per member, so the member's
//!   command queueing can reorder only among those. When the cache is full, a write waits in the controller until
//!   destaging frees room for it. So the order in which the host sends writes reaches the disks: interleaved streams
//!   stay interleaved (a seek per piece), sorted runs become long sequential destages.
//!
//! Not modelled: parity, controller read-ahead and read hits on cached dirty data, mirroring of the write cache
//! between two controllers (its cost is in the cache size), multipathing (one path carries the LUN).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use bfq_sched::{DeviceInfo, Direction, Time};
use serde::{Deserialize, Serialize};

use super::hdd::{Hdd, HddConfig};
use super::{clamp_request, f64_ns, ps_per_sector, xfer_ns, DevRequest, Device};

/// Largest destage write the controller builds by coalescing contiguous cached pieces for one member, sectors
/// (1 MiB; an estimate: docs/DEVICES.md, SAN LUN).
pub const COALESCE_MAX_SECTORS: u64 = 2048;

/// Member tags with this bit set are destage writes; the low bits carry the piece's length in sectors.
const DESTAGE_BIT: u64 = 1 << 63;

/// Parameters of a SAN LUN. Times in the unit named by the suffix, rates in MB/s (10^6 bytes per second).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrayConfig {
    /// Name reported in [`DeviceInfo`].
    pub name: String,
    /// Commands the host may have outstanding on the LUN (the HBA driver's LUN queue depth).
    pub queue_depth: u32,
    /// Scheduler tags (`nr_requests`).
    pub nr_requests: u32,
    /// Largest request, sectors (`max_sectors_kb * 2`).
    pub max_sectors: u32,
    /// Disks striped (at least 1).
    pub members: u32,
    /// Stripe unit: contiguous data on one member before the next, KiB.
    pub chunk_kib: u32,
    /// Payload rate of the link, each direction, MB/s.
    pub link_mb_s: f64,
    /// Controller time per host command, µs.
    pub controller_us: f64,
    /// Write-back cache for the LUN, MiB (0: every write waits for its destage).
    pub write_cache_mib: u32,
    /// Destage writes the controller keeps outstanding per member disk (at least 1).
    pub destage_depth: u32,
    /// Each member disk.
    pub disk: HddConfig,
}

/// A host read in progress: its tag, pieces outstanding on members, and its length (sectors).
#[derive(Debug, Clone, Copy)]
struct ReadSlot {
    tag: u64,
    remaining: u32,
    sectors: u64,
}

/// A simulated SAN LUN. Build with [`Array::new`].
#[derive(Debug, Clone)]
pub struct Array {
    info: DeviceInfo,
    disks: Vec<Hdd>,
    chunk: u64,
    link_ps: u64,
    controller: Time,
    cache_cap: u64,
    destage_depth: u32,
    /// Host reads in progress, by slot (member tags of read pieces are slot indices).
    reads: Vec<Option<ReadSlot>>,
    free_slots: Vec<usize>,
    /// Per member: destage pieces waiting, oldest first (member sector, sectors).
    destage_q: Vec<VecDeque<(u64, u64)>>,
    /// Per member: destage writes outstanding.
    destaging: Vec<u32>,
    /// Sectors in the write cache (accepted and not yet destaged).
    dirty: u64,
    /// Writes waiting for room in the cache, in arrival order: (tag, sector, sectors).
    blocked: VecDeque<(u64, u64, u64)>,
    /// The read and write directions of the link are busy until these times, ns.
    read_link_free: Time,
    write_link_free: Time,
    done: super::DoneHeap,
    seq: u64,
    /// Host commands received per direction (reads, writes) and destage writes sent to members.
    counts: [u64; 3],
}

impl Array {
    /// Builds the LUN. Out-of-range parameters are clamped (validation in [`super::DeviceConfig`] reports them).
    pub fn new(cfg: &ArrayConfig) -> Array {
        let k = cfg.members.max(1);
        let chunk = (u64::from(cfg.chunk_kib) * 2).max(1);
        let mut disk_cfg = cfg.disk.clone();
        disk_cfg.queue_depth = disk_cfg.queue_depth.max(1);
        let proto = Hdd::new(&disk_cfg);
        let per_member = (proto.info().capacity_sectors / chunk).max(1) * chunk;
        let rev = proto.revolution_ns();
        // The members' spindles are not synchronized: spread their platters' phases over a revolution (the value
        // is arbitrary, but fixed, so runs are deterministic).
        let disks = (0..k)
            .map(|i| Hdd::new(&disk_cfg).with_phase(rev * u64::from(i) / u64::from(k)))
            .collect();
        Array {
            info: DeviceInfo {
                name: cfg.name.clone(),
                rotational: true,
                queue_depth: cfg.queue_depth.max(1),
                nr_requests: cfg.nr_requests.max(1),
                max_sectors: cfg.max_sectors.max(1),
                capacity_sectors: per_member * u64::from(k),
            },
            disks,
            chunk,
            link_ps: ps_per_sector(cfg.link_mb_s),
            controller: f64_ns(cfg.controller_us, 1.0e3),
            cache_cap: u64::from(cfg.write_cache_mib) * 2048,
            destage_depth: cfg.destage_depth.max(1),
            reads: Vec::new(),
            free_slots: Vec::new(),
            destage_q: vec![VecDeque::new(); k as usize],
            destaging: vec![0; k as usize],
            dirty: 0,
            blocked: VecDeque::new(),
            read_link_free: 0,
            write_link_free: 0,
            done: BinaryHeap::new(),
            seq: 0,
            counts: [0; 3],
        }
    }

    /// Host reads and writes received, and destage writes sent to the members, so far.
    pub fn counts(&self) -> [u64; 3] {
        self.counts
    }

    /// The pieces of `[sector, sector + len)` on the members: (member, member sector, sectors), in LUN order.
    fn pieces(&self, sector: u64, len: u64) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        let k = self.disks.len() as u64;
        let chunk = self.chunk;
        let end = sector + len;
        let mut s = sector;
        std::iter::from_fn(move || {
            if s >= end {
                return None;
            }
            let c = s / chunk;
            let off = s % chunk;
            let n = (chunk - off).min(end - s);
            let piece = ((c % k) as usize, (c / k) * chunk + off, n);
            s += n;
            Some(piece)
        })
    }

    fn complete(&mut self, t: Time, tag: u64) {
        self.seq += 1;
        self.done.push(Reverse((t, self.seq, tag)));
    }

    /// Takes a write into the cache at `t`: its data crosses the link, it completes, and its pieces join the
    /// members' destage queues.
    fn accept_write(&mut self, tag: u64, sector: u64, len: u64, t: Time) {
        let start = t.max(self.write_link_free);
        let end = start + xfer_ns(len, self.link_ps);
        self.write_link_free = end;
        self.complete(end + self.controller, tag);
        self.dirty += len;
        let pieces: Vec<(usize, u64, u64)> = self.pieces(sector, len).collect();
        for (m, ms, n) in pieces {
            let q = &mut self.destage_q[m];
            match q.back_mut() {
                Some(last) if last.0 + last.1 == ms && last.1 + n <= COALESCE_MAX_SECTORS => last.1 += n,
                _ => q.push_back((ms, n)),
            }
            self.issue_destages(m, t);
        }
    }

    /// Sends member `m` destage writes from its queue while it has fewer than `destage_depth` outstanding.
    fn issue_destages(&mut self, m: usize, t: Time) {
        while self.destaging[m] < self.destage_depth {
            let Some((ms, n)) = self.destage_q[m].pop_front() else {
                break;
            };
            self.destaging[m] += 1;
            self.counts[2] += 1;
            self.disks[m].submit(
                DevRequest {
                    tag: DESTAGE_BIT | n,
                    dir: Direction::Write,
                    sector: ms,
                    sectors: n as u32,
                },
                t,
            );
        }
    }

    /// Admits blocked writes, oldest first, while they fit in the cache.
    fn admit_blocked(&mut self, t: Time) {
        while let Some(&(tag, sector, len)) = self.blocked.front() {
            if self.dirty + len > self.cache_cap && self.dirty > 0 {
                break;
            }
            self.blocked.pop_front();
            self.accept_write(tag, sector, len, t);
        }
    }

    /// A member completed `mtag` at `t`.
    fn member_done(&mut self, m: usize, mtag: u64, t: Time) {
        if mtag & DESTAGE_BIT != 0 {
            let n = mtag & !DESTAGE_BIT;
            self.dirty = self.dirty.saturating_sub(n);
            self.destaging[m] = self.destaging[m].saturating_sub(1);
            self.issue_destages(m, t);
            self.admit_blocked(t);
            return;
        }
        let i = mtag as usize;
        let Some(Some(slot)) = self.reads.get_mut(i) else {
            return;
        };
        slot.remaining = slot.remaining.saturating_sub(1);
        if slot.remaining > 0 {
            return;
        }
        let ReadSlot { tag, sectors, .. } = *slot;
        self.reads[i] = None;
        self.free_slots.push(i);
        let start = t.max(self.read_link_free);
        let end = start + xfer_ns(sectors, self.link_ps);
        self.read_link_free = end;
        self.complete(end + self.controller, tag);
    }

    /// The member with the earliest pending event and its time.
    fn next_member_event(&self) -> Option<(Time, usize)> {
        self.disks
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.next_completion().map(|t| (t, i)))
            .min()
    }

    /// Processes the members' events up to `now`, in time order.
    fn advance(&mut self, now: Time) {
        while let Some((t, m)) = self.next_member_event() {
            if t > now {
                break;
            }
            if let Some(mtag) = self.disks[m].pop_completion(t) {
                self.member_done(m, mtag, t);
            }
        }
    }
}

impl Device for Array {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, rq: DevRequest, now: Time) {
        self.advance(now);
        let (sector, len) = clamp_request(rq.sector, rq.sectors, self.info.capacity_sectors);
        match rq.dir {
            Direction::Write => {
                self.counts[1] += 1;
                if self.blocked.is_empty() && (self.dirty + len <= self.cache_cap || self.dirty == 0) {
                    self.accept_write(rq.tag, sector, len, now);
                } else {
                    self.blocked.push_back((rq.tag, sector, len));
                }
            }
            Direction::Read => {
                self.counts[0] += 1;
                let pieces: Vec<(usize, u64, u64)> = self.pieces(sector, len).collect();
                let slot = ReadSlot {
                    tag: rq.tag,
                    remaining: pieces.len() as u32,
                    sectors: len,
                };
                let i = match self.free_slots.pop() {
                    Some(i) => {
                        self.reads[i] = Some(slot);
                        i
                    }
                    None => {
                        self.reads.push(Some(slot));
                        self.reads.len() - 1
                    }
                };
                for (m, ms, n) in pieces {
                    self.disks[m].submit(
                        DevRequest {
                            tag: i as u64,
                            dir: Direction::Read,
                            sector: ms,
                            sectors: n as u32,
                        },
                        now,
                    );
                }
            }
        }
    }

    fn next_completion(&self) -> Option<Time> {
        let done = self.done.peek().map(|Reverse((t, _, _))| *t);
        let member = self.next_member_event().map(|(t, _)| t);
        [done, member].into_iter().flatten().min()
    }

    fn pop_completion(&mut self, now: Time) -> Option<u64> {
        self.advance(now);
        super::pop_due(&mut self.done, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::config::preset;
    use crate::device::testutil::{closed_loop, write_all};
    use crate::device::DeviceConfig;

    fn san() -> ArrayConfig {
        match preset("san-lun") {
            Some(DeviceConfig::Array(c)) => c,
            _ => panic!("san-lun preset missing"),
        }
    }

    /// Ten write streams 20 GiB apart, 512 KiB requests, `n` in all: in `order` "interleaved" request `i` belongs to
    /// stream `i mod 10` (what a FIFO scheduler passes on from a flusher that writes each file in turn); in "runs"
    /// each stream gets 16 consecutive requests before the next (what a sector-sorting scheduler dispatches).
    fn ten_streams(interleaved: bool) -> impl FnMut(u64) -> (Direction, u64, u32) {
        move |i| {
            let (stream, k) = if interleaved {
                (i % 10, i / 10)
            } else {
                ((i / 16) % 10, (i / 160) * 16 + i % 16)
            };
            (Direction::Write, stream * (40 << 20) + k * 1024, 1024)
        }
    }

    #[test]
    fn a_sequential_read_is_bounded_by_the_link_not_one_disk() {
        // 512 KiB reads at depth 8 cover every member (128 KiB chunks, 8 members): the members together stream
        // far more than the link carries (8 x 125 MB/s against 400 MB/s), so the LUN reads at the link's rate,
        // well above what one member streams (125 MB/s).
        let cfg = san();
        let mut d = Array::new(&cfg);
        let r = closed_loop(&mut d, 8, 2000, |i| (Direction::Read, i * 1024, 1024));
        assert!(r.mb_s <= cfg.link_mb_s * 1.001, "{} MB/s above the link", r.mb_s);
        assert!(r.mb_s > 0.9 * cfg.link_mb_s, "{} MB/s", r.mb_s);
        assert!(r.mb_s > 2.0 * cfg.disk.outer_mb_s);
    }

    #[test]
    fn a_burst_smaller_than_the_cache_completes_at_link_speed() {
        // 64 MiB of writes into a 512 MiB cache: every write completes once its data crossed the link, whatever
        // the disks do later.
        let cfg = san();
        let mut d = Array::new(&cfg);
        let r = closed_loop(&mut d, 8, 128, |i| (Direction::Write, i * 1024, 1024));
        assert!(
            r.mb_s > 0.95 * cfg.link_mb_s && r.mb_s <= cfg.link_mb_s * 1.001,
            "{} MB/s",
            r.mb_s
        );
    }

    #[test]
    fn interleaved_write_streams_destage_slower_than_sorted_runs() {
        // Once the cache is full, writes go at the rate the disks destage. Sorted runs coalesce on every disk into
        // 1 MiB sequential destages (8 disks x ~90 MB/s at that size, far above the link), so they keep the link's
        // 400 MB/s. Interleaved streams reach each disk as 128 KiB pieces of different streams, 2.5 GiB apart on
        // the disk: each costs a short seek (about 1 ms) and on average about half a revolution (2 ms at 15 000
        // rpm) for a 1 ms transfer, so a disk destages at most about 128 KiB / 3 ms = 45 MB/s and the eight at
        // most about 360 MB/s, 0.9 of the link; its queue of 4 shortens only some of the waits.
        let mut cfg = san();
        cfg.write_cache_mib = 32;
        let rate = |interleaved: bool| {
            let mut d = Array::new(&cfg);
            closed_loop(&mut d, 32, 3200, ten_streams(interleaved)).mb_s
        };
        let (mixed, sorted) = (rate(true), rate(false));
        assert!(sorted > 0.95 * cfg.link_mb_s, "sorted runs {sorted} MB/s");
        assert!(
            mixed < 0.9 * cfg.link_mb_s,
            "interleaved {mixed} MB/s, sorted runs {sorted} MB/s"
        );
    }

    #[test]
    fn a_deep_destage_queue_lets_the_disks_restore_the_order() {
        // With 32 destage writes outstanding per disk, each disk's queue holds pieces of every stream, among them
        // the piece that continues the one just written: the disk's command queueing (shortest positioning first)
        // picks it, and the interleaved streams destage sequentially at the link's rate. With one outstanding the
        // disk must follow the controller's order.
        let rate = |depth: u32| {
            let mut cfg = san();
            cfg.write_cache_mib = 32;
            cfg.destage_depth = depth;
            let mut d = Array::new(&cfg);
            closed_loop(&mut d, 32, 3200, ten_streams(true)).mb_s
        };
        let (d1, d32) = (rate(1), rate(32));
        assert!(d1 < 0.9 * san().link_mb_s, "depth 1 {d1} MB/s");
        assert!(d32 > 0.95 * san().link_mb_s, "depth 32 {d32} MB/s");
    }

    /// One member disk, one destage write outstanding at a time, `cache_mib` of write cache and a link fast enough
    /// (100 GB/s) that accepted writes complete after the controller time alone.
    fn one_disk(cache_mib: u32) -> ArrayConfig {
        ArrayConfig {
            members: 1,
            destage_depth: 1,
            write_cache_mib: cache_mib,
            link_mb_s: 100_000.0,
            ..san()
        }
    }

    #[test]
    fn contiguous_cached_writes_coalesce_into_destages_of_at_most_1_mib() {
        // Contiguous 64 KiB writes at once on one disk with one destage outstanding: the first goes to the disk
        // at once; the others wait in the destage queue, where each continues the last piece and is coalesced
        // with it up to COALESCE_MAX_SECTORS (1 MiB = 16 writes). 33 writes: two more destages of exactly 1 MiB,
        // three in all; 18 writes: one of 1 MiB and one of 64 KiB, three as well (a limit one write lower or
        // higher would give 4 or 2 for one of the two).
        let cfg = one_disk(512);
        for (n, destages) in [(33u64, 3), (18, 3)] {
            let mut d = Array::new(&cfg);
            let writes: Vec<(u64, u32)> = (0..n).map(|i| (i * 128, 128)).collect();
            let at = write_all(&mut d, &writes);
            assert!(at.iter().all(|&t| t < Time::MAX), "a write never completed");
            assert_eq!(d.counts(), [0, n, destages], "{n} writes");
        }
    }

    #[test]
    fn a_write_waits_in_the_controller_only_when_it_does_not_fit_in_the_cache() {
        // A 1 MiB cache (2048 sectors) takes 16 writes of 64 KiB at once, the 16th filling it exactly: each
        // completes after its link transfer and the controller time, long before any disk write could. The 17th
        // waits for the first destage (64 KiB from the disk's start: the command overhead, the write settle time,
        // at most a revolution and the transfer), then fits and completes; had it to wait for the second destage
        // (the next 15 writes, 960 KiB, several ms more) it would complete later than that bound.
        let cfg = one_disk(1);
        let mut d = Array::new(&cfg);
        let writes: Vec<(u64, u32)> = (0..17).map(|i| (i * 128, 128)).collect();
        let at = write_all(&mut d, &writes);
        let disk = Hdd::new(&cfg.disk);
        let cached = f64_ns(cfg.controller_us, 1e3) + 17 * xfer_ns(128, ps_per_sector(cfg.link_mb_s));
        let first_destage = f64_ns(cfg.disk.command_overhead_us, 1e3)
            + f64_ns(cfg.disk.write_settle_ms, 1e6)
            + disk.revolution_ns()
            + (128.0 * 512.0 / disk.media_rate_bytes_per_s(0) * 1e9) as Time;
        assert!(
            at[..16].iter().all(|&t| t <= cached),
            "a write that fitted waited: {:?}",
            &at[..16]
        );
        let min_disk_write = f64_ns(cfg.disk.write_settle_ms, 1e6);
        assert!(
            at[16] > min_disk_write && at[16] <= first_destage + cached,
            "the write past the cache completed at {} ns (first destage done by {first_destage} ns)",
            at[16]
        );
        // A 17th write of 128 KiB does not fit after the first destage either (1920 + 256 sectors): it waits for
        // the second, whose 960 KiB transfer alone (7.9 ms at the disk's fastest 125 MB/s) outlasts the bound above.
        let mut d = Array::new(&cfg);
        let mut writes: Vec<(u64, u32)> = (0..16).map(|i| (i * 128, 128)).collect();
        writes.push((16 * 128, 256));
        let at = write_all(&mut d, &writes);
        assert!(
            at[16] > first_destage + cached,
            "admitted at {} ns, before it fitted",
            at[16]
        );
        // A write larger than the whole cache is taken when the cache is empty (it could never fit otherwise).
        let mut d = Array::new(&cfg);
        let at = write_all(&mut d, &[(0, 4096)]);
        let alone = f64_ns(cfg.controller_us, 1e3) + xfer_ns(4096, ps_per_sector(cfg.link_mb_s));
        assert_eq!(at[0], alone, "a write larger than the empty cache waited");
        // Such a write that finds the cache in use waits until it is empty again, then is taken.
        let mut d = Array::new(&cfg);
        let at = write_all(&mut d, &[(0, 128), (128, 4096)]);
        assert!(at[1] > at[0] + min_disk_write && at[1] < Time::MAX, "{at:?}");
        // A read is counted as one host read, whatever pieces it is cut into.
        d.submit(
            DevRequest {
                tag: 9,
                dir: Direction::Read,
                sector: 0,
                sectors: 1024,
            },
            bfq_sched::SEC,
        );
        assert_eq!(d.counts()[..2], [1, 2]);
    }
}
