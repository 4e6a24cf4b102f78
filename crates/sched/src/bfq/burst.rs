//! Large-burst detection (`bfq_handle_burst`, `bfq_add_to_burst`, `bfq_reset_burst_list`): many queues created close
//! together (a `make -j`, a service manager starting daemons) are not interactive applications, so they must not be
//! weight-raised.

use super::ids::QueueId;
use super::Bfq;
use crate::types::{Time, MS, SEC};

/// Queues created within this time (ns) of the previous one, in the same group, belong to the same burst: 180 ms.
pub const BURST_INTERVAL: Time = 180 * MS;

/// A burst of this many queues is large (`bfq_large_burst_thresh`).
pub const LARGE_BURST_THRESH: usize = 8;

/// A queue idle for this long (ns) leaves the large burst: 10 s.
pub const BURST_CLEAR_IDLE: Time = 10 * SEC;

/// Device-wide burst state.
#[derive(Debug, Clone, Default)]
pub struct BurstState {
    /// Queues in the current burst, while it is not yet large.
    pub list: Vec<QueueId>,
    /// Queues in the current burst.
    pub size: usize,
    /// The current burst is large.
    pub large: bool,
    /// Creation time of the last queue of the burst (ns).
    pub last_ins: Option<Time>,
    /// Group of the burst.
    pub group: u32,
}

/// Per-queue burst flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueBurst {
    /// Part of a large burst: never raised, idled for only when it boosts throughput.
    pub in_large_burst: bool,
    /// On the burst list.
    pub in_list: bool,
    /// Creation time (ns).
    pub created: Time,
}

impl QueueBurst {
    /// Flags of a queue created at `now`.
    pub fn new(now: Time) -> Self {
        QueueBurst {
            in_large_burst: false,
            in_list: false,
            created: now,
        }
    }
}

impl Bfq {
    /// `bfq_handle_burst` for a just-created sync queue.
    ///
    /// As in the kernel, a new queue is considered only while a burst is in progress (its size is not 0) or no
    /// queue is busy; a queue that comes too late for the current burst (or from another group) resets it, and
    /// starts a new burst of one only if no queue is busy, else leaves the size at 0. So under background I/O
    /// the queues of an application started later are not counted, and can be raised.
    pub(crate) fn burst_on_new_queue(&mut self, q: QueueId, now: Time) {
        if !self.rules.burst_detection || !self.p.low_latency || self.q(q).burst.in_large_burst {
            return;
        }
        if self.burst.size == 0 && self.busy_queues > 0 {
            return;
        }
        let g = self.q(q).group;
        let running = self
            .burst
            .last_ins
            .is_some_and(|t| now <= t.saturating_add(BURST_INTERVAL));
        if !running || g != self.burst.group {
            for old in std::mem::take(&mut self.burst.list) {
                if let Some(o) = self.queues.get_mut(old.slot()).and_then(Option::as_mut) {
                    o.burst.in_list = false;
                }
            }
            self.burst.large = false;
            self.burst.group = g;
            if self.busy_queues == 0 {
                self.burst.list.push(q);
                self.qm(q).burst.in_list = true;
                self.burst.size = 1;
            } else {
                self.burst.size = 0;
            }
        } else {
            self.burst.size += 1;
            if self.burst.large {
                self.qm(q).burst.in_large_burst = true;
            } else if self.burst.size >= LARGE_BURST_THRESH {
                self.burst.large = true;
                for old in std::mem::take(&mut self.burst.list) {
                    if let Some(o) = self.queues.get_mut(old.slot()).and_then(Option::as_mut) {
                        o.burst.in_list = false;
                        o.burst.in_large_burst = true;
                    }
                }
                self.qm(q).burst.in_large_burst = true;
            } else {
                self.burst.list.push(q);
                self.qm(q).burst.in_list = true;
            }
        }
        self.burst.last_ins = Some(now);
    }

    /// A queue idle for [`BURST_CLEAR_IDLE`] leaves its large burst.
    pub(crate) fn burst_maybe_clear(&mut self, q: QueueId, now: Time) {
        let qq = self.q(q);
        if qq.burst.in_large_burst
            && qq
                .became_idle_at
                .is_some_and(|t| now > t.saturating_add(BURST_CLEAR_IDLE))
        {
            self.qm(q).burst.in_large_burst = false;
        }
    }

