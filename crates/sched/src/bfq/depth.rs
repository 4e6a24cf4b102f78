//! Scheduler-tag depth: how many tags async requests and sync writes may hold (`bfq_limit_depth`,
//! `bfq_update_depths`), so that sync reads always find one.

use crate::types::Direction;

/// Async requests may hold at most this share of the scheduler tags (numerator over [`DEPTH_DEN`]) while no
/// queue is raised: 8/16 = 50%.
pub const ASYNC_DEPTH_NUM: u32 = 8;
/// Sync writes' share of the tags while no queue is raised: 12/16 = 75%.
pub const SYNC_WRITE_DEPTH_NUM: u32 = 12;
/// Async share while some queue is weight-raised: 3/16, leaving the raised queue room.
pub const ASYNC_DEPTH_NUM_WR: u32 = 3;
/// Sync-write share while some queue is weight-raised: 6/16.
pub const SYNC_WRITE_DEPTH_NUM_WR: u32 = 6;
/// Denominator of the tag shares.
pub const DEPTH_DEN: u32 = 16;

/// `bfq_limit_depth`: tags that async requests and sync writes may hold; sync reads are never limited.
pub fn depth_limit(dir: Direction, sync: bool, nr_requests: u32, some_raised: bool) -> u32 {
    let num = match (sync, dir, some_raised) {
        (true, Direction::Read, _) => return nr_requests,
        (false, _, false) => ASYNC_DEPTH_NUM,
        (false, _, true) => ASYNC_DEPTH_NUM_WR,
        (true, Direction::Write, false) => SYNC_WRITE_DEPTH_NUM,
        (true, Direction::Write, true) => SYNC_WRITE_DEPTH_NUM_WR,
    };
    (nr_requests * num / DEPTH_DEN).max(1)
}
