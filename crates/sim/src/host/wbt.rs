//! Writeback throttling (blk-wbt, Linux 4.10 and later), as a state machine told the time.
//!
//! The kernel enables it by default on blk-mq devices for none, mq-deadline and kyber; BFQ disables it when chosen;
//! the 3.13 (legacy) block layer has none (`../shared/docs/fidelity.md` §4). It limits how many buffered writeback
//! writes may be in flight (from the moment they pass the throttle to their completion) and adapts that limit to
//! the read latency the device shows, in the spirit of CoDel:
//! - **Depth.** From a default of [`DEFAULT_DEPTH`] (at most the device's queue depth), a positive scale step
//!   halves the depth per step (down to 1); a negative one doubles it (up to 3/4 of the queue depth). The limits
//!   are `max_depth`, `normal = (max_depth + 1) / 2` and `background = (max_depth + 3) / 4` (with a depth of 2 or
//!   less: `max_depth` and 1).
//! - **Which limit.** A write gets `max_depth` if a writer was throttled for dirty memory within the last second
//!   ([`RECENT_WAIT`]); else `background` if it is background writeback or a read was issued or completed within
//!   [`CLOSE_IO`]; else `normal`.
//! - **Window.** A window of statistics (reads and writes completed, with their device latency: dispatch to
//!   completion) opens when a throttled write passes and no window is open. At its end the window is judged
//!   *exceeded* if a read dispatched and not yet completed has waited more than the window, or more than the target
//!   ([`WbtConfig::min_lat`]) while no read completed, or if the fastest read of the window took more than the
//!   target: the scale step grows by one (the depth halves; a negative step goes straight to 0). It is judged *ok*
//!   with at least one read and [`MIN_WRITE_SAMPLES`] writes and the fastest read under the target, and *writes
//!   only* without enough samples but with writes completed, in flight or recently throttled: either way the step
//!   shrinks by one (the depth doubles, up to its cap). Otherwise, after [`UNKNOWN_BUMP`] such windows in a row,
//!   the step moves one towards 0. A window with a positive step lasts `window / sqrt(step + 1)`; the next window
//!   opens at once if the step is not 0 or writes are in flight.
//! - **Waking.** A throttled writer is woken when a tracked write completes and no write is in flight, or the
//!   normal limit exceeds the writes in flight by at least half the background limit.
//!
//! Not modelled: discards and kswapd (neither exists in the simulator), and the lower wake-up limit for devices
//! with a volatile write cache when no writer was recently throttled (the simulator's device descriptions do not
//! say whether their cache is volatile; under S's writers the recent-wait rule applies anyway).

use bfq_sched::{Time, MS};

/// Starting depth before scaling, requests (the kernel's `RWB_DEF_DEPTH`).
pub const DEFAULT_DEPTH: u32 = 16;
/// The statistics window at scale step 0 or below, ns (the kernel's `RWB_WINDOW_NSEC`, 100 ms).
pub const WINDOW: Time = 100 * MS;
/// Fewer write completions than this in a window make its statistics unusable (`RWB_MIN_WRITE_SAMPLES`).
pub const MIN_WRITE_SAMPLES: u32 = 3;
/// Consecutive windows without usable statistics before the step moves back towards 0 (`RWB_UNKNOWN_BUMP`).
pub const UNKNOWN_BUMP: u32 = 5;
/// A writer throttled for dirty memory this recently lets writeback use the full depth, ns (one second, `HZ`).
pub const RECENT_WAIT: Time = 1_000 * MS;
/// A read issued or completed this recently keeps writeback at the background limit, ns (`HZ / 10`).
pub const CLOSE_IO: Time = 100 * MS;
/// Read latency target of a rotational device, ns (the kernel's default `wbt_lat_usec`, 75 ms; this machine's vda
/// shows 75000).
pub const ROTATIONAL_TARGET: Time = 75 * MS;
/// Read latency target of a non-rotational device, ns (the kernel's default, 2 ms).
pub const NON_ROTATIONAL_TARGET: Time = 2 * MS;

