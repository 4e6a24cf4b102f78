//! BFQ's sysfs tunables (the kernel's `bfq_attrs`; docs/SCHEDULERS.md, BFQ), named and scaled as in sysfs, and their
//! conversion to the nanosecond/sector units the policy works in.

use crate::tunables::{TunableSpec, TunableValues};
use crate::types::{Time, MS, SEC, US};

// Tunables both eras declare alike (same sysfs name, default, range and unit).
const SLICE_IDLE: TunableSpec = TunableSpec::new("slice_idle", 8, 0, 1000, "ms", "idle wait for an emptied sync queue");
const MAX_BUDGET: TunableSpec = TunableSpec::new(
    "max_budget",
    0,
    0,
    1 << 24,
    "sectors",
    "largest budget; 0 = autotuned to peak rate x timeout_sync",
);
const BACK_SEEK_MAX: TunableSpec = TunableSpec::new(
    "back_seek_max",
    16384,
    0,
    1 << 30,
    "KiB",
    "longest backward seek preferred to a forward one",
);
const BACK_SEEK_PENALTY: TunableSpec = TunableSpec::new(
    "back_seek_penalty",
    2,
    1,
    1000,
    "x",
    "cost multiplier of a backward seek distance",
);
const LOW_LATENCY: TunableSpec = TunableSpec::flag(
    "low_latency",
    true,
    "weight raising of interactive and soft real-time queues",
);
const WR_RT_MAX_TIME: TunableSpec =
    TunableSpec::new("wr_rt_max_time", 300, 1, 60_000, "ms", "soft real-time raising length");
const WR_MIN_IDLE_TIME: TunableSpec = TunableSpec::new(
    "wr_min_idle_time",
    2000,
    0,
    600_000,
    "ms",
    "idleness that makes a queue interactive",
);
const WR_MIN_INTER_ARR_ASYNC: TunableSpec = TunableSpec::new(
    "wr_min_inter_arr_async",
    500,
    0,
    600_000,
    "ms",
    "gap between async arrivals that raises an async queue",
);
const WR_MAX_SOFTRT_RATE: TunableSpec = TunableSpec::new(
    "wr_max_softrt_rate",
    7000,
    0,
    1 << 24,
    "sectors/s",
    "bandwidth cap of a soft real-time queue; 0 disables soft real-time raising",
);

/// Every BFQ tunable with its default. The first ten are those mainline exposes; the `wr_*` ones were sysfs
/// tunables of the out-of-tree BFQ releases and are kept for experiments.
pub static TUNABLES: [TunableSpec; 16] = [
    SLICE_IDLE,
    TunableSpec::new(
        "slice_idle_us",
        8000,
        0,
        1_000_000,
        "us",
        "slice_idle in microseconds (wins when changed from its default)",
    ),
    TunableSpec::new("timeout_sync", 125, 1, 10_000, "ms", "budget timeout of a service slot"),
    MAX_BUDGET,
    TunableSpec::new(
        "fifo_expire_sync",
        125,
        0,
        60_000,
        "ms",
        "per-queue FIFO deadline of sync requests",
    ),
    TunableSpec::new(
        "fifo_expire_async",
        250,
        0,
        60_000,
        "ms",
        "per-queue FIFO deadline of async requests",
    ),
    BACK_SEEK_MAX,
    BACK_SEEK_PENALTY,
    LOW_LATENCY,
    TunableSpec::flag(
        "strict_guarantees",
        false,
        "always idle, and keep at most one request in the device",
    ),
    TunableSpec::new("wr_coeff", 30, 1, 1000, "x", "interactive weight-raising multiplier"),
    TunableSpec::new(
        "wr_max_time",
        0,
        0,
        600_000,
        "ms",
        "interactive raising length; 0 = from the peak rate (3-25 s)",
    ),
    WR_RT_MAX_TIME,
    WR_MIN_IDLE_TIME,
    WR_MIN_INTER_ARR_ASYNC,
    WR_MAX_SOFTRT_RATE,
];

/// The tunables of BFQ v7r2 (its sysfs `bfq_attrs`, 2014) with v7r2's defaults: no `slice_idle_us` or
/// `strict_guarantees` (later additions), and `max_budget_async_rq` and `timeout_async`, which later kernels
/// dropped. The read-only `weights` file is not a tunable.
pub static V7R2_TUNABLES: [TunableSpec; 16] = [
    SLICE_IDLE,
    TunableSpec::new("timeout_sync", 125, 1, 10_000, "ms", "budget timeout of a sync slot"),
    TunableSpec::new("timeout_async", 40, 0, 10_000, "ms", "budget timeout of an async slot"),
    MAX_BUDGET,
    TunableSpec::new(
        "max_budget_async_rq",
        4,
        1,
        1 << 20,
        "requests",
        "requests an async slot may dispatch while other queues are busy",
    ),
    TunableSpec::new(
        "fifo_expire_sync",
        125,
        1,
        60_000,
        "ms",
        "per-queue FIFO deadline of sync requests",
    ),
    TunableSpec::new(
        "fifo_expire_async",
        250,
        1,
        60_000,
        "ms",
        "per-queue FIFO deadline of async requests",
    ),
    BACK_SEEK_MAX,
    BACK_SEEK_PENALTY,
    LOW_LATENCY,
    TunableSpec::new(
        "wr_coeff",
        20,
        1,
        1000,
        "x",
        "weight-raising multiplier (interactive and soft real-time)",
    ),
    TunableSpec::new(
        "wr_max_time",
        0,
        0,
        600_000,
        "ms",
        "interactive raising length; 0 = R x T / peak rate",
    ),
    WR_RT_MAX_TIME,
    WR_MIN_IDLE_TIME,
    WR_MIN_INTER_ARR_ASYNC,
    WR_MAX_SOFTRT_RATE,
];

