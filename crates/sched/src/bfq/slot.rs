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
    /// SEEKY by the era's rule: the 32-request history (newest) or the mean seek distance (v7r2).
    pub(crate) fn seeky(&self, q: QueueId) -> bool {
        if self.rules.seek_mean {
            self.q(q).seek_mean.seeky()
        } else {
            idling::is_seeky(self.q(q).seek_history)
        }
    }

    /// v7r2's `bfq_update_idle_window`, run at an arrival only while the queue is not seeky or has received more
    /// than max_budget / 8 in its slot (a seeky queue that keeps its slots short never re-evaluates, so the window
    /// set at creation sticks). The window closes for an exited process, `slice_idle` 0, or a seeky non-raised
    /// queue on a queueing device; otherwise, once the think time is known, it is open unless a non-raised queue
    /// thinks longer than `slice_idle`.
    pub(crate) fn v7_update_idle_window(&mut self, q: QueueId) {
        let qq = self.q(q);
        if !qq.sync || qq.class == IoClass::Idle {
            return;
        }
        let seeky = self.seeky(q);
        if seeky && self.entity_service(q) <= self.budgets.max_budget() / 8 {
            return;
        }
        let raised = qq.wr.coeff > 1;
        let mut enable = qq.idle_window;
        if qq.refs == 0 || self.p.slice_idle == 0 || (self.hw.queueing() && seeky && !raised) {
            enable = false;
        } else if qq.ttime.valid() {
            enable = qq.ttime.mean <= self.p.slice_idle || raised;
        }
        self.qm(q).idle_window = enable;
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
            asymmetric: self.rules.asymmetry && self.asymmetric(q),
        }
    }

    /// Whether the device should wait for in-service queue `q`'s next request: the newest `bfq_better_to_idle`,
    /// or v7r2's `bfq_bfqq_must_not_expire` (a sync queue that is raised, or has the idle window unless the device
    /// queues and is non-rotational or serves a raised queue).
    pub(crate) fn better_to_idle(&self, q: QueueId) -> bool {
        if self.rules.v7_idling {
            let qq = self.q(q);
            let expire_non_raised = self.hw.queueing() && (!self.rotational || self.wr_busy_queues > 0);
            return qq.refs > 0
                && self.p.slice_idle > 0
                && qq.sync
                && (qq.wr.coeff > 1 || (qq.idle_window && !expire_non_raised));
        }
        idling::better_to_idle(&self.idle_facts(q))
    }

    pub(crate) fn must_idle(&self, q: QueueId) -> bool {
        self.q(q).rqs.is_empty() && self.better_to_idle(q)
    }

    /// The slot's budget timeout has passed (never before it is armed: v7r2 arms it at the first completion).
    pub(crate) fn budget_timed_out(&self, q: QueueId, now: Time) -> bool {
        !(self.rules.timeout_at_first_completion && self.q(q).budget_new) && now >= self.q(q).budget_timeout
    }

    /// Budget timeout (ns) of a slot of `q` from `now`: `timeout_sync` (v7r2: `timeout_async` for an async
    /// queue), times the raising coefficient for interactive raising.
    pub(crate) fn slot_timeout(&self, q: QueueId, now: Time) -> Time {
        let qq = self.q(q);
        let base = if self.rules.v7_async && !qq.sync {
            self.p.timeout_async
        } else {
            self.p.timeout_sync
        };
        now.saturating_add(base.saturating_mul(u64::from(qq.wr.timeout_coeff())))
    }

    /// v7r2: the slot's first completion arms its budget timeout and starts the interval its rate is measured
    /// over (`bfq_set_budget_timeout`).
    pub(crate) fn v7_arm_budget_timeout(&mut self, q: QueueId, now: Time) {
        if self.rules.timeout_at_first_completion && self.q(q).budget_new {
            let t = self.slot_timeout(q, now);
            let qq = self.qm(q);
            qq.budget_new = false;
            qq.budget_timeout = t;
            qq.slot_start = now;
        }
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
        let timeout = self.slot_timeout(q, now);
        let qq = self.qm(q);
        qq.fifo_checked = false;
        qq.slot_start = now;
        qq.budget_timeout = timeout;
        qq.wait_request = false;
        qq.budget_new = true;
        qq.slot_dispatched = 0;
        qq.must_alloc = true;
        self.inject_on_set_in_service(q, now);
    }

    pub(crate) fn cancel_timer(&mut self) {
        self.timer = None;
        if let Some(s) = self.in_service {
            self.qm(s).wait_request = false;
        }
    }

    pub(crate) fn arm_timer(&mut self, q: QueueId, now: Time) {
        let sl = if self.rules.v7_idle_lengths {
            let long_slot = self.entity_service(q) > self.budgets.max_budget() / 8;
            idling::idle_slice_v7(self.p.slice_idle, self.seeky(q) && long_slot, self.raised(q))
        } else {
            let asym = self.rules.asymmetry && self.asymmetric(q);
            idling::idle_slice(self.p.slice_idle, self.seeky(q), self.raised(q), asym)
        };
        let sl = sl.clamp(1, SEC);
        self.qm(q).wait_request = true;
        self.stats.idles += 1;
        self.timer = Some(match self.jiffy {
            Some(j) => crate::tick::fire_time(now, sl, j),
            None => now.saturating_add(sl),
        });
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
        // The timer's expirations charge the slot up to where idling started (`compensate`).
        if self.budget_timed_out(q, now) {
            self.timer_expiry = true;
            self.expire(q, Expiration::BudgetTimeout, now);
        } else if self.q(q).rqs.is_empty() {
            self.timer_expiry = true;
            self.expire(q, Expiration::TooIdle, now);
        }
        self.timer_expiry = false;
    }

    /// `bfq_select_queue`.
    pub(crate) fn select_queue(&mut self, now: Time) -> Pick {
        let mut cur = self.in_service;
        if let Some(q) = cur {
            let timer_runs = self.rules.timeout_at_first_completion && self.timer.is_some();
            if self.may_expire_for_budget_timeout(q, now) && !timer_runs && !self.must_idle(q) {
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
                if !self.rules.injection {
                    return Pick::Wait;
                }
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
