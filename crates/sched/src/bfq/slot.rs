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

#[cfg(test)]
mod tests {
    use super::super::era::{Era, SeekMean, V7_SEEK_THR};
    use super::super::tests::bfq;
    use super::*;
    use crate::device::DeviceInfo;
    use crate::types::{FlowId, FlowInfo, MS};

    /// A policy of `era` on `dev` without weight raising.
    fn of_era(era: Era, dev: &DeviceInfo) -> Bfq {
        use super::super::tunables::{Params, TUNABLES, V7R2_TUNABLES};
        use crate::tunables::TunableValues;
        let specs: &[_] = if era == Era::V7r2 { &V7R2_TUNABLES } else { &TUNABLES };
        let v = TunableValues::parse("bfq", specs, dev, &["low_latency=0"]).unwrap();
        Bfq::with_era(dev, Params::from_values(&v), era)
    }

    /// A live sync queue of flow 1 with a process reference.
    fn sync_queue(b: &mut Bfq) -> QueueId {
        let q = b.new_queue(0, &FlowInfo::new(FlowId(1)), true, 0);
        b.qm(q).refs = 1;
        q
    }

    // The idle timer of a sequential (not seeky) reader runs the whole slice_idle, 8 ms; a seeky reader's is
    // cut to 2 ms (the newest `bfq_arm_slice_timer`: a seeky queue is unlikely to issue a nearby request, so
    // waiting long for it costs more than it gains).
    #[test]
    fn a_sequential_reader_is_idled_for_slice_idle_and_a_seeky_one_for_2_ms() {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        let q = sync_queue(&mut b);
        assert!(!b.seeky(q));
        b.arm_timer(q, 10 * MS);
        assert_eq!(b.timer, Some(18 * MS));
        b.qm(q).seek_history = u32::MAX;
        assert!(b.seeky(q));
        b.arm_timer(q, 10 * MS);
        assert_eq!(b.timer, Some(12 * MS));
    }

    // v7r2's `bfq_update_idle_window`: the window closes for an exited process, for slice_idle 0, and for a
    // seeky non-raised queue on a queueing device; otherwise, once the think time is known (more than 80
    // filtered samples), it is open unless a non-raised queue thinks longer than slice_idle (8 ms: 8 ms is
    // open, 8 ms + 1 ns closed); a raised queue keeps it open. Unknown think time leaves it as it was. A seeky
    // queue that has received at most max_budget / 8 in its slot is not re-evaluated at all. The window decides
    // v7r2's idling for a non-raised queue (`better_to_idle`).
    #[test]
    fn v7r2_idle_window_follows_think_time_seekiness_and_exit() {
        use super::super::idling::ThinkTime;
        let think = |mean: Time| ThinkTime {
            samples: 1000,
            total: 1000 * mean,
            mean,
        };
        let mut hw = super::super::idling::HwTag::default();
        hw.hw_tag = Some(false);
        let mut b = of_era(Era::V7r2, &DeviceInfo::hdd());
        b.hw = hw;
        let q = sync_queue(&mut b);
        let window = |b: &mut Bfq| {
            b.v7_update_idle_window(q);
            b.q(q).idle_window
        };
        b.qm(q).ttime = think(8 * MS + 1);
        assert!(!window(&mut b), "thinks longer than slice_idle");
        assert!(!b.better_to_idle(q));
        b.qm(q).ttime = think(8 * MS);
        assert!(window(&mut b), "thinks exactly slice_idle");
        assert!(b.better_to_idle(q));
        b.qm(q).ttime = ThinkTime::default();
        assert!(window(&mut b), "unknown think time: unchanged (open)");
        b.qm(q).idle_window = false;
        assert!(!window(&mut b), "unknown think time: unchanged (closed)");
        b.qm(q).ttime = think(20 * MS);
        b.qm(q).wr.coeff = 20;
        assert!(window(&mut b), "raised: open whatever the think time");
        b.qm(q).refs = 0;
        assert!(!window(&mut b), "exited");
        b.qm(q).refs = 1;
        b.p.slice_idle = 0;
        assert!(!window(&mut b), "slice_idle 0");
        b.p.slice_idle = 8 * MS;

        // Seeky (mean seek distance above 8192 sectors), with a long slot so that it is re-evaluated.
        b.qm(q).seek_mean = SeekMean {
            samples: 1000,
            total: 1000 * (V7_SEEK_THR + 1),
            mean: V7_SEEK_THR + 1,
        };
        assert!(b.seeky(q));
        let e = b.q(q).entity;
        b.wf.served(e, b.budgets.max_budget() / 8 + 1);
        b.qm(q).ttime = think(MS);
        assert!(window(&mut b), "seeky but raised");
        b.qm(q).wr.coeff = 1;
        assert!(window(&mut b), "seeky, not raised, device not queueing");
        b.hw.hw_tag = Some(true);
        assert!(!window(&mut b), "seeky, not raised, queueing device");

        // A seeky queue with at most max_budget / 8 of service keeps its window, whatever else holds.
        let mut b2 = of_era(Era::V7r2, &DeviceInfo::hdd());
        let q2 = sync_queue(&mut b2);
        b2.qm(q2).seek_mean = b.q(q).seek_mean;
        b2.qm(q2).refs = 0;
        let e2 = b2.q(q2).entity;
        b2.wf.served(e2, b2.budgets.max_budget() / 8);
        b2.v7_update_idle_window(q2);
        assert!(b2.q(q2).idle_window, "short slot: not re-evaluated");
        b2.wf.served(e2, 1);
        b2.v7_update_idle_window(q2);
        assert!(!b2.q(q2).idle_window, "one sector more: re-evaluated (exited)");

        // Async and IDLE-class queues are never touched.
        let a = b2.new_queue(0, &FlowInfo::new(FlowId(2)), false, 0);
        let mut idle = FlowInfo::new(FlowId(3));
        idle.class = IoClass::Idle;
        let i = b2.new_queue(0, &idle, true, 0);
        for x in [a, i] {
            // Open, and with no process left: a re-evaluation would close it.
            b2.qm(x).idle_window = true;
            b2.v7_update_idle_window(x);
            assert!(b2.q(x).idle_window);
        }
    }

