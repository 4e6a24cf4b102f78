//! State shared between client threads and the reactor: the command inbox with its wake-up protocol, and each
//! flow's completion queue.

use crate::buf::AlignedBuf;
use crate::device::Geometry;
use crate::error::EngineError;
use crate::reactor::Reactor;
use crate::EngineStats;
use bfq_sched::{Direction, FlowId, FlowInfo};
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Locks a mutex, ignoring poisoning: every critical section here leaves the data consistent.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A read or write handed to the reactor.
pub(crate) struct IoCmd {
    pub flow: FlowId,
    pub dir: Direction,
    /// Index of the file in the reactor's table.
    pub file: u32,
    /// File offset in bytes.
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
    /// Where the data goes or comes from: inside `buf` if it is set, else in a buffer the (blocked) client lends.
    pub ptr: *mut u8,
    /// The owned buffer of an asynchronous request; `None` for a blocking one.
    pub buf: Option<AlignedBuf>,
    /// The caller's tag (asynchronous requests).
    pub tag: u64,
    /// The block request is sync (`REQ_SYNC`): every read and O_DIRECT write; `false` only for a write submitted
    /// with [`crate::Flow::submit_write_async`].
    pub sync: bool,
}

// SAFETY: `ptr` points into `buf` (which moves with the command) or into a buffer whose owner is blocked in
// `Flow::read`/`Flow::write` until the reactor reports the request complete, so sending it to the reactor thread
// cannot outlive or alias the memory.
unsafe impl Send for IoCmd {}

/// What a client asks of the reactor.
pub(crate) enum Cmd {
    /// A flow appears.
    FlowStart { info: FlowInfo, shared: Arc<FlowShared> },
    /// A flow's owner dropped it.
    FlowExit(FlowId),
    /// Register an open file; the reply carries its table index and first sector.
    Open {
        fd: OwnedFd,
        geo: Geometry,
        reply: SyncSender<Result<(u32, u64), EngineError>>,
    },
    /// A read or write for the policy.
    Io(IoCmd),
    /// A blocking fsync (bypasses the policy, as a flush bypasses the kernel's scheduler).
    Fsync { flow: FlowId, file: u32 },
}

/// Commands waiting for the reactor.
pub(crate) struct Inbox {
    pub cmds: Vec<Cmd>,
    /// Set by shutdown: no command is accepted after it.
    pub closed: bool,
}

/// Engine-wide state shared with clients.
pub(crate) struct Shared {
    pub inbox: Mutex<Inbox>,
    /// Set by a client after it queues a command; cleared by the reactor when it takes them.
    pub has_cmds: AtomicBool,
    /// Set by the reactor just before it blocks in the kernel.
    pub sleeping: AtomicBool,
    /// Written to wake a sleeping reactor (it always has a read of it pending in the ring).
    pub eventfd: OwnedFd,
    /// Next flow id.
    pub next_flow: AtomicU32,
    /// Distinguishes this engine's files from another engine's.
    pub engine_id: u64,
    /// Last published counters.
    pub stats: Mutex<EngineStats>,
    /// Wake-ups of the reactor by clients (eventfd writes).
    pub kicks: AtomicU64,
    /// How long clients and the reactor poll for each other before blocking, in nanoseconds.
    pub spin_ns: u64,
    /// Leader/followers ([`crate::EngineConfig::lead`]): clients may run the engine loop.
    pub lead: bool,
    /// With `lead`: the engine's state (ring, policy, requests), held by whichever thread runs the loop. The
    /// reactor thread puts it here at start and takes it out when it exits. `None` without `lead`.
    pub core: Mutex<Option<Box<Reactor>>>,
    /// With `lead`: loop passes run by clients so far (leads and inline serves) and requests they queued for
    /// their next pass. The reactor thread stands by while this moves, and takes over when it has not moved for
    /// `standby`.
    pub activity: AtomicU64,
    /// With `lead`: clients waiting for a result on their condition variable (not running the loop); while there
    /// are any, the reactor thread serves the engine instead of standing by.
    pub followers: AtomicU32,
    /// With `lead`: set to wake the reactor thread from its stand-by early (a follower appeared, or shutdown).
    pub standby_wake: Mutex<bool>,
    pub standby_cv: Condvar,
    /// With `lead`: the reactor thread waits on the ring (not standing by): a client leaving the loop leaves
    /// `sleeping` set only then.
    pub reactor_in_ring: AtomicBool,
    /// With `lead`: how long the reactor thread stands by between looks at `activity`.
    pub standby: std::time::Duration,
}

impl Shared {
    /// Queues a command and wakes the reactor if it sleeps. Fails once the engine has shut down.
    pub fn send(&self, cmd: Cmd) -> Result<(), EngineError> {
        {
            let mut inbox = lock(&self.inbox);
            if inbox.closed {
                return Err(EngineError::ShutDown);
            }
            inbox.cmds.push(cmd);
            self.has_cmds.store(true, Ordering::SeqCst);
        }
        if self.lead && crate::reactor::serve_inline(self) {
            return Ok(());
        }
        self.wake_if_sleeping();
        Ok(())
    }

