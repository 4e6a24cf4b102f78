//! CPU cost of each registered policy per request (insert + dispatch + completed), with 1, 64 and 4096 busy
//! flows, driven through a synthetic device with a fixed queue depth (the rig in `common/rig.rs`, shared with the
//! `policy_instructions` bench, which counts instructions instead of nanoseconds).
//!
//! Every flow is a closed loop that keeps two 8-sector reads queued, sequential within the flow but not
//! contiguous (so nothing merges). One measured iteration is one request: the device completes its oldest
//! request (virtual time advances 50 µs), that flow issues its next request, and the policy is asked to dispatch
//! until the device is full (a `WaitUntil` is honoured by advancing virtual time to it).
//!
//! The `empty` row is the rig alone (a FIFO that does nothing else): subtract it from a policy's figure.
//!
//! Run: `cargo bench -p bfq-sched --bench policy_cost [-- <policy name>]`.

#[path = "common/rig.rs"]
mod rig;

use bfq_sched::policies;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rig::{Rig, SETTLE_STEPS};
use std::time::{Duration, Instant};

fn policy_cost(c: &mut Criterion) {
    let mut g = c.benchmark_group("policy_cost");
    g.measurement_time(Duration::from_secs(3));
    g.warm_up_time(Duration::from_secs(1));
    // The empty policy first: the rig's own cost, to subtract from the others.
    let names = std::iter::once(rig::EMPTY).chain(policies().iter().map(|p| p.name));
    for name in names {
        for flows in [1usize, 64, 4096] {
            g.bench_with_input(BenchmarkId::new(name, flows), &flows, |b, &flows| {
                let mut rig = Rig::new(name, flows);
                // Let the policy settle (raising periods of new flows, autotuning) before measuring.
                for _ in 0..SETTLE_STEPS {
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
