//! Injection while idling (`bfq_choose_bfqq_for_injection`, `bfq_update_inject_limit`, `bfq_check_waker`): while the
//! in-service queue is plugged (empty, waiting for its process), other queues' requests may be sent to the device, as
//! long as that does not slow the in-service queue's own requests down. `inject_limit` (requests in the device) adapts
//! to what is measured.

use super::idling::boosts_throughput;
use super::ids::QueueId;
use super::Bfq;
use crate::types::{IoClass, Request, Time, MS, SEC};

/// A queue whose new I/O follows another queue's completion by less than this time (ns) may have been woken by
/// it: 4 ms in the newest kernels (`bfq_check_waker`: `4 * NSEC_PER_MSEC`; 5.x before 5.14 used the 200 µs of
/// `BFQ_MIN_TT / 2`).
pub const WAKER_WINDOW: Time = 4 * MS;

/// Detections of the same candidate needed to accept it as the waker: 3 in the newest kernels (2 before 5.14).
pub const WAKER_HITS: u32 = 3;

/// The detections must fall within this many `slice_idle`s of the first one (128: the newest kernels' bound, so
/// that a rare coincidence makes the queue idle uselessly in at most 1 case in 64); otherwise counting restarts.
pub const WAKER_DETECTION_SLICES: u64 = 128;

/// `inject_limit` is reset this often (ns): 1 s, so a stale measurement cannot block injection forever.
pub const INJECT_RESET_PERIOD: Time = SEC;

/// A request that took this factor (3/2) of the baseline service time reveals harmful injection.
pub const SLOWDOWN_NUM: u64 = 3;
/// Denominator of the slowdown factor.
pub const SLOWDOWN_DEN: u64 = 2;

/// On non-rotational devices a candidate request at least this large (sectors) is injected only into an empty
/// device: a large transfer would delay the in-service queue's next request.
pub const LARGE_RQ_NONROT: u32 = 64;

/// At most this many queues are examined per injection attempt, keeping the cost constant with many flows.
pub const INJECT_SCAN_MAX: usize = 64;

/// Per-queue injection state (the queue as the in-service one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueInject {
    /// Requests allowed in the device while this queue is plugged.
    pub limit: u32,
    /// Baseline service time of one of its requests served alone (ns), 0 = unknown.
    pub last_serv_time: Time,
    /// Last reset or decrease of the limit (ns).
    pub decrease_time: Time,
    /// Detected waker queue.
    pub waker: Option<QueueId>,
    /// Candidate waker.
    pub waker_candidate: Option<QueueId>,
    /// Hits of the candidate.
    pub waker_hits: u32,
    /// When the candidate's first detection happened (ns).
    pub waker_detection_started: Time,
}

impl QueueInject {
    /// State of a queue created at `now`.
    pub fn new(now: Time) -> Self {
        QueueInject {
            limit: 0,
            last_serv_time: 0,
            decrease_time: now,
            waker: None,
            waker_candidate: None,
            waker_hits: 0,
            waker_detection_started: 0,
        }
    }
}

/// Device-wide injection measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeviceInject {
    /// Requests were injected since the in-service queue last dispatched.
    pub injected: bool,
    /// The in-service queue is in a hole (plugged) since its last dispatch.
    pub hole: bool,
    /// The in-service queue's first request after a hole: (request id, dispatch time, ran alone).
    pub waited: Option<(u64, Time, bool)>,
    /// Queue of the last completion, and its time.
    pub last_completed: Option<(QueueId, Time)>,
    /// Rotating start of the scan over queues.
    pub cursor: usize,
    /// Requests injected so far.
    pub count: u64,
}

impl Bfq {
    fn can_inject_from(&self, c: QueueId, in_service: QueueId, only_raised: bool) -> bool {
        let Some(Some(cq)) = self.queues.get(c.slot()) else {
            return false;
        };
        if !cq.busy || c == in_service {
            return false;
        }
        let Some(slot) = cq.rqs.next else { return false };
        if only_raised && cq.wr.coeff <= 1 {
            return false;
        }
        let sectors = self.store.rq(slot).map_or(0, |r| r.sectors);
        if !self.rotational && sectors >= LARGE_RQ_NONROT && self.rq_in_driver > 0 {
            return false;
        }
        self.charge_of(c, slot) <= self.budget_left(c)
    }

