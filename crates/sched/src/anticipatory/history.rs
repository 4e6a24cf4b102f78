//! Per-process I/O history for anticipation: think time and seek distance as decaying averages in fixed point, plus
//! the scheduler-wide statistics used for processes that have no history yet (kernel: `as_update_thinktime`,
//! `as_update_seekdist`, `as_update_iohist`; docs/SCHEDULERS.md, anticipatory).

use crate::types::{Time, MS};

/// Fixed-point one: sample counts and totals are scaled by 256 so that the 7/8 decay keeps precision in integers.
pub const FIXED_ONE: u64 = 256;

/// Think time cap, ns (20 ms, the kernel's `MAX_THINKTIME`): a longer pause (the process slept) counts as 20 ms, so a
/// single long sleep cannot dominate the average.
pub const MAX_THINKTIME: Time = 20 * MS;

/// Decayed sample count (fixed point) up to which a process is "young" and its seek samples get the loose clamp.
/// 60/256 is reached after the second decayed sample, so only the first seeks of a process use the loose clamp.
pub const YOUNG_SEEK_SAMPLES: u64 = 60;

/// Slack added to `4 * mean` when clamping a young process's seek sample, sectors (2097152 = 1 GiB): early samples
/// are allowed to be large so a process that starts far away is not mistaken for a sequential one.
pub const YOUNG_SEEK_SLACK: u64 = 2 * 1024 * 1024;

/// Slack added to `4 * mean` when clamping a settled process's seek sample, sectors (131072 = 64 MiB): an odd
/// fragment or page-in far away does not destroy an otherwise small mean.
pub const SETTLED_SEEK_SLACK: u64 = 2 * 1024 * 64;

/// One half in fixed point (128 = 0.5 x [`FIXED_ONE`]): the threshold of the exit estimates ("more than 50 %").
pub const HALF: u64 = FIXED_ONE / 2;

/// The jiffy (ns) in which `as_update_thinktime` counts its rounding term: 1 ms, HZ=1000 as everywhere in this
/// policy (its timers and tunables are those of HZ=1000; it takes no timer tick).
pub const THINK_JIFFY: Time = MS;

/// Decays `old` by 7/8 and adds 1/8 of `sample` (both already in the same scale).
fn ewma(old: u64, sample: u64) -> u64 {
    (old.saturating_mul(7).saturating_add(sample)) / 8
}

/// A decaying average: `samples` and `total` are fixed point (x [`FIXED_ONE`]), `mean` is in the sample's unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Decaying {
    /// Decayed number of samples, x 256; 0 means "no history".
    pub samples: u64,
    /// Decayed sum of samples, x 256.
    pub total: u64,
    /// Rounded mean, in the unit of the samples.
    pub mean: u64,
}

impl Decaying {
    /// Adds one sample (in the unit of the mean); the mean is rounded to the nearest unit (`as_update_seekdist`:
    /// `(total + samples / 2) / samples`).
    pub fn add(&mut self, sample: u64) {
        self.decay_in(sample);
        self.mean = self.total.saturating_add(self.samples / 2) / self.samples.max(1);
    }

    /// Adds one think-time sample (ns) as `as_update_thinktime` does: its mean adds a fixed 128 to the fixed-point
    /// total, half of one jiffy x 256, where the seek mean adds half the decayed count. That is 128 / samples
    /// jiffies above the samples' mean: 4 ms (at [`THINK_JIFFY`]) after a process's first sample (weight 32),
    /// falling towards half a jiffy as the weight settles near 256; so a young process that thinks 2-6 ms is
    /// taken as thinking longer than `antic_expire` (6 ms) and not waited for.
    pub fn add_think(&mut self, sample: Time) {
        self.decay_in(sample);
        self.mean = self.total.saturating_add(FIXED_ONE / 2 * THINK_JIFFY) / self.samples.max(1);
    }

    fn decay_in(&mut self, sample: u64) {
        self.samples = ewma(self.samples, FIXED_ONE);
        // `samples` is at least 32 after the first update, so the callers' division is safe; they guard anyway.
        self.total = ewma(self.total, sample.saturating_mul(FIXED_ONE));
    }
}

