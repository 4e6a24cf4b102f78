//! A policy wrapped with hooks: every call goes to an inner policy, and a [`Hooks`] value may watch or change what
//! passes. Tests use it to inject a fault (a panic on the n-th insert, a corrupted counter, a depth limit) into a
//! real policy without writing the forwarding of every [`Scheduler`] method again.

use crate::scheduler::{InvariantViolation, Scheduler};
use crate::types::{Decision, Direction, FlowId, FlowInfo, Request, Time};

/// What a wrapper changes; every method has a default that changes nothing.
pub trait Hooks: Send {
    /// The wrapper's registry-style name.
    fn name(&self) -> &'static str;
    /// Called before each call to the inner policy (`flow_started`, `flow_exited`, `insert`, `dispatch`,
    /// `completed`), with the method's name.
    fn before_call(&mut self, _method: &'static str) {}
    /// Called before a request is inserted into the inner policy.
    fn on_insert(&mut self, _rq: &Request, _now: Time) {}
    /// Called before a completion reaches the inner policy.
    fn on_completed(&mut self, _rq: &Request, _now: Time) {}
    /// What the wrapper reports as queued, given the inner policy's count.
    fn queued(&self, inner: usize) -> usize {
        inner
    }
    /// The wrapper's depth limit, given the inner policy's.
    fn depth_limit(&self, _dir: Direction, _sync: bool, _nr_requests: u32, inner: u32) -> u32 {
        inner
    }
    /// The wrapper's own invariant check, run before the inner policy's.
    fn check_invariants(&self) -> Result<(), InvariantViolation> {
        Ok(())
    }
}

/// An inner policy with [`Hooks`] around it.
pub struct Wrapped<H> {
    /// The policy every call goes to.
    pub inner: Box<dyn Scheduler>,
    /// What the wrapper watches or changes.
    pub hooks: H,
}

impl<H: Hooks> Wrapped<H> {
    /// `inner` with `hooks` around it.
    pub fn new(inner: Box<dyn Scheduler>, hooks: H) -> Self {
        Wrapped { inner, hooks }
    }
}

impl<H: Hooks> Scheduler for Wrapped<H> {
    fn name(&self) -> &'static str {
        self.hooks.name()
    }
    fn flow_started(&mut self, flow: &FlowInfo, now: Time) {
        self.hooks.before_call("flow_started");
        self.inner.flow_started(flow, now)
    }
    fn flow_exited(&mut self, flow: FlowId, now: Time) {
        self.hooks.before_call("flow_exited");
        self.inner.flow_exited(flow, now)
    }
    fn insert(&mut self, rq: Request, now: Time) {
        self.hooks.before_call("insert");
        self.hooks.on_insert(&rq, now);
        self.inner.insert(rq, now)
    }
    fn dispatch(&mut self, now: Time) -> Decision {
        self.hooks.before_call("dispatch");
        self.inner.dispatch(now)
    }
    fn completed(&mut self, rq: &Request, now: Time) {
        self.hooks.before_call("completed");
        self.hooks.on_completed(rq, now);
        self.inner.completed(rq, now)
    }
    fn queued(&self) -> usize {
        self.hooks.queued(self.inner.queued())
    }
    fn set_timer_hz(&mut self, hz: u32) {
        self.inner.set_timer_hz(hz)
    }
    fn depth_limit(&self, dir: Direction, sync: bool, nr_requests: u32) -> u32 {
        let inner = self.inner.depth_limit(dir, sync, nr_requests);
        self.hooks.depth_limit(dir, sync, nr_requests, inner)
    }
    fn separate_sync_pool(&self) -> bool {
        self.inner.separate_sync_pool()
    }
    fn block_layer(&self) -> crate::scheduler::BlockLayer {
        self.inner.block_layer()
    }
    fn has_work(&self) -> bool {
        self.inner.has_work()
    }
    fn completion_runs_queue(&self) -> bool {
        self.inner.completion_runs_queue()
    }
    fn check_invariants(&self) -> Result<(), InvariantViolation> {
        self.hooks.check_invariants()?;
        self.inner.check_invariants()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceInfo;
    use crate::types::RequestId;

    struct CountInserts(u32);
    impl Hooks for CountInserts {
        fn name(&self) -> &'static str {
            "count-inserts"
        }
        fn on_insert(&mut self, _: &Request, _: Time) {
            self.0 += 1;
        }
        fn queued(&self, inner: usize) -> usize {
            inner + 1
        }
    }

    #[test]
    fn calls_reach_the_inner_policy_and_the_hooks() {
        let inner = crate::build::<&str>("noop", &DeviceInfo::ssd(), &[]).unwrap();
        let mut w = Wrapped::new(inner, CountInserts(0));
        w.flow_started(&FlowInfo::new(FlowId(1)), 0);
        w.insert(Request::new(RequestId(1), FlowId(1), Direction::Read, true, 0, 8), 0);
        assert_eq!(w.hooks.0, 1);
        // The inner noop holds one request; the hook adds one to the count it reports.
        assert_eq!(w.inner.queued(), 1);
        assert_eq!(w.queued(), 2);
        assert_eq!(w.name(), "count-inserts");
        assert!(matches!(w.dispatch(0), Decision::Dispatch(_)));
    }
}
