//! Scheduler-tag admission: how many requests of each kind may be allocated at once.
//!
//! A request must hold a scheduler tag (one of `nr_requests`, sysfs `queue/nr_requests`) from the moment it is
//! inserted into the policy until it completes; a submitter that finds no tag for its request waits. Two rules
//! decide, both the policy's (see [`Scheduler::depth_limit`] and [`Scheduler::separate_sync_pool`], and
//! docs/SCHEDULERS.md, "Request allocation"):
//!
//! - the pool: blk-mq policies share one pool of `nr_requests` tags among all requests; the legacy single-queue
//!   elevators kept two, one for sync and one for async requests, so that a flood of async writes never took the
//!   last request a reader needed;
//! - the depth limit: async requests and sync writes may hold at most `depth_limit(dir, sync, nr_requests)` tags of
//!   their class (at least one); sync reads are limited by the pool only.
//!
//! The simulator and the engine reactor both admit requests through a [`TagPool`]; each keeps its own queues of
//! waiting requests and asks the pool, in its own order, whether the head of a queue may have a tag.

use crate::counter;
use crate::legacy_alloc::{LegacyAlloc, BLKDEV_MAX_RQ};
use crate::scheduler::Scheduler;
use crate::types::{Direction, FlowId, Time};

/// The allocation class of a request: the tags of each class are counted separately, because the policy limits
/// them separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TagClass {
    /// Sync reads: never depth-limited.
    SyncRead,
    /// Sync writes (O_DIRECT, fsync writeback): limited by `depth_limit(Write, true, ..)`.
    SyncWrite,
    /// Async requests (background writeback): limited by `depth_limit(Write, false, ..)`.
    Async,
}

impl TagClass {
    /// The three classes, in the order waiting requests are admitted.
    pub const ALL: [TagClass; 3] = [TagClass::SyncRead, TagClass::SyncWrite, TagClass::Async];

    /// The class of a request in direction `dir` with the sync flag `sync`.
    pub fn of(dir: Direction, sync: bool) -> Self {
        match (dir, sync) {
            (Direction::Read, true) => TagClass::SyncRead,
            (Direction::Write, true) => TagClass::SyncWrite,
            _ => TagClass::Async,
        }
    }

    /// Position of the class in [`TagClass::ALL`] (0, 1 or 2), for per-class arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// True for the two sync classes, which share the sync pool when pools are separate.
    pub fn is_sync(self) -> bool {
        self != TagClass::Async
    }

    /// The `(direction, sync)` the policy's depth limit is asked about for this class. Async reads (which the
    /// simulator does not issue) count with async writes, as the kernel's limits apply to async requests alike.
    fn limit_key(self) -> (Direction, bool) {
        match self {
            TagClass::SyncRead => (Direction::Read, true),
            TagClass::SyncWrite => (Direction::Write, true),
            TagClass::Async => (Direction::Write, false),
        }
    }
}

/// Allocated scheduler tags per [`TagClass`], and the admission rule over them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagPool {
    /// Tags per pool (`nr_requests`, at least 1).
    nr_requests: u32,
    /// One pool for sync and one for async requests (legacy elevators), instead of one shared pool.
    separate_sync_pool: bool,
    /// Tags held, per class (requests inserted and not yet completed).
    allocated: [u32; 3],
    /// The legacy block layer's allocation rules (batching, the 3/2 cap, congestion), for separate pools built
    /// with [`TagPool::legacy_for`].
    legacy: Option<LegacyAlloc>,
    /// The most tags the pool of each class has held at once (sync pool for both sync classes).
    peak: [u32; 3],
}

impl TagPool {
    /// An empty pool of `nr_requests` tags (at least 1), one shared pool or separate sync and async pools.
    pub fn new(nr_requests: u32, separate_sync_pool: bool) -> Self {
        TagPool {
            nr_requests: nr_requests.max(1),
            separate_sync_pool,
            allocated: [0; 3],
            legacy: None,
            peak: [0; 3],
        }
    }

