//! Device models: what happens to a request once the scheduler has dispatched it.
//!
//! A device accepts up to `info().queue_depth` requests at once, services them in whatever order its firmware would
//! (NCQ reordering, SSD parallelism, ...), and reports completions in time order. Models are deterministic: the same
//! submissions at the same times give the same completions.

use bfq_sched::{DeviceInfo, Direction, Time};

/// A request as the device sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevRequest {
    /// Caller's handle, returned on completion.
    pub tag: u64,
    /// Data direction.
    pub dir: Direction,
    /// First sector (512 B).
    pub sector: u64,
    /// Length in sectors (512 B), at least 1.
    pub sectors: u32,
}

/// A simulated storage device.
pub trait Device: Send {
    /// Static properties: name, rotational, queue depth (hardware tags), max request size, capacity.
    fn info(&self) -> DeviceInfo;

    /// Accepts a request at time `now`. The caller never has more than `info().queue_depth` requests outstanding.
    fn submit(&mut self, rq: DevRequest, now: Time);

    /// Time of the earliest pending completion, if any request is outstanding.
    fn next_completion(&self) -> Option<Time>;

    /// Removes and returns the tag of the earliest completion at or before `now` (ties in submission order).
    fn pop_completion(&mut self, now: Time) -> Option<u64>;
}
