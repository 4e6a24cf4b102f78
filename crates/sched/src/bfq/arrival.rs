//! Arrival: the insert path (`bfq_insert_request`, `bfq_add_request`, `bfq_rq_enqueued`), request merging
//! inside a queue, and an idle queue becoming busy (`bfq_bfqq_handle_idle_busy_switch`) with its activation
//! and possible preemption of the queue in service.

use super::budget::Expiration;
use super::era::IO_INTENSITY_WINDOW;
use super::ids::{QueueId, SlotId};
use super::{idling, peak_rate, Bfq, IN_TIME_SLICES, REQUESTS_WITHIN_TIMER};
use crate::merge::MergeKind;
use crate::types::{Request, Time};

impl Bfq {
    /// `bfq_updated_next_req`: the next request of a busy, not in-service queue changed: its budget follows.
    pub(crate) fn updated_next_req(&mut self, q: QueueId) {
        if self.in_service == Some(q) || !self.q(q).busy || self.q(q).rqs.next.is_none() {
            return;
        }
        let nb = self
            .q(q)
            .max_budget
            .max(self.next_charge(q))
            .max(self.entity_service(q));
        if nb != self.entity_budget(q) {
            let e = self.q(q).entity;
            self.wf.reposition(e, nb);
        }
    }

    /// `bfq_bfqq_higher_class_or_weight`: `q` has a higher class than `s`, or a larger weight: its own if both
    /// are in the same group, else each one's group weight (a queue of the root group counts with its own).
    pub(crate) fn higher_class_or_weight(&self, q: QueueId, s: QueueId) -> bool {
        if self.q(q).class < self.q(s).class {
            return true;
        }
        let (Some(a), Some(b)) = (self.wf.entity(self.q(q).entity), self.wf.entity(self.q(s).entity)) else {
            return false;
        };
        if a.parent == b.parent {
            return a.weight > b.weight;
        }
        let w = |f: &super::wf2q::EntityFacts| self.wf.group_weight(f.parent).unwrap_or(f.weight);
        w(&a) > w(&b)
    }

