//! Linux md RAID1 as a layer above two member disks, each with its own scheduler instance and request pool.
//!
//! # How it works
//! - md is bio-based and has no scheduler of its own (`../shared/docs/fidelity.md` §4): the host's scheduler above
//!   it is a pass-through, and each member disk runs its own instance of the chosen policy, with its own request
//!   pool (`nr_requests`, the policy's allocation rules) and its own NCQ queue ([`Hdd`]).
//! - **Reads** go to one member, chosen by 3.13's `read_balance`: members in index order; a member is *sequential*
//!   for the read if the last read md sent it ended at the read's start or its last completed request ended there,
//!   and then wins at once; otherwise the first member with nothing pending wins at once; otherwise the member whose
//!   head (the end of its last completed request) is nearest to the read's start. The sequential marker is one value
//!   per member, not per stream.
//! - **Writes** go to both members and complete when both have.
//! - A request a member's pool cannot take waits in md, in arrival order per pool class, until a tag frees (the
//!   submitting process would sleep in `get_request`).
//! - A member scheduler that idles (`WaitUntil`) makes the device report that time as its next event; at it nothing
//!   completes and the caller asks again.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use bfq_sched::slab::{Slab, SlabKey};
use bfq_sched::tags::TagPool;
use bfq_sched::{ConfigError, DeviceInfo, Direction, Driver, FlowId, FlowInfo, Request, RequestId, Time};

use super::hdd::Hdd;
use super::lower::Lower;
use super::raid1::Raid1Config;
use super::{clamp_request, DevRequest, Device};

bfq_sched::slab_key!(
    /// A request on the md device; both members know its halves by this key.
    struct MdKey
);

#[derive(Debug, Clone, Copy)]
struct MdSlot {
    tag: u64,
    remaining: u8,
}

/// One member disk with its own scheduler and request pool.
struct Member {
    disk: Hdd,
    /// The member's scheduler, request pool and the requests waiting for its tags.
    q: Lower,
    /// Requests on the disk, by the disk tag (the request id).
    on_disk: BTreeMap<u64, Request>,
    /// Requests sent to this member and not completed (md's `nr_pending`).
    pending: u32,
    /// Where the last read md sent here ended (md's `next_seq_sect`).
    next_seq: u64,
    /// Where the last completed request ended (md's `head_position`).
    head: u64,
    /// Requests sent here: reads, writes.
    sent: [u64; 2],
}

/// md RAID1 over two [`Hdd`]s, each with its own scheduler. Build with [`Md1::new`].
pub struct Md1 {
    info: DeviceInfo,
    members: [Member; 2],
    slots: Slab<MdKey, MdSlot>,
    done: super::DoneHeap,
    seq: u64,
    /// [`Device::next_completion`]'s answer, kept until a `&mut self` call of the trait that can change the state
    /// clears it (a function of the state alone: the members' disks and drivers and the finished requests).
    next_memo: super::NextMemo,
}

impl std::fmt::Debug for Md1 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Md1").field("info", &self.info).finish_non_exhaustive()
    }
}

/// The member request id of md slot `key`: index in the low 32 bits, generation + 1 above (never 0).
fn member_id(key: MdKey) -> RequestId {
    RequestId((u64::from(key.generation().wrapping_add(1)) << 32) | u64::from(key.index()))
}

fn md_key(id: RequestId) -> MdKey {
    MdKey::from_parts((id.0 & 0xFFFF_FFFF) as u32, ((id.0 >> 32) as u32).wrapping_sub(1))
}

