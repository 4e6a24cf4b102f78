//! Device idling (`bfq_better_to_idle`, `idling_needed_for_service_guarantees`, `bfq_update_io_thinktime`,
//! `bfq_update_hw_tag`; docs/SCHEDULERS.md, BFQ): think time, seekiness, NCQ detection, the decision to idle, and the
//! idle timer's length.

use crate::types::{Time, MS};

/// Seek history bits set above this count make a queue SEEKY (of the last 32 requests).
pub const SEEKY_BITS: u32 = 19;

/// Idle wait (ns) for a seeky, non-raised queue in a symmetric scenario: `BFQ_MIN_TT`, 2 ms, enough to catch a
/// process that issues its next request right after a completion, not enough to waste a seek's worth of time.
pub const MIN_TT: Time = 2 * MS;

/// Minimum idle wait (ns) for a weight-raised queue: 20 ms, so an interactive application that thinks a little
/// between its reads does not lose the device.
pub const WR_MIN_IDLE: Time = 20 * MS;

/// Think-time samples are valid once the filtered count exceeds this (after 3 requests).
pub const TTIME_VALID: u64 = 80;

/// Requests in the device plus queued above which an NCQ sample is taken, and the in-driver maximum above which
/// the device is taken to queue (`BFQ_HW_QUEUE_THRESHOLD`).
pub const HW_QUEUE_THRESHOLD: u32 = 3;

/// v7r2's `BFQ_HW_QUEUE_THRESHOLD`: 4 requests.
pub const V7_HW_QUEUE_THRESHOLD: u32 = 4;

/// NCQ samples counted before a verdict (`BFQ_HW_QUEUE_SAMPLES`): the verdict comes with the next one.
pub const HW_QUEUE_SAMPLES: u32 = 32;

/// While idling, an arriving request smaller than this (sectors) keeps the queue waiting for more, when idling
/// boosts throughput: better one large request than a tiny one now.
pub const SMALL_REQ_SECTORS: u32 = 32;

/// Per-queue think time: filtered mean of the gap between a completion and the next arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThinkTime {
    /// Filtered sample count (fixed point, 256 = one sample).
    pub samples: u64,
    /// Filtered sum (ns, scaled like `samples`).
    pub total: u64,
    /// Mean think time (ns).
    pub mean: u64,
}

impl ThinkTime {
    /// Adds a sample: the gap (ns) since the queue's last completion, capped at twice `slice_idle`.
    pub fn update(&mut self, elapsed: Time, slice_idle: Time) {
        let e = elapsed.min(2 * slice_idle);
        self.samples = (7 * self.samples + 256) / 8;
        self.total = (7 * self.total + 256 * e) / 8;
        self.mean = (self.total + 128) / self.samples.max(1);
    }
    /// True once enough samples were seen.
    pub fn valid(&self) -> bool {
        self.samples > TTIME_VALID
    }
    /// `has_short_ttime`: not exited, and not (valid and mean > slice_idle).
    pub fn short(&self, exited: bool, slice_idle: Time) -> bool {
        !(exited || (self.valid() && self.mean > slice_idle))
    }
}

/// Shifts one request's seekiness into a 32-bit history.
pub fn push_seek(history: u32, seeky: bool) -> u32 {
    (history << 1) | u32::from(seeky)
}

/// SEEKY: more than 19 of the last 32 requests were seeky.
pub fn is_seeky(history: u32) -> bool {
    history.count_ones() > SEEKY_BITS
}

/// TOTALLY_SEEKY: all of the last 32 requests were seeky.
pub fn totally_seeky(history: u32) -> bool {
    history == u32::MAX
}

/// NCQ (command queueing) detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HwTag {
    /// Verdict: `None` until enough samples.
    pub hw_tag: Option<bool>,
    max_in_driver: u32,
    samples: u32,
}

