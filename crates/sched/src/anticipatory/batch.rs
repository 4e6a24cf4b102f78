//! The adaptive size of AS write batches (kernel: `update_write_batch`; docs/SCHEDULERS.md, anticipatory).

use crate::types::{Time, MS};

/// Smallest initial write batch, requests (2): a write batch of one request would make every switch to writes cost
/// two direction changes for a single request.
pub const MIN_INITIAL_WRITE_BATCH: u32 = 2;

/// Smallest write batch after adaptation, requests: a write batch must be able to dispatch something.
pub const MIN_WRITE_BATCH: u32 = 1;

/// The initial write batch is `write_batch_expire` in ms (jiffies at HZ=1000) divided by this (10): AS's starting
/// guess, adapted from then on.
pub const WRITE_BATCH_DIVISOR: Time = 10;

/// Write-batch request budget: how many async requests one write batch may dispatch, adapted so that a write batch
/// takes about `write_batch_expire`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteBatch {
    /// Requests a write batch may dispatch (the adaptive `write_batch_count`).
    pub count: u32,
    /// Requests left in the current write batch (counts down on each async dispatch).
    pub left: u32,
    /// The current write batch ran out of work while no reads waited: its duration says nothing about the device.
    pub idled: bool,
    /// When the current (or last) write batch started, ns.
    pub started: Time,
}

impl WriteBatch {
    /// The initial budget for a write batch time of `target` ns: `target` in ms divided by 10, at least 2 requests.
    /// With the default 125 ms this is 12 requests.
    pub fn new(target: Time) -> Self {
        let count = u32::try_from(target / MS / WRITE_BATCH_DIVISOR).unwrap_or(u32::MAX);
        let count = count.max(MIN_INITIAL_WRITE_BATCH);
        WriteBatch {
            count,
            left: 0,
            idled: false,
            started: 0,
        }
    }

    /// A write batch starts at `now`.
    pub fn start(&mut self, now: Time) {
        self.left = self.count;
        self.idled = false;
        self.started = now;
    }

    /// Adapts `count` when the next read batch starts, given the write batch's time `took` ns as the kernel reads it
    /// ([`write_time`]) and the target `target` ns:
    /// - the batch took longer than the target (and did not go idle): halve if more than 3x the target, else -1;
    /// - it took less and used its whole count: double if the target is more than 3x the time taken, else +1.
    pub fn adapt(&mut self, took: Time, target: Time) {
        if took > target && !self.idled {
            if took > target.saturating_mul(3) {
                self.count /= 2;
            } else {
                // Not a counter: the adaptive batch length shrinks by one step and may legitimately reach zero.
                self.count = self.count.saturating_sub(1);
            }
        } else if took < target && self.left == 0 {
            if target > took.saturating_mul(3) {
                self.count = self.count.saturating_mul(2);
            } else {
                self.count = self.count.saturating_add(1);
            }
        }
        self.count = self.count.max(MIN_WRITE_BATCH);
    }
}

/// The write batch's duration as 2.6.32's `update_write_batch` computes it at the first completion of the next read
/// batch: `now - batch_expires + write_batch_expire`, clamped at 0.
///
/// This departs from the documented intent (the time the write batch took). When the last write of the batch
/// completes with reads waiting, the completion path sets the batch expiry to the *read* batch's end (`now +
/// read_batch_expire`) before the first read completes, so the result is about `write_batch_expire -
/// read_batch_expire` plus the first read's service time: negative with the defaults (125 - 500 ms), hence 0. A
/// write batch that used its whole count then always looks fast and `write_batch_count` doubles; it shrinks only
/// when the switch happened in the dispatch path, where the expiry still holds the write batch's own end and the
/// formula gives the true time. Faithful to the code the seeds ran, not to its intent.
pub fn write_time(now: Time, batch_expires: Time, write_batch_expire: Time) -> Time {
    now.saturating_add(write_batch_expire).saturating_sub(batch_expires)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: Time = 125 * MS;

    #[test]
    fn write_time_is_read_from_the_batch_expiry() {
        // Switched in the dispatch path: the expiry is the write batch's own end (start + 125 ms), so 300 ms after
        // the start the time is 300 ms.
        assert_eq!(write_time(1300 * MS, 1000 * MS + TARGET, TARGET), 300 * MS);
        // Switched on the last write's completion: the expiry is the read batch's end (500 ms later), so a read that
        // completes 5 ms after the switch gives 125 + 5 - 500 < 0, clamped to 0.
        assert_eq!(write_time(1005 * MS, 1500 * MS, TARGET), 0);
    }

    #[test]
    fn a_full_batch_that_looks_instant_doubles() {
        let mut w = WriteBatch::new(TARGET);
        w.start(0);
        w.left = 0;
        w.adapt(write_time(1005 * MS, 1500 * MS, TARGET), TARGET);
        assert_eq!(w.count, 24, "a zero write time always looks fast");
    }

    #[test]
    fn initial_count_is_a_tenth_of_the_batch_time_in_ms() {
        // 125 ms -> 12 requests; 10 ms -> 1, raised to the minimum of 2.
        assert_eq!(WriteBatch::new(TARGET).count, 12);
        assert_eq!(WriteBatch::new(10 * MS).count, 2);
        assert_eq!(WriteBatch::new(0).count, 2);
    }

    fn after(count: u32, left: u32, idled: bool, took: Time) -> u32 {
        let mut w = WriteBatch::new(TARGET);
        w.count = count;
        w.start(1000 * MS);
        w.left = left;
        w.idled = idled;
        w.adapt(took, TARGET);
        w.count
    }

    #[test]
    fn slow_batches_shrink() {
        // More than 3x the target (400 ms > 375 ms): halve. Between the target and 3x: one fewer.
        assert_eq!(after(12, 0, false, 400 * MS), 6);
        assert_eq!(after(12, 0, false, 200 * MS), 11);
        // An idled batch's time says nothing about the device: unchanged.
        assert_eq!(after(12, 0, true, 400 * MS), 12);
        // Never below one request.
        assert_eq!(after(1, 0, false, 400 * MS), 1);
    }

    #[test]
    fn fast_full_batches_grow() {
        // The whole count used in 40 ms (the target 125 ms > 3 * 40 ms): double. In 100 ms: one more.
        assert_eq!(after(12, 0, false, 40 * MS), 24);
        assert_eq!(after(12, 0, false, 100 * MS), 13);
        // Fast but not using its count (ran out of writes): unchanged.
        assert_eq!(after(12, 5, false, 40 * MS), 12);
    }

    // A batch that took exactly its target neither shrinks nor grows (`update_write_batch` compares strictly both
    // ways): 125 ms with the whole count used, 12 stays 12.
    #[test]
    fn a_batch_on_target_keeps_its_count() {
        assert_eq!(after(12, 0, false, TARGET), 12);
        // Exactly 3x the target (375 ms) is not "more than 3x": one fewer, 11, not halved.
        assert_eq!(after(12, 0, false, 3 * TARGET), 11);
        // A target exactly 3x the time taken (120 ms, 40 ms) is not "more than 3x": one more, 13, not doubled.
        let mut w = WriteBatch::new(TARGET);
        w.start(0);
        w.left = 0;
        w.adapt(40 * MS, 120 * MS);
        assert_eq!(w.count, 13);
    }
}
