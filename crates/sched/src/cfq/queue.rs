//! CFQ queues: a per-process sync queue or a shared async queue, with its requests sorted by sector, its FIFO, and
//! its slice state (kernel: `struct cfq_queue`; docs/SCHEDULERS.md, CFQ).

use super::idle::{SeekHistory, DEEP_QUEUE_REQUESTS};
use super::service_tree::Workload;
use crate::merge::MergeIndex;
use crate::types::{IoClass, Request, RequestId, Time};
use std::collections::{BTreeMap, VecDeque};

/// A queued request with the times CFQ keeps for it.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The request (possibly with merged parts).
    pub rq: Request,
    /// When it becomes FIFO-expired (ns).
    pub fifo_time: Time,
    /// When it was inserted (ns).
    pub start: Time,
    /// Index of its queue.
    pub queue: u32,
}

/// Where a queue sits on a service tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreePos {
    /// Tree index within the group.
    pub tree: usize,
    /// `rb_key` (ns; may be negative relative to the time origin).
    pub key: i64,
    /// Insertion sequence (tie breaker).
    pub seq: u64,
}

/// One CFQ queue.
#[derive(Debug, Clone)]
pub struct Queue {
    /// Generation of this slot, bumped when it is freed; guards stale [`Queue::new_queue`] links.
    pub gen: u32,
    /// False for a free slot.
    pub live: bool,
    /// Sync (per-process) or async (shared) queue.
    pub sync: bool,
    /// I/O class.
    pub class: IoClass,
    /// Priority within the class (0 highest .. 7; IDLE-class queues use 7).
    pub prio: u8,
    /// Index of the group.
    pub group: u32,
    /// Queued requests by (start sector, id) -> request slot.
    pub sort: BTreeMap<(u64, u64), u32>,
    /// Request slots in arrival order with their FIFO expiry; entries of dispatched requests are skipped lazily.
    pub fifo: VecDeque<(Time, u32, RequestId)>,
    /// Merge candidates among this queue's requests.
    pub merge: MergeIndex,
    /// The request the elevator serves next.
    pub next_rq: Option<u32>,
    /// Requests of this queue on the device.
    pub dispatched: u32,
    /// Queued metadata requests.
    pub prio_pending: u32,
    /// On a service tree (busy).
    pub on_rr: bool,
    /// Position on the service tree.
    pub pos: Option<TreePos>,
    /// Slot started but no request completed yet (the slice is not set).
    pub slice_new: bool,
    /// When the slice started (first completion of the slot), if it has.
    pub slice_start: Option<Time>,
    /// When the slice ends (ns); meaningful once `slice_new` is false.
    pub slice_end: Time,
    /// Length of the slice allocated at the first completion (ns).
    pub allocated_slice: Time,
    /// When the queue was made active (ns).
    pub dispatch_start: Time,
    /// Requests dispatched in the current slot.
    pub slice_dispatch: u32,
    /// Unused (positive) or overrun (negative) slice carried to the next key (ns).
    pub slice_resid: i64,
    /// Idling for this queue's next request (the idle timer is armed).
    pub wait_request: bool,
    /// A request arrived while idling: serve it even if the slice is used.
    pub must_dispatch: bool,
    /// The process got its one exemption from a full request pool in this slot (`must_alloc_slice`).
    pub must_alloc_slice: bool,
    /// The FIFO was consulted in this slot.
    pub fifo_checked: bool,
    /// The process thinks briefly enough (and is not seeky) to be worth idling for: SYNC tree, else SYNC_NOIDLE.
    pub idle_window: bool,
    /// The queue once held [`DEEP_QUEUE_REQUESTS`] requests.
    pub deep: bool,
    /// Slice extended to keep its group backlogged.
    pub wait_busy: bool,
    /// Shared by cooperating processes after a merge.
    pub coop: bool,
    /// Became seeky while shared: split at the next request.
    pub split_coop: bool,
    /// Seekiness of the arrivals.
    pub seek: SeekHistory,
    /// Processes (flows) using this queue.
    pub members: u32,
    /// Merge target (index, generation) set when a close cooperator was found.
    pub new_queue: Option<(u32, u32)>,
}

impl Queue {
    /// A new queue.
    pub fn new(gen: u32, sync: bool, class: IoClass, prio: u8, group: u32) -> Self {
        Queue {
            gen,
            live: true,
            sync,
            class,
            prio: if class == IoClass::Idle { 7 } else { prio.min(7) },
            group,
            sort: BTreeMap::new(),
            fifo: VecDeque::new(),
            merge: MergeIndex::new(),
            next_rq: None,
            dispatched: 0,
            prio_pending: 0,
            on_rr: false,
            pos: None,
            slice_new: true,
            slice_start: None,
            slice_end: 0,
            allocated_slice: 0,
            dispatch_start: 0,
            slice_dispatch: 0,
            slice_resid: 0,
            wait_request: false,
            must_dispatch: false,
            must_alloc_slice: false,
            fifo_checked: false,
            // New sync queues start with an idle window; async and IDLE-class queues never idle.
            idle_window: sync && class != IoClass::Idle,
            deep: false,
            wait_busy: false,
            coop: false,
            split_coop: false,
            seek: SeekHistory::default(),
            members: 0,
            new_queue: None,
        }
    }