    /// A queue to inject from while in-service queue `q` is plugged, or `None`.
    pub(crate) fn injection_candidate(&mut self, q: QueueId, _now: Time) -> Option<QueueId> {
        if self.p.strict_guarantees {
            return None;
        }
        // 1. The same process's async I/O.
        let owner = self.q(q).merge.owner;
        if let Some(ctx) = self.flows.get(&owner) {
            let gi = self.group_index_of(ctx.info.group);
            let idx = match ctx.info.class {
                IoClass::Rt => usize::from(ctx.info.prio.min(7)),
                IoClass::Be => 8 + usize::from(ctx.info.prio.min(7)),
                IoClass::Idle => 16,
            };
            let a = gi
                .and_then(|g| self.groups.get(g as usize))
                .and_then(|g| g.async_q[idx]);
            if let Some(a) = a.filter(|&a| self.can_inject_from(a, q, false)) {
                let next_flow = self.q(a).rqs.next.and_then(|s| self.store.rq(s)).map(|r| r.flow.0);
                if next_flow == Some(owner) {
                    return Some(a);
                }
            }
        }
        // 2. The waker.
        if let Some(w) = self.q(q).inject.waker.filter(|&w| self.can_inject_from(w, q, false)) {
            return Some(w);
        }
        // 3. Any queue, within the limit.
        if self.rq_in_driver >= self.q(q).inject.limit {
            return None;
        }
        let f = self.idle_facts(q);
        let raised = self.raised(q);
        // `idling_boosts_thr_with_no_issue`: idling boosts throughput and no raised queue is busy.
        if boosts_throughput(&f) && self.wr_busy_queues == 0 {
            return None;
        }
        let only_raised = raised && self.q(q).has_short_ttime;
        if only_raised && self.wr_busy_queues <= 1 {
            return None;
        }
        let n = self.queues.len();
        if n == 0 {
            return None;
        }
        let start = self.inject.cursor % n;
        for i in 0..n.min(INJECT_SCAN_MAX) {
            let c = QueueId::at((start + i) % n);
            if self.can_inject_from(c, q, only_raised) {
                self.inject.cursor = (start + i + 1) % n;
                return Some(c);
            }
        }
        self.inject.cursor = (start + INJECT_SCAN_MAX) % n;
        None
    }

    fn group_index_of(&self, g: crate::types::GroupId) -> Option<u32> {
        self.group_index_get(g)
    }

    /// At set-in-service: the limit is reset once a second.
    pub(crate) fn inject_on_set_in_service(&mut self, q: QueueId, now: Time) {
        self.inject.injected = false;
        self.inject.waited = None;
        self.inject.hole = false;
        let short = self.q(q).has_short_ttime;
        let i = &mut self.qm(q).inject;
        if now >= i.decrease_time.saturating_add(INJECT_RESET_PERIOD) {
            i.limit = u32::from(!short);
            i.last_serv_time = 0;
            i.decrease_time = now;
        }
    }

    /// At a dispatch from `q`: injected requests are counted; the in-service queue's first request after a hole
    /// (a period in which it was plugged) is timed, noting whether it ran alone in the device.
    pub(crate) fn inject_on_dispatch(&mut self, q: QueueId, rq: &Request, in_driver_before: u32, now: Time) {
        if Some(q) != self.in_service {
            self.inject.injected = true;
            self.inject.count += 1;
            return;
        }
        if self.inject.hole {
            self.inject.hole = false;
            self.inject.waited = Some((rq.id.0, now, in_driver_before == 0 && !self.inject.injected));
            self.inject.injected = false;
        }
    }

