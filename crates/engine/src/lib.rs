//! # bfq-engine
//!
//! Schedules real `O_DIRECT` I/O with a [`bfq_sched`] policy over Linux io_uring.
//!
//! One reactor thread owns the io_uring instance, the policy and the policy's idle timer. Client threads open
//! [`Flow`]s (the kernel's per-process I/O contexts, with a class, priority, weight and group) and issue reads and
//! writes through them, blocking ([`Flow::read`], [`Flow::write`]) or asynchronously ([`Flow::submit_read`] and
//! [`Flow::wait`]) to keep several requests in flight. Each request is inserted into the policy; the reactor
//! dispatches while fewer than [`EngineConfig::tag_limit`] requests are at the device, implements
//! [`Decision::WaitUntil`](bfq_sched::Decision::WaitUntil) with an io_uring timeout, and hands completions back
//! to the flow that issued them. With [`EngineConfig::lead`] (off by default) a client that waits, submits or
//! polls while nobody runs that loop runs it itself (leader/followers), so a round trip needs no thread hand-off;
//! the reactor thread then serves only when no client does (docs/ENGINE.md, "Leader/followers").
//!
//! ```no_run
//! use bfq_engine::{AlignedBuf, Engine, EngineConfig, FlowOptions};
//! use std::path::Path;
//! # fn main() -> Result<(), bfq_engine::EngineError> {
//! let path = Path::new("/var/tmp/data.bin");
//! let cfg = EngineConfig::for_path(path);
//! let engine = Engine::start(bfq_sched::build::<&str>("bfq", &cfg.device, &[])?, cfg)?;
//! let file = engine.open(path, false)?;
//! let flow = engine.flow(FlowOptions::named("reader"))?;
//! let mut buf = AlignedBuf::new(64 * 1024);
//! let n = flow.read(file, 0, &mut buf)?;
//! assert_eq!(n, buf.len());
//! drop(flow);
//! let stats = engine.shutdown()?;
//! println!("{} requests, {} ns in the policy", stats.completed, stats.policy_ns);
//! # Ok(()) }
//! ```
//!
//! ## What the policy sees
//! - Time: nanoseconds of `CLOCK_MONOTONIC` since the engine started ([`bfq_sched::Time`]).
//! - Sectors: a request at byte `offset` of a file has `sector = file.sector_base() + offset / 512`. The first
//!   file opened has base 0, so for one file (or a block device) sectors are the file's own 512-byte blocks;
//!   each further file gets a disjoint range after the previous ones (1 GiB apart), as files lie apart on a disk.
//!   Opening the same file again gives the same base.
//! - Reads and `O_DIRECT` writes are synchronous (`sync = true`).
//! - A request merged by the policy is issued as one vectored request when its parts are contiguous in one file
//!   (else as separate requests) and holds one tag.
//! - `fsync` bypasses the policy and the tag limit, as a flush bypasses the kernel's I/O scheduler.
//!
//! ## Errors
//! Alignment is checked before submission ([`EngineError::Misaligned`]); kernel failures such as `EIO` and
//! `ENOSPC` come back as [`EngineError::Io`] with the errno; a read that returns fewer bytes than asked (the end
//! of the file) is [`EngineError::ShortRead`]. After [`Engine::shutdown`], every call fails with
//! [`EngineError::ShutDown`]; requests accepted before it complete normally.

#![warn(missing_docs)]

mod buf;
mod device;
mod error;
mod flow;
mod reactor;
mod shared;

pub use buf::{AlignedBuf, BUF_ALIGN, BUF_LEN_UNIT};
pub use device::device_info_for;
pub use error::EngineError;
pub use flow::{Flow, MAX_REQUEST_BYTES};
pub use shared::Completion;

use bfq_sched::{DeviceInfo, FlowId, FlowInfo, GroupId, IoClass, Scheduler};
use shared::{lock, Cmd, FlowShared, Inbox, Shared};
use std::fs::File;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

/// Default [`EngineConfig::tag_limit`]: requests at the device at once.
pub const DEFAULT_TAG_LIMIT: u32 = 32;
/// Default [`EngineConfig::spin_us`], in microseconds.
pub const DEFAULT_SPIN_US: u32 = 0;
/// Default [`EngineConfig::standby_us`], in microseconds.
pub const DEFAULT_STANDBY_US: u32 = 1000;
/// Default [`EngineConfig::ring_entries`]: submission queue entries of the io_uring instance.
pub const DEFAULT_RING_ENTRIES: u32 = 256;

