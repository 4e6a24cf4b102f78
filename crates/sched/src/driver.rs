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
        self.in_flight = self.in_flight.saturating_sub(1);
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
