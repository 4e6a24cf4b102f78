//! BFQ, Budget Fair Queueing (the kernel's `bfq-iosched.c`; docs/SCHEDULERS.md, BFQ): one queue per process for sync
//! I/O and shared async queues per (group, class, priority); B-WF2Q+ chooses which queue gets the device next, and the
//! chosen queue keeps it, possibly with idling, until its budget (sectors) is used, its budget timeout passes, or it
//! runs out of requests.
//!
//! Module map: [`wf2q`] the fair-queueing engine, [`budget`] budgets and expiration feedback, [`idling`] think
//! time, seekiness, NCQ detection and the decision to idle, [`peak_rate`] the rate estimator, [`weight_raising`]
//! the low-latency heuristics, [`burst`] large-burst detection, [`fifo`] requests inside a queue,
//! [`queue_merge`] early queue merging and splitting, [`inject`] injection while idling, [`tunables`] sysfs
//! tunables, [`ids`] the typed index spaces. The event paths: `queues` (creation, lookup, freeing), `arrival`
//! (the insert path), `slot` (choosing and starting a slot, idling, the idle timer), `dispatch` (dispatch and
//! completion), `accounting` (charges, counters, expiration) and `depth` (tag limits). This file holds the
//! [`Bfq`] state and the [`Scheduler`] wiring.
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
pub mod era;
pub mod fifo;
pub mod idling;
pub mod ids;
pub mod inject;
pub mod peak_rate;
pub mod queue_merge;
pub mod tunables;
pub mod weight_raising;
pub mod wf2q;

mod accounting;
mod arrival;
mod depth;
mod dispatch;
mod invariants;
mod queues;
mod slot;

pub use depth::{
    depth_limit, ASYNC_DEPTH_NUM, ASYNC_DEPTH_NUM_WR, DEPTH_DEN, SYNC_WRITE_DEPTH_NUM, SYNC_WRITE_DEPTH_NUM_WR,
};

use crate::device::DeviceInfo;
use crate::merge::IntMap;
use crate::scheduler::{BlockLayer, Scheduler};
use crate::sorted::SortedSet;
use crate::tunables::TunableValues;
use crate::types::{Decision, Direction, FlowId, FlowInfo, GroupId, IoClass, Request, Time, IOPRIO_LEVELS};
use budget::Budgets;
use fifo::{QueueRqs, Store};
use idling::{HwTag, ThinkTime};
use ids::{EntityId, QueueId, SdId};
use peak_rate::PeakRate;
use std::collections::BTreeMap;
use tunables::Params;
use wf2q::Wf2q;

pub use era::{Era, Rules};
pub use tunables::{TUNABLES, V7R2_TUNABLES};

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
    /// The flow's class, priority (0..=7), optional explicit weight (weight units) and group.
    pub(crate) info: FlowInfo,
    /// The flow's sync queue (possibly shared after a merge); `None` before its first sync request.
    pub(crate) sync_q: Option<QueueId>,
    /// State saved when the flow's queue was merged, restored on split.
    pub(crate) saved: Option<queue_merge::Saved>,
    /// A delayed stable merge scheduled at the creation of the flow's sync queue: the queue to merge into
    /// (`stable_merge_bfqq`).
    pub(crate) stable_merge: Option<QueueId>,
    /// The flow's queue was stably merged: a shared queue found seeky is not split for it (`stably_merged`).
    pub(crate) stably_merged: bool,
}

/// Per-group state (the kernel's `bfq_group`).
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// The group's scheduling data in the [`Wf2q`].
    pub(crate) sd: SdId,
    /// Shared async queues (RT 0..8, BE 8..16, IDLE 16), `None` until first used.
    pub(crate) async_q: [Option<QueueId>; ASYNC_QUEUES],
    /// Queues of the group with requests queued or in the device (queues).
    pub(crate) pending: u32,
    /// Busy sync queues by the sector of their next request (sectors), for early queue merging (the kernel's
    /// `pos_tree`).
    pub(crate) pos: SortedSet<(u64, QueueId)>,
    /// The group's most recently created sync queue that started a stable-merge window (`last_bfqq_created`).
    pub(crate) last_created: Option<QueueId>,
}

