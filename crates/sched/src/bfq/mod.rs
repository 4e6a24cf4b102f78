//! BFQ, Budget Fair Queueing (`schedulers.md` §1): one queue per process for sync I/O and shared async queues per
//! (group, class, priority); B-WF2Q+ chooses which queue gets the device next, and the chosen queue keeps it,
//! possibly with idling, until its budget (sectors) is used, its budget timeout passes, or it runs out of
//! requests.
//!
//! Module map: [`wf2q`] the fair-queueing engine, [`budget`] budgets and expiration feedback, [`idling`] think
//! time, seekiness, NCQ detection and the decision to idle, [`peak_rate`] the rate estimator, [`weight_raising`]
//! the low-latency heuristics, [`burst`] large-burst detection, [`fifo`] requests inside a queue,
//! [`queue_merge`] early queue merging and splitting, [`inject`] injection while idling, [`tunables`] sysfs
//! tunables. This file holds the queues and the main dispatch, expiration and completion logic (§1.4–1.6).
//!
//! Mapping to the [`Scheduler`] interface: a flow is a process context; its sync requests go to its own queue
//! (or a shared one after an early merge), its async requests to the shared async queue of its (group, class,
//! priority). The idle timer is a [`Decision::WaitUntil`]; the timer-expiry logic runs at the first `dispatch`
//! at or after that time. Budget timeouts are checked lazily, as in the kernel. Preemption expires the
//! in-service queue so that the next `dispatch` picks the newcomer.
//!
//! Where this differs from the kernel (all deliberate, see the named items):
//! - a timed-out queue that is not slow is charged only its service (the older kernels' rule), which keeps
//!   sector fairness under zone bit recording ([`budget::time_charge_within_timeout`]);
//! - weight changes, raising included, take effect at the next (re)activation or requeue, not at dispatch;
//! - "the root's next entity is not the in-service one" (may-preempt) is evaluated by comparing the in-service
//!   entity, requeued with its service so far, against the best other entity ([`wf2q::Wf2q::in_service_still_next`]);
//! - groups are one level deep under the root (a [`GroupId`] has no parent); their weight defaults to 100 and is
//!   set with [`Bfq::set_group_weight`];
//! - an asymmetric scenario counts "more than one group with pending requests" (newest kernels), the root
//!   included; "newest kernels require the default weight" for interactive raising is not applied;
//! - early queue merging is checked at insertion only (there is no separate bio-merge hook), without "stable
//!   merge"; a merged flow's already queued requests stay in its old queue until served;
//! - a fresh slot whose budget is below its next request's charge grows the budget instead of expiring
//!   (prevents a livelock after a continued slot with almost no budget left).

pub mod budget;
pub mod burst;
pub mod fifo;
pub mod idling;
pub mod ids;
pub mod inject;
pub mod peak_rate;
pub mod queue_merge;
pub mod tunables;
pub mod weight_raising;
pub mod wf2q;

use crate::counter;
use crate::device::DeviceInfo;
use crate::merge::{IntMap, MergeKind};
use crate::scheduler::Scheduler;
use crate::tunables::TunableValues;
use crate::types::{Decision, Direction, FlowId, FlowInfo, GroupId, IoClass, Request, Time, IOPRIO_LEVELS, SEC};
use budget::{Budgets, Expiration};
use fifo::{QueueRqs, Store};
use idling::{HwTag, IdleFacts, ThinkTime};
use ids::{EntityId, QueueId, SdId, SlotId};
use peak_rate::PeakRate;
use std::collections::{BTreeMap, BTreeSet};
use tunables::Params;
use wf2q::{Owner, Wf2q};

pub use tunables::TUNABLES;

/// `weight = (IOPRIO_LEVELS - prio) * WEIGHT_CONVERSION_COEFF`: prio 0 → 80, default prio 4 → 40, prio 7 → 10.
pub const WEIGHT_CONVERSION_COEFF: u32 = 10;

/// Largest accepted weight of a queue or group.
pub const MAX_WEIGHT: u32 = 1000;

/// Default weight of a group (cgroup `io.bfq.weight`).
pub const DEFAULT_GROUP_WEIGHT: u32 = 100;

/// A queue that comes back within this many `slice_idle`s of its last completion arrived "in time": it may
/// continue its old slot, and counts towards being I/O bound again.
pub const IN_TIME_SLICES: u64 = 3;

/// Consecutive in-time arrivals that make a queue I/O bound again (`bfq_requests_within_timer`).
pub const REQUESTS_WITHIN_TIMER: u32 = 120;

/// A TOO_IDLE expiration with at most this percentage of the budget used clears IO_bound.
pub const IO_BOUND_MIN_USED_PERCENT: u64 = 20;

/// Async queues per group: 8 RT levels, 8 BE levels, and one IDLE queue.
const ASYNC_QUEUES: usize = 2 * IOPRIO_LEVELS as usize + 1;

/// Per-flow state (the kernel's `bfq_io_cq`).
#[derive(Debug, Clone)]
pub(crate) struct FlowCtx {
    pub(crate) info: FlowInfo,
    /// The flow's sync queue (possibly shared after a merge), or [`NONE`].
    pub(crate) sync_q: Option<QueueId>,
    /// State saved when the flow's queue was merged, restored on split.
    pub(crate) saved: Option<queue_merge::Saved>,
}

/// Per-group state.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// Index of the group's sched data in the [`Wf2q`].
    pub(crate) sd: SdId,
    /// Shared async queues (RT 0..8, BE 8..16, IDLE 16), [`NONE`] until used.
    pub(crate) async_q: [Option<QueueId>; ASYNC_QUEUES],
    /// Queues of the group with requests queued or in the device.
    pub(crate) pending: u32,
    /// Busy sync queues by the sector of their next request, for early queue merging.
    pub(crate) pos: BTreeSet<(u64, QueueId)>,
}

