//! The process interface.

use bfq_sched::{IoClass, Time};
use serde::Serialize;

/// Index of a file in the scenario's file set.
pub type FileId = u32;

/// How a file is placed on the device by the host's allocator.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Placement {
    /// Next free contiguous extent (large files).
    Contiguous,
    /// Starting at this fraction of the device's capacity (0.0 = outer, fastest zone of a disk; 1.0 = inner).
    At(f64),
    /// Split into extents of about this many bytes, scattered over the given fraction range of the device (many
    /// small files, e.g. an application's libraries).
    Scattered {
        /// Extent size in bytes.
        extent: u64,
        /// Start of the region, as a fraction of capacity.
        from: f64,
        /// End of the region, as a fraction of capacity.
        to: f64,
    },
}

/// A file a scenario needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileSpec {
    /// Name, for reports.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// Where it lives on the device.
    pub placement: Placement,
    /// Written fully before the run (files are never sparse); if false the file starts empty.
    pub prewritten: bool,
}

/// Whether I/O goes through the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum IoMode {
    /// Through the page cache, with readahead for reads and writeback for writes.
    Buffered,
    /// O_DIRECT: straight to the device.
    Direct,
    /// O_DIRECT, but a write's block requests are async (not `REQ_SYNC`), as the async writes of a replayed
    /// block trace (docs/TRACES.md). The simulator and the engine honour the flag; the kernel target issues such a
    /// write as [`IoMode::Direct`] (the kernel marks every O_DIRECT write sync). Reads are sync whatever the mode.
    DirectAsync,
}

impl IoMode {
    /// Whether the I/O bypasses the page cache ([`IoMode::Direct`] or [`IoMode::DirectAsync`]).
    pub fn is_direct(self) -> bool {
        !matches!(self, IoMode::Buffered)
    }
}

/// One operation a process asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Op {
    /// Read `len` bytes at `offset` of `file`.
    Read {
        /// File.
        file: FileId,
        /// Byte offset.
        offset: u64,
        /// Byte count.
        len: u64,
        /// Buffered or direct.
        mode: IoMode,
        /// A file-system metadata read (ext4 flags them REQ_META | REQ_PRIO in 3.13): the block requests carry
        /// [`bfq_sched::Request::meta`], which CFQ's preemption and request choice favour.
        meta: bool,
    },
    /// Write `len` bytes at `offset` of `file`.
    Write {
        /// File.
        file: FileId,
        /// Byte offset.
        offset: u64,
        /// Byte count.
        len: u64,
        /// Buffered or direct.
        mode: IoMode,
    },
    /// Write back the file's dirty pages and wait for them.
    Fsync {
        /// File.
        file: FileId,
    },
    /// Write back every dirty page of the system and wait (the `sync` command).
    Sync,
    /// Drop the file's clean pages from the page cache (`posix_fadvise(POSIX_FADV_DONTNEED)`, what fio's
    /// `invalidate=1` does before each pass). Advisory: it takes effect at once and no completion is delivered.
    Invalidate {
        /// File.
        file: FileId,
    },
}

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum IoError {
    /// The device reported an error.
    Device(String),
    /// Offset or length outside the file.
    OutOfRange,
    /// Any other failure, described.
    Other(String),
}

/// What a process is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The process has just been started.
    Start,
    /// An operation it issued finished: its tag and the bytes transferred, or the error.
    Completed {
        /// The tag the process gave the operation.
        tag: u64,
        /// Bytes transferred, or why it failed.
        result: Result<u64, IoError>,
    },
    /// The time it asked to sleep until has come.
    Woke,
}

/// What a process answers: operations to issue now, and what to do next.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Actions {
    /// Operations to issue now, each with a tag of the process's choosing, in order.
    pub ops: Vec<(u64, Op)>,
    /// Be woken at this time (unless an operation completes first, which also wakes it).
    pub sleep_until: Option<Time>,
    /// The process is done; outstanding operations still complete, but it is told nothing more.
    pub exit: bool,
}

impl Actions {
    /// Clears everything, keeping the allocation.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.sleep_until = None;
        self.exit = false;
    }
    /// Issues `op` with `tag`.
    pub fn issue(&mut self, tag: u64, op: Op) {
        self.ops.push((tag, op));
    }
}

/// The I/O identity of a process.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSpec {
    /// Name for reports (e.g. `seqreader3`, `xterm`).
    pub name: String,
    /// I/O class.
    pub class: IoClass,
    /// Priority 0..=7 within the class.
    pub prio: u8,
    /// Explicit weight (1..=1000), if any.
    pub weight: Option<u32>,
    /// Group (cgroup-like), 0 = root.
    pub group: u32,
}

impl FlowSpec {
    /// A best-effort flow at default priority in the root group.
    pub fn named(name: impl Into<String>) -> Self {
        FlowSpec {
            name: name.into(),
            class: IoClass::Be,
            prio: bfq_sched::DEFAULT_IOPRIO,
            weight: None,
            group: 0,
        }
    }
}

/// What a process measured, for reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProcessReport {
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub written_bytes: u64,
    /// Operations completed.
    pub ops: u64,
    /// Start-up time in ns, for an application that finished starting.
    pub startup_ns: Option<Time>,
    /// Frames shown and dropped, for a video player.
    pub frames: Option<(u64, u64)>,
    /// Errors seen.
    pub errors: u64,
    /// Phases of a multi-phase test (e.g. iozone's write, re-write, read, re-read), in the order run; empty for
    /// other processes.
    pub phases: Vec<PhaseReport>,
    /// When each request of a replayed trace was issued and completed, in the flow's request order; for a start-up
    /// replay, each request in completion order (its read latency is `completed - issued`); empty for other
    /// processes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RequestTiming>,
}

/// When one request of a trace replay was issued and completed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RequestTiming {
    /// When the process issued it, ns.
    pub issued: Time,
    /// When its completion reached the process, ns; `None` if it never completed (the run stopped first).
    pub completed: Option<Time>,
    /// It completed without an error.
    pub ok: bool,
}

/// What one phase of a multi-phase process measured.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PhaseReport {
    /// Phase name (e.g. `write`, `rewrite`, `read`, `reread`).
    pub name: String,
    /// Bytes transferred in the phase.
    pub bytes: u64,
    /// Duration of the phase, ns: from its first operation's issue to its last operation's completion.
    pub ns: Time,
}

impl PhaseReport {
    /// Throughput of the phase, bytes/s (0 if it took no time).
    pub fn bytes_per_s(&self) -> f64 {
        if self.ns == 0 {
            0.0
        } else {
            self.bytes as f64 * 1e9 / self.ns as f64
        }
    }
}

/// A workload process: a state machine driven by events.
pub trait Process: Send {
    /// Its I/O identity.
    fn flow(&self) -> FlowSpec;
    /// Reacts to `event` at time `now`, filling `out` (which the caller has cleared).
    fn on_event(&mut self, event: Event, now: Time, out: &mut Actions);
    /// What it measured so far.
    fn report(&self) -> ProcessReport;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_buffered_io_goes_through_the_page_cache() {
        // O_DIRECT I/O, sync or async writes alike, bypasses the page cache; buffered I/O does not.
        assert!(IoMode::Direct.is_direct());
        assert!(IoMode::DirectAsync.is_direct());
        assert!(!IoMode::Buffered.is_direct());
    }
}
