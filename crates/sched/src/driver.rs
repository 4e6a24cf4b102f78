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
    stats: DriverStats,
}

impl Driver {
    /// Wraps `policy` for a device accepting `tags` requests at once (at least 1).
    pub fn new(policy: Box<dyn Scheduler>, tags: u32) -> Self {
        Driver {
            policy,
            tags: tags.max(1),
            in_flight: 0,
            wakeup: None,
            stats: DriverStats::default(),
        }
    }

    /// Tells the policy a flow started.
    pub fn flow_started(&mut self, flow: &FlowInfo, now: Time) {
        self.policy.flow_started(flow, now);
    }

    /// Tells the policy a flow exited.
    pub fn flow_exited(&mut self, flow: FlowId, now: Time) {
        self.policy.flow_exited(flow, now);
    }

    /// Inserts a request into the policy. Call [`Driver::pump`] afterwards.
    pub fn insert(&mut self, rq: Request, now: Time) {
        self.stats.inserted += 1;
        self.policy.insert(rq, now);
    }

    /// Reports the completion of a dispatched request and frees its tag. Call [`Driver::pump`] afterwards.
    pub fn complete(&mut self, rq: &Request, now: Time) {
        self.stats.completed += 1;
        crate::counter::dec(&mut self.in_flight, "driver in_flight");
        self.policy.completed(rq, now);
    }

    /// Dispatches as many requests as the policy and the free tags allow, appending them to `out`.
    /// Returns the number dispatched. Afterwards [`Driver::wakeup`] tells when the policy wants to be asked again.
    pub fn pump(&mut self, now: Time, out: &mut Vec<Request>) -> usize {
        let mut n = 0;
        self.wakeup = None;
        while self.in_flight < self.tags {
            match self.policy.dispatch(now) {
                Decision::Dispatch(rq) => {
                    self.in_flight += 1;
                    self.stats.dispatched += 1;
                    n += 1;
                    out.push(rq);
                }
                Decision::WaitUntil(t) => {
                    // A policy must ask for a time in the future; never spin on a faulty answer.
                    self.wakeup = Some(t.max(now + 1));
                    break;
                }
                Decision::Nothing => break,
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
}