impl Md1 {
    /// The pair of `cfg`, each member scheduled by its own instance of `scheduler` with `tunables`.
    pub fn new<S: AsRef<str>>(cfg: &Raid1Config, scheduler: &str, tunables: &[S]) -> Result<Md1, ConfigError> {
        let a = Hdd::new(&cfg.disk);
        // The spindles are not synchronized: the second platter runs a third of a revolution apart (arbitrary).
        let b = Hdd::new(&cfg.disk);
        let b = {
            let phase = b.revolution_ns() / 3;
            b.with_phase(phase)
        };
        let member = |disk: Hdd| -> Result<Member, ConfigError> {
            let info = disk.info();
            let policy = bfq_sched::build(scheduler, &info, tunables)?;
            let tags = TagPool::legacy_for(policy.as_ref(), info.nr_requests);
            let mut driver = Driver::new(policy, info.queue_depth);
            driver.flow_started(&FlowInfo::new(FlowId(0)), 0);
            Ok(Member {
                disk,
                q: Lower::new(driver, tags),
                on_disk: BTreeMap::new(),
                pending: 0,
                next_seq: u64::MAX,
                head: 0,
                sent: [0; 2],
            })
        };
        let di = a.info();
        let members = [member(a)?, member(b)?];
        // md passes every request down at once: its depth towards the host is what both members' pools hold.
        let depth = 2 * di.nr_requests.max(1);
        Ok(Md1 {
            info: DeviceInfo {
                name: cfg.name.clone(),
                rotational: true,
                queue_depth: depth,
                nr_requests: depth,
                max_sectors: di.max_sectors,
                capacity_sectors: di.capacity_sectors,
            },
            members,
            slots: Slab::new(),
            done: BinaryHeap::new(),
            seq: 0,
            next_memo: super::NextMemo::default(),
        })
    }

    /// Requests sent so far to each member: `[member][0 = reads, 1 = writes]`.
    pub fn sent_per_disk(&self) -> [[u64; 2]; 2] {
        [self.members[0].sent, self.members[1].sent]
    }

    /// The scheduler of member `i` (0 or 1), for inspection.
    pub fn member_policy(&self, i: usize) -> &dyn bfq_sched::Scheduler {
        self.members[i.min(1)].q.driver.policy()
    }

    /// 3.13's `read_balance` for a read starting at `sector`.
    fn choose_read_member(&self, sector: u64) -> usize {
        if let Some(i) = (0..2).find(|&i| self.members[i].next_seq == sector || self.members[i].head == sector) {
            return i;
        }
        if let Some(i) = (0..2).find(|&i| self.members[i].pending == 0) {
            return i;
        }
        let dist = |i: usize| self.members[i].head.abs_diff(sector);
        if dist(1) < dist(0) {
            1
        } else {
            0
        }
    }

    /// Hands `rq` to member `i` at `now`: a tag of its pool and its scheduler, or a wait in md for a tag.
    fn send(&mut self, i: usize, rq: Request, now: Time) {
        let m = &mut self.members[i];
        m.pending += 1;
        m.sent[usize::from(rq.dir == Direction::Write)] += 1;
        m.q.admit(rq, now);
        self.pump(i, now);
    }

    /// Admits waiting requests of member `i` and dispatches what its scheduler gives to its disk.
    fn pump(&mut self, i: usize, now: Time) {
        let Member { disk, q, on_disk, .. } = &mut self.members[i];
        q.pump_into(now, disk, on_disk);
    }

    /// The earliest internal event at or before `now`: (time, member, is a disk event).
    fn next_event(&self) -> Option<(Time, usize, bool)> {
        // The earliest by (time, member, disk before driver), the candidates in that order.
        let mut best: Option<(Time, usize, bool)> = None;
        for (i, m) in self.members.iter().enumerate() {
            for (t, disk) in [(m.disk.next_completion(), true), (m.q.driver.wakeup(), false)] {
                if let Some(t) = t {
                    if best.is_none_or(|(b, _, _)| t < b) {
                        best = Some((t, i, disk));
                    }
                }
            }
        }
        best
    }