/// How to start an [`Engine`].
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Most requests at the device at once (the hardware tags the engine models); at least 1. Default 32.
    pub tag_limit: u32,
    /// Submission queue entries of the io_uring instance (a power of two is used); default 256.
    pub ring_entries: u32,
    /// What the policy is told about the device; its `nr_requests` is also the number of scheduler tags: requests
    /// beyond it (or beyond the policy's `depth_limit`) wait in the engine before being inserted.
    pub device: DeviceInfo,
    /// How long (microseconds) a client waiting for a result, and the reactor expecting a client's next request
    /// right after handing it a result, poll before blocking; 0 (the default) always blocks at once. Polling can
    /// save a thread wake-up per round trip on an otherwise idle machine, but on a machine whose cores are busy
    /// it steals the CPU the other side needs and costs throughput (measured in docs/ENGINE.md).
    pub spin_us: u32,
    /// Leader/followers (default `false`, the single-reactor design): a client that waits for a result while no
    /// other thread runs the engine loop runs it itself (reaping, scheduling and resubmitting in one
    /// `io_uring_enter`), and a client that submits while nobody runs it hands its request to the kernel itself,
    /// so a one-thread client needs no thread hand-off per round trip. The reactor thread still serves the engine
    /// whenever no client does (timers, other flows, shutdown). The ring is then a plain one (several threads
    /// submit), not `SINGLE_ISSUER | DEFER_TASKRUN`. Measured in docs/ENGINE.md and docs/PERFORMANCE.md.
    pub lead: bool,
    /// With [`EngineConfig::lead`]: while clients run the engine loop, the reactor thread stands by (off the
    /// ring, so their completions do not wake it) and looks every `standby_us` microseconds whether they still
    /// do; when a whole period passed without a client running the loop, and at once when a client waits
    /// without leading, it serves the engine itself. So requests nobody waits for (and the policy's timers, and
    /// queued requests a completion would let out) may wait up to about twice this long when every client
    /// stops running the loop. Default 1000 (an estimate; measured in docs/ENGINE.md).
    pub standby_us: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            tag_limit: DEFAULT_TAG_LIMIT,
            ring_entries: DEFAULT_RING_ENTRIES,
            device: DeviceInfo::ssd(),
            spin_us: DEFAULT_SPIN_US,
            lead: false,
            standby_us: DEFAULT_STANDBY_US,
        }
    }
}

impl EngineConfig {
    /// Defaults, with the device described by [`device_info_for`]`(path)`.
    pub fn for_path(path: &Path) -> Self {
        EngineConfig {
            device: device_info_for(path),
            ..EngineConfig::default()
        }
    }
}

/// How to open a [`Flow`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowOptions {
    /// A name for messages.
    pub name: String,
    /// I/O class (RT, BE, IDLE).
    pub class: IoClass,
    /// Priority within the class, 0 (highest) ..= 7 (lowest).
    pub prio: u8,
    /// Explicit weight (1..=1000); `None` derives it from the priority.
    pub weight: Option<u32>,
    /// The group (cgroup-like) of the flow; 0 is the root.
    pub group: u32,
}

impl FlowOptions {
    /// A best-effort flow at the default priority (4) in the root group.
    pub fn named(name: impl Into<String>) -> Self {
        FlowOptions {
            name: name.into(),
            class: IoClass::Be,
            prio: bfq_sched::DEFAULT_IOPRIO,
            weight: None,
            group: 0,
        }
    }
    /// Sets the class and priority.
    pub fn class(mut self, class: IoClass, prio: u8) -> Self {
        self.class = class;
        self.prio = prio;
        self
    }
    /// Sets an explicit weight.
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = Some(weight);
        self
    }
    /// Sets the group.
    pub fn group(mut self, group: u32) -> Self {
        self.group = group;
        self
    }
}

impl Default for FlowOptions {
    fn default() -> Self {
        FlowOptions::named("flow")
    }
}

