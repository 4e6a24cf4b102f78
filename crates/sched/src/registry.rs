//! Builds a policy by name with its tunables.

use crate::device::DeviceInfo;
use crate::scheduler::{BuildFn, Scheduler};
use crate::tunables::{ConfigError, TunableSpec, TunableValues};

/// A policy known to the registry.
#[derive(Clone, Copy)]
pub struct PolicyDesc {
    /// Registry name.
    pub name: &'static str,
    /// Other accepted names (e.g. `none` for noop).
    pub aliases: &'static [&'static str],
    /// One line on what it is for.
    pub summary: &'static str,
    /// Which kernel's code the policy follows (docs/SCHEDULERS.md has the rules).
    pub kernel: &'static str,
    /// Its tunables, named as in sysfs.
    pub tunables: &'static [TunableSpec],
    /// Constructor.
    pub build: BuildFn,
}

static POLICIES: &[PolicyDesc] = &[
    PolicyDesc {
        name: "bfq",
        aliases: &[],
        summary: "budget fair queueing: per-process sector-fair shares with B-WF2Q+, idling, low-latency raising",
        kernel: "newest mainline BFQ (block/bfq-iosched.c, Linux 6.9 and later)",
        tunables: &crate::bfq::TUNABLES,
        build: crate::bfq::Bfq::build,
    },
    PolicyDesc {
        name: "bfq-v7r2",
        aliases: &[],
        summary: "BFQ v7r2 (Linux 3.13, 2014), the version the seeds measured: sticky idle windows, x20 raising",
        kernel: "BFQ v7r2, the out-of-tree release for Linux 3.13 (2014)",
        tunables: &crate::bfq::V7R2_TUNABLES,
        build: crate::bfq::Bfq::build_v7r2,
    },
    PolicyDesc {
        name: "noop",
        aliases: &["none"],
        summary: "one FIFO with merging; lowest CPU cost, no fairness, no latency control",
        kernel: "Linux 3.13 noop (legacy block layer; `none` on blk-mq)",
        tunables: &crate::noop::TUNABLES,
        build: crate::noop::Noop::build,
    },
    PolicyDesc {
        name: "deadline",
        aliases: &[],
        summary: "sector-ordered batches with read/write deadlines: bounded latency, no fairness",
        kernel: "Linux 3.13 deadline (legacy block layer)",
        tunables: &crate::deadline::TUNABLES,
        build: crate::deadline::Deadline::build,
    },
    PolicyDesc {
        name: "mq-deadline",
        aliases: &[],
        summary: "deadline for blk-mq with strict RT/BE/IDLE levels and priority aging",
        kernel: "newest mainline mq-deadline (blk-mq)",
        tunables: &crate::mq_deadline::TUNABLES,
        build: crate::mq_deadline::MqDeadline::build,
    },
    PolicyDesc {
        name: "anticipatory",
        aliases: &["as"],
        summary:
            "deadline with read/write batches that briefly waits after a sync read for the same process's next one",
        kernel: "Linux 2.6.32 anticipatory (its last release)",
        tunables: &crate::anticipatory::TUNABLES,
        build: crate::anticipatory::Anticipatory::build,
    },
    PolicyDesc {
        name: "kyber",
        aliases: &[],
        summary: "token-limited read/write domains whose depths adapt to meet read and write latency targets",
        kernel: "newest mainline kyber (blk-mq)",
        tunables: &crate::kyber::TUNABLES,
        build: crate::kyber::Kyber::build,
    },
    PolicyDesc {
        name: "cfq",
        aliases: &[],
        summary: "Completely Fair Queueing: per-process time slices by class and priority, idling for sync readers",
        kernel: "Linux 3.13 CFQ (legacy block layer)",
        tunables: &crate::cfq::TUNABLES,
        build: crate::cfq::Cfq::build,
    },
];

/// Every registered policy, in listing order.
pub fn policies() -> &'static [PolicyDesc] {
    POLICIES
}

/// The policy called `name` (or one of its aliases).
pub fn find(name: &str) -> Option<&'static PolicyDesc> {
    POLICIES.iter().find(|p| p.name == name || p.aliases.contains(&name))
}

/// Builds the policy `name` for `dev`, applying sysfs-style `key=value` tunables.
pub fn build<S: AsRef<str>>(name: &str, dev: &DeviceInfo, tunables: &[S]) -> Result<Box<dyn Scheduler>, ConfigError> {
    let desc = find(name).ok_or_else(|| ConfigError::UnknownScheduler {
        name: name.to_string(),
        available: POLICIES.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
    })?;
    let values = TunableValues::parse(desc.name, desc.tunables, dev, tunables)?;
    Ok((desc.build)(dev, &values))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The legacy (single-queue) elevators gave sync and async requests pools of their own, so a flood of async
    // writes never left a reader without a request; blk-mq policies share one pool of scheduler tags. Which
    // policy is which follows the kernel each one stands for.
    #[test]
    fn legacy_elevators_have_a_separate_sync_pool_and_blk_mq_ones_do_not() {
        for (name, legacy) in [
            ("noop", true),
            ("deadline", true),
            ("anticipatory", true),
            ("cfq", true),
            ("bfq-v7r2", true),
            ("bfq", false),
            ("mq-deadline", false),
            ("kyber", false),
        ] {
            let s = build::<&str>(name, &DeviceInfo::hdd(), &[]).unwrap();
            assert_eq!(s.separate_sync_pool(), legacy, "{name}");
        }
    }

    #[test]
    fn every_policy_builds_with_defaults_on_both_device_kinds() {
        for p in policies() {
            for dev in [DeviceInfo::hdd(), DeviceInfo::ssd()] {
                let s = build::<&str>(p.name, &dev, &[]).unwrap();
                assert_eq!(s.name(), p.name);
                assert_eq!(s.queued(), 0);
            }
        }
    }

    #[test]
    fn names_are_unique_and_tunables_sane() {
        let mut names: Vec<&str> = policies()
            .iter()
            .flat_map(|p| std::iter::once(p.name).chain(p.aliases.iter().copied()))
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate policy name or alias");
        for p in policies() {
            for t in p.tunables {
                for dev in [DeviceInfo::hdd(), DeviceInfo::ssd()] {
                    let d = t.default_for(&dev);
                    assert!(
                        t.min <= d && d <= t.max,
                        "{}.{} default {} outside {}..={}",
                        p.name,
                        t.name,
                        d,
                        t.min,
                        t.max
                    );
                }
            }
        }
    }

    #[test]
    fn unknown_scheduler_is_an_error_listing_choices() {
        let e = build::<&str>("nosuch", &DeviceInfo::hdd(), &[]).err().unwrap();
        assert!(e.to_string().contains("nosuch") && e.to_string().contains("noop"));
        assert!(find("none").is_some());
    }
}