/// One BFQ queue.
#[derive(Debug, Clone, Default)]
pub(crate) struct Queue {
    pub(crate) live: bool,
    pub(crate) entity: EntityId,
    pub(crate) group: u32,
    pub(crate) class: IoClass,
    pub(crate) orig_weight: u32,
    pub(crate) sync: bool,
    /// Flows using this queue as their sync queue.
    pub(crate) refs: u32,
    pub(crate) rqs: QueueRqs,
    /// Requests of this queue in the device.
    pub(crate) dispatched: u32,
    /// On the scheduler (backlogged, or kept for guarantees after a preemption).
    pub(crate) busy: bool,
    /// The queue's own maximum budget (sectors).
    pub(crate) max_budget: u64,
    /// Budget timeout of the current slot (ns); also "became idle at" while not busy (§1.3 step 4).
    pub(crate) budget_timeout: Time,
    /// Start of the current slot (ns).
    pub(crate) slot_start: Time,
    /// The FIFO has been consulted in this slot.
    pub(crate) fifo_checked: bool,
    /// Idle timer armed for this queue.
    pub(crate) wait_request: bool,
    /// Expired empty with budget left: may continue its slot (§1.6).
    pub(crate) non_blocking_wait_rq: bool,
    pub(crate) io_bound: bool,
    pub(crate) requests_within_timer: u32,
    pub(crate) ttime: ThinkTime,
    pub(crate) has_short_ttime: bool,
    pub(crate) seek_history: u32,
    /// End sector of the last enqueued request.
    pub(crate) last_request_pos: u64,
    /// Last completion of a request of this queue (ns), `None` before any.
    pub(crate) last_end_request: Option<Time>,
    /// Became idle at (ns); `None` = never busy, counts as idle forever.
    pub(crate) became_idle_at: Option<Time>,
    /// Last arrival (ns), for async raising.
    pub(crate) last_arrival: Option<Time>,
    /// Weight currently counted in the weights map (non-raised queues with pending requests).
    pub(crate) weight_counted: Option<u32>,
    pub(crate) pending_counted: bool,
    pub(crate) pos_key: Option<u64>,
    pub(crate) wr: weight_raising::WrState,
    pub(crate) burst: burst::QueueBurst,
    pub(crate) merge: queue_merge::QueueMerge,
    pub(crate) inject: inject::QueueInject,
}

/// The BFQ policy.
pub struct Bfq {
    pub(crate) p: Params,
    pub(crate) rotational: bool,
    pub(crate) max_sectors: u32,
    pub(crate) queue_depth: u32,
    pub(crate) wf: Wf2q,
    pub(crate) queues: Vec<Queue>,
    free_queues: Vec<usize>,
    pub(crate) flows: IntMap<u32, FlowCtx>,
    pub(crate) groups: Vec<Group>,
    group_index: IntMap<u32, u32>,
    pub(crate) store: Store,
    /// Dispatched requests not yet completed: request id → queue.
    in_flight: IntMap<u64, QueueId>,
    pub(crate) in_service: Option<QueueId>,
    pub(crate) busy_queues: u32,
    pub(crate) busy_per_class: [u32; 3],
    pub(crate) wr_busy_queues: u32,
    pub(crate) rq_in_driver: u32,
    queued: usize,
    /// Idle-timer deadline (ns).
    pub(crate) timer: Option<Time>,
    /// When the current idling started (ns).
    pub(crate) idle_start: Time,
    pub(crate) hw: HwTag,
    pub(crate) peak: PeakRate,
    pub(crate) budgets: Budgets,
    pub(crate) burst: burst::BurstState,
    /// Weights of non-raised queues with pending requests → count.
    pub(crate) weights: BTreeMap<u32, u32>,
    pub(crate) groups_with_pending: u32,
    /// End sector of the last dispatched request.
    pub(crate) last_position: u64,
    /// End sector of the last request dispatched by the current in-service queue; `None` until the queue set in
    /// service dispatches (the merge test asks where *that* queue is, not where the head last went).
    pub(crate) in_serv_last_pos: Option<u64>,
    pub(crate) inject: inject::DeviceInject,
    /// Counters, for tests and benchmarks.
    pub(crate) stats: Stats,
}

/// Event counters of the policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Service slots started.
    pub slots: u64,
    /// Expirations by preemption.
    pub preemptions: u64,
    /// Idle timers armed.
    pub idles: u64,
}

/// What `select_queue` decided.
enum Pick {
    /// Serve this queue's next request.
    Serve(QueueId),
    /// Nothing now.
    Wait,
}

impl Bfq {
    /// A BFQ policy for `dev` with the given parameters.
    pub fn new(dev: &DeviceInfo, p: Params) -> Self {
        let mut b = Bfq {
            budgets: Budgets::new(p.max_budget),
            p,
            rotational: dev.rotational,
            max_sectors: dev.max_sectors.max(1),
            queue_depth: dev.queue_depth.max(1),
            wf: Wf2q::new(),
            queues: Vec::new(),
            free_queues: Vec::new(),
            flows: IntMap::default(),
            groups: Vec::new(),
            group_index: IntMap::default(),
            store: Store::default(),
            in_flight: IntMap::default(),
            in_service: None,
            busy_queues: 0,
            busy_per_class: [0; 3],
            wr_busy_queues: 0,
            rq_in_driver: 0,
            queued: 0,
            timer: None,
            idle_start: 0,
            hw: HwTag::default(),
            peak: PeakRate::new(dev.rotational),
            burst: burst::BurstState::default(),
            weights: BTreeMap::new(),
            groups_with_pending: 0,
            last_position: 0,
            in_serv_last_pos: None,
            inject: inject::DeviceInject::default(),
            stats: Stats::default(),
        };
        b.groups.push(Group {
            sd: SdId::ROOT,
            async_q: [None; ASYNC_QUEUES],
            pending: 0,
            pos: BTreeSet::new(),
        });
        b.group_index.insert(0, 0);
        b
    }