/// Scheduler-wide statistics: what a process without history is expected to do, and how processes exit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GlobalHistory {
    /// Decayed think-time total of processes' first samples, ns x 256.
    pub new_ttime_total: u64,
    /// Mean think time expected of a new process, ns.
    pub new_ttime_mean: Time,
    /// Decayed seek total of processes' first samples, sectors x 256.
    pub new_seek_total: u64,
    /// Mean seek distance expected of a new process, sectors.
    pub new_seek_mean: u64,
    /// Estimated probability (x 256) that a process with no think-time history exits instead of issuing more I/O.
    pub exit_prob: u64,
    /// Estimated probability (x 256) that an exited process's anticipation is not rescued by a cooperating process.
    pub exit_no_coop: u64,
}

impl GlobalHistory {
    /// One more observation that a history-less process went away: raise `exit_prob`.
    pub fn saw_exit(&mut self) {
        self.exit_prob = ewma(self.exit_prob, FIXED_ONE);
    }
    /// An exited process's anticipation timed out with nobody cooperating: raise `exit_no_coop`.
    pub fn saw_exit_without_cooperator(&mut self) {
        self.exit_no_coop = ewma(self.exit_no_coop, FIXED_ONE);
    }
    /// A close request from another process rescued an exited process's anticipation: lower `exit_no_coop`.
    pub fn saw_cooperator(&mut self) {
        self.exit_no_coop = ewma(self.exit_no_coop, 0);
    }
}

/// What AS knows about one process (flow).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowHistory {
    /// False once the process has exited.
    pub exited: bool,
    /// A sync request of this process has completed (think time can be measured from `last_end`).
    pub io_running: bool,
    /// The process has issued a sync request (seek distance can be measured from `last_pos`).
    pub io_started: bool,
    /// Completion time of its last sync request, ns.
    pub last_end: Time,
    /// End sector of its last sync request (or of a cooperating process's close request).
    pub last_pos: u64,
    /// Think time: from a sync completion to the next sync arrival while nothing else is outstanding, ns.
    pub ttime: Decaying,
    /// Seek distance between consecutive sync requests, sectors.
    pub seek: Decaying,
    /// Requests of this process queued in the scheduler (merged parts not counted separately).
    pub queued: u32,
    /// Requests of this process on the device.
    pub in_flight: u32,
}

impl FlowHistory {
    /// Records the arrival of a sync request `[sector, end)` at `now` in this process's history (the kernel's
    /// `as_update_iohist`). Also used when a close request of another process cooperates with this one.
    pub fn record_sync_arrival(&mut self, global: &mut GlobalHistory, sector: u64, end: u64, now: Time) {
        if self.io_running || self.io_started {
            // Outstanding as the kernel counts it (`as_update_iohist`): queued, plus on the dispatch list and not yet
            // fetched by the driver, which is always empty here; requests on the device do not count.
            let outstanding = self.queued;
            let think = if self.io_running && outstanding == 0 {
                now.saturating_sub(self.last_end).min(MAX_THINKTIME)
            } else {
                0
            };
            self.add_think_time(global, think);
            self.add_seek(global, sector.abs_diff(self.last_pos));
        }
        self.last_pos = end;
        self.io_started = true;
    }

    fn add_think_time(&mut self, global: &mut GlobalHistory, think: Time) {
        if self.ttime.samples == 0 {
            // A process's first sample also feeds the expectation for new processes, and shows it did not exit.
            global.new_ttime_total = ewma(global.new_ttime_total, think.saturating_mul(FIXED_ONE));
            global.new_ttime_mean = global.new_ttime_total / FIXED_ONE;
            global.exit_prob = ewma(global.exit_prob, 0);
        }
        self.ttime.add_think(think);
    }

    fn add_seek(&mut self, global: &mut GlobalHistory, dist: u64) {
        if self.seek.samples == 0 {
            global.new_seek_total = ewma(global.new_seek_total, dist.saturating_mul(FIXED_ONE));
            global.new_seek_mean = global.new_seek_total / FIXED_ONE;
        }
        let slack = if self.seek.samples <= YOUNG_SEEK_SAMPLES {
            YOUNG_SEEK_SLACK
        } else {
            SETTLED_SEEK_SLACK
        };
        let cap = self.seek.mean.saturating_mul(4).saturating_add(slack);
        self.seek.add(dist.min(cap));
    }

