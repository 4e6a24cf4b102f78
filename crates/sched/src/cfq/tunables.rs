//! CFQ tunables, named and scaled as in `/sys/block/<dev>/queue/iosched/` (docs/SCHEDULERS.md, CFQ, Tunables), and
//! their values converted to nanoseconds and sectors for the policy.

use crate::device::DeviceInfo;
use crate::tunables::{DefaultValue, TunableSpec, TunableValues};
use crate::types::{Time, MS};

/// Default of `slice_idle` and `group_idle`, in ms, on every device (`HZ / 125` in 3.13's `cfq-iosched.c`): long
/// enough to catch the next request of a process that thinks briefly between reads, short against a seek plus
/// rotation (about 8-12 ms). Linux 3.13, the kernel seed 004 ran, keeps it on non-rotational devices too; only
/// from about 4.8 was `slice_idle` forced to 0 on them (`group_idle` never was).
pub const DEFAULT_IDLE_MS: i64 = 8;

/// Largest accepted `slice_idle` / `group_idle`, in ms. The kernel accepts any value; we bound it so an idle wait
/// always stays within the driver's one-second `WaitUntil` horizon.
pub const MAX_IDLE_MS: i64 = 1000;

/// CFQ's tunables, named as in sysfs, in sysfs units.
pub static TUNABLES: [TunableSpec; 13] = [
    TunableSpec::new(
        "quantum",
        8,
        1,
        1024,
        "requests",
        "dispatch depth a queue may reach while others are busy; half of it is the normal per-queue limit",
    ),
    TunableSpec::new(
        "fifo_expire_sync",
        125,
        0,
        100_000,
        "ms",
        "age after which a sync request is served ahead of the elevator order (checked once per slice)",
    ),
    TunableSpec::new(
        "fifo_expire_async",
        250,
        0,
        100_000,
        "ms",
        "age after which an async request is served ahead of the elevator order (checked once per slice)",
    ),
    TunableSpec::new(
        "back_seek_max",
        16384,
        0,
        1 << 30,
        "KiB",
        "longest backward seek the elevator accepts instead of wrapping around",
    ),
    TunableSpec::new(
        "back_seek_penalty",
        2,
        1,
        1000,
        "factor",
        "cost of a backward seek relative to a forward seek of the same distance",
    ),
    TunableSpec::new(
        "slice_sync",
        100,
        1,
        10_000,
        "ms",
        "base time slice of a sync queue (priority 4); scaled by priority",
    ),
    TunableSpec::new(
        "slice_async",
        40,
        1,
        10_000,
        "ms",
        "base time slice of an async queue (priority 4); scaled by priority",
    ),
    TunableSpec::new(
        "slice_async_rq",
        2,
        1,
        1000,
        "requests",
        "an async queue expires after 2*slice_async_rq*(8-prio) dispatches in one slice",
    ),
    TunableSpec {
        name: "slice_idle",
        default: DefaultValue::Fixed(DEFAULT_IDLE_MS),
        min: 0,
        max: MAX_IDLE_MS,
        unit: "ms",
        doc: "how long to wait for the next request of an emptied sync queue; 0 disables idling (and, with NCQ, \
              switches to IOPS mode)",
    },
    TunableSpec {
        name: "group_idle",
        default: DefaultValue::Fixed(DEFAULT_IDLE_MS),
        min: 0,
        max: MAX_IDLE_MS,
        unit: "ms",
        doc: "how long to wait for the next request of the last queue of a group, to keep the group backlogged",
    },
    TunableSpec::flag(
        "low_latency",
        true,
        "scale slices so that every queue is served within target_latency; ramp async depth after sync delays",
    ),
    TunableSpec::new(
        "target_latency",
        300,
        1,
        100_000,
        "ms",
        "with low_latency: the time in which all busy queues of a class should get a slice",
    ),
    TunableSpec::flag(
        "async_starvation_fix",
        false,
        "not a 3.13 tunable: the 2016 fix (v4.9) that lets an async queue whose FIFO expired dispatch with sync I/O \
         in flight and not be preempted by sync arrivals; off as in 3.13",
    ),
];