    /// Registry constructor.
    pub fn build(dev: &DeviceInfo, t: &TunableValues) -> Box<dyn Scheduler> {
        Box::new(Bfq::new(dev, Params::from_values(t)))
    }

    /// Sets the weight (1..=1000) of group `g` (created if new); applied lazily at its next (re)activation.
    pub fn set_group_weight(&mut self, g: GroupId, weight: u32) {
        let gi = self.group_of(g);
        let sd = self.groups[gi as usize].sd;
        self.wf.set_group_weight(sd, weight.clamp(1, MAX_WEIGHT));
    }

    /// Event counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Current maximum budget (sectors).
    pub fn max_budget(&self) -> u64 {
        self.budgets.max_budget()
    }

    pub(crate) fn group_index_get(&self, g: GroupId) -> Option<u32> {
        self.group_index.get(&g.0).copied()
    }

    pub(crate) fn group_of(&mut self, g: GroupId) -> u32 {
        if let Some(&i) = self.group_index.get(&g.0) {
            return i;
        }
        let sd = self.wf.new_group(SdId::ROOT, DEFAULT_GROUP_WEIGHT);
        let i = self.groups.len() as u32;
        self.groups.push(Group {
            sd,
            async_q: [None; ASYNC_QUEUES],
            pending: 0,
            pos: BTreeSet::new(),
        });
        self.group_index.insert(g.0, i);
        i
    }

    fn ensure_flow(&mut self, f: FlowId) {
        self.flows.entry(f.0).or_insert_with(|| FlowCtx {
            info: FlowInfo::new(f),
            sync_q: None,
            saved: None,
        });
    }

    /// Weight of a flow: explicit, or `(8 - prio) * 10`; IDLE-class flows use the lowest priority.
    pub fn flow_weight(info: &FlowInfo) -> u32 {
        if let Some(w) = info.weight {
            return w.clamp(1, MAX_WEIGHT);
        }
        let prio = if info.class == IoClass::Idle {
            IOPRIO_LEVELS - 1
        } else {
            info.prio.min(IOPRIO_LEVELS - 1)
        };
        u32::from(IOPRIO_LEVELS - prio) * WEIGHT_CONVERSION_COEFF
    }

    pub(crate) fn new_queue(&mut self, group: u32, info: &FlowInfo, sync: bool, now: Time) -> QueueId {
        let qi = QueueId::at(self.free_queues.pop().unwrap_or_else(|| {
            self.queues.push(Queue::default());
            self.queues.len() - 1
        }));
        let weight = Self::flow_weight(info);
        let sd = self.groups.get(group as usize).map_or(SdId::ROOT, |g| g.sd);
        let e = self
            .wf
            .new_entity(sd, weight, info.class.index() as u8, Owner::Queue(qi));
        let max_budget = self.budgets.new_queue_max();
        self.wf.set_budget(e, max_budget);
        let q = Queue {
            live: true,
            entity: e,
            group,
            class: info.class,
            orig_weight: weight,
            sync,
            refs: 0,
            max_budget,
            io_bound: true,
            has_short_ttime: sync,
            seek_history: 1,
            wr: weight_raising::WrState::new(now),
            burst: burst::QueueBurst::new(now),
            inject: inject::QueueInject::new(now),
            ..Queue::default()
        };
        if let Some(slot) = self.queues.get_mut(qi.slot()) {
            *slot = q;
        }
        qi
    }

    fn async_queue(&mut self, flow: FlowId, now: Time) -> QueueId {
        let info = self
            .flows
            .get(&flow.0)
            .map(|c| c.info.clone())
            .unwrap_or_else(|| FlowInfo::new(flow));
        let gi = self.group_of(info.group);
        let idx = match info.class {
            IoClass::Rt => usize::from(info.prio.min(7)),
            IoClass::Be => 8 + usize::from(info.prio.min(7)),
            IoClass::Idle => 16,
        };
        if let Some(cur) = self.groups[gi as usize].async_q[idx] {
            return cur;
        }
        // Shared async queues carry the class weight, never a per-flow explicit weight.
        let mut shared = info.clone();
        shared.weight = None;
        let q = self.new_queue(gi, &shared, false, now);
        self.qm(q).refs = 1;
        self.groups[gi as usize].async_q[idx] = Some(q);
        q
    }

    fn sync_queue(&mut self, flow: FlowId, now: Time) -> QueueId {
        let cur = self.flows.get(&flow.0).and_then(|c| c.sync_q);
        if let Some(cur) = cur.filter(|&c| self.is_live(c)) {
            return cur;
        }
        let info = self
            .flows
            .get(&flow.0)
            .map(|c| c.info.clone())
            .unwrap_or_else(|| FlowInfo::new(flow));
        let gi = self.group_of(info.group);
        let q = self.new_queue(gi, &info, true, now);
        self.qm(q).refs = 1;
        self.qm(q).merge.owner = flow.0;
        if let Some(c) = self.flows.get_mut(&flow.0) {
            c.sync_q = Some(q);
        }
        self.burst_on_new_queue(q, now);
        q
    }

    pub(crate) fn q(&self, q: QueueId) -> &Queue {
        &self.queues[q.slot()]
    }

    pub(crate) fn qm(&mut self, q: QueueId) -> &mut Queue {
        &mut self.queues[q.slot()]
    }

    /// True if `q` names a live queue.
    pub(crate) fn is_live(&self, q: QueueId) -> bool {
        self.queues.get(q.slot()).is_some_and(|x| x.live)
    }