/// Default `slice_idle_us` (µs); a different value means the user set it.
const SLICE_IDLE_US_DEFAULT: i64 = 8000;

/// `strict_guarantees` raises `slice_idle` to at least this (ns): 8 ms.
pub const STRICT_MIN_SLICE_IDLE: Time = 8 * MS;
/// Default `slice_idle` (ns): 8 ms, `HZ / 125` jiffies in v7r2 ([`crate::tick::hz_fraction`]).
pub const DEFAULT_SLICE_IDLE: Time = 8 * MS;

/// Interactive multiplier times this gives the soft real-time multiplier (30 x 100 = 3000).
pub const SOFTRT_WR_FACTOR: u32 = 100;

/// The tunables converted to the policy's units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Idle wait for an emptied sync queue (ns).
    pub slice_idle: Time,
    /// Budget timeout (ns).
    pub timeout_sync: Time,
    /// User maximum budget (sectors); 0 means autotuned.
    pub max_budget: u64,
    /// FIFO deadlines (ns), indexed by `sync as usize`.
    pub fifo_expire: [Time; 2],
    /// Longest backward seek that still counts as "near" (sectors).
    pub back_seek_max: u64,
    /// Multiplier of backward distances.
    pub back_seek_penalty: u64,
    /// Weight raising and burst handling on.
    pub low_latency: bool,
    /// Force idling and one request in flight.
    pub strict_guarantees: bool,
    /// Interactive raising multiplier.
    pub wr_coeff: u32,
    /// Interactive raising length override (ns); 0 = computed from the peak rate.
    pub wr_max_time: Time,
    /// Soft real-time raising length (ns).
    pub wr_rt_max_time: Time,
    /// Idleness that makes a queue interactive again (ns).
    pub wr_min_idle_time: Time,
    /// Gap between async arrivals that raises an async queue (ns).
    pub wr_min_inter_arr_async: Time,
    /// Soft real-time bandwidth cap (sectors/s); 0 disables soft real-time raising.
    pub wr_max_softrt_rate: u64,
    /// Budget timeout of an async slot (ns); v7r2 only (the newest kernel uses `timeout_sync` for both).
    pub timeout_async: Time,
    /// Requests an async slot may dispatch while other queues are busy (requests); v7r2 only.
    pub max_budget_async_rq: u32,
}

fn ms(v: i64) -> Time {
    (v.max(0) as Time).saturating_mul(MS)
}