    // `bfq_asymmetric_scenario`: the weights of the queues with pending I/O differ and this queue does not have
    // the smallest (or is not counted), or queues of more than one class are busy, or more than one group has
    // pending requests. On a queueing SSD, where idling never boosts throughput, that alone decides whether an
    // emptied queue (not raised, two queues busy) is idled for, to keep the others from taking its share.
    #[test]
    fn an_asymmetric_scenario_makes_the_ssd_idle() {
        let mut b = bfq(&DeviceInfo::ssd(), &["low_latency=0"]);
        b.hw.hw_tag = Some(true);
        let q = sync_queue(&mut b);
        b.busy_queues = 2;
        b.busy_per_class = [0, 2, 0];
        b.groups_with_pending = 1;
        let case = |b: &mut Bfq, weights: &[u32], counted: Option<u32>, classes: [u32; 3], groups: u32| {
            b.weights = weights.iter().map(|&w| (w, 1)).collect();
            b.qm(q).weight_counted = counted;
            b.busy_per_class = classes;
            b.groups_with_pending = groups;
            let a = b.asymmetric(q);
            assert_eq!(b.better_to_idle(q), a, "idling follows asymmetry");
            a
        };
        let be = [0, 2, 0];
        assert!(!case(&mut b, &[40], Some(40), be, 1), "one weight");
        assert!(!case(&mut b, &[40], None, be, 1), "one weight, not counted");
        assert!(case(&mut b, &[40, 80], Some(80), be, 1), "not the smallest weight");
        assert!(!case(&mut b, &[40, 80], Some(40), be, 1), "the smallest weight");
        assert!(case(&mut b, &[40, 80], None, be, 1), "not counted");
        assert!(case(&mut b, &[40], Some(40), [1, 1, 0], 1), "RT and BE busy");
        assert!(case(&mut b, &[40], Some(40), [0, 1, 1], 1), "BE and IDLE busy");
        assert!(!case(&mut b, &[40], Some(40), [0, 0, 2], 1), "IDLE only");
        assert!(case(&mut b, &[40], Some(40), be, 2), "two groups with pending requests");
    }

