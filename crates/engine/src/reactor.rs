//! The reactor: one thread that owns the io_uring instance, the policy (through a [`Driver`]) and the idle timer.
//!
//! Each loop iteration reaps completions, takes the clients' commands, tells the policy about completions and new
//! requests, dispatches while tags are free, (re)arms the idle timer for a `WaitUntil`, hands results to the
//! flows, and then blocks in `io_uring_enter` until the next completion, timer expiry or client wake-up (a read
//! of the engine's eventfd is always pending in the ring).

use crate::buf::AlignedBuf;
use crate::error::EngineError;
use crate::shared::{lock, Cmd, Completion, FlowShared, IoCmd, Shared};
use crate::{EngineConfig, EngineStats};
use bfq_sched::slab::{Slab, SlabKey};
use bfq_sched::tags::{TagClass, TagPool};
use bfq_sched::{Direction, Driver, FlowId, Request, RequestId, Scheduler, Time, SECTOR_BYTES};
use io_uring::{opcode, squeue, types, IoUring};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{fence, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, MutexGuard, TryLockError};

/// Kinds of completion, in the top byte of `user_data`.
const UD_IO: u64 = 1;
const UD_FSYNC: u64 = 2;
const UD_EVENTFD: u64 = 3;
const UD_TIMER: u64 = 4;
const UD_IGNORE: u64 = 5;
const UD_KIND_SHIFT: u32 = 56;
/// Part number of a request issued as separate parts, in bits 32..56 of `user_data`.
const UD_PART_SHIFT: u32 = 32;
const UD_LOW_MASK: u64 = 0xffff_ffff;
const UD_PART_MASK: u64 = 0xff_ffff;

/// Gap between the sector ranges of two files (1 GiB in sectors), and the rounding of a file's range.
const FILE_SECTOR_GAP: u64 = (1 << 30) / SECTOR_BYTES;
/// Most iovecs in one vectored request (the kernel's `UIO_MAXIOV`).
const MAX_IOVECS: usize = 1024;
/// Most files registered with the ring; more are used through plain descriptors.
const MAX_FIXED_FILES: u32 = 4096;
/// At shutdown, how many times the reactor waits for a completion while its eventfd read is still armed. One kick
/// completes it at once; reaching the bound means the kernel never completed the read, and the buffer it reads
/// into is then leaked instead of freed (see `Reactor::finish`).
const MAX_EVENTFD_DISARM_ROUNDS: usize = 1000;
/// Publish counters at least every this many loop iterations.
const STATS_EVERY: u32 = 256;

fn ud(kind: u64, low: u64) -> u64 {
    (kind << UD_KIND_SHIFT) | low
}

/// `CLOCK_MONOTONIC` in nanoseconds (the clock io_uring's absolute timeouts use).
fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Read,
    Write,
    Fsync,
}

bfq_sched::slab_key!(
    /// A client request in the reactor's op arena.
    struct OpKey
);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpState {
    /// Waiting for a scheduler tag before insertion.
    Pending,
    /// Inserted in the policy.
    Queued,
    /// At the device.
    Issued,
}

/// One client request.
struct Op {
    state: OpState,
    kind: OpKind,
    flow: FlowId,
    file: u32,
    offset: u64,
    len: u32,
    ptr: *mut u8,
    buf: Option<AlignedBuf>,
    tag: u64,
    /// The block request is sync (every one but a write submitted async).
    sync: bool,
    /// Kernel result: bytes, or a negative errno.
    res: i32,
}

/// A request dispatched by the policy and at the device.
struct InFlight {
    rq: Request,
    /// Ops carried (the request and those merged into it); sorted by offset when vectored.
    parts: Vec<OpKey>,
    /// Completions still expected from the kernel.
    remaining: u32,
    /// Issued as one readv/writev over `parts` in order.
    vectored: bool,
    iov: Vec<libc::iovec>,
}

struct FileSlot {
    fd: OwnedFd,
    /// Registered with the ring at the index of the slot.
    fixed: bool,
    /// The policy's sector for offset 0.
    base: u64,
}

pub(crate) struct Reactor {
    ring: IoUring,
    shared: Arc<Shared>,
    driver: Driver,
    start_ns: u64,
    files: Vec<FileSlot>,
    fixed_capacity: u32,
    sector_bases: HashMap<(u64, u64), u64>,
    next_base: u64,
    /// Client requests from acceptance to delivery of their result.
    ops: Slab<OpKey, Op>,
    inflight: Vec<Option<InFlight>>,
    free_inflight: Vec<u32>,
    /// Spare part vectors and iovec vectors for reuse.
    spare_parts: Vec<Vec<OpKey>>,
    spare_iov: Vec<Vec<libc::iovec>>,
    /// Requests waiting for a scheduler tag, per tag class ([`TagClass::index`]): sync reads, sync writes, async.
    pending: [VecDeque<OpKey>; 3],
    /// Scheduler tags held by requests inserted and not completed. Engine requests are sync (O_DIRECT) but for
    /// writes submitted async, which draw from the async class.
    tags: TagPool,
    flows: Vec<Option<Arc<FlowShared>>>,
    cmds: Vec<Cmd>,
    dispatched: Vec<Request>,
    done_inflight: Vec<u32>,
    /// Flows to wake after this iteration's deliveries.
    to_notify: Vec<u32>,
    timer: Option<(Time, u64)>,
    timer_gen: u64,
    timespec: Box<types::Timespec>,
    eventfd_buf: Box<u64>,
    eventfd_armed: bool,
    poisoned: Option<String>,
    /// Results were handed to clients this iteration (a new request from them is likely soon).
    delivered_any: bool,
    spin_ns: u64,
    stats: EngineStats,
    iterations: u32,
    /// The inbox was closed when the commands were last taken.
    closed_seen: bool,
}

