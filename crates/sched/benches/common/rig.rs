//! The synthetic rig shared by the `policy_cost` (criterion, wall clock) and `policy_instructions` (callgrind,
//! instruction counts) benches, included by both with `#[path = "common/rig.rs"] mod rig;`.
//!
//! Every flow is a closed loop that keeps two 8-sector reads queued, sequential within the flow but not
//! contiguous (so nothing merges). One step is one request: the device completes its oldest request (virtual time
//! advances 50 µs), that flow issues its next request, and the policy is asked to dispatch until the device is full
//! (a `WaitUntil` is honoured by advancing virtual time to it).

// Each bench uses a different part of this module.
#![allow(dead_code)]

use bfq_sched::{build, Decision, DeviceInfo, Direction, FlowId, FlowInfo, Request, RequestId, Scheduler, Time};
use std::collections::VecDeque;

/// Device queue depth (hardware tags).
pub const DEPTH: usize = 32;
/// Requests each flow keeps queued.
pub const PER_FLOW: u32 = 2;
/// Virtual time between two completions (ns): 50 µs.
pub const COMPLETION_GAP: u64 = 50_000;
/// Request size (sectors).
pub const SECTORS: u32 = 8;
/// Steps run before measuring, so the policy settles (raising periods of new flows, autotuning).
pub const SETTLE_STEPS: u32 = 20_000;

/// Name under which [`Empty`] is accepted by [`Rig::new`]: not a registered policy.
pub const EMPTY: &str = "empty";

/// The empty policy: a plain FIFO that does nothing else. Measuring the rig with it gives the rig's own cost
/// (request construction, the device queue, dynamic dispatch), which is subtracted from every policy's figure.
#[derive(Default)]
pub struct Empty {
    fifo: VecDeque<Request>,
}

impl Scheduler for Empty {
    fn name(&self) -> &'static str {
        EMPTY
    }
    fn flow_started(&mut self, _flow: &FlowInfo, _now: Time) {}
    fn flow_exited(&mut self, _flow: FlowId, _now: Time) {}
    fn insert(&mut self, rq: Request, _now: Time) {
        self.fifo.push_back(rq);
    }
    fn dispatch(&mut self, _now: Time) -> Decision {
        match self.fifo.pop_front() {
            Some(rq) => Decision::Dispatch(rq),
            None => Decision::Nothing,
        }
    }
    fn completed(&mut self, _rq: &Request, _now: Time) {}
    fn queued(&self) -> usize {
        self.fifo.len()
    }
}

/// A policy, a synthetic device of [`DEPTH`] tags and `flows` closed-loop flows.
pub struct Rig {
    policy: Box<dyn Scheduler>,
    now: u64,
    in_dev: VecDeque<Request>,
    next_sector: Vec<u64>,
    next_id: u64,
}

impl Rig {
    /// The rig for the registered policy `name` (defaults, SSD) or [`EMPTY`], with every flow's first requests
    /// queued and the device filled.
    pub fn new(name: &str, flows: usize) -> Rig {
        let policy: Box<dyn Scheduler> = if name == EMPTY {
            Box::new(Empty::default())
        } else {
            build::<&str>(name, &DeviceInfo::ssd(), &[]).expect("policy builds")
        };
        Rig::with_policy(policy, flows)
    }

    /// The rig around `policy`.
    pub fn with_policy(mut policy: Box<dyn Scheduler>, flows: usize) -> Rig {
        for f in 0..flows {
            policy.flow_started(&FlowInfo::new(FlowId(f as u32)), 0);
        }
        let mut rig = Rig {
            policy,
            now: 0,
            in_dev: VecDeque::with_capacity(DEPTH),
            next_sector: (0..flows).map(|f| (f as u64) << 24).collect(),
            next_id: 0,
        };
        for f in 0..flows {
            for _ in 0..PER_FLOW {
                rig.issue(f);
            }
        }
        rig.pump();
        rig
    }

    fn issue(&mut self, f: usize) {
        let s = self.next_sector[f];
        self.next_sector[f] = s + 2 * u64::from(SECTORS);
        let rq = Request::new(
            RequestId(self.next_id),
            FlowId(f as u32),
            Direction::Read,
            true,
            s,
            SECTORS,
        );
        self.next_id += 1;
        self.policy.insert(rq, self.now);
    }

    fn pump(&mut self) {
        while self.in_dev.len() < DEPTH {
            match self.policy.dispatch(self.now) {
                Decision::Dispatch(rq) => self.in_dev.push_back(rq),
                Decision::WaitUntil(t) => {
                    if self.in_dev.is_empty() {
                        self.now = t;
                    } else {
                        break;
                    }
                }
                Decision::Nothing => break,
            }
        }
    }

    /// One request through the policy.
    pub fn step(&mut self) {
        self.now += COMPLETION_GAP;
        if let Some(rq) = self.in_dev.pop_front() {
            self.policy.completed(&rq, self.now);
            self.issue(rq.flow.0 as usize);
        }
        self.pump();
    }

    /// Requests dispatched so far (a cross-check that a run did the work it was asked to).
    pub fn issued(&self) -> u64 {
        self.next_id
    }
}
