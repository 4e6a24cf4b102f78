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
        self.pos_update(q);
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
