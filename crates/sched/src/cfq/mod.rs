//! CFQ, Completely Fair Queueing (docs/SCHEDULERS.md, CFQ): per-process sync queues and shared async queues get time
//! slices in turn; queues sit on service trees per class (RT, BE, IDLE) and workload type (SYNC, SYNC_NOIDLE,
//! ASYNC) inside groups ordered by virtual disk time. The device idles briefly after a sync queue empties, so that
//! a process that reads sequentially with short pauses keeps the disk head.
//!
//! Modules by concern:
//! - [`tunables`]: sysfs tunables and their values in ns;
//! - [`queue`]: a queue, its requests and slice state; [`elevator`]: the back-seek request choice;
//! - [`service_tree`]: queues ordered by `rb_key`; [`group`]: groups on the vdisktime tree;
//! - [`slice`](mod@slice): slice lengths, low-latency scaling and workload slices;
//! - [`idle`]: think time, seekiness and idle-window rules;
//! - `dispatch`: queue selection, `cfq_may_dispatch` limits, expiry; `preempt`: preemption; `coop`:
//!   cooperating queues; [`ncq`]: NCQ detection.
//!
//! Time is kept in ns; where the kernel counts one jiffy, 1 ms (HZ=1000) is used.
//!
//! The rules are those of Linux 3.13 (the kernel seed 004 ran; the 3.10 and 4.3 code agree in every function
//! used here unless noted). Where this departs from the kernel (docs/SCHEDULERS.md, CFQ, Known departures):
//! - groups are flat children of the root; the root competes with weight 1000, every other group with the default
//!   500 ([`crate::types::FlowInfo`] has no group weight); a group's share is computed over the busy groups when it
//!   is charged rather than cached when it becomes busy;
//! - there is no REQ_NOIDLE flag on [`Request`], so that idle-window rule does not apply;
//! - a dispatch from the active queue cancels its idle timer (the kernel lets it run on); the idle timer is
//!   processed at its own deadline on the next call;
//! - the close-cooperator search scans the group's sync trees for the same class and priority and takes the
//!   nearest next request within 8192 sectors of the head (the kernel looks up neighbours in a per-priority tree);
//! - 3.13 rules where the 3.10-4.3 code differs from later kernels: `slice_idle` and `group_idle` default to 8 ms
//!   on non-rotational devices too; on a non-rotational queueing device the idle timer is skipped only when
//!   `group_idle` is 0; group idling has no think-time condition (added in 4.6).

mod coop;
mod dispatch;
pub mod elevator;
pub mod group;
pub mod idle;
mod invariants;
pub mod ncq;
mod preempt;
pub mod queue;
pub mod service_tree;
pub mod slice;
pub mod tunables;

#[cfg(test)]
mod tests;

pub use tunables::{Params, TUNABLES};

use crate::device::DeviceInfo;
use crate::merge::{absorb, IntMap, MergeKind};
use crate::scheduler::Scheduler;
use crate::tunables::TunableValues;
use crate::types::{Decision, FlowId, FlowInfo, GroupId, IoClass, Request, RequestId, Time};
use elevator::{prefer_first, Candidate};
use group::{Group, GroupTree};
use idle::ThinkTime;
use ncq::NcqDetector;
use queue::{Queue, Stored};
use service_tree::{tree_index, Workload};

/// Requests larger than this (bytes, one page) end an idle wait at once even when the queue is the only busy one.
pub const IDLE_WAKE_BYTES: u64 = 4096;

/// What CFQ keeps per flow (the kernel's per-process I/O context).
#[derive(Debug, Clone)]
struct FlowCtx {
    info: FlowInfo,
    /// Index of the flow's group.
    group: u32,
    /// The flow's sync queue, once it issued a sync request.
    sync_q: Option<u32>,
    /// Time between the flow's sync completions and its next arrivals.
    ttime: ThinkTime,
}

/// A request on the device.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    queue: u32,
    /// Insert time (ns), to detect sync requests completed after their FIFO deadline.
    start: Time,
}

/// The CFQ policy.
pub struct Cfq {
    p: Params,
    rotational: bool,
    max_sectors: u32,
    flows: IntMap<FlowId, FlowCtx>,
    queues: Vec<Queue>,
    free_queues: Vec<u32>,
    groups: Vec<Group>,
    group_index: IntMap<GroupId, u32>,
    gtree: GroupTree,
    rqs: Vec<Option<Stored>>,
    free_rqs: Vec<u32>,
    inflight: IntMap<RequestId, InFlight>,
    /// The queue in service.
    active: Option<u32>,
    /// The flow of the first request dispatched in the active slot (the kernel's `active_cic`).
    active_flow: Option<FlowId>,
    /// When the idle timer fires (valid while the active queue has `wait_request`).
    idle_deadline: Time,
    /// Length of the host's jiffy (ns) once [`Scheduler::set_timer_hz`] was called: the idle timer fires on a
    /// tick; `None`: exact timers.
    jiffy: Option<Time>,
    serving_group: Option<u32>,
    serving_class: IoClass,
    serving_wl: Workload,
    /// End of the current workload slice; `None` when expired.
    workload_expires: Option<Time>,
    busy_queues: u32,
    busy_sync_queues: u32,
    /// Requests held (merged ones count once).
    rq_queued: u32,
    /// Inserted requests held (merged parts count individually), for [`Scheduler::queued`].
    queued_parts: usize,
    rq_in_driver: u32,
    /// Requests on the device from async (0) and sync (1) queues.
    in_flight: [u32; 2],
    /// End sector of the last dispatched request: where the head is.
    last_position: u64,
    /// Last completion of a sync request that had waited longer than `fifo_expire_sync`.
    last_delayed_sync: Option<Time>,
    ncq: NcqDetector,
    tree_seq: u64,
    /// Times the liveness guard had to force a dispatch (must stay 0; checked by `check_invariants`).
    forced: u64,
    /// Dispatch calls that ran out of their [`dispatch::MAX_SELECT_ROUNDS`] queue switches (must stay 0; checked by
    /// `check_invariants`).
    select_rounds_exhausted: u64,
}