    /// An empty pool of `nr_requests` tags laid out as `policy` asks ([`Scheduler::separate_sync_pool`]).
    pub fn for_policy(policy: &dyn Scheduler, nr_requests: u32) -> Self {
        TagPool::new(nr_requests, policy.separate_sync_pool())
    }

    /// The pools of a legacy queue as Linux 3.13 allocates requests ([`crate::legacy_alloc`]): a sync and an
    /// async pool of `BLKDEV_MAX_RQ` (128) each, whatever the device's blk-mq `nr_requests`, with batching, the
    /// 3/2 hard cap and congestion; for a blk-mq policy, [`TagPool::for_policy`].
    pub fn legacy_for(policy: &dyn Scheduler, nr_requests: u32) -> Self {
        if policy.separate_sync_pool() {
            TagPool {
                legacy: Some(LegacyAlloc::default()),
                ..TagPool::new(BLKDEV_MAX_RQ, true)
            }
        } else {
            TagPool::for_policy(policy, nr_requests)
        }
    }

    /// Whether the 3.13 legacy allocation rules apply.
    pub fn is_legacy(&self) -> bool {
        self.legacy.is_some()
    }

    /// Whether reads are congested (legacy pools: the sync pool reached 7/8 of `nr_requests`); asynchronous
    /// readahead is skipped on a read-congested queue (`page_cache_async_readahead`). Never with blk-mq pools.
    pub fn read_congested(&self) -> bool {
        self.legacy.as_ref().is_some_and(|l| l.pools[1].congested)
    }

    /// Whether writes are congested (legacy pools: the async pool reached 7/8 of `nr_requests`, until a free brings
    /// it below 13/16 - 1); a throttled writer of Linux before 3.2 waits for this to clear
    /// (`blk_congestion_wait`). Never with blk-mq pools.
    pub fn async_congested(&self) -> bool {
        self.legacy.as_ref().is_some_and(|l| l.pools[0].congested)
    }

    /// Takes a tag for a request of `class` from task `flow` at `now`, if the rules allow: [`TagPool::can_allocate`]
    /// for blk-mq pools; the 3.13 rules for legacy pools, with `must` the elevator's exemption (CFQ's
    /// `ELV_MQUEUE_MUST`, [`Scheduler::may_queue_must`]).
    pub fn try_allocate_for(&mut self, class: TagClass, flow: FlowId, now: Time, policy: &mut dyn Scheduler) -> bool {
        let nr = self.nr_requests;
        let count = self.pool_used(class);
        let Some(legacy) = self.legacy.as_mut() else {
            return self.try_allocate(class, policy);
        };
        // Asked at every allocation, as `__get_request` calls `elv_may_queue` (for CFQ the exemption is used up by
        // the first ask of a slice).
        let must = policy.may_queue_must(flow, class.is_sync());
        let ok = legacy.try_allocate(class.is_sync(), count, nr, flow, now, must);
        if ok {
            self.allocated[class.index()] += 1;
            self.note_peak(class);
        }
        ok
    }

    /// A task that waited for a tag of `class` is woken (legacy pools, when the pool is below `nr_requests`): it
    /// becomes a batcher (`ioc_set_batching` after `io_schedule` in `get_request`). Returns whether it was woken.
    pub fn wake_waiter(&mut self, class: TagClass, flow: FlowId, now: Time) -> bool {
        let below = self.pool_used(class) < self.nr_requests;
        match self.legacy.as_mut() {
            Some(l) if below => {
                l.set_batching(flow, now);
                true
            }
            _ => false,
        }
    }

    /// Forgets what the pools remember of an exited task (its batching allowance).
    pub fn forget(&mut self, flow: FlowId) {
        if let Some(l) = self.legacy.as_mut() {
            l.forget(flow);
        }
    }

    /// Tags per pool (at least 1).
    pub fn nr_requests(&self) -> u32 {
        self.nr_requests
    }

    /// True if sync and async requests draw from separate pools.
    pub fn separate_sync_pool(&self) -> bool {
        self.separate_sync_pool
    }

    /// Tags held by requests of `class`.
    pub fn allocated(&self, class: TagClass) -> u32 {
        self.allocated[class.index()]
    }