/// One BFQ queue (the kernel's `bfq_queue`).
#[derive(Debug, Clone)]
pub(crate) struct Queue {
    /// The queue's scheduling entity in the [`Wf2q`].
    pub(crate) entity: EntityId,
    /// Index of the queue's group in [`Bfq::groups`].
    pub(crate) group: u32,
    /// I/O class (RT, BE, IDLE).
    pub(crate) class: IoClass,
    /// Weight before raising (weight units): the flow's, or `(8 - prio) * 10`.
    pub(crate) orig_weight: u32,
    /// Holds sync requests (a process's own queue) rather than a group's shared async ones.
    pub(crate) sync: bool,
    /// References (flows using this queue as their sync queue, or 1 for a shared async queue); the queue is
    /// freed when none is left and it holds no request.
    pub(crate) refs: u32,
    /// The queued requests: sorted set, FIFO and next request.
    pub(crate) rqs: QueueRqs,
    /// Requests of this queue in the device (requests).
    pub(crate) dispatched: u32,
    /// On the scheduler (backlogged, or kept for guarantees after a preemption).
    pub(crate) busy: bool,
    /// The queue's own maximum budget (sectors).
    pub(crate) max_budget: u64,
    /// Budget timeout of the current slot (ns); set to the time the queue emptied while it is not busy with no
    /// request in the device (as `bfq_del_bfqq_busy` does).
    pub(crate) budget_timeout: Time,
    /// Start of the current slot (ns).
    pub(crate) slot_start: Time,
    /// The FIFO has been consulted in this slot.
    pub(crate) fifo_checked: bool,
    /// Idle timer armed for this queue.
    pub(crate) wait_request: bool,
    /// Expired empty with budget left: may continue its slot when it comes back in time
    /// (`bfq_bfqq_non_blocking_wait_rq`).
    pub(crate) non_blocking_wait_rq: bool,
    /// The queue uses its budgets (cleared by a too-idle expiration that used little of it): idling for it is
    /// worth it.
    pub(crate) io_bound: bool,
    /// Consecutive in-time arrivals since it lost `io_bound` (requests); [`REQUESTS_WITHIN_TIMER`] restore it
    /// (v7r2).
    pub(crate) requests_within_timer: u32,
    /// Start of the I/O-intensity window (ns), newest kernels ([`Rules::io_intensity`]).
    pub(crate) io_start_time: Time,
    /// Time the queue spent idle in that window (ns).
    pub(crate) tot_idle_time: Time,
    /// Not yet activated once (`just_created`): its first arrival does not judge its intensity.
    pub(crate) just_created: bool,
    /// Think-time statistics (ns).
    pub(crate) ttime: ThinkTime,
    /// Mean think time below `slice_idle` (or too few samples to tell).
    pub(crate) has_short_ttime: bool,
    /// Decayed mean seek distance (v7r2's seekiness, [`Rules::seek_mean`]).
    pub(crate) seek_mean: era::SeekMean,
    /// v7r2's idle window ([`Rules::idle_window`]): set for a new sync queue, re-evaluated at some arrivals.
    pub(crate) idle_window: bool,
    /// v7r2: the slot has had no completion yet, so its budget timeout is not armed
    /// ([`Rules::timeout_at_first_completion`]).
    pub(crate) budget_new: bool,
    /// Requests dispatched in the current slot (requests), for v7r2's async limit.
    pub(crate) slot_dispatched: u32,
    /// v7r2: the slot's one allocation exemption is still unused ([`Rules::may_queue_exemption`]).
    pub(crate) must_alloc: bool,
    /// Seekiness of the last 32 requests, one bit each (1 = seeky).
    pub(crate) seek_history: u32,
    /// End sector of the last enqueued request (sectors).
    pub(crate) last_request_pos: u64,
    /// Last completion of a request of this queue (ns), `None` before any.
    pub(crate) last_end_request: Option<Time>,
    /// Became idle at (ns); `None` = never busy, counts as idle forever.
    pub(crate) became_idle_at: Option<Time>,
    /// Last arrival (ns), for async raising.
    pub(crate) last_arrival: Option<Time>,
    /// Weight currently counted in [`Bfq::weights`] (weight units; non-raised queues with pending requests).
    pub(crate) weight_counted: Option<u32>,
    /// Counted in its group's [`Group::pending`].
    pub(crate) pending_counted: bool,
    /// Sector (sectors) under which the queue is filed in its group's [`Group::pos`], if it is.
    pub(crate) pos_key: Option<u64>,
    /// Weight-raising state.
    pub(crate) wr: weight_raising::WrState,
    /// Burst-detection flags.
    pub(crate) burst: burst::QueueBurst,
    /// Early-merge state.
    pub(crate) merge: queue_merge::QueueMerge,
    /// Injection state (as the in-service queue).
    pub(crate) inject: inject::QueueInject,
}