impl Params {
    /// Converts parsed sysfs values.
    pub fn from_values(t: &TunableValues) -> Self {
        let us = t.get_or("slice_idle_us", SLICE_IDLE_US_DEFAULT);
        let mut slice_idle = if us != SLICE_IDLE_US_DEFAULT {
            (us.max(0) as Time) * US
        } else {
            ms(t.get("slice_idle"))
        };
        let strict = t.get_or("strict_guarantees", 0) != 0;
        if strict {
            slice_idle = slice_idle.max(STRICT_MIN_SLICE_IDLE);
        }
        Params {
            slice_idle: slice_idle.min(SEC),
            timeout_sync: ms(t.get("timeout_sync")).max(MS),
            max_budget: t.get("max_budget").max(0) as u64,
            fifo_expire: [ms(t.get("fifo_expire_async")), ms(t.get("fifo_expire_sync"))],
            back_seek_max: (t.get("back_seek_max").max(0) as u64) * 2,
            back_seek_penalty: t.get("back_seek_penalty").max(1) as u64,
            low_latency: t.flag("low_latency"),
            strict_guarantees: strict,
            wr_coeff: t.get("wr_coeff").clamp(1, 1000) as u32,
            wr_max_time: ms(t.get("wr_max_time")),
            wr_rt_max_time: ms(t.get("wr_rt_max_time")),
            wr_min_idle_time: ms(t.get("wr_min_idle_time")),
            wr_min_inter_arr_async: ms(t.get("wr_min_inter_arr_async")),
            wr_max_softrt_rate: t.get("wr_max_softrt_rate").max(0) as u64,
            timeout_async: ms(t.get_or("timeout_async", t.get("timeout_sync"))).max(MS),
            max_budget_async_rq: t.get_or("max_budget_async_rq", 4).clamp(1, 1 << 20) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceInfo;

    fn params(pairs: &[&str]) -> Params {
        let v = TunableValues::parse("bfq", &TUNABLES, &DeviceInfo::hdd(), pairs).unwrap();
        Params::from_values(&v)
    }

    // The defaults are the kernel's: 8 ms idling, 125 ms timeout, auto budget, 125/250 ms FIFO, 16 MiB back seek
    // (32768 sectors) with penalty 2, low_latency on, strict_guarantees off.
    #[test]
    fn defaults_match_the_kernel() {
        let p = params(&[]);
        assert_eq!(p.slice_idle, 8 * MS);
        assert_eq!(p.timeout_sync, 125 * MS);
        assert_eq!(p.max_budget, 0);
        assert_eq!(p.fifo_expire, [250 * MS, 125 * MS]);
        assert_eq!((p.back_seek_max, p.back_seek_penalty), (32768, 2));
        assert!(p.low_latency && !p.strict_guarantees);
        assert_eq!(
            (p.wr_coeff, p.wr_rt_max_time, p.wr_max_softrt_rate),
            (30, 300 * MS, 7000)
        );
    }

    // v7r2's defaults: 20x raising, a 40 ms async timeout and 4 async requests per slot; the shared ones equal.
    #[test]
    fn v7r2_defaults() {
        let v = TunableValues::parse("bfq-v7r2", &V7R2_TUNABLES, &DeviceInfo::hdd(), &[] as &[&str]).unwrap();
        let p = Params::from_values(&v);
        assert_eq!((p.wr_coeff, p.timeout_async, p.max_budget_async_rq), (20, 40 * MS, 4));
        assert_eq!(
            (p.slice_idle, p.timeout_sync, p.fifo_expire),
            (8 * MS, 125 * MS, [250 * MS, 125 * MS])
        );
        assert!(!p.strict_guarantees && p.low_latency);
    }

    // slice_idle_us wins when set; strict_guarantees raises slice_idle to at least 8 ms.
    #[test]
    fn slice_idle_units_and_strict() {
        assert_eq!(params(&["slice_idle_us=500"]).slice_idle, 500 * US);
        assert_eq!(params(&["slice_idle=0"]).slice_idle, 0);
        assert_eq!(params(&["slice_idle=0", "strict_guarantees=1"]).slice_idle, 8 * MS);
    }

    // The ranges are the sysfs limits, written out (not read from the specs, which a wrong constant would move
    // with): each maximum is accepted and one more is refused with an out-of-range error.
    #[test]
    fn the_largest_values_are_accepted_and_one_more_refused() {
        let cases: [(&str, &[TunableSpec], &str, i64); 5] = [
            ("bfq", &TUNABLES, "max_budget", 16_777_216),
            ("bfq", &TUNABLES, "back_seek_max", 1_073_741_824),
            ("bfq", &TUNABLES, "wr_max_softrt_rate", 16_777_216),
            ("bfq-v7r2", &V7R2_TUNABLES, "max_budget_async_rq", 1_048_576),
            ("bfq-v7r2", &V7R2_TUNABLES, "max_budget", 16_777_216),
        ];
        for (sched, specs, name, max) in cases {
            let parse = |v: i64| TunableValues::parse(sched, specs, &DeviceInfo::hdd(), &[format!("{name}={v}")]);
            assert!(parse(max).is_ok(), "{sched} {name}={max}");
            assert!(parse(max + 1).is_err(), "{sched} {name}={}", max + 1);
        }
        let v7 = TunableValues::parse(
            "bfq-v7r2",
            &V7R2_TUNABLES,
            &DeviceInfo::hdd(),
            &["max_budget_async_rq=1048576"],
        )
        .unwrap();
        assert_eq!(Params::from_values(&v7).max_budget_async_rq, 1 << 20);
    }

    // v7r2's default slice_idle is HZ / 125 jiffies (integer division): at HZ 300, 2 jiffies of 3.33 ms, 6.67 ms,
    // not 8 ms rounded up to 3 jiffies; a value the user set is rounded up to whole jiffies instead.
    #[test]
    fn v7r2_default_slice_idle_is_hz_over_125_jiffies() {
        use crate::scheduler::Scheduler;
        let jiffy = SEC / 300;
        for (pairs, want) in [(&[] as &[&str], 2 * jiffy), (&["slice_idle=7"], 3 * jiffy)] {
            let v = TunableValues::parse("bfq-v7r2", &V7R2_TUNABLES, &DeviceInfo::hdd(), pairs).unwrap();
            let mut b =
                super::super::Bfq::with_era(&DeviceInfo::hdd(), Params::from_values(&v), super::super::Era::V7r2);
            b.set_timer_hz(300);
            assert_eq!(b.p.slice_idle, want, "{pairs:?}");
        }
    }
}