impl Cfq {
    /// A CFQ policy for `dev` with tunables `p`.
    pub fn new(dev: &DeviceInfo, p: Params) -> Self {
        Cfq {
            p,
            rotational: dev.rotational,
            max_sectors: dev.max_sectors.max(1),
            flows: IntMap::default(),
            queues: Vec::new(),
            free_queues: Vec::new(),
            groups: Vec::new(),
            group_index: IntMap::default(),
            gtree: GroupTree::default(),
            rqs: Vec::new(),
            free_rqs: Vec::new(),
            inflight: IntMap::default(),
            active: None,
            active_flow: None,
            idle_deadline: 0,
            jiffy: None,
            serving_group: None,
            serving_class: IoClass::Be,
            serving_wl: Workload::Sync,
            workload_expires: None,
            busy_queues: 0,
            busy_sync_queues: 0,
            rq_queued: 0,
            queued_parts: 0,
            rq_in_driver: 0,
            in_flight: [0; 2],
            last_position: 0,
            last_delayed_sync: None,
            ncq: NcqDetector::default(),
            tree_seq: 0,
            forced: 0,
            select_rounds_exhausted: 0,
        }
    }

    /// Registry constructor.
    pub fn build(dev: &DeviceInfo, t: &TunableValues) -> Box<dyn Scheduler> {
        Box::new(Cfq::new(dev, Params::from_values(t)))
    }

    /// The tunables in use.
    pub fn params(&self) -> &Params {
        &self.p
    }

    fn group_for(&mut self, id: GroupId, now: Time) -> u32 {
        if let Some(&g) = self.group_index.get(&id) {
            return g;
        }
        let g = u32::try_from(self.groups.len()).unwrap_or(u32::MAX);
        self.groups.push(Group::new(id, now));
        self.group_index.insert(id, g);
        g
    }

    /// The group, class and priority of `flow`, registering an unknown flow with defaults.
    fn flow_params(&mut self, flow: FlowId, now: Time) -> (u32, IoClass, u8) {
        if !self.flows.contains_key(&flow) {
            self.start_flow(&FlowInfo::new(flow), now);
        }
        match self.flows.get(&flow) {
            Some(c) => (c.group, c.info.class, c.info.prio),
            None => (
                self.group_for(GroupId(0), now),
                IoClass::Be,
                crate::types::DEFAULT_IOPRIO,
            ),
        }
    }

    fn start_flow(&mut self, info: &FlowInfo, now: Time) {
        let group = self.group_for(info.group, now);
        let old = self.flows.insert(
            info.id,
            FlowCtx {
                info: info.clone(),
                group,
                sync_q: None,
                ttime: ThinkTime::new(now),
            },
        );
        if let Some(q) = old.and_then(|o| o.sync_q) {
            self.drop_member(q, now);
        }
    }

    fn alloc_queue(&mut self, sync: bool, class: IoClass, prio: u8, group: u32) -> u32 {
        if let Some(q) = self.free_queues.pop() {
            let gen = self.queues[q as usize].gen;
            self.queues[q as usize] = Queue::new(gen, sync, class, prio, group);
            q
        } else {
            let q = u32::try_from(self.queues.len()).unwrap_or(u32::MAX);
            self.queues.push(Queue::new(0, sync, class, prio, group));
            q
        }
    }

    /// Frees a sync queue nobody uses any more.
    fn maybe_free(&mut self, q: u32) {
        let Some(queue) = self.queues.get_mut(q as usize) else {
            return;
        };
        if !queue.live
            || !queue.sync
            || queue.members > 0
            || !queue.is_empty()
            || queue.dispatched > 0
            || queue.on_rr
            || self.active == Some(q)
        {
            return;
        }
        queue.live = false;
        queue.gen = queue.gen.wrapping_add(1);
        queue.fifo.clear();
        queue.new_queue = None;
        self.free_queues.push(q);
    }

    /// A flow stops using sync queue `q`.
    fn drop_member(&mut self, q: u32, now: Time) {
        if let Some(queue) = self.queues.get_mut(q as usize) {
            crate::counter::dec(&mut queue.members, "cfq queue members");
        }
        if self.active == Some(q) {
            self.expire(now, false);
        }
        self.maybe_free(q);
    }

