//! Dispatch and completion: taking the chosen queue's next request out (`bfq_dispatch_rq_from_bfqq`), the
//! dispatch entry point (`__bfq_dispatch_request`), and a request's completion (`bfq_completed_request`).

use super::budget::Expiration;
use super::ids::QueueId;
use super::slot::Pick;
use super::{idling, Bfq};
use crate::counter;
use crate::types::{Decision, IoClass, Request, Time};

impl Bfq {
    /// Takes queue `q`'s next request out and accounts its dispatch (`bfq_dispatch_rq_from_bfqq`).
    pub(crate) fn dispatch_from(&mut self, q: QueueId, now: Time) -> Option<Request> {
        let slot = self.q(q).rqs.next?;
        let charge = self.charge_of(q, slot);
        let e = self.q(q).entity;
        self.wf.served(e, charge);
        self.wr_on_served(q, charge);
        let rq = self.store.take(slot)?;
        {
            let (bm, pen) = (self.p.back_seek_max, self.p.back_seek_penalty);
            let store = &self.store;
            let Some(Some(qq)) = self.queues.get_mut(q.slot()) else {
                unreachable!("bfq: {q:?} is not a live queue")
            };
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
        if rq.sync {
            self.sync_in_driver += 1;
        }
        self.qm(q).slot_dispatched = self.q(q).slot_dispatched.saturating_add(1);
        if !self.rules.v7_peak_rate_and_charge {
            if let Some(peak) = self.peak.on_dispatch(rq.sector, rq.sectors, now, in_driver_before) {
                self.budgets.autotune(peak, self.p.timeout_sync);
            }
        }
        self.merge_on_dispatch(q, now);
        // FIFO: consulted once per slot.
        if self.in_service == Some(q) && !self.q(q).fifo_checked && !self.q(q).rqs.is_empty() {
            self.qm(q).fifo_checked = true;
            let store = &self.store;
            let Some(Some(qq)) = self.queues.get_mut(q.slot()) else {
                unreachable!("bfq: {q:?} is not a live queue")
            };
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
        self.pos_update(q, now);
        self.sync_counters(q);
        self.inject_on_dispatch(q, &rq, in_driver_before, now);
        if self.in_service == Some(q) {
            self.update_wr_data(q, now);
            let async_done =
                self.rules.v7_async && !self.q(q).sync && self.q(q).slot_dispatched >= self.p.max_budget_async_rq;
            if (self.q(q).class == IoClass::Idle || async_done) && self.busy_queues > 1 {
                self.expire(q, Expiration::BudgetExhausted, now);
            }
        }
        Some(rq)
    }

    /// The dispatch entry point (`__bfq_dispatch_request`): fires a due idle timer, then serves the chosen queue
    /// or says until when to wait.
    pub(crate) fn dispatch_next(&mut self, now: Time) -> Decision {
        self.fire_timer(now);
        if self.busy_queues == 0 {
            return Decision::Nothing;
        }
        if self.p.strict_guarantees && self.rq_in_driver > 0 {
            return Decision::Nothing;
        }
        match self.select_queue(now) {
            Pick::Serve(q) if self.v7_dispatch_held(q) => Decision::Nothing,
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

    /// v7r2's limits on what the chosen queue may dispatch now (`bfq_dispatch_requests` of 2014): no async
    /// request while sync requests are in the driver, and at most a quantum of 4 requests in the driver (one for
    /// the IDLE class, `max_budget_async_rq` for an async queue) while other queues are busy, four times that
    /// when the queue is alone.
    fn v7_dispatch_held(&self, q: QueueId) -> bool {
        if !self.rules.v7_async {
            return false;
        }
        let qq = self.q(q);
        if !qq.sync && self.sync_in_driver > 0 {
            return true;
        }
        let max = if qq.class == IoClass::Idle {
            1
        } else if !qq.sync {
            self.p.max_budget_async_rq
        } else {
            super::era::V7_QUANTUM
        };
        qq.dispatched >= max && (self.busy_queues > 1 || qq.dispatched >= 4 * max)
    }

    /// A dispatched request completed (`bfq_completed_request`): counters, the peak-rate and think-time
    /// samples, and the in-service queue's idle / expire decision.
    pub(crate) fn complete(&mut self, rq: &Request, now: Time) {
        let Some(q) = self.in_flight.remove(&rq.id.0) else {
            return;
        };
        let small = self.in_service.is_some_and(|s| {
            self.q(s).has_short_ttime
                && (self.q(s).dispatched as usize + self.q(s).rqs.len()) < idling::HW_QUEUE_THRESHOLD as usize
        });
        if self.rules.v7_hw_tag {
            self.hw.sample_v7(self.rq_in_driver, self.queued as u32);
        } else {
            self.hw.sample(self.rq_in_driver, self.queued as u32, small);
        }
        counter::dec(&mut self.rq_in_driver, "rq_in_driver");
        if rq.sync {
            counter::dec(&mut self.sync_in_driver, "sync_in_driver");
        }
        if !self.is_live(q) {
            return;
        }
        counter::dec(&mut self.qm(q).dispatched, "queue dispatched");
        if !self.rules.v7_peak_rate_and_charge {
            if let Some(peak) = self.peak.on_completion(now) {
                self.budgets.autotune(peak, self.p.timeout_sync);
            }
        }
        self.qm(q).last_end_request = Some(now);
        self.softrt_on_completion(q, now);
        self.inject_on_completion(q, rq, now);
        self.waker_on_completion(q, now);
        self.sync_counters(q);
        if self.in_service == Some(q) {
            self.v7_arm_budget_timeout(q, now);
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
}

#[cfg(test)]
mod tests {
    use super::super::era::Era;
    use super::super::tests::{bfq, checked, Proc, Sim, TestDev};
    use super::super::tunables::{Params, TUNABLES, V7R2_TUNABLES};
    use super::*;
    use crate::device::DeviceInfo;
    use crate::scheduler::Scheduler;
    use crate::tunables::TunableValues;
    use crate::types::{Direction, FlowId, FlowInfo, RequestId, MS, SEC};

    // Requests of the tests below lie 1000 sectors apart, so that none merges with another at insertion.
    fn read(id: u64, flow: u32, sector: u64) -> Request {
        Request::new(RequestId(id), FlowId(flow), Direction::Read, true, sector, 8)
    }

    fn write(id: u64, flow: u32, sector: u64) -> Request {
        Request::new(RequestId(id), FlowId(flow), Direction::Write, false, sector, 8)
    }

    fn of_era(era: Era, pairs: &[&str]) -> Bfq {
        let dev = DeviceInfo::hdd();
        let (name, specs) = match era {
            Era::V7r2 => ("bfq-v7r2", &V7R2_TUNABLES[..]),
            Era::Newest => ("bfq", &TUNABLES[..]),
        };
        let v = TunableValues::parse(name, specs, &dev, pairs).unwrap();
        Bfq::with_era(&dev, Params::from_values(&v), era)
    }

    use super::super::tests::next_rq as dispatched;

    // Early queue merging looks for a cooperator first at the in-service queue's last dispatched position
    // (`bfqd->in_serv_last_pos`, set when the in-service queue dispatches): a reader whose first request lands
    // right after the in-service queue's last one joins that queue, even when the in-service queue has nothing
    // queued (so it is in no position tree, and only that position can find it).
    #[test]
    fn a_request_next_to_the_in_service_queues_last_dispatch_joins_that_queue() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.flow_started(&FlowInfo::new(FlowId(2)), 0);
        b.insert(read(1, 1, 0), 0);
        dispatched(&mut b, 0);
        let q1 = b.flows[&1].sync_q.unwrap();
        assert_eq!(b.in_service, Some(q1));
        assert!(b.q(q1).rqs.is_empty());
        b.insert(read(2, 2, 16), MS);
        assert_eq!(b.flows[&2].sync_q, Some(q1), "flow 2 shares the in-service queue");
        checked(&b);
    }

    // The newest BFQ measures the peak rate from its dispatches and completions (`bfq_update_peak_rate` at each
    // dispatch, a window closed early by a slow completion): one sequential reader on the test disk for 2 s moves
    // the estimate away from its initial 2/3 of the reference rate, and the budgets follow it. The dispatch and the
    // completion both feed it: with no completion recorded, no dispatch counts as sequential (`recent`), and a
    // window of non-sequential samples does not update the estimate.
    #[test]
    fn the_newest_bfq_estimates_the_peak_rate_from_a_sequential_reader() {
        let b = bfq(&DeviceInfo::hdd(), &[]);
        let (peak0, max0) = (b.peak.peak, b.budgets.max_budget());
        let mut sim = Sim::new(b, TestDev::hdd(), 1, vec![Proc::seq(1, 0)]);
        sim.run_until(2 * SEC);
        assert_ne!(sim.b.peak.peak, peak0, "the estimate moved");
        assert_ne!(sim.b.budgets.max_budget(), max0, "and the budgets with it");
    }

    // v7r2 ends an async queue's slot after max_budget_async_rq dispatches while another queue is busy
    // (`bfq_dispatch_requests` of 2014: `bfqq->dispatched >= bfqd->bfq_max_budget_async_rq`), and not when the
    // async queue is alone. (The newest BFQ has no such rule; there a sync newcomer preempts an async queue.)
    #[test]
    fn v7r2_ends_an_async_slot_after_max_budget_async_rq_only_when_others_are_busy() {
        for (other, want_end) in [(true, true), (false, false)] {
            let era = Era::V7r2;
            let mut b = of_era(era, &[]);
            b.flow_started(&FlowInfo::new(FlowId(1)), 0);
            b.flow_started(&FlowInfo::new(FlowId(2)), 0);
            for i in 0..10 {
                b.insert(write(i, 1, i * 1000), 0);
            }
            let r = dispatched(&mut b, 0);
            let a = b.in_flight[&r.id.0];
            assert!(!b.q(a).sync);
            if other {
                b.insert(read(100, 2, 1 << 30), 0);
            }
            let max = b.p.max_budget_async_rq;
            for i in 1..max {
                let d = b.dispatch(0);
                assert!(
                    matches!(d, Decision::Dispatch(_)),
                    "{era:?}, other busy {other}, {i}: {d:?}"
                );
            }
            assert_eq!(b.q(a).slot_dispatched, max);
            assert_eq!(b.in_service != Some(a), want_end, "{era:?}, other busy {other}");
            checked(&b);
        }
    }

    // v7r2's quantum in the driver for an async queue is max_budget_async_rq, not the sync quantum of 4 (here 2:
    // an async queue alone holds at 4 x 2 = 8 requests in the driver, a sync queue alone at 4 x 4 = 16).
    #[test]
    fn v7r2_holds_an_async_queue_at_its_own_quantum() {
        for sync in [false, true] {
            let mut b = of_era(Era::V7r2, &["max_budget_async_rq=2"]);
            b.flow_started(&FlowInfo::new(FlowId(1)), 0);
            for i in 0..30 {
                b.insert(
                    if sync {
                        read(i, 1, i * 1000)
                    } else {
                        write(i, 1, i * 1000)
                    },
                    0,
                );
            }
            let mut n = 0;
            while let Decision::Dispatch(_) = b.dispatch(0) {
                n += 1;
            }
            assert_eq!(n, if sync { 16 } else { 8 }, "sync {sync}");
        }
    }

    // At a completion, an in-service queue that need not idle and has nothing queued is expired at once, even with
    // requests of its own still in the driver (`bfq_completed_request`: `dispatched == 0 || !bfq_better_to_idle`);
    // one with requests still queued keeps its slot. slice_idle=0: idling never pays.
    #[test]
    fn an_emptied_queue_that_need_not_idle_gives_up_the_device_at_a_completion() {
        for queued in [false, true] {
            let mut b = bfq(&DeviceInfo::hdd(), &["slice_idle=0"]);
            b.flow_started(&FlowInfo::new(FlowId(1)), 0);
            let n = if queued { 3 } else { 2 };
            for i in 0..n {
                b.insert(read(i, 1, i * 1000), 0);
            }
            let r = dispatched(&mut b, 0);
            dispatched(&mut b, 0);
            let q = b.flows[&1].sync_q.unwrap();
            assert_eq!(b.q(q).rqs.is_empty(), !queued);
            b.completed(&r, MS);
            assert_eq!(b.q(q).dispatched, 1);
            assert_eq!(b.in_service == Some(q), queued, "queued {queued}");
            checked(&b);
        }
    }

    // A request dispatched from a queue that is not in service (injected) changes that queue's next request, and
    // its budget is brought up to cover it (`bfq_updated_next_req`: the larger of its max_budget, its next
    // request's charge and the service it already got), which moves its B-WF2Q+ finish time. Flow 2's queue, with
    // a max_budget of 1 sector, got a budget of its first (8-sector) request's charge; after that request is
    // dispatched by injection, its budget covers its next, 256-sector request.
    #[test]
    fn an_injected_dispatch_resizes_the_queues_budget_for_its_next_request() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.flow_started(&FlowInfo::new(FlowId(2)), 0);
        b.insert(read(1, 1, 0), 0);
        dispatched(&mut b, 0);
        let q2 = b.sync_queue(FlowId(2), 0);
        b.qm(q2).max_budget = 1;
        b.insert(read(2, 2, 100_000_000), 0);
        b.insert(
            Request::new(RequestId(3), FlowId(2), Direction::Read, true, 200_000_000, 256),
            0,
        );
        assert_ne!(b.in_service, Some(q2));
        let before = b.entity_budget(q2);
        let r = b.dispatch_from(q2, MS).unwrap();
        assert_eq!(r.id, RequestId(2));
        let next = b.next_charge(q2);
        assert!(next > before, "{next} {before}");
        assert_eq!(b.entity_budget(q2), next.max(b.entity_service(q2)));
        checked(&b);
    }

    // NCQ detection samples at completions (`bfq_update_hw_tag`): a sample is skipped when the in-service queue has
    // a short think time and fewer than 3 requests dispatched or queued, since such a queue could not fill the
    // device anyway and a shallow driver queue then proves nothing. Each case below is one where the sample's
    // "small queue" input decides whether it counts (checked on copies of the detector); the completion must
    // leave the detector as the expected input does: 1 request of its own with a short think time is small, 3
    // (1 dispatched, 2 queued) are not, and neither is 1 with a long think time.
    #[test]
    fn a_small_in_service_queue_with_a_short_think_time_gives_no_queueing_sample() {
        for (own, short, small) in [(1u64, true, true), (3, true, false), (1, false, false)] {
            let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
            for f in 1..=4 {
                b.flow_started(&FlowInfo::new(FlowId(f)), 0);
            }
            for i in 0..own {
                b.insert(read(i, 1, i * 1000), 0);
            }
            let r = dispatched(&mut b, 0);
            let q = b.flows[&1].sync_q.unwrap();
            for f in 2..=4u32 {
                b.insert(read(100 + u64::from(f), f, u64::from(f) << 24), 0);
            }
            assert_eq!(b.in_service, Some(q));
            b.qm(q).has_short_ttime = short;
            let (in_driver, queued) = (b.rq_in_driver, b.queued as u32);
            let (mut want, mut other) = (b.hw, b.hw);
            want.sample(in_driver, queued, small);
            other.sample(in_driver, queued, !small);
            assert_ne!(want, other, "the input decides here");
            b.completed(&r, MS);
            assert_eq!(b.hw, want, "{own} own requests, short think time {short}");
        }
    }

    // While BFQ idles for the in-service queue (its last request completed, nothing queued, idling pays on a disk
    // for a sync reader), a dispatch call answers "wait until the idle timer", a time after now, so that the
    // driver calls again then; after the timer has fired (the queue expired), there is nothing to wait for.
    #[test]
    fn while_idling_the_answer_is_to_wait_for_the_idle_timer() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0), 0);
        let r = dispatched(&mut b, 0);
        b.completed(&r, MS);
        let t = b.timer.expect("idling");
        assert!(t > MS);
        assert_eq!(b.dispatch(MS), Decision::WaitUntil(t));
        assert_eq!(b.dispatch(t), Decision::Nothing);
        checked(&b);
    }

    // The newest BFQ's peak-rate estimator learns of each completion (`bfq_completed_request` records its time),
    // and a dispatch made with nothing in flight counts as a sequential sample only if a completion came less
    // than 2 ms before (`bfq_update_peak_rate`). One reader on the HDD issues 256-sector reads one at a time,
    // sector after sector, each completed 1 ms after its dispatch, the next dispatched at that completion. The
    // window opens at the first dispatch (0) and closes at the dispatch at 1 s: 1001 dispatches, 256 256 sectors
    // in 1 000 000 µs, a rate of 256 256 x 2^16 / 10^6 = 16 793 (sectors/µs << 16, rounded down). All 1000 dispatches after the
    // first follow a completion at the same instant, so 1000 of 1001 samples are sequential: weight
    // 9 x 1000 / 1001 = 8 (x 1 s / 1 s, at most 8), d = 10 - 8 = 2, and the estimate goes from 2/3 of the
    // reference, 9333, to 9333 / 2 + 16 793 / 2 = 4666 + 8396 = 13 062. The maximum budget autotunes to what that
    // rate serves in one timeout_sync (125 ms): 13 062 x 125 000 >> 16 = 24 913 sectors. (Without completions the
    // window would be all seeky samples, taken with weight 0: 9333 x 9 / 10 + 16 793 / 10 = 8399 + 1679 = 10 078.)
    #[test]
    fn a_dispatch_right_after_a_completion_is_a_sequential_sample_of_the_peak_rate() {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        assert_eq!(b.peak.peak, 9333);
        let mut t = 0;
        for i in 0..=1000 {
            b.insert(
                Request::new(RequestId(i), FlowId(1), Direction::Read, true, i * 256, 256),
                t,
            );
            let r = dispatched(&mut b, t);
            assert_eq!(r.id, RequestId(i));
            if i == 1000 {
                break;
            }
            t += MS;
            b.completed(&r, t);
        }
        assert_eq!(t, SEC);
        assert_eq!((b.peak.peak, b.budgets.max_budget()), (13_062, 24_913));
    }
}
