//! Every policy runs the randomized conformance sequence on a rotational and a non-rotational device, with several
//! seeds, then on configurations drawn from seeds (device, flows, load, tunables). A new policy joins with one line.
//!
//! The seeded runs print the seed of a failure; `BFQ_CONFORMANCE_SEED=<seed> cargo test -p bfq-sched --test
//! conformance` reruns that seed alone (for every policy), and `BFQ_CONFORMANCE_SEEDS=<n>` runs `n` seeds per policy.

use bfq_sched::conformance::{run, run_policy, Config, SEED_ENV};
use bfq_sched::wrap::{Hooks, Wrapped};
use bfq_sched::{DeviceInfo, InvariantViolation};
use std::sync::atomic::{AtomicU64, Ordering};

const SEEDS: [u64; 4] = [1, 2, 3, 0xDEAD_BEEF];

/// Seeds per policy in the seeded-configuration runs, unless `BFQ_CONFORMANCE_SEEDS` says otherwise.
const DRAWN_SEEDS: u64 = 16;

fn check(name: &str, tunables: &[&str]) {
    for dev in [DeviceInfo::hdd(), DeviceInfo::ssd(), {
        let mut d = DeviceInfo::hdd();
        d.queue_depth = 1;
        d
    }] {
        for seed in SEEDS {
            let mut cfg = Config::new(seed, dev.clone());
            cfg.tunables = tunables.iter().map(|s| s.to_string()).collect();
            let report = run(name, &cfg).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                report.records.len() > 1000,
                "{name}: only {} requests exercised",
                report.records.len()
            );
            assert!(
                (report.device_requests as usize) < report.records.len(),
                "{name}: the sequence never produced a merge"
            );
        }
    }
}

/// The seeds of the seeded-configuration runs: the one in `BFQ_CONFORMANCE_SEED`, or `BFQ_CONFORMANCE_SEEDS` (default
/// [`DRAWN_SEEDS`]) seeds derived from the policy name, so that policies do not all share the same configurations.
fn drawn_seeds(name: &str) -> Vec<u64> {
    if let Ok(v) = std::env::var(SEED_ENV) {
        let seed = v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{SEED_ENV}={v} is not an unsigned integer"));
        return vec![seed];
    }
    let n = std::env::var("BFQ_CONFORMANCE_SEEDS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DRAWN_SEEDS);
    let base = name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    });
    (0..n)
        .map(|i| (base.wrapping_add(i.wrapping_mul(0x9E37_79B9))) >> 16)
        .collect()
}

fn check_drawn(name: &str) {
    for seed in drawn_seeds(name) {
        let cfg = Config::from_seed(seed, name);
        if let Err(e) = run(name, &cfg) {
            panic!(
                "{e}\nconfiguration drawn from seed {seed}: {cfg:?}\nrerun with: {SEED_ENV}={seed} cargo test -p \
                 bfq-sched --test conformance {}_drawn",
                name.replace('-', "_")
            );
        }
    }
}

macro_rules! conformance {
    ($test:ident, $name:expr $(, $tunable:expr)*) => {
        #[test]
        fn $test() {
            check($name, &[$($tunable),*]);
        }
    };
}

macro_rules! conformance_drawn {
    ($test:ident, $name:expr) => {
        #[test]
        fn $test() {
            check_drawn($name);
        }
    };
}

conformance!(noop, "noop");
conformance!(deadline, "deadline");
conformance!(
    deadline_batch1_no_front_merges,
    "deadline",
    "fifo_batch=1",
    "front_merges=0"
);
conformance!(mq_deadline, "mq-deadline");
conformance!(anticipatory, "anticipatory");
conformance!(anticipatory_no_antic, "anticipatory", "antic_expire=0");
conformance!(kyber, "kyber");
conformance!(cfq, "cfq");
conformance!(cfq_no_slice_idle, "cfq", "slice_idle=0");
conformance!(cfq_no_low_latency, "cfq", "low_latency=0");
conformance!(bfq, "bfq");
conformance!(bfq_no_low_latency, "bfq", "low_latency=0");
conformance!(bfq_strict_guarantees, "bfq", "strict_guarantees=1");
conformance!(bfq_no_idling, "bfq", "slice_idle=0");
conformance!(bfq_v7r2, "bfq-v7r2");
conformance!(bfq_v7r2_no_low_latency, "bfq-v7r2", "low_latency=0");
conformance!(bfq_v7r2_no_idling, "bfq-v7r2", "slice_idle=0");

