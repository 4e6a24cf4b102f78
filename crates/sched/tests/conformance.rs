//! Every policy runs the randomized conformance sequence on a rotational and a non-rotational device, with several
//! seeds. A new policy joins with one line.

use bfq_sched::conformance::{run, Config};
use bfq_sched::DeviceInfo;

const SEEDS: [u64; 4] = [1, 2, 3, 0xDEAD_BEEF];

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

macro_rules! conformance {
    ($test:ident, $name:expr $(, $tunable:expr)*) => {
        #[test]
        fn $test() {
            check($name, &[$($tunable),*]);
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
