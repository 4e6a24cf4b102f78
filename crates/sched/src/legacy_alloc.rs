//! Request allocation of the legacy (single-queue) block layer as Linux 3.13 runs it (`block/blk-core.c`:
//! `__get_request`, `get_request`, `__freed_request`, `ioc_batching`, `ioc_set_batching`; docs/SCHEDULERS.md,
//! "Request allocation"), for the legacy elevators (CFQ, deadline, anticipatory, noop).
//!
//! Two pools, sync and async, of `nr_requests` = 128 ([`BLKDEV_MAX_RQ`]) each. A pool counts its requests:
//! - once an allocation would bring it to 7/8 of `nr_requests` + 1 ([`congestion_on`]) the queue is *congested* in
//!   that direction (async readahead is skipped on a read-congested queue), until it drops below 13/16 - 1
//!   ([`congestion_off`]);
//! - an allocation that fills the pool marks it *full* and makes the allocating task a *batcher*: it may take up
//!   to [`BATCH_REQUESTS`] (32) more requests within [`BATCH_TIME`] (20 ms); while the pool is full, a task that is
//!   not a batcher, and that the elevator does not exempt (CFQ's `ELV_MQUEUE_MUST`), waits;
//! - nobody allocates past 3/2 x `nr_requests` ([`hard_cap`]);
//! - a task that waited is woken (one at a time, in FIFO order: the exclusive wait queue) when a request of its
//!   pool is freed and the pool is below `nr_requests`, and becomes a batcher;
//! - the pool stops being full once a free brings it to at most `nr_requests` - 1.
//!
//! A bio that merges into a queued request takes no request at all: the simulator asks the policy
//! ([`crate::Scheduler::would_merge`]) before allocating.

use crate::merge::IntMap;
use crate::types::{FlowId, Time, MS};

/// `BLKDEV_MAX_RQ`: requests per pool (sync, async) of a legacy queue, the default of sysfs `nr_requests`.
pub const BLKDEV_MAX_RQ: u32 = 128;

/// `q->nr_batching` (`BLK_BATCH_REQ`): requests a batching task may allocate past a full pool.
pub const BATCH_REQUESTS: u32 = 32;

/// `BLK_BATCH_TIME` (`HZ / 50`): how long a task stays a batcher after it was made one, ns.
pub const BATCH_TIME: Time = 20 * MS;

/// `queue_congestion_on_threshold`: an allocation that brings the pool to this count (or more) marks the queue
/// congested: `nr - nr/8 + 1` (113 for 128).
pub fn congestion_on(nr: u32) -> u32 {
    (nr - nr / 8 + 1).min(nr)
}

/// `queue_congestion_off_threshold`: the congestion ends when a free brings the pool below this count:
/// `nr - nr/8 - nr/16 - 1` (103 for 128), at least 1.
pub fn congestion_off(nr: u32) -> u32 {
    nr.saturating_sub(nr / 8 + nr / 16 + 1).max(1)
}

/// The hard cap: no pool holds more than `3 * nr / 2` requests (192 for 128), batchers included.
pub fn hard_cap(nr: u32) -> u32 {
    3 * nr / 2
}

/// A task's batching allowance (`ioc->nr_batch_requests`, `ioc->last_waited`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Batch {
    left: u32,
    since: Time,
}

/// The allocation state of one legacy pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LegacyPool {
    /// The pool filled up (`blk_rl_full`): only batchers and exempted tasks allocate.
    pub full: bool,
    /// The queue is congested in this direction (`blk_set_congested`).
    pub congested: bool,
}

/// The legacy allocator's state: both pools' flags and the tasks' batching allowances.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LegacyAlloc {
    /// Sync pool (index 1) and async pool (index 0), as the kernel indexes `rl->count[is_sync]`.
    pub pools: [LegacyPool; 2],
    /// Keyed with the fast integer hash: looked up at every allocation, never iterated.
    batches: IntMap<FlowId, Batch>,
}

impl LegacyAlloc {
    /// Whether `flow` is a batcher at `now` (`ioc_batching`): it was just made one (its whole allowance left), or
    /// it has allowance left and was made one less than [`BATCH_TIME`] ago.
    pub fn is_batching(&self, flow: FlowId, now: Time) -> bool {
        self.batches
            .get(&flow)
            .is_some_and(|b| b.left == BATCH_REQUESTS || (b.left > 0 && now < b.since.saturating_add(BATCH_TIME)))
    }

    /// Makes `flow` a batcher (`ioc_set_batching`): a full allowance from `now`.
    pub fn set_batching(&mut self, flow: FlowId, now: Time) {
        self.batches.insert(
            flow,
            Batch {
                left: BATCH_REQUESTS,
                since: now,
            },
        );
    }