impl HwTag {
    /// Takes a sample at a completion. `in_driver` and `queued` are device-wide; `in_service_small` is true when
    /// the in-service queue has a short think time and fewer than 3 requests, so the device could not have been
    /// filled anyway and the sample proves nothing. A sample needs more than [`HW_QUEUE_THRESHOLD`] requests in
    /// the driver or queued; the verdict comes with the sample after [`HW_QUEUE_SAMPLES`] counted ones.
    pub fn sample(&mut self, in_driver: u32, queued: u32, in_service_small: bool) {
        self.max_in_driver = self.max_in_driver.max(in_driver);
        if self.hw_tag == Some(true) {
            return;
        }
        if in_driver + queued <= HW_QUEUE_THRESHOLD {
            return;
        }
        if in_service_small && in_driver < HW_QUEUE_THRESHOLD {
            return;
        }
        // The kernel counts with a post-increment (`hw_tag_samples++ < BFQ_HW_QUEUE_SAMPLES`): 32 samples are
        // counted, and the 33rd gives the verdict.
        self.samples += 1;
        if self.samples <= HW_QUEUE_SAMPLES {
            return;
        }
        self.hw_tag = Some(self.max_in_driver > HW_QUEUE_THRESHOLD);
        self.max_in_driver = 0;
        self.samples = 0;
    }
    /// Takes a sample at a completion by v7r2's rules (`bfq_update_hw_tag` of 2014): a sample needs at least
    /// [`V7_HW_QUEUE_THRESHOLD`] requests in the driver or queued, the verdict comes after 32 samples beyond the
    /// first, and the device queues if it ever held more than that threshold in the driver.
    pub fn sample_v7(&mut self, in_driver: u32, queued: u32) {
        self.max_in_driver = self.max_in_driver.max(in_driver);
        if self.hw_tag == Some(true) || in_driver + queued < V7_HW_QUEUE_THRESHOLD {
            return;
        }
        self.samples += 1;
        if self.samples <= HW_QUEUE_SAMPLES {
            return;
        }
        self.hw_tag = Some(self.max_in_driver > V7_HW_QUEUE_THRESHOLD);
        self.max_in_driver = 0;
        self.samples = 0;
    }
    /// `hw_tag` as the idling rules read it. Before a verdict the kernel's value is −1, which its tests read as
    /// true: unknown counts as queueing (a device never loaded with more than 3 requests is never sampled, so a
    /// few sync flows on an SSD must not be idled for one at a time).
    pub fn queueing(&self) -> bool {
        self.hw_tag != Some(false)
    }
    /// `nonrot_with_queueing`: non-rotational with queueing, or (before a verdict) just non-rotational.
    pub fn nonrot_with_queueing(&self, rotational: bool) -> bool {
        !rotational && self.hw_tag != Some(false)
    }
}

/// Facts `better_to_idle` needs about the queue and the device.
#[derive(Debug, Clone, Copy)]
pub struct IdleFacts {
    /// Some process still uses the queue.
    pub has_refs: bool,
    /// `strict_guarantees` is set.
    pub strict: bool,
    /// `slice_idle` is 0.
    pub slice_idle_zero: bool,
    /// The queue is sync.
    pub sync: bool,
    /// The queue is of the IDLE class.
    pub idle_class: bool,
    /// The device is rotational.
    pub rotational: bool,
    /// NCQ detected.
    pub hw_tag: bool,
    /// The queue is SEEKY.
    pub seeky: bool,
    /// The queue is I/O bound.
    pub io_bound: bool,
    /// The queue has a short think time.
    pub short_ttime: bool,
    /// Weight-raised busy queues.
    pub wr_busy: u32,
    /// Busy queues.
    pub busy: u32,
    /// The queue is weight-raised.
    pub raised: bool,
    /// Requests in the device.
    pub in_driver: u32,
    /// The queue's requests in the device.
    pub dispatched: u32,
    /// `asymmetric_scenario(q)`.
    pub asymmetric: bool,
}