/// The BFQ policy (the kernel's `bfq_data`).
pub struct Bfq {
    /// Tunables, in internal units (ns, sectors).
    pub(crate) p: Params,
    /// The rules of the era this policy follows.
    pub(crate) rules: Rules,
    /// Early queue merging switched off ([`Bfq::without_queue_merging`]); never set by the kernel's tunables.
    pub(crate) no_queue_merging: bool,
    /// v7r2: long slots sampled by the per-slot peak-rate estimator, up to [`era::V7_PEAK_RATE_SAMPLES`].
    pub(crate) v7_rate_samples: u32,
    /// v7r2: the device is in the slow speed class (its R x T product is the slow one).
    pub(crate) v7_slow_device: bool,
    /// The expiration in progress was triggered by the idle timer (`compensate` in the kernel): the slot's
    /// charged interval ends where idling started.
    pub(crate) timer_expiry: bool,
    /// The device is rotational.
    pub(crate) rotational: bool,
    /// Largest request the device accepts (sectors), the bound for request merging.
    pub(crate) max_sectors: u32,
    /// Device queue depth (requests), the bound of the injection limit.
    pub(crate) queue_depth: u32,
    /// The B-WF2Q+ engine.
    pub(crate) wf: Wf2q,
    /// Queues, indexed by [`QueueId::slot`]; `None` once freed, and freed slots are reused last-freed-first.
    pub(crate) queues: Vec<Option<Queue>>,
    /// Freed queue slots (positions in `queues`), reused last-freed-first.
    free_queues: Vec<usize>,
    /// Flows by flow id.
    pub(crate) flows: IntMap<u32, FlowCtx>,
    /// Groups; index 0 is the root.
    pub(crate) groups: Vec<Group>,
    /// Group id → index in `groups`.
    group_index: IntMap<u32, u32>,
    /// Queued requests and the merge index over them.
    pub(crate) store: Store,
    /// Dispatched requests not yet completed: request id → queue.
    in_flight: IntMap<u64, QueueId>,
    /// The queue in service, if any.
    pub(crate) in_service: Option<QueueId>,
    /// Busy queues (queues).
    pub(crate) busy_queues: u32,
    /// Busy queues per class, RT, BE, IDLE (queues).
    pub(crate) busy_per_class: [u32; 3],
    /// Busy weight-raised queues (queues).
    pub(crate) wr_busy_queues: u32,
    /// Requests in the device (requests).
    pub(crate) rq_in_driver: u32,
    /// Sync requests in the device (requests), for v7r2's rule against async dispatch while they are.
    pub(crate) sync_in_driver: u32,
    /// Queued requests, merged parts counted individually (requests).
    queued: usize,
    /// Idle-timer deadline (ns).
    pub(crate) timer: Option<Time>,
    /// Length of the host's jiffy (ns) when v7r2's timers tick ([`Scheduler::set_timer_hz`]); `None`: exact
    /// timers.
    pub(crate) jiffy: Option<Time>,
    /// When the current idling started (ns).
    pub(crate) idle_start: Time,
    /// Command-queueing (NCQ) detection.
    pub(crate) hw: HwTag,
    /// Peak-rate estimator (sectors/µs, fixed point).
    pub(crate) peak: PeakRate,
    /// Device-wide budget state: the maximum budget (sectors) and its autotuning.
    pub(crate) budgets: Budgets,
    /// Large-burst detection state.
    pub(crate) burst: burst::BurstState,
    /// Weights (weight units) of non-raised queues with pending requests → number of such queues.
    pub(crate) weights: BTreeMap<u32, u32>,
    /// Groups with at least one pending queue (groups).
    pub(crate) groups_with_pending: u32,
    /// End sector of the last dispatched request (sectors).
    pub(crate) last_position: u64,
    /// End sector of the last request dispatched by the current in-service queue (sectors); `None` until the
    /// queue set in service dispatches (the merge test asks where *that* queue is, not where the head last went).
    pub(crate) in_serv_last_pos: Option<u64>,
    /// Device-wide injection measurements.
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

impl Bfq {
    /// A BFQ policy of the newest kernel's rules for `dev` with the given parameters.
    pub fn new(dev: &DeviceInfo, p: Params) -> Self {
        Self::with_era(dev, p, Era::Newest)
    }