    /// `__get_request`'s decision for `flow` in the pool (`sync`) that holds `count` requests of `nr` each:
    /// whether it may allocate now; on success the pool's flags and the task's allowance are updated as the
    /// kernel updates them. `must` is the elevator's exemption (CFQ's `ELV_MQUEUE_MUST`).
    pub fn try_allocate(&mut self, sync: bool, count: u32, nr: u32, flow: FlowId, now: Time, must: bool) -> bool {
        let p = usize::from(sync);
        let batching = self.is_batching(flow, now);
        let mut becomes_batcher = false;
        // The allocation that fills the pool (congestion_on <= nr, so this is inside the congested range).
        if count + 1 >= nr {
            if !self.pools[p].full {
                becomes_batcher = true;
            } else if !must && !batching {
                return false;
            }
        }
        if count >= hard_cap(nr) {
            return false;
        }
        if becomes_batcher {
            self.set_batching(flow, now);
            self.pools[p].full = true;
        }
        if count + 1 >= congestion_on(nr) {
            self.pools[p].congested = true;
        }
        // Still batching: `flow`'s entry is unchanged since `batching` was read, or was just (re)set to a full batch.
        if batching || becomes_batcher {
            if let Some(b) = self.batches.get_mut(&flow) {
                b.left = b.left.saturating_sub(1);
            }
        }
        true
    }

    /// A request of the pool (`sync`) was freed; `count` is the pool's count after the free (`__freed_request`).
    /// Returns whether a waiter may be woken (the pool is below `nr` again).
    pub fn freed(&mut self, sync: bool, count: u32, nr: u32) -> bool {
        let p = usize::from(sync);
        if count < congestion_off(nr) {
            self.pools[p].congested = false;
        }
        if count < nr {
            self.pools[p].full = false;
            true
        } else {
            false
        }
    }

    /// Forgets the allowance of an exited task.
    pub fn forget(&mut self, flow: FlowId) {
        self.batches.remove(&flow);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NR: u32 = BLKDEV_MAX_RQ;

    #[test]
    fn thresholds_of_128() {
        assert_eq!(congestion_on(NR), 113);
        assert_eq!(congestion_off(NR), 103);
        assert_eq!(hard_cap(NR), 192);
    }

    /// One task fills the pool: the allocation of the 128th request marks it full and makes the task a batcher,
    /// which takes 32 more (160 in all) within 20 ms; another task waits meanwhile; nobody passes 192.
    #[test]
    fn the_task_that_fills_the_pool_batches_32_more() {
        let mut a = LegacyAlloc::default();
        let (w, other) = (FlowId(1), FlowId(2));
        let mut count = 0;
        while a.try_allocate(false, count, NR, w, 0, false) {
            count += 1;
            assert!(count <= 200);
        }
        // 127 ordinary allocations, the 128th fills the pool (and starts the batch: allowance 32 - 1 used by it),
        // then 31 more while the batch lasts.
        assert_eq!(count, NR + BATCH_REQUESTS - 1);
        assert!(a.pools[0].full && a.pools[0].congested);
        assert!(
            !a.try_allocate(false, count, NR, other, 0, false),
            "not a batcher: waits"
        );
        assert!(
            a.try_allocate(false, count, NR, other, 0, true),
            "exempted by the elevator"
        );
        // The sync pool is untouched: a reader allocates at once.
        assert!(a.try_allocate(true, 0, NR, FlowId(3), 0, false));
    }

    #[test]
    fn a_woken_waiter_batches_up_to_the_hard_cap() {
        let mut a = LegacyAlloc::default();
        a.pools[0].full = true;
        a.set_batching(FlowId(1), 0);
        // Woken and made a batcher with a pool of 180: it gets 12 more, then the cap (192) stops it.
        let mut count = 180;
        while a.try_allocate(false, count, NR, FlowId(1), MS, false) {
            count += 1;
        }
        assert_eq!(count, hard_cap(NR));
    }

    #[test]
    fn batching_ends_after_20_ms_once_a_request_was_used() {
        let mut a = LegacyAlloc::default();
        a.set_batching(FlowId(1), 0);
        assert!(a.is_batching(FlowId(1), 100 * MS), "a full allowance never expires");
        a.pools[0].full = true;
        assert!(a.try_allocate(false, 130, NR, FlowId(1), MS, false));
        assert!(a.is_batching(FlowId(1), 19 * MS));
        assert!(!a.is_batching(FlowId(1), 20 * MS));
        assert!(!a.try_allocate(false, 131, NR, FlowId(1), 20 * MS, false));
    }

    #[test]
    fn frees_clear_full_below_nr_and_congestion_below_the_off_threshold() {
        let mut a = LegacyAlloc::default();
        a.pools[0] = LegacyPool {
            full: true,
            congested: true,
        };
        assert!(!a.freed(false, NR, NR), "still at nr_requests: no wake-up");
        assert!(a.pools[0].full);
        assert!(a.freed(false, NR - 1, NR));
        assert!(!a.pools[0].full && a.pools[0].congested);
        a.freed(false, congestion_off(NR) - 1, NR);
        assert!(!a.pools[0].congested);
    }
}