    /// Tags held by all classes.
    pub fn total(&self) -> u32 {
        self.allocated.iter().sum()
    }

    /// The most tags the pool that `class` draws from has held at once.
    pub fn peak(&self, class: TagClass) -> u32 {
        self.peak[class.index()]
    }

    fn note_peak(&mut self, class: TagClass) {
        let used = self.pool_used(class);
        let p = &mut self.peak[class.index()];
        *p = (*p).max(used);
    }

    /// Tags in use in the pool `class` draws from.
    fn pool_used(&self, class: TagClass) -> u32 {
        if !self.separate_sync_pool {
            self.total()
        } else if class.is_sync() {
            self.allocated(TagClass::SyncRead) + self.allocated(TagClass::SyncWrite)
        } else {
            self.allocated(TagClass::Async)
        }
    }

    /// The most tags `policy` currently lets requests of `class` hold (at least 1).
    pub fn limit(&self, class: TagClass, policy: &dyn Scheduler) -> u32 {
        match class {
            TagClass::SyncRead => self.nr_requests,
            _ => {
                let (dir, sync) = class.limit_key();
                policy.depth_limit(dir, sync, self.nr_requests).max(1)
            }
        }
    }

    /// Whether a request of `class` may have a tag now: its pool has a free tag, and (unless it is a sync read) its
    /// class holds fewer tags than `policy`'s depth limit.
    pub fn can_allocate(&self, class: TagClass, policy: &dyn Scheduler) -> bool {
        if self.pool_used(class) >= self.nr_requests {
            return false;
        }
        class == TagClass::SyncRead || self.allocated(class) < self.limit(class, policy)
    }

    /// Takes a tag for a request of `class` if [`TagPool::can_allocate`] allows; returns whether it did.
    pub fn try_allocate(&mut self, class: TagClass, policy: &dyn Scheduler) -> bool {
        let ok = self.can_allocate(class, policy);
        if ok {
            self.allocated[class.index()] += 1;
            self.note_peak(class);
        }
        ok
    }

    /// Takes a tag for a request of `class` whose admission the caller already checked with
    /// [`TagPool::can_allocate`].
    pub fn allocate(&mut self, class: TagClass) {
        self.allocated[class.index()] += 1;
        self.note_peak(class);
    }