    // v7r2's `bfq_bfqq_must_not_expire`: a sync queue is idled for if it is raised, or if it has the idle window
    // and the device does not queue commands on flash (or, queueing, serves a raised queue); an exited process
    // or slice_idle 0 is never idled for.
    #[test]
    fn v7r2_idles_for_a_raised_queue_or_one_with_the_idle_window_unless_the_device_queues() {
        for (dev, rot) in [(DeviceInfo::hdd(), true), (DeviceInfo::ssd(), false)] {
            let mut b = of_era(Era::V7r2, &dev);
            let q = sync_queue(&mut b);
            b.qm(q).idle_window = true;
            for (hw_tag, wr_busy, want) in [(Some(false), 0, true), (Some(true), 0, rot), (Some(true), 1, false)] {
                b.hw.hw_tag = hw_tag;
                b.wr_busy_queues = wr_busy;
                assert_eq!(
                    b.better_to_idle(q),
                    want,
                    "rotational={rot} hw_tag={hw_tag:?} wr_busy={wr_busy}"
                );
            }
            b.qm(q).wr.coeff = 20;
            assert!(b.better_to_idle(q), "raised");
            b.qm(q).idle_window = false;
            assert!(b.better_to_idle(q), "raised, no idle window");
            b.qm(q).wr.coeff = 1;
            assert!(!b.better_to_idle(q), "no idle window");
            b.qm(q).wr.coeff = 20;
            b.p.slice_idle = 0;
            assert!(!b.better_to_idle(q), "slice_idle 0");
            b.p.slice_idle = 8 * MS;
            b.qm(q).refs = 0;
            assert!(!b.better_to_idle(q), "exited");
        }
    }

    // The newest `bfq_better_to_idle`, from the queue's facts: a sequential sync reader on an HDD that does not
    // queue commands is idled for (it boosts throughput); not once its process has exited, nor with
    // slice_idle 0, nor for the IDLE class. On a queueing SSD (idling never boosts throughput there) with two
    // queues busy and equal weights, a queue is idled for only while raised with a non-raised queue busy (to
    // keep the raised share).
    #[test]
    fn the_newest_idling_decision_reads_each_fact_of_the_queue() {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        b.hw.hw_tag = Some(false);
        b.busy_queues = 2;
        let q = sync_queue(&mut b);
        assert!(b.better_to_idle(q), "sequential reader on an HDD");
        b.qm(q).refs = 0;
        assert!(!b.better_to_idle(q), "exited");
        b.qm(q).refs = 1;
        b.p.slice_idle = 0;
        assert!(!b.better_to_idle(q), "slice_idle 0");
        b.p.slice_idle = 8 * MS;
        b.qm(q).class = IoClass::Idle;
        assert!(!b.better_to_idle(q), "IDLE class");

        let mut b = bfq(&DeviceInfo::ssd(), &["low_latency=0"]);
        b.hw.hw_tag = Some(true);
        b.busy_queues = 2;
        b.busy_per_class = [0, 2, 0];
        let q = sync_queue(&mut b);
        assert!(!b.better_to_idle(q), "queueing SSD, symmetric");
        b.qm(q).wr.coeff = 30;
        b.wr_busy_queues = 1;
        assert!(b.better_to_idle(q), "raised, a non-raised queue busy");
    }

    // The budget timeout of a slot (`bfq_set_budget_timeout`) is `timeout_sync` (125 ms) after its start in the
    // newest kernel, for sync and async queues alike (it dropped `timeout_async`); v7r2 gives an async queue its
    // own `timeout_async` (40 ms). Interactive raising multiplies the timeout by the raising coefficient (a raised
    // queue gets coeff times the service per slot, so it needs coeff times the time); soft real-time raising
    // does not. The timeout has passed at its instant, not 1 ns before.
    #[test]
    fn a_slot_times_out_after_timeout_sync_and_v7r2_cuts_async_slots_to_timeout_async() {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        let q = sync_queue(&mut b);
        let a = b.new_queue(0, &FlowInfo::new(FlowId(2)), false, 0);
        assert_eq!(b.slot_timeout(q, 10 * MS), 135 * MS);
        assert_eq!(
            b.slot_timeout(a, 10 * MS),
            135 * MS,
            "newest: async slots have timeout_sync too"
        );
        b.set_in_service(q, 10 * MS);
        assert!(!b.budget_timed_out(q, 135 * MS - 1));
        assert!(b.budget_timed_out(q, 135 * MS), "newest: armed when the slot starts");
        b.qm(q).wr.coeff = 30;
        b.qm(q).wr.kind = super::super::weight_raising::WrKind::Interactive;
        assert_eq!(b.slot_timeout(q, 0), 30 * 125 * MS, "interactive raising: 30 x 125 ms");
        b.qm(q).wr.kind = super::super::weight_raising::WrKind::SoftRt;
        assert_eq!(b.slot_timeout(q, 0), 125 * MS, "soft real-time raising: not multiplied");

        let mut b = of_era(Era::V7r2, &DeviceInfo::hdd());
        let q = sync_queue(&mut b);
        let a = b.new_queue(0, &FlowInfo::new(FlowId(2)), false, 0);
        assert_eq!(b.slot_timeout(q, 10 * MS), 135 * MS, "v7r2 sync: timeout_sync");
        assert_eq!(b.slot_timeout(a, 10 * MS), 50 * MS, "v7r2 async: timeout_async, 40 ms");
    }

