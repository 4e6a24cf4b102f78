//! Peak-rate estimation (`bfq_update_peak_rate`, `bfq_update_rate_reset`). The rate is kept in sectors/µs scaled by
//! `2^RATE_SHIFT`; it feeds the autotuned maximum budget and the interactive weight-raising duration.

use crate::types::{Time, MS, SEC, US};

/// Fixed-point shift of rates: sectors/µs << 16.
pub const RATE_SHIFT: u32 = 16;

/// Reference rate of a rotational disk (sectors/µs << 16): 14000 ≈ 0.214 sectors/µs ≈ 110 MB/s.
pub const REF_RATE_ROT: u64 = 14_000;

/// Reference rate of a non-rotational device (sectors/µs << 16): 33000 ≈ 0.504 sectors/µs ≈ 258 MB/s.
pub const REF_RATE_NONROT: u64 = 33_000;

/// Minimum dispatches in a window for a rate to be computed from it.
pub const MIN_SAMPLES: u32 = 32;

/// Minimum window length (ns) for a rate to be computed: 300 ms.
pub const MIN_WINDOW: Time = 300 * MS;

/// A window is closed once it reaches this length (ns): 1 s; also the unit of the filter's weight.
pub const TARGET_WINDOW: Time = SEC;

/// A dispatch this long (ns) after the previous one with nothing in flight closes the window: 100 ms.
pub const RESTART_GAP: Time = 100 * MS;

/// A dispatch counts as sequential if something is in flight or the last completion is this recent (ns): 2 ms.
pub const SEQ_COMPLETION_GAP: Time = 2 * MS;

/// `BFQQ_SEEK_THR` (sectors): a request farther than this from the end of its queue's previous one is seeky
/// ([`seeky`]), and a dispatch is a sequential sample of the peak rate only if it is closer than this to the end
/// of the previous dispatch.
pub const SEEK_THR: u64 = 800;

/// Requests below this size (sectors) are seeky on non-rotational devices whatever their distance.
pub const NONROT_SMALL_SECTORS: u32 = 64;

/// Largest credible rate (sectors/µs << 16): 20 sectors/µs ≈ 10 GB/s; anything above is a measurement error.
pub const MAX_RATE: u64 = 20 << RATE_SHIFT;

/// Completions farther apart than this (ns) may reveal a slow device: 2 ms.
pub const SLOW_COMPLETION_GAP: Time = 2 * MS;

/// Largest request size divided by the gap below this rate (sectors/µs << 16, i.e. 2^-10 sectors/µs) closes the
/// window early.
pub const SLOW_COMPLETION_RATE: u64 = 1 << (RATE_SHIFT - 10);

/// Dispatches between two resets of the tracked largest request size.
pub const MAX_SIZE_RESET_EVERY: u32 = 32;

/// The estimator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeakRate {
    /// Estimated peak rate (sectors/µs << 16), at least 1.
    pub peak: u64,
    samples: u32,
    seq_samples: u32,
    sectors: u64,
    max_rq: u64,
    first_dispatch: Time,
    /// Time from the window's first dispatch to its latest one (ns): where a window that closes early ends.
    delta_from_first: Time,
    last_dispatch: Time,
    last_position: u64,
    /// Time of the last completion (ns).
    pub last_completion: Time,
    rotational: bool,
}

/// Whether a request at `sector` of `sectors` is seeky relative to position `last` (`BFQ_RQ_SEEKY`): farther
/// than [`SEEK_THR`] and, on a non-rotational device, small. A `last` of 0 (no request yet) is distance 0, as the
/// kernel's `get_sdist` has it, so a queue's first request is never seeky.
pub fn seeky(last: u64, sector: u64, sectors: u32, rotational: bool) -> bool {
    last != 0 && sector.abs_diff(last) > SEEK_THR && (rotational || sectors < NONROT_SMALL_SECTORS)
}

impl PeakRate {
    /// The initial estimate: 2/3 of the reference rate of the device kind.
    pub fn new(rotational: bool) -> Self {
        PeakRate {
            peak: Self::ref_rate(rotational) * 2 / 3,
            samples: 0,
            seq_samples: 0,
            sectors: 0,
            max_rq: 0,
            first_dispatch: 0,
            delta_from_first: 0,
            last_dispatch: 0,
            last_position: 0,
            last_completion: 0,
            rotational,
        }
    }