    /// No request queued.
    pub fn is_empty(&self) -> bool {
        self.sort.is_empty()
    }

    /// Requests queued (merged ones count once).
    pub fn len(&self) -> usize {
        self.sort.len()
    }

    /// Service tree type the queue belongs on now.
    pub fn workload(&self) -> Workload {
        if !self.sync {
            Workload::Async
        } else if self.idle_window {
            Workload::Sync
        } else {
            Workload::SyncNoIdle
        }
    }

    /// Seeky per the seek history.
    pub fn seeky(&self) -> bool {
        self.seek.seeky()
    }

    /// Marks the queue deep if it holds enough requests.
    pub fn note_depth(&mut self) {
        if self.len() >= DEEP_QUEUE_REQUESTS {
            self.deep = true;
        }
    }

    /// The slice is over (never while no request has completed in the slot).
    pub fn slice_used(&self, now: Time) -> bool {
        !self.slice_new && now >= self.slice_end
    }

    /// The slice will likely end before the requests on the device complete: each one may take `slice_idle`.
    pub fn slice_used_soon(&self, now: Time, slice_idle: Time) -> bool {
        self.slice_new || now.saturating_add(slice_idle.saturating_mul(u64::from(self.dispatched))) > self.slice_end
    }

    /// Resets the slot state when the queue becomes active at `now`.
    pub fn start_slot(&mut self, now: Time) {
        self.slice_start = None;
        self.dispatch_start = now;
        self.allocated_slice = 0;
        self.slice_end = 0;
        self.slice_dispatch = 0;
        self.wait_request = false;
        self.must_dispatch = false;
        self.must_alloc_slice = false;
        self.fifo_checked = false;
        self.slice_new = true;
    }

    /// Max dispatches of an async queue in one slot: `2 * slice_async_rq * (8 - prio)`.
    pub fn max_async_dispatches(&self, slice_async_rq: u32) -> u32 {
        2 * slice_async_rq * (8 - u32::from(self.prio.min(7)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::MS;

    // `cfq_slice_used_soon` (3.13): a queue's slice will be used up soon when it has not completed a request yet
    // (no estimate), or when each request on the device may take slice_idle and their sum passes the slice end:
    // 4 requests x 8 ms from now reach exactly the end 32 ms away (not past it: not soon); with the end 1 ns
    // nearer they pass it. This limits the queue to quantum/2 dispatches while others wait (`cfq_may_dispatch`).
    #[test]
    fn the_slice_is_used_soon_when_the_requests_on_the_device_would_pass_its_end() {
        let mut q = Queue::new(0, true, IoClass::Be, 4, 0);
        let now = 50 * MS;
        q.dispatched = 4;
        assert!(q.slice_used_soon(now, 8 * MS), "a new slice is always used soon");
        q.slice_new = false;
        q.slice_end = now + 32 * MS;
        assert!(!q.slice_used_soon(now, 8 * MS));
        q.slice_end = now + 32 * MS - 1;
        assert!(q.slice_used_soon(now, 8 * MS));
    }

    // `cfq_update_idle_window` (3.13): a queue that once held 4 requests (`cfq_mark_cfqq_deep`) keeps its idle
    // window although seeky, because a device serving several of its requests hides the seeks. Reader 1 queues six
    // far-apart requests at once (deep, seeky, still worth idling for); reader 2 issues the same six one at a time
    // (never deep) and loses its idle window.
    #[test]
    fn a_seeky_queue_that_once_held_four_requests_keeps_its_idle_window() {
        use super::super::tests::dispatched;
        use super::super::{Cfq, Params};
        use crate::device::DeviceInfo;
        use crate::scheduler::Scheduler;
        use crate::types::{Direction, FlowId, FlowInfo, Request, RequestId};
        let dev = DeviceInfo::hdd();
        let read = |id: u64, f: u32, k: u64| {
            Request::new(
                RequestId(id),
                FlowId(f),
                Direction::Read,
                true,
                (u64::from(f) << 36) + k * 10_000_000,
                8,
            )
        };
        let mut c = Cfq::new(&dev, Params::defaults(&dev));
        c.flow_started(&FlowInfo::new(FlowId(1)), 0);
        for k in 0..6 {
            c.insert(read(k, 1, k), 0);
        }
        let q1 = c.flows[&FlowId(1)].sync_q.unwrap() as usize;
        assert!(c.queues[q1].seeky() && c.queues[q1].deep);
        assert!(c.queues[q1].idle_window);
        assert_eq!(c.queues[q1].workload(), Workload::Sync);

        let mut c = Cfq::new(&dev, Params::defaults(&dev));
        c.flow_started(&FlowInfo::new(FlowId(2)), 0);
        let mut now = 0;
        for k in 0..6 {
            c.insert(read(k, 2, k), now);
            let r = dispatched(&mut c, now).expect("reader 2 is served");
            now += MS;
            c.completed(&r, now);
        }
        let q2 = c.flows[&FlowId(2)].sync_q.unwrap() as usize;
        assert!(c.queues[q2].seeky() && !c.queues[q2].deep);
        assert!(!c.queues[q2].idle_window);
        assert_eq!(c.queues[q2].workload(), Workload::SyncNoIdle);
    }
}
