//! Budgets: the autotuned maximum, the minimum, service charging, and the feedback applied at every expiration
//! (`bfq_calc_max_budget`, `__bfq_bfqq_recalc_budget`, `bfq_bfqq_charge_time`; docs/SCHEDULERS.md, BFQ).

use crate::types::{Time, MS};

/// Maximum budget before autotuning has seen enough slots (sectors): 16384 = 8 MiB.
pub const DEFAULT_MAX_BUDGET: u64 = 16 * 1024;

/// `min_budget = max_budget / MIN_BUDGET_DIV`: the smallest budget a shrinking queue can reach (512 sectors by
/// default), small enough for latency, large enough to amortise a seek.
pub const MIN_BUDGET_DIV: u64 = 32;

/// Filtered count of assigned budgets after which the autotuned maximum is used (about 11 slots).
pub const BUDGETS_TO_AUTOTUNE: u64 = 194;

/// Async requests cost this many times their size (unless raised or in an asymmetric scenario), which limits
/// how much writeback can steal from sync I/O.
pub const ASYNC_CHARGE_FACTOR: u64 = 3;

/// Below this slot length (ns) the service rate cannot be judged: seekiness decides slowness. 1 ms.
pub const SLOW_DELTA_MIN: Time = MS;

/// Up to this slot length (ns) slowness is still judged by seekiness; beyond it, by service received. 20 ms.
pub const SLOW_DELTA_MAX: Time = 20 * MS;

/// Time charged for a too-short slot on a non-rotational device (ns): `BFQ_MIN_TT`, 2 ms.
pub const SHORT_SLOT_CHARGE_NONROT: Time = 2 * MS;

/// Why an in-service queue stops being served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiration {
    /// The idle timer fired with the queue still empty.
    TooIdle,
    /// The slot lasted longer than the budget timeout.
    BudgetTimeout,
    /// The next request would not fit in the remaining budget.
    BudgetExhausted,
    /// The queue emptied and idling is not worth it.
    NoMoreRequests,
    /// Another queue took the device.
    Preempted,
}

/// Device-wide budget state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budgets {
    /// User maximum (sectors), 0 = autotune.
    pub user_max: u64,
    /// Current autotuned (or user) maximum (sectors).
    pub max: u64,
    /// Filtered count of assigned budgets (`(7 b + 256) / 8` per slot).
    pub assigned: u64,
}

impl Budgets {
    /// State at start: `user_max` from the tunable (0 = auto).
    pub fn new(user_max: u64) -> Self {
        Budgets {
            user_max,
            max: if user_max > 0 { user_max } else { DEFAULT_MAX_BUDGET },
            assigned: 0,
        }
    }

    /// Largest budget (sectors): the default until [`BUDGETS_TO_AUTOTUNE`], then the tuned or user value.
    pub fn max_budget(&self) -> u64 {
        if self.assigned < BUDGETS_TO_AUTOTUNE {
            DEFAULT_MAX_BUDGET
        } else {
            self.max.max(MIN_BUDGET_DIV)
        }
    }

    /// Smallest budget (sectors): `max_budget / 32`.
    pub fn min_budget(&self) -> u64 {
        (self.max_budget() / MIN_BUDGET_DIV).max(1)
    }

    /// Counts one more budget assignment (a queue set in service).
    pub fn assigned_one(&mut self) {
        self.assigned = (7 * self.assigned + 256) / 8;
    }

    /// Autotunes the maximum from a new peak rate (sectors/µs << 16) and the budget timeout: the sectors that can
    /// be served in one timeout at the peak rate. Ignored when the user set `max_budget`.
    pub fn autotune(&mut self, peak_rate: u64, timeout: Time) {
        if self.user_max == 0 {
            let timeout_us = timeout / 1000;
            self.max = ((u128::from(peak_rate) * u128::from(timeout_us)) >> super::peak_rate::RATE_SHIFT) as u64;
            self.max = self.max.max(MIN_BUDGET_DIV);
        }
    }

