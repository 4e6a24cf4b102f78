//! CPU cost of each registered policy per request (insert + dispatch + completed), with 1, 64 and 4096 busy
//! flows, driven through a synthetic device with a fixed queue depth.
//!
//! Every flow is a closed loop that keeps two 8-sector reads queued, sequential within the flow but not
//! contiguous (so nothing merges). One measured iteration is one request: the device completes its oldest
//! request (virtual time advances 50 µs), that flow issues its next request, and the policy is asked to dispatch
//! until the device is full (a `WaitUntil` is honoured by advancing virtual time to it).
//!
//! Run: `cargo bench -p bfq-sched --bench policy_cost [-- <policy name>]`.

use bfq_sched::{build, policies, Decision, DeviceInfo, Direction, FlowId, FlowInfo, Request, RequestId, Scheduler};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Device queue depth (hardware tags).
const DEPTH: usize = 32;
/// Requests each flow keeps queued.
const PER_FLOW: u32 = 2;
/// Virtual time between two completions (ns): 50 µs.
const COMPLETION_GAP: u64 = 50_000;
/// Request size (sectors).
const SECTORS: u32 = 8;

struct Rig {
    policy: Box<dyn Scheduler>,
    now: u64,
    in_dev: VecDeque<Request>,
    next_sector: Vec<u64>,
    next_id: u64,
}

impl Rig {
    fn new(name: &str, flows: usize) -> Rig {
        let dev = DeviceInfo::ssd();
        let mut policy = build::<&str>(name, &dev, &[]).expect("policy builds");
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
    fn step(&mut self) {
        self.now += COMPLETION_GAP;
        if let Some(rq) = self.in_dev.pop_front() {
            self.policy.completed(&rq, self.now);
            self.issue(rq.flow.0 as usize);
        }
        self.pump();
    }
}

fn policy_cost(c: &mut Criterion) {
    let mut g = c.benchmark_group("policy_cost");
    g.measurement_time(Duration::from_secs(3));
    g.warm_up_time(Duration::from_secs(1));
    for p in policies() {
        for flows in [1usize, 64, 4096] {
            g.bench_with_input(BenchmarkId::new(p.name, flows), &flows, |b, &flows| {
                let mut rig = Rig::new(p.name, flows);
                // Let the policy settle (raising periods of new flows, autotuning) before measuring.
                for _ in 0..20_000 {
                    rig.step();
                }
                b.iter_custom(|iters| {
                    let t = Instant::now();
                    for _ in 0..iters {
                        rig.step();
                    }
                    t.elapsed()
                });
            });
        }
    }
    g.finish();
}

criterion_group!(benches, policy_cost);
criterion_main!(benches);
