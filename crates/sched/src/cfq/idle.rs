//! Think time, seekiness and the idle-window rules that decide whether CFQ idles for an emptied queue
//! (kernel: `cfq_update_io_thinktime`, `cfq_update_io_seektime`, `cfq_update_idle_window`, `cfq_should_idle`; the
//! think-time average is BFQ's, `bfq_update_io_thinktime`; docs/SCHEDULERS.md, CFQ, Idling).

use crate::types::Time;

/// Weight of a new think-time sample in the decaying averages, in 1/256 units (the kernel's fixed point).
pub const TTIME_SAMPLE_WEIGHT: u64 = 256;

/// The think-time average is trusted once its sample weight exceeds this (about three samples in).
pub const TTIME_VALID_SAMPLES: u64 = 80;

/// A request is "seeky" on a rotational device when it starts more than this many sectors from where the
/// queue's previous request ended (800 sectors = 400 KiB: farther than a track-to-track seek is cheap).
pub const SEEK_THRESHOLD_SECTORS: u64 = 800;

/// On a non-rotational device a request is "seeky" when smaller than this many sectors (32 KiB): small requests
/// are what costs throughput there.
pub const SMALL_REQUEST_SECTORS_NONROT: u32 = 64;

/// A queue is seeky when more than this many of its last 32 requests were (one in eight).
pub const SEEKY_MIN_COUNT: u32 = 4;

/// A queue with at least this many requests queued is "deep": it keeps its idle window even when seeky, because
/// the device can reorder its requests.
pub const DEEP_QUEUE_REQUESTS: usize = 4;

/// A decaying average of the time between a completion and the next arrival (the kernel's `cfq_ttime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThinkTime {
    /// When the last relevant request completed (ns).
    pub last_end: Time,
    /// Decayed sample weight, in 1/256 units.
    pub samples: u64,
    /// Decayed total of capped think times, in ns * 256.
    pub total: u64,
    /// Mean think time (ns).
    pub mean: Time,
}

impl ThinkTime {
    /// No samples yet; `now` counts as the last completion.
    pub fn new(now: Time) -> Self {
        ThinkTime {
            last_end: now,
            samples: 0,
            total: 0,
            mean: 0,
        }
    }

    /// A request arrived at `now`: adds the time since the last completion, capped at `2 * idle` (ns).
    pub fn sample(&mut self, now: Time, idle: Time) {
        let elapsed = now.saturating_sub(self.last_end).min(idle.saturating_mul(2));
        self.samples = (7 * self.samples + TTIME_SAMPLE_WEIGHT) / 8;
        self.total = (7 * self.total + TTIME_SAMPLE_WEIGHT * elapsed) / 8;
        // (The kernel adds half a sample to round in jiffies; in ns rounding does not matter.)
        self.mean = self.total / self.samples.max(1);
    }

    /// True once enough samples are in.
    pub fn valid(&self) -> bool {
        self.samples > TTIME_VALID_SAMPLES
    }

    /// True if the average is valid and longer than `idle` (ns): idling would likely be wasted.
    pub fn big(&self, idle: Time) -> bool {
        self.valid() && self.mean > idle
    }
}

/// History of the last 32 requests of a queue, one bit per request, 1 for a seeky one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeekHistory {
    bits: u32,
    last_end: Option<u64>,
}

impl SeekHistory {
    /// Records a request of `sectors` at `sector`.
    pub fn record(&mut self, sector: u64, sectors: u32, rotational: bool) {
        let dist = self.last_end.map_or(0, |e| e.abs_diff(sector));
        let seeky = if rotational {
            dist > SEEK_THRESHOLD_SECTORS
        } else {
            sectors < SMALL_REQUEST_SECTORS_NONROT
        };
        self.bits = (self.bits << 1) | u32::from(seeky);
        self.last_end = Some(sector + u64::from(sectors));
    }

