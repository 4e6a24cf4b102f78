//! The dispatch driver loop: feeds a policy's decisions to a device that has a bounded number of tags.

use crate::scheduler::Scheduler;
use crate::types::{Decision, FlowId, FlowInfo, Request, Time};

/// Counters kept by the driver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Requests inserted (before any merging).
    pub inserted: u64,
    /// Requests sent to the device (after merging).
    pub dispatched: u64,
    /// Requests completed by the device (after merging).
    pub completed: u64,
}

/// Owns a policy and drives it against a device with `tags` hardware tags.
///
/// Call [`Driver::pump`] after every insert, every completion and whenever [`Driver::wakeup`] is reached; it asks
/// the policy for requests while a tag is free and stops at the first `WaitUntil` or `Nothing`.
pub struct Driver {
    policy: Box<dyn Scheduler>,
    tags: u32,
    in_flight: u32,
    wakeup: Option<Time>,
    /// Whether anything the policy could answer differently on has happened since the last [`Driver::pump`] that
    /// ended on the policy's own answer: an insert, a completion, a flow starting or exiting, mutable access.
    stale: bool,
    /// The policy's [`Scheduler::answers_change_with_time`]: asked on every pump.
    polled: bool,
    stats: DriverStats,
}

impl Driver {
    /// Wraps `policy` for a device accepting `tags` requests at once (at least 1).
    pub fn new(policy: Box<dyn Scheduler>, tags: u32) -> Self {
        Driver {
            polled: policy.answers_change_with_time(),
            policy,
            tags: tags.max(1),
            in_flight: 0,
            wakeup: None,
            stale: true,
            stats: DriverStats::default(),
        }
    }

    /// Tells the policy a flow started.
    pub fn flow_started(&mut self, flow: &FlowInfo, now: Time) {
        self.stale = true;
        self.policy.flow_started(flow, now);
    }

    /// Tells the policy a flow exited.
    pub fn flow_exited(&mut self, flow: FlowId, now: Time) {
        self.stale = true;
        self.policy.flow_exited(flow, now);
    }

    /// Inserts a request into the policy. Call [`Driver::pump`] afterwards.
    pub fn insert(&mut self, rq: Request, now: Time) {
        self.stats.inserted += 1;
        self.stale = true;
        self.policy.insert(rq, now);
    }

    /// Reports the completion of a dispatched request and frees its tag. Call [`Driver::pump`] afterwards.
    pub fn complete(&mut self, rq: &Request, now: Time) {
        self.stats.completed += 1;
        crate::counter::dec(&mut self.in_flight, "driver in_flight");
        self.stale = true;
        self.policy.completed(rq, now);
    }

    /// Dispatches as many requests as the policy and the free tags allow, appending them to `out`.
    /// Returns the number dispatched. Afterwards [`Driver::wakeup`] tells when the policy wants to be asked again.
    pub fn pump(&mut self, now: Time, out: &mut Vec<Request>) -> usize {
        // Nothing happened since the policy last answered `Nothing` or `WaitUntil` for a time still ahead: it would
        // answer the same, so it is not asked (the kernel runs a queue on inserts, completions and timers only),
        // unless it says its answers change with time alone.
        if !self.stale && !self.polled && self.wakeup.is_none_or(|w| now < w) {
            return 0;
        }
        let mut n = 0;
        self.wakeup = None;
        while self.in_flight < self.tags {
            match self.policy.dispatch(now) {
                Decision::Dispatch(rq) => {
                    // If the tags run out now, the next pump must ask again.
                    self.stale = true;
                    self.in_flight += 1;
                    self.stats.dispatched += 1;
                    n += 1;
                    out.push(rq);
                }
                Decision::WaitUntil(t) => {
                    self.stale = false;
                    // A policy must ask for a time in the future; never spin on a faulty answer.
                    self.wakeup = Some(t.max(now + 1));
                    break;
                }
                Decision::Nothing => {
                    self.stale = false;
                    break;
                }
            }
        }
        n
    }

    /// When the policy asked to be polled again, if it is waiting.
    pub fn wakeup(&self) -> Option<Time> {
        self.wakeup
    }

    /// Requests on the device.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Hardware tags.
    pub fn tags(&self) -> u32 {
        self.tags
    }

    /// Counters.
    pub fn stats(&self) -> DriverStats {
        self.stats
    }

    /// The policy, for inspection.
    pub fn policy(&self) -> &dyn Scheduler {
        self.policy.as_ref()
    }

    /// The policy, mutably.
    pub fn policy_mut(&mut self) -> &mut dyn Scheduler {
        self.stale = true;
        self.policy.as_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceInfo;
    use crate::types::{Direction, RequestId};

    /// Answers from a script, then `Nothing`.
    struct Scripted(Vec<Decision>);

    impl Scheduler for Scripted {
        fn name(&self) -> &'static str {
            "scripted"
        }
        fn flow_started(&mut self, _: &FlowInfo, _: Time) {}
        fn flow_exited(&mut self, _: FlowId, _: Time) {}
        fn insert(&mut self, _: Request, _: Time) {}
        fn dispatch(&mut self, _: Time) -> Decision {
            if self.0.is_empty() {
                Decision::Nothing
            } else {
                self.0.remove(0)
            }
        }
        fn completed(&mut self, _: &Request, _: Time) {}
        fn queued(&self) -> usize {
            self.0.len()
        }
    }