    pub(crate) fn raised(&self, q: QueueId) -> bool {
        self.q(q).wr.coeff > 1
    }

    pub(crate) fn budget_left(&self, q: QueueId) -> u64 {
        self.wf.budget_left(self.q(q).entity)
    }

    pub(crate) fn entity_budget(&self, q: QueueId) -> u64 {
        self.wf.entity(self.q(q).entity).map_or(0, |e| e.budget)
    }

    pub(crate) fn entity_service(&self, q: QueueId) -> u64 {
        self.wf.entity(self.q(q).entity).map_or(0, |e| e.service)
    }

    /// Service to charge for the request in `slot` of queue `q`.
    pub(crate) fn charge_of(&self, q: QueueId, slot: SlotId) -> u64 {
        let sectors = self.store.rq(slot).map_or(1, |r| r.sectors);
        let qq = self.q(q);
        let asym = !qq.sync && qq.wr.coeff == 1 && self.asymmetric(q);
        budget::charge(sectors, qq.sync, qq.wr.coeff > 1, asym)
    }

    pub(crate) fn next_charge(&self, q: QueueId) -> u64 {
        self.q(q).rqs.next.map_or(0, |s| self.charge_of(q, s))
    }

    pub(crate) fn seeky(&self, q: QueueId) -> bool {
        idling::is_seeky(self.q(q).seek_history)
    }

    /// `bfq_asymmetric_scenario`: weights of non-raised pending queues differ and `q` is not at the smallest,
    /// or several classes are busy, or more than one group has pending requests.
    pub(crate) fn asymmetric(&self, q: QueueId) -> bool {
        let varied = self.weights.len() > 1;
        let smallest = self.weights.keys().next().copied();
        let qw = self.q(q).weight_counted;
        let varied_and_not_smallest = varied && (qw.is_none() || qw != smallest);
        let classes = self.busy_per_class.iter().filter(|&&n| n > 0).count();
        varied_and_not_smallest || classes > 1 || self.groups_with_pending > 1
    }

    pub(crate) fn idle_facts(&self, q: QueueId) -> IdleFacts {
        let qq = self.q(q);
        IdleFacts {
            has_refs: qq.refs > 0,
            strict: self.p.strict_guarantees,
            slice_idle_zero: self.p.slice_idle == 0,
            sync: qq.sync,
            idle_class: qq.class == IoClass::Idle,
            rotational: self.rotational,
            hw_tag: self.hw.queueing(),
            seeky: idling::is_seeky(qq.seek_history),
            io_bound: qq.io_bound,
            short_ttime: qq.has_short_ttime,
            wr_busy: self.wr_busy_queues,
            busy: self.busy_queues,
            raised: qq.wr.coeff > 1,
            in_driver: self.rq_in_driver,
            dispatched: qq.dispatched,
            // Queues of a large burst are idled for only when that boosts throughput.
            asymmetric: self.asymmetric(q) && !qq.burst.in_large_burst,
        }
    }

    pub(crate) fn better_to_idle(&self, q: QueueId) -> bool {
        idling::better_to_idle(&self.idle_facts(q))
    }

    fn must_idle(&self, q: QueueId) -> bool {
        self.q(q).rqs.is_empty() && self.better_to_idle(q)
    }

    fn budget_timed_out(&self, q: QueueId, now: Time) -> bool {
        now >= self.q(q).budget_timeout
    }

    /// The budget timeout fires only if the queue is not idling, or still has a third of its budget left.
    fn may_expire_for_budget_timeout(&self, q: QueueId, now: Time) -> bool {
        let qq = self.q(q);
        let budget = self.entity_budget(q);
        (!qq.wait_request || self.budget_left(q) >= budget / 3) && self.budget_timed_out(q, now)
    }

    /// Keeps the weights map and per-group pending counts in step with the queue's state.
    pub(crate) fn sync_counters(&mut self, q: QueueId) {
        let qq = self.q(q);
        let pending = qq.live && (qq.busy || qq.dispatched > 0);
        let want = (pending && qq.wr.coeff == 1).then_some(qq.orig_weight);
        let had = qq.weight_counted;
        if want != had {
            if let Some(w) = had {
                if let Some(n) = self.weights.get_mut(&w) {
                    *n -= 1;
                    if *n == 0 {
                        self.weights.remove(&w);
                    }
                }
            }
            if let Some(w) = want {
                *self.weights.entry(w).or_insert(0) += 1;
            }
            self.qm(q).weight_counted = want;
        }
        let qq = self.q(q);
        if pending != qq.pending_counted {
            let g = qq.group as usize;
            self.qm(q).pending_counted = pending;
            if let Some(gr) = self.groups.get_mut(g) {
                if pending {
                    gr.pending += 1;
                    if gr.pending == 1 {
                        self.groups_with_pending += 1;
                    }
                } else {
                    counter::dec(&mut gr.pending, "group pending queues");
                    if gr.pending == 0 {
                        counter::dec(&mut self.groups_with_pending, "groups_with_pending");
                    }
                }
            }
        }
    }

    fn add_busy(&mut self, q: QueueId) {
        if self.q(q).busy {
            return;
        }
        self.qm(q).busy = true;
        self.busy_queues += 1;
        let c = self.q(q).class.index();
        self.busy_per_class[c] += 1;
        if self.raised(q) {
            self.wr_busy_queues += 1;
        }
        self.sync_counters(q);
    }

    fn del_busy(&mut self, q: QueueId) {
        if !self.q(q).busy {
            return;
        }
        self.qm(q).busy = false;
        counter::dec(&mut self.busy_queues, "busy_queues");
        let c = self.q(q).class.index();
        counter::dec(&mut self.busy_per_class[c], "busy_per_class");
        if self.raised(q) {
            counter::dec(&mut self.wr_busy_queues, "wr_busy_queues");
        }
        self.pos_remove(q);
        self.sync_counters(q);
    }