/// Settings of writeback throttling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WbtConfig {
    /// Read latency target (`wbt_lat_usec`), ns.
    pub min_lat: Time,
    /// The device's queue depth (the kernel's `blk_queue_depth`), requests.
    pub queue_depth: u32,
}

impl WbtConfig {
    /// The kernel's default for a device: [`ROTATIONAL_TARGET`] or [`NON_ROTATIONAL_TARGET`].
    pub fn default_for(rotational: bool, queue_depth: u32) -> WbtConfig {
        WbtConfig {
            min_lat: if rotational {
                ROTATIONAL_TARGET
            } else {
                NON_ROTATIONAL_TARGET
            },
            queue_depth: queue_depth.max(1),
        }
    }
}

/// What the last window concluded (for tests and traces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowVerdict {
    /// Reads were slower than the target: the depth went down.
    Exceeded,
    /// Reads met the target: the depth went up.
    Ok,
    /// Writes without reads: the depth went up.
    WritesOnly,
    /// Not enough to judge.
    Unknown,
}

/// The throttle's state.
#[derive(Debug, Clone)]
pub struct Wbt {
    cfg: WbtConfig,
    scale_step: i32,
    scaled_max: bool,
    max_depth: u32,
    normal: u32,
    background: u32,
    unknown_cnt: u32,
    /// End of the open window, if one is open.
    window_end: Option<Time>,
    reads: u32,
    read_min: Time,
    writes: u32,
    /// The read whose dispatch time is watched (id, dispatch time), until it completes.
    sync_issue: Option<(u64, Time)>,
    last_read: Option<Time>,
    dirty_wait: Option<Time>,
    /// A writer is blocked on the throttle (it needs the wake-up rule to go on).
    blocked: bool,
    /// Windows closed so far, by verdict: exceeded, ok, writes only, unknown.
    pub verdicts: [u64; 4],
}

impl Wbt {
    /// A throttle at scale step 0.
    pub fn new(cfg: WbtConfig) -> Wbt {
        let mut w = Wbt {
            cfg,
            scale_step: 0,
            scaled_max: false,
            max_depth: 0,
            normal: 0,
            background: 0,
            unknown_cnt: 0,
            window_end: None,
            reads: 0,
            read_min: Time::MAX,
            writes: 0,
            sync_issue: None,
            last_read: None,
            dirty_wait: None,
            blocked: false,
            verdicts: [0; 4],
        };
        w.calc();
        w
    }

    fn calc(&mut self) {
        let qd = self.cfg.queue_depth.max(1);
        let mut depth = DEFAULT_DEPTH.min(qd);
        if self.scale_step > 0 {
            depth = 1 + ((depth - 1) >> self.scale_step.min(31));
        } else if self.scale_step < 0 {
            let maxd = (3 * qd / 4).max(1);
            let shift = (-self.scale_step).min(31) as u32;
            depth = (1u64 + (u64::from(depth - 1) << shift)).min(u64::from(u32::MAX)) as u32;
            if depth > maxd {
                depth = maxd;
                self.scaled_max = true;
            }
        }
        self.max_depth = depth;
        if depth <= 2 {
            self.normal = depth;
            self.background = 1;
        } else {
            self.normal = depth.div_ceil(2);
            self.background = depth.div_ceil(4);
        }
    }

    fn scale_up(&mut self) {
        if self.scaled_max {
            return;
        }
        self.scale_step -= 1;
        self.calc();
        self.unknown_cnt = 0;
        self.blocked = false;
    }

    fn scale_down(&mut self, hard: bool) {
        if self.max_depth == 1 {
            return;
        }
        if self.scale_step < 0 && hard {
            self.scale_step = 0;
        } else {
            self.scale_step += 1;
        }
        self.scaled_max = false;
        self.calc();
        self.unknown_cnt = 0;
    }

    /// Current scale step (positive: shallower than the default depth).
    pub fn scale_step(&self) -> i32 {
        self.scale_step
    }