    pub(crate) fn insert_rq(&mut self, rq: Request, now: Time) {
        let flow = rq.flow;
        self.queued += rq.parts();
        // Fast path: the flow is known and its sync queue is live and not being split.
        // One flow lookup: whether a stable merge is scheduled is read here, so that the common case (none) does
        // not look the flow up again.
        let (cur, stable) = self
            .flows
            .get(&flow.0)
            .map_or((None, false), |c| (c.sync_q, c.stable_merge.is_some()));
        let fast = cur.filter(|&c| rq.sync && self.is_live(c) && !self.q(c).merge.split_coop);
        let q = if let Some(cur) = fast {
            let stably = if stable {
                self.stable_merge_on_insert(flow, cur, now)
            } else {
                None
            };
            match stably {
                Some(t) => t,
                None => self.maybe_merge_on_insert(flow, cur, &rq, now),
            }
        } else if rq.sync {
            self.ensure_flow(flow);
            self.maybe_split(flow, now);
            let q = self.sync_queue(flow, now);
            match self.stable_merge_on_insert(flow, q, now) {
                Some(t) => t,
                None => self.maybe_merge_on_insert(flow, q, &rq, now),
            }
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
                        self.front_merged(q, slot, old, new);
                        self.pos_update(q, now);
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

    /// `bfq_update_io_intensity` (newest kernels), at a request for an empty sync queue: the time since its last
    /// completion counts as idle if nothing of it was in the driver; the queue is I/O bound while idle at most a
    /// fifth of the window, which is halved (with its idle time) once it exceeds [`IO_INTENSITY_WINDOW`]. A queue's
    /// first arrival is not judged.
    fn update_io_intensity(&mut self, q: QueueId, now: Time) {
        let qq = self.qm(q);
        let tot_io_time = now.saturating_sub(qq.io_start_time);
        if qq.rqs.is_empty() && qq.dispatched == 0 {
            let since = qq.last_end_request.map_or(0, |t| now.saturating_sub(t));
            qq.tot_idle_time = qq.tot_idle_time.saturating_add(since);
        }
        if qq.just_created {
            return;
        }
        qq.io_bound = qq.tot_idle_time.saturating_mul(5) <= tot_io_time;
        if tot_io_time > IO_INTENSITY_WINDOW {
            qq.io_start_time = now.saturating_sub(tot_io_time / 2);
            qq.tot_idle_time /= 2;
        }
    }

    /// `bfq_add_request` + `bfq_rq_enqueued`.
    pub(crate) fn add_request(&mut self, q: QueueId, slot: SlotId, sector: u64, sectors: u32, sync: bool, now: Time) {
        if self.rules.io_intensity && self.q(q).sync && self.q(q).rqs.is_empty() {
            self.update_io_intensity(q, now);
        }
        // Think time and seekiness of sync queues. The newest kernel samples think time only when the queue has
        // nothing queued or in the driver (how long it takes to come back once idle) and calls it short up to
        // slice_idle / 2; v7r2 samples every arrival and calls it short up to slice_idle.
        if self.q(q).sync {
            let si = self.p.slice_idle;
            let rot = self.rotational;
            let exited = self.q(q).refs == 0;
            let newest = self.rules.newest_think_time;
            let qq = self.qm(q);
            let sample = !newest || (qq.dispatched == 0 && !qq.busy);
            if let (Some(last), true) = (qq.last_end_request, sample) {
                qq.ttime.update(now.saturating_sub(last), si);
            }
            let seeky = peak_rate::seeky(qq.last_request_pos, sector, sectors, rot);
            qq.seek_history = idling::push_seek(qq.seek_history, seeky);
            qq.seek_mean.update(sector.abs_diff(qq.last_request_pos));
            let limit = if newest { si / 2 } else { si };
            qq.has_short_ttime = qq.ttime.short(exited, limit);
            if self.rules.idle_window {
                self.v7_update_idle_window(q);
            }
        }
        self.qm(q).last_request_pos = sector.saturating_add(u64::from(sectors));
        let prev_next = self.q(q).rqs.next;
        let (last, bm, pen) = (self.last_position, self.p.back_seek_max, self.p.back_seek_penalty);
        {
            let store = &self.store;
            let Some(Some(qq)) = self.queues.get_mut(q.slot()) else {
                unreachable!("bfq: {q:?} is not a live queue")
            };
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
        self.pos_update(q, now);
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
    pub(crate) fn handle_idle_busy_switch(&mut self, q: QueueId, now: Time) {
        self.burst_maybe_clear(q, now);
        self.qm(q).just_created = false;
        let arrived_in_time = self
            .q(q)
            .last_end_request
            .is_some_and(|t| now <= t.saturating_add(IN_TIME_SLICES * self.p.slice_idle));
        let (interactive, soft_rt) = self.wr_candidate(q, now);
        // Budget for the activation (`bfq_bfqq_update_budg_for_activation`): a queue that expired empty with
        // budget left and comes back in time continues its slot, and only such a queue is back-shifted and wants
        // to preempt (it recovers its hole); any other queue starts a fresh budget and loses the flag.
        let e = self.q(q).entity;
        let left = self.budget_left(q);
        let continues = self.q(q).non_blocking_wait_rq && arrived_in_time && left > 0;
        if continues {
            let b = left.min(self.q(q).max_budget);
            self.wf.set_budget(e, b);
        } else {
            let b = self.q(q).max_budget.max(self.next_charge(q));
            self.wf.set_budget(e, b);
            self.qm(q).non_blocking_wait_rq = false;
        }
        self.wf.clear_service(e);
        let backshift = self.q(q).non_blocking_wait_rq;
        let wants_preempt = continues;
        // v7r2: IO_bound comes back after enough in-time arrivals (newest kernels judge I/O intensity instead,
        // `update_io_intensity`).
        if !self.rules.io_intensity {
            let qq = self.qm(q);
            if !qq.io_bound {
                if arrived_in_time {
                    qq.requests_within_timer += 1;
                    if qq.requests_within_timer >= REQUESTS_WITHIN_TIMER {
                        qq.io_bound = true;
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
        // Preemption (newest kernels; v7r2 never preempts: the newcomer waits for the B-WF2Q+ choice).
        if let Some(s) = self.in_service.filter(|&s| s != q && self.rules.preemption) {
            let higher = self.higher_class_or_weight(q, s);
            let want = (wants_preempt && self.q(q).wr.coeff >= self.q(s).wr.coeff) || higher || !self.better_to_idle(s);
            if want && !self.wf.in_service_still_next(now) {
                self.stats.preemptions += 1;
                self.expire(s, Expiration::Preempted, now);
            }
        }
    }
}

impl Bfq {
    /// `bfq_request_merged`: the request in `slot` of queue `q` grew at its front, from sector `old` to `new`.
    /// It is moved in the queue's sector order; if it now starts before the request that preceded it (possible
    /// only when the two overlap), the next request is chosen again between the current one and it, and a
    /// change of next request updates the queue's budget.
    fn front_merged(&mut self, q: QueueId, slot: SlotId, old: u64, new: u64) {
        use super::fifo::{choose_first, Cand};
        let passed = self.q(q).rqs.sort.before(&(old, slot)).is_some_and(|(p, _)| new < p);
        self.qm(q).rqs.resort(slot, old, new);
        if !passed {
            return;
        }
        let (last, bm, pen) = (self.last_position, self.p.back_seek_max, self.p.back_seek_penalty);
        let cand = |s: SlotId| self.store.rq(s).map(Cand::of);
        let prev = self.q(q).rqs.next;
        let keep = match (prev.and_then(cand), cand(slot)) {
            (Some(n), Some(m)) => choose_first(n, m, last, bm, pen),
            _ => false,
        };
        if !keep {
            self.qm(q).rqs.next = Some(slot);
        }
        if prev != self.q(q).rqs.next {
            self.updated_next_req(q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::bfq;
    use super::*;
    use crate::device::DeviceInfo;
    use crate::scheduler::Scheduler;
    use crate::types::{Decision, Direction, FlowId, FlowInfo, IoClass, RequestId, MS};

    use super::super::tests::next_rq as dispatched;

    fn read(id: u64, flow: u32, sector: u64, sectors: u32) -> Request {
        Request::new(RequestId(id), FlowId(flow), Direction::Read, true, sector, sectors)
    }

    /// A policy on an HDD without weight raising, with flow 1's one request dispatched: its queue is in
    /// service, empty, and worth idling for (a sequential reader on a rotational disk).
    fn one_in_service() -> (Bfq, QueueId) {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0, 8), 0);
        assert!(matches!(b.dispatch(0), Decision::Dispatch(_)));
        let s = b.in_service.expect("flow 1 in service");
        assert!(b.better_to_idle(s));
        (b, s)
    }

    // `bfq_updated_next_req`: when a waiting queue's next request changes, its budget follows (at least its
    // maximum budget and the new request's charge), so its finish time, the B-WF2Q+ key, moves with it; the
    // queue in service keeps the budget it was selected with (changing it would break the guarantees).
    #[test]
    fn a_waiting_queues_budget_follows_its_next_request_but_not_the_in_service_ones() {
        let (mut b, s) = one_in_service();
        b.flow_started(&FlowInfo::new(FlowId(2)), 0);
        b.insert(read(2, 2, 1 << 30, 8), 0);
        let w = b.flows[&2].sync_q.expect("flow 2's queue");
        let (budget, finish) = (b.entity_budget(w), b.wf.entity(b.q(w).entity).map(|f| f.finish));
        assert!(budget > 64, "a fresh queue's budget, {budget}");
        // As if the budget feedback had shrunk its maximum: a new next request (nearer the head at 8) of 64
        // sectors makes the budget 64, and the finish time earlier.
        b.qm(w).max_budget = 8;
        b.insert(read(3, 2, 1 << 29, 64), 0);
        assert_eq!(
            b.q(w).rqs.next.and_then(|x| b.store.rq(x)).map(|r| r.id),
            Some(RequestId(3))
        );
        assert_eq!(b.entity_budget(w), 64);
        assert!(b.wf.entity(b.q(w).entity).map(|f| f.finish) < finish);
        // The queue in service: a new request does not touch its budget.
        let sb = b.entity_budget(s);
        b.qm(s).max_budget = 8;
        b.insert(read(4, 1, 8, 64), 0);
        assert_eq!(b.entity_budget(s), sb);
    }

    // Preemption at an idle-to-busy switch: a newcomer preempts the queue in service (worth idling for) only if
    // it has a higher class or weight, or comes back in time to continue its slot. A fresh newcomer of the same
    // weight does not, even when its small budget makes it the next B-WF2Q+ choice; one of twice the weight
    // does, and so does a real-time one of the same weight.
    #[test]
    fn only_a_heavier_newcomer_preempts_a_queue_worth_idling_for() {
        let heavier = Some(2 * Bfq::flow_weight(&FlowInfo::new(FlowId(1))));
        for (weight, class) in [(None, IoClass::Be), (heavier, IoClass::Be), (None, IoClass::Rt)] {
            let (mut b, s) = one_in_service();
            let mut info = FlowInfo::new(FlowId(2));
            info.weight = weight;
            info.class = class;
            b.flow_started(&info, 0);
            let w = b.sync_queue(FlowId(2), 0);
            b.qm(w).max_budget = 64;
            b.insert(read(2, 2, 1 << 30, 8), MS);
            assert!(!b.wf.in_service_still_next(MS), "the newcomer would be next");
            let preempted = weight.is_some() || class == IoClass::Rt;
            assert_eq!(
                (b.in_service == Some(s), b.stats.preemptions),
                (!preempted, u64::from(preempted)),
                "weight {weight:?}, {class:?}"
            );
        }
    }

    // `bfq_request_merged`: a front merge that makes a request start before the one that preceded it in sector
    // order (the new part overlaps it) makes the elevator choose the next request again. Head at 0: 1500 (8
    // sectors) is next, ahead of 2000; a 1000-sector request at 1000 front-merges into 2000, which now starts
    // at 1000, nearer the head, and is served first; the queue's budget follows its new next request.
    #[test]
    fn a_front_merge_that_passes_the_previous_request_makes_it_the_next() {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 1500, 8), 0);
        b.insert(read(2, 1, 2000, 8), 0);
        // A small maximum budget (as after feedback that shrank it), so that the new next request's charge sets
        // the queue's budget (`bfq_updated_next_req`).
        let q = b.flows[&1].sync_q.expect("flow 1's queue");
        b.qm(q).max_budget = 8;
        b.insert(read(3, 1, 1000, 1000), 0);
        assert_eq!(b.entity_budget(q), 1008);
        let first = dispatched(&mut b, 0);
        assert_eq!((first.sector, first.sectors), (1000, 1008));

        // The choice is made again, not forced: with 100 queued too, the grown request (now at 1000) passes 1500
        // but 100, nearer the head, stays next.
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        for (id, sector, sectors) in [(1, 100, 8), (2, 1500, 8), (3, 2000, 8), (4, 1000, 1000)] {
            b.insert(read(id, 1, sector, sectors), 0);
        }
        assert_eq!(dispatched(&mut b, 0).sector, 100);
    }

    // Across groups the comparison is of group weights: a fresh newcomer whose group weighs as much as the
    // in-service queue's group does not preempt it (even as the next B-WF2Q+ choice); one whose group weighs
    // twice as much does.
    #[test]
    fn a_newcomer_of_another_group_preempts_only_if_its_group_is_heavier() {
        use crate::types::GroupId;
        for (w2, preempted) in [(100, false), (200, true)] {
            let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
            b.set_group_weight(GroupId(1), 100);
            b.set_group_weight(GroupId(2), w2);
            b.flow_started(&FlowInfo::new(FlowId(1)).with_group(GroupId(1)), 0);
            b.insert(read(1, 1, 0, 8), 0);
            assert!(matches!(b.dispatch(0), Decision::Dispatch(_)));
            let s = b.in_service.expect("flow 1 in service");
            b.flow_started(&FlowInfo::new(FlowId(2)).with_group(GroupId(2)), 0);
            let w = b.sync_queue(FlowId(2), 0);
            b.qm(w).max_budget = 64;
            b.insert(read(2, 2, 1 << 30, 8), MS);
            assert_eq!(
                (b.in_service == Some(s), b.stats.preemptions),
                (!preempted, u64::from(preempted)),
                "{w2}"
            );
            if !preempted {
                assert!(!b.wf.in_service_still_next(MS), "the newcomer's group would be next");
            }
        }
    }

    // `bfq_update_io_intensity`: the time since the last completion counts as idle only if nothing of the
    // queue was in the driver meanwhile; a queue idle more than a fifth of its window is not I/O bound; the
    // window is halved (with its idle time) once it exceeds 200 ms, not at exactly 200 ms.
    #[test]
    fn io_intensity_counts_idle_time_only_with_nothing_in_the_driver_and_halves_after_200_ms() {
        let mut b = bfq(&DeviceInfo::ssd(), &[]);
        let q = b.new_queue(0, &FlowInfo::new(FlowId(1)), true, 0);
        let qq = b.qm(q);
        qq.just_created = false;
        qq.last_end_request = Some(10 * MS);
        qq.dispatched = 1;
        b.update_io_intensity(q, 100 * MS);
        let qq = b.q(q);
        assert_eq!(
            (qq.tot_idle_time, qq.io_bound),
            (0, true),
            "a request in flight: not idle"
        );
        b.qm(q).dispatched = 0;
        b.update_io_intensity(q, 100 * MS);
        let qq = b.q(q);
        assert_eq!((qq.tot_idle_time, qq.io_bound), (90 * MS, false), "90 ms idle of 100");

        let qq = b.qm(q);
        qq.tot_idle_time = 30 * MS;
        qq.dispatched = 1;
        b.update_io_intensity(q, 200 * MS);
        let qq = b.q(q);
        assert_eq!(
            (qq.io_start_time, qq.tot_idle_time, qq.io_bound),
            (0, 30 * MS, true),
            "200 ms: kept"
        );
        b.update_io_intensity(q, 200 * MS + 2);
        let qq = b.q(q);
        assert_eq!(
            (qq.io_start_time, qq.tot_idle_time),
            (100 * MS + 1, 15 * MS),
            "just over: halved"
        );
    }

    /// A policy of `era` on an HDD without weight raising.
    fn of_era(era: super::super::era::Era) -> Bfq {
        use super::super::tunables::{Params, TUNABLES, V7R2_TUNABLES};
        use crate::tunables::TunableValues;
        let v7 = era == super::super::era::Era::V7r2;
        let specs: &[_] = if v7 { &V7R2_TUNABLES } else { &TUNABLES };
        let v = TunableValues::parse("bfq", specs, &DeviceInfo::hdd(), &["low_latency=0"]).unwrap();
        Bfq::with_era(&DeviceInfo::hdd(), Params::from_values(&v), era)
    }

    // Think time: the newest kernels sample it only at an arrival that finds the queue with nothing queued or in
    // flight (how long the process takes to come back once served), and call it short up to slice_idle / 2
    // (4 ms); v7r2 samples every arrival after a completion and calls it short up to slice_idle (8 ms). Here
    // the arrival at 300 ms finds the queue still holding a request: v7r2 samples its gap since the completion
    // at 2 ms, the newest rules do not, and a learnt mean of 5 ms is short for v7r2 only (3 ms for both). Once
    // the queue has been served, has expired and left the busy set, the arrival at 600 ms is sampled by both.
    // The I/O-intensity window is updated only at an arrival into an empty sync queue, and only by the newest
    // rules (v7r2's I/O-bound flag follows its own rule, `requests_within_timer`): its start stays put at the
    // arrival at 300 ms for both eras (an update there would halve the 300 ms window), and at v7r2's arrival
    // into the emptied queue at 600 ms.
    #[test]
    fn think_time_and_io_intensity_are_sampled_by_each_eras_rule() {
        use super::super::era::Era;
        use super::super::idling::ThinkTime;
        for era in [Era::Newest, Era::V7r2] {
            for mean in [3 * MS, 5 * MS] {
                let mut b = of_era(era);
                b.flow_started(&FlowInfo::new(FlowId(1)), 0);
                b.insert(read(1, 1, 0, 8), 0);
                let r1 = dispatched(&mut b, 0);
                b.insert(read(2, 1, 1 << 20, 8), MS);
                b.completed(&r1, 2 * MS);
                let q = b.flows[&1].sync_q.expect("flow 1's queue");
                let io_start = b.q(q).io_start_time;
                let learnt = ThinkTime {
                    samples: 1000,
                    total: 1000 * mean,
                    mean,
                };
                b.qm(q).ttime = learnt;
                b.insert(read(3, 1, 1 << 21, 8), 300 * MS);
                let v7 = era == Era::V7r2;
                assert_eq!(b.q(q).ttime != learnt, v7, "{era:?}: sampled at 300 ms");
                assert_eq!(b.q(q).has_short_ttime, v7 || mean == 3 * MS, "{era:?}: {mean} ns short");
                assert_eq!(b.q(q).io_start_time, io_start, "{era:?}: a queue holding a request");
                let mut now = 300 * MS;
                while let Decision::Dispatch(r) = b.dispatch(now) {
                    now += MS;
                    b.completed(&r, now);
                }
                let _ = b.dispatch(now + 100 * MS);
                assert!(b.q(q).rqs.is_empty() && b.q(q).dispatched == 0 && !b.q(q).busy);
                let before = b.q(q).ttime;
                b.insert(read(4, 1, 1 << 22, 8), 600 * MS);
                assert_ne!(b.q(q).ttime, before, "{era:?}: sampled at 600 ms");
                if v7 {
                    assert_eq!(b.q(q).io_start_time, io_start, "v7r2: an empty queue");
                }
            }
        }
    }

    // `bfq_rq_enqueued` while the queue in service is idling for its next request (a sequential reader on an
    // HDD, where idling boosts throughput): one small request (under 32 sectors) lets the idling go on, so
    // that more can arrive and be dispatched together; a larger one stops it (the timer is cancelled and the
    // request can be dispatched). The reader was served for 10 ms and idle for 1 ms, so it is I/O bound (idle
    // at most a fifth of the time), which with a short think time makes idling boost throughput. Another queue's arrival does not touch the timer. And the expiry for a
    // passed budget timeout happens at an arrival only while idling: a queue in service with a request in
    // flight and its timeout passed is left to the next dispatch.
    #[test]
    fn only_a_large_request_ends_the_idling_for_a_sequential_reader() {
        let idling = |low_latency: &str| {
            let mut b = bfq(&DeviceInfo::hdd(), &[low_latency]);
            b.flow_started(&FlowInfo::new(FlowId(1)), 0);
            b.flow_started(&FlowInfo::new(FlowId(2)), 0);
            b.insert(read(1, 1, 0, 8), 0);
            let r1 = dispatched(&mut b, 0);
            b.completed(&r1, 10 * MS);
            assert!(!matches!(b.dispatch(10 * MS), Decision::Dispatch(_)));
            let s = b.in_service.expect("flow 1 in service");
            assert!(b.q(s).wait_request && b.timer.is_some(), "idling for flow 1");
            (b, s)
        };
        for (flow, sectors, still) in [(1, 8, true), (1, 31, true), (1, 32, false), (2, 64, true)] {
            let (mut b, s) = idling("low_latency=0");
            b.insert(read(2, flow, 8 + (u64::from(flow) << 20), sectors), 11 * MS);
            assert_eq!(
                (b.q(s).wait_request, b.timer.is_some()),
                (still, still),
                "flow {flow}, {sectors} sectors"
            );
            assert_eq!(b.in_service, Some(s));
        }
        // Flow 1 weight-raised (a new queue under low_latency): the idling is for its guarantees, not for
        // throughput, and even a small request ends it.
        let (mut b, s) = idling("low_latency=1");
        assert!(b.raised(s));
        b.insert(read(2, 1, 8 + (1 << 20), 8), 11 * MS);
        assert_eq!((b.q(s).wait_request, b.timer.is_some()), (false, false), "raised");
        // Not idling, a request in flight, the 125 ms budget timeout passed: a new request does not expire it.
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0, 8), 0);
        assert!(matches!(b.dispatch(0), Decision::Dispatch(_)));
        let s = b.in_service.expect("flow 1 in service");
        b.insert(read(2, 1, 8, 64), 200 * MS);
        assert!(b.budget_timed_out(s, 200 * MS));
        assert_eq!(b.in_service, Some(s));
    }

    // `bfq_bfqq_update_budg_for_activation`: a queue that expired empty with budget left and comes back within
    // 3 x slice_idle (24 ms) of its last completion continues its slot with the budget it had left; one that
    // comes back later starts afresh with its maximum budget. Flow 1 completes at 5 ms, expires when its 8 ms idle timer fires, and
    // returns at 29 ms (in time) or 29 ms + 1 ns (late).
    #[test]
    fn a_queue_back_within_three_slice_idles_continues_its_slot() {
        for (late, continues) in [(0, true), (1, false)] {
            let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
            b.flow_started(&FlowInfo::new(FlowId(1)), 0);
            b.insert(read(1, 1, 0, 8), 0);
            let r1 = dispatched(&mut b, 0);
            b.completed(&r1, 5 * MS);
            assert!(!matches!(b.dispatch(5 * MS), Decision::Dispatch(_)));
            assert!(!matches!(b.dispatch(20 * MS), Decision::Dispatch(_)));
            let q = b.flows[&1].sync_q.expect("flow 1's queue");
            assert!(b.in_service.is_none() && !b.q(q).busy && b.q(q).non_blocking_wait_rq);
            // A maximum budget above what is left (as after feedback that grew it), so the two differ.
            b.qm(q).max_budget = 20_000;
            let left = b.budget_left(q);
            assert!(left > 0 && left < 20_000);
            b.insert(read(2, 1, 8, 8), 29 * MS + late);
            assert_eq!(b.entity_budget(q) == left, continues, "late by {late} ns");
        }
    }

    // v7r2 gives a queue back its I/O-bound flag after REQUESTS_WITHIN_TIMER (120) arrivals in time (within
    // 3 x slice_idle of its last completion); the newest rules judge I/O intensity instead. Flow 1, marked not
    // I/O bound with 119 in-time arrivals counted, comes back 24 ms after its completion at 5 ms (in time, but
    // idle 24 ms of its 29 ms life): the 120th makes it I/O bound under v7r2 only.
    #[test]
    fn v7r2_counts_in_time_arrivals_to_restore_io_bound() {
        use super::super::era::Era;
        for era in [Era::Newest, Era::V7r2] {
            let mut b = of_era(era);
            b.flow_started(&FlowInfo::new(FlowId(1)), 0);
            b.insert(read(1, 1, 0, 8), 0);
            let r1 = dispatched(&mut b, 0);
            b.completed(&r1, 5 * MS);
            let mut now = 5 * MS;
            while b.in_service.is_some() && now < 300 * MS {
                now += MS;
                let _ = b.dispatch(now);
            }
            let q = b.flows[&1].sync_q.expect("flow 1's queue");
            assert!(b.in_service.is_none() && !b.q(q).busy, "{era:?}: expired at {now}");
            let qq = b.qm(q);
            qq.io_bound = false;
            qq.requests_within_timer = super::super::REQUESTS_WITHIN_TIMER - 1;
            b.insert(read(2, 1, 8, 8), 29 * MS);
            assert_eq!(b.q(q).io_bound, era == Era::V7r2, "{era:?}");
        }
    }

    // A queue that comes back in time to continue its slot (it expired empty with budget left, and returns
    // within 3 x slice_idle of its last completion) wants to preempt: it recovers the hole it left, and does
    // preempt a queue worth idling for when its raising coefficient is at least the in-service queue's (both
    // 1 here), being the next B-WF2Q+ choice with its old timestamps. v7r2 never preempts. Flow 2 is served
    // at 0, completes at 1 ms and expires when its idle timer fires (at 9 ms); flow 1 is then served and idled
    // for; flow 2 returns at 20 ms.
    #[test]
    fn a_queue_back_in_time_preempts_in_the_newest_rules_only() {
        use super::super::era::Era;
        for era in [Era::Newest, Era::V7r2] {
            let mut b = of_era(era);
            for f in [1, 2] {
                b.flow_started(&FlowInfo::new(FlowId(f)), 0);
            }
            let serve = |b: &mut Bfq, id: u64, flow: u32, at: Time| {
                b.insert(read(id, flow, u64::from(flow) << 24, 8), at);
                let r = dispatched(b, at);
                assert_eq!(r.flow, FlowId(flow));
                b.completed(&r, at + MS);
                assert!(
                    !matches!(b.dispatch(at + MS), Decision::Dispatch(_)),
                    "idling for flow {flow}"
                );
            };
            serve(&mut b, 1, 2, 0);
            serve(&mut b, 2, 1, 10 * MS);
            let s = b.in_service.expect("flow 1 in service");
            let w = b.flows[&2].sync_q.expect("flow 2's queue");
            assert!(b.q(w).non_blocking_wait_rq && b.better_to_idle(s));
            b.insert(read(3, 2, (2 << 24) + 8, 8), 20 * MS);
            let preempted = era == Era::Newest;
            assert_eq!(
                (b.in_service == Some(s), b.stats.preemptions),
                (!preempted, u64::from(preempted)),
                "{era:?}"
            );
        }
    }

    // Preemption on a tie of finish times. The model approximates the kernel's "the root's next entity is not
    // the one in service" (`next_queue_may_preempt`) by requeueing the in-service entity with its service so
    // far and comparing finish times (bfq/mod.rs); the entity in service stays next only if it would finish
    // strictly first. In the kernel the in-service queue is out of the active tree and never the root's next
    // entity, so a tie, like any other newcomer that is next, leaves the preemption to go ahead.
    // Flow 1 (weight 40, budget 10922) has dispatched 8 sectors at 0: requeued it would start at
    // delta(8, 40) = 838 860 and finish 1 146 093 567 (+ delta(10922, 40)). Flow 2 (weight 40) arrives at 1 ms,
    // starts at the virtual time, 838 860, and with a budget of 10922 finishes at the same 1 146 093 567: a tie,
    // so it preempts (flow 1 is not worth idling for with slice_idle=0, which makes the newcomer want to). With a
    // budget one sector smaller it finishes first and preempts; one sector larger, flow 1 stays next and keeps
    // the device.
    #[test]
    fn a_newcomer_that_finishes_with_the_queue_in_service_preempts_it() {
        for (budget, preempted) in [(10_921, true), (10_922, true), (10_923, false)] {
            let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0", "slice_idle=0"]);
            b.flow_started(&FlowInfo::new(FlowId(1)), 0);
            b.insert(read(1, 1, 0, 8), 0);
            let _ = dispatched(&mut b, 0);
            let s = b.in_service.expect("flow 1 in service");
            assert_eq!((b.entity_budget(s), b.q(s).max_budget), (10_922, 10_922));
            assert!(!b.better_to_idle(s));
            b.flow_started(&FlowInfo::new(FlowId(2)), 0);
            let w = b.sync_queue(FlowId(2), 0);
            b.qm(w).max_budget = budget;
            b.insert(read(2, 2, 1 << 30, 8), MS);
            let f = b.wf.entity(b.q(w).entity).map(|e| (e.start, e.finish));
            assert_eq!(
                f,
                Some((838_860, 838_860 + super::super::wf2q::delta(budget, 40))),
                "{budget}"
            );
            assert_eq!(f.map(|f| f.1 == 1_146_093_567), Some(budget == 10_922), "{budget}");
            assert_eq!(
                (b.in_service == Some(s), b.stats.preemptions),
                (!preempted, u64::from(preempted)),
                "budget {budget}"
            );
            if preempted {
                assert_eq!(dispatched(&mut b, MS).flow, FlowId(2), "{budget}");
            }
        }
    }

    // A queue's service is forgotten when its slot ends with requests left (`bfq_bfqq_expire` sets the service
    // to 0 unless the queue may come back to continue its slot): a budget set afterwards while it waits is its
    // maximum budget or its next request's charge (`bfq_updated_next_req`'s floor, the service, is then 0), not
    // raised by the service of the slot that ended, which would also be charged again. Flow 1 dispatches 512
    // sectors and keeps a request queued; flow 2, of twice the weight, preempts it at 1 ms. With flow 1's
    // maximum budget shrunk to 8, a new next request of 64 sectors (nearer the head at 512) makes its budget 64.
    #[test]
    fn a_preempted_queues_next_budget_does_not_count_the_service_of_the_slot_that_ended() {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0, 512), 0);
        b.insert(read(2, 1, 1 << 20, 8), 0);
        assert_eq!(dispatched(&mut b, 0).sectors, 512);
        let s = b.in_service.expect("flow 1 in service");
        assert_eq!(b.entity_service(s), 512);
        let mut info = FlowInfo::new(FlowId(2));
        info.weight = Some(2 * Bfq::flow_weight(&FlowInfo::new(FlowId(1))));
        b.flow_started(&info, 0);
        b.insert(read(3, 2, 1 << 30, 8), MS);
        assert_eq!((b.in_service, b.stats.preemptions), (None, 1));
        assert!(b.q(s).busy);
        b.qm(s).max_budget = 8;
        b.insert(read(4, 1, 600, 64), MS);
        assert_eq!(
            b.q(s).rqs.next.and_then(|x| b.store.rq(x)).map(|r| r.id),
            Some(RequestId(4))
        );
        assert_eq!(b.entity_budget(s), 64);
    }

    // `bfq_request_merged` chooses the next request again only when the grown request now starts strictly
    // before the request that preceded it in sector order; otherwise the queue's next request stays, even if the
    // head has moved since it was chosen. Flow 1 queues 5000, 1000 and 1016 (8 sectors each) with the head at
    // 4000: 5000 is 1000 ahead, 1000 and 1016 are about 3000 behind (x2, the back-seek penalty), so 5000 is next.
    // The head then moves to 900 (another queue's dispatch). A 16-sector read at 1000 front-merges into 1016,
    // which now starts at 1000, where its predecessor does: not before it, so 5000 stays next and is served
    // first (at the head 900 the grown request, 100 ahead, would have won a new choice). A 24-sector read at 992
    // instead makes it start before its predecessor: the choice is made again and the grown request is served
    // first.
    #[test]
    fn a_front_merge_to_its_predecessors_start_keeps_the_next_request() {
        for (sector, sectors, first) in [(1000, 16, 5000), (992, 24, 992)] {
            let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
            b.flow_started(&FlowInfo::new(FlowId(1)), 0);
            b.last_position = 4000;
            for (id, at) in [(1, 5000), (2, 1000), (3, 1016)] {
                b.insert(read(id, 1, at, 8), 0);
            }
            let q = b.flows[&1].sync_q.expect("flow 1's queue");
            assert_eq!(
                b.q(q).rqs.next.and_then(|x| b.store.rq(x)).map(|r| r.sector),
                Some(5000)
            );
            b.last_position = 900;
            b.insert(read(4, 1, sector, sectors), 0);
            let r = dispatched(&mut b, 0);
            assert_eq!(r.sector, first, "a read at {sector}");
            if first != 5000 {
                assert_eq!(r.sectors, 32);
            }
        }
    }
}