    /// More than one in eight of the last 32 requests were seeky.
    pub fn seeky(&self) -> bool {
        self.bits.count_ones() > SEEKY_MIN_COUNT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::MS;

    // Three arrivals right after completions make the average valid with a mean of 0; one long pause is capped at
    // 2*slice_idle, and a series of long pauses pushes the mean over slice_idle.
    #[test]
    fn think_time_average() {
        let mut t = ThinkTime::new(0);
        for _ in 0..3 {
            t.sample(t.last_end, 8 * MS);
        }
        assert!(t.valid());
        assert_eq!(t.mean, 0);
        assert!(!t.big(8 * MS));
        for i in 0..20 {
            t.last_end = i * SEC_LIKE;
            t.sample(i * SEC_LIKE + 50 * MS, 8 * MS);
        }
        assert!(t.mean <= 16 * MS && t.mean > 8 * MS);
        assert!(t.big(8 * MS));
    }
    const SEC_LIKE: Time = 1_000 * MS;

    // Sequential requests are never seeky; five far jumps among 32 make the queue seeky on a disk.
    #[test]
    fn seekiness() {
        let mut h = SeekHistory::default();
        for i in 0..32 {
            h.record(i * 8, 8, true);
        }
        assert!(!h.seeky());
        for i in 0..5 {
            h.record(1_000_000 * (i + 1), 8, true);
        }
        assert!(h.seeky());
        let mut s = SeekHistory::default();
        for i in 0..5 {
            s.record(i * 8, 8, false);
        }
        assert!(s.seeky(), "small requests count as seeky on a non-rotational device");
    }

    // The kernel's fixed-point average (`__cfq_update_io_thinktime`): the sample weight goes 0 -> 32 -> 60 -> 84
    // (`(7 w + 256) / 8`), and `sample_valid` wants more than 80, so the mean counts from the third arrival on. Two
    // arrivals 4 ms after their completions give a mean of exactly 4 ms (32 x 4 ms / 32, then 60 x 4 ms / 60); a
    // pause of 50 ms with slice_idle 8 ms counts as 16 ms (capped at 2 x slice_idle).
    #[test]
    fn the_mean_is_valid_from_the_third_sample_and_a_pause_counts_at_most_twice_slice_idle() {
        let mut t = ThinkTime::new(0);
        t.sample(4 * MS, 8 * MS);
        assert_eq!((t.samples, t.total, t.mean), (32, 32 * 4 * MS, 4 * MS));
        t.last_end = 10 * MS;
        t.sample(14 * MS, 8 * MS);
        assert_eq!((t.samples, t.mean), (60, 4 * MS));
        assert!(!t.valid() && !t.big(MS), "two samples are not enough");
        t.last_end = 20 * MS;
        t.sample(24 * MS, 8 * MS);
        assert_eq!(t.samples, 84);
        assert!(t.valid() && t.big(MS) && !t.big(8 * MS));

        let mut p = ThinkTime::new(0);
        p.sample(50 * MS, 8 * MS);
        assert_eq!(p.mean, 16 * MS);
    }

    // `sample_valid(samples)` is `samples > 80`, and a think time is "big" only when strictly longer than the idle
    // time (`ttime_mean > slice_idle` in `cfq_io_thinktime_big` and `cfq_update_idle_window`): a mean of exactly
    // 8 ms still earns idling with slice_idle 8 ms, one ns more does not.
    #[test]
    fn valid_is_above_80_and_big_is_strictly_longer_than_the_idle_time() {
        let t = |samples, mean| ThinkTime {
            last_end: 0,
            samples,
            total: 0,
            mean,
        };
        assert!(!t(80, 20 * MS).valid() && !t(80, 20 * MS).big(8 * MS));
        assert!(t(81, 20 * MS).valid() && t(81, 20 * MS).big(8 * MS));
        assert!(!t(84, 8 * MS).big(8 * MS));
        assert!(t(84, 8 * MS + 1).big(8 * MS));
    }

    // `cfq_update_io_seektime`: on a disk a request is seeky when it starts more than 800 sectors (CFQQ_SEEK_THR)
    // from where the previous one ended, in either direction; on flash when it is smaller than 64 sectors
    // (CFQQ_SECT_THR_NONROT). A queue is seeky when more than 4 of its last 32 requests were (`CFQQ_SEEKY`).
    #[test]
    fn seeky_is_more_than_800_sectors_away_or_under_64_sectors_on_flash_in_5_of_32() {
        let hist = |gaps: &[u64], sectors: u32, rotational: bool| {
            let mut h = SeekHistory::default();
            let mut at = 1_000_000;
            h.record(at, sectors, rotational);
            for &g in gaps {
                at += u64::from(sectors) + g;
                h.record(at, sectors, rotational);
            }
            h
        };
        // Five jumps of exactly 800 sectors: none is seeky; five of 801 are.
        assert!(!hist(&[800; 5], 8, true).seeky());
        assert!(hist(&[801; 5], 8, true).seeky());
        // Four seeky requests of 32 are not enough; the fifth makes the queue seeky.
        assert!(!hist(&[801; 4], 8, true).seeky());
        // Backwards counts the same: a request 801 sectors before the previous end.
        let mut b = SeekHistory::default();
        for i in 0..6u64 {
            b.record(10_000_000 - i * 809, 8, true);
        }
        assert!(b.seeky());
        // On flash the size decides, not the distance: 64-sector requests far apart are not seeky, 63 close are.
        assert!(!hist(&[1_000_000; 8], 64, false).seeky());
        assert!(hist(&[0; 8], 63, false).seeky());
        // The window is 32 requests: 5 seeky ones followed by 32 sequential ones are forgotten.
        let mut w = hist(&[801; 5], 8, true);
        for i in 0..32 {
            w.record(1 << 40 | (i * 8), 8, true);
        }
        assert!(!w.seeky());
    }
}