    /// True if AS may forget this process: exited and nothing of it left in the scheduler or on the device.
    pub fn idle_and_gone(&self) -> bool {
        self.exited && self.queued == 0 && self.in_flight == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decaying_mean_converges_to_the_sample() {
        // A constant sample gives that mean at once (first update). Later, integer decay settles the sample count
        // at 249 instead of 256 while the total settles just below 256 * sample, which biases the mean up by under
        // 3 %: inherent in the 7/8 fixed-point average, and harmless for comparisons with antic_expire.
        let mut d = Decaying::default();
        d.add(1000);
        assert_eq!(d.mean, 1000);
        for _ in 0..50 {
            d.add(1000);
            assert!((1000..=1030).contains(&d.mean), "mean {}", d.mean);
        }
        assert!(d.samples > 240 && d.samples <= FIXED_ONE);
    }

    #[test]
    fn think_time_is_capped_and_only_counted_when_idle() {
        // The first request gives no sample (no previous completion); a 50 ms pause counts as MAX_THINKTIME.
        let mut g = GlobalHistory::default();
        let mut f = FlowHistory::default();
        f.record_sync_arrival(&mut g, 0, 8, 0);
        assert_eq!(f.ttime.samples, 0);
        f.io_running = true;
        f.last_end = 10 * MS;
        f.record_sync_arrival(&mut g, 8, 16, 60 * MS);
        // The kernel's mean after one sample of 20 jiffies: (256 x 20 / 8 + 128) / 32 = 24 jiffies.
        assert_eq!(f.ttime.mean, MAX_THINKTIME + 4 * MS);
        assert_eq!(g.new_ttime_mean, MAX_THINKTIME / 8);
        // A request on the device does not make the sample 0 (the kernel counts queued requests and those not yet
        // fetched by the driver, never those on the device): a reader with readahead in flight still thinks.
        f.in_flight = 1;
        f.last_end = 58 * MS;
        let before = f.ttime;
        f.record_sync_arrival(&mut g, 16, 24, 61 * MS);
        assert!(f.ttime.samples > before.samples && f.ttime.mean > 0, "{:?}", f.ttime);
        // With a request queued the sample is 0: the process did not wait for its I/O.
        f.queued = 1;
        let before = f.ttime.mean;
        f.record_sync_arrival(&mut g, 24, 32, 62 * MS);
        assert!(f.ttime.mean < before);
    }

    #[test]
    fn seek_samples_are_clamped() {
        // A young process's huge seek is clamped to 4*mean + 2097152 sectors; a settled one's to 4*mean + 131072.
        let mut g = GlobalHistory::default();
        let mut f = FlowHistory {
            io_started: true,
            ..FlowHistory::default()
        };
        f.record_sync_arrival(&mut g, 1 << 40, (1 << 40) + 8, 0);
        assert_eq!(f.seek.mean, YOUNG_SEEK_SLACK);
        let mut s = FlowHistory {
            io_started: true,
            ..FlowHistory::default()
        };
        for i in 0..40u64 {
            s.record_sync_arrival(&mut g, i * 8, i * 8 + 8, 0);
        }
        assert!(s.seek.samples > YOUNG_SEEK_SAMPLES);
        let before = s.seek.mean;
        s.record_sync_arrival(&mut g, 1 << 40, (1 << 40) + 8, 0);
        // The new mean moves by about 1/8 of the clamped sample (4*mean + 131072), not by 1/8 of 2^40 sectors.
        assert!(s.seek.mean <= before + (4 * before + SETTLED_SEEK_SLACK) / 7);
    }

    // The clamps written out as the kernel's figures (`as_update_seekdist`: 2*1024*1024 and 2*1024*64 sectors),
    // not read from the constants, so a wrong constant fails here. A process's first seek of 2^40 sectors counts as
    // 2 097 152 (its mean then); a settled sequential reader's (mean 0, three samples: weight 84 > 60) counts as
    // 131 072, which moves its mean to (131 072 x 256 / 8 + 52) / 105 = 39 946 sectors.
    #[test]
    fn the_seek_clamps_are_the_kernels_figures() {
        let mut g = GlobalHistory::default();
        let mut young = FlowHistory {
            io_started: true,
            ..FlowHistory::default()
        };
        young.record_sync_arrival(&mut g, 1 << 40, (1 << 40) + 8, 0);
        assert_eq!(young.seek.mean, 2_097_152);
        let mut settled = FlowHistory {
            io_started: true,
            ..FlowHistory::default()
        };
        for i in 0..3u64 {
            settled.record_sync_arrival(&mut g, i * 8, i * 8 + 8, 0);
        }
        assert_eq!((settled.seek.samples, settled.seek.mean), (84, 0));
        settled.record_sync_arrival(&mut g, 1 << 40, (1 << 40) + 8, 0);
        assert_eq!(settled.seek.mean, 39_946);
    }

    // The mean is rounded to the nearest unit (total + samples / 2, as `as_update_seekdist` rounds): samples of 0
    // then 1 give a weight of 60 and a total of 32, a mean of 32 / 60 = 0.53, rounded to 1.
    #[test]
    fn the_mean_is_rounded_to_nearest() {
        let mut d = Decaying::default();
        d.add(0);
        d.add(1);
        assert_eq!((d.samples, d.total, d.mean), (60, 32, 1));
    }

    // A process that issues a read while another of its reads is still queued did not wait for its I/O: its think
    // time sample is 0 (`as_update_iohist` counts think time only with nothing outstanding). Its last completion
    // was 10 ms ago; counted, that 10 ms would put its mean over antic_expire (6 ms) and AS would stop waiting for it.
    #[test]
    fn a_read_issued_with_another_queued_is_a_think_time_of_zero() {
        let mut g = GlobalHistory::default();
        let mut f = FlowHistory {
            io_started: true,
            io_running: true,
            queued: 1,
            ..FlowHistory::default()
        };
        f.record_sync_arrival(&mut g, 8, 16, 10 * MS);
        // A sample of 0 with the kernel's rounding term: (0 + 128) / 32 = 4 jiffies.
        assert_eq!((f.ttime.samples, f.ttime.mean), (32, 4 * MS));
    }

    // `as_update_thinktime`'s mean is `(total + 128) / samples` in jiffies: 128 / samples jiffies above the
    // samples' mean, 4 ms after the first sample, then shrinking as the decayed count grows (32, 60, 84, ...
    // towards 256): a process that always thinks 2 ms is taken as thinking 6 ms after one sample and 2.5 ms once
    // settled. The seek mean rounds to the nearest sector instead (`+ samples / 2`).
    #[test]
    fn the_think_time_mean_carries_the_kernels_rounding_term() {
        let mut d = Decaying::default();
        d.add_think(2 * MS);
        assert_eq!((d.samples, d.mean), (32, 6 * MS));
        d.add_think(2 * MS);
        // samples 60, total 7 x 64 ms / 8 + 64 ms = 120 ms (fixed point): (120 ms + 128 ms) / 60.
        assert_eq!((d.samples, d.mean), (60, 248 * MS / 60));
        for _ in 0..60 {
            d.add_think(2 * MS);
        }
        assert_eq!(d.mean, (d.total + 128 * MS) / d.samples);
        assert!(d.mean > 2 * MS && d.mean < 2 * MS + MS, "settled: {} ns", d.mean);
        let mut seek = Decaying::default();
        seek.add(2000);
        assert_eq!(seek.mean, 2000, "the seek mean has no such term");
    }

    // What new processes are expected to seek (new_seek_mean, used for a process without seek history) is fed by
    // each process's first seek only: 1/8 of a first seek of 8000 sectors gives 1000; that process's second seek
    // (80 000) leaves it alone.
    #[test]
    fn only_a_processs_first_seek_feeds_the_new_process_seek_mean() {
        let mut g = GlobalHistory::default();
        let mut f = FlowHistory::default();
        f.record_sync_arrival(&mut g, 0, 8, 0);
        f.record_sync_arrival(&mut g, 8008, 8016, 0);
        assert_eq!(g.new_seek_mean, 1000);
        f.record_sync_arrival(&mut g, 88_016, 88_024, 0);
        assert_eq!(g.new_seek_mean, 1000);
    }
}