/// A file opened by an [`Engine`] with `O_DIRECT`. Cheap to copy; valid until the engine shuts down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileRef {
    pub(crate) engine: u64,
    pub(crate) index: u32,
    pub(crate) logical_block_size: u32,
    pub(crate) size_bytes: u64,
    pub(crate) sector_base: u64,
    pub(crate) writable: bool,
}

impl FileRef {
    /// Size in bytes when it was opened (a block device's capacity).
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }
    /// The logical block size of the backing block device, in bytes: offsets, lengths and buffer addresses of
    /// requests must be multiples of it.
    pub fn logical_block_size(&self) -> u32 {
        self.logical_block_size
    }
    /// The sector the policy sees for offset 0 of this file (see the crate docs).
    pub fn sector_base(&self) -> u64 {
        self.sector_base
    }
    /// Whether it was opened for writing.
    pub fn writable(&self) -> bool {
        self.writable
    }
}

/// Counters of an engine. All counts are of requests as clients issued them unless said otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Reads and writes accepted.
    pub submitted: u64,
    /// Reads and writes completed (successfully or not).
    pub completed: u64,
    /// Requests sent to the device, after the policy's merging.
    pub dispatched: u64,
    /// Requests that failed (kernel error, short transfer, or failed by a stopping engine).
    pub errors: u64,
    /// Bytes read successfully.
    pub bytes_read: u64,
    /// Bytes written successfully.
    pub bytes_written: u64,
    /// fsyncs completed.
    pub fsyncs: u64,
    /// CPU time spent inside the policy (insert, dispatch, completed, flow start/exit), in nanoseconds.
    pub policy_ns: u64,
    /// Times the reactor blocked in the kernel waiting for an event.
    pub reactor_sleeps: u64,
    /// Times the reactor woke a client blocked waiting for a result.
    pub client_wakeups: u64,
    /// Times a client woke the sleeping reactor to hand it a request (eventfd writes).
    pub reactor_kicks: u64,
    /// Times a waiting client ran the engine loop itself ([`EngineConfig::lead`]).
    pub client_leads: u64,
    /// Times a client leading the loop blocked in `io_uring_enter` for the next completion.
    pub leader_sleeps: u64,
    /// Times the reactor thread stood by (off the ring) because clients were running the loop
    /// ([`EngineConfig::lead`]).
    pub reactor_standbys: u64,
    /// Times a submitting client (or one polling with [`Flow::try_wait`] and finding nothing) ran one pass of the
    /// loop itself because nobody ran it ([`EngineConfig::lead`]).
    pub inline_serves: u64,
    /// Idle timers armed for the policy's `WaitUntil`.
    pub timers_armed: u64,
    /// Idle timers that expired.
    pub timers_fired: u64,
    /// Most requests at the device at once.
    pub max_in_flight: u32,
    /// Time since the engine started, in nanoseconds, when the counters were published.
    pub uptime_ns: u64,
}

static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(1);

/// An io_uring engine owning a scheduling policy. `Send + Sync`: share it (for example in an `Arc`) between the
/// threads that open flows.
pub struct Engine {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<EngineStats>>>,
}