    /// At the completion of the timed request: a request that ran alone gives the baseline service time; then
    /// the limit goes down if the request took at least 3/2 of the baseline, up otherwise.
    pub(crate) fn inject_on_completion(&mut self, q: QueueId, rq: &Request, now: Time) {
        let Some((id, t, alone)) = self.inject.waited else {
            return;
        };
        if id != rq.id.0 {
            return;
        }
        self.inject.waited = None;
        let d = now.saturating_sub(t).max(1);
        let depth = self.queue_depth;
        let i = &mut self.qm(q).inject;
        if alone && (i.last_serv_time == 0 || d < i.last_serv_time) {
            i.last_serv_time = d;
        }
        if i.last_serv_time > 0 {
            if d.saturating_mul(SLOWDOWN_DEN) >= i.last_serv_time.saturating_mul(SLOWDOWN_NUM) {
                // A limit, not a counter: at 0 it stays there.
                if i.limit > 0 {
                    i.limit -= 1;
                }
                i.decrease_time = now;
            } else if i.limit < depth {
                i.limit += 1;
            }
        }
    }

    /// The in-service queue `q` is plugged (empty and waiting): a hole starts.
    pub(crate) fn inject_on_plug(&mut self, _q: QueueId) {
        self.inject.hole = true;
    }

    /// Remembers the last completion for waker detection.
    pub(crate) fn waker_on_completion(&mut self, q: QueueId, now: Time) {
        self.inject.last_completed = Some((q, now));
    }