    /// Processes member events up to `now`, in time order.
    fn advance(&mut self, now: Time) {
        while let Some((t, i, disk)) = self.next_event() {
            if t > now {
                break;
            }
            if !disk {
                self.pump(i, t);
                continue;
            }
            let Some(tag) = self.members[i].disk.pop_completion(t) else {
                continue;
            };
            let Some(rq) = self.members[i].on_disk.remove(&tag) else {
                continue;
            };
            let m = &mut self.members[i];
            m.q.complete(&rq, t);
            for id in std::iter::once(rq.id).chain(rq.merged.iter().copied()) {
                bfq_sched::counter::dec(&mut m.pending, "md member pending");
                let key = md_key(id);
                let Some(slot) = self.slots.get_mut(key) else {
                    continue;
                };
                bfq_sched::counter::dec(&mut slot.remaining, "md slot remaining");
                if slot.remaining == 0 {
                    let tag = slot.tag;
                    self.slots.remove(key);
                    self.seq += 1;
                    self.done.push(Reverse((t, self.seq, tag)));
                }
            }
            // md's head_position: the end of the last completed request (the dispatched one covers its merges).
            let m = &mut self.members[i];
            m.head = rq.sector + u64::from(rq.sectors);
            self.pump(i, t);
        }
    }
}

impl Device for Md1 {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, rq: DevRequest, now: Time) {
        // Without the host's view of the request: a sync request of the flusher's flow.
        let r = Request::new(
            RequestId(0),
            FlowId(0),
            rq.dir,
            rq.dir == Direction::Read,
            rq.sector,
            rq.sectors,
        );
        self.submit_request(rq.tag, &r, now);
    }

    fn submit_request(&mut self, tag: u64, rq: &Request, now: Time) {
        self.next_memo.clear();
        self.advance(now);
        let (sector, len) = clamp_request(rq.sector, rq.sectors, self.info.capacity_sectors);
        let halves = if rq.dir == Direction::Read { 1 } else { 2 };
        let key = self.slots.insert(MdSlot { tag, remaining: halves });
        let mut member_rq = Request::new(member_id(key), rq.flow, rq.dir, rq.sync, sector, len as u32);
        member_rq.meta = rq.meta;
        match rq.dir {
            Direction::Read => {
                let i = self.choose_read_member(sector);
                self.members[i].next_seq = sector + len;
                self.send(i, member_rq, now);
            }
            Direction::Write => {
                self.send(0, member_rq.clone(), now);
                self.send(1, member_rq, now);
            }
        }
    }

    fn next_completion(&self) -> Option<Time> {
        self.next_memo.get_or(|| self.compute_next_completion())
    }

    fn pop_completion(&mut self, now: Time) -> Option<u64> {
        // Before the next completion or member event (the memo, when present, is that time), `advance` would
        // process nothing and nothing is due: return at once, keeping the memo (the state is unchanged).
        if self.next_memo.known().is_some_and(|next| next.is_none_or(|t| t > now)) {
            return None;
        }
        self.next_memo.clear();
        self.advance(now);
        super::pop_due(&mut self.done, now)
    }

    fn flow_started(&mut self, flow: &FlowInfo, now: Time) {
        self.next_memo.clear();
        if flow.id == FlowId(0) {
            return; // the flusher's flow, started with the members
        }
        for m in &mut self.members {
            m.q.driver.flow_started(flow, now);
        }
    }

    fn flow_exited(&mut self, flow: FlowId, now: Time) {
        self.next_memo.clear();
        for i in 0..2 {
            self.members[i].q.driver.flow_exited(flow, now);
            self.members[i].q.tags.forget(flow);
            self.pump(i, now);
        }
    }

    fn member_schedulers(&self) -> u32 {
        2
    }
}

impl Md1 {
    /// The earliest finished request or member event ([`Device::next_completion`] without its memo).
    fn compute_next_completion(&self) -> Option<Time> {
        let done = self.done.peek().map(|Reverse((t, _, _))| *t);
        let internal = self.next_event().map(|(t, _, _)| t);
        match (done, internal) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