    /// Frees a queue nobody uses any more: no flow refers to it and it holds no request.
    pub(crate) fn maybe_free(&mut self, q: QueueId) {
        let qq = self.q(q);
        if !qq.live || qq.refs > 0 || qq.busy || qq.dispatched > 0 || !qq.rqs.is_empty() || self.in_service == Some(q) {
            return;
        }
        let e = qq.entity;
        self.pos_remove(q);
        self.sync_counters(q);
        self.burst_forget(q);
        self.wf.free_entity(e);
        self.queues[q.slot()] = Queue::default();
        self.free_queues.push(q.slot());
    }

    /// `bfq_updated_next_req`: the next request of a busy, not in-service queue changed: its budget follows.
    fn updated_next_req(&mut self, q: QueueId) {
        if self.in_service == Some(q) || !self.q(q).busy || self.q(q).rqs.next.is_none() {
            return;
        }
        let nb = self.q(q).max_budget.max(self.next_charge(q));
        if nb != self.entity_budget(q) {
            let e = self.q(q).entity;
            self.wf.reposition(e, nb);
        }
    }

    fn insert_rq(&mut self, rq: Request, now: Time) {
        let flow = rq.flow;
        self.queued += rq.parts();
        // Fast path: the flow is known and its sync queue is live and not being split.
        let cur = self.flows.get(&flow.0).and_then(|c| c.sync_q);
        let fast = cur.filter(|&c| rq.sync && self.is_live(c) && !self.q(c).merge.split_coop);
        let q = if let Some(cur) = fast {
            self.maybe_merge_on_insert(flow, cur, &rq, now)
        } else if rq.sync {
            self.ensure_flow(flow);
            self.maybe_split(flow, now);
            let q = self.sync_queue(flow, now);
            self.maybe_merge_on_insert(flow, q, &rq, now)
        } else {
            self.ensure_flow(flow);
            self.async_queue(flow, now)
        };
        // Request merging, only with a request of the same queue.
        let store = &self.store;
        if let Some((h, kind)) = store.index.find(&rq, self.max_sectors, true, |h| {
            store.at_handle(h).filter(|(_, s)| s.queue == q).map(|(_, s)| &s.rq)
        }) {
            // The closure above found a live slot at handle `h`, so the merge cannot miss.
            if let Some(slot) = self.store.at_handle(h).map(|(k, _)| k) {
                if let Some((old, new)) = self.store.merge_into(slot, rq, kind) {
                    if kind == MergeKind::Front {
                        self.qm(q).rqs.resort(slot, old, new);
                        self.pos_update(q);
                    }
                }
                return;
            }
        }
        let fifo_time = now.saturating_add(self.p.fifo_expire[usize::from(rq.sync)]);
        let (sector, sectors, sync) = (rq.sector, rq.sectors, rq.sync);
        let slot = self.store.alloc(rq, q, fifo_time);
        self.add_request(q, slot, sector, sectors, sync, now);
    }

    /// `bfq_add_request` + `bfq_rq_enqueued`.
    fn add_request(&mut self, q: QueueId, slot: SlotId, sector: u64, sectors: u32, sync: bool, now: Time) {
        // Think time and seekiness of sync queues.
        if self.q(q).sync {
            let si = self.p.slice_idle;
            let rot = self.rotational;
            let exited = self.q(q).refs == 0;
            let qq = self.qm(q);
            if let Some(last) = qq.last_end_request {
                qq.ttime.update(now.saturating_sub(last), si);
            }
            let seeky = peak_rate::seeky(qq.last_request_pos, sector, sectors, rot);
            qq.seek_history = idling::push_seek(qq.seek_history, seeky);
            qq.has_short_ttime = qq.ttime.short(exited, si);
        }
        self.qm(q).last_request_pos = sector.saturating_add(u64::from(sectors));
        let prev_next = self.q(q).rqs.next;
        let (last, bm, pen) = (self.last_position, self.p.back_seek_max, self.p.back_seek_penalty);
        {
            let store = &self.store;
            let qq = &mut self.queues[q.slot()];
            qq.rqs.add(slot, store, last, bm, pen);
        }
        if !self.q(q).busy {
            self.handle_idle_busy_switch(q, now);
        } else {
            self.async_raise_on_arrival(q, sync, now);
            if prev_next != self.q(q).rqs.next {
                self.updated_next_req(q);
            }
        }
        self.qm(q).last_arrival = Some(now);
        self.pos_update(q);
        self.waker_on_arrival(q, now);
        // Arrival while idling.
        if self.in_service == Some(q) && self.q(q).wait_request {
            let small = self.q(q).rqs.len() == 1 && sectors < idling::SMALL_REQ_SECTORS;
            let f = self.idle_facts(q);
            let boosts = idling::boosts_throughput(&f) && self.wr_busy_queues == 0;
            let timed_out = self.budget_timed_out(q, now);
            if small && boosts && !timed_out {
                return;
            }
            self.cancel_timer();
            if timed_out {
                self.expire(q, Expiration::BudgetTimeout, now);
            }
        }
    }