    /// A request arriving at a sync queue whose process has no other request outstanding, less than
    /// [`WAKER_WINDOW`] after another queue's completion, counts towards that queue being its waker; the third
    /// detection of the same candidate within [`WAKER_DETECTION_SLICES`] `slice_idle`s of the first makes it the
    /// waker (the newest kernels' `bfq_check_waker`).
    pub(crate) fn waker_on_arrival(&mut self, q: QueueId, now: Time) {
        let Some((w, t)) = self.inject.last_completed else {
            return;
        };
        let qq = self.q(q);
        // The process's only request is this one (`bic->requests <= 1`: none queued before it, none in flight).
        if w == q || !qq.sync || qq.rqs.len() != 1 || qq.dispatched != 0 || qq.has_short_ttime {
            return;
        }
        if now.saturating_sub(t) >= WAKER_WINDOW {
            return;
        }
        let horizon = WAKER_DETECTION_SLICES.saturating_mul(self.p.slice_idle);
        let i = &mut self.qm(q).inject;
        if i.waker_candidate == Some(w) && now <= i.waker_detection_started.saturating_add(horizon) {
            i.waker_hits += 1;
        } else {
            i.waker_candidate = Some(w);
            i.waker_hits = 1;
            i.waker_detection_started = now;
        }
        if i.waker_hits >= WAKER_HITS {
            i.waker = Some(w);
            i.waker_candidate = None;
            i.waker_hits = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::bfq;
    use super::*;
    use crate::device::DeviceInfo;
    use crate::types::{Direction, FlowId, FlowInfo, MS, US};

    /// A live queue of `flow` in group 0 holding one request at `sector`, flagged busy (the test drives the
    /// injection decision alone, not the busy bookkeeping).
    fn queue_with_rq(b: &mut Bfq, flow: u32, id: u64, sector: u64, sync: bool) -> QueueId {
        let q = b.new_queue(0, &FlowInfo::new(FlowId(flow)), sync, 0);
        b.qm(q).refs = 1;
        let rq = Request::new(
            crate::types::RequestId(id),
            FlowId(flow),
            Direction::Read,
            sync,
            sector,
            8,
        );
        queue_rq(b, q, rq);
        q
    }

    /// Queues `rq` on queue `q` and flags `q` busy.
    fn queue_rq(b: &mut Bfq, q: QueueId, rq: Request) {
        let slot = b.store.alloc(rq, q, 0);
        let store = &b.store;
        if let Some(Some(qq)) = b.queues.get_mut(q.slot()) {
            qq.rqs.add(slot, store, 0, 0, 1);
        }
        b.qm(q).busy = true;
    }

    // Another queue's request is injected only within the limit of requests in the device, and never under
    // strict guarantees or from a queue that is not busy. The IDLE class is not excluded (newest kernels inject
    // from any busy queue; fidelity.md §1 item 14).
    #[test]
    fn injection_only_when_its_conditions_hold() {
        for strict in [false, true] {
            let mut b = bfq(
                &DeviceInfo::ssd(),
                &[if strict { "strict_guarantees=1" } else { "low_latency=1" }],
            );
            let s = queue_with_rq(&mut b, 1, 1, 0, true);
            let c = queue_with_rq(&mut b, 2, 2, 1 << 20, true);
            b.qm(s).inject.limit = 0;
            assert_eq!(b.injection_candidate(s, 0), None, "limit 0 with nothing in the device");
            b.qm(s).inject.limit = 1;
            let want = (!strict).then_some(c);
            assert_eq!(b.injection_candidate(s, 0), want, "strict={strict}");
            b.rq_in_driver = 1;
            assert_eq!(b.injection_candidate(s, 0), None, "limit reached");
            b.rq_in_driver = 0;
            b.qm(c).busy = false;
            assert_eq!(b.injection_candidate(s, 0), None, "not busy");
            b.qm(c).busy = true;
            b.qm(c).class = IoClass::Idle;
            assert_eq!(b.injection_candidate(s, 0), want, "IDLE class, strict={strict}");
        }
    }

    // A detected waker is injected from whatever the limit; a request whose charge exceeds the candidate's
    // remaining budget is not.
    #[test]
    fn the_waker_bypasses_the_limit_but_not_the_budget() {
        let mut b = bfq(&DeviceInfo::ssd(), &[]);
        let s = queue_with_rq(&mut b, 1, 1, 0, true);
        let w = queue_with_rq(&mut b, 2, 2, 1 << 20, true);
        b.qm(s).inject.limit = 0;
        b.qm(s).inject.waker = Some(w);
        assert_eq!(b.injection_candidate(s, 0), Some(w));
        let e = b.q(w).entity;
        b.wf.set_budget(e, 1);
        assert_eq!(b.injection_candidate(s, 0), None);
    }

    // A queue that receives its only request less than 4 ms after another queue's completion, three times within
    // 128 x slice_idle (1.024 s at 8 ms), takes that queue as its waker; an arrival 4 ms or more after the
    // completion does not count, and detections spread over more than 1.024 s start the count again.
    #[test]
    fn a_waker_is_detected_after_three_hits_within_the_window() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let w = queue_with_rq(&mut b, 1, 1, 0, true);
        let q = queue_with_rq(&mut b, 2, 2, 1 << 20, true);
        b.qm(q).has_short_ttime = false;
        b.waker_on_completion(w, MS);
        b.waker_on_arrival(q, 5 * MS);
        assert_eq!(
            b.q(q).inject.waker_hits,
            0,
            "4 ms after the completion is outside the window"
        );
        for (k, at) in [(1, 5 * MS - 1), (2, 20 * MS)] {
            b.waker_on_completion(w, at - 3 * MS);
            b.waker_on_arrival(q, at);
            assert_eq!((b.q(q).inject.waker_hits, b.q(q).inject.waker), (k, None), "hit {k}");
        }
        b.waker_on_completion(w, 30 * MS);
        b.waker_on_arrival(q, 30 * MS + 100 * US);
        assert_eq!(b.q(q).inject.waker, Some(w), "the third hit within 1.024 s");

        // Three hits spread over more than 128 x 8 ms: the third restarts the count instead.
        let p = queue_with_rq(&mut b, 4, 4, 1 << 25, true);
        b.qm(p).has_short_ttime = false;
        for at in [2 * SEC, 2 * SEC + 500 * MS, 3 * SEC + 30 * MS] {
            b.waker_on_completion(w, at - MS);
            b.waker_on_arrival(p, at);
        }
        assert_eq!((b.q(p).inject.waker_hits, b.q(p).inject.waker), (1, None));

        // A queue with a short think time is woken by its own process, not another queue.
        let r = queue_with_rq(&mut b, 3, 3, 1 << 30, true);
        b.qm(r).has_short_ttime = true;
        b.waker_on_arrival(r, 3 * SEC + 30 * MS);
        assert_eq!(b.q(r).inject.waker_candidate, None);
    }

    // The limit adapts: the first request served alone sets the baseline; a request that took 3/2 of it or more
    // lowers the limit, a faster one raises it, up to the device's queue depth.
    #[test]
    fn the_limit_follows_the_measured_slowdown() {
        let mut b = bfq(&DeviceInfo::ssd(), &[]);
        let q = queue_with_rq(&mut b, 1, 1, 0, true);
        let rq = b.store.rq(b.q(q).rqs.next.unwrap()).unwrap().clone();
        let done = |b: &mut Bfq, alone: bool, took: Time, at: Time| {
            b.inject.waited = Some((rq.id.0, at, alone));
            b.inject_on_completion(q, &rq, at + took);
        };
        done(&mut b, true, 100 * US, 0);
        assert_eq!(b.q(q).inject.last_serv_time, 100 * US);
        assert_eq!(b.q(q).inject.limit, 1, "as fast as the baseline: up");
        done(&mut b, false, 149 * US, MS);
        assert_eq!(b.q(q).inject.limit, 2);
        done(&mut b, false, 150 * US, 2 * MS);
        assert_eq!(b.q(q).inject.limit, 1, "3/2 of the baseline: down");
        assert_eq!(b.q(q).inject.decrease_time, 2 * MS + 150 * US);
        b.qm(q).inject.limit = b.queue_depth;
        done(&mut b, false, 10 * US, 3 * MS);
        assert_eq!(b.q(q).inject.limit, b.queue_depth, "capped at the queue depth");
    }

    /// Queues request `id` of `flow` (`sectors` long at `sector`) on queue `q` and flags `q` busy.
    fn add_rq(b: &mut Bfq, q: QueueId, flow: u32, id: u64, sector: u64, sectors: u32) {
        let sync = b.q(q).sync;
        let dir = if sync { Direction::Read } else { Direction::Write };
        let rq = Request::new(crate::types::RequestId(id), FlowId(flow), dir, sync, sector, sectors);
        queue_rq(b, q, rq);
    }

    // A raised in-service queue with a short think time carries time-critical I/O, so only other raised queues
    // may be injected in its holes (the kernel's `in_serv_always_inject` false: `bfqq->wr_coeff > 1` is then
    // required of the candidate), and only if some other raised queue is busy. A non-raised in-service queue, or a
    // raised one with a long think time, takes any candidate: the first in scan order.
    #[test]
    fn a_raised_short_thinker_is_injected_only_with_raised_queues() {
        let mut b = bfq(&DeviceInfo::ssd(), &[]);
        let s = queue_with_rq(&mut b, 1, 1, 0, true);
        let plain = queue_with_rq(&mut b, 2, 2, 1 << 20, true);
        let raised = queue_with_rq(&mut b, 3, 3, 1 << 21, true);
        b.qm(s).inject.limit = 4;
        b.qm(s).wr.coeff = 30;
        b.qm(raised).wr.coeff = 30;
        b.qm(s).has_short_ttime = true;
        b.wr_busy_queues = 2;
        assert_eq!(
            b.injection_candidate(s, 0),
            Some(raised),
            "the non-raised queue is passed over"
        );
        b.inject.cursor = 0;
        b.wr_busy_queues = 1;
        b.qm(raised).wr.coeff = 1;
        assert_eq!(b.injection_candidate(s, 0), None, "no other raised queue is busy");
        b.qm(s).has_short_ttime = false;
        b.inject.cursor = 0;
        assert_eq!(
            b.injection_candidate(s, 0),
            Some(plain),
            "a long thinker absorbs any injection"
        );
    }

    // On flash a request of 64 sectors or more is injected only into an empty device (it would delay the
    // in-service queue's next request: the kernel's BFQQ_SECT_THR_NONROT rule); 63 sectors, or a rotational
    // disk, is injected alongside a request in flight. One raised queue is busy, so the "idling boosts
    // throughput with no issue" exclusion does not apply and the size rule alone decides.
    #[test]
    fn a_large_request_is_injected_on_flash_only_into_an_empty_device() {
        for (dev, rot) in [(DeviceInfo::ssd(), false), (DeviceInfo::hdd(), true)] {
            let mut b = bfq(&dev, &[]);
            assert_eq!(b.rotational, rot);
            let s = queue_with_rq(&mut b, 1, 1, 0, true);
            b.qm(s).inject.limit = 4;
            b.wr_busy_queues = 1;
            let big = b.new_queue(0, &FlowInfo::new(FlowId(2)), true, 0);
            add_rq(&mut b, big, 2, 2, 1 << 20, LARGE_RQ_NONROT);
            b.rq_in_driver = 1;
            let want = rot.then_some(big);
            assert_eq!(
                b.injection_candidate(s, 0),
                want,
                "64 sectors, one in flight, rotational={rot}"
            );
            b.rq_in_driver = 0;
            b.inject.cursor = 0;
            assert_eq!(
                b.injection_candidate(s, 0),
                Some(big),
                "64 sectors into an empty device"
            );
            let small = b.new_queue(0, &FlowInfo::new(FlowId(3)), true, 0);
            add_rq(&mut b, small, 3, 3, 1 << 22, LARGE_RQ_NONROT - 1);
            b.rq_in_driver = 1;
            b.inject.cursor = 0;
            let want = if rot { big } else { small };
            assert_eq!(
                b.injection_candidate(s, 0),
                Some(want),
                "63 sectors pass, rotational={rot}"
            );
        }
    }

    // The process's own async I/O is injected first, whatever the limit: flow 1 (best effort, priority 2) finds
    // its async queue among the group's 17 (8 RT, 8 BE, 1 IDLE; BE priority 2 is the 11th), and only when that
    // queue's next request is its own (a shared async queue may hold another process's write first).
    #[test]
    fn the_processs_own_async_queue_is_injected_whatever_the_limit() {
        // The in-service queue of flow 1 and the shared async queue of its class and priority, whose next
        // request is `writer`'s; the limit is 0, so only the own-async rule can inject.
        // The flow's group is the root (index 0) or a second group (index 1), whose async queues are its own.
        let candidate = |writer: u32, group: u32| {
            let mut b = bfq(&DeviceInfo::ssd(), &[]);
            b.ensure_flow(FlowId(1));
            if let Some(c) = b.flows.get_mut(&1) {
                c.info.prio = 2;
                c.info.group = crate::types::GroupId(group);
            }
            let s = queue_with_rq(&mut b, 1, 1, 0, true);
            b.qm(s).merge.owner = 1;
            b.qm(s).inject.limit = 0;
            let a = b.async_queue(FlowId(1), 0);
            let gi = b.group_index_get(crate::types::GroupId(group)).unwrap_or(u32::MAX);
            assert_eq!(
                (gi, b.groups[gi as usize].async_q[8 + 2]),
                (u32::from(group != 0), Some(a))
            );
            add_rq(&mut b, a, writer, 2, 1 << 20, 8);
            (a, b.injection_candidate(s, 0))
        };
        for group in [0, 7] {
            let (a, got) = candidate(1, group);
            assert_eq!(got, Some(a), "its own write, group {group}");
            assert_eq!(
                candidate(9, group).1,
                None,
                "another process's write first in the shared queue"
            );
        }
    }

    // The scan for "any queue" starts after the queue injected last, so that among equally good candidates
    // each gets its turn (our rotation; the kernel walks its active list from the most recently activated
    // queue). With the in-service queue at slot 0 and candidates at slots 1 and 2: 1, 2, 1.
    #[test]
    fn the_injection_scan_takes_candidates_in_turn() {
        let mut b = bfq(&DeviceInfo::ssd(), &[]);
        let s = queue_with_rq(&mut b, 1, 1, 0, true);
        let c1 = queue_with_rq(&mut b, 2, 2, 1 << 20, true);
        let c2 = queue_with_rq(&mut b, 3, 3, 1 << 21, true);
        b.qm(s).inject.limit = 4;
        b.wr_busy_queues = 1;
        let picks: Vec<_> = (0..3).map(|_| b.injection_candidate(s, 0)).collect();
        assert_eq!(picks, [Some(c1), Some(c2), Some(c1)]);
    }

    // At most 64 queues are examined per attempt, and the next attempt goes on after them: with the in-service
    // queue at slot 0 and 69 more queues, a candidate at slot 66 is not found by a scan starting at slot 0 (it
    // examines slots 0-63), and is the first found by the next one (from slot 64), ahead of a candidate at slot 3.
    #[test]
    fn the_scan_examines_64_queues_and_the_next_one_continues_after_them() {
        let mut b = bfq(&DeviceInfo::ssd(), &[]);
        let s = queue_with_rq(&mut b, 1, 1, 0, true);
        let others: Vec<QueueId> = (2..=70u32)
            .map(|f| b.new_queue(0, &FlowInfo::new(FlowId(f)), true, 0))
            .collect();
        assert_eq!((others[2].slot(), others[65].slot()), (3, 66));
        b.qm(s).inject.limit = 4;
        b.wr_busy_queues = 1;
        add_rq(&mut b, others[65], 67, 2, 1 << 20, 8);
        assert_eq!(b.injection_candidate(s, 0), None, "slot 66 is beyond this scan");
        add_rq(&mut b, others[2], 4, 3, 1 << 21, 8);
        assert_eq!(
            b.injection_candidate(s, 0),
            Some(others[65]),
            "the next scan starts at slot 64"
        );
        assert_eq!(
            b.injection_candidate(s, 0),
            Some(others[2]),
            "and then wraps round to slot 3"
        );
    }

    // The limit is reset once a second, when the queue is next set in service: to 0 for a short thinker (its
    // next request comes soon, and must find the device free) and to 1 otherwise, forgetting the baseline,
    // so that a stale measurement cannot block or allow injection for ever. Before the second is up the
    // learnt limit stays.
    #[test]
    fn the_limit_is_reset_a_second_after_its_last_decrease() {
        for short in [false, true] {
            let mut b = bfq(&DeviceInfo::ssd(), &[]);
            let s = queue_with_rq(&mut b, 1, 1, 0, true);
            let c = queue_with_rq(&mut b, 2, 2, 1 << 20, true);
            b.wr_busy_queues = 1;
            b.qm(s).has_short_ttime = short;
            b.qm(s).inject = QueueInject {
                limit: 3,
                last_serv_time: 100 * US,
                decrease_time: 10 * MS,
                ..QueueInject::new(0)
            };
            b.inject.hole = true;
            b.inject.injected = true;
            b.rq_in_driver = 2;
            b.inject_on_set_in_service(s, SEC + 10 * MS - 1);
            assert_eq!(b.q(s).inject.limit, 3, "1 ns short of a second");
            assert_eq!(
                b.injection_candidate(s, 0),
                Some(c),
                "2 in the device, within the limit of 3"
            );
            assert!(!b.inject.hole && !b.inject.injected, "a new slot starts without a hole");
            b.inject_on_set_in_service(s, SEC + 10 * MS);
            let i = b.q(s).inject;
            assert_eq!(
                (i.limit, i.last_serv_time, i.decrease_time),
                (u32::from(!short), 0, SEC + 10 * MS),
                "short={short}"
            );
            assert_eq!(
                b.injection_candidate(s, 0),
                None,
                "2 in the device, over the reset limit"
            );
        }
    }

    // The baseline is the service time of a request that ran alone: dispatched into an empty device after a
    // hole in which nothing was injected. A request that followed injected I/O (or shared the device) measures
    // the injection's cost, not the baseline, so it leaves the baseline unset and the limit where it was; one
    // that ran alone sets it. Driven through the hooks: plug (a hole), dispatch, completion.
    #[test]
    fn only_a_request_that_ran_alone_sets_the_baseline() {
        for (injected, in_driver, alone) in [(true, 0, false), (false, 1, false), (false, 0, true)] {
            let mut b = bfq(&DeviceInfo::ssd(), &[]);
            let q = queue_with_rq(&mut b, 1, 1, 0, true);
            let rq = b.store.rq(b.q(q).rqs.next.unwrap()).unwrap().clone();
            b.in_service = Some(q);
            b.qm(q).inject.limit = 2;
            b.inject_on_plug(q);
            b.inject.injected = injected;
            b.inject_on_dispatch(q, &rq, in_driver, MS);
            b.inject_on_completion(q, &rq, MS + 100 * US);
            let i = b.q(q).inject;
            let want = if alone { (100 * US, 3) } else { (0, 2) };
            assert_eq!(
                (i.last_serv_time, i.limit),
                want,
                "injected={injected} in_driver={in_driver}"
            );
        }
    }

    // A request served alone faster than the baseline lowers it (the kernel does the same: the baseline is the
    // best time seen); a slower one, 149 µs against 80, is then within 3/2 of it and raises the limit.
    #[test]
    fn a_faster_request_served_alone_lowers_the_baseline() {
        let mut b = bfq(&DeviceInfo::ssd(), &[]);
        let q = queue_with_rq(&mut b, 1, 1, 0, true);
        let rq = b.store.rq(b.q(q).rqs.next.unwrap()).unwrap().clone();
        let mut at = 0;
        let mut done = |b: &mut Bfq, took: Time| {
            b.inject.waited = Some((rq.id.0, at, true));
            b.inject_on_completion(q, &rq, at + took);
            at += MS;
            (b.q(q).inject.last_serv_time, b.q(q).inject.limit)
        };
        assert_eq!(done(&mut b, 100 * US), (100 * US, 1));
        assert_eq!(done(&mut b, 80 * US), (80 * US, 2), "faster: the new baseline");
        assert_eq!(done(&mut b, 119 * US), (80 * US, 3), "slower, within 3/2 of 80 us");
        assert_eq!(done(&mut b, 120 * US), (80 * US, 2), "3/2 of 80 us: down");
    }

    // A waker is one other queue whose completions keep coming just before this sync queue's lone requests.
    // Not counted: the queue's own completion, an async queue's arrival, an arrival while the queue already
    // holds a request (its process did not wait), and detections alternating between two completers (each
    // change of candidate restarts the count, so three hits shared by two queues make no waker).
    #[test]
    fn only_repeated_hits_of_one_other_queue_on_a_lone_sync_request_make_a_waker() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let w1 = queue_with_rq(&mut b, 1, 1, 0, true);
        let w2 = queue_with_rq(&mut b, 2, 2, 1 << 18, true);
        let q = queue_with_rq(&mut b, 3, 3, 1 << 20, true);
        b.qm(q).has_short_ttime = false;
        let hit = |b: &mut Bfq, by: QueueId, of: QueueId, at: Time| {
            b.waker_on_completion(by, at - MS);
            b.waker_on_arrival(of, at);
            let i = b.q(of).inject;
            (i.waker_candidate, i.waker_hits, i.waker)
        };
        assert_eq!(hit(&mut b, q, q, 10 * MS), (None, 0, None), "its own completion");
        assert_eq!(hit(&mut b, w1, q, 20 * MS), (Some(w1), 1, None));
        assert_eq!(
            hit(&mut b, w2, q, 30 * MS),
            (Some(w2), 1, None),
            "another completer restarts"
        );
        assert_eq!(hit(&mut b, w1, q, 40 * MS), (Some(w1), 1, None), "and again");

        // Two requests queued: the process did not wait for the completion.
        add_rq(&mut b, q, 3, 4, 1 << 21, 8);
        assert_eq!(hit(&mut b, w1, q, 50 * MS), (Some(w1), 1, None), "two queued: no hit");

        // An async queue holding one request.
        let a = b.async_queue(FlowId(3), 0);
        add_rq(&mut b, a, 3, 5, 1 << 22, 8);
        b.qm(a).has_short_ttime = false;
        assert_eq!(hit(&mut b, w1, a, 60 * MS), (None, 0, None), "async");
    }
}