    /// A queue is freed: drop it from the burst list. Its process has exited (a queue is freed only then), so it
    /// no longer counts in the burst's size either (`bfq_put_queue`).
    pub(crate) fn burst_forget(&mut self, q: QueueId) {
        if self.q(q).burst.in_list {
            self.burst.list.retain(|&x| x != q);
            self.qm(q).burst.in_list = false;
            self.burst.size = self.burst.size.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::ids::QueueId;
    use super::super::tests::bfq;
    use super::*;
    use crate::device::DeviceInfo;
    use crate::types::{FlowId, FlowInfo};

    fn new_sync_queue(b: &mut Bfq, flow: u32, now: Time) -> QueueId {
        let q = b.new_queue(0, &FlowInfo::new(FlowId(flow)), true, now);
        b.burst_on_new_queue(q, now);
        q
    }

    // Queues created less than 180 ms apart join one burst; the list grows until the eighth makes the burst
    // large, at which point every member is flagged and the list is emptied; later members are flagged at once.
    #[test]
    fn burst_grows_within_the_interval_and_turns_large_at_the_threshold() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let mut qs = Vec::new();
        for i in 0..LARGE_BURST_THRESH - 1 {
            qs.push(new_sync_queue(&mut b, i as u32, i as Time * 170 * MS));
        }
        assert_eq!(b.burst.list, qs);
        assert_eq!(b.burst.size, LARGE_BURST_THRESH - 1);
        assert!(!b.burst.large);
        assert!(qs.iter().all(|&q| b.q(q).burst.in_list && !b.q(q).burst.in_large_burst));
        let t = (LARGE_BURST_THRESH - 1) as Time * 170 * MS;
        let eighth = new_sync_queue(&mut b, 100, t);
        qs.push(eighth);
        assert!(b.burst.large);
        assert!(b.burst.list.is_empty());
        assert!(qs.iter().all(|&q| b.q(q).burst.in_large_burst && !b.q(q).burst.in_list));
        let ninth = new_sync_queue(&mut b, 101, t + 100 * MS);
        assert!(b.q(ninth).burst.in_large_burst);
        assert_eq!(b.burst.size, LARGE_BURST_THRESH + 1);
    }

    // A queue created more than 180 ms after the previous one starts a new burst of one.
    #[test]
    fn a_gap_longer_than_the_interval_starts_a_new_burst() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        for i in 0..3 {
            new_sync_queue(&mut b, i, Time::from(i) * 10 * MS);
        }
        assert_eq!(b.burst.size, 3);
        let late = new_sync_queue(&mut b, 9, 20 * MS + BURST_INTERVAL + 1);
        assert_eq!(b.burst.list, vec![late]);
        assert_eq!(b.burst.size, 1);
    }

    // Bug 3 of fidelity.md §1: a new queue counts towards a burst only while one is in progress or no queue is
    // busy. With a background queue busy and no burst in progress, ten queues created 10 ms apart (an
    // application spawning processes) stay out of any burst and none is marked as in a large burst, so they
    // can be raised; the same ten on an idle device form a large burst.
    #[test]
    fn new_queues_under_background_io_do_not_form_a_burst() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let bg = new_sync_queue(&mut b, 1000, 0);
        b.add_busy(bg);
        let later = BURST_INTERVAL + SEC;
        let qs: Vec<_> = (0..10)
            .map(|i| new_sync_queue(&mut b, i, later + Time::from(i) * 10 * MS))
            .collect();
        assert!(qs.iter().all(|&q| !b.q(q).burst.in_large_burst));
        assert_eq!(b.burst.size, 0);
        let mut idle = bfq(&DeviceInfo::hdd(), &[]);
        let qs: Vec<_> = (0..10)
            .map(|i| new_sync_queue(&mut idle, i, Time::from(i) * 10 * MS))
            .collect();
        assert!(qs.iter().all(|&q| idle.q(q).burst.in_large_burst));
    }

    // A queue of the burst list that is freed (its process exited) no longer counts in the burst's size.
    #[test]
    fn a_freed_member_leaves_the_burst_size() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let qs: Vec<_> = (0..3).map(|i| new_sync_queue(&mut b, i, Time::from(i) * MS)).collect();
        assert_eq!(b.burst.size, 3);
        b.burst_forget(qs[1]);
        assert_eq!(b.burst.size, 2);
    }

    // Without low_latency nothing is tracked.
    #[test]
    fn no_tracking_without_low_latency() {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        for i in 0..10 {
            new_sync_queue(&mut b, i, Time::from(i) * MS);
        }
        assert!(b.burst.list.is_empty());
        assert_eq!(b.burst.size, 0);
    }

    // The kernel's figures, written out rather than taken from the constants (cargo-mutants, issue 21: a test that
    // reads `BURST_CLEAR_IDLE` cannot notice `10 * SEC` becoming `10 + SEC`): a member idle for 9 s keeps its
    // large-burst flag, so it is still not raised; queues created 170 ms apart form one burst and 190 ms apart do not.
    #[test]
    fn a_large_burst_member_idle_for_nine_seconds_stays_and_the_interval_is_180_ms() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let q = new_sync_queue(&mut b, 1, 0);
        b.qm(q).burst.in_large_burst = true;
        b.qm(q).became_idle_at = Some(SEC);
        b.burst_maybe_clear(q, 10 * SEC);
        assert!(b.q(q).burst.in_large_burst, "idle for 9 s");
        b.burst_maybe_clear(q, 11 * SEC + 1);
        assert!(!b.q(q).burst.in_large_burst, "idle for 10 s + 1 ns");
        for (gap, same) in [(170 * MS, true), (190 * MS, false)] {
            let mut b = bfq(&DeviceInfo::hdd(), &[]);
            new_sync_queue(&mut b, 1, 0);
            new_sync_queue(&mut b, 2, gap);
            assert_eq!(b.burst.size == 2, same, "created {gap} ns apart");
        }
    }

    // A member of a large burst leaves it only after being idle for more than 10 s; a freed queue leaves the list.
    #[test]
    fn large_burst_flag_clears_after_ten_idle_seconds_and_freed_queues_leave_the_list() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let q = new_sync_queue(&mut b, 1, 0);
        b.qm(q).burst.in_large_burst = true;
        b.qm(q).became_idle_at = Some(SEC);
        b.burst_maybe_clear(q, SEC + BURST_CLEAR_IDLE);
        assert!(b.q(q).burst.in_large_burst, "exactly 10 s is not more than 10 s");
        b.burst_maybe_clear(q, SEC + BURST_CLEAR_IDLE + 1);
        assert!(!b.q(q).burst.in_large_burst);
        let r = new_sync_queue(&mut b, 2, SEC + BURST_CLEAR_IDLE + 2);
        assert_eq!(b.burst.list, vec![r]);
        b.burst_forget(r);
        assert!(b.burst.list.is_empty());
        assert!(!b.q(r).burst.in_list);
    }
}