    // v7r2 arms the budget timeout at the slot's first completion, not when the slot starts (a slot that has
    // not completed anything yet never times out), and measures the slot's rate from there; later completions
    // do not move it. The newest kernel arms it when the slot starts and ignores the completions.
    #[test]
    fn v7r2_arms_the_budget_timeout_at_the_slots_first_completion() {
        let mut b = of_era(Era::V7r2, &DeviceInfo::hdd());
        let q = sync_queue(&mut b);
        b.set_in_service(q, 0);
        assert!(!b.budget_timed_out(q, 10 * SEC), "nothing completed: not armed");
        b.v7_arm_budget_timeout(q, 50 * MS);
        assert_eq!((b.q(q).budget_timeout, b.q(q).slot_start), (175 * MS, 50 * MS));
        b.v7_arm_budget_timeout(q, 100 * MS);
        assert_eq!(b.q(q).budget_timeout, 175 * MS, "a later completion does not re-arm it");
        assert!(!b.budget_timed_out(q, 175 * MS - 1));
        assert!(b.budget_timed_out(q, 175 * MS));

        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        let q = sync_queue(&mut b);
        b.set_in_service(q, 0);
        b.v7_arm_budget_timeout(q, 50 * MS);
        assert_eq!(
            (b.q(q).budget_timeout, b.q(q).slot_start),
            (125 * MS, 0),
            "newest: unchanged"
        );
        assert!(b.budget_timed_out(q, 125 * MS));
    }

    // `bfq_may_expire_for_budg_timeout`: a timed-out slot may end unless its queue is being idled for with
    // less than a third of its budget left (then the budget is nearly used, and the queue is worth waiting for
    // to finish it). Budget 300 sectors: 100 left (a third) may expire, 99 left may not; a queue not idled for
    // may expire whatever it has left; nothing may expire before the timeout.
    #[test]
    fn a_timed_out_queue_being_idled_for_expires_only_with_a_third_of_its_budget_left() {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        let q = sync_queue(&mut b);
        b.set_in_service(q, 0);
        let e = b.q(q).entity;
        b.wf.set_budget(e, 300);
        b.wf.served(e, 200);
        let t = 125 * MS;
        assert!(b.may_expire_for_budget_timeout(q, t), "not idling");
        assert!(!b.may_expire_for_budget_timeout(q, t - 1), "before the timeout");
        b.qm(q).wait_request = true;
        assert!(b.may_expire_for_budget_timeout(q, t), "idling, 100 of 300 left");
        assert!(!b.may_expire_for_budget_timeout(q, t - 1), "idling, before the timeout");
        b.wf.served(e, 1);
        assert!(!b.may_expire_for_budget_timeout(q, t), "idling, 99 of 300 left");
        b.qm(q).wait_request = false;
        assert!(b.may_expire_for_budget_timeout(q, t), "not idling, 99 left");
    }

    // v7r2's `bfq_arm_slice_timer`: a raised queue is idled for 3 x slice_idle (24 ms); a non-raised queue
    // that is seeky and has received more than max_budget / 8 in its slot for at most 2 ms; any other queue
    // (sequential, or seeky with a short slot) for slice_idle, 8 ms. Each arming counts one idle.
    #[test]
    fn v7r2_idles_3_slice_idles_for_a_raised_queue_and_2_ms_for_a_seeky_long_slot() {
        let mut b = of_era(Era::V7r2, &DeviceInfo::hdd());
        let q = sync_queue(&mut b);
        let e = b.q(q).entity;
        let eighth = b.budgets.max_budget() / 8;
        let idle_for = |b: &mut Bfq| {
            b.arm_timer(q, 10 * MS);
            assert!(b.q(q).wait_request);
            b.timer.map(|t| t - 10 * MS)
        };
        b.wf.served(e, eighth + 1);
        assert_eq!(idle_for(&mut b), Some(8 * MS), "sequential, long slot");
        b.qm(q).seek_mean = SeekMean {
            samples: 1000,
            total: 1000 * (V7_SEEK_THR + 1),
            mean: V7_SEEK_THR + 1,
        };
        assert_eq!(idle_for(&mut b), Some(2 * MS), "seeky, long slot");
        b.qm(q).wr.coeff = 20;
        assert_eq!(idle_for(&mut b), Some(24 * MS), "seeky, long slot, raised");
        b.qm(q).wr.coeff = 1;
        b.wf.clear_service(e);
        b.wf.served(e, eighth);
        assert_eq!(idle_for(&mut b), Some(8 * MS), "seeky, max_budget / 8 served");
        assert_eq!(b.stats.idles, 4);
    }