    /// `bfq_bfqq_handle_idle_busy_switch`: an idle queue receives a request.
    fn handle_idle_busy_switch(&mut self, q: QueueId, now: Time) {
        self.burst_maybe_clear(q, now);
        let arrived_in_time = self
            .q(q)
            .last_end_request
            .is_some_and(|t| now <= t.saturating_add(IN_TIME_SLICES * self.p.slice_idle));
        let (interactive, soft_rt) = self.wr_candidate(q, now);
        let wr_or_deserves = self.p.low_latency && (self.raised(q) || (self.q(q).sync && (interactive || soft_rt)));
        // Budget for the activation (§1.6).
        let e = self.q(q).entity;
        let left = self.budget_left(q);
        let backshift = self.q(q).non_blocking_wait_rq;
        let wants_preempt = if backshift && arrived_in_time && left > 0 {
            let b = left.min(self.q(q).max_budget);
            self.wf.set_budget(e, b);
            self.wf.clear_service(e);
            true
        } else {
            let b = self.q(q).max_budget.max(self.next_charge(q));
            self.wf.set_budget(e, b);
            self.wf.clear_service(e);
            wr_or_deserves
        };
        // IO_bound comes back after enough in-time arrivals.
        {
            let qq = self.qm(q);
            if !qq.io_bound {
                if arrived_in_time {
                    qq.requests_within_timer += 1;
                    if qq.requests_within_timer >= REQUESTS_WITHIN_TIMER {
                        qq.io_bound = true;
                        qq.requests_within_timer = 0;
                    }
                } else {
                    qq.requests_within_timer = 0;
                }
            }
        }
        self.wr_on_arrival(q, interactive, soft_rt, now);
        self.wr_on_idle_busy(q, now);
        self.add_busy(q);
        let wr = self.q(q).wr.coeff;
        self.wf.activate(e, backshift, wr);
        self.qm(q).non_blocking_wait_rq = false;
        self.merge_on_busy(q, now);
        // Preemption.
        if let Some(s) = self.in_service.filter(|&s| s != q) {
            let higher = self.q(q).class < self.q(s).class
                || (self.q(q).class == self.q(s).class
                    && self.wf.entity(e).map_or(0, |x| x.weight)
                        > self.wf.entity(self.q(s).entity).map_or(0, |x| x.weight));
            let want = (wants_preempt && self.q(q).wr.coeff >= self.q(s).wr.coeff) || higher || !self.better_to_idle(s);
            if want && !self.wf.in_service_still_next(now) {
                self.stats.preemptions += 1;
                self.expire(s, Expiration::Preempted, now);
            }
        }
    }

    /// Sets queue `q` in service (`__bfq_set_in_service_queue`).
    fn set_in_service(&mut self, q: QueueId, now: Time) {
        self.budgets.assigned_one();
        self.stats.slots += 1;
        self.in_service = Some(q);
        self.in_serv_last_pos = None;
        let timeout = self
            .p
            .timeout_sync
            .saturating_mul(u64::from(self.q(q).wr.timeout_coeff()));
        let qq = self.qm(q);
        qq.fifo_checked = false;
        qq.slot_start = now;
        qq.budget_timeout = now.saturating_add(timeout);
        qq.wait_request = false;
        self.inject_on_set_in_service(q, now);
    }

    fn cancel_timer(&mut self) {
        self.timer = None;
        if let Some(s) = self.in_service {
            self.qm(s).wait_request = false;
        }
    }

    fn arm_timer(&mut self, q: QueueId, now: Time) {
        let sl = idling::idle_slice(self.p.slice_idle, self.seeky(q), self.raised(q), self.asymmetric(q));
        let sl = sl.clamp(1, SEC);
        self.qm(q).wait_request = true;
        self.stats.idles += 1;
        self.timer = Some(now.saturating_add(sl));
        self.idle_start = now;
    }

    /// `bfq_bfqq_expire`: ends the slot of in-service queue `q` for `reason`.
    pub(crate) fn expire(&mut self, q: QueueId, reason: Expiration, now: Time) {
        if self.in_service != Some(q) {
            return;
        }
        let e = self.q(q).entity;
        let service = self.entity_service(q);
        let budget = self.entity_budget(q);
        let was_waiting = self.q(q).wait_request;
        // 1. Slow queues are charged for time.
        let end = if was_waiting || reason == Expiration::TooIdle {
            self.idle_start
        } else {
            now
        };
        let delta = end.saturating_sub(self.q(q).slot_start);
        let maxb = self.budgets.max_budget();
        let (slow, charge_delta) =
            budget::is_slow(delta, self.seeky(q), service, maxb, self.rotational, self.p.slice_idle);
        let left = budget.saturating_sub(service);
        if self.q(q).sync && !self.raised(q) && (slow || (reason == Expiration::BudgetTimeout && left >= budget / 3)) {
            // Slow queues: the current rule. Timed-out queues that are not slow: the older rule, which spares
            // sequential queues in slow zones (see `budget::time_charge_within_timeout`).
            let tot = if slow {
                budget::time_charge(charge_delta, self.p.timeout_sync, maxb, service)
            } else {
                budget::time_charge_within_timeout(charge_delta, self.p.timeout_sync, maxb, service)
            };
            self.wf.charge_time(e, tot);
        }
        // 2. IO_bound.
        if reason == Expiration::TooIdle
            && service.saturating_mul(100) <= budget.saturating_mul(IO_BOUND_MIN_USED_PERCENT)
        {
            self.qm(q).io_bound = false;
        }
        self.softrt_on_expire(q, now);
        // 3. Budget feedback.
        if reason != Expiration::Preempted {
            let service = self.entity_service(q);
            let (sync, raised, inflight) = (self.q(q).sync, self.raised(q), self.q(q).dispatched > 0);
            let nb = self
                .budgets
                .recalc(self.q(q).max_budget, reason, sync, raised, service, inflight);
            self.qm(q).max_budget = nb;
            if self.q(q).rqs.next.is_some() {
                let b = nb.max(self.next_charge(q));
                self.wf.set_budget(e, b);
            }
        }
        self.merge_on_expire(q);
        // 4-5. Deactivate or requeue.
        let empty = self.q(q).rqs.is_empty();
        let keep_for_guarantees = reason == Expiration::Preempted && idling::needed_for_guarantees(&self.idle_facts(q));
        self.in_service = None;
        self.timer = None;
        self.qm(q).wait_request = false;
        if empty && !keep_for_guarantees {
            self.wf.expire_path(e, false);
            self.del_busy(q);
            if self.q(q).dispatched == 0 {
                self.qm(q).budget_timeout = now;
            }
            self.qm(q).became_idle_at = Some(now);
        } else {
            self.wf.expire_path(e, true);
        }
        // 6. Keep the service of a queue that may come back to continue its slot.
        if !self.q(q).busy && reason != Expiration::BudgetTimeout && reason != Expiration::BudgetExhausted {
            self.qm(q).non_blocking_wait_rq = true;
        } else {
            self.wf.clear_service(e);
        }
        self.pos_update(q);
        self.maybe_free(q);
    }