// SAFETY: the raw pointers a reactor holds (op buffers, iovecs) point into buffers that move with their ops, or
// into buffers lent by clients blocked until the op completes (see `IoCmd`); the reactor is used by one thread at
// a time (the reactor thread, or with `EngineConfig::lead` whichever thread holds `Shared::core`).
unsafe impl Send for Reactor {}

/// Thread body: sets up the ring, reports readiness, runs the loop, and returns the final counters.
pub(crate) fn run(
    policy: Box<dyn Scheduler>,
    cfg: EngineConfig,
    shared: Arc<Shared>,
    ready: SyncSender<Result<(), EngineError>>,
) -> EngineStats {
    let mut reactor = match Reactor::new(policy, &cfg, Arc::clone(&shared)) {
        Ok(r) => r,
        Err(e) => {
            shared.close();
            let _ = ready.send(Err(e));
            return EngineStats::default();
        }
    };
    if shared.lead {
        *lock(&shared.core) = Some(Box::new(reactor));
        let _ = ready.send(Ok(()));
        return run_shared(&shared);
    }
    let _ = ready.send(Ok(()));
    reactor.run();
    reactor.stats
}

/// `io_uring_enter`'s flag to wait for completions.
const IORING_ENTER_GETEVENTS: libc::c_uint = 1;

/// Blocks until the ring `fd` has at least one completion, without submitting or reaping (another thread may be
/// using the ring's queues meanwhile).
fn wait_ring(fd: i32) {
    // SAFETY: io_uring_enter with nothing to submit and no extra argument only waits on the ring; `fd` stays open
    // while the reactor thread (the only caller) runs, since the ring is dropped by that thread when it exits. An
    // error (EINTR) just returns: the caller's loop looks at the ring again.
    unsafe {
        libc::syscall(
            libc::SYS_io_uring_enter,
            fd,
            0 as libc::c_uint,
            1 as libc::c_uint,
            IORING_ENTER_GETEVENTS,
            std::ptr::null::<libc::c_void>(),
            0 as libc::size_t,
        );
    }
}

type CoreGuard<'a> = MutexGuard<'a, Option<Box<Reactor>>>;

/// The engine's state if no other thread runs the loop now.
fn try_core(shared: &Shared) -> Option<CoreGuard<'_>> {
    match shared.core.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// The reactor thread's loop with [`EngineConfig::lead`]: it runs the engine whenever no client does. It holds
/// `Shared::core` only while it works, and waits for the next completion (an I/O, a timer, an eventfd kick or a
/// client's wake-up no-op) without it, so that a client may take over meanwhile.
fn run_shared(shared: &Arc<Shared>) -> EngineStats {
    let mut last_activity = shared.activity.load(Ordering::SeqCst);
    loop {
        let mut g = lock(&shared.core);
        let Some(r) = g.as_mut() else {
            return EngineStats::default();
        };
        shared.sleeping.store(false, Ordering::SeqCst);
        if r.step() {
            let Some(mut r) = g.take() else {
                return EngineStats::default();
            };
            drop(g);
            r.finish();
            return r.stats;
        }
        if !r.prepare_park() {
            continue;
        }
        if let Err(e) = r.enter(0) {
            r.poison(e.to_string());
            continue;
        }
        let must_serve = r.closed_seen || r.poisoned.is_some();
        // Clients ran the loop since the reactor last looked, and none waits without leading: stand by (off the
        // ring) until a whole period passes without a client pass, or someone asks for the reactor.
        let act = shared.activity.load(Ordering::SeqCst);
        if !must_serve && act != last_activity && shared.followers.load(Ordering::SeqCst) == 0 {
            r.stats.reactor_standbys += 1;
            r.publish();
            // Nobody sleeps on the ring now: senders need not kick.
            shared.sleeping.store(false, Ordering::SeqCst);
            drop(g);
            last_activity = act;
            // A client that found the loop taken (by this thread) and registered as a follower, or queued a
            // command, meanwhile: serve it (it registers or queues, then tries the mutex; this unlocks, then
            // looks: one of the two sees the other).
            fence(Ordering::SeqCst);
            if shared.followers.load(Ordering::SeqCst) > 0 || shared.has_cmds.load(Ordering::SeqCst) {
                continue;
            }
            loop {
                if shared.stand_by() {
                    break;
                }
                let now = shared.activity.load(Ordering::SeqCst);
                if now == last_activity || shared.followers.load(Ordering::SeqCst) > 0 {
                    break;
                }
                last_activity = now;
            }
            continue;
        }
        last_activity = act;
        r.stats.reactor_sleeps += 1;
        r.publish();
        let fd = r.ring.as_raw_fd();
        shared.reactor_in_ring.store(true, Ordering::SeqCst);
        drop(g);
        wait_ring(fd);
        shared.reactor_in_ring.store(false, Ordering::SeqCst);
    }
}