/// Tunable values in the units the policy computes with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// `quantum`, in requests.
    pub quantum: u32,
    /// `fifo_expire_async`, `fifo_expire_sync` (index 0 async, 1 sync), in ns.
    pub fifo_expire: [Time; 2],
    /// `back_seek_max` converted to sectors.
    pub back_seek_max_sectors: u64,
    /// `back_seek_penalty`, a factor.
    pub back_seek_penalty: u64,
    /// `slice_async`, `slice_sync` (index 0 async, 1 sync), in ns.
    pub slice: [Time; 2],
    /// `slice_async_rq`, in requests.
    pub slice_async_rq: u32,
    /// `slice_idle`, in ns.
    pub slice_idle: Time,
    /// `group_idle`, in ns.
    pub group_idle: Time,
    /// `low_latency`.
    pub low_latency: bool,
    /// `target_latency`, in ns.
    pub target_latency: Time,
    /// The 2016 async-starvation fix (not in 3.13): an async queue with an expired FIFO must dispatch.
    pub async_starvation_fix: bool,
}

fn ms(v: i64) -> Time {
    u64::try_from(v).unwrap_or(0).saturating_mul(MS)
}

fn count(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX).max(1)
}

impl Params {
    /// Reads the parsed tunables.
    pub fn from_values(t: &TunableValues) -> Self {
        Params {
            quantum: count(t.get("quantum")),
            fifo_expire: [ms(t.get("fifo_expire_async")), ms(t.get("fifo_expire_sync"))],
            // 1 KiB is 2 sectors.
            back_seek_max_sectors: u64::try_from(t.get("back_seek_max")).unwrap_or(0) * 2,
            back_seek_penalty: u64::try_from(t.get("back_seek_penalty")).unwrap_or(1).max(1),
            slice: [ms(t.get("slice_async")).max(1), ms(t.get("slice_sync")).max(1)],
            slice_async_rq: count(t.get("slice_async_rq")),
            slice_idle: ms(t.get("slice_idle")),
            group_idle: ms(t.get("group_idle")),
            low_latency: t.flag("low_latency"),
            target_latency: ms(t.get("target_latency")).max(1),
            async_starvation_fix: t.flag("async_starvation_fix"),
        }
    }

    /// The defaults on `dev`.
    pub fn defaults(dev: &DeviceInfo) -> Self {
        let t = TunableValues::parse::<&str>("cfq", &TUNABLES, dev, &[]);
        match t {
            Ok(t) => Params::from_values(&t),
            // Unreachable: the defaults are in range (checked by the registry tests).
            Err(_) => Params {
                quantum: 8,
                fifo_expire: [250 * MS, 125 * MS],
                back_seek_max_sectors: 32768,
                back_seek_penalty: 2,
                slice: [40 * MS, 100 * MS],
                slice_async_rq: 2,
                slice_idle: ms(DEFAULT_IDLE_MS),
                group_idle: ms(DEFAULT_IDLE_MS),
                low_latency: true,
                target_latency: 300 * MS,
                async_starvation_fix: false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The documented defaults of 3.13, where slice_idle and group_idle are 8 ms on non-rotational devices too.
    #[test]
    fn defaults_match_the_kernel() {
        let p = Params::defaults(&DeviceInfo::hdd());
        assert_eq!(p.quantum, 8);
        assert_eq!(p.fifo_expire, [250 * MS, 125 * MS]);
        assert_eq!(p.back_seek_max_sectors, 32768);
        assert_eq!(p.back_seek_penalty, 2);
        assert_eq!(p.slice, [40 * MS, 100 * MS]);
        assert_eq!(p.slice_async_rq, 2);
        assert_eq!((p.slice_idle, p.group_idle), (8 * MS, 8 * MS));
        assert!(p.low_latency);
        assert_eq!(p.target_latency, 300 * MS);
        let s = Params::defaults(&DeviceInfo::ssd());
        assert_eq!(
            (s.slice_idle, s.group_idle),
            (8 * MS, 8 * MS),
            "3.13 keeps idling on flash"
        );
    }

    // back_seek_max goes up to 2^30 KiB (the kernel takes any unsigned value; ours is bounded so that the sector
    // count, twice the KiB, stays far inside u64): 2^30 is accepted and becomes 2^31 sectors, one more is refused
    // with a message. The other bounds are the ones the table states.
    #[test]
    fn the_largest_back_seek_max_is_accepted_and_one_more_refused() {
        let parse =
            |v: i64| TunableValues::parse("cfq", &TUNABLES, &DeviceInfo::hdd(), &[format!("back_seek_max={v}")]);
        let max = 1_073_741_824;
        let p = Params::from_values(&parse(max).expect("2^30 KiB is accepted"));
        assert_eq!(p.back_seek_max_sectors, 1 << 31);
        assert!(parse(max + 1).is_err());
    }
}