    /// With `lead`: queues a client's asynchronous request without running a pass, because the client has other
    /// requests outstanding and will run the loop when it waits or polls for them (so that a batch of its
    /// submissions goes to the policy and the kernel at once, in the `io_uring_enter` it then waits in). Wakes
    /// the thread sleeping on the ring if there is one. If the client neither waits nor polls, the reactor thread
    /// takes the request after its stand-by.
    pub fn send_deferred(&self, cmd: Cmd) -> Result<(), EngineError> {
        {
            let mut inbox = lock(&self.inbox);
            if inbox.closed {
                return Err(EngineError::ShutDown);
            }
            inbox.cmds.push(cmd);
            self.has_cmds.store(true, Ordering::SeqCst);
        }
        // The client is active (it will run the loop when it waits or polls): the reactor keeps standing by.
        self.activity.fetch_add(1, Ordering::SeqCst);
        self.wake_if_sleeping();
        Ok(())
    }

    /// After queueing a command: wakes the thread sleeping on the ring, if one announced it.
    fn wake_if_sleeping(&self) {
        // Pairs with the reactor's store of `sleeping` then load of `has_cmds`: either it sees our command or we
        // see it asleep.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) && self.sleeping.swap(false, Ordering::SeqCst) {
            self.kicks.fetch_add(1, Ordering::Relaxed);
            self.kick();
        }
    }

    /// Marks the inbox closed. Returns false if it already was.
    pub fn close(&self) -> bool {
        let was_open = {
            let mut inbox = lock(&self.inbox);
            let was_open = !inbox.closed;
            inbox.closed = true;
            self.has_cmds.store(true, Ordering::SeqCst);
            was_open
        };
        if self.lead {
            self.wake_standby();
        }
        was_open
    }

    /// With `lead`: ends the reactor thread's stand-by now (it then serves the engine).
    pub fn wake_standby(&self) {
        *lock(&self.standby_wake) = true;
        self.standby_cv.notify_one();
    }

    /// With `lead`: the reactor thread stands by for up to `standby`. True if it was woken by
    /// [`Shared::wake_standby`], false if the time ran out.
    pub fn stand_by(&self) -> bool {
        let mut w = lock(&self.standby_wake);
        if !*w {
            w = self
                .standby_cv
                .wait_timeout(w, self.standby)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        std::mem::replace(&mut *w, false)
    }

    /// With `lead`: after a client stopped running the loop, makes sure a waiting follower is served: if any
    /// client waits on its condition variable, the reactor thread is woken from its stand-by. Pairs with the
    /// follower's registration then second attempt to lead (SeqCst on both sides): either the follower finds
    /// the loop free and leads, or this sees the follower.
    pub fn after_release(&self) {
        fence(Ordering::SeqCst);
        if self.followers.load(Ordering::SeqCst) > 0 {
            self.wake_standby();
        }
    }

    /// Wakes the reactor unconditionally.
    pub fn kick(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to an eventfd we own. A failure (counter overflow) means a
        // wake-up is already pending.
        unsafe {
            libc::write(self.eventfd.as_raw_fd(), (&one as *const u64).cast(), 8);
        }
    }
}

/// With `lead`: a client registered as waiting without running the loop, for as long as this lives (see
/// [`Shared::after_release`]).
pub(crate) struct Follower<'a>(&'a Shared);

impl<'a> Follower<'a> {
    pub fn new(shared: &'a Shared) -> Follower<'a> {
        shared.followers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        Follower(shared)
    }
}

impl Drop for Follower<'_> {
    fn drop(&mut self) {
        self.0.followers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A completed asynchronous request.
#[derive(Debug)]
pub struct Completion {
    /// The tag given to [`Flow::submit_read`](crate::Flow::submit_read) or
    /// [`Flow::submit_write`](crate::Flow::submit_write).
    pub tag: u64,
    /// The buffer, handed back (holding the data, for a read).
    pub buf: AlignedBuf,
    /// Bytes transferred, or why the request failed.
    pub result: Result<usize, EngineError>,
}

/// Per-flow results waiting for the client.
#[derive(Default)]
pub(crate) struct FlowState {
    /// Completed asynchronous requests.
    pub done: VecDeque<Completion>,
    /// The result of the one outstanding blocking request.
    pub sync: Option<Result<usize, EngineError>>,
    /// The client is (about to be) blocked on the condition variable.
    pub waiting: bool,
}

/// A flow's completion queue, shared between its client and the reactor.
pub(crate) struct FlowShared {
    pub state: Mutex<FlowState>,
    pub cv: Condvar,
    /// Results delivered so far; a client polls it briefly before blocking.
    pub delivered: AtomicU64,
    /// How long a client polls for a result before blocking, in nanoseconds.
    pub spin_ns: u64,
}

impl FlowShared {
    pub fn new(spin_ns: u64) -> FlowShared {
        FlowShared {
            state: Mutex::new(FlowState::default()),
            cv: Condvar::new(),
            delivered: AtomicU64::new(0),
            spin_ns,
        }
    }

    /// Polls for up to `spin_ns` for a delivery after `seen`. True if one came.
    pub fn spin_for_delivery(&self, seen: u64) -> bool {
        if self.spin_ns == 0 {
            return false;
        }
        let t0 = std::time::Instant::now();
        loop {
            for _ in 0..64 {
                if self.delivered.load(Ordering::Acquire) != seen {
                    return true;
                }
                std::hint::spin_loop();
            }
            if t0.elapsed().as_nanos() as u64 >= self.spin_ns {
                return false;
            }
        }
    }
}
