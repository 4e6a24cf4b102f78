//! The kernel's timer tick (`HZ`), for policies whose kernel armed their timers in jiffies.
//!
//! A kernel of the seeds' era (2.6.32 to 3.13) armed CFQ's and BFQ's idle timers with `mod_timer`, whose expiry is
//! a jiffy count: the timer fires at the first tick at which the jiffy counter has advanced by the requested number
//! of jiffies, the request being rounded up to whole jiffies. A jiffy lasts `1/HZ` s (10 ms at HZ=100, a common
//! setting of embedded systems; 4 ms at 250; 1 ms at 1000). Their defaults were also written in jiffies, as integer
//! fractions of HZ (`HZ / 125` for an 8 ms idle slice), which at a low HZ truncate: at HZ=100 `HZ / 125` is 0.
//!
//! Without a tick setting every policy keeps nanosecond timers (a modern high-resolution timer), which is also what
//! the newest BFQ uses (an `hrtimer`) whatever HZ is. See docs/SCHEDULERS.md, "Timer tick".

use crate::types::{Time, SEC};

/// Length of one jiffy at `hz` ticks per second, ns (at least 1 ns; `hz` of 0 is read as 1).
pub fn jiffy_ns(hz: u32) -> Time {
    (SEC / Time::from(hz.max(1))).max(1)
}

/// `ns` rounded up to whole jiffies of `jiffy` ns (`msecs_to_jiffies`, used for a value written through sysfs).
pub fn round_up(ns: Time, jiffy: Time) -> Time {
    ns.div_ceil(jiffy).saturating_mul(jiffy)
}

/// A default written as `HZ / divisor` jiffies, in ns: the integer division truncates (0 when `hz < divisor`).
pub fn hz_fraction(hz: u32, divisor: u32) -> Time {
    Time::from(hz / divisor.max(1)).saturating_mul(jiffy_ns(hz))
}

/// When a timer armed at `now` for `delay` ns fires on a kernel ticking every `jiffy` ns: the delay is rounded up
/// to whole jiffies, counted from the current jiffy (the tick at or before `now`), so the timer fires on a tick
/// boundary between `delay - jiffy` and `delay + jiffy` after `now` (never at `now` itself, at least at the next
/// tick).
pub fn fire_time(now: Time, delay: Time, jiffy: Time) -> Time {
    let jiffies = delay.div_ceil(jiffy).max(1);
    (now / jiffy).saturating_add(jiffies).saturating_mul(jiffy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::MS;

    #[test]
    fn jiffies_at_common_hz() {
        assert_eq!(jiffy_ns(100), 10 * MS);
        assert_eq!(jiffy_ns(250), 4 * MS);
        assert_eq!(jiffy_ns(1000), MS);
        // HZ / 125 jiffies: the 8 ms idle slice of 3.13's CFQ and BFQ v7r2, truncated to nothing at HZ=100.
        assert_eq!(hz_fraction(1000, 125), 8 * MS);
        assert_eq!(hz_fraction(250, 125), 8 * MS);
        assert_eq!(hz_fraction(100, 125), 0);
        assert_eq!(round_up(8 * MS, 10 * MS), 10 * MS);
        assert_eq!(round_up(20 * MS, 10 * MS), 20 * MS);
    }

    /// What `sched` answers when flow 1's read completes at 3 ms while flow 2's read waits: it idles for flow 1's
    /// next read until the returned time, or not at all (`None`).
    fn idle_after_one_read(sched: &str, hz: Option<u32>) -> Option<Time> {
        use crate::types::{Decision, Direction, FlowId, FlowInfo, Request, RequestId};
        // A disk without command queueing, like the 1.8-inch HDD.
        let dev = crate::DeviceInfo {
            queue_depth: 1,
            ..crate::DeviceInfo::hdd()
        };
        let mut p = crate::build::<&str>(sched, &dev, &[]).expect("registered");
        if let Some(hz) = hz {
            p.set_timer_hz(hz);
        }
        p.flow_started(&FlowInfo::new(FlowId(1)), 0);
        p.flow_started(&FlowInfo::new(FlowId(2)), 0);
        p.insert(Request::new(RequestId(1), FlowId(1), Direction::Read, true, 1000, 8), 0);
        let Decision::Dispatch(rq) = p.dispatch(0) else {
            panic!("{sched}: the first read is dispatched at once")
        };
        // Another process waits far away: idling for flow 1 is a choice against it.
        p.insert(
            Request::new(RequestId(2), FlowId(2), Direction::Read, true, 50_000_000, 8),
            0,
        );
        p.completed(&rq, 3 * MS);
        match p.dispatch(3 * MS) {
            Decision::WaitUntil(t) => Some(t),
            _ => None,
        }
    }

    // The policies whose 3.13 code armed the idle timer in jiffies idle until a tick, and not at all at HZ=100 where
    // their HZ/125 default is 0 jiffies; the newest BFQ (a high-resolution timer, ns defaults) ignores HZ.
    #[test]
    fn jiffy_policies_idle_to_a_tick_and_the_newest_bfq_ignores_hz() {
        for sched in ["bfq-v7r2", "cfq"] {
            let exact = idle_after_one_read(sched, None).unwrap_or_else(|| panic!("{sched} idles with exact timers"));
            assert!(exact > 3 * MS && !exact.is_multiple_of(4 * MS), "{sched}: {exact}");
            let at_250 = idle_after_one_read(sched, Some(250)).expect("idles at HZ=250");
            assert!(at_250.is_multiple_of(4 * MS), "{sched}: fires on a 4 ms tick");
            assert!(
                at_250 + 4 * MS >= exact && at_250 <= exact + 4 * MS,
                "{sched}: {at_250} vs {exact}"
            );
            assert_eq!(
                idle_after_one_read(sched, Some(100)),
                None,
                "{sched}: HZ/125 = 0 at HZ=100"
            );
        }
        let newest = idle_after_one_read("bfq", None);
        assert_eq!(idle_after_one_read("bfq", Some(100)), newest);
        assert_eq!(idle_after_one_read("bfq", Some(250)), newest);
    }

    #[test]
    fn a_timer_fires_on_a_tick_within_one_jiffy_of_its_delay() {
        let j = 10 * MS;
        // Armed right on a tick: exactly the rounded delay.
        assert_eq!(fire_time(0, 8 * MS, j), 10 * MS);
        // Armed 9 ms into a jiffy: one jiffy is counted from the current one, so it fires 1 ms later.
        assert_eq!(fire_time(9 * MS, 8 * MS, j), 10 * MS);
        assert_eq!(fire_time(9 * MS, 12 * MS, j), 20 * MS);
        for now in (0..50 * MS).step_by(MS as usize / 3) {
            for delay in [MS, 8 * MS, 10 * MS, 24 * MS] {
                let t = fire_time(now, delay, j);
                assert!(t > now && t.is_multiple_of(j), "{now} {delay} {t}");
                assert!(t + j >= now + delay && t <= now + delay + j, "{now} {delay} {t}");
            }
        }
    }
}