    /// The sync queue of `flow` (in `group`, of `class` and `prio`), splitting a shared queue that became seeky
    /// and following a pending merge.
    fn sync_queue_for(&mut self, flow: FlowId, group: u32, class: IoClass, prio: u8) -> u32 {
        let existing = self
            .flows
            .get(&flow)
            .and_then(|c| c.sync_q)
            .filter(|&q| self.queues.get(q as usize).is_some_and(|q| q.live));
        let mut q = match existing {
            Some(q) => q,
            None => self.new_sync_queue(flow, group, class, prio),
        };
        if self.queues[q as usize].coop && self.queues[q as usize].split_coop {
            q = self.split_queue(flow, q, group, class, prio);
        }
        if let Some(t) = self.merge_target(q) {
            q = self.merge_queues(flow, q, t);
        }
        q
    }

    fn new_sync_queue(&mut self, flow: FlowId, group: u32, class: IoClass, prio: u8) -> u32 {
        let q = self.alloc_queue(true, class, prio, group);
        self.queues[q as usize].members = 1;
        if let Some(ctx) = self.flows.get_mut(&flow) {
            ctx.sync_q = Some(q);
        }
        q
    }

    /// The shared async queue of (`group`, `class`, `prio`).
    fn async_queue_for(&mut self, group: u32, class: IoClass, prio: u8) -> u32 {
        let (g, prio) = (group as usize, usize::from(prio.min(7)));
        let existing = match class {
            IoClass::Idle => self.groups[g].idle_async,
            c => self.groups[g].async_queues[c.index()][prio],
        };
        if let Some(q) = existing {
            return q;
        }
        let q = self.alloc_queue(false, class, prio as u8, group);
        match class {
            IoClass::Idle => self.groups[g].idle_async = Some(q),
            c => self.groups[g].async_queues[c.index()][prio] = Some(q),
        }
        q
    }

    /// Index of the request the elevator prefers, with the head at `head`.
    fn better(&self, a: u32, b: u32, head: u64) -> u32 {
        let cand = |h: u32| {
            self.rqs.get(h as usize).and_then(|s| s.as_ref()).map(|s| Candidate {
                sync: s.rq.sync,
                meta: s.rq.meta,
                sector: s.rq.sector,
            })
        };
        match (cand(a), cand(b)) {
            (Some(ca), Some(cb)) => {
                if prefer_first(ca, cb, head, self.p.back_seek_max_sectors, self.p.back_seek_penalty) {
                    a
                } else {
                    b
                }
            }
            (Some(_), None) => a,
            _ => b,
        }
    }

    /// Merges `rq` into queued request slot `h` of queue `q`; gives `rq` back if the slot is empty (which the
    /// merge index rules out).
    fn merge_into(&mut self, q: u32, h: u32, rq: Request, kind: MergeKind) -> Option<Request> {
        let Some(stored) = self.rqs.get_mut(h as usize).and_then(|s| s.as_mut()) else {
            return Some(rq);
        };
        let queue = &mut self.queues[q as usize];
        let old_key = (stored.rq.sector, stored.rq.id.0);
        queue.merge.remove(u64::from(h), &stored.rq);
        // The grown request keeps its metadata flag (`absorb`), so `prio_pending` does not change.
        absorb(&mut stored.rq, rq, kind);
        queue.merge.add(u64::from(h), &stored.rq);
        if kind == MergeKind::Front {
            queue.sort.remove(&old_key);
            queue.sort.insert((stored.rq.sector, stored.rq.id.0), h);
            let next = queue.next_rq;
            if let Some(n) = next.filter(|&n| n != h) {
                let best = self.better(n, h, self.last_position);
                self.queues[q as usize].next_rq = Some(best);
            }
        }
        None
    }