    /// `bfq_select_queue`.
    fn select_queue(&mut self, now: Time) -> Pick {
        let mut cur = self.in_service;
        if let Some(q) = cur {
            if self.may_expire_for_budget_timeout(q, now) && !self.must_idle(q) {
                self.expire(q, Expiration::BudgetTimeout, now);
                cur = None;
            }
        }
        let guard = 2 * self.busy_queues as usize + 8;
        for _ in 0..guard {
            let q = match cur {
                Some(q) => q,
                None => {
                    let Some(e) = self.wf.next_in_service(now) else {
                        return Pick::Wait;
                    };
                    let Some(Owner::Queue(nq)) = self.wf.entity(e).map(|x| x.owner) else {
                        return Pick::Wait;
                    };
                    self.set_in_service(nq, now);
                    nq
                }
            };
            if self.q(q).rqs.next.is_some() {
                let charge = self.next_charge(q);
                if charge > self.budget_left(q) {
                    if self.entity_service(q) == 0 {
                        // A fresh slot whose budget is below the next request's charge (possible only for a
                        // continued slot with little budget left): grow it rather than livelock.
                        let e = self.q(q).entity;
                        self.wf.set_budget(e, charge);
                    } else {
                        self.expire(q, Expiration::BudgetExhausted, now);
                        cur = None;
                        continue;
                    }
                }
                if self.q(q).wait_request {
                    self.cancel_timer();
                }
                return Pick::Serve(q);
            }
            if self.q(q).wait_request || (self.q(q).dispatched > 0 && self.better_to_idle(q)) {
                self.inject_on_plug(q);
                return match self.injection_candidate(q, now) {
                    Some(c) => Pick::Serve(c),
                    None => Pick::Wait,
                };
            }
            self.expire(q, Expiration::NoMoreRequests, now);
            cur = None;
        }
        Pick::Wait
    }

    /// Takes queue `q`'s next request out and accounts its dispatch (`bfq_dispatch_rq_from_bfqq`).
    fn dispatch_from(&mut self, q: QueueId, now: Time) -> Option<Request> {
        let slot = self.q(q).rqs.next?;
        let charge = self.charge_of(q, slot);
        let e = self.q(q).entity;
        self.wf.served(e, charge);
        self.wr_on_served(q, charge);
        let rq = self.store.take(slot)?;
        {
            let (bm, pen) = (self.p.back_seek_max, self.p.back_seek_penalty);
            let store = &self.store;
            let qq = &mut self.queues[q.slot()];
            qq.rqs.remove(slot, rq.sector, store, bm, pen);
        }
        self.queued = self
            .queued
            .checked_sub(rq.parts())
            .expect("counter underflow: queued requests below the parts of a dispatched request");
        let in_driver_before = self.rq_in_driver;
        self.qm(q).dispatched += 1;
        self.rq_in_driver += 1;
        self.in_flight.insert(rq.id.0, q);
        self.last_position = rq.sector.saturating_add(u64::from(rq.sectors));
        if Some(q) == self.in_service {
            self.in_serv_last_pos = Some(self.last_position);
        }
        if let Some(peak) = self.peak.on_dispatch(rq.sector, rq.sectors, now, in_driver_before) {
            self.budgets.autotune(peak, self.p.timeout_sync);
        }
        self.merge_on_dispatch(q, now);
        // FIFO: consulted once per slot.
        if self.in_service == Some(q) && !self.q(q).fifo_checked && !self.q(q).rqs.is_empty() {
            self.qm(q).fifo_checked = true;
            let store = &self.store;
            let qq = &mut self.queues[q.slot()];
            if let Some(h) = qq.rqs.expired_head(store, q, now) {
                qq.rqs.next = Some(h);
            }
        }
        if self.q(q).rqs.is_empty() && self.in_service != Some(q) {
            // An injected queue that ran dry leaves the scheduler.
            self.wf.deactivate(e);
            self.del_busy(q);
            self.qm(q).became_idle_at = Some(now);
        } else if self.in_service != Some(q) {
            self.updated_next_req(q);
        }
        self.pos_update(q);
        self.sync_counters(q);
        self.inject_on_dispatch(q, &rq, in_driver_before, now);
        if self.in_service == Some(q) {
            self.update_wr_data(q, now);
            if self.q(q).class == IoClass::Idle && self.busy_queues > 1 {
                self.expire(q, Expiration::BudgetExhausted, now);
            }
        }
        Some(rq)
    }

    /// Runs the idle-timer expiry if its time has come.
    fn fire_timer(&mut self, now: Time) {
        let Some(t) = self.timer else { return };
        if now < t {
            return;
        }
        self.timer = None;
        let Some(q) = self.in_service.filter(|&q| self.q(q).wait_request) else {
            return;
        };
        self.qm(q).wait_request = false;
        if self.budget_timed_out(q, now) {
            // Keep the idling start for the time charge.
            self.qm(q).wait_request = true;
            self.expire(q, Expiration::BudgetTimeout, now);
        } else if self.q(q).rqs.is_empty() {
            self.qm(q).wait_request = true;
            self.expire(q, Expiration::TooIdle, now);
        }
    }

