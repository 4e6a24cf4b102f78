//! Device models: what happens to a request once the scheduler has dispatched it.
//!
//! A device accepts up to `info().queue_depth` requests at once, services them in whatever order its firmware would
//! (NCQ reordering, SSD parallelism, ...), and reports completions in time order. Models are deterministic: the same
//! submissions at the same times give the same completions.
//!
//! Models: [`Hdd`] (zoned disk with seek curve, rotation, caches and NCQ), [`Raid1`] (md-like mirror pair),
//! [`SataSsd`] (parallel units, link cap, stream-favouring internal queue), [`Flash`] (microSD / eMMC, one command at
//! a time), [`Nvme`], [`Measured`] (tables from `bfq calibrate`; over a loop device's backing disk and its scheduler:
//! [`Backed`]). Build one from a preset name or a TOML file with [`resolve`] and [`DeviceConfig::build`];
//! parameters and their sources are in `docs/DEVICES.md`. For every model `next_completion` is exact: popping at
//! the time it returns yields a tag.

use bfq_sched::{DeviceInfo, Direction, FlowId, FlowInfo, Request, Time};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

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

    /// The next time the device must be advanced: the earliest pending completion, or earlier internal work that
    /// may delay it (a drive starting to destage its write cache after an idle period). At that time
    /// [`Device::pop_completion`] may return nothing; the caller then asks again. `None` when nothing is pending.
    fn next_completion(&self) -> Option<Time>;

    /// Removes and returns the tag of the earliest completion at or before `now` (ties in submission order).
    fn pop_completion(&mut self, now: Time) -> Option<u64>;

    /// Accepts request `rq` under device tag `tag` at `now`, with the host's view of it (flow, sync and metadata
    /// flags). A device that runs schedulers of its own below it (md RAID1 with a scheduler per member disk) needs
    /// these; the default forwards the block-level part to [`Device::submit`].
    fn submit_request(&mut self, tag: u64, rq: &Request, now: Time) {
        self.submit(
            DevRequest {
                tag,
                dir: rq.dir,
                sector: rq.sector,
                sectors: rq.sectors,
            },
            now,
        );
    }

    /// A flow (process I/O context) starts at `now`; for devices with schedulers of their own.
    fn flow_started(&mut self, _flow: &FlowInfo, _now: Time) {}

    /// A flow exits at `now`; for devices with schedulers of their own.
    fn flow_exited(&mut self, _flow: FlowId, _now: Time) {}

    /// How many scheduler instances run inside the device (0: the host's one scheduler feeds it directly; md RAID1
    /// with member schedulers: one per member disk).
    fn member_schedulers(&self) -> u32 {
        0
    }
}

/// A device's next event time ([`Device::next_completion`]), remembered until its state changes: a pure function of
/// the state that the run loop asks for on every step.
#[derive(Debug, Clone, Default)]
pub(crate) struct NextMemo(std::cell::Cell<Option<Option<Time>>>);

impl NextMemo {
    /// The remembered answer, or `compute`'s, remembered.
    pub(crate) fn get_or(&self, compute: impl FnOnce() -> Option<Time>) -> Option<Time> {
        if let Some(next) = self.0.get() {
            return next;
        }
        let next = compute();
        self.0.set(Some(next));
        next
    }

    /// The remembered answer, if there is one.
    pub(crate) fn known(&self) -> Option<Option<Time>> {
        self.0.get()
    }

    /// Forgets the answer: the state changed.
    pub(crate) fn clear(&self) {
        self.0.set(None);
    }
}

pub mod array;
pub mod backed;
pub mod config;
pub mod flash;
pub mod hdd;
mod lower;
pub mod md;
pub mod measured;
pub mod nvme;
pub mod raid1;
pub mod ssd;
#[cfg(test)]
pub(crate) mod testutil;

pub use array::{Array, ArrayConfig};
pub use backed::{Backed, BackingConfig};
pub use config::{load_toml, preset, preset_names, resolve, DeviceConfig, DeviceError, HGST_AGING_LIMIT_MS};
pub use flash::{Flash, FlashConfig};
pub use hdd::{DecisionPoint, Hdd, HddConfig, SeekCurve};
pub use md::Md1;
pub use measured::{Completions, HostCosts, Measured, MeasuredConfig};
pub use nvme::{Nvme, NvmeConfig};
pub use raid1::{Raid1, Raid1Config};
pub use ssd::{SataSsd, SsdConfig};

/// Picoseconds to move one 512-byte sector at `mb_per_s` (10^6 bytes per second). Used for link and media rates.
pub(crate) fn ps_per_sector(mb_per_s: f64) -> u64 {
    if mb_per_s.is_finite() && mb_per_s > 0.0 {
        (512.0e6 / mb_per_s).round().max(1.0) as u64
    } else {
        // An invalid rate (rejected by validation) degrades to 1 MB/s rather than panicking.
        512_000_000
    }
}

/// Nanoseconds to move `sectors` sectors at `ps_per_sector` picoseconds each.
#[inline]
pub(crate) fn xfer_ns(sectors: u64, ps_per_sector: u64) -> Time {
    ((sectors as u128 * ps_per_sector as u128) / 1000) as Time
}

/// Milliseconds or microseconds (as configured, f64) to integer nanoseconds; negative or non-finite values give 0.
pub(crate) fn f64_ns(value: f64, ns_per_unit: f64) -> Time {
    let v = value * ns_per_unit;
    if v.is_finite() && v > 0.0 {
        v.round() as Time
    } else {
        0
    }
}

/// Clamps a request to the device: the start to the last sector, the length to at least 1 and to the end.
#[inline]
pub(crate) fn clamp_request(sector: u64, sectors: u32, capacity: u64) -> (u64, u64) {
    let cap = capacity.max(1);
    let start = sector.min(cap - 1);
    let len = (sectors.max(1) as u64).min(cap - start);
    (start, len)
}

/// Completions ordered by time (then by the second key, a sequence or a tag, for ties), as the HDD, array, md and
/// measured models keep them: `(time ns, tie-break, tag)`.
pub(crate) type DoneHeap = BinaryHeap<Reverse<(Time, u64, u64)>>;

/// Pops the tag of the earliest completion of `done` if it is due at `now` ([`Device::pop_completion`]).
pub(crate) fn pop_due(done: &mut DoneHeap, now: Time) -> Option<u64> {
    match done.peek() {
        Some(Reverse((t, _, _))) if *t <= now => done.pop().map(|Reverse((_, _, tag))| tag),
        _ => None,
    }
}