    fn add_request(&mut self, q: u32, rq: Request, now: Time) -> u32 {
        let fifo_time = now.saturating_add(self.p.fifo_expire[usize::from(rq.sync)]);
        let key = (rq.sector, rq.id.0);
        let (id, meta) = (rq.id, rq.meta);
        let stored = Stored {
            rq,
            fifo_time,
            start: now,
            queue: q,
        };
        let h = match self.free_rqs.pop() {
            Some(h) => {
                self.rqs[h as usize] = Some(stored);
                h
            }
            None => {
                self.rqs.push(Some(stored));
                u32::try_from(self.rqs.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let queue = &mut self.queues[q as usize];
        queue.sort.insert(key, h);
        if let Some(Some(s)) = self.rqs.get(h as usize) {
            queue.merge.add(u64::from(h), &s.rq);
        }
        queue.fifo.push_back((fifo_time, h, id));
        if meta {
            queue.prio_pending += 1;
        }
        self.rq_queued += 1;
        if !self.queues[q as usize].on_rr {
            self.add_rr(q, now);
        }
        let next = match self.queues[q as usize].next_rq {
            Some(n) => self.better(n, h, self.last_position),
            None => h,
        };
        self.queues[q as usize].next_rq = Some(next);
        h
    }

    /// Bookkeeping of a new (unmerged) request: think time, seekiness, idle window, end of an idle wait, and
    /// preemption of the active queue.
    fn rq_enqueued(&mut self, q: u32, flow: FlowId, h: u32, now: Time) {
        let Some((sector, sectors, bytes)) = self
            .rqs
            .get(h as usize)
            .and_then(|s| s.as_ref())
            .map(|s| (s.rq.sector, s.rq.sectors, s.rq.bytes()))
        else {
            return;
        };
        let (slice_idle, group_idle) = (self.p.slice_idle, self.p.group_idle);
        let queue = &mut self.queues[q as usize];
        let g = queue.group as usize;
        if queue.sync {
            if let Some(ctx) = self.flows.get_mut(&flow) {
                ctx.ttime.sample(now, slice_idle);
            }
            if let Some(pos) = queue.pos {
                self.groups[g].trees[pos.tree].ttime.sample(now, slice_idle);
            }
        }
        self.groups[g].ttime.sample(now, group_idle);
        queue.seek.record(sector, sectors, self.rotational);
        self.update_idle_window(q, flow);

        if self.active == Some(q) {
            let busy = self.busy_queues;
            let queue = &mut self.queues[q as usize];
            if queue.wait_request {
                if bytes > IDLE_WAKE_BYTES || busy > 1 {
                    queue.wait_request = false;
                } else {
                    queue.must_dispatch = true;
                }
            }
        } else if self.should_preempt(q, h, now) {
            self.preempt(q, now);
        }
    }

    /// The idle-window rules: cleared for a seeky queue that is not deep, when idling is off, or when the
    /// process thinks longer than `slice_idle`; set again when its think time becomes short.
    fn update_idle_window(&mut self, q: u32, flow: FlowId) {
        let slice_idle = self.p.slice_idle;
        let ttime = self.flows.get(&flow).map(|c| c.ttime);
        let queue = &mut self.queues[q as usize];
        if !queue.sync || queue.class == IoClass::Idle {
            return;
        }
        queue.note_depth();
        let mut enable = queue.idle_window;
        if ttime.is_none() || slice_idle == 0 || (!queue.deep && queue.seeky()) {
            enable = false;
        } else if let Some(t) = ttime.filter(|t| t.valid()) {
            enable = t.mean <= slice_idle;
        }
        queue.idle_window = enable;
    }

    /// Whether an emptied queue is worth idling for (the kernel's `cfq_should_idle`).
    fn should_idle(&self, q: u32) -> bool {
        let queue = &self.queues[q as usize];
        if self.p.slice_idle == 0 || queue.class == IoClass::Idle {
            return false;
        }
        if queue.idle_window && (self.rotational || !self.ncq.on()) {
            return true;
        }
        // Service-tree idling: the last sync queue on its tree (typically SYNC_NOIDLE) is idled for when the
        // tree's processes think briefly, so the tree as a whole keeps the disk.
        let g = &self.groups[queue.group as usize];
        let tree = queue.pos.map_or(tree_index(queue.class, queue.workload()), |p| p.tree);
        let st = &g.trees[tree];
        st.count() == 1 && queue.sync && !st.ttime.big(self.p.slice_idle)
    }

    /// IOPS mode: no idling on a queueing device, so groups are charged by dispatches instead of time.
    fn iops_mode(&self) -> bool {
        self.p.slice_idle == 0 && self.ncq.on()
    }

    /// Fires the idle timer if its time has come (at its own deadline, not at `now`).
    fn run_idle_timer(&mut self, now: Time) {
        let Some(a) = self.active else {
            return;
        };
        let t = self.idle_deadline;
        let queue = &mut self.queues[a as usize];
        if !queue.wait_request || now < t {
            return;
        }
        queue.wait_request = false;
        if queue.must_dispatch {
            return;
        }
        if queue.slice_used(t) {
            self.expire(t, false);
            return;
        }
        if self.busy_queues == 0 || !queue.is_empty() {
            return;
        }
        // Idling did not pay off: a deep queue loses that status.
        queue.deep = false;
        self.expire(t, false);
    }
}

impl Scheduler for Cfq {
    /// A legacy (single-queue block layer) elevator: sync and async requests have pools of their own.
    fn separate_sync_pool(&self) -> bool {
        true
    }

    /// `cfq_find_rq_fmerge` (CFQ's `elevator_merge_fn`) and the back-merge hash: merges happen within the
    /// process's own queue (an existing one: its sync queue, or its group's async queue of its class and priority).
    fn would_merge(&self, rq: &Request) -> bool {
        let Some(ctx) = self.flows.get(&rq.flow) else {
            return false;
        };
        let q = if rq.sync {
            ctx.sync_q
        } else {
            let g = &self.groups[ctx.group as usize];
            match ctx.info.class {
                IoClass::Idle => g.idle_async,
                c => g.async_queues[c.index()][usize::from(ctx.info.prio.min(7))],
            }
        };
        let Some(q) = q else { return false };
        let rqs = &self.rqs;
        self.queues[q as usize]
            .merge
            .find(rq, self.max_sectors, true, |h| {
                rqs.get(usize::try_from(h).ok()?)?.as_ref().map(|s| &s.rq)
            })
            .is_some()
    }

    /// `cfq_may_queue`: the process's queue (an existing one: sync, or none for async requests, whose shared
    /// queues are never idled for) that CFQ is idling for may allocate past a full pool, once per slot.
    fn may_queue_must(&mut self, flow: FlowId, sync: bool) -> bool {
        let Some(q) = sync.then(|| self.flows.get(&flow).and_then(|c| c.sync_q)).flatten() else {
            return false;
        };
        let queue = &mut self.queues[q as usize];
        if queue.wait_request && !queue.must_alloc_slice {
            queue.must_alloc_slice = true;
            return true;
        }
        false
    }

    fn name(&self) -> &'static str {
        "cfq"
    }

    fn flow_started(&mut self, flow: &FlowInfo, now: Time) {
        self.start_flow(flow, now);
    }

    fn flow_exited(&mut self, flow: FlowId, now: Time) {
        self.run_idle_timer(now);
        if let Some(q) = self.flows.remove(&flow).and_then(|c| c.sync_q) {
            self.drop_member(q, now);
        }
    }

    fn insert(&mut self, rq: Request, now: Time) {
        self.run_idle_timer(now);
        let flow = rq.flow;
        let (group, class, prio) = self.flow_params(flow, now);
        let q = if rq.sync {
            self.sync_queue_for(flow, group, class, prio)
        } else {
            self.async_queue_for(group, class, prio)
        };
        self.queued_parts += rq.parts();
        let found = {
            let rqs = &self.rqs;
            self.queues[q as usize].merge.find(&rq, self.max_sectors, true, |h| {
                rqs.get(usize::try_from(h).ok()?)?.as_ref().map(|s| &s.rq)
            })
        };
        let rq = match found.and_then(|(h, kind)| Some((u32::try_from(h).ok()?, kind))) {
            Some((h, kind)) => match self.merge_into(q, h, rq, kind) {
                None => return,
                Some(rq) => rq,
            },
            None => rq,
        };
        let h = self.add_request(q, rq, now);
        self.rq_enqueued(q, flow, h, now);
    }

    fn dispatch(&mut self, now: Time) -> Decision {
        self.run_idle_timer(now);
        self.dispatch_decision(now)
    }

    fn completed(&mut self, rq: &Request, now: Time) {
        self.run_idle_timer(now);
        self.request_completed(rq, now);
    }

    fn queued(&self) -> usize {
        self.queued_parts
    }

    /// 3.13's CFQ armed its idle timer in jiffies and wrote the defaults of `slice_idle` and `group_idle` as
    /// `HZ / 125` jiffies: from now on the timer fires on a tick, and each idle default becomes `HZ / 125` jiffies
    /// (0 below HZ=125: no idling), a value the user set being rounded up to whole jiffies as sysfs did.
    fn set_timer_hz(&mut self, hz: u32) {
        let jiffy = crate::tick::jiffy_ns(hz);
        self.jiffy = Some(jiffy);
        let default = tunables::DEFAULT_IDLE_MS as Time * crate::types::MS;
        let at_hz = |v: Time| {
            if v == default {
                crate::tick::hz_fraction(hz, 125)
            } else {
                crate::tick::round_up(v, jiffy)
            }
        };
        self.p.slice_idle = at_hz(self.p.slice_idle);
        self.p.group_idle = at_hz(self.p.group_idle);
    }

    fn check_invariants(&self) -> Result<(), crate::InvariantViolation> {
        self.check()
    }
}

#[cfg(test)]
mod more_tests {
    //! Tests of this file's rules by their effect (session 10, issue 21); the scenario tests are in `tests.rs`.

    use super::tests::{cfq, dispatched, rq};
    use super::*;
    use crate::types::MS;

    // A sync queue nobody uses any more is freed and its slot reused (`cfq_put_queue`): 100 processes that each
    // read once and exit, one after another, leave one queue slot, not 100.
    #[test]
    fn the_queues_of_exited_processes_are_reused() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        for f in 0..100u32 {
            let t = Time::from(f) * 20 * MS;
            c.flow_started(&FlowInfo::new(FlowId(f)), t);
            c.insert(rq(u64::from(f), f, u64::from(f) * 1000, true), t);
            let r = dispatched(&mut c, t).unwrap();
            c.completed(&r, t + MS);
            c.flow_exited(FlowId(f), t + 2 * MS);
        }
        assert_eq!(c.queues.len(), 1);
    }

    /// Flow 1's one read served at 0 and completed at 1 ms, flow 2's far read waiting since 0: CFQ idles for flow 1
    /// until 9 ms (8 ms of `slice_idle`).
    fn idling_for_flow_1_until_9_ms_with_flow_2_waiting() -> Cfq {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        c.insert(rq(1, 1, 0, true), 0);
        let r = dispatched(&mut c, 0).unwrap();
        c.insert(rq(2, 2, 1_900_000_000, true), 0);
        c.completed(&r, MS);
        assert_eq!(c.dispatch(MS), Decision::WaitUntil(9 * MS));
        c
    }

    // A process that exits is not idled for (`cfq_exit_cfqq` expires its active queue): flow 1's queue emptied at
    // 1 ms and CFQ idles for it until 9 ms; flow 1 exits at 2 ms, and flow 2, waiting since 0, is served at 2 ms.
    #[test]
    fn an_exiting_process_is_not_idled_for() {
        let mut c = idling_for_flow_1_until_9_ms_with_flow_2_waiting();
        c.flow_exited(FlowId(1), 2 * MS);
        assert_eq!(dispatched(&mut c, 2 * MS).unwrap().flow, FlowId(2));
    }

    // `cfq_should_preempt`: a metadata request preempts a queue that has no metadata pending. Flow 1's queue in
    // service holds an ordinary request that absorbed another by a back merge (still no metadata); flow 2's
    // metadata request arrives and is the next one served.
    #[test]
    fn a_metadata_request_preempts_a_queue_whose_merged_requests_are_ordinary() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        c.insert(rq(1, 1, 1000, true), 0);
        assert_eq!(dispatched(&mut c, 0).unwrap().id.0, 1);
        c.insert(rq(2, 1, 2000, true), 0);
        c.insert(rq(3, 1, 2008, true), 0);
        let mut m = rq(4, 2, 5_000_000, true);
        m.meta = true;
        c.insert(m, 0);
        assert_eq!(dispatched(&mut c, 0).unwrap().id.0, 4);
    }