    /// The newest BFQ on an HDD that does not queue commands, without raising: flow 1 read once (completed at 1 ms) and is idled for, flow 2's
    /// far read queued at 1 ms, and at 2 ms flow 1's next small sequential read arrived, which leaves the idle
    /// timer running (a small request is not worth ending the idling for, `bfq_rq_enqueued`).
    fn idled_for_with_a_small_request_arrived() -> (Bfq, QueueId) {
        use crate::scheduler::Scheduler;
        use crate::types::{Decision, Direction, Request, RequestId};
        let read = |id: u64, flow: u32, sector: u64| {
            Request::new(RequestId(id), FlowId(flow), Direction::Read, true, sector, 8)
        };
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        b.hw.hw_tag = Some(false);
        for f in [1, 2] {
            b.flow_started(&FlowInfo::new(FlowId(f)), 0);
        }
        b.insert(read(1, 1, 0), 0);
        let Decision::Dispatch(r) = b.dispatch(0) else {
            panic!("flow 1's read")
        };
        b.completed(&r, MS);
        b.insert(read(2, 2, 1 << 30), MS);
        let Decision::WaitUntil(t) = b.dispatch(MS) else {
            panic!("idling for flow 1")
        };
        b.insert(read(3, 1, 8), 2 * MS);
        let q = b.in_service.expect("flow 1 in service");
        assert!(
            b.q(q).wait_request && b.timer == Some(t),
            "the small request keeps the idling"
        );
        (b, q)
    }

    // The newest `bfq_select_queue` ends a timed-out slot unless the queue must be idled for (`may_expire &&
    // !must_idle`): a queue with a request queued need not be waited for, so once its budget timeout has passed
    // it is expired even though its idle timer still runs (only v7r2 also required the timer not to be pending),
    // and the other queue is served. Before the timeout, the queued request is served at once.
    #[test]
    fn the_newest_bfq_ends_a_timed_out_slot_whose_queue_has_a_request_while_its_timer_runs() {
        use crate::scheduler::Scheduler;
        use crate::types::Decision;
        let (mut b, _) = idled_for_with_a_small_request_arrived();
        match b.dispatch(3 * MS) {
            Decision::Dispatch(r) => assert_eq!(r.flow, FlowId(1), "not timed out: flow 1's request"),
            d => panic!("{d:?}"),
        }
        let (mut b, q) = idled_for_with_a_small_request_arrived();
        b.qm(q).budget_timeout = 2 * MS;
        match b.dispatch(3 * MS) {
            Decision::Dispatch(r) => assert_eq!(r.flow, FlowId(2), "timed out: flow 1 expired"),
            d => panic!("{d:?}"),
        }
    }

    /// The newest BFQ on an HDD without raising: flow 1's reads at sectors 0 and 64 (not contiguous, so not merged)
    /// and flow 2's far read queued,
    /// flow 1's first read dispatched (its slot has received 8 sectors); its entity, for the test to set the
    /// slot's budget and service.
    fn flow_1_served_once() -> (Bfq, super::super::ids::EntityId) {
        use crate::scheduler::Scheduler;
        use crate::types::{Decision, Direction, Request, RequestId};
        let read = |id: u64, flow: u32, sector: u64| {
            Request::new(RequestId(id), FlowId(flow), Direction::Read, true, sector, 8)
        };
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        for f in [1, 2] {
            b.flow_started(&FlowInfo::new(FlowId(f)), 0);
        }
        b.insert(read(1, 1, 0), 0);
        b.insert(read(2, 1, 64), 0);
        b.insert(read(3, 2, 1 << 30), 0);
        let Decision::Dispatch(r) = b.dispatch(0) else {
            panic!("flow 1's first read")
        };
        assert_eq!(r.id, RequestId(1));
        let q = b.in_service.expect("flow 1 in service");
        assert_eq!(b.entity_service(q), 8);
        let e = b.q(q).entity;
        (b, e)
    }