    /// Returns the tag of a completed request of `class`.
    ///
    /// # Panics
    /// If `class` holds no tag: a request was completed twice, or completed without a tag.
    #[track_caller]
    pub fn release(&mut self, class: TagClass) {
        let what = match class {
            TagClass::SyncRead => "sync read tags",
            TagClass::SyncWrite => "sync write tags",
            TagClass::Async => "async tags",
        };
        counter::dec(&mut self.allocated[class.index()], what);
        let (count, nr) = (self.pool_used(class), self.nr_requests);
        if let Some(l) = self.legacy.as_mut() {
            l.freed(class.is_sync(), count, nr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceInfo;
    use crate::registry;

    fn policy(name: &str, tunables: &[&str]) -> Box<dyn Scheduler> {
        registry::build(name, &DeviceInfo::hdd(), tunables).expect("policy")
    }

    /// Fills `class` until the pool refuses; returns how many it took.
    fn fill(pool: &mut TagPool, class: TagClass, p: &dyn Scheduler) -> u32 {
        let mut n = 0;
        while pool.try_allocate(class, p) {
            n += 1;
            assert!(n <= 10_000, "the pool never refused");
        }
        n
    }

    #[test]
    fn classes_follow_direction_and_sync() {
        assert_eq!(TagClass::of(Direction::Read, true), TagClass::SyncRead);
        assert_eq!(TagClass::of(Direction::Write, true), TagClass::SyncWrite);
        assert_eq!(TagClass::of(Direction::Write, false), TagClass::Async);
        assert_eq!(TagClass::of(Direction::Read, false), TagClass::Async);
        for (i, c) in TagClass::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
    }

    #[test]
    fn sync_reads_are_limited_by_the_pool_only() {
        // mq-deadline with async_depth=4 limits writes to 4 tags, never sync reads.
        let p = policy("mq-deadline", &["async_depth=4"]);
        let mut pool = TagPool::for_policy(p.as_ref(), 64);
        assert!(!pool.separate_sync_pool());
        assert_eq!(fill(&mut pool, TagClass::SyncRead, p.as_ref()), 64);
        assert_eq!(pool.total(), 64);
    }

    #[test]
    fn async_and_sync_writes_are_limited_by_the_depth_limit() {
        let p = policy("mq-deadline", &["async_depth=4"]);
        let mut pool = TagPool::for_policy(p.as_ref(), 64);
        assert_eq!(pool.limit(TagClass::Async, p.as_ref()), 4);
        assert_eq!(fill(&mut pool, TagClass::Async, p.as_ref()), 4);
        assert_eq!(fill(&mut pool, TagClass::SyncWrite, p.as_ref()), 4);
        // Reads still get the rest of the shared pool.
        assert_eq!(fill(&mut pool, TagClass::SyncRead, p.as_ref()), 56);
        // The pool is full: nothing more for anyone, even below its class limit.
        pool.release(TagClass::Async);
        assert!(!pool.can_allocate(TagClass::SyncWrite, p.as_ref()));
        assert!(pool.can_allocate(TagClass::Async, p.as_ref()));
    }

    #[test]
    fn a_shared_pool_lets_a_writer_flood_take_the_readers_tags() {
        // noop limits nothing; in one shared pool, async writes can take every tag.
        let p = policy("noop", &[]);
        let mut pool = TagPool::new(32, false);
        assert_eq!(fill(&mut pool, TagClass::Async, p.as_ref()), 32);
        assert!(!pool.can_allocate(TagClass::SyncRead, p.as_ref()));
    }

    #[test]
    fn separate_pools_keep_a_writer_flood_from_taking_a_readers_tags() {
        let p = policy("cfq", &[]);
        assert!(p.separate_sync_pool());
        let mut pool = TagPool::for_policy(p.as_ref(), 32);
        assert!(pool.separate_sync_pool());
        assert_eq!(fill(&mut pool, TagClass::Async, p.as_ref()), 32);
        // The async pool is exhausted, the sync pool untouched: reads and sync writes share its 32 tags.
        assert_eq!(fill(&mut pool, TagClass::SyncRead, p.as_ref()), 32);
        assert!(!pool.can_allocate(TagClass::SyncWrite, p.as_ref()));
        assert_eq!(pool.total(), 64);
    }

    #[test]
    fn release_returns_the_tag_to_the_right_pool() {
        let p = policy("cfq", &[]);
        let mut pool = TagPool::for_policy(p.as_ref(), 8);
        fill(&mut pool, TagClass::Async, p.as_ref());
        fill(&mut pool, TagClass::SyncRead, p.as_ref());
        pool.release(TagClass::SyncRead);
        // A sync tag came back: sync requests may allocate, async ones still may not.
        assert!(!pool.can_allocate(TagClass::Async, p.as_ref()));
        assert!(pool.can_allocate(TagClass::SyncWrite, p.as_ref()));
        assert_eq!(pool.allocated(TagClass::SyncRead), 7);
        pool.release(TagClass::Async);
        assert!(pool.can_allocate(TagClass::Async, p.as_ref()));
        assert_eq!(pool.allocated(TagClass::Async), 7);
    }

    #[test]
    #[should_panic(expected = "counter underflow: sync write tags decremented at zero")]
    fn a_double_release_fails() {
        let mut pool = TagPool::new(4, false);
        pool.allocate(TagClass::SyncWrite);
        pool.release(TagClass::SyncWrite);
        pool.release(TagClass::SyncWrite);
    }

    #[test]
    fn the_depth_limit_is_at_least_one_tag() {
        // BFQ gives async writes half of the tags, which rounds down to zero in a one-tag pool; the pool still lets
        // one through so that writeback always progresses.
        let p = policy("bfq", &[]);
        let mut pool = TagPool::for_policy(p.as_ref(), 1);
        assert!(pool.try_allocate(TagClass::Async, p.as_ref()));
        assert!(!pool.can_allocate(TagClass::Async, p.as_ref()));
    }
}