    /// An estimator starting from `peak` (sectors/µs << 16) instead of the newest kernel's 2/3 of the reference
    /// rate (v7r2 starts from its fast reference rate).
    pub fn with_peak(rotational: bool, peak: u64) -> Self {
        PeakRate {
            peak: peak.max(1),
            ..Self::new(rotational)
        }
    }

    /// Reference rate of the device kind.
    pub fn ref_rate(rotational: bool) -> u64 {
        if rotational {
            REF_RATE_ROT
        } else {
            REF_RATE_NONROT
        }
    }

    fn reset(&mut self, now: Time, sectors: u32) {
        self.samples = u32::from(sectors > 0);
        self.seq_samples = 0;
        self.sectors = u64::from(sectors);
        self.max_rq = u64::from(sectors);
        self.first_dispatch = now;
        self.delta_from_first = 0;
        self.last_dispatch = now;
    }

    /// Closes the window: computes the rate if the window is long and populated enough and folds it into the
    /// peak with a weight that grows with the window's length and sequentiality. Returns the new peak if it
    /// changed. Restarts the window at `now` with a dispatch of `sectors` (0 for none).
    ///
    /// The window ends at its latest dispatch, or its latest completion if that is later
    /// (`bfq_update_rate_reset`): a window closed early by a long gap or a slow completion does not count the
    /// gap, so an idle period does not lower the estimate.
    fn update_and_reset(&mut self, now: Time, sectors: u32) -> Option<u64> {
        let mut out = None;
        let from_first = self.delta_from_first;
        if self.samples >= MIN_SAMPLES && from_first >= MIN_WINDOW {
            // The window is stretched to the last completion before both the rate and the filter's weight use
            // its length.
            let interval = from_first.max(self.last_completion.saturating_sub(self.first_dispatch));
            let us = (interval / US).max(1);
            let rate = (self.sectors << RATE_SHIFT) / us;
            // Three quarters of the samples rounded down, as the kernel's `(3 * samples) >> 2`.
            let mostly_seeky = u64::from(self.seq_samples) < (3 * u64::from(self.samples)) >> 2;
            if !((mostly_seeky && rate <= self.peak) || rate > MAX_RATE) {
                let w = (9 * u64::from(self.seq_samples)) / u64::from(self.samples.max(1));
                let w = (w * interval / TARGET_WINDOW).min(8);
                let d = 10 - w;
                self.peak = (self.peak * (d - 1) / d + rate / d).max(1);
                out = Some(self.peak);
            }
        }
        self.reset(now, sectors);
        out
    }

    /// Accounts a dispatch. `in_driver` is the number of requests on the device before this one. Returns the new
    /// peak rate when it was updated.
    pub fn on_dispatch(&mut self, sector: u64, sectors: u32, now: Time, in_driver: u32) -> Option<u64> {
        let end = sector.saturating_add(u64::from(sectors));
        let out = if self.samples == 0 {
            self.reset(now, sectors);
            None
        } else if now.saturating_sub(self.last_dispatch) > RESTART_GAP && in_driver == 0 {
            self.update_and_reset(now, sectors)
        } else {
            self.samples += 1;
            let recent = now.saturating_sub(self.last_completion) < SEQ_COMPLETION_GAP;
            // Sequential: close to where the previous dispatch ended, whatever the size or the device (the
            // kernel's `get_sdist`, which calls a position of 0, before any dispatch, distance 0).
            let dist = if self.last_position == 0 {
                0
            } else {
                sector.abs_diff(self.last_position)
            };
            if (in_driver > 0 || recent) && dist < SEEK_THR {
                self.seq_samples += 1;
            }
            self.sectors = self.sectors.saturating_add(u64::from(sectors));
            if self.samples.is_multiple_of(MAX_SIZE_RESET_EVERY) {
                self.max_rq = u64::from(sectors);
            } else {
                self.max_rq = self.max_rq.max(u64::from(sectors));
            }
            self.delta_from_first = now.saturating_sub(self.first_dispatch);
            if self.delta_from_first >= TARGET_WINDOW {
                self.update_and_reset(now, sectors)
            } else {
                None
            }
        };
        self.last_position = end;
        self.last_dispatch = now;
        out
    }