    fn rq(id: u64) -> Request {
        Request::new(RequestId(id), FlowId(0), Direction::Read, true, id * 8, 8)
    }

    #[test]
    fn never_exceeds_the_tag_limit() {
        // Ten requests queued in noop, two tags: only two go out until one completes.
        let mut d = Driver::new(crate::build::<&str>("noop", &DeviceInfo::hdd(), &[]).unwrap(), 2);
        for i in 0..10 {
            d.insert(rq(i * 100), 0);
        }
        let mut out = Vec::new();
        assert_eq!(d.pump(0, &mut out), 2);
        assert_eq!(d.pump(0, &mut out), 0, "tags full");
        let first = out[0].clone();
        d.complete(&first, 1);
        assert_eq!(d.pump(1, &mut out), 1);
        assert_eq!(d.in_flight(), 2);
        assert_eq!(
            d.stats(),
            DriverStats {
                inserted: 10,
                dispatched: 3,
                completed: 1
            }
        );
    }

    #[test]
    fn wait_until_stops_the_pump_and_is_kept_in_the_future() {
        let mut d = Driver::new(
            Box::new(Scripted(vec![
                Decision::Dispatch(rq(1)),
                Decision::WaitUntil(50),
                Decision::Dispatch(rq(2)),
            ])),
            8,
        );
        let mut out = Vec::new();
        assert_eq!(d.pump(10, &mut out), 1, "stops at the WaitUntil");
        assert_eq!(d.wakeup(), Some(50));
        assert_eq!(d.pump(50, &mut out), 1);
        assert_eq!(d.wakeup(), None, "Nothing clears the wake-up");
        // A faulty answer in the past becomes now + 1 ns, so a caller never spins at the same instant.
        let mut d = Driver::new(Box::new(Scripted(vec![Decision::WaitUntil(5)])), 8);
        d.pump(10, &mut out);
        assert_eq!(d.wakeup(), Some(11));
    }

    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    /// Counts its dispatch calls; answers `Nothing`, or `WaitUntil(at)` when `at` is set and not yet reached.
    struct Counting {
        calls: Arc<AtomicU32>,
        at: Option<Time>,
        with_time: bool,
    }

    impl Scheduler for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        fn flow_started(&mut self, _: &FlowInfo, _: Time) {}
        fn flow_exited(&mut self, _: FlowId, _: Time) {}
        fn insert(&mut self, _: Request, _: Time) {}
        fn dispatch(&mut self, now: Time) -> Decision {
            self.calls.fetch_add(1, Ordering::Relaxed);
            match self.at {
                Some(t) if now < t => Decision::WaitUntil(t),
                _ => Decision::Nothing,
            }
        }
        fn completed(&mut self, _: &Request, _: Time) {}
        fn queued(&self) -> usize {
            0
        }
        fn answers_change_with_time(&self) -> bool {
            self.with_time
        }
    }

    #[test]
    fn a_policy_is_asked_again_only_after_an_event_or_at_its_wakeup() {
        let calls = Arc::new(AtomicU32::new(0));
        let mut d = Driver::new(
            Box::new(Counting {
                calls: calls.clone(),
                at: Some(100),
                with_time: false,
            }),
            8,
        );
        let mut out = Vec::new();
        d.pump(0, &mut out);
        assert_eq!((calls.load(Ordering::Relaxed), d.wakeup()), (1, Some(100)));
        // Nothing happened and its time has not come: the same answer, not asked.
        d.pump(10, &mut out);
        d.pump(99, &mut out);
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        assert_eq!(d.wakeup(), Some(100), "the wake-up is kept");
        // An insert, a completion, a flow event or mutable access: asked again.
        d.insert(rq(1), 20);
        d.pump(20, &mut out);
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        d.flow_started(&FlowInfo::new(FlowId(3)), 30);
        d.pump(30, &mut out);
        assert_eq!(calls.load(Ordering::Relaxed), 3);
        let _ = d.policy_mut();
        d.pump(40, &mut out);
        assert_eq!(calls.load(Ordering::Relaxed), 4);
        // Its wake-up time: asked; it answers Nothing, and is then left alone until an event.
        d.pump(100, &mut out);
        d.pump(500, &mut out);
        assert_eq!((calls.load(Ordering::Relaxed), d.wakeup()), (5, None));
        // A policy whose answers change with time alone is asked on every pump.
        let calls = Arc::new(AtomicU32::new(0));
        let mut d = Driver::new(
            Box::new(Counting {
                calls: calls.clone(),
                at: None,
                with_time: true,
            }),
            8,
        );
        for t in 0..3 {
            d.pump(t, &mut out);
        }
        assert_eq!(calls.load(Ordering::Relaxed), 3);
    }
}