    /// A BFQ policy following `era`'s rules for `dev` with the given parameters.
    pub fn with_era(dev: &DeviceInfo, p: Params, era: Era) -> Self {
        let rules = Rules::of(era);
        let mut b = Bfq {
            budgets: Budgets::new(p.max_budget),
            p,
            rules,
            no_queue_merging: false,
            v7_rate_samples: 0,
            v7_slow_device: false,
            timer_expiry: false,
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
            sync_in_driver: 0,
            queued: 0,
            timer: None,
            jiffy: None,
            idle_start: 0,
            hw: HwTag::default(),
            peak: if rules.v7_peak_rate_and_charge {
                PeakRate::with_peak(dev.rotational, era::V7_R_FAST[usize::from(!dev.rotational)])
            } else {
                PeakRate::new(dev.rotational)
            },
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
            pos: SortedSet::new(),
            last_created: None,
        });
        b.group_index.insert(0, 0);
        b
    }

    /// Registry constructor of `bfq` (the newest kernel's rules).
    pub fn build(dev: &DeviceInfo, t: &TunableValues) -> Box<dyn Scheduler> {
        Box::new(Bfq::new(dev, Params::from_values(t)))
    }

    /// Registry constructor of `bfq-v7r2` (BFQ v7r2, Linux 3.13).
    pub fn build_v7r2(dev: &DeviceInfo, t: &TunableValues) -> Box<dyn Scheduler> {
        Box::new(Bfq::with_era(dev, Params::from_values(t), Era::V7r2))
    }

    /// The same policy with early queue merging switched off: cooperating processes keep their own queues and
    /// each is idled for in turn. Not a kernel setting (BFQ always merges on rotational disks and on flash without
    /// command queueing); the simulator's tests use it to show what merging buys interleaved readers.
    pub fn without_queue_merging(mut self) -> Self {
        self.no_queue_merging = true;
        self
    }

    /// The era whose rules this policy follows.
    pub fn era(&self) -> Era {
        self.rules.era
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
        match self.rules.era {
            Era::Newest => "bfq",
            Era::V7r2 => "bfq-v7r2",
        }
    }

    fn block_layer(&self) -> BlockLayer {
        match self.rules.era {
            Era::Newest => BlockLayer::BlkMq,
            Era::V7r2 => BlockLayer::Legacy,
        }
    }

    fn has_work(&self) -> bool {
        // `bfq_has_work`: any busy queue, the in-service one it idles for included.
        self.busy_queues > 0
    }

