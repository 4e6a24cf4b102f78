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
    pub(crate) fn burst_on_new_queue(&mut self, q: QueueId, now: Time) {
        if !self.p.low_latency || self.q(q).burst.in_large_burst {
            return;
        }
        let g = self.q(q).group;
        let running = self
            .burst
            .last_ins
            .is_some_and(|t| now <= t.saturating_add(BURST_INTERVAL));
        if !running || g != self.burst.group {
            for old in std::mem::take(&mut self.burst.list) {
                if let Some(o) = self.queues.get_mut(old.slot()) {
                    o.burst.in_list = false;
                }
            }
            self.burst.list.push(q);
            self.qm(q).burst.in_list = true;
            self.burst.size = 1;
            self.burst.large = false;
            self.burst.group = g;
        } else {
            self.burst.size += 1;
            if self.burst.large {
                self.qm(q).burst.in_large_burst = true;
            } else if self.burst.size >= LARGE_BURST_THRESH {
                self.burst.large = true;
                for old in std::mem::take(&mut self.burst.list) {
                    if let Some(o) = self.queues.get_mut(old.slot()) {
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

    /// A queue is freed: drop it from the burst list.
    pub(crate) fn burst_forget(&mut self, q: QueueId) {
        if self.q(q).burst.in_list {
            self.burst.list.retain(|&x| x != q);
            self.qm(q).burst.in_list = false;
        }
    }
}