    /// Current maximum depth, requests.
    pub fn max_depth(&self) -> u32 {
        self.max_depth
    }

    /// How many throttled (background writeback) writes may be in flight at `now`.
    pub fn limit(&self, now: Time) -> u32 {
        let recent = |t: Option<Time>, span: Time| t.is_some_and(|t| now < t.saturating_add(span));
        if recent(self.dirty_wait, RECENT_WAIT) {
            self.max_depth
        } else {
            // Background writeback (the simulator's flusher writes only that) gets the background limit.
            self.background
        }
    }

    /// Whether a background writeback write may pass at `now` with `inflight` throttled writes in flight. A writer
    /// that is refused stays blocked until [`Wbt::write_done`] wakes it.
    pub fn may_issue(&mut self, now: Time, inflight: u32) -> bool {
        if self.blocked || inflight >= self.limit(now) {
            self.blocked = true;
            return false;
        }
        true
    }

    /// A throttled write passed at `now`: opens a window if none is open; returns its end if it opened one.
    pub fn write_issued(&mut self, now: Time) -> Option<Time> {
        if self.window_end.is_some() {
            return None;
        }
        Some(self.open_window(now))
    }

    fn open_window(&mut self, now: Time) -> Time {
        let win = if self.scale_step > 0 {
            // window / sqrt(step + 1), with the kernel's fixed point: (window << 4) / isqrt((step + 1) << 8).
            let s = ((self.scale_step as u64 + 1) << 8).isqrt().max(1);
            (WINDOW << 4) / s
        } else {
            WINDOW
        };
        self.reads = 0;
        self.read_min = Time::MAX;
        self.writes = 0;
        let end = now + win;
        self.window_end = Some(end);
        end
    }

    /// A tracked write completed with `inflight` still in flight: whether a blocked writer wakes.
    pub fn write_done(&mut self, inflight: u32) -> bool {
        // The normal limit (no volatile-cache rule, see the module doc).
        let limit = self.normal;
        if !self.blocked || (inflight > 0 && inflight >= limit) {
            return false;
        }
        if inflight == 0 || limit - inflight >= self.background / 2 {
            self.blocked = false;
            return true;
        }
        false
    }

    /// A read was dispatched to the device at `now`.
    pub fn read_dispatched(&mut self, id: u64, now: Time) {
        self.last_read = Some(now);
        if self.sync_issue.is_none() {
            self.sync_issue = Some((id, now));
        }
    }

    /// A request completed at `now` after `latency` ns on the device.
    pub fn completed(&mut self, id: u64, read: bool, latency: Time, now: Time) {
        if read {
            self.last_read = Some(now);
            if self.sync_issue.is_some_and(|(i, _)| i == id) {
                self.sync_issue = None;
            }
            if self.window_end.is_some() {
                self.reads += 1;
                self.read_min = self.read_min.min(latency);
            }
        } else if self.window_end.is_some() {
            self.writes += 1;
        }
    }

    /// A writer was throttled for dirty memory at `now` (`balance_dirty_pages`).
    pub fn dirty_throttled(&mut self, now: Time) {
        self.dirty_wait = Some(now);
    }

    /// Whether a read was issued or completed within [`CLOSE_IO`] of `now` (kept for traces).
    pub fn close_io(&self, now: Time) -> bool {
        self.last_read.is_some_and(|t| now < t.saturating_add(CLOSE_IO))
    }

    /// End of the open window, if any.
    pub fn window_end(&self) -> Option<Time> {
        self.window_end
    }