/// With [`EngineConfig::lead`]: if no other thread runs the engine, the calling client runs it until `until()`
/// holds (its result has been delivered), blocking in `io_uring_enter` between passes; it reaps, delivers to
/// every flow, takes every client's commands and submits in the same call it waits in. False if another thread
/// runs the engine (the caller then waits for its result to be delivered).
pub(crate) fn lead_until(shared: &Shared, until: &dyn Fn() -> bool) -> bool {
    with_core(shared, |r| {
        r.stats.client_leads += 1;
        loop {
            shared.sleeping.store(false, Ordering::SeqCst);
            if r.step() || until() {
                break;
            }
            if r.prepare_park() {
                r.stats.leader_sleeps += 1;
                r.publish();
                if let Err(e) = r.enter(1) {
                    r.poison(e.to_string());
                }
            }
        }
    })
}

/// With [`EngineConfig::lead`]: runs `work` on the engine's core if no other thread holds it (counted as client
/// activity), then releases it and wakes whoever must serve next. False, without running `work`, if another thread
/// holds the core or the engine has shut down.
fn with_core(shared: &Shared, work: impl FnOnce(&mut Reactor)) -> bool {
    let Some(mut g) = try_core(shared) else {
        return false;
    };
    let Some(r) = g.as_mut() else {
        return false;
    };
    shared.activity.fetch_add(1, Ordering::SeqCst);
    work(r);
    r.release();
    drop(g);
    shared.after_release();
    true
}

/// With [`EngineConfig::lead`]: [`lead_until`] if no other thread runs the engine (`None`: the caller looks for its
/// result again); otherwise the caller registers as a follower and tries once more to lead, in case the leader
/// released in between (`Some`: the caller waits for delivery while it holds the registration).
pub(crate) fn lead_or_follow<'a>(shared: &'a Shared, until: &dyn Fn() -> bool) -> Option<crate::shared::Follower<'a>> {
    if lead_until(shared, until) {
        return None;
    }
    let f = crate::shared::Follower::new(shared);
    if lead_until(shared, until) {
        drop(f);
        return None;
    }
    Some(f)
}

/// With [`EngineConfig::lead`]: right after a client queued a command (or polled and found nothing), if no other
/// thread runs the engine, the client runs one pass itself (the policy sees the request and what it dispatches
/// goes to the kernel from this thread). False if another thread runs the engine (a sender then wakes it if it
/// sleeps).
pub(crate) fn serve_inline(shared: &Shared) -> bool {
    with_core(shared, |r| {
        r.stats.inline_serves += 1;
        shared.sleeping.store(false, Ordering::SeqCst);
        r.step();
    })
}

fn build_ring(entries: u32) -> io::Result<IoUring> {
    let entries = entries.clamp(8, 32768).next_power_of_two();
    // Completions run only when the reactor asks for them, on its own thread: fewer interrupts and wake-ups.
    IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_taskrun_flag()
        .build(entries)
        .or_else(|_| {
            IoUring::builder()
                .setup_coop_taskrun()
                .setup_taskrun_flag()
                .build(entries)
        })
        .or_else(|_| IoUring::new(entries))
}