    // `bfq_select_queue`: the queue in service keeps the device while its next request's charge (8 sectors)
    // fits in the budget it has left, exactly fitting included; one sector short, the slot ends (budget
    // exhausted) and the other queue is served. A fresh slot (nothing served yet) whose budget is below the
    // charge grows its budget instead of ending with nothing served, which could repeat forever.
    #[test]
    fn a_slot_ends_when_its_next_request_does_not_fit_its_budget_unless_it_has_served_nothing() {
        use crate::scheduler::Scheduler;
        use crate::types::Decision;
        let flow_of_next = |b: &mut Bfq| match b.dispatch(0) {
            Decision::Dispatch(r) => r.flow,
            d => panic!("{d:?}"),
        };
        let (mut b, e) = flow_1_served_once();
        b.wf.set_budget(e, 16);
        assert_eq!(flow_of_next(&mut b), FlowId(1), "8 left for a charge of 8");
        let (mut b, e) = flow_1_served_once();
        b.wf.set_budget(e, 15);
        assert_eq!(
            flow_of_next(&mut b),
            FlowId(2),
            "7 left for a charge of 8: the slot ends"
        );
        let (mut b, e) = flow_1_served_once();
        b.wf.clear_service(e);
        b.wf.set_budget(e, 4);
        assert_eq!(flow_of_next(&mut b), FlowId(1), "nothing served yet: the budget grows");
        assert_eq!(b.wf.entity(e).map(|x| x.budget), Some(8), "grown to the charge");
    }

    // `bfq_select_queue` goes on until it finds a queue to serve (or none is left): one dispatch serves however
    // many queues it expires on the way. A queue preempted while empty and idled for stays busy when idling is
    // needed for its service guarantees (`__bfq_bfqq_expire`; more than one group with pending requests is an
    // asymmetric scenario), so busy queues with nothing queued pile up. Nine flows, each in its own group of
    // weight 110, 120, .., 190: each newcomer's group is heavier than the in-service queue's, so it preempts it
    // while it is idled for (its one read completed); flows 1-8 are then busy and empty. Flow 9's queue (maximum
    // budget 8) dispatches one of its two reads. The next dispatch takes ten turns with nine busy queues: flow 9
    // expires (its next read does not fit the budget left) and is requeued, the eight empty queues are chosen
    // and expire in turn, and flow 9's second read is served. (`select_queue`'s bound, 2 x busy + 8 = 26 turns,
    // only guards against a livelock: a queue expired with requests gets a budget that fits its next one, so it
    // is served when chosen again, and one expired empty leaves the busy set; a bound of 8 would give up here.)
    #[test]
    fn one_dispatch_expires_every_empty_queue_on_the_way_to_a_request() {
        use super::super::tests::next_rq;
        use crate::scheduler::Scheduler;
        use crate::types::{Decision, Direction, GroupId, Request, RequestId};
        let read = |id: u64, flow: u32, sector: u64| {
            Request::new(RequestId(id), FlowId(flow), Direction::Read, true, sector, 8)
        };
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        let mut now = 0;
        for f in 1..=9u32 {
            b.set_group_weight(GroupId(f), 100 + 10 * f);
            b.flow_started(&FlowInfo::new(FlowId(f)).with_group(GroupId(f)), now);
            if f == 9 {
                let q = b.sync_queue(FlowId(9), now);
                b.qm(q).max_budget = 8;
                b.insert(read(10, 9, (9 << 20) + 100), now);
            }
            b.insert(read(u64::from(f), f, u64::from(f) << 20), now);
            assert_eq!(b.stats.preemptions, u64::from(f - 1), "flow {f} preempts");
            let r = next_rq(&mut b, now);
            assert_eq!(r.id, RequestId(u64::from(f)));
            if f < 9 {
                b.completed(&r, now + MS);
                assert!(
                    matches!(b.dispatch(now + MS), Decision::WaitUntil(_)),
                    "flow {f} idled for"
                );
                now += 2 * MS;
            }
        }
        let empty = b.queues.iter().flatten().filter(|q| q.busy && q.rqs.is_empty()).count();
        assert_eq!((b.busy_queues, empty), (9, 8));
        assert_eq!(next_rq(&mut b, now).id, RequestId(10));
        assert_eq!(b.busy_queues, 1);
    }
}