    /// Initial maximum budget of a new queue: 2/3 of the device maximum.
    pub fn new_queue_max(&self) -> u64 {
        self.max_budget() * 2 / 3
    }

    /// Budget feedback at expiration (`__bfq_bfqq_recalc_budget`): the queue's new maximum budget (sectors) from its
    /// old one `b`, or `None` when the kernel returns early and leaves the queue's budgets as they are (a sync,
    /// non-raised queue that was preempted). An async queue gets the device's maximum and a raised one (`raised`:
    /// the newest kernels' rule) twice the minimum, whatever the reason. The caps read the device's maximum as it
    /// stands (`bfqd->bfq_max_budget`: the user's value, or the autotuned one as soon as the peak rate set it), not
    /// [`Budgets::max_budget`], which gives the default until [`BUDGETS_TO_AUTOTUNE`] assignments.
    pub fn recalc(
        &self,
        b: u64,
        reason: Expiration,
        sync: bool,
        raised: bool,
        service: u64,
        in_flight: bool,
    ) -> Option<u64> {
        let device_max = self.max;
        let min = self.min_budget();
        let nb = if !sync {
            device_max
        } else if raised {
            2 * min
        } else {
            match reason {
                Expiration::TooIdle if in_flight => (2 * b).min(device_max),
                Expiration::TooIdle => {
                    if b > 5 * min {
                        b - 4 * min
                    } else {
                        min
                    }
                }
                Expiration::BudgetTimeout => (2 * b).min(device_max),
                Expiration::BudgetExhausted => (4 * b).min(device_max),
                Expiration::NoMoreRequests => service.max(min),
                Expiration::Preempted => return None,
            }
        };
        if self.user_max == 0 && self.assigned >= BUDGETS_TO_AUTOTUNE {
            Some(nb.min(device_max))
        } else {
            Some(nb)
        }
    }
}

/// Service charged for a request of `sectors`: its size, or `async_factor` times it for an async, non-raised
/// queue in a symmetric scenario ([`ASYNC_CHARGE_FACTOR`] in the newest kernels, v7r2's
/// [`super::era::V7_ASYNC_CHARGE`]).
pub fn charge(sectors: u32, sync: bool, raised: bool, asymmetric: bool, async_factor: u64) -> u64 {
    if sync || raised || asymmetric {
        u64::from(sectors)
    } else {
        u64::from(sectors) * async_factor
    }
}

/// Whether a queue that was served for `delta` (ns) counts as slow, and the time to charge it for (ns).
pub fn is_slow(
    delta: Time,
    seeky: bool,
    service: u64,
    max_budget: u64,
    rotational: bool,
    slice_idle: Time,
) -> (bool, Time) {
    if delta < SLOW_DELTA_MIN {
        let d = if rotational {
            slice_idle
        } else {
            SHORT_SLOT_CHARGE_NONROT
        };
        (seeky, d)
    } else if delta <= SLOW_DELTA_MAX {
        (seeky, delta)
    } else {
        (service < max_budget / 2, delta)
    }
}

/// Time-based charge (sectors) for a slow queue: what a full-speed queue would have received in `delta`, i.e.
/// `max(service, max_budget * min(delta, timeout) / timeout)`.
pub fn time_charge(delta: Time, timeout: Time, max_budget: u64, service: u64) -> u64 {
    let t = delta.min(timeout);
    let c = (u128::from(max_budget) * u128::from(t) / u128::from(timeout.max(1))) as u64;
    c.max(service)
}