/// The ring for [`EngineConfig::lead`]: several threads submit and wait, so neither `SINGLE_ISSUER` nor
/// `DEFER_TASKRUN`; no `COOP_TASKRUN` either, so a submitter that runs user code or sleeps elsewhere is
/// interrupted to finish its requests' completions instead of holding them back.
fn build_shared_ring(entries: u32) -> io::Result<IoUring> {
    IoUring::new(entries.clamp(8, 32768).next_power_of_two())
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

fn op_error(kind: OpKind, offset: u64, errno: i32) -> EngineError {
    EngineError::Io {
        op: match kind {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Fsync => "fsync",
        },
        offset,
        source: io::Error::from_raw_os_error(errno),
    }
}

impl Reactor {
    fn new(policy: Box<dyn Scheduler>, cfg: &EngineConfig, shared: Arc<Shared>) -> Result<Reactor, EngineError> {
        let ring = if cfg.lead {
            build_shared_ring(cfg.ring_entries)
        } else {
            build_ring(cfg.ring_entries)
        }
        .map_err(EngineError::Setup)?;
        let mut nofile = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: writes into a valid rlimit.
        let fixed_capacity = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut nofile) } == 0 {
            (nofile.rlim_cur.min(u64::from(MAX_FIXED_FILES)) as u32).max(1)
        } else {
            64
        };
        let fixed_capacity = match ring.submitter().register_files_sparse(fixed_capacity) {
            Ok(()) => fixed_capacity,
            Err(_) => 0,
        };
        let tags = cfg.tag_limit.max(1);
        let tag_pool = TagPool::for_policy(policy.as_ref(), cfg.device.nr_requests);
        let spin_ns = shared.spin_ns;
        Ok(Reactor {
            ring,
            shared,
            driver: Driver::new(policy, tags),
            start_ns: mono_ns(),
            files: Vec::new(),
            fixed_capacity,
            sector_bases: HashMap::new(),
            next_base: 0,
            ops: Slab::with_capacity(256),
            inflight: Vec::with_capacity(tags as usize),
            free_inflight: Vec::with_capacity(tags as usize),
            spare_parts: Vec::new(),
            spare_iov: Vec::new(),
            pending: [VecDeque::new(), VecDeque::new(), VecDeque::new()],
            tags: tag_pool,
            flows: Vec::new(),
            cmds: Vec::with_capacity(256),
            dispatched: Vec::with_capacity(tags as usize),
            done_inflight: Vec::with_capacity(tags as usize),
            to_notify: Vec::new(),
            timer: None,
            timer_gen: 0,
            timespec: Box::new(types::Timespec::new()),
            eventfd_buf: Box::new(0),
            eventfd_armed: false,
            poisoned: None,
            delivered_any: false,
            spin_ns,
            stats: EngineStats::default(),
            iterations: 0,
            closed_seen: false,
        })
    }

    fn now(&self) -> Time {
        mono_ns().saturating_sub(self.start_ns)
    }

    fn run(&mut self) {
        loop {
            match catch_unwind(AssertUnwindSafe(|| self.iteration())) {
                Ok(Ok(true)) => continue,
                Ok(Ok(false)) => break,
                Ok(Err(e)) => self.poison(e.to_string()),
                Err(p) => self.poison(format!(
                    "{} panicked: {}",
                    self.driver.policy().name(),
                    panic_message(&*p)
                )),
            }
        }
        self.finish();
    }

    /// One pass of the loop. Ok(false) when the engine is closed and everything has drained.
    fn iteration(&mut self) -> Result<bool, EngineError> {
        if self.service() {
            return Ok(false);
        }
        self.submit_and_wait()?;
        Ok(true)
    }

    /// [`Reactor::service`], with a panic of the policy failing its requests instead of unwinding into the
    /// caller (a client thread, with `lead`).
    fn step(&mut self) -> bool {
        match catch_unwind(AssertUnwindSafe(|| self.service())) {
            Ok(done) => done,
            Err(p) => {
                let msg = format!("{} panicked: {}", self.driver.policy().name(), panic_message(&*p));
                self.poison(msg);
                false
            }
        }
    }

    /// Before blocking in the kernel: arms the eventfd read, then announces the sleep (`sleeping`) and checks for
    /// work that came meanwhile (the other half of `Shared::send`'s protocol). True if it may block.
    fn prepare_park(&mut self) -> bool {
        self.arm_eventfd();
        self.shared.sleeping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let busy = self.shared.has_cmds.load(Ordering::SeqCst)
            || !self.done_inflight.is_empty()
            || !self.ring.completion().is_empty();
        if busy {
            self.shared.sleeping.store(false, Ordering::SeqCst);
        }
        !busy
    }

    /// A client stops running the loop: everything queued goes to the kernel, the eventfd read is armed (so a
    /// later client's kick reaches the reactor thread), no command is left in the inbox unseen, and, once the
    /// inbox is closed, the reactor thread is woken (a no-op completion) to drain and exit.
    fn release(&mut self) {
        loop {
            self.arm_eventfd();
            if !self.ring.submission().is_empty() {
                if let Err(e) = self.enter(0) {
                    self.poison(e.to_string());
                }
            }
            // Senders must kick only if the reactor thread waits on the ring.
            let in_ring = self.shared.reactor_in_ring.load(Ordering::SeqCst);
            self.shared.sleeping.store(in_ring, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if !self.shared.has_cmds.load(Ordering::SeqCst) {
                break;
            }
            self.shared.sleeping.store(false, Ordering::SeqCst);
            self.step();
        }
        if self.closed_seen {
            self.push(opcode::Nop::new().build().user_data(ud(UD_IGNORE, 0)));
            let _ = self.enter(0);
        }
    }

    /// Reaps, takes the commands, runs the policy, issues and delivers. True when the engine is closed and
    /// everything has drained.
    fn service(&mut self) -> bool {
        self.reap();
        let closed = self.take_commands();
        self.closed_seen = closed;
        if self.poisoned.is_none() {
            self.schedule();
        } else {
            for i in std::mem::take(&mut self.done_inflight) {
                self.finish_inflight(i);
            }
        }
        self.notify();
        self.iterations = self.iterations.wrapping_add(1);
        if self.iterations.is_multiple_of(STATS_EVERY) {
            self.publish();
        }
        closed && self.ops.is_empty()
    }

    /// Processes every completion in the ring.
    fn reap(&mut self) {
        loop {
            // Take the completion queue in small batches so that handlers may use the ring.
            let mut batch = [(0u64, 0i32); 64];
            let mut n = 0;
            {
                let mut cq = self.ring.completion();
                for cqe in &mut cq {
                    batch[n] = (cqe.user_data(), cqe.result());
                    n += 1;
                    if n == batch.len() {
                        break;
                    }
                }
            }
            for &(data, res) in &batch[..n] {
                self.on_cqe(data, res);
            }
            if n < batch.len() {
                break;
            }
        }
    }

    fn on_cqe(&mut self, data: u64, res: i32) {
        let low = data & UD_LOW_MASK;
        match data >> UD_KIND_SHIFT {
            UD_IO => {
                let part = ((data >> UD_PART_SHIFT) & UD_PART_MASK) as usize;
                let Some(Some(f)) = self.inflight.get_mut(low as usize) else {
                    return;
                };
                if f.vectored {
                    let mut left = i64::from(res);
                    for &p in &f.parts {
                        let op = &mut self.ops[p];
                        op.res = if res < 0 {
                            res
                        } else {
                            let got = left.clamp(0, i64::from(op.len));
                            left -= got;
                            got as i32
                        };
                    }
                } else if let Some(&p) = f.parts.get(part) {
                    self.ops[p].res = res;
                }
                bfq_sched::counter::dec(&mut f.remaining, "reactor op parts remaining");
                if f.remaining == 0 {
                    self.done_inflight.push(low as u32);
                }
            }
            UD_FSYNC => {
                if let Some(key) = u32::try_from(low).ok().and_then(|i| self.ops.key_at(i)) {
                    self.ops[key].res = res;
                    self.stats.fsyncs += 1;
                    self.finish_op(key);
                }
            }
            UD_EVENTFD => self.eventfd_armed = false,
            UD_TIMER => {
                if matches!(self.timer, Some((_, g)) if g == low) {
                    self.timer = None;
                    if res == -libc::ETIME {
                        self.stats.timers_fired += 1;
                    }
                }
            }
            _ => {}
        }
    }

    /// Takes the clients' commands. Returns true once the inbox is closed and empty.
    fn take_commands(&mut self) -> bool {
        let closed = {
            let mut inbox = lock(&self.shared.inbox);
            std::mem::swap(&mut inbox.cmds, &mut self.cmds);
            self.shared.has_cmds.store(false, Ordering::SeqCst);
            inbox.closed
        };
        let mut cmds = std::mem::take(&mut self.cmds);
        for cmd in cmds.drain(..) {
            self.command(cmd);
        }
        self.cmds = cmds;
        closed
    }

    fn command(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::FlowStart { info, shared } => {
                let i = info.id.0 as usize;
                if self.flows.len() <= i {
                    self.flows.resize(i + 1, None);
                }
                self.flows[i] = Some(shared);
                if self.poisoned.is_none() {
                    let t0 = mono_ns();
                    self.driver.flow_started(&info, self.now());
                    self.stats.policy_ns += mono_ns() - t0;
                }
            }
            Cmd::FlowExit(id) => {
                if let Some(slot) = self.flows.get_mut(id.0 as usize) {
                    *slot = None;
                }
                if self.poisoned.is_none() {
                    let t0 = mono_ns();
                    self.driver.flow_exited(id, self.now());
                    self.stats.policy_ns += mono_ns() - t0;
                }
            }
            Cmd::Open { fd, geo, reply } => {
                let _ = reply.send(self.register(fd, geo));
            }
            Cmd::Io(io) => self.accept(io),
            Cmd::Fsync { flow, file } => {
                let sync = IoCmd {
                    flow,
                    // Not read for an fsync: the op's kind says what it is.
                    dir: Direction::Write,
                    file,
                    offset: 0,
                    len: 0,
                    ptr: std::ptr::null_mut(),
                    buf: None,
                    tag: 0,
                    sync: true,
                };
                let idx = self.alloc_op(OpKind::Fsync, sync);
                if let Some(msg) = &self.poisoned {
                    let e = EngineError::PolicyFailed(msg.clone());
                    self.fail_op(idx, e);
                    return;
                }
                self.ops[idx].state = OpState::Issued;
                let entry = match self.files.get(file as usize) {
                    Some(f) if f.fixed => opcode::Fsync::new(types::Fixed(file)).build(),
                    Some(f) => opcode::Fsync::new(types::Fd(f.fd.as_raw_fd())).build(),
                    None => {
                        self.fail_op(idx, EngineError::ForeignFile);
                        return;
                    }
                };
                self.push(entry.user_data(ud(UD_FSYNC, u64::from(idx.index()))));
            }
        }
    }

    fn register(&mut self, fd: OwnedFd, geo: crate::device::Geometry) -> Result<(u32, u64), EngineError> {
        let index = self.files.len() as u32;
        let fixed = index < self.fixed_capacity
            && self
                .ring
                .submitter()
                .register_files_update(index, &[fd.as_raw_fd()])
                .is_ok();
        let base = match self.sector_bases.get(&geo.identity) {
            Some(&b) => b,
            None => {
                let b = self.next_base;
                let sectors = geo.size_bytes.div_ceil(SECTOR_BYTES);
                self.next_base = b + sectors.div_ceil(FILE_SECTOR_GAP) * FILE_SECTOR_GAP + FILE_SECTOR_GAP;
                self.sector_bases.insert(geo.identity, b);
                b
            }
        };
        self.files.push(FileSlot { fd, fixed, base });
        Ok((index, base))
    }

    /// Stores a new op of `kind` for the command `io` (whose direction `kind` already says).
    fn alloc_op(&mut self, kind: OpKind, io: IoCmd) -> OpKey {
        self.ops.insert(Op {
            state: OpState::Pending,
            kind,
            flow: io.flow,
            file: io.file,
            offset: io.offset,
            len: io.len,
            ptr: io.ptr,
            buf: io.buf,
            tag: io.tag,
            sync: io.sync || io.dir == Direction::Read,
            res: 0,
        })
    }

    /// The policy's id of op `key`: the slot index in the low 32 bits, and in the high ones the number of ops the
    /// slot has held so far, this one included (the key's generation + 1).
    fn request_id(key: OpKey) -> RequestId {
        RequestId((u64::from(key.generation().wrapping_add(1)) << 32) | u64::from(key.index()))
    }

    /// The op of a request id, if the id is current.
    fn op_of(&self, id: RequestId) -> Option<OpKey> {
        let key = OpKey::from_parts((id.0 & UD_LOW_MASK) as u32, ((id.0 >> 32) as u32).wrapping_sub(1));
        self.ops.contains(key).then_some(key)
    }

    fn accept(&mut self, io: IoCmd) {
        let (dir, file, sync) = (io.dir, io.file, io.sync || io.dir == Direction::Read);
        let kind = match dir {
            Direction::Read => OpKind::Read,
            Direction::Write => OpKind::Write,
        };
        let idx = self.alloc_op(kind, io);
        self.stats.submitted += 1;
        if let Some(msg) = &self.poisoned {
            let e = EngineError::PolicyFailed(msg.clone());
            self.fail_op(idx, e);
        } else if (file as usize) >= self.files.len() {
            self.fail_op(idx, EngineError::ForeignFile);
        } else {
            self.pending[TagClass::of(dir, sync).index()].push_back(idx);
        }
    }

    /// Policy work for this iteration: completions, admissions and inserts, dispatch, and the idle timer.
    fn schedule(&mut self) {
        let now = self.now();
        let t0 = mono_ns();
        let mut policy_ns = 0;
        for k in 0..self.done_inflight.len() {
            let i = self.done_inflight[k];
            if let Some(Some(f)) = self.inflight.get(i as usize) {
                self.driver.complete(&f.rq, now);
            }
        }
        policy_ns += mono_ns() - t0;
        for i in std::mem::take(&mut self.done_inflight) {
            self.finish_inflight(i);
        }
        // Admit waiting requests while scheduler tags (and the policy's depth limit for their kind) allow.
        let t1 = mono_ns();
        for class in TagClass::ALL {
            while let Some(&idx) = self.pending[class.index()].front() {
                if !self.tags.try_allocate(class, self.driver.policy()) {
                    break;
                }
                self.pending[class.index()].pop_front();
                self.ops[idx].state = OpState::Queued;
                let op = &self.ops[idx];
                let dir = match op.kind {
                    OpKind::Write => Direction::Write,
                    _ => Direction::Read,
                };
                let sector = self.files_base(op.file) + op.offset / SECTOR_BYTES;
                let sectors = (u64::from(op.len) / SECTOR_BYTES) as u32;
                let rq = Request::new(Self::request_id(idx), op.flow, dir, op.sync, sector, sectors);
                self.driver.insert(rq, now);
            }
        }
        let mut out = std::mem::take(&mut self.dispatched);
        self.driver.pump(now, &mut out);
        policy_ns += mono_ns() - t1;
        self.stats.policy_ns += policy_ns;
        for rq in out.drain(..) {
            self.issue(rq);
        }
        self.dispatched = out;
        self.stats.max_in_flight = self.stats.max_in_flight.max(self.driver.in_flight());
        self.arm_timer(self.driver.wakeup());
        // Liveness guard: a policy that holds requests but dispatches nothing and sets no timer while the device
        // is idle would hang its clients; fail instead.
        if self.driver.in_flight() == 0 && self.driver.wakeup().is_none() && self.driver.policy().queued() > 0 {
            let msg = format!(
                "{} holds {} requests but dispatches none with the device idle",
                self.driver.policy().name(),
                self.driver.policy().queued()
            );
            self.poison(msg);
        }
    }

    fn files_base(&self, file: u32) -> u64 {
        self.files.get(file as usize).map_or(0, |f| f.base)
    }

    /// Sorts `parts` by offset and tells whether they form one contiguous range of one file in one direction.
    fn contiguous(&self, parts: &mut [OpKey]) -> bool {
        if parts.len() > MAX_IOVECS {
            return false;
        }
        let ops = &self.ops;
        parts.sort_unstable_by_key(|&p| (ops[p].file, ops[p].offset));
        parts.windows(2).all(|w| {
            let (a, b) = (&ops[w[0]], &ops[w[1]]);
            a.file == b.file && a.kind == b.kind && a.offset + u64::from(a.len) == b.offset
        })
    }

    /// Sends a dispatched request to the kernel.
    fn issue(&mut self, rq: Request) {
        self.stats.dispatched += 1;
        let mut parts = self.spare_parts.pop().unwrap_or_default();
        parts.clear();
        for id in std::iter::once(rq.id).chain(rq.merged.iter().copied()) {
            if let Some(i) = self.op_of(id) {
                if self.ops[i].state == OpState::Queued {
                    parts.push(i);
                }
            }
        }
        if parts.is_empty() {
            // Not a request of ours (a faulty policy): give its tag back at once.
            let now = self.now();
            self.driver.complete(&rq, now);
            self.spare_parts.push(parts);
            return;
        }
        for &p in &parts {
            self.ops[p].state = OpState::Issued;
        }
        let vectored = parts.len() > 1 && self.contiguous(&mut parts);
        let slot = match self.free_inflight.pop() {
            Some(s) => s,
            None => {
                self.inflight.push(None);
                (self.inflight.len() - 1) as u32
            }
        };
        let mut iov = self.spare_iov.pop().unwrap_or_default();
        iov.clear();
        let n_parts = parts.len();
        let remaining = if vectored || n_parts == 1 { 1 } else { n_parts as u32 };
        let mut entries: [Option<squeue::Entry>; 1] = [None];
        if vectored {
            for &p in &parts {
                let op = &self.ops[p];
                iov.push(libc::iovec {
                    iov_base: op.ptr.cast(),
                    iov_len: op.len as usize,
                });
            }
            let first = &self.ops[parts[0]];
            let (kind, file, offset) = (first.kind, first.file, first.offset);
            let fslot = &self.files[file as usize];
            let (ptr, n) = (iov.as_ptr(), iov.len() as u32);
            let e = match (kind, fslot.fixed) {
                (OpKind::Write, true) => opcode::Writev::new(types::Fixed(file), ptr, n).offset(offset).build(),
                (OpKind::Write, false) => opcode::Writev::new(types::Fd(fslot.fd.as_raw_fd()), ptr, n)
                    .offset(offset)
                    .build(),
                (_, true) => opcode::Readv::new(types::Fixed(file), ptr, n).offset(offset).build(),
                (_, false) => opcode::Readv::new(types::Fd(fslot.fd.as_raw_fd()), ptr, n)
                    .offset(offset)
                    .build(),
            };
            entries[0] = Some(e.user_data(ud(UD_IO, u64::from(slot))));
        }
        self.inflight[slot as usize] = Some(InFlight {
            rq,
            parts,
            remaining,
            vectored,
            iov,
        });
        if let Some(e) = entries[0].take() {
            self.push(e);
            return;
        }
        for k in 0..n_parts {
            let p = match &self.inflight[slot as usize] {
                Some(f) => f.parts[k],
                None => return,
            };
            let e = self
                .rw_entry(p)
                .user_data(ud(UD_IO, ((k as u64) << UD_PART_SHIFT) | u64::from(slot)));
            self.push(e);
        }
    }

    /// A plain read or write of one op.
    fn rw_entry(&self, p: OpKey) -> squeue::Entry {
        let op = &self.ops[p];
        let fslot = &self.files[op.file as usize];
        match (op.kind, fslot.fixed) {
            (OpKind::Write, true) => opcode::Write::new(types::Fixed(op.file), op.ptr, op.len)
                .offset(op.offset)
                .build(),
            (OpKind::Write, false) => opcode::Write::new(types::Fd(fslot.fd.as_raw_fd()), op.ptr, op.len)
                .offset(op.offset)
                .build(),
            (_, true) => opcode::Read::new(types::Fixed(op.file), op.ptr, op.len)
                .offset(op.offset)
                .build(),
            (_, false) => opcode::Read::new(types::Fd(fslot.fd.as_raw_fd()), op.ptr, op.len)
                .offset(op.offset)
                .build(),
        }
    }

    /// Queues a submission entry, flushing the submission queue to the kernel if it is full.
    fn push(&mut self, e: squeue::Entry) {
        loop {
            // SAFETY: every pointer in our entries (buffers, iovecs, the timespec, the eventfd word) stays valid
            // until the matching completion is reaped: buffers are owned by ops or lent by blocked clients,
            // iovecs live in the in-flight slot, the timespec and eventfd word in boxes owned by the reactor.
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                return;
            }
            if let Err(err) = self.ring.submit() {
                if err.raw_os_error() == Some(libc::EBUSY) {
                    // The completion queue is full: make room.
                    self.reap();
                }
            }
        }
    }

    /// Makes the idle timer match the policy's wish: at most one armed, replaced when the wish changes.
    fn arm_timer(&mut self, want: Option<Time>) {
        if want == self.timer.map(|t| t.0) {
            return;
        }
        if let Some((_, g)) = self.timer.take() {
            let e = opcode::TimeoutRemove::new(ud(UD_TIMER, g))
                .build()
                .user_data(ud(UD_IGNORE, 0));
            self.push(e);
        }
        if let Some(t) = want {
            self.timer_gen = (self.timer_gen + 1) & UD_LOW_MASK;
            let abs = self.start_ns + t;
            *self.timespec = types::Timespec::new()
                .sec(abs / 1_000_000_000)
                .nsec((abs % 1_000_000_000) as u32);
            let e = opcode::Timeout::new(&*self.timespec)
                .flags(types::TimeoutFlags::ABS)
                .build()
                .user_data(ud(UD_TIMER, self.timer_gen));
            self.push(e);
            self.timer = Some((t, self.timer_gen));
            self.stats.timers_armed += 1;
        }
    }

    /// Tells the clients about a dispatched request that has fully completed.
    fn finish_inflight(&mut self, i: u32) {
        let Some(f) = self.inflight.get_mut(i as usize).and_then(Option::take) else {
            return;
        };
        let InFlight { mut parts, iov, .. } = f;
        for &p in &parts {
            let dir = match self.ops[p].kind {
                OpKind::Write => Direction::Write,
                _ => Direction::Read,
            };
            self.tags.release(TagClass::of(dir, self.ops[p].sync));
            self.finish_op(p);
        }
        parts.clear();
        self.spare_parts.push(parts);
        self.spare_iov.push(iov);
        self.free_inflight.push(i);
    }

    /// Turns an op's kernel result into the client's result, delivers it and frees the op.
    fn finish_op(&mut self, idx: OpKey) {
        let op = &self.ops[idx];
        let res = op.res;
        let result = if res < 0 {
            Err(op_error(op.kind, op.offset, -res))
        } else {
            let got = res as usize;
            let want = op.len as usize;
            match op.kind {
                OpKind::Read if got < want => Err(EngineError::ShortRead {
                    offset: op.offset,
                    requested: want,
                    transferred: got,
                }),
                OpKind::Write if got < want => Err(EngineError::ShortWrite {
                    offset: op.offset,
                    requested: want,
                    transferred: got,
                }),
                _ => Ok(got),
            }
        };
        match (&result, op.kind) {
            (Ok(n), OpKind::Read) => self.stats.bytes_read += *n as u64,
            (Ok(n), OpKind::Write) => self.stats.bytes_written += *n as u64,
            _ => {}
        }
        self.complete_op(idx, result);
    }

    fn fail_op(&mut self, idx: OpKey, e: EngineError) {
        self.complete_op(idx, Err(e));
    }

    fn complete_op(&mut self, idx: OpKey, result: Result<usize, EngineError>) {
        let Some(op) = self.ops.remove(idx) else {
            return;
        };
        if op.kind != OpKind::Fsync {
            self.stats.completed += 1;
        }
        if result.is_err() {
            self.stats.errors += 1;
        }
        let Op { buf, flow, tag, .. } = op;
        let Some(Some(fs)) = self.flows.get(flow.0 as usize) else {
            return;
        };
        let mut st = lock(&fs.state);
        match buf {
            Some(buf) => st.done.push_back(Completion { tag, buf, result }),
            None => st.sync = Some(result),
        }
        fs.delivered.fetch_add(1, Ordering::Release);
        self.delivered_any = true;
        if st.waiting {
            st.waiting = false;
            drop(st);
            self.to_notify.push(flow.0);
        }
    }

    /// Wakes the clients that got results this iteration.
    fn notify(&mut self) {
        for id in self.to_notify.drain(..) {
            if let Some(Some(fs)) = self.flows.get(id as usize) {
                fs.cv.notify_one();
                self.stats.client_wakeups += 1;
            }
        }
    }

    /// Stops using the policy: fails every request it or the engine still holds that is not at the device,
    /// refuses new ones, and lets the in-flight ones drain.
    fn poison(&mut self, msg: String) {
        if self.poisoned.is_some() {
            return;
        }
        self.poisoned = Some(msg.clone());
        self.shared.close();
        for q in &mut self.pending {
            q.clear();
        }
        let waiting: Vec<OpKey> = self
            .ops
            .iter()
            .filter(|(_, op)| op.kind != OpKind::Fsync && matches!(op.state, OpState::Pending | OpState::Queued))
            .map(|(key, _)| key)
            .collect();
        for idx in waiting {
            self.fail_op(idx, EngineError::PolicyFailed(msg.clone()));
        }
        self.arm_timer(None);
        self.notify();
    }

    fn publish(&mut self) {
        self.stats.uptime_ns = self.now();
        self.stats.reactor_kicks = self.shared.kicks.load(Ordering::Relaxed);
        *lock(&self.shared.stats) = self.stats;
    }

    /// Submits queued entries and, unless there is work already, blocks until the next completion.
    fn submit_and_wait(&mut self) -> Result<(), EngineError> {
        self.arm_eventfd();
        if std::mem::take(&mut self.delivered_any) && self.spin_ns > 0 {
            // A client just got a result and will likely send its next request within microseconds: hand the
            // kernel what we have, then poll briefly instead of paying for a wake-up.
            self.enter(0)?;
            if self.spin_for_commands() {
                return Ok(());
            }
        }
        // The eventfd read armed above is still pending (nothing was reaped since), so this only announces the
        // sleep and checks for work that came meanwhile.
        if !self.prepare_park() {
            return self.enter(0);
        }
        self.stats.reactor_sleeps += 1;
        self.publish();
        let r = self.enter(1);
        self.shared.sleeping.store(false, Ordering::SeqCst);
        r
    }

    /// Makes sure a read of the eventfd is pending in the ring, so that a client's kick is a completion.
    fn arm_eventfd(&mut self) {
        if !self.eventfd_armed {
            let e = opcode::Read::new(
                types::Fd(self.shared.eventfd.as_raw_fd()),
                (&mut *self.eventfd_buf as *mut u64).cast(),
                8,
            )
            .build()
            .user_data(ud(UD_EVENTFD, 0));
            self.push(e);
            self.eventfd_armed = true;
        }
    }

    /// Polls for up to `spin_ns` for a client command. True if one came.
    fn spin_for_commands(&self) -> bool {
        if self.spin_ns == 0 {
            return false;
        }
        let t0 = mono_ns();
        loop {
            for _ in 0..64 {
                if self.shared.has_cmds.load(Ordering::Relaxed) {
                    return true;
                }
                std::hint::spin_loop();
            }
            if mono_ns() - t0 >= self.spin_ns {
                return false;
            }
        }
    }

    fn enter(&mut self, want: usize) -> Result<(), EngineError> {
        match self.ring.submitter().submit_and_wait(want) {
            Ok(_) => Ok(()),
            Err(e) => match e.raw_os_error() {
                // Interrupted, or the completion queue needs reaping first: the next iteration does that.
                Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN) => Ok(()),
                _ => Err(EngineError::Ring(e)),
            },
        }
    }

    /// After the loop: fail anything left, make sure the kernel no longer holds our eventfd word, publish.
    fn finish(&mut self) {
        let msg = self.poisoned.clone().unwrap_or_else(|| "engine stopped".into());
        let waiting: Vec<OpKey> = self
            .ops
            .iter()
            .filter(|(_, op)| matches!(op.state, OpState::Pending | OpState::Queued))
            .map(|(key, _)| key)
            .collect();
        for idx in waiting {
            self.fail_op(idx, EngineError::PolicyFailed(msg.clone()));
        }
        self.notify();
        self.arm_timer(None);
        if self.eventfd_armed {
            self.shared.kick();
            for _ in 0..MAX_EVENTFD_DISARM_ROUNDS {
                if self.enter(1).is_err() {
                    break;
                }
                self.reap();
                if !self.eventfd_armed {
                    break;
                }
            }
            if self.eventfd_armed {
                // The kernel may still write the eventfd counter into `eventfd_buf`: never free it under the
                // kernel. Leaking 8 bytes is the safe outcome; debug builds stop here, as this should not happen.
                let held = std::mem::replace(&mut self.eventfd_buf, Box::new(0));
                Box::leak(held);
                debug_assert!(
                    false,
                    "the eventfd read was still armed after {MAX_EVENTFD_DISARM_ROUNDS} rounds at shutdown"
                );
            }
        }
        self.notify();
        // Release the registered files now: the kernel frees a closed ring's resources asynchronously, which
        // would keep the files (and their file system) busy for a moment after shutdown returns.
        if self.fixed_capacity > 0 {
            let _ = self.ring.submitter().unregister_files();
        }
        self.files.clear();
        self.publish();
    }
}