    /// The window ends at `now` with `inflight` throttled writes in flight: judges it, scales, and returns the end
    /// of the next window if one opens at once (and whether a blocked writer should retry).
    pub fn window_expired(&mut self, now: Time, inflight: u32) -> (Option<Time>, WindowVerdict) {
        if self.window_end.is_none_or(|e| e > now) {
            return (self.window_end, WindowVerdict::Unknown);
        }
        self.window_end = None;
        let cur_win = {
            let s = if self.scale_step > 0 {
                ((self.scale_step as u64 + 1) << 8).isqrt().max(1)
            } else {
                16
            };
            (WINDOW << 4) / s
        };
        let issue_lat = self.sync_issue.map_or(0, |(_, t)| now.saturating_sub(t));
        let recent_wait = self.dirty_wait.is_some_and(|t| now < t.saturating_add(RECENT_WAIT));
        let verdict = if issue_lat > cur_win || (issue_lat > self.cfg.min_lat && self.reads == 0) {
            WindowVerdict::Exceeded
        } else if self.reads == 0 || self.writes < MIN_WRITE_SAMPLES {
            if self.writes > 0 || recent_wait || inflight > 0 {
                WindowVerdict::WritesOnly
            } else {
                WindowVerdict::Unknown
            }
        } else if self.read_min > self.cfg.min_lat {
            WindowVerdict::Exceeded
        } else {
            WindowVerdict::Ok
        };
        match verdict {
            WindowVerdict::Exceeded => {
                self.verdicts[0] += 1;
                self.scale_down(true);
            }
            WindowVerdict::Ok => {
                self.verdicts[1] += 1;
                self.scale_up();
            }
            WindowVerdict::WritesOnly => {
                self.verdicts[2] += 1;
                self.scale_up();
            }
            WindowVerdict::Unknown => {
                self.verdicts[3] += 1;
                self.unknown_cnt += 1;
                if self.unknown_cnt >= UNKNOWN_BUMP {
                    if self.scale_step > 0 {
                        self.scale_up();
                    } else if self.scale_step < 0 {
                        self.scale_down(false);
                    }
                }
            }
        }
        let next = (self.scale_step != 0 || inflight > 0).then(|| self.open_window(now));
        (next, verdict)
    }

    /// Whether a writer is blocked on the throttle.
    pub fn blocked(&self) -> bool {
        self.blocked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depths_follow_the_scale_step() {
        // Step 0 on a deep device: 16, normal 8, background 4. Each step up halves (1 + 15 >> s), down to 1.
        let mut w = Wbt::new(WbtConfig::default_for(false, 256));
        assert_eq!((w.max_depth, w.normal, w.background), (16, 8, 4));
        w.scale_down(true);
        assert_eq!((w.max_depth, w.normal, w.background), (8, 4, 2));
        for _ in 0..10 {
            w.scale_down(true);
        }
        assert_eq!((w.max_depth, w.normal, w.background), (1, 1, 1));
        // Negative steps double up to 3/4 of a shallow device's depth (31 -> 23) and stop there.
        let mut w = Wbt::new(WbtConfig::default_for(true, 31));
        w.scale_up();
        assert_eq!(w.max_depth, 23);
        let step = w.scale_step;
        w.scale_up();
        assert_eq!(w.scale_step, step, "scaled to the maximum: no further");
        // A hard scale-down from a negative step goes straight to step 0.
        w.scale_down(true);
        assert_eq!((w.scale_step, w.max_depth), (0, 16));
    }

    #[test]
    fn slow_reads_halve_the_depth_and_shorten_the_window() {
        let mut w = Wbt::new(WbtConfig::default_for(false, 256));
        let end = w.write_issued(0).expect("opens a window");
        assert_eq!(end, WINDOW);
        for i in 0..MIN_WRITE_SAMPLES as u64 {
            w.completed(100 + i, false, MS, 10 * MS);
        }
        w.read_dispatched(1, 20 * MS);
        w.completed(1, true, 3 * MS, 23 * MS);
        let (next, v) = w.window_expired(end, 4);
        assert_eq!(v, WindowVerdict::Exceeded, "a 3 ms read against a 2 ms target");
        assert_eq!(w.max_depth(), 8);
        // Step 1: window 100 ms / sqrt(2) = 70.7 ms (the kernel's fixed point: 1600 / isqrt(512) = 1600 / 22).
        assert_eq!(next, Some(end + (WINDOW << 4) / 22));
    }
}