conformance_drawn!(noop_drawn, "noop");
conformance_drawn!(deadline_drawn, "deadline");
conformance_drawn!(mq_deadline_drawn, "mq-deadline");
conformance_drawn!(anticipatory_drawn, "anticipatory");
conformance_drawn!(kyber_drawn, "kyber");
conformance_drawn!(cfq_drawn, "cfq");
conformance_drawn!(bfq_drawn, "bfq");
conformance_drawn!(bfq_v7r2_drawn, "bfq-v7r2");

#[test]
fn drawn_configurations_depend_on_the_seed_only() {
    let a = Config::from_seed(7, "bfq");
    let b = Config::from_seed(7, "bfq");
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    let c = Config::from_seed(8, "bfq");
    assert_ne!(format!("{a:?}"), format!("{c:?}"));
    // Over a few seeds, the draw covers both device kinds, several depths and some tunables.
    let cfgs: Vec<Config> = (0..32).map(|s| Config::from_seed(s, "cfq")).collect();
    assert!(cfgs.iter().any(|c| c.device.rotational) && cfgs.iter().any(|c| !c.device.rotational));
    assert!(
        cfgs.iter()
            .map(|c| c.device.queue_depth)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 4
    );
    assert!(cfgs.iter().any(|c| !c.tunables.is_empty()));
    assert!(cfgs
        .iter()
        .all(|c| bfq_sched::registry::build("cfq", &c.device, &c.tunables).is_ok()));
}

/// noop, except that its invariant check reports a corrupted counter from the `fail_at`-th check on: stands for a
/// policy whose bookkeeping breaks in the middle of a run.
struct BrokenCounter {
    checks: AtomicU64,
    fail_at: u64,
}

impl Hooks for BrokenCounter {
    fn name(&self) -> &'static str {
        "broken-noop"
    }
    fn check_invariants(&self) -> Result<(), InvariantViolation> {
        let n = self.checks.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= self.fail_at {
            return Err(InvariantViolation::new(
                "broken-noop",
                format!("counter corrupted at check {n}"),
            ));
        }
        Ok(())
    }
}

#[test]
fn a_broken_invariant_fails_the_run_with_its_seed_and_step() {
    let cfg = Config::from_seed(4242, "noop");
    let inner = bfq_sched::registry::build("noop", &cfg.device, &cfg.tunables).unwrap();
    let policy = Box::new(Wrapped::new(
        inner,
        BrokenCounter {
            checks: AtomicU64::new(0),
            fail_at: 500,
        },
    ));
    let err = run_policy(policy, &cfg).expect_err("the broken counter must fail the run");
    assert!(err.contains("seed 4242"), "{err}");
    // Check 1 follows construction (step 0), so check 500 follows step 499.
    assert!(err.contains("step 499:"), "{err}");
    assert!(err.contains("counter corrupted at check 500"), "{err}");
}

/// noop, except that `queued()` counts one request too many once 100 calls were made: the checker's own count of
/// undispatched requests must catch it.
struct DoubleCounting {
    calls: u64,
}

impl Hooks for DoubleCounting {
    fn name(&self) -> &'static str {
        "double-counting"
    }
    fn before_call(&mut self, _: &'static str) {
        self.calls += 1;
    }
    fn queued(&self, inner: usize) -> usize {
        inner + usize::from(self.calls >= 100)
    }
}

#[test]
fn a_double_count_fails_the_run_with_its_seed() {
    let cfg = Config::new(99, DeviceInfo::ssd());
    let inner = bfq_sched::registry::build("noop", &cfg.device, &cfg.tunables).unwrap();
    let err = run_policy(Box::new(Wrapped::new(inner, DoubleCounting { calls: 0 })), &cfg).expect_err("must fail");
    assert!(err.contains("double-counting, seed 99, step 100:"), "{err}");
    assert!(err.contains("queued() ="), "{err}");
}