    fn completion_runs_queue(&self) -> bool {
        // `bfq_completed_request` schedules a dispatch when no request is left in the driver.
        self.rq_in_driver == 0
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
                        stable_merge: None,
                        stably_merged: false,
                    },
                );
            }
        }
    }

    fn flow_exited(&mut self, flow: FlowId, now: Time) {
        self.flow_exit(flow, now);
    }

    fn insert(&mut self, rq: Request, now: Time) {
        self.insert_rq(rq, now);
    }

    fn dispatch(&mut self, now: Time) -> Decision {
        self.dispatch_next(now)
    }

    fn completed(&mut self, rq: &Request, now: Time) {
        self.complete(rq, now);
    }

    fn queued(&self) -> usize {
        self.queued
    }

    /// v7r2 (Linux 3.13) armed its idle timer in jiffies and wrote `slice_idle`'s default as `HZ / 125` jiffies:
    /// from now on the timer fires on a tick, and the default idle slice becomes `HZ / 125` jiffies (0 below
    /// HZ=125, which switches idling off), a value the user set being rounded up to whole jiffies as sysfs did.
    /// The newest BFQ's idle timer is a high-resolution timer and its `slice_idle` is in ns: it ignores HZ.
    fn set_timer_hz(&mut self, hz: u32) {
        if self.rules.era != Era::V7r2 {
            return;
        }
        let jiffy = crate::tick::jiffy_ns(hz);
        self.jiffy = Some(jiffy);
        self.p.slice_idle = if self.p.slice_idle == tunables::DEFAULT_SLICE_IDLE {
            crate::tick::hz_fraction(hz, 125)
        } else {
            crate::tick::round_up(self.p.slice_idle, jiffy)
        };
    }

    fn depth_limit(&self, dir: Direction, sync: bool, nr_requests: u32) -> u32 {
        if self.rules.depth_limits {
            depth_limit(dir, sync, nr_requests, self.wr_busy_queues > 0)
        } else {
            nr_requests
        }
    }

    fn may_queue_must(&mut self, flow: FlowId, sync: bool) -> bool {
        if !self.rules.may_queue_exemption || !sync {
            return false;
        }
        let Some(q) = self
            .flows
            .get(&flow.0)
            .and_then(|c| c.sync_q)
            .filter(|&q| self.is_live(q))
        else {
            return false;
        };
        let qq = self.qm(q);
        if qq.wait_request && qq.must_alloc {
            qq.must_alloc = false;
            return true;
        }
        false
    }

    fn separate_sync_pool(&self) -> bool {
        // v7r2 ran on the legacy single-queue block layer (3.13), with its separate sync and async pools.
        self.rules.era == Era::V7r2
    }

    fn check_invariants(&self) -> Result<(), crate::scheduler::InvariantViolation> {
        self.check_invariants_impl()
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod wiring_tests {
    //! Issue 21 (session 9): the [`Scheduler`] wiring of this file, by what the driver and the user see.

    use super::*;
    use crate::types::{FlowInfo, RequestId, MS};

    fn read(id: u64, flow: u32, sector: u64) -> Request {
        Request::new(RequestId(id), FlowId(flow), Direction::Read, true, sector, 8)
    }

    fn write(id: u64, flow: u32, sector: u64) -> Request {
        Request::new(RequestId(id), FlowId(flow), Direction::Write, false, sector, 8)
    }

    fn defaults(era: Era) -> Box<dyn Scheduler> {
        let dev = DeviceInfo::hdd();
        let table = if era == Era::V7r2 { &V7R2_TUNABLES } else { &TUNABLES };
        let v = TunableValues::parse::<&str>("bfq", table, &dev, &[]).unwrap();
        match era {
            Era::Newest => Bfq::build(&dev, &v),
            Era::V7r2 => Bfq::build_v7r2(&dev, &v),
        }
    }

    // The registry constructors build the era they are named after: the names the user selects them by, and
    // v7r2's legacy block layer with its separate sync request pool (blk-mq's BFQ has none).
    #[test]
    fn each_registry_constructor_builds_its_era() {
        let b = defaults(Era::Newest);
        assert_eq!((b.name(), b.separate_sync_pool()), ("bfq", false));
        let b = defaults(Era::V7r2);
        assert_eq!((b.name(), b.separate_sync_pool()), ("bfq-v7r2", true));
        let dev = DeviceInfo::hdd();
        let v = TunableValues::parse::<&str>("bfq", &TUNABLES, &dev, &[]).unwrap();
        assert_eq!(Bfq::with_era(&dev, Params::from_values(&v), Era::V7r2).era(), Era::V7r2);
        assert_eq!(Bfq::new(&dev, Params::from_values(&v)).era(), Era::Newest);
    }

    // Async writers share one queue per (class, priority) of their group: 8 RT levels, 8 BE levels and one IDLE
    // queue, 17 in all, and every one of them is served.
    #[test]
    fn every_class_and_priority_has_its_own_async_queue() {
        let mut b = defaults(Era::Newest);
        let mut id = 0;
        for class in [IoClass::Rt, IoClass::Be, IoClass::Idle] {
            for prio in 0..8u8 {
                id += 1;
                let mut f = FlowInfo::new(FlowId(id));
                f.class = class;
                f.prio = prio;
                b.flow_started(&f, 0);
                b.insert(write(u64::from(id), id, u64::from(id) << 20), 0);
            }
        }
        assert_eq!(b.queued(), 24);
        let mut flows = std::collections::BTreeSet::new();
        let mut now = 0;
        for _ in 0..24 {
            match b.dispatch(now) {
                Decision::Dispatch(r) => {
                    flows.insert(r.flow.0);
                    b.completed(&r, now + MS);
                }
                Decision::WaitUntil(t) => now = t,
                Decision::Nothing => break,
            }
            now += MS;
            b.check_invariants().unwrap();
        }
        // The 8 IDLE-class writers share the one IDLE queue; all 24 requests are served.
        assert_eq!(flows.len(), 24, "served flows {flows:?}");
        assert_eq!(b.queued(), 0);
    }

    // The newest kernel limits async tags to half the pool, and to 3/16 while some queue is weight-raised (a new
    // reader is raised at its first request); v7r2 has no tag limits.
    #[test]
    fn async_depth_shrinks_while_a_raised_queue_is_busy() {
        for (era, idle, raised) in [(Era::Newest, 32, 12), (Era::V7r2, 64, 64)] {
            let mut b = defaults(era);
            assert_eq!(b.depth_limit(Direction::Write, false, 64), idle, "{era:?}");
            b.flow_started(&FlowInfo::new(FlowId(1)), 0);
            b.insert(read(1, 1, 0), 0);
            assert_eq!(b.depth_limit(Direction::Write, false, 64), raised, "{era:?}");
            assert_eq!(b.depth_limit(Direction::Read, true, 64), 64);
        }
    }

    // The block layer's view (issue 19, session 9): the newest BFQ runs under blk-mq and v7r2 under the legacy
    // layer; BFQ has work while any queue is busy (none on a fresh instance; the in-service one while it idles,
    // below), and after a completion it asks for a queue run only when nothing is left in the driver
    // (`bfq_schedule_dispatch` in `bfq_completed_request`).
    #[test]
    fn the_block_layer_runs_bfq_when_the_kernel_would() {
        assert_eq!(defaults(Era::Newest).block_layer(), BlockLayer::BlkMq);
        assert_eq!(defaults(Era::V7r2).block_layer(), BlockLayer::Legacy);
        let mut b = defaults(Era::Newest);
        assert!(!b.has_work(), "nothing busy");
        for f in [1, 2] {
            b.flow_started(&FlowInfo::new(FlowId(f)), 0);
        }
        b.insert(read(1, 1, 0), 0);
        b.insert(read(2, 2, 1 << 30), 0);
        assert!(b.has_work());
        let mut out = Vec::new();
        let mut now = 0;
        while out.len() < 2 {
            match b.dispatch(now) {
                Decision::Dispatch(r) => out.push(r),
                Decision::WaitUntil(t) => now = t,
                Decision::Nothing => now += MS,
            }
            assert!(now < 10 * crate::types::SEC, "both reads dispatched");
        }
        b.completed(&out[0], now + MS);
        assert!(!b.completion_runs_queue(), "one request still in the driver");
        b.completed(&out[1], now + 2 * MS);
        assert!(b.completion_runs_queue(), "the driver is empty");
    }

    /// The newest BFQ on an HDD without raising (so a newcomer does not preempt): reader 1's read dispatched and
    /// completed at 1 ms, then reader 2's far read queued at 1 ms.
    fn reader_done_other_queued() -> Bfq {
        let dev = DeviceInfo::hdd();
        let v = TunableValues::parse("bfq", &TUNABLES, &dev, &["low_latency=0"]).unwrap();
        let mut b = Bfq::new(&dev, Params::from_values(&v));
        for f in [1, 2] {
            b.flow_started(&FlowInfo::new(FlowId(f)), 0);
        }
        b.insert(read(1, 1, 0), 0);
        let Decision::Dispatch(r) = b.dispatch(0) else {
            panic!("the first read is dispatched")
        };
        b.completed(&r, MS);
        b.insert(read(2, 2, 1 << 30), MS);
        b
    }

    // BFQ's answer changes with time alone (the driver must ask again when a returned time passes, not only after
    // events): with one reader idled for and another queued (no raising, so the newcomer does not preempt), the
    // answer is "wait" until the idle timer's time, and at that time, with nothing having happened, it is the other
    // reader's request. Meanwhile it has work (blk-mq runs its queue again 3 ms after such a "wait").
    #[test]
    fn the_answer_changes_with_time_alone() {
        let mut b = reader_done_other_queued();
        let Decision::WaitUntil(t) = b.dispatch(MS) else {
            panic!("idling for reader 1")
        };
        assert!(t > MS);
        assert!(b.has_work(), "idling with a busy queue is work");
        match b.dispatch(t) {
            Decision::Dispatch(r) => assert_eq!(r.flow, FlowId(2)),
            d => panic!("at {t} ns: {d:?}"),
        }
    }

    // The event counters report the slots, idles and preemptions that happened: one slot for reader 1 with one
    // idle timer, then reader 2's slot.
    #[test]
    fn the_counters_count_slots_and_idles() {
        let dev = DeviceInfo::hdd();
        let v = TunableValues::parse("bfq", &TUNABLES, &dev, &["low_latency=0"]).unwrap();
        let mut b = Bfq::new(&dev, Params::from_values(&v));
        assert_eq!(b.stats(), Stats::default());
        for f in [1, 2] {
            b.flow_started(&FlowInfo::new(FlowId(f)), 0);
        }
        b.insert(read(1, 1, 0), 0);
        let Decision::Dispatch(r) = b.dispatch(0) else { panic!() };
        b.completed(&r, MS);
        b.insert(read(2, 2, 1 << 30), MS);
        let Decision::WaitUntil(t) = b.dispatch(MS) else {
            panic!()
        };
        assert!(matches!(b.dispatch(t), Decision::Dispatch(_)));
        let s = b.stats();
        assert_eq!((s.slots, s.idles, s.preemptions), (2, 1, 0));
    }

    // The maximum budget reported is the device's: 16 384 sectors (8 MiB) until autotuning has seen enough
    // slots, then the tuned value.
    #[test]
    fn the_reported_maximum_budget_is_the_devices() {
        let dev = DeviceInfo::hdd();
        let v = TunableValues::parse::<&str>("bfq", &TUNABLES, &dev, &[]).unwrap();
        let mut b = Bfq::new(&dev, Params::from_values(&v));
        assert_eq!(b.max_budget(), 16_384);
        b.budgets.assigned = budget::BUDGETS_TO_AUTOTUNE;
        b.budgets.max = 5000;
        assert_eq!(b.max_budget(), 5000);
    }

    // A process that exits is not waited for: the idle timer armed for its empty queue is cancelled and the
    // queue expires (`bfq_exit_icq_bfqq`), so the other reader is served at once instead of after the timer.
    #[test]
    fn an_exiting_process_is_not_idled_for() {
        let mut b = reader_done_other_queued();
        assert!(matches!(b.dispatch(MS), Decision::WaitUntil(_)), "idling for reader 1");
        b.flow_exited(FlowId(1), 2 * MS);
        match b.dispatch(2 * MS) {
            Decision::Dispatch(r) => assert_eq!(r.flow, FlowId(2)),
            d => panic!("{d:?}"),
        }
        b.check_invariants().unwrap();
    }
}