    /// The flow owning the in-service queue, for tests.
    #[cfg(test)]
    #[allow(dead_code)]
    pub(crate) fn in_service_flow(&self) -> Option<FlowId> {
        let q = self.in_service?;
        self.flows
            .iter()
            .find(|(_, c)| c.sync_q == Some(q))
            .map(|(&f, _)| FlowId(f))
    }
}

impl Scheduler for Bfq {
    fn name(&self) -> &'static str {
        "bfq"
    }

    fn flow_started(&mut self, flow: &FlowInfo, _now: Time) {
        let mut info = flow.clone();
        info.prio = info.prio.min(IOPRIO_LEVELS - 1);
        match self.flows.get_mut(&flow.id.0) {
            Some(c) => c.info = info,
            None => {
                self.flows.insert(
                    flow.id.0,
                    FlowCtx {
                        info,
                        sync_q: None,
                        saved: None,
                    },
                );
            }
        }
    }

    fn flow_exited(&mut self, flow: FlowId, now: Time) {
        let Some(ctx) = self.flows.remove(&flow.0) else { return };
        let Some(q) = ctx.sync_q.filter(|&q| self.is_live(q)) else {
            return;
        };
        counter::dec(&mut self.qm(q).refs, "queue refs");
        if self.q(q).refs == 0 {
            self.qm(q).has_short_ttime = false;
            if self.in_service == Some(q) && self.q(q).wait_request && self.q(q).rqs.is_empty() {
                self.cancel_timer();
                self.expire(q, Expiration::NoMoreRequests, now);
            }
        }
        self.maybe_free(q);
    }

    fn insert(&mut self, rq: Request, now: Time) {
        self.insert_rq(rq, now);
    }

    fn dispatch(&mut self, now: Time) -> Decision {
        self.fire_timer(now);
        if self.busy_queues == 0 {
            return Decision::Nothing;
        }
        if self.p.strict_guarantees && self.rq_in_driver > 0 {
            return Decision::Nothing;
        }
        match self.select_queue(now) {
            Pick::Serve(q) => match self.dispatch_from(q, now) {
                Some(rq) => Decision::Dispatch(rq),
                None => Decision::Nothing,
            },
            Pick::Wait => match self.timer {
                Some(t) if t > now => Decision::WaitUntil(t),
                _ => Decision::Nothing,
            },
        }
    }

    fn completed(&mut self, rq: &Request, now: Time) {
        let Some(q) = self.in_flight.remove(&rq.id.0) else {
            return;
        };
        let small = self.in_service.is_some_and(|s| {
            self.q(s).has_short_ttime
                && (self.q(s).dispatched as usize + self.q(s).rqs.len()) < idling::HW_QUEUE_THRESHOLD as usize
        });
        self.hw.sample(self.rq_in_driver, self.queued as u32, small);
        counter::dec(&mut self.rq_in_driver, "rq_in_driver");
        if !self.is_live(q) {
            return;
        }
        counter::dec(&mut self.qm(q).dispatched, "queue dispatched");
        if let Some(peak) = self.peak.on_completion(now) {
            self.budgets.autotune(peak, self.p.timeout_sync);
        }
        self.qm(q).last_end_request = Some(now);
        self.softrt_on_completion(q, now);
        self.inject_on_completion(q, rq, now);
        self.waker_on_completion(q, now);
        self.sync_counters(q);
        if self.in_service == Some(q) {
            if self.must_idle(q) {
                if self.q(q).dispatched == 0 {
                    self.arm_timer(q, now);
                }
            } else if self.may_expire_for_budget_timeout(q, now) {
                self.expire(q, Expiration::BudgetTimeout, now);
            } else if self.q(q).rqs.is_empty() && (self.q(q).dispatched == 0 || !self.better_to_idle(q)) {
                self.expire(q, Expiration::NoMoreRequests, now);
            }
        }
        self.maybe_free(q);
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn depth_limit(&self, dir: Direction, sync: bool, nr_requests: u32) -> u32 {
        depth_limit(dir, sync, nr_requests, self.wr_busy_queues > 0)
    }
}

/// Async requests may hold at most this share of the scheduler tags (numerator over [`DEPTH_DEN`]) while no
/// queue is raised: 8/16 = 50%.
pub const ASYNC_DEPTH_NUM: u32 = 8;
/// Sync writes' share of the tags while no queue is raised: 12/16 = 75%.
pub const SYNC_WRITE_DEPTH_NUM: u32 = 12;
/// Async share while some queue is weight-raised: 3/16, leaving the raised queue room.
pub const ASYNC_DEPTH_NUM_WR: u32 = 3;
/// Sync-write share while some queue is weight-raised: 6/16.
pub const SYNC_WRITE_DEPTH_NUM_WR: u32 = 6;
/// Denominator of the tag shares.
pub const DEPTH_DEN: u32 = 16;

/// `bfq_limit_depth`: tags that async requests and sync writes may hold; sync reads are never limited.
pub fn depth_limit(dir: Direction, sync: bool, nr_requests: u32, some_raised: bool) -> u32 {
    let num = match (sync, dir, some_raised) {
        (true, Direction::Read, _) => return nr_requests,
        (false, _, false) => ASYNC_DEPTH_NUM,
        (false, _, true) => ASYNC_DEPTH_NUM_WR,
        (true, Direction::Write, false) => SYNC_WRITE_DEPTH_NUM,
        (true, Direction::Write, true) => SYNC_WRITE_DEPTH_NUM_WR,
    };
    (nr_requests * num / DEPTH_DEN).max(1)
}

#[cfg(test)]
mod tests;