/// The older kernels' time charge, used here for queues that timed out without being slow: the proportional
/// charge applies only when `0 < delta < timeout`, so a timed-out queue that is not slow (a sequential reader in
/// a slow inner zone that served more than half of `max_budget`) is charged only the sectors it received. With
/// the current rule (`min(delta, timeout)`), such a queue would be charged a full `max_budget` whenever it used
/// less than 2/3 of its budget, and a 2x zone difference breaks sector fairness (measured 1.25:2 instead of 2:2
/// in `tests::weighted_shares_independent_of_zones`), contradicting BFQ's claim that its sector fairness does
/// not depend on the zone (docs/SCHEDULERS.md, BFQ).
pub fn time_charge_within_timeout(delta: Time, timeout: Time, max_budget: u64, service: u64) -> u64 {
    if delta == 0 || delta >= timeout {
        service
    } else {
        time_charge(delta, timeout, max_budget, service)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A sequential queue that uses its whole budget earns four times the budget, one that times out twice the
    // budget (room for slow zones), both capped at the device maximum.
    #[test]
    fn budget_grows_x4_on_exhaustion_and_x2_on_timeout() {
        let b = Budgets::new(0);
        assert_eq!(
            b.recalc(1000, Expiration::BudgetExhausted, true, false, 1000, false),
            Some(4000)
        );
        assert_eq!(
            b.recalc(1000, Expiration::BudgetTimeout, true, false, 500, false),
            Some(2000)
        );
        assert_eq!(
            b.recalc(10_000, Expiration::BudgetExhausted, true, false, 0, false),
            Some(16384)
        );
    }

    // Too-idle with nothing in flight is the only shrinking case (by 4 x min_budget, floored at min_budget);
    // no-more-requests tracks the real demand; preemption changes nothing; raised and async queues are fixed.
    #[test]
    fn other_feedback_rules() {
        let b = Budgets::new(0);
        let min = b.min_budget();
        assert_eq!(min, 512);
        assert_eq!(
            b.recalc(8000, Expiration::TooIdle, true, false, 10, false),
            Some(8000 - 4 * min)
        );
        assert_eq!(b.recalc(2000, Expiration::TooIdle, true, false, 10, false), Some(min));
        assert_eq!(b.recalc(2000, Expiration::TooIdle, true, false, 10, true), Some(4000));
        assert_eq!(
            b.recalc(2000, Expiration::NoMoreRequests, true, false, 700, false),
            Some(700)
        );
        assert_eq!(
            b.recalc(2000, Expiration::NoMoreRequests, true, false, 7, false),
            Some(min)
        );
        assert_eq!(b.recalc(2000, Expiration::Preempted, true, false, 7, false), None);
        assert_eq!(
            b.recalc(2000, Expiration::BudgetExhausted, true, true, 7, false),
            Some(2 * min)
        );
        assert_eq!(
            b.recalc(2000, Expiration::NoMoreRequests, false, false, 7, false),
            Some(16384)
        );
    }

    // `__bfq_bfqq_recalc_budget` returns early only for a sync, non-raised queue: a preempted raised queue gets
    // twice the minimum (newest rule) and a preempted async one the device maximum.
    #[test]
    fn a_preempted_raised_or_async_queue_still_gets_its_budget() {
        let b = Budgets::new(0);
        assert_eq!(b.recalc(2000, Expiration::Preempted, true, false, 7, false), None);
        assert_eq!(b.recalc(2000, Expiration::Preempted, true, true, 7, false), Some(1024));
        assert_eq!(
            b.recalc(2000, Expiration::Preempted, false, false, 7, false),
            Some(16_384)
        );
    }

    // The caps read the device maximum as autotuning left it, even before the 194 assignments after which
    // `max_budget` reports it: tuned to 6000 (a slow disk) after 3 assignments, a timed-out 4000 is capped at
    // 6000, not 8000, an exhausted one too, and an async queue gets 6000; the minimum, and so the shrink, stay on
    // the default (512) until then.
    #[test]
    fn the_caps_read_the_autotuned_maximum_before_it_is_reported() {
        let mut b = Budgets::new(0);
        for _ in 0..3 {
            b.assigned_one();
        }
        b.max = 6000;
        assert_eq!(b.max_budget(), DEFAULT_MAX_BUDGET, "not reported yet");
        assert_eq!(
            b.recalc(4000, Expiration::BudgetTimeout, true, false, 0, false),
            Some(6000)
        );
        assert_eq!(
            b.recalc(4000, Expiration::BudgetExhausted, true, false, 0, false),
            Some(6000)
        );
        assert_eq!(b.recalc(4000, Expiration::TooIdle, true, false, 0, true), Some(6000));
        assert_eq!(
            b.recalc(4000, Expiration::NoMoreRequests, false, false, 0, false),
            Some(6000)
        );
        assert_eq!(
            b.recalc(8000, Expiration::TooIdle, true, false, 0, false),
            Some(8000 - 4 * 512)
        );
    }

    // The filtered counter needs 11 assignments to reach 194; until then the default maximum is used. Autotune
    // at the initial HDD peak (9333) and 125 ms gives 9333 * 125000 >> 16 = 17801 sectors.
    #[test]
    fn autotune_after_194_budgets() {
        let mut b = Budgets::new(0);
        b.autotune(9333, 125 * MS);
        assert_eq!(b.max, 17_801);
        // Bounded, so that a broken counter fails the test instead of hanging it.
        let n = (1..=50)
            .find(|_| {
                b.assigned_one();
                b.max_budget() != DEFAULT_MAX_BUDGET
            })
            .unwrap_or(0);
        assert_eq!(n, 11);
        assert_eq!(b.max_budget(), 17_801);
    }

    // Async requests are charged x3 (v7r2: x11) unless raised or asymmetric.
    #[test]
    fn async_charge_factor() {
        let f = ASYNC_CHARGE_FACTOR;
        assert_eq!(charge(8, false, false, false, f), 24);
        assert_eq!(charge(8, false, false, false, super::super::era::V7_ASYNC_CHARGE), 88);
        assert_eq!(charge(8, true, false, false, f), 8);
        assert_eq!(charge(8, false, true, false, f), 8);
        assert_eq!(charge(8, false, false, true, f), 8);
    }

    // Slowness: under 1 ms seekiness decides and a fixed time is charged; above 20 ms, less than half the maximum
    // budget means slow; the charge is proportional to the time used, capped at the timeout.
    #[test]
    fn slowness_and_time_charge() {
        assert_eq!(is_slow(500_000, true, 0, 16384, true, 8 * MS), (true, 8 * MS));
        assert_eq!(is_slow(500_000, false, 0, 16384, false, 8 * MS), (false, 2 * MS));
        assert_eq!(is_slow(10 * MS, true, 0, 16384, true, 8 * MS), (true, 10 * MS));
        assert!(is_slow(50 * MS, false, 1000, 16384, true, 8 * MS).0);
        assert!(!is_slow(50 * MS, true, 9000, 16384, true, 8 * MS).0);
        assert_eq!(time_charge(62_500_000, 125 * MS, 16384, 100), 8192);
        assert_eq!(time_charge(500 * MS, 125 * MS, 16384, 100), 16384);
        assert_eq!(time_charge(MS, 125 * MS, 16384, 1000), 1000);
        // The older rule: nothing beyond the service once the timeout has passed.
        assert_eq!(time_charge_within_timeout(130 * MS, 125 * MS, 16384, 9000), 9000);
        assert_eq!(time_charge_within_timeout(62_500_000, 125 * MS, 16384, 100), 8192);
    }

    // The autotuned cap (kernel: `bfq_stats_min_budgets` assignments, then `min(max_budget, bfq_max_budget)`):
    // with the maximum tuned down to 4000 sectors, a queue that exhausted a 3000-sector budget gets 4000, not
    // 12 000, at once (the growth is capped by the device field); a demand of 5000 (no more requests) is kept
    // until 11 budgets have been assigned, then capped at 4000; with a user maximum the final cap does not apply.
    #[test]
    fn the_autotuned_maximum_caps_the_feedback_once_tuned() {
        let mut b = Budgets::new(0);
        b.max = 4000;
        assert_eq!(
            b.recalc(3000, Expiration::BudgetExhausted, true, false, 3000, false),
            Some(4000),
            "the growth is capped by the tuned field"
        );
        assert_eq!(
            b.recalc(3000, Expiration::NoMoreRequests, true, false, 5000, false),
            Some(5000),
            "not yet 194 assignments: the demand is kept"
        );
        for _ in 0..11 {
            b.assigned_one();
        }
        assert_eq!(
            b.recalc(3000, Expiration::BudgetExhausted, true, false, 3000, false),
            Some(4000)
        );
        assert_eq!(
            b.recalc(3000, Expiration::NoMoreRequests, true, false, 5000, false),
            Some(4000)
        );
        let mut u = Budgets::new(4000);
        for _ in 0..11 {
            u.assigned_one();
        }
        assert_eq!(
            u.recalc(1500, Expiration::BudgetExhausted, true, false, 1500, false),
            Some(4000)
        );
        assert_eq!(
            u.recalc(3000, Expiration::NoMoreRequests, true, false, 5000, false),
            Some(5000),
            "a user maximum does not cap the demand"
        );
    }

    // Slowness boundaries (the kernel's `bfq_bfqq_is_slow`): a slot of exactly 1 ms is long enough to be timed
    // (charged its own length), one of exactly 20 ms is still judged by seekiness, and past 20 ms a queue that
    // received exactly half of the maximum budget is not slow (slow is strictly less than half).
    #[test]
    fn slowness_boundaries_at_1_ms_20_ms_and_half_the_maximum() {
        assert_eq!(is_slow(MS, true, 0, 16384, true, 8 * MS), (true, MS), "1 ms is timed");
        assert_eq!(
            is_slow(MS - 1, false, 0, 16384, true, 8 * MS),
            (false, 8 * MS),
            "under 1 ms: one seek"
        );
        assert_eq!(
            is_slow(20 * MS, false, 0, 16384, true, 8 * MS),
            (false, 20 * MS),
            "20 ms: seekiness"
        );
        assert!(
            is_slow(20 * MS + 1, false, 0, 16384, true, 8 * MS).0,
            "past 20 ms: service"
        );
        assert!(
            !is_slow(50 * MS, true, 8192, 16384, true, 8 * MS).0,
            "half the maximum is not slow"
        );
        assert!(is_slow(50 * MS, false, 8191, 16384, true, 8 * MS).0);
    }

    // The older charge rule applies the time charge only strictly inside (0, timeout): a slot of exactly the
    // timeout (125 ms) is charged its service, as is an empty interval; one nanosecond less is charged in
    // proportion to the time (just under the whole 16 384).
    #[test]
    fn the_older_time_charge_stops_at_the_timeout() {
        assert_eq!(time_charge_within_timeout(125 * MS, 125 * MS, 16384, 9000), 9000);
        assert_eq!(time_charge_within_timeout(0, 125 * MS, 16384, 9000), 9000);
        assert_eq!(time_charge_within_timeout(125 * MS - 1, 125 * MS, 16384, 9000), 16383);
        assert_eq!(
            time_charge_within_timeout(MS, 125 * MS, 16384, 9),
            131,
            "16384 x 1/125, above the service"
        );
    }

    // A new queue starts with 2/3 of the device maximum (10 922 of 16 384), and the minimum budget is 1/32 of the
    // maximum (512), also after autotuning (17 801 / 32 = 556).
    #[test]
    fn a_new_queue_gets_two_thirds_and_the_minimum_is_a_thirty_second() {
        let mut b = Budgets::new(0);
        assert_eq!(b.new_queue_max(), 10_922);
        assert_eq!(b.min_budget(), 512);
        b.autotune(9333, 125 * MS);
        for _ in 0..11 {
            b.assigned_one();
        }
        assert_eq!(b.min_budget(), 556);
        assert_eq!(b.new_queue_max(), 11_867);
    }
}
