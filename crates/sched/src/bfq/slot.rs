//! Service slots: choosing and starting the next slot (`bfq_select_queue`, `__bfq_set_in_service_queue`), the
//! decision to idle (`bfq_better_to_idle`, `idling_boosts_thr_without_issues`, `bfq_asymmetric_scenario`), and the
//! idle timer (`bfq_arm_slice_timer`, `bfq_idle_slice_timer`).

use super::budget::Expiration;
use super::idling::{self, IdleFacts};
use super::ids::QueueId;
use super::wf2q::Owner;
use super::Bfq;
use crate::types::{IoClass, Time, SEC};

/// What `select_queue` decided.
pub(crate) enum Pick {
    /// Serve this queue's next request.
    Serve(QueueId),
    /// Nothing now.
    Wait,
}

impl Bfq {
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

    pub(crate) fn must_idle(&self, q: QueueId) -> bool {
        self.q(q).rqs.is_empty() && self.better_to_idle(q)
    }

    pub(crate) fn budget_timed_out(&self, q: QueueId, now: Time) -> bool {
        now >= self.q(q).budget_timeout
    }

    /// The budget timeout fires only if the queue is not idling, or still has a third of its budget left.
    pub(crate) fn may_expire_for_budget_timeout(&self, q: QueueId, now: Time) -> bool {
        let qq = self.q(q);
        let budget = self.entity_budget(q);
        (!qq.wait_request || self.budget_left(q) >= budget / 3) && self.budget_timed_out(q, now)
    }

    /// Sets queue `q` in service (`__bfq_set_in_service_queue`).
    pub(crate) fn set_in_service(&mut self, q: QueueId, now: Time) {
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

    pub(crate) fn cancel_timer(&mut self) {
        self.timer = None;
        if let Some(s) = self.in_service {
            self.qm(s).wait_request = false;
        }
    }

    pub(crate) fn arm_timer(&mut self, q: QueueId, now: Time) {
        let sl = idling::idle_slice(self.p.slice_idle, self.seeky(q), self.raised(q), self.asymmetric(q));
        let sl = sl.clamp(1, SEC);
        self.qm(q).wait_request = true;
        self.stats.idles += 1;
        self.timer = Some(now.saturating_add(sl));
        self.idle_start = now;
    }

    /// Runs the idle-timer expiry if its time has come.
    pub(crate) fn fire_timer(&mut self, now: Time) {
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

    /// `bfq_select_queue`.
    pub(crate) fn select_queue(&mut self, now: Time) -> Pick {
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
}