    /// Accounts a completion; a long silence relative to the largest request size closes the window early.
    pub fn on_completion(&mut self, now: Time) -> Option<u64> {
        // The silence in whole µs, as the kernel measures it: it must exceed 2000 µs.
        let gap_us = now.saturating_sub(self.last_completion) / US;
        let mut out = None;
        if gap_us > SLOW_COMPLETION_GAP / US
            && self.samples > 0
            && (self.max_rq << RATE_SHIFT) / gap_us < SLOW_COMPLETION_RATE
        {
            out = self.update_and_reset(now, 0);
        }
        self.last_completion = now;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A device that completes 256-sector requests back to back every 1 ms (0.256 sectors/µs = 16777 << 16
    // units) during 1 s: the first full window moves the peak from its initial 9333 towards that rate with
    // weight 1/(10 - 8) (all samples sequential over a full second), i.e. to about the midpoint (1001 requests
    // land in the 1 s window, hence a tolerance of a few units).
    #[test]
    fn sequential_window_moves_peak_towards_measured_rate() {
        let mut p = PeakRate::new(true);
        assert_eq!(p.peak, 9333);
        let mut updated = None;
        for i in 0..=1001u64 {
            let now = i * MS;
            p.on_completion(now);
            if let Some(r) = p.on_dispatch(i * 256, 256, now, 1) {
                updated = Some(r);
                break;
            }
        }
        let rate = (256u64 << RATE_SHIFT) / 1000;
        let r = updated.expect("window closed after 1 s");
        let expect = 9333 / 2 + rate / 2;
        assert!(r.abs_diff(expect) <= 20, "{r} vs {expect}");
    }

    // A window of mostly seeky samples whose rate is below the current peak is rejected; too few samples or a
    // too-short window never update.
    #[test]
    fn seeky_slow_windows_are_rejected() {
        let mut p = PeakRate::new(true);
        let before = p.peak;
        for i in 0..2000u64 {
            let now = i * MS;
            // far apart positions, nothing in flight: every sample seeky, 8 sectors per ms = tiny rate
            p.on_dispatch((i * 7919 * 1000) % 1_000_000_000, 8, now, 0);
        }
        assert_eq!(p.peak, before);
        let mut q = PeakRate::new(false);
        for i in 0..10u64 {
            q.on_dispatch(i * 8, 8, i * 200 * MS, 1);
        }
        assert_eq!(q.peak, 22_000);
    }

    // A window of sequential dispatches (256 sectors every ms for 400 ms, then nothing) closed by a dispatch
    // after a 500 ms gap: the rate is measured over the 400 ms the device worked, not the 900 ms including the
    // gap. The new peak therefore moves from the initial 9333 towards 256 sectors/ms (16777), i.e. up; counting the
    // gap would have given 7456, a fall.
    #[test]
    fn a_window_closed_by_a_gap_ends_at_its_last_dispatch() {
        let mut p = PeakRate::new(true);
        let before = p.peak;
        for i in 0..=400u64 {
            let now = i * MS;
            p.on_completion(now);
            assert_eq!(p.on_dispatch(i * 256, 256, now, 1), None);
        }
        let r = p
            .on_dispatch(1 << 30, 256, 900 * MS, 0)
            .expect("the gap closes the window");
        assert!(r > before, "peak {before} -> {r}: the gap was counted");
    }

    // Seekiness: > 800 sectors away, and on SSDs only for small requests; no previous request (position 0) is
    // distance 0, so a queue's first request is not seeky however far it lands (`get_sdist`).
    #[test]
    fn seek_rule() {
        assert!(seeky(1000, 1801, 8, true));
        assert!(!seeky(1000, 1800, 8, true));
        assert!(seeky(1000, 11_000, 8, false));
        assert!(!seeky(1000, 11_000, 64, false));
        assert!(!seeky(0, 1 << 30, 8, true) && !seeky(0, 1 << 30, 8, false));
    }

    // Issue 21 (session 9). The window rules of `bfq_update_peak_rate` / `bfq_update_rate_reset`, with the
    // figures written out. The base window: 32 dispatches of 256 sectors spread evenly over exactly 300 ms
    // (the first at 0, the 32nd at 300 ms), each after the first with a request in the driver, so 31 sequential
    // samples; a dispatch more than 100 ms later with the device empty closes it. Rate: 32 x 256 = 8192 sectors
    // in 300 000 µs, 8192 x 65 536 / 300 000 = 1789. Weight: 9 x 31 / 32 = 8, times 300 ms / 1 s = 2, so the
    // divisor is 10 - 2 = 8 and the peak goes from 9333 to 9333 x 7 / 8 + 1789 / 8 = 8166 + 223 = 8389.

    /// Dispatch time of the `i`-th of 32 dispatches spread over `span` (ns).
    fn at(i: u64, span: Time) -> Time {
        i * span / 31
    }

    /// The base window over `span` with `n` dispatches, `seq(i)` telling whether dispatch `i` has a request in
    /// the driver; `done_at(i)`, if some, is a completion just before dispatch `i`.
    fn window(n: u64, span: Time, seq: impl Fn(u64) -> bool, done_at: impl Fn(u64) -> Option<Time>) -> PeakRate {
        let mut p = PeakRate::new(true);
        for i in 0..n {
            if let Some(t) = done_at(i) {
                assert_eq!(p.on_completion(t), None);
            }
            let r = p.on_dispatch(i * 256, 256, at(i, span), u32::from(seq(i)));
            assert_eq!(r, None, "dispatch {i} closed the window");
        }
        p
    }

    /// Closes `p`'s window with a dispatch at `t` and nothing in the driver.
    fn close(p: &mut PeakRate, t: Time) -> Option<u64> {
        p.on_dispatch(1 << 30, 8, t, 0)
    }

    #[test]
    fn a_window_of_32_samples_over_300_ms_updates_with_a_weight_set_by_its_length() {
        let mut p = window(32, 300 * MS, |i| i > 0, |_| None);
        // A dispatch exactly 100 ms after the last one does not close the window (the rule is "more than").
        let mut q = p.clone();
        assert_eq!(q.on_dispatch(32 * 256, 256, 400 * MS, 0), None);
        assert_eq!(close(&mut p, 400 * MS + 1), Some(8389));
        assert_eq!(p.peak, 8389);
    }

    #[test]
    fn fewer_than_32_samples_or_less_than_300_ms_leave_the_peak() {
        let mut p = window(31, 300 * MS, |i| i > 0, |_| None);
        assert_eq!(close(&mut p, SEC), None, "31 samples");
        assert_eq!(p.peak, 9333);
        let mut p = window(32, 300 * MS - 31, |i| i > 0, |_| None);
        assert_eq!(close(&mut p, SEC), None, "299.999 ms");
        assert_eq!(p.peak, 9333);
    }

    // Mostly seeky is fewer than 3/4 of the samples sequential (`sequential_samples < 3 x samples / 4`): 24 of 32
    // is not, 23 is. A window that is not mostly seeky updates even when its rate (1789) is below the peak: 24
    // sequential give a weight of 9 x 24 / 32 = 6, times 0.3 = 1, divisor 9: 9333 x 8 / 9 + 1789 / 9 = 8296 + 198
    // = 8494. With 23 the window is mostly seeky and slower than the peak: rejected.
    #[test]
    fn a_mostly_seeky_window_slower_than_the_peak_is_rejected() {
        let mut p = window(32, 300 * MS, |i| (1..=24).contains(&i), |_| None);
        assert_eq!(close(&mut p, SEC), Some(8494));
        let mut p = window(32, 300 * MS, |i| (1..=23).contains(&i), |_| None);
        assert_eq!(close(&mut p, SEC), None);
        assert_eq!(p.peak, 9333);
    }

    // With nothing in the driver a dispatch is still sequential if the last completion is less than 2 ms old
    // (BFQ_MIN_TT): the 24th sequential sample of the previous test comes from a completion 2 ms - 1 ns before
    // it, and the window updates as before; a completion exactly 2 ms before does not count, and the window is
    // rejected.
    #[test]
    fn a_completion_less_than_2_ms_old_makes_a_dispatch_sequential() {
        let seq = |i| (1..=23).contains(&i);
        let mut p = window(32, 300 * MS, seq, |i| {
            (i == 24).then(|| at(24, 300 * MS) - (2 * MS - 1))
        });
        assert_eq!(close(&mut p, SEC), Some(8494));
        let mut p = window(32, 300 * MS, seq, |i| (i == 24).then(|| at(24, 300 * MS) - 2 * MS));
        assert_eq!(close(&mut p, SEC), None);
    }

    // A far dispatch is not sequential even with requests in the driver: 8 of the 31 jump 801 sectors past the
    // previous end, leaving 23 sequential samples, and the window is rejected.
    #[test]
    fn a_jump_past_800_sectors_is_not_a_sequential_sample() {
        let mut p = PeakRate::new(true);
        let mut pos = 0;
        for i in 0..32u64 {
            if (24..32).contains(&i) {
                pos += 801;
            }
            assert_eq!(p.on_dispatch(pos, 256, at(i, 300 * MS), u32::from(i > 0)), None);
            pos += 256;
        }
        assert_eq!(close(&mut p, SEC), None);
    }

    // Rates above 20 sectors/µs are measurement errors: 32 dispatches of 187 500 sectors in 300 ms are exactly
    // 20 sectors/µs (rate 1 310 720) and count (weight 2, divisor 8: 9333 x 7 / 8 + 1 310 720 / 8 = 8166 +
    // 163 840 = 172 006); one sector more each is above the limit and is dropped.
    #[test]
    fn a_rate_above_20_sectors_per_us_is_dropped() {
        for (size, want) in [(187_500u32, Some(172_006)), (187_501, None)] {
            let mut p = PeakRate::new(true);
            for i in 0..32u64 {
                p.on_dispatch(i * u64::from(size), size, at(i, 300 * MS), u32::from(i > 0));
            }
            assert_eq!(close(&mut p, SEC), want, "{size} sectors a dispatch");
        }
    }

    // A completion after a silence long relative to the largest recent request closes the window early (the
    // device may be slow): with 256-sector requests the limit is 256 / 2^-10 = 262 144 µs of silence. The base
    // window, with a completion at each dispatch, is closed by a completion 262 145 µs after the last one (and
    // gives the base window's 8389) but not by one 262 144 µs after it.
    #[test]
    fn a_completion_after_a_long_silence_closes_the_window() {
        let p = window(32, 300 * MS, |i| i > 0, |i| Some(at(i, 300 * MS)));
        let mut q = p.clone();
        assert_eq!(q.on_completion(300 * MS + 262_144 * US), None);
        let mut q = p;
        assert_eq!(q.on_completion(300 * MS + 262_145 * US), Some(8389));
        assert_eq!(q.peak, 8389);
    }

    // The silence must also exceed 2 ms, counted in whole µs as the kernel counts it (`delta_us > 2000`): with
    // 1-sector requests (limit 1024 µs) dispatched and completed every 2 ms over 300 ms, no completion closes the
    // window, nor does one 2 ms + 999 ns after the last (2000 µs); one 2 ms + 1 µs after it does. 151 sectors in
    // 300 ms: rate 151 x 65 536 / 300 000 = 32, weight 9 x 150 / 151 = 8, x 0.3 = 2: 9333 x 7 / 8 + 32 / 8 =
    // 8166 + 4 = 8170.
    #[test]
    fn a_silence_of_at_most_2_ms_never_closes_the_window() {
        let mut p = PeakRate::new(true);
        for i in 0..=150u64 {
            assert_eq!(p.on_completion(i * 2 * MS), None, "completion {i}");
            assert_eq!(p.on_dispatch(i, 1, i * 2 * MS, 1), None, "dispatch {i}");
        }
        let mut q = p.clone();
        assert_eq!(q.on_completion(302 * MS + 999), None);
        assert_eq!(p.on_completion(302 * MS + US), Some(8170));
    }

    // Session 10: three details of `bfq_update_peak_rate` / `bfq_update_rate_reset` the policy departed from,
    // each test failing before the fix.

    // A dispatch is a sequential sample only if it lands closer than 800 sectors to where the previous one ended
    // (`get_sdist(last_position, rq) < BFQQ_SEEK_THR`), on any device and at any size: the base window with its
    // last 8 dispatches jumping exactly 800 sectors keeps 23 sequential samples and is rejected (the queue's
    // seekiness rule, "more than 800", would have counted them); on flash, 8 jumps of 10 000 sectors with large
    // (256-sector) requests are not sequential either (the queue rule calls large requests on flash never
    // seeky).
    #[test]
    fn a_sequential_sample_lands_closer_than_800_sectors_on_any_device() {
        for (jump, rotational) in [(800u64, true), (10_000, false)] {
            let mut p = PeakRate::new(rotational);
            let start = p.peak;
            let mut pos = 0;
            for i in 0..32u64 {
                if (24..32).contains(&i) {
                    pos += jump;
                }
                assert_eq!(p.on_dispatch(pos, 256, at(i, 300 * MS), u32::from(i > 0)), None);
                pos += 256;
            }
            assert_eq!(close(&mut p, SEC), None, "jump {jump}, rotational {rotational}");
            assert_eq!(p.peak, start);
        }
    }

    // The window is stretched to its last completion before the rate and the filter's weight are computed: the
    // base window (completions at each dispatch) with one more completion at 450 ms, closed by a dispatch 100 ms
    // + 1 ns later, lasts 450 ms: rate 8192 x 65 536 / 450 000 = 1193, weight 8 x 0.45 = 3, divisor 7: 9333 x 6 /
    // 7 + 1193 / 7 = 7999 + 170 = 8169. (With the weight taken over the 300 ms of dispatches only, divisor 8:
    // 8315.)
    #[test]
    fn the_weight_counts_the_window_up_to_its_last_completion() {
        let mut p = window(32, 300 * MS, |i| i > 0, |i| Some(at(i, 300 * MS)));
        assert_eq!(
            p.on_completion(450 * MS),
            None,
            "150 ms of silence after 256 sectors is not slow"
        );
        assert_eq!(close(&mut p, 550 * MS + 1), Some(8169));
    }

    // "Mostly seeky" is fewer sequential samples than (3 x samples) >> 2, three quarters rounded down: with 33
    // samples that is 24, so 24 sequential ones are enough (the window updates although slower than the peak:
    // 8448 sectors in 309.677 ms, rate 1787, weight 9 x 24 / 33 = 6, x 0.31 = 1, divisor 9: 8296 + 198 = 8494),
    // and 23 are not.
    #[test]
    fn three_quarters_of_the_samples_round_down() {
        let mut p = window(33, 300 * MS, |i| (1..=24).contains(&i), |_| None);
        assert_eq!(close(&mut p, SEC), Some(8494));
        let mut p = window(33, 300 * MS, |i| (1..=23).contains(&i), |_| None);
        assert_eq!(close(&mut p, SEC), None);
    }

    // After a window closed by a completion (at 562.145 ms; no dispatch starts the next window), the next
    // dispatch starts a new window at its own time: 32 dispatches from 600 ms to 900 ms then give the base
    // window's update. (Were the new window started at the completion, it would span 338 ms with 33 samples, and
    // give 8364.)
    #[test]
    fn a_window_closed_by_a_completion_restarts_at_the_next_dispatch() {
        let mut p = window(32, 300 * MS, |i| i > 0, |i| Some(at(i, 300 * MS)));
        assert_eq!(p.on_completion(300 * MS + 262_145 * US), Some(8389));
        p.peak = 9333;
        for i in 0..32u64 {
            let r = p.on_dispatch((1 << 20) + i * 256, 256, 600 * MS + at(i, 300 * MS), u32::from(i > 0));
            assert_eq!(r, None);
        }
        assert_eq!(close(&mut p, 2 * SEC), Some(8389));
    }

    // An estimator given its starting rate (v7r2 starts from its fast reference rate, 17 415 on a rotational disk,
    // where the newest kernel starts from 2/3 of 14 000) starts there, and never at 0, which would make every
    // later rate "faster than the peak".
    #[test]
    fn an_estimator_starts_from_the_rate_it_is_given() {
        assert_eq!(PeakRate::with_peak(true, 17_415).peak, 17_415);
        assert_eq!(PeakRate::with_peak(false, 0).peak, 1);
        assert_eq!(PeakRate::new(false).peak, 22_000);
    }
}