/// Whether idling boosts throughput for this queue (`idling_boosts_thr`).
pub fn boosts_throughput(f: &IdleFacts) -> bool {
    (f.rotational && !f.hw_tag) || ((f.rotational || !f.hw_tag) && !f.seeky && f.io_bound && f.short_ttime)
}

/// Whether idling is needed to preserve service guarantees (raised queue, asymmetric weights/classes/groups, or
/// the queue is the only busy one: newest kernels idle then, so that its next request finds the device free).
pub fn needed_for_guarantees(f: &IdleFacts) -> bool {
    (f.raised && (f.wr_busy < f.busy || f.in_driver >= f.dispatched + 4)) || f.asymmetric || f.busy == 1
}

/// `better_to_idle`: the device should wait for this empty in-service queue's next request.
pub fn better_to_idle(f: &IdleFacts) -> bool {
    if !f.has_refs {
        return false;
    }
    if f.strict {
        return true;
    }
    if f.slice_idle_zero || !f.sync || f.idle_class {
        return false;
    }
    let no_issue = boosts_throughput(f) && f.wr_busy == 0;
    no_issue || needed_for_guarantees(f)
}

/// Length (ns) of the idle timer: `slice_idle`, at most 2 ms for a seeky non-raised queue in a symmetric
/// scenario, at least 20 ms for a raised one.
pub fn idle_slice(slice_idle: Time, seeky: bool, raised: bool, asymmetric: bool) -> Time {
    let mut sl = slice_idle;
    if seeky && !raised && !asymmetric {
        sl = sl.min(MIN_TT);
    } else if raised {
        sl = sl.max(WR_MIN_IDLE);
    }
    sl
}