    // A front merge re-sorts the grown request (`cfq_reposition_rq_rb`): flow 1's request at 1000 absorbs one at
    // 992 and goes out as one request of 16 sectors at 992; nothing of flow 1 is left, so CFQ idles for it after
    // its completion (until 9 ms) and then serves flow 2.
    #[test]
    fn a_front_merged_request_leaves_nothing_behind() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        c.insert(rq(1, 1, 1000, true), 0);
        c.insert(rq(2, 1, 992, true), 0);
        c.insert(rq(3, 2, 1_900_000_000, true), 0);
        let r = dispatched(&mut c, 0).unwrap();
        assert_eq!((r.flow, r.sector, r.sectors), (FlowId(1), 992, 16));
        c.completed(&r, MS);
        assert_eq!(c.dispatch(MS), Decision::WaitUntil(9 * MS));
        assert_eq!(dispatched(&mut c, 9 * MS).unwrap().flow, FlowId(2));
    }

    /// A lone reader (flow 1) with 10 ms slices (slice_sync=10) and 0.3 ms of think time: its slice runs from its
    /// first completion (1 ms) to 11 ms, its last request completes at 9.8 ms, and CFQ idles for it until 17.8 ms.
    /// Returns the policy at 9.8 ms, and 1 µs.
    fn lone_reader_idled_for_from_9_8_ms() -> (Cfq, Time) {
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_sync=10"]);
        let us = MS / 1000;
        c.insert(rq(1, 1, 0, true), 0);
        let mut r = dispatched(&mut c, 0).unwrap();
        for ms in 1..=9u64 {
            c.completed(&r, ms * MS);
            c.insert(rq(10 + ms, 1, ms * 16, true), ms * MS + 300 * us);
            r = dispatched(&mut c, ms * MS + 300 * us).unwrap();
        }
        c.completed(&r, 9 * MS + 800 * us);
        (c, us)
    }

    /// A lone reader with 10 ms slices (slice_sync=10) reads with 0.3 ms of think time; its slice runs from its
    /// first completion (1 ms) to 11 ms; its last request completes at 9.8 ms (1.2 ms before the end: no
    /// wait-busy stretch, which comes with 1 ms or less left) and CFQ idles for it (until 17.8 ms). At 11.2 ms, after the slice end, it queues `sectors` sectors (served at once), at 11.3 ms one more
    /// request, and at 11.5 ms flow 2 queues one. Returns whose request is served at 11.5 ms.
    fn served_after_a_request_past_the_slice_end(sectors: u32) -> FlowId {
        let (mut c, us) = lone_reader_idled_for_from_9_8_ms();
        let big = Request::new(
            RequestId(30),
            FlowId(1),
            crate::types::Direction::Read,
            true,
            400,
            sectors,
        );
        c.insert(big, 11 * MS + 200 * us);
        assert_eq!(dispatched(&mut c, 11 * MS + 200 * us).unwrap().id.0, 30);
        c.insert(rq(31, 1, 1000, true), 11 * MS + 300 * us);
        c.insert(rq(32, 2, 1_900_000_000, true), 11 * MS + 500 * us);
        dispatched(&mut c, 11 * MS + 500 * us).unwrap().flow
    }

    // `cfq_rq_enqueued`: a request for the queue CFQ idles for ends the wait (and, its slice being over, the slot)
    // if it is larger than a page (4096 bytes) or other queues are busy; a page or less from the only busy queue
    // only marks it must-dispatch, so it is served within the slot that has run out. Flow 2's request then
    // preempts it (`cfq_should_preempt`: the slice in service is used up) after a 4096-byte request (8 sectors),
    // but not after a 4608-byte one (9 sectors), which started a new slot for the lone reader.
    #[test]
    fn a_page_sized_request_keeps_the_used_slot_a_larger_one_starts_a_new_one() {
        assert_eq!(served_after_a_request_past_the_slice_end(8), FlowId(2));
        assert_eq!(served_after_a_request_past_the_slice_end(9), FlowId(1));
    }

    // `cfq_merged_request` (3.13) re-sorts a front-merged request (`cfq_reposition_rq_rb`), and `cfq_add_rq_rb`
    // chooses the queue's next request again between it and the current one (`cfq_choose_req`: forward distance,
    // a back seek within `back_seek_max` costing twice its distance). Flow 1's first request leaves the head at
    // 10 008. Queued behind it: 8 sectors at 9 908 (100 back: cost 200) and at 10 300 (292 ahead): the back seek is
    // the next request. 200 sectors at 10 100 front-merge into the one at 10 300, which now starts 92 sectors
    // ahead (cost 92 < 200): the grown request is the one served next.
    #[test]
    fn a_front_merged_request_that_came_nearer_the_head_is_served_next() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        c.insert(rq(1, 1, 10_000, true), 0);
        let r = dispatched(&mut c, 0).unwrap();
        c.insert(rq(2, 1, 9_908, true), 0);
        c.insert(rq(3, 1, 10_300, true), 0);
        let front = Request::new(
            RequestId(4),
            FlowId(1),
            crate::types::Direction::Read,
            true,
            10_100,
            200,
        );
        c.insert(front, 0);
        c.completed(&r, MS);
        let next = dispatched(&mut c, MS).unwrap();
        assert_eq!((next.id.0, next.sector, next.sectors), (3, 10_100, 208));
    }

    // `cfq_rq_enqueued`: a request for the queue CFQ idles for ends the wait at once, whatever its size, when other
    // queues are busy. Flow 1 reads alone as in `served_after_a_request_past_the_slice_end` (10 ms slice from 1 ms
    // to 11 ms, idle wait from 9.8 ms until 17.8 ms); flow 2's request far away arrives at 10.5 ms, during the
    // wait and before the slice end (so it preempts nothing: the emptied queue should idle and the request is not
    // close). Flow 1's next request, 8 sectors (a page), comes at 11.2 ms: the wait ends, and the slice being over
    // the slot ends with it (`cfq_select_queue`), so flow 2 is served. (Alone, the same request would be served
    // within the used slot: the test above.)
    #[test]
    fn with_another_queue_busy_a_page_sized_request_ends_the_wait_and_the_used_slot() {
        let (mut c, us) = lone_reader_idled_for_from_9_8_ms();
        c.insert(rq(32, 2, 1_900_000_000, true), 10 * MS + 500 * us);
        assert_eq!(c.dispatch(10 * MS + 500 * us), Decision::WaitUntil(17 * MS + 800 * us));
        c.insert(rq(30, 1, 400, true), 11 * MS + 200 * us);
        assert_eq!(dispatched(&mut c, 11 * MS + 200 * us).unwrap().flow, FlowId(2));
    }

    // The idle timer (`cfq_idle_slice_timer`, a kernel timer) ends the wait at its deadline whatever call comes
    // next; here it runs at its own deadline on the next call. Flow 1's queue emptied at 1 ms and CFQ idles for it
    // until 9 ms; the next call is flow 1's new request at 12 ms. The timer found the queue still empty at 9 ms,
    // with flow 2 busy, and ended flow 1's slot then (`cfq_slice_expired`): flow 2, waiting since 0, is served
    // first, and flow 1's late request does not resume the ended slot.
    #[test]
    fn the_idle_timer_ends_the_slot_at_its_deadline_even_if_the_next_call_is_later() {
        let mut c = idling_for_flow_1_until_9_ms_with_flow_2_waiting();
        c.insert(rq(3, 1, 8, true), 12 * MS);
        assert_eq!(dispatched(&mut c, 12 * MS).unwrap().flow, FlowId(2));
    }

    // `cfq_update_idle_window` (3.13) returns at once for an async queue, so an async queue never gets an idle
    // window, and `cfq_should_idle` says no for it (the service-tree rule is for sync queues). Flow 1 reads with
    // 0.3 ms of think time (a sync queue of its would keep an idle window), then writes: its async queue sends its
    // one write at 12.9 ms and is empty. Flow 2's write (priority 3: another async queue of the group) arrives at
    // 13 ms, while flow 1's write is on the device: flow 1's emptied async queue is not idled for (it is preempted,
    // `cfq_should_preempt`, and would be expired by `cfq_select_queue` anyway), and flow 2's write is sent at once.
    #[test]
    fn an_async_queue_has_no_idle_window_and_gives_way_once_emptied() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        let us = MS / 1000;
        c.flow_started(&FlowInfo::new(FlowId(2)).with_class(IoClass::Be, 3), 0);
        c.insert(rq(1, 1, 0, true), 0);
        let mut r = dispatched(&mut c, 0).unwrap();
        for i in 1..=3u64 {
            let t = i * 1300 * us;
            c.completed(&r, t - 300 * us);
            c.insert(rq(1 + i, 1, i * 8, true), t);
            r = dispatched(&mut c, t).unwrap();
        }
        c.completed(&r, 4900 * us);
        c.insert(rq(10, 1, 1_000_000_000, false), 5 * MS);
        assert_eq!(c.dispatch(5 * MS), Decision::WaitUntil(12900 * us));
        let w = dispatched(&mut c, 12900 * us).unwrap();
        assert_eq!(w.id.0, 10);
        c.insert(rq(20, 2, 1_500_000_000, false), 13 * MS);
        assert_eq!(dispatched(&mut c, 13 * MS).map(|r| r.id.0), Some(20));
    }

    // 3.13 `cfq_update_idle_window`: with slice_idle 0 no sync queue keeps an idle window (`!cfqd->cfq_slice_idle`
    // clears it, whatever the think time or seek pattern), so sequential and seeky readers alike go on the
    // SYNC_NOIDLE tree and are served there in key order (slice_idle=0 and group_idle=0: nothing is idled for).
    // First, alone, flow 2 reads 6 times far apart (so it is seeky: 5 seeky requests of its last 32), then flows
    // 1 and 3 read once each (a new queue starts with an idle window and sits on the SYNC tree until it is placed
    // again, so each queue is placed once before the test proper). At 100 ms flow 1 queues 3 requests 8 sectors
    // apart (it preempts flow 3's emptied queue, so it is served first), flow 2 one (key 11 ms: 100 ms less the
    // 89 ms of slice it had left when flow 1 preempted it at 12 ms, `slice_resid`) and flow 3, sequential, 3 (key
    // 165 ms: 80 ms of `cfq_slice_offset` for the other busy queue, less 15 ms of resid). When flow 1's queue has
    // emptied, the workload in service goes on with the first queue of its tree, the tree still holding queues and
    // its workload slice (300 ms from 12 ms) not having run out (`choose_wl_class_and_type`): flow 2, whose key is
    // the earlier. Had the two sequential readers kept an idle window (the SYNC tree, a workload of their own),
    // flow 3 would have been next.
    #[test]
    fn with_slice_idle_0_sequential_and_seeky_readers_share_one_tree() {
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_idle=0", "group_idle=0"]);
        let mut t = 0;
        for (i, (flow, sector)) in (0..6u64)
            .map(|i| (2, (i + 1) * 10_000_000))
            .chain([(1, 1_000), (3, 2_000)])
            .enumerate()
        {
            c.insert(rq(i as u64, flow, sector, true), t);
            let r = dispatched(&mut c, t).unwrap();
            assert_eq!(r.flow.0, flow);
            c.completed(&r, t + MS);
            t += 2 * MS;
        }
        let t = 100 * MS;
        for (id, flow, sector) in [
            (10, 1, 0),
            (11, 1, 16),
            (12, 1, 32),
            (13, 2, 900_000_000),
            (14, 3, 500_000_000),
            (15, 3, 500_000_016),
            (16, 3, 500_000_032),
        ] {
            c.insert(rq(id, flow, sector, true), t);
        }
        let mut order = Vec::new();
        for k in 0..5u64 {
            let now = t + k * MS;
            let r = dispatched(&mut c, now).unwrap();
            order.push(r.flow.0);
            c.completed(&r, now + MS);
        }
        assert_eq!(order, [1, 1, 1, 2, 3]);
    }

    // `cfq_may_queue` (3.13, `__cfq_may_queue`): the process whose sync queue CFQ idles for may take a request past
    // a full pool (ELV_MQUEUE_MUST), once in the slot, so that the request CFQ waits for is not held up by the pool;
    // a queue that is not waited for, another process's, and async requests (the shared async queues are never
    // idled for) get no exemption. Flow 1's queue empties at 1 ms and CFQ idles for it until 9 ms.
    #[test]
    fn only_the_process_idled_for_may_allocate_past_a_full_pool_once_per_slot() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        c.insert(rq(1, 1, 0, true), 0);
        let r = dispatched(&mut c, 0).unwrap();
        c.insert(rq(2, 2, 1_900_000_000, true), 0);
        assert!(
            !c.may_queue_must(FlowId(1), true),
            "not idled for while its request is on the device"
        );
        c.completed(&r, MS);
        assert_eq!(c.dispatch(MS), Decision::WaitUntil(9 * MS));
        assert!(!c.may_queue_must(FlowId(2), true), "not the queue idled for");
        assert!(!c.may_queue_must(FlowId(1), false), "async requests");
        assert!(c.may_queue_must(FlowId(1), true), "the first ask of the slot");
        assert!(!c.may_queue_must(FlowId(1), true), "only once per slot");
    }

    // The legacy block layer asks the elevator whether a new request would merge before it takes one from the pool
    // (`elv_merge`: the back-merge hash and `cfq_merge`'s front-merge lookup, `cfq_allow_merge` allowing a merge
    // only into the queue the request would go to). Flow 1 has a read queued at 1000 and a write at 3000: its read
    // just after or just before the read would merge, and its write just after the write; a read with a gap, a
    // read next to the write, flow 2's read next to flow 1's (another process's queue) would not, and neither
    // would anything of a process that has no queue yet.
    #[test]
    fn a_request_would_merge_only_next_to_one_of_the_queue_it_goes_to() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        c.insert(rq(1, 1, 1000, true), 0);
        c.insert(rq(2, 1, 3000, false), 0);
        c.insert(rq(3, 2, 9000, true), 0);
        assert!(c.would_merge(&rq(10, 1, 1008, true)), "back merge");
        assert!(c.would_merge(&rq(11, 1, 992, true)), "front merge");
        assert!(c.would_merge(&rq(12, 1, 3008, false)), "a write after the write");
        assert!(!c.would_merge(&rq(13, 1, 1016, true)), "a gap of 8 sectors");
        assert!(!c.would_merge(&rq(14, 1, 3008, true)), "a read after the write");
        assert!(!c.would_merge(&rq(15, 2, 1008, true)), "another process's queue");
        assert!(!c.would_merge(&rq(16, 3, 1008, true)), "a process with no queue");
    }
}