impl Engine {
    /// Starts the reactor thread with `policy`, which must have been built for `cfg.device`.
    pub fn start(policy: Box<dyn Scheduler>, cfg: EngineConfig) -> Result<Engine, EngineError> {
        // SAFETY: plain syscall; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(EngineError::Setup(std::io::Error::last_os_error()));
        }
        // SAFETY: efd is a fresh descriptor we own.
        let eventfd = unsafe { OwnedFd::from_raw_fd(efd) };
        let shared = Arc::new(Shared {
            inbox: Mutex::new(Inbox {
                cmds: Vec::with_capacity(256),
                closed: false,
            }),
            has_cmds: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            eventfd,
            next_flow: AtomicU32::new(1),
            engine_id: NEXT_ENGINE_ID.fetch_add(1, Ordering::Relaxed),
            stats: Mutex::new(EngineStats::default()),
            kicks: AtomicU64::new(0),
            spin_ns: u64::from(cfg.spin_us) * 1000,
            lead: cfg.lead,
            core: Mutex::new(None),
            activity: AtomicU64::new(0),
            followers: AtomicU32::new(0),
            reactor_in_ring: AtomicBool::new(false),
            standby_wake: Mutex::new(false),
            standby_cv: std::sync::Condvar::new(),
            standby: std::time::Duration::from_micros(u64::from(cfg.standby_us.max(1))),
        });
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let sh = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("bfq-engine".into())
            .spawn(move || reactor::run(policy, cfg, sh, ready_tx))
            .map_err(EngineError::Setup)?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Engine {
                shared,
                thread: Mutex::new(Some(thread)),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(EngineError::Setup(std::io::Error::other(
                    "reactor thread died during start-up",
                )))
            }
        }
    }

    /// Builds the policy `name` with sysfs-style `key=value` tunables for `cfg.device` and starts an engine.
    pub fn start_named<S: AsRef<str>>(name: &str, tunables: &[S], cfg: EngineConfig) -> Result<Engine, EngineError> {
        let policy = bfq_sched::build(name, &cfg.device, tunables)?;
        Engine::start(policy, cfg)
    }

    /// Opens `path` (a regular file or a block device) with `O_DIRECT`, read-only or read-write. The error of a
    /// missing file names the path.
    pub fn open(&self, path: &Path, writable: bool) -> Result<FileRef, EngineError> {
        let open_err = |source| EngineError::Open {
            path: path.to_path_buf(),
            source,
        };
        let file = File::options()
            .read(true)
            .write(writable)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(open_err)?;
        let meta = file.metadata().map_err(open_err)?;
        let geo = device::geometry(file.as_fd(), &meta).map_err(open_err)?;
        let (tx, rx) = mpsc::sync_channel(1);
        self.shared.send(Cmd::Open {
            fd: OwnedFd::from(file),
            geo,
            reply: tx,
        })?;
        let (index, sector_base) = rx.recv().map_err(|_| EngineError::ShutDown)??;
        Ok(FileRef {
            engine: self.shared.engine_id,
            index,
            logical_block_size: geo.logical_block_size,
            size_bytes: geo.size_bytes,
            sector_base,
            writable,
        })
    }

    /// Opens a flow for the calling client. Dropping the flow tells the policy the flow exited.
    pub fn flow(&self, opts: FlowOptions) -> Result<Flow, EngineError> {
        let id = FlowId(self.shared.next_flow.fetch_add(1, Ordering::Relaxed));
        let mut info = FlowInfo::new(id)
            .with_class(opts.class, opts.prio)
            .with_group(GroupId(opts.group));
        if let Some(w) = opts.weight {
            info = info.with_weight(w);
        }
        let fs = Arc::new(FlowShared::new(self.shared.spin_ns));
        self.shared.send(Cmd::FlowStart {
            info,
            shared: Arc::clone(&fs),
        })?;
        Ok(Flow::new(id, opts.name, Arc::clone(&self.shared), fs))
    }

    /// The counters as last published by the thread running the engine loop (it publishes before it sleeps and
    /// every few hundred loop iterations).
    pub fn stats(&self) -> EngineStats {
        *lock(&self.shared.stats)
    }

    /// Stops accepting requests, completes every request already accepted (in-flight and queued in the policy),
    /// joins the reactor and returns the final counters. Flows used afterwards fail with
    /// [`EngineError::ShutDown`].
    pub fn shutdown(self) -> Result<EngineStats, EngineError> {
        self.stop()
    }

    fn stop(&self) -> Result<EngineStats, EngineError> {
        self.shared.close();
        self.shared.kick();
        let handle = lock(&self.thread).take();
        match handle {
            Some(h) => h
                .join()
                .map_err(|_| EngineError::PolicyFailed("the reactor thread panicked".into())),
            None => Ok(self.stats()),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("id", &self.shared.engine_id).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}

    #[test]
    fn thread_safety_of_the_public_types() {
        send_sync::<Engine>();
        send::<Flow>();
        send_sync::<FileRef>();
        send_sync::<AlignedBuf>();
        send::<Completion>();
        send_sync::<EngineError>();
    }

    #[test]
    fn flow_options_builders() {
        let o = FlowOptions::named("x").class(IoClass::Rt, 1).weight(300).group(2);
        assert_eq!((o.class, o.prio, o.weight, o.group), (IoClass::Rt, 1, Some(300), 2));
        assert_eq!(EngineConfig::default().tag_limit, DEFAULT_TAG_LIMIT);
    }
}