/// v7r2's idle-timer length (ns): 3 x `slice_idle` for a raised queue; at most 2 ms for a non-raised queue that
/// is seeky and received more than max_budget / 8 in its slot (`seeky_long_slot`); else `slice_idle`.
pub fn idle_slice_v7(slice_idle: Time, seeky_long_slot: bool, raised: bool) -> Time {
    if seeky_long_slot && !raised {
        slice_idle.min(MIN_TT)
    } else if raised {
        slice_idle.saturating_mul(3)
    } else {
        slice_idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> IdleFacts {
        IdleFacts {
            has_refs: true,
            strict: false,
            slice_idle_zero: false,
            sync: true,
            idle_class: false,
            rotational: true,
            hw_tag: false,
            seeky: false,
            io_bound: true,
            short_ttime: true,
            wr_busy: 0,
            busy: 2,
            raised: false,
            in_driver: 0,
            dispatched: 0,
            asymmetric: false,
        }
    }

    // Think time: three requests make the samples valid; a process that waits 10 ms between its requests has a
    // mean above slice_idle (8 ms) and loses short_ttime; one that comes back in 1 ms keeps it.
    #[test]
    fn think_time_filter() {
        let mut t = ThinkTime::default();
        assert!(t.short(false, 8 * MS));
        for _ in 0..2 {
            t.update(10 * MS, 8 * MS);
        }
        assert!(!t.valid() && t.short(false, 8 * MS), "two samples are not enough");
        t.update(10 * MS, 8 * MS);
        assert!(t.valid());
        assert!(!t.short(false, 8 * MS), "mean {}", t.mean);
        let mut u = ThinkTime::default();
        for _ in 0..5 {
            u.update(MS, 8 * MS);
        }
        assert!(u.short(false, 8 * MS));
        assert!(!u.short(true, 8 * MS), "an exited process never has a short think time");
        // elapsed is capped at 2 x slice_idle
        let mut v = ThinkTime::default();
        for _ in 0..20 {
            v.update(10 * 1000 * MS, 8 * MS);
        }
        assert!(v.mean <= 16 * MS + 16 * MS / 50, "{}", v.mean);
    }

    // Seekiness: 20 seeky of 32 makes SEEKY; 19 does not; 32 of 32 is TOTALLY_SEEKY.
    #[test]
    fn seek_history() {
        let mut h = 1u32;
        for i in 0..32 {
            h = push_seek(h, i < 19);
        }
        assert!(!is_seeky(h));
        let mut h = 0;
        for i in 0..32 {
            h = push_seek(h, i < 20);
        }
        assert!(is_seeky(h) && !totally_seeky(h));
        assert!(totally_seeky(u32::MAX));
    }

    // NCQ (the kernel's `bfq_update_hw_tag`): a sample needs more than 3 requests in the driver or queued (3 is
    // not enough); 32 samples are counted and the 33rd gives the verdict (`hw_tag_samples++ < 32`); the device
    // queues if it ever held more than 3 requests in the driver (4 is queueing, 3 is not).
    #[test]
    fn hw_tag_detection() {
        let mut h = HwTag::default();
        for _ in 0..100 {
            h.sample(2, 1, false);
        }
        assert_eq!(h.hw_tag, None, "too little load: no samples");
        for _ in 0..32 {
            h.sample(4, 4, false);
        }
        assert_eq!(h.hw_tag, None, "32 samples are counted before a verdict");
        h.sample(4, 4, false);
        assert_eq!(h.hw_tag, Some(true), "the 33rd gives it");
        let mut n = HwTag::default();
        for _ in 0..33 {
            n.sample(3, 10, false);
        }
        assert_eq!(n.hw_tag, Some(false), "never more than 3 in the driver");
        assert!(!n.nonrot_with_queueing(false) && HwTag::default().nonrot_with_queueing(false));
        assert!(!n.queueing() && HwTag::default().queueing());
        // A "no" is judged again from scratch (33 more samples), a "yes" is final.
        n.sample(8, 0, false);
        assert_eq!(n.hw_tag, Some(false), "one sample after a verdict decides nothing");
        for _ in 0..32 {
            n.sample(8, 0, false);
        }
        assert_eq!(n.hw_tag, Some(true));
        for _ in 0..100 {
            n.sample(1, 10, false);
        }
        assert_eq!(n.hw_tag, Some(true));
    }

    // v7r2's NCQ detection (`bfq_update_hw_tag` of 2014): a sample needs at least 4 requests in the driver or
    // queued (3 is not enough), 32 are counted and the 33rd gives the verdict, and the device queues if it ever
    // held more than 4 in the driver (5 is queueing, 4 is not).
    #[test]
    fn v7r2_hw_tag_detection() {
        let mut h = HwTag::default();
        for _ in 0..100 {
            h.sample_v7(2, 1);
        }
        assert_eq!(h.hw_tag, None, "3 requests: no sample");
        for _ in 0..32 {
            h.sample_v7(4, 0);
        }
        assert_eq!(h.hw_tag, None, "32 samples are counted before a verdict");
        h.sample_v7(4, 0);
        assert_eq!(
            h.hw_tag,
            Some(false),
            "the 33rd gives it: 4 in the driver is not queueing"
        );
        h.sample_v7(5, 0);
        assert_eq!(h.hw_tag, Some(false), "one sample after a verdict decides nothing");
        for _ in 0..32 {
            h.sample_v7(5, 0);
        }
        assert_eq!(h.hw_tag, Some(true), "5 in the driver is");
        for _ in 0..100 {
            h.sample_v7(1, 10);
        }
        assert_eq!(h.hw_tag, Some(true), "a yes is final");
    }

    // Think-time samples are capped at twice slice_idle (16 ms for 8 ms), so a process that once thought for
    // seconds regains a short think time after a few quick returns: the filter keeps 7/8 of the old mean per
    // sample, so from about 16 ms the mean falls below 8 ms after ln 2 / ln(8/7) = 5.2 samples, i.e. at the
    // 6th return (still above 8 ms after 3). A cap at slice_idle would make it short again at the first.
    #[test]
    fn a_long_thinker_needs_six_quick_returns_to_be_short_again() {
        let mut t = ThinkTime::default();
        for _ in 0..20 {
            t.update(10_000 * MS, 8 * MS);
        }
        assert!(!t.short(false, 8 * MS), "mean {}", t.mean);
        for _ in 0..3 {
            t.update(0, 8 * MS);
        }
        assert!(!t.short(false, 8 * MS), "after 3 quick returns, mean {}", t.mean);
        for _ in 0..3 {
            t.update(0, 8 * MS);
        }
        assert!(t.short(false, 8 * MS), "after 6, mean {}", t.mean);
    }

    // The think time is short up to the limit included (the kernel's test is `ttime_mean > limit`): a process
    // that always comes back after 4 ms has a filtered mean a little above 4 ms (the sample count settles at 249
    // of 256, so about 4.1 ms); a limit equal to that mean still finds it short, one nanosecond less does not.
    #[test]
    fn a_think_time_equal_to_the_limit_is_short() {
        let mut t = ThinkTime::default();
        for _ in 0..10 {
            t.update(4 * MS, 8 * MS);
        }
        assert!(
            t.valid() && t.mean >= 4 * MS && t.mean < 4 * MS + MS / 5,
            "mean {}",
            t.mean
        );
        assert!(t.short(false, t.mean));
        assert!(!t.short(false, t.mean - 1));
    }

    // v7r2's timer: 3 x slice_idle for a raised queue (whether seeky or not), at most 2 ms for a non-raised seeky
    // queue that had a long slot, else slice_idle.
    #[test]
    fn v7r2_timer_lengths() {
        assert_eq!(idle_slice_v7(8 * MS, false, true), 24 * MS);
        assert_eq!(idle_slice_v7(8 * MS, true, true), 24 * MS);
        assert_eq!(idle_slice_v7(8 * MS, true, false), 2 * MS);
        assert_eq!(idle_slice_v7(MS, true, false), MS);
        assert_eq!(idle_slice_v7(8 * MS, false, false), 8 * MS);
    }

    // While the in-service queue has a short think time and fewer than 3 requests, a sample with fewer than 3
    // requests in the driver proves nothing (BFQ itself kept the device from filling) and is not counted; with 3
    // in the driver it is.
    #[test]
    fn a_small_in_service_queue_does_not_prove_the_device_does_not_queue() {
        let mut h = HwTag::default();
        for _ in 0..100 {
            h.sample(2, 10, true);
        }
        assert_eq!(h.hw_tag, None, "not counted");
        for _ in 0..100 {
            h.sample(2, 10, false);
        }
        assert_eq!(h.hw_tag, Some(false), "counted when the in-service queue is not small");
        let mut m = HwTag::default();
        for _ in 0..33 {
            m.sample(3, 10, true);
        }
        assert_eq!(m.hw_tag, Some(false), "3 in the driver is a sample even then");
    }

    // On a queueing SSD with equal weights and no raised queue nothing justifies idling, even for a sequential,
    // I/O-bound queue: the device keeps itself busy with other queues' requests.
    #[test]
    fn no_idling_on_queueing_ssd_symmetric() {
        let mut f = facts();
        f.rotational = false;
        f.hw_tag = true;
        assert!(!better_to_idle(&f));
        f.seeky = true;
        assert!(!better_to_idle(&f));
        // ...but an asymmetric scenario (different weights) needs idling to keep the guarantees.
        f.asymmetric = true;
        assert!(better_to_idle(&f));
    }

    // HDD without NCQ: always idle for a sync queue; a raised busy queue elsewhere removes the throughput
    // motive, so a non-raised sequential queue stops idling then.
    #[test]
    fn hdd_idling_and_raised_queues() {
        let mut f = facts();
        assert!(better_to_idle(&f));
        f.wr_busy = 1;
        assert!(!better_to_idle(&f));
        f.raised = true;
        f.wr_busy = 1;
        f.busy = 2;
        assert!(
            better_to_idle(&f),
            "a raised queue idles while non-raised queues are busy"
        );
        f.sync = false;
        f.raised = false;
        assert!(!better_to_idle(&f), "never for async");
        let mut s = facts();
        s.slice_idle_zero = true;
        assert!(!better_to_idle(&s));
        s.strict = true;
        assert!(better_to_idle(&s), "strict_guarantees always idles");
    }

    // Idling for service guarantees on a queueing SSD, where it never boosts throughput (the kernel's
    // `idling_needed_for_service_guarantees`): a raised queue idles while some busy queue is not raised, or, when
    // all are raised, while the device holds at least 4 requests more than the queue's own (other queues' requests
    // would otherwise steal its bandwidth); a queue alone (one busy queue) idles so that its next request finds the
    // device free; none of this for a queue whose process has gone.
    #[test]
    fn idling_for_guarantees_on_a_queueing_ssd() {
        let mut f = facts();
        f.rotational = false;
        f.hw_tag = true;
        f.raised = true;
        f.wr_busy = 2;
        f.busy = 3;
        assert!(better_to_idle(&f), "a non-raised queue is busy");
        f.busy = 2;
        f.dispatched = 1;
        f.in_driver = 4;
        assert!(
            !better_to_idle(&f),
            "all busy queues raised, 3 others' requests in the device"
        );
        f.in_driver = 5;
        assert!(better_to_idle(&f), "4 others' requests in the device");
        f.raised = false;
        f.wr_busy = 0;
        assert!(!better_to_idle(&f), "not raised, symmetric, two busy queues");
        f.busy = 1;
        assert!(better_to_idle(&f), "the only busy queue");
        f.has_refs = false;
        f.strict = true;
        assert!(
            !better_to_idle(&f),
            "no process left: never, not even with strict guarantees"
        );
    }

    // Idling boosts throughput (the kernel's `idling_boosts_thr`) on a rotational device without NCQ whatever the
    // queue does, and otherwise, unless on a queueing SSD, only for a sequential, I/O-bound queue with a short
    // think time: a seeky queue, one that is not I/O bound, or one that thinks long gets no idling for throughput
    // on an HDD with NCQ or on an SSD without it (with two busy queues nothing else asks for idling).
    #[test]
    fn idling_boosts_throughput_only_for_sequential_io_bound_queues_once_the_device_queues() {
        for (rotational, hw_tag) in [(true, true), (false, false)] {
            let mut f = facts();
            f.rotational = rotational;
            f.hw_tag = hw_tag;
            assert!(
                boosts_throughput(&f) && better_to_idle(&f),
                "sequential, I/O bound, short think time"
            );
            for spoil in 0..3 {
                let mut g = f;
                match spoil {
                    0 => g.seeky = true,
                    1 => g.io_bound = false,
                    _ => g.short_ttime = false,
                }
                assert!(
                    !boosts_throughput(&g) && !better_to_idle(&g),
                    "rot {rotational} ncq {hw_tag} case {spoil}"
                );
            }
        }
        let mut hdd = facts();
        hdd.seeky = true;
        hdd.io_bound = false;
        hdd.short_ttime = false;
        assert!(boosts_throughput(&hdd), "HDD without NCQ: always");
        let mut idle = facts();
        idle.idle_class = true;
        assert!(!better_to_idle(&idle), "never for the IDLE class");
    }

    // Timer lengths: seeky symmetric 2 ms; seeky asymmetric keeps slice_idle; raised at least 20 ms.
    #[test]
    fn timer_lengths() {
        assert_eq!(idle_slice(8 * MS, true, false, false), 2 * MS);
        assert_eq!(idle_slice(8 * MS, true, false, true), 8 * MS);
        assert_eq!(idle_slice(8 * MS, false, true, false), 20 * MS);
        assert_eq!(idle_slice(30 * MS, true, true, false), 30 * MS);
        assert_eq!(idle_slice(8 * MS, false, false, false), 8 * MS);
    }
}
