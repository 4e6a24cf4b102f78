//! The simulation: runs processes, the host model, a policy (through the dispatch driver) and a device model in
//! virtual time. Integer nanoseconds; every tie is broken by a sequence number, so a run is a pure function of its
//! inputs.

use crate::device::Device;
use crate::event::EventQueue;
use crate::host::{
    Allocator, DirtyThrottle, FileLayout, InodeOrder, PageCache, PageState, RaState, Wbt, WbtConfig, WriterWriteback,
    PAGE_BYTES, PAGE_SECTORS,
};
use crate::metrics::Metrics;
use bfq_sched::counter::dec;
use bfq_sched::merge::IntMap;
use bfq_sched::slab::{Slab, SlabKey};
use bfq_sched::tags::{TagClass, TagPool};
use bfq_sched::{
    ensure_invariant, DeviceInfo, Direction, Driver, FlowId, FlowInfo, GroupId, InvariantViolation, Request, RequestId,
    Scheduler, Time, SEC,
};
use bfq_workload::{Actions, Event, FileId, FileSpec, IoError, IoMode, Op, Process, ProcessReport};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Instant;

/// Host settings, named after the Linux knobs they model.
#[derive(Debug, Clone, PartialEq)]
pub struct HostConfig {
    /// Memory available to the page cache (bytes). 4 GiB: a desktop of the seeds' era.
    pub memory_bytes: u64,
    /// Maximum readahead window (`read_ahead_kb`), KiB.
    pub read_ahead_kb: u64,
    /// Background writeback starts above this share of memory dirty (`dirty_background_ratio`), percent.
    pub dirty_background_ratio: u64,
    /// Writers are throttled above this share of memory dirty (`dirty_ratio`), percent.
    pub dirty_ratio: u64,
    /// Dirty data older than this is written back at the next periodic wake (`dirty_expire_centisecs`), ns.
    pub dirty_expire: Time,
    /// Period of the flusher's wake-ups (`dirty_writeback_centisecs`), ns.
    pub writeback_interval: Time,
    /// CPU time of one system call (ns): keeps cache-hit loops from running in zero time. The default, 2 µs, is an
    /// estimate for the seeds' desktops (docs/DEVICES.md, "Host: CPU costs of a read", with this machine's
    /// measured figure and the sensitivity); a measured device may carry its host's figure.
    pub syscall_ns: Time,
    /// CPU time to copy one KiB between the page cache and user memory (ns). The default, 250 ns (4 GB/s), is an
    /// estimate like `syscall_ns`.
    pub copy_ns_per_kib: Time,
    /// Measure the wall-clock time spent inside the policy (non-deterministic; off for byte-identical output).
    pub time_policy: bool,
    /// Writeback throttling (blk-wbt) with this read latency target (`wbt_lat_usec`), ns; `None`: no throttling
    /// (the 3.13 block layer, or BFQ, which disables it). See [`crate::host::wbt`].
    pub wbt_target: Option<Time>,
    /// The kernel's timer tick, ticks per second (`CONFIG_HZ`): policies whose kernel armed timers in jiffies
    /// round them to it ([`bfq_sched::tick`], [`Scheduler::set_timer_hz`]). `None` (the default): exact,
    /// high-resolution timers.
    pub timer_hz: Option<u32>,
    /// What a buffered writer over the dirty limit does: sleep while the flusher writes back (Linux 3.2 and later,
    /// the default), or write dirty pages back itself (before 3.2: 2.6.18's `balance_dirty_pages`). See
    /// [`crate::host::throttle`].
    pub dirty_throttle: DirtyThrottle,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            memory_bytes: 4 << 30,
            read_ahead_kb: 128,
            dirty_background_ratio: 10,
            dirty_ratio: 20,
            dirty_expire: 30 * SEC,
            writeback_interval: 5 * SEC,
            syscall_ns: 2_000,
            copy_ns_per_kib: 250,
            time_policy: true,
            wbt_target: None,
            timer_hz: None,
            dirty_throttle: DirtyThrottle::Sleep,
        }
    }
}

/// Errors building a simulation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// A file does not fit.
    #[error(transparent)]
    Alloc(#[from] crate::host::layout::AllocError),
}

/// Handle of a process in a simulation.
pub type Pid = u32;

/// Flow of the writeback (flusher) thread.
pub const FLUSHER_FLOW: FlowId = FlowId(0);

#[derive(Debug)]
enum Ev {
    Start(Pid),
    Wake(Pid, u64),
    /// An operation's result; the error is boxed so that the event queue's entries stay small (errors are rare).
    Deliver(Pid, u64, Result<u64, Box<IoError>>),
    FlusherWake,
    DropCaches,
    /// The writeback throttle's statistics window ends.
    WbtWindow,
    /// A throttled writer's congestion wait times out ([`WriterJob::id`], wait generation).
    WriterWake(u64, u64),
}

/// A buffered write whose process is inside `balance_dirty_pages` writing dirty pages back itself
/// ([`DirtyThrottle::WriteBack`]).
#[derive(Debug)]
struct WriterJob {
    id: u64,
    /// The write operation, completed when the writer leaves.
    opid: OpKey,
    flow: FlowId,
    /// `balance_dirty_pages` calls still to make for this write (one per `check_every_pages` it dirtied).
    calls_left: u64,
    /// Pages written back by the current call, over all its passes (`pages_written`).
    written: u64,
    /// Inside a writeback pass (`writeback_inodes`): when it began, and pages it may still write (`nr_to_write`).
    pass: Option<(Time, u64)>,
    /// The inode it holds.
    inode: Option<u32>,
    /// Its last request, waiting for a request (tag) to be free: the writer sleeps in `get_request_wait`.
    blocked: Option<ReqKey>,
    /// Sleeping in `blk_congestion_wait`, with this wait's generation.
    sleeping: Option<u64>,
    /// Busy on the CPU preparing its last request ([`WriterWriteback::submit_ns_per_page`]), with this wait's
    /// generation.
    busy: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReqKind {
    /// Fills page-cache pages `[page, page+pages)` of `file`.
    CacheRead,
    /// Writes back page-cache pages.
    Writeback,
    /// O_DIRECT transfer.
    Direct,
}

#[derive(Debug)]
struct BlockReq {
    file: u32,
    page: u64,
    pages: u64,
    kind: ReqKind,
    flow: FlowId,
    dir: Direction,
    sync: bool,
    sector: u64,
    sectors: u32,
    /// A file-system metadata read (REQ_META | REQ_PRIO), from [`Op::Read`]'s `meta`.
    meta: bool,
    /// Merged into a queued request at submission without taking a tag (legacy pools: a merged bio takes no
    /// request).
    tagless: bool,
    created: Time,
    /// When it entered the policy (after any wait for a tag); 0 until then.
    inserted: Time,
    waiters: Waiters,
}

/// The operations waiting for a block request, in the order they started waiting. Nearly every request has at most
/// one, which is kept inline: no allocation per request.
#[derive(Debug, Default)]
struct Waiters {
    first: Option<OpKey>,
    more: Vec<OpKey>,
}

impl Waiters {
    /// `op` alone.
    fn one(op: OpKey) -> Self {
        Waiters {
            first: Some(op),
            more: Vec::new(),
        }
    }

    /// Adds `op` after the others.
    fn push(&mut self, op: OpKey) {
        if self.first.is_none() {
            self.first = Some(op);
        } else {
            self.more.push(op);
        }
    }

    /// Every waiter, in order.
    fn iter(&self) -> impl Iterator<Item = OpKey> + '_ {
        self.first.into_iter().chain(self.more.iter().copied())
    }
}

impl BlockReq {
    fn tag_class(&self) -> TagClass {
        TagClass::of(self.dir, self.sync)
    }
}

#[derive(Debug)]
struct OpState {
    pid: Pid,
    tag: u64,
    deps: u32,
    bytes: u64,
    copy: bool,
}

struct ProcSlot {
    proc: Box<dyn Process>,
    flow: FlowId,
    alive: bool,
    started: Option<Time>,
    exited: Option<Time>,
    wake_gen: u64,
}

bfq_sched::slab_key!(
    /// A block request in the simulation's request arena.
    struct ReqKey
);
bfq_sched::slab_key!(
    /// A process operation waiting for block requests (or a writeback release).
    struct OpKey
);
bfq_sched::slab_key!(
    /// A request on the device; its slot index is the device tag.
    struct DevKey
);

#[derive(Debug, Default)]
struct Flusher {
    /// Writeback requests created by the flusher and not yet completed.
    outstanding: u32,
    cursor_file: u32,
    cursor_page: u64,
    /// Write back only files dirtied before this time (periodic, "kupdate" writeback); `None` when not in that mode.
    expire_before: Option<Time>,
}

/// A simulation of one host with one device.
pub struct Simulation {
    now: Time,
    host: HostConfig,
    device: Box<dyn Device>,
    info: DeviceInfo,
    driver: Driver,
    alloc: Allocator,
    files: Vec<FileLayout>,
    names: Vec<String>,
    cache: PageCache,
    procs: Vec<ProcSlot>,
    events: EventQueue<Ev>,
    /// Block requests from creation to completion; a request's id carries its key's generation, so ids are unique
    /// over the run.
    reqs: Slab<ReqKey, BlockReq>,
    ops: Slab<OpKey, OpState>,
    /// Requests on the device, by device tag (the slot index).
    on_device: Slab<DevKey, Request>,
    /// Requests waiting for a scheduler tag, per [`TagClass`], in arrival order.
    tag_wait: [VecDeque<ReqKey>; 3],
    /// Scheduler tags held by requests inserted into the policy and not yet completed.
    tags: TagPool,
    /// In-flight page-cache reads: (file, first page) -> (pages, request slot).
    reading: BTreeMap<(u32, u64), (u64, ReqKey)>,
    /// Writeback requests not yet completed: (file, first page) -> request slot.
    writing: BTreeMap<(u32, u64), ReqKey>,
    /// Readahead state per (process, file), keyed by [`Simulation::ra_key`]. A fast integer hash: looked up on
    /// every buffered read, and never iterated (so its order cannot reach the results).
    ra: IntMap<u64, RaState>,
    flusher: Flusher,
    throttled: Vec<OpKey>,
    /// Throttled writers writing back themselves ([`DirtyThrottle::WriteBack`]), in the order they entered.
    writers: Vec<WriterJob>,
    /// Id of the next [`WriterJob`], and of the next congestion wait.
    writer_ids: u64,
    /// The inode order of the writers' writeback.
    inodes: InodeOrder,
    /// Writeback throttling, if enabled ([`HostConfig::wbt_target`]).
    wbt: Option<Wbt>,
    /// When the request on each device tag was dispatched, ns (indexed by tag).
    dispatched_at: Vec<Time>,
    metrics: Metrics,
    actions: Actions,
    dispatched: Vec<Request>,
    chunks: Vec<(u64, u64, u64)>,
    runs: Vec<(u64, u64)>,
}

impl Simulation {
    /// A simulation of `device` scheduled by `policy`.
    pub fn new(device: Box<dyn Device>, policy: Box<dyn Scheduler>, host: HostConfig, seed: u64) -> Self {
        let info = device.info();
        let queue_depth = info.queue_depth;
        // Legacy elevators allocate requests by 3.13's rules (two pools of 128, batching, congestion); blk-mq
        // policies from the device's tag set.
        let tags = TagPool::legacy_for(policy.as_ref(), info.nr_requests);
        let mut driver = Driver::new(policy, info.queue_depth);
        if let Some(hz) = host.timer_hz {
            driver.set_timer_hz(hz);
        }
        driver.flow_started(&FlowInfo::new(FLUSHER_FLOW), 0);
        let mut device = device;
        device.flow_started(&FlowInfo::new(FLUSHER_FLOW), 0);
        let cache = PageCache::new(host.memory_bytes / PAGE_BYTES);
        let mut sim = Simulation {
            now: 0,
            alloc: Allocator::new(info.capacity_sectors, seed ^ 0xA110C),
            info,
            device,
            driver,
            files: Vec::new(),
            names: Vec::new(),
            cache,
            procs: Vec::new(),
            events: EventQueue::new(),
            reqs: Slab::new(),
            ops: Slab::new(),
            on_device: Slab::new(),
            tag_wait: Default::default(),
            tags,
            reading: BTreeMap::new(),
            writing: BTreeMap::new(),
            ra: IntMap::default(),
            flusher: Flusher::default(),
            throttled: Vec::new(),
            writers: Vec::new(),
            writer_ids: 0,
            inodes: InodeOrder::default(),
            wbt: host
                .wbt_target
                .map(|min_lat| Wbt::new(WbtConfig { min_lat, queue_depth })),
            dispatched_at: Vec::new(),
            metrics: Metrics::default(),
            actions: Actions::default(),
            dispatched: Vec::new(),
            chunks: Vec::new(),
            runs: Vec::new(),
            host,
        };
        let first = sim.host.writeback_interval;
        sim.events.push(first, Ev::FlusherWake);
        sim
    }

    /// Current virtual time (ns).
    pub fn now(&self) -> Time {
        self.now
    }

    /// The device's properties.
    pub fn device_info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Places a file on the device; returns its id for processes to use.
    pub fn add_file(&mut self, spec: &FileSpec) -> Result<FileId, SimError> {
        let layout = self.alloc.place(spec)?;
        let id = self.cache.add_file(layout.pages());
        self.files.push(layout);
        self.names.push(spec.name.clone());
        Ok(id)
    }

    /// Where a file lives on the device.
    pub fn file_layout(&self, file: FileId) -> Option<&FileLayout> {
        self.files.get(file as usize)
    }

    /// Starts `proc` at time `at` (its flow id is its pid + 1; flow 0 is the flusher).
    pub fn spawn(&mut self, at: Time, proc: Box<dyn Process>) -> Pid {
        let pid = self.procs.len() as Pid;
        self.procs.push(ProcSlot {
            proc,
            flow: FlowId(pid + 1),
            alive: false,
            started: None,
            exited: None,
            wake_gen: 0,
        });
        self.events.push(at.max(self.now), Ev::Start(pid));
        pid
    }

    /// Drops clean page-cache pages at time `at` (`echo 3 > /proc/sys/vm/drop_caches`, without a sync).
    pub fn drop_caches_at(&mut self, at: Time) {
        self.events.push(at.max(self.now), Ev::DropCaches);
    }

    /// What process `pid` measured.
    pub fn report(&self, pid: Pid) -> Option<ProcessReport> {
        self.procs.get(pid as usize).map(|p| p.proc.report())
    }

    /// When process `pid` started and exited.
    pub fn lifetime(&self, pid: Pid) -> Option<(Option<Time>, Option<Time>)> {
        self.procs.get(pid as usize).map(|p| (p.started, p.exited))
    }

    /// The flow of process `pid`.
    pub fn flow_of(&self, pid: Pid) -> Option<FlowId> {
        self.procs.get(pid as usize).map(|p| p.flow)
    }

    /// Measurements so far.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The scheduler tags (request pools), for inspection.
    pub fn tags(&self) -> &TagPool {
        &self.tags
    }

    /// Page cache state, for inspection.
    pub fn page_cache(&self) -> &PageCache {
        &self.cache
    }

    /// Requests inserted into the policy (before merging).
    pub fn inserted_requests(&self) -> u64 {
        self.driver.stats().inserted
    }

    /// Runs until `limit` (ns) or until nothing can happen any more.
    pub fn run_until(&mut self, limit: Time) {
        self.run_while(limit, |_| true);
    }

    /// Runs until process `pid` exits or `limit`; returns its exit time if it exited.
    pub fn run_until_exit(&mut self, pid: Pid, limit: Time) -> Option<Time> {
        self.run_while(limit, |s| s.procs.get(pid as usize).is_some_and(|p| p.exited.is_none()));
        self.procs.get(pid as usize).and_then(|p| p.exited)
    }

    fn run_while(&mut self, limit: Time, keep_going: impl Fn(&Simulation) -> bool) {
        while keep_going(self) {
            let next = earliest(
                earliest(self.device.next_completion(), self.driver.wakeup()),
                self.events.peek_time(),
            );
            let Some(next) = next else {
                self.now = self.now.max(limit);
                break;
            };
            if next > limit {
                self.now = self.now.max(limit);
                break;
            }
            self.now = self.now.max(next);
            let mut progressed = false;
            while let Some(tag) = self.device.pop_completion(self.now) {
                self.device_done(tag);
                progressed = true;
            }
            if self.driver.wakeup().is_some_and(|t| t <= self.now) {
                self.pump();
                progressed = true;
            }
            while let Some((_, ev)) = self.events.pop_due(self.now) {
                self.handle(ev);
                progressed = true;
            }
            if !progressed {
                // A device reported a completion time it then did not deliver: never spin on it.
                self.now += 1;
            }
            if cfg!(debug_assertions) {
                if let Err(e) = self.check_invariants() {
                    panic!("simulation at {} ns: {e}", self.now);
                }
            }
        }
    }

    /// Checks the simulation's bookkeeping against the structures it counts, then the policy's own invariants:
    ///
    /// - the scheduler tags allocated per class equal the live block requests of that class that are not waiting
    ///   for a tag, and in all equal the requests inserted and not completed: those the policy holds
    ///   ([`Scheduler::queued`]) plus the parts of the requests on the device;
    /// - the driver's in-flight count equals the requests on the device;
    /// - the in-flight page-cache reads and writebacks indexed by page each name a live request of that kind, and
    ///   every live request of those kinds is indexed;
    /// - the flusher's outstanding count equals its live async writeback requests;
    /// - every pending operation waits for as many requests as list it as a waiter (throttled writes wait for one
    ///   release instead);
    /// - the arenas' own bookkeeping holds.
    ///
    /// [`Simulation::run_until`] calls it after every event step in debug builds and panics on a violation.
    pub fn check_invariants(&self) -> Result<(), InvariantViolation> {
        let mut live = [0u32; 3];
        let (mut cache_reads, mut writebacks, mut flusher) = (0usize, 0usize, 0u32);
        let mut waits: HashMap<OpKey, u32> = HashMap::new();
        // Requests merged at submission hold no tag; they are parts of a queued or dispatched request.
        let mut tagless = 0u64;
        for (_, r) in self.reqs.iter() {
            if r.tagless {
                tagless += 1;
            } else {
                live[r.tag_class().index()] += 1;
            }
            match r.kind {
                ReqKind::CacheRead => cache_reads += 1,
                ReqKind::Writeback => {
                    writebacks += 1;
                    if r.flow == FLUSHER_FLOW && !r.sync {
                        flusher += 1;
                    }
                }
                ReqKind::Direct => {}
            }
            for op in r.waiters.iter() {
                *waits.entry(op).or_default() += 1;
            }
        }
        for class in TagClass::ALL {
            let (held, waiting) = (self.tags.allocated(class), self.tag_wait[class.index()].len() as u32);
            ensure_invariant!(
                held + waiting == live[class.index()],
                "sim tags",
                "{class:?}: {held} tags allocated + {waiting} waiting for one != {} live requests",
                live[class.index()]
            );
        }
        let allocated = u64::from(self.tags.total());
        let on_device: u64 = self.on_device.iter().map(|(_, rq)| rq.parts() as u64).sum();
        let queued = self.driver.policy().queued() as u64;
        ensure_invariant!(
            allocated + tagless == queued + on_device,
            "sim tags",
            "{allocated} tags allocated + {tagless} merged without one != {queued} queued in the policy + \
             {on_device} requests on the device"
        );
        ensure_invariant!(
            self.driver.in_flight() as usize == self.on_device.len(),
            "sim driver",
            "driver in_flight {} != {} requests on the device",
            self.driver.in_flight(),
            self.on_device.len()
        );
        ensure_invariant!(
            self.reading.len() == cache_reads
                && self
                    .reading
                    .values()
                    .all(|&(_, id)| self.reqs.get(id).is_some_and(|r| r.kind == ReqKind::CacheRead)),
            "sim page-cache reads",
            "{} indexed reads, {cache_reads} live read requests",
            self.reading.len()
        );
        ensure_invariant!(
            self.writing.len() == writebacks
                && self
                    .writing
                    .values()
                    .all(|&id| self.reqs.get(id).is_some_and(|r| r.kind == ReqKind::Writeback)),
            "sim writeback",
            "{} indexed writebacks, {writebacks} live writeback requests",
            self.writing.len()
        );
        ensure_invariant!(
            self.flusher.outstanding == flusher,
            "sim flusher",
            "outstanding {} != {flusher} live flusher writebacks",
            self.flusher.outstanding
        );
        for (opid, o) in self.ops.iter() {
            // A throttled write waits for one release: sleeping over the limit, or writing back itself.
            let throttled = self.throttled.contains(&opid) || self.writers.iter().any(|j| j.opid == opid);
            let expected = waits.get(&opid).copied().unwrap_or(0) + u32::from(throttled);
            ensure_invariant!(
                o.deps == expected,
                "sim operations",
                "operation {opid:?} of process {} waits for {} requests, but {expected} name it",
                o.pid,
                o.deps
            );
        }
        for j in &self.writers {
            ensure_invariant!(
                j.inode.is_none_or(|f| self.inodes.is_locked(f))
                    && self
                        .writers
                        .iter()
                        .filter(|k| k.inode.is_some() && k.inode == j.inode)
                        .count()
                        <= 1,
                "sim writer writeback",
                "writer {} holds inode {:?}, which is unlocked or held by another writer too",
                j.id,
                j.inode
            );
        }
        for (what, r) in [
            ("requests", self.reqs.check_invariants()),
            ("operations", self.ops.check_invariants()),
            ("device requests", self.on_device.check_invariants()),
        ] {
            r.map_err(|e| InvariantViolation::new("sim arenas", format!("{what}: {e}")))?;
        }
        self.driver.policy().check_invariants()
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Start(pid) => {
                let Some(p) = self.procs.get_mut(pid as usize) else {
                    return;
                };
                let spec = p.proc.flow();
                p.alive = true;
                p.started = Some(self.now);
                let mut info = FlowInfo::new(p.flow)
                    .with_class(spec.class, spec.prio)
                    .with_group(GroupId(spec.group));
                if let Some(w) = spec.weight {
                    info = info.with_weight(w);
                }
                self.timed(|d, now| d.flow_started(&info, now));
                self.device.flow_started(&info, self.now);
                self.deliver(pid, Event::Start);
            }
            Ev::Wake(pid, gen) => {
                if self.procs.get(pid as usize).is_some_and(|p| p.wake_gen == gen) {
                    self.deliver(pid, Event::Woke);
                }
            }
            Ev::Deliver(pid, tag, result) => self.deliver(
                pid,
                Event::Completed {
                    tag,
                    result: result.map_err(|e| *e),
                },
            ),
            Ev::FlusherWake => {
                self.flusher.expire_before = self.now.checked_sub(self.host.dirty_expire);
                self.flush();
                self.pump();
                let next = self.now + self.host.writeback_interval;
                self.events.push(next, Ev::FlusherWake);
            }
            Ev::DropCaches => self.cache.drop_clean(),
            Ev::WbtWindow => {
                let inflight = self.flusher.outstanding;
                let waiting = !self.throttled.is_empty();
                let Some(w) = self.wbt.as_mut() else { return };
                if waiting {
                    // balance_dirty_pages pauses a throttled writer in short sleeps, each stamping the time.
                    w.dirty_throttled(self.now);
                }
                let (next, _) = w.window_expired(self.now, inflight);
                if let Some(t) = next {
                    self.events.push(t, Ev::WbtWindow);
                }
                // Scaling up wakes a blocked flusher.
                self.flush();
                self.pump();
            }
            Ev::WriterWake(id, wait) => {
                if let Some(j) = self
                    .writers
                    .iter_mut()
                    .find(|j| j.id == id && (j.sleeping == Some(wait) || j.busy == Some(wait)))
                {
                    j.sleeping = None;
                    j.busy = None;
                    self.run_writers();
                    self.pump();
                }
            }
        }
    }

    /// The writeback throttle, if enabled (for inspection).
    pub fn wbt(&self) -> Option<&Wbt> {
        self.wbt.as_ref()
    }

    fn deliver(&mut self, pid: Pid, event: Event) {
        let now = self.now;
        let Some(p) = self.procs.get_mut(pid as usize) else {
            return;
        };
        if !p.alive {
            return;
        }
        let mut actions = std::mem::take(&mut self.actions);
        actions.clear();
        p.proc.on_event(event, now, &mut actions);
        // Any event ends a pending sleep (the process was woken by it); it asks again if it still wants one.
        p.wake_gen += 1;
        if let Some(t) = actions.sleep_until {
            self.events.push(t.max(now), Ev::Wake(pid, p.wake_gen));
        }
        let exit = actions.exit;
        for (tag, op) in actions.ops.drain(..) {
            self.start_op(pid, tag, op);
        }
        self.actions = actions;
        if exit {
            let p = &mut self.procs[pid as usize];
            p.alive = false;
            p.exited = Some(now);
            p.wake_gen += 1;
            let flow = p.flow;
            self.timed(|d, now| d.flow_exited(flow, now));
            self.device.flow_exited(flow, now);
            self.tags.forget(flow);
        }
        self.pump();
    }

    /// Runs `f` on the driver, charging its wall-clock time to the policy when timing is on.
    fn timed<R>(&mut self, f: impl FnOnce(&mut Driver, Time) -> R) -> R {
        if self.host.time_policy {
            let t = Instant::now();
            let r = f(&mut self.driver, self.now);
            self.metrics.sched_cpu_ns += t.elapsed().as_nanos() as u64;
            r
        } else {
            f(&mut self.driver, self.now)
        }
    }

    fn complete_op_later(&mut self, pid: Pid, tag: u64, result: Result<u64, IoError>, copy_bytes: u64) {
        let cost = self.host.syscall_ns + copy_bytes.div_ceil(1024) * self.host.copy_ns_per_kib;
        self.events
            .push(self.now + cost, Ev::Deliver(pid, tag, result.map_err(Box::new)));
    }

    fn start_op(&mut self, pid: Pid, tag: u64, op: Op) {
        let flow = self.procs[pid as usize].flow;
        let (file, offset, len) = match op {
            Op::Read { file, offset, len, .. } | Op::Write { file, offset, len, .. } => (file, offset, len),
            Op::Fsync { file } => (file, 0, 0),
            Op::Sync => (0, 0, 0),
            Op::Invalidate { file } => {
                // Advisory and immediate; no completion is delivered. The file's readahead state restarts too.
                self.cache.drop_file_clean(file);
                return;
            }
        };
        if !matches!(op, Op::Sync) {
            let Some(layout) = self.files.get(file as usize) else {
                return self.complete_op_later(pid, tag, Err(IoError::Other(format!("no file {file}"))), 0);
            };
            if offset.saturating_add(len) > layout.size {
                return self.complete_op_later(pid, tag, Err(IoError::OutOfRange), 0);
            }
        }
        match op {
            Op::Read {
                mode: IoMode::Direct | IoMode::DirectAsync,
                ..
            }
            | Op::Write {
                mode: IoMode::Direct | IoMode::DirectAsync,
                ..
            } => {
                let dir = if matches!(op, Op::Read { .. }) {
                    Direction::Read
                } else {
                    Direction::Write
                };
                let meta = matches!(op, Op::Read { meta: true, .. });
                // Reads are sync; a write is async only when the process says so (a replayed trace's async write).
                let sync = !matches!(
                    op,
                    Op::Write {
                        mode: IoMode::DirectAsync,
                        ..
                    }
                );
                if len == 0 {
                    return self.complete_op_later(pid, tag, Ok(0), 0);
                }
                let opid = self.ops.insert(OpState {
                    pid,
                    tag,
                    deps: 0,
                    bytes: len,
                    copy: false,
                });
                let first = offset / 512;
                let count = (offset + len).div_ceil(512) - first;
                self.map_chunks(file, first, count);
                let chunks = std::mem::take(&mut self.chunks);
                for &(fsec, sector, n) in &chunks {
                    let id = self.new_req(BlockReq {
                        file,
                        page: fsec / PAGE_SECTORS,
                        pages: n.div_ceil(PAGE_SECTORS),
                        kind: ReqKind::Direct,
                        flow,
                        dir,
                        sync,
                        sector,
                        sectors: n as u32,
                        meta,
                        tagless: false,
                        created: self.now,
                        inserted: 0,
                        waiters: Waiters::one(opid),
                    });
                    self.ops.get_mut(opid).expect("op").deps += 1;
                    self.submit(id);
                }
                self.chunks = chunks;
            }
            Op::Read {
                mode: IoMode::Buffered, ..
            } => self.buffered_read(pid, tag, flow, file, offset, len),
            Op::Write {
                mode: IoMode::Buffered, ..
            } => {
                if len == 0 {
                    return self.complete_op_later(pid, tag, Ok(0), 0);
                }
                let p0 = offset / PAGE_BYTES;
                let p1 = (offset + len).div_ceil(PAGE_BYTES);
                self.cache.write(file, p0, p1 - p0, self.now);
                if self.cache.dirty_pages() > self.dirty_background_pages() {
                    self.flush();
                }
                if self.over_dirty_limit() {
                    // Above the dirty limit (dirty plus under writeback, as the kernel counts) the write waits.
                    let opid = self.ops.insert(OpState {
                        pid,
                        tag,
                        deps: 1,
                        bytes: len,
                        copy: true,
                    });
                    if let DirtyThrottle::WriteBack(wb) = self.host.dirty_throttle {
                        // Before 3.2 the writer over the limit writes dirty pages back itself (`crate::host::throttle`).
                        self.writer_ids += 1;
                        self.writers.push(WriterJob {
                            id: self.writer_ids,
                            opid,
                            flow,
                            calls_left: (p1 - p0).div_ceil(wb.check_every_pages.max(1)).max(1),
                            written: 0,
                            pass: None,
                            inode: None,
                            blocked: None,
                            sleeping: None,
                            busy: None,
                        });
                        self.run_writers();
                    } else {
                        // Since 3.2 it blocks until writeback brings the dirty pages back down.
                        self.throttled.push(opid);
                        if let Some(w) = self.wbt.as_mut() {
                            w.dirty_throttled(self.now);
                        }
                    }
                } else {
                    self.complete_op_later(pid, tag, Ok(len), len);
                }
            }
            Op::Fsync { file } => {
                let opid = self.ops.insert(OpState {
                    pid,
                    tag,
                    deps: 0,
                    bytes: 0,
                    copy: false,
                });
                self.writeback_file(file, flow, true, u64::MAX);
                self.wait_for_writeback(opid, Some(file));
                self.finish_op_if_ready(opid);
            }
            Op::Invalidate { .. } => {}
            Op::Sync => {
                let opid = self.ops.insert(OpState {
                    pid,
                    tag,
                    deps: 0,
                    bytes: 0,
                    copy: false,
                });
                for f in 0..self.cache.files() {
                    self.writeback_file(f, FLUSHER_FLOW, true, u64::MAX);
                }
                self.wait_for_writeback(opid, None);
                self.finish_op_if_ready(opid);
            }
        }
    }

    fn finish_op_if_ready(&mut self, opid: OpKey) {
        if self.ops.get(opid).is_some_and(|o| o.deps == 0) {
            if let Some(o) = self.ops.remove(opid) {
                let copy = if o.copy { o.bytes } else { 0 };
                self.complete_op_later(o.pid, o.tag, Ok(o.bytes), copy);
            }
        }
    }

    /// Makes `opid` wait for every uncompleted writeback request (of `file`, or of all files).
    fn wait_for_writeback(&mut self, opid: OpKey, file: Option<u32>) {
        let ids: Vec<ReqKey> = match file {
            Some(f) => self.writing.range((f, 0)..(f + 1, 0)).map(|(_, &id)| id).collect(),
            None => self.writing.values().copied().collect(),
        };
        for id in ids {
            if let Some(r) = self.reqs.get_mut(id) {
                r.waiters.push(opid);
                if let Some(o) = self.ops.get_mut(opid) {
                    o.deps += 1;
                }
            }
        }
    }

    fn buffered_read(&mut self, pid: Pid, tag: u64, flow: FlowId, file: u32, offset: u64, len: u64) {
        if len == 0 {
            return self.complete_op_later(pid, tag, Ok(0), 0);
        }
        let p0 = offset / PAGE_BYTES;
        let p1 = (offset + len).div_ceil(PAGE_BYTES);
        let max_ra = self.host.read_ahead_kb * 1024 / PAGE_BYTES;
        // One lookup: the state stays borrowed while the page cache and the tags (other fields) are consulted.
        let ra = self.ra.entry(Self::ra_key(pid, file)).or_default();
        let marker = ra.marker();
        let first_missing = (p0..p1).find(|&p| self.cache.state(file, p) == PageState::Absent);
        let mut runs = std::mem::take(&mut self.runs);
        runs.clear();
        if let Some(miss) = first_missing {
            let w = ra.on_miss(miss, p1 - miss, max_ra);
            self.cache.start_read(
                file,
                w.start.min(miss),
                (w.start + w.len).max(p1) - w.start.min(miss),
                &mut runs,
            );
        }
        // Touching the marker page of the current window starts the next window asynchronously, unless reads are
        // congested (legacy queues: `page_cache_async_readahead` defers it; the next window is then read on the
        // miss).
        if let Some(m) = marker.filter(|_| !self.tags.read_congested()) {
            if (p0..p1).contains(&m) && first_missing.is_none_or(|miss| m < miss) {
                let w = ra.on_marker(max_ra);
                self.cache.start_read(file, w.start, w.len, &mut runs);
            }
        }
        ra.prev_end = Some(p1);
        for &(start, n) in runs.iter() {
            self.read_pages(file, start, n, flow);
        }
        self.runs = runs;
        // Wait for every page of the request that is not yet in memory. The operation enters the arena only if it
        // has to wait: a read served from the cache completes at once, as an operation that waits for nothing does.
        let mut opid: Option<OpKey> = None;
        let mut p = p0;
        while p < p1 {
            if self.cache.state(file, p) == PageState::Reading {
                if let Some((&(_, s), &(n, id))) = self.reading.range(..=(file, p)).next_back() {
                    if s + n > p {
                        if let Some(r) = self.reqs.get_mut(id) {
                            let op = *opid.get_or_insert_with(|| {
                                self.ops.insert(OpState {
                                    pid,
                                    tag,
                                    deps: 0,
                                    bytes: len,
                                    copy: true,
                                })
                            });
                            r.waiters.push(op);
                            self.ops.get_mut(op).expect("op").deps += 1;
                        }
                        p = s + n;
                        continue;
                    }
                }
            }
            p += 1;
        }
        match opid {
            Some(op) => self.finish_op_if_ready(op),
            None => self.complete_op_later(pid, tag, Ok(len), len),
        }
    }

    /// The key of `pid`'s readahead state for `file` in [`Simulation::ra`].
    fn ra_key(pid: Pid, file: u32) -> u64 {
        (u64::from(pid) << 32) | u64::from(file)
    }

    /// Creates read requests filling pages `[start, start+n)` of `file` (already marked Reading).
    fn read_pages(&mut self, file: u32, start: u64, n: u64, flow: FlowId) {
        self.map_chunks(file, start * PAGE_SECTORS, n * PAGE_SECTORS);
        let chunks = std::mem::take(&mut self.chunks);
        for &(fsec, sector, len) in &chunks {
            let page = fsec / PAGE_SECTORS;
            let pages = len / PAGE_SECTORS;
            let id = self.new_req(BlockReq {
                file,
                page,
                pages,
                kind: ReqKind::CacheRead,
                flow,
                dir: Direction::Read,
                sync: true,
                sector,
                sectors: len as u32,
                meta: false,
                tagless: false,
                created: self.now,
                inserted: 0,
                waiters: Waiters::default(),
            });
            self.reading.insert((file, page), (pages, id));
            self.submit(id);
        }
        self.chunks = chunks;
    }

    /// Splits file sectors `[first, first+count)` into device chunks `(file sector, device sector, sectors)` no
    /// longer than the device's maximum request, aligned to pages where the request is page-sized.
    fn map_chunks(&mut self, file: u32, first: u64, count: u64) {
        self.chunks.clear();
        let max = u64::from(self.info.max_sectors.max(PAGE_SECTORS as u32)) / PAGE_SECTORS * PAGE_SECTORS;
        let Some(layout) = self.files.get(file as usize) else {
            return;
        };
        let end = first + count;
        let start = layout
            .extents
            .partition_point(|e| (e.page + e.pages) * PAGE_SECTORS <= first);
        for e in &layout.extents[start..] {
            let (es, ee) = (e.page * PAGE_SECTORS, (e.page + e.pages) * PAGE_SECTORS);
            if es >= end {
                break;
            }
            let mut a = first.max(es);
            let b = end.min(ee);
            while a < b {
                let n = (b - a).min(max);
                self.chunks.push((a, e.sector + (a - es), n));
                a += n;
            }
        }
    }

    fn new_req(&mut self, r: BlockReq) -> ReqKey {
        let id = self.reqs.insert(r);
        self.metrics.block_requests += 1;
        id
    }

    /// The policy's id of request `key`: the slot index in the low 32 bits, and in the high ones the number of
    /// requests the slot has held so far, this one included (the key's generation + 1).
    fn request_id(key: ReqKey) -> RequestId {
        RequestId((u64::from(key.generation().wrapping_add(1)) << 32) | u64::from(key.index()))
    }

    /// The key of the request the policy knows as `id` (see [`Simulation::request_id`]).
    fn request_key(id: RequestId) -> ReqKey {
        ReqKey::from_parts((id.0 & 0xFFFF_FFFF) as u32, ((id.0 >> 32) as u32).wrapping_sub(1))
    }

    /// Allocates a scheduler tag for request `id` and inserts it, or queues it until a tag is free.
    fn submit(&mut self, id: ReqKey) {
        let Some(r) = self.reqs.get(id) else { return };
        let (class, flow) = (r.tag_class(), r.flow);
        if self.merge_tagless(id) {
            return;
        }
        if self.tag_wait[class.index()].is_empty() && self.try_allocate(class, flow) {
            self.insert(id);
        } else {
            self.tag_wait[class.index()].push_back(id);
        }
    }

    /// Legacy pools: the block layer tries to merge a bio into a queued request before it allocates one
    /// (`blk_queue_bio`: `elv_merge` then `get_request`): a merged bio takes no request. Returns whether `id` was
    /// merged (and inserted).
    fn merge_tagless(&mut self, id: ReqKey) -> bool {
        if !self.tags.is_legacy() {
            return false;
        }
        let rq = self.policy_request(id);
        if rq.as_ref().is_some_and(|rq| self.driver.policy().would_merge(rq)) {
            if let Some(r) = self.reqs.get_mut(id) {
                r.tagless = true;
            }
            self.insert(id);
            return true;
        }
        false
    }

    /// Submits `id` as the task itself does in `get_request`: it takes a request if the pool's rules allow now
    /// (a woken batcher may, whoever else waits), and otherwise waits for one. Returns whether it waits.
    fn submit_as_task(&mut self, id: ReqKey) -> bool {
        let Some(r) = self.reqs.get(id) else { return false };
        let (class, flow) = (r.tag_class(), r.flow);
        if self.merge_tagless(id) {
            return false;
        }
        if self.try_allocate(class, flow) {
            self.insert(id);
            false
        } else {
            self.tag_wait[class.index()].push_back(id);
            true
        }
    }

    /// Takes a tag for a request of `class` from `flow`, if the pool's rules allow.
    fn try_allocate(&mut self, class: TagClass, flow: FlowId) -> bool {
        let now = self.now;
        self.tags.try_allocate_for(class, flow, now, self.driver.policy_mut())
    }

    /// The request the policy is handed for block request `id`.
    fn policy_request(&self, id: ReqKey) -> Option<Request> {
        let r = self.reqs.get(id)?;
        let mut rq = Request::new(Self::request_id(id), r.flow, r.dir, r.sync, r.sector, r.sectors);
        rq.meta = r.meta;
        Some(rq)
    }

    /// Inserts block request `id`, which holds a tag (or merges without one), into the policy.
    fn insert(&mut self, id: ReqKey) {
        let Some(rq) = self.policy_request(id) else { return };
        if let Some(r) = self.reqs.get_mut(id) {
            r.inserted = self.now;
        }
        self.timed(|d, now| d.insert(rq, now));
    }

    /// Admits waiting requests in arrival order per class. With legacy pools the head waiter is woken once its
    /// pool is below `nr_requests` and becomes a batcher (3.13's `get_request`), so it allocates past a full pool.
    fn admit_waiting(&mut self) {
        for class in TagClass::ALL {
            while let Some(&id) = self.tag_wait[class.index()].front() {
                let Some(flow) = self.reqs.get(id).map(|r| r.flow) else {
                    self.tag_wait[class.index()].pop_front();
                    continue;
                };
                let ok = self.try_allocate(class, flow)
                    || (self.tags.wake_waiter(class, flow, self.now) && self.try_allocate(class, flow));
                if !ok {
                    break;
                }
                self.tag_wait[class.index()].pop_front();
                self.insert(id);
            }
        }
        // Writers whose request was admitted go on with their writeback.
        self.run_writers();
    }

    fn pump(&mut self) {
        // Most calls come after a process's event that told the driver nothing (a read served from the page
        // cache); the driver would return at once then.
        if !self.driver.would_run(self.now) {
            return;
        }
        let mut out = std::mem::take(&mut self.dispatched);
        out.clear();
        self.timed(|d, now| d.pump(now, &mut out));
        for rq in out.drain(..) {
            self.metrics.device_requests += 1;
            let (id, read) = (rq.id.0, rq.dir == Direction::Read);
            for id in std::iter::once(rq.id).chain(rq.merged.iter().copied()) {
                if let Some(r) = self.reqs.get(Self::request_key(id)) {
                    let w = &mut self.metrics.dispatch_wait_max[r.dir.index()];
                    *w = (*w).max(self.now - r.inserted);
                }
            }
            let tag = self.on_device.insert(rq);
            let slot = tag.index() as usize;
            if self.dispatched_at.len() <= slot {
                self.dispatched_at.resize(slot + 1, 0);
            }
            self.dispatched_at[slot] = self.now;
            if read {
                if let Some(w) = self.wbt.as_mut() {
                    w.read_dispatched(id, self.now);
                }
            }
            if let Some(r) = self.on_device.get(tag) {
                self.device.submit_request(u64::from(tag.index()), r, self.now);
            }
        }
        self.dispatched = out;
    }

    fn device_done(&mut self, tag: u64) {
        let Some(key) = u32::try_from(tag).ok().and_then(|t| self.on_device.key_at(t)) else {
            return;
        };
        let Some(rq) = self.on_device.remove(key) else {
            return;
        };
        if let Some(w) = self.wbt.as_mut() {
            let at = self
                .dispatched_at
                .get(key.index() as usize)
                .copied()
                .unwrap_or(self.now);
            w.completed(
                rq.id.0,
                rq.dir == Direction::Read,
                self.now.saturating_sub(at),
                self.now,
            );
        }
        self.timed(|d, now| d.complete(&rq, now));
        for id in std::iter::once(rq.id).chain(rq.merged.iter().copied()) {
            self.block_done(id);
        }
        self.admit_waiting();
        self.flush();
        self.pump();
    }

    fn block_done(&mut self, id: RequestId) {
        let Some(r) = self.reqs.remove(Self::request_key(id)) else {
            return;
        };
        if !r.tagless {
            self.tags.release(r.tag_class());
        }
        self.metrics.complete(
            self.now,
            r.flow,
            r.dir,
            u64::from(r.sectors) * 512,
            self.now - r.created,
        );
        match r.kind {
            ReqKind::CacheRead => {
                self.reading.remove(&(r.file, r.page));
                self.cache.finish_read(r.file, r.page, r.pages);
            }
            ReqKind::Writeback => {
                self.writing.remove(&(r.file, r.page));
                self.cache.finish_write(r.file, r.page, r.pages);
                if r.flow == FLUSHER_FLOW && !r.sync {
                    dec(&mut self.flusher.outstanding, "flusher outstanding");
                    if let Some(w) = self.wbt.as_mut() {
                        w.write_done(self.flusher.outstanding);
                    }
                }
                self.release_throttled();
                if !self.tags.async_congested() {
                    // A freed request that ends the queue's write congestion wakes every task in
                    // `blk_congestion_wait` (`clear_queue_congested`).
                    for j in &mut self.writers {
                        j.sleeping = None;
                    }
                }
            }
            ReqKind::Direct => {}
        }
        for opid in r.waiters.iter() {
            if let Some(o) = self.ops.get_mut(opid) {
                dec(&mut o.deps, "op deps");
            }
            self.finish_op_if_ready(opid);
        }
    }

    fn dirty_background_pages(&self) -> u64 {
        self.host.memory_bytes / PAGE_BYTES * self.host.dirty_background_ratio / 100
    }

    fn dirty_limit_pages(&self) -> u64 {
        self.host.memory_bytes / PAGE_BYTES * self.host.dirty_ratio / 100
    }

    fn release_throttled(&mut self) {
        if self.throttled.is_empty()
            || self.cache.dirty_pages() + self.cache.writeback_pages() > self.dirty_limit_pages()
        {
            return;
        }
        for opid in std::mem::take(&mut self.throttled) {
            if let Some(o) = self.ops.get_mut(opid) {
                o.deps = 0;
            }
            self.finish_op_if_ready(opid);
        }
    }

    /// Creates writeback requests for `file`'s dirty pages, at most `max_pages` in all; returns the pages taken.
    fn writeback_file(&mut self, file: u32, flow: FlowId, sync: bool, max_pages: u64) -> u64 {
        let max_req_pages = u64::from(self.info.max_sectors) / PAGE_SECTORS;
        let mut taken = 0;
        let mut from = if flow == FLUSHER_FLOW && !sync && file == self.flusher.cursor_file {
            self.flusher.cursor_page
        } else {
            0
        };
        while taken < max_pages {
            let Some((start, n)) = self
                .cache
                .take_dirty_run(file, from, max_req_pages.min(max_pages - taken))
            else {
                break;
            };
            taken += n;
            from = start + n;
            self.writeback_run(file, start, n, flow, sync, false);
        }
        if flow == FLUSHER_FLOW && !sync {
            self.flusher.cursor_page = from;
        }
        taken
    }

    /// Creates and submits the writeback requests of `file`'s pages `[start, start+n)`, already taken from the
    /// dirty set; with `as_task` the submitting task takes requests itself ([`Simulation::submit_as_task`]).
    /// Returns the last request left waiting for a tag, if any.
    fn writeback_run(
        &mut self,
        file: u32,
        start: u64,
        n: u64,
        flow: FlowId,
        sync: bool,
        as_task: bool,
    ) -> Option<ReqKey> {
        let mut waiting = None;
        {
            self.map_chunks(file, start * PAGE_SECTORS, n * PAGE_SECTORS);
            let chunks = std::mem::take(&mut self.chunks);
            for &(fsec, sector, len) in &chunks {
                let page = fsec / PAGE_SECTORS;
                let id = self.new_req(BlockReq {
                    file,
                    page,
                    pages: len / PAGE_SECTORS,
                    kind: ReqKind::Writeback,
                    flow,
                    dir: Direction::Write,
                    sync,
                    sector,
                    sectors: len as u32,
                    meta: false,
                    tagless: false,
                    created: self.now,
                    inserted: 0,
                    waiters: Waiters::default(),
                });
                self.writing.insert((file, page), id);
                if flow == FLUSHER_FLOW && !sync {
                    self.flusher.outstanding += 1;
                    if let Some(end) = self.wbt.as_mut().and_then(|w| w.write_issued(self.now)) {
                        self.events.push(end, Ev::WbtWindow);
                    }
                }
                if as_task {
                    if self.submit_as_task(id) {
                        waiting = Some(id);
                    }
                } else {
                    self.submit(id);
                }
            }
            self.chunks = chunks;
        }
        waiting
    }

    fn over_dirty_limit(&self) -> bool {
        self.cache.dirty_pages() + self.cache.writeback_pages() > self.dirty_limit_pages()
    }

    /// Advances every throttled writer that can go on ([`DirtyThrottle::WriteBack`]); the ones that leave
    /// `balance_dirty_pages` complete their write.
    fn run_writers(&mut self) {
        let mut i = 0;
        while i < self.writers.len() {
            if self.step_writer(i) {
                let j = self.writers.remove(i);
                if let Some(f) = j.inode {
                    self.inodes.unlock(f, &self.cache, self.now);
                }
                if let Some(o) = self.ops.get_mut(j.opid) {
                    o.deps = 0;
                }
                self.finish_op_if_ready(j.opid);
            } else {
                i += 1;
            }
        }
    }

    /// Runs writer `i` until it must sleep (for a request or in a congestion wait); returns true when it leaves
    /// `balance_dirty_pages`. The rules are 2.6.18's (`crate::host::throttle`).
    fn step_writer(&mut self, i: usize) -> bool {
        let DirtyThrottle::WriteBack(cfg) = self.host.dirty_throttle else {
            return true;
        };
        let max_req_pages = (u64::from(self.info.max_sectors) / PAGE_SECTORS).max(1);
        loop {
            let now = self.now;
            let j = &mut self.writers[i];
            if j.sleeping.is_some() || j.busy.is_some() {
                return false;
            }
            if let Some(id) = j.blocked {
                if self.tag_wait[TagClass::Async.index()].contains(&id) {
                    return false;
                }
                j.blocked = None;
            }
            let Some((started, left)) = j.pass else {
                // The top of `balance_dirty_pages`' loop: leave under the limit, else a writeback pass (if anything
                // is dirty) or a congestion wait.
                if !self.over_dirty_limit() {
                    return true;
                }
                if self.cache.dirty_pages() > 0 {
                    self.writers[i].pass = Some((now, cfg.chunk_pages));
                } else {
                    self.writer_sleep(i, cfg);
                }
                continue;
            };
            if left > 0 {
                // `writeback_inodes`: the held inode while it has dirty pages, else the next one in order.
                let file = match j.inode {
                    Some(f) if self.cache.has_dirty(f) => Some(f),
                    held => {
                        if let Some(f) = held {
                            self.inodes.unlock(f, &self.cache, now);
                        }
                        let next = self.inodes.pick(&self.cache, started);
                        if let Some(f) = next {
                            self.inodes.lock(f);
                        }
                        self.writers[i].inode = next;
                        next
                    }
                };
                if let Some(f) = file {
                    let from = self.inodes.next_page(f);
                    if let Some((start, n)) = self.cache.take_dirty_run(f, from, max_req_pages.min(left)) {
                        self.inodes.set_next_page(f, start + n);
                        let flow = self.writers[i].flow;
                        let waiting = self.writeback_run(f, start, n, flow, false, true);
                        let j = &mut self.writers[i];
                        j.pass = Some((started, left - n));
                        j.written += n;
                        j.blocked = waiting;
                        // The pages of a request cost CPU time before the writer can go on.
                        let busy = n * cfg.submit_ns_per_page;
                        if busy > 0 {
                            self.writer_ids += 1;
                            let (wait, j) = (self.writer_ids, &mut self.writers[i]);
                            j.busy = Some(wait);
                            self.events.push(now + busy, Ev::WriterWake(j.id, wait));
                        }
                        continue;
                    }
                }
            }
            // The pass is over (its pages written, or no inode left to take).
            let j = &mut self.writers[i];
            j.pass = None;
            if let Some(f) = j.inode.take() {
                self.inodes.unlock(f, &self.cache, now);
            }
            let over = self.over_dirty_limit();
            let j = &mut self.writers[i];
            if !over || j.written >= cfg.chunk_pages {
                // Under the limit, or "done our duty": this call returns; the write makes its next one.
                j.calls_left = j.calls_left.saturating_sub(1);
                j.written = 0;
                if j.calls_left == 0 || !over {
                    return true;
                }
                continue;
            }
            self.writer_sleep(i, cfg);
        }
    }

    /// Writer `i` waits for the queue to leave write congestion, at most `cfg.congestion_wait`.
    fn writer_sleep(&mut self, i: usize, cfg: WriterWriteback) {
        self.writer_ids += 1;
        let (wait, j) = (self.writer_ids, &mut self.writers[i]);
        j.sleeping = Some(wait);
        self.events
            .push(self.now + cfg.congestion_wait, Ev::WriterWake(j.id, wait));
    }

    /// Background and periodic writeback by the flusher thread, as async writes. The kernel's flusher blocks when
    /// it cannot allocate a request, so it keeps at most as many requests outstanding as the policy lets async
    /// writes allocate.
    fn flush(&mut self) {
        // Nothing dirty above the background threshold, no periodic writeback under way, no throttled writer and no
        // writeback throttle to consult: the loop below would stop at its first pass without changing anything,
        // so return before computing its limits (this runs after every device completion).
        if self.wbt.is_none()
            && self.throttled.is_empty()
            && self.flusher.expire_before.is_none()
            && self.cache.dirty_pages() <= self.dirty_background_pages()
        {
            return;
        }
        // blk-mq: the policy's async depth limit. Legacy pools: no fixed limit; the flusher blocks when one of its
        // requests has to wait for the async pool (3.13's `get_request` sleeps), so it holds what the pool's
        // rules give it, up to 3/2 x 128 while it batches.
        let nr = self.info.nr_requests.max(1);
        let limit = if self.tags.is_legacy() {
            u32::MAX
        } else {
            self.driver
                .policy()
                .depth_limit(Direction::Write, false, nr)
                .clamp(1, nr)
        };
        let legacy = self.tags.is_legacy();
        let nfiles = self.cache.files();
        if nfiles == 0 {
            return;
        }
        let max_req_pages = u64::from(self.info.max_sectors) / PAGE_SECTORS;
        let mut idle_files = 0;
        let now = self.now;
        if !self.throttled.is_empty() {
            if let Some(w) = self.wbt.as_mut() {
                // balance_dirty_pages pauses a throttled writer in short sleeps, each stamping the time.
                w.dirty_throttled(now);
            }
        }
        while self.flusher.outstanding < limit
            && idle_files < nfiles
            && (!legacy || self.tag_wait[TagClass::Async.index()].is_empty())
            && self
                .wbt
                .as_mut()
                .is_none_or(|w| w.may_issue(now, self.flusher.outstanding))
        {
            let background = self.cache.dirty_pages() > self.dirty_background_pages();
            let f = self.flusher.cursor_file % nfiles;
            let expired = self
                .flusher
                .expire_before
                .is_some_and(|t| self.cache.dirtied_at(f).is_some_and(|d| d <= t));
            if !background && self.flusher.expire_before.is_some() && !expired && !self.any_expired() {
                self.flusher.expire_before = None;
            }
            if !background && self.flusher.expire_before.is_none() {
                break;
            }
            if (background || expired) && self.cache.has_dirty(f) {
                let n = self.writeback_file(f, FLUSHER_FLOW, false, max_req_pages);
                if n > 0 {
                    idle_files = 0;
                    continue;
                }
            }
            self.flusher.cursor_file = (f + 1) % nfiles;
            self.flusher.cursor_page = 0;
            idle_files += 1;
        }
    }

    fn any_expired(&self) -> bool {
        let Some(t) = self.flusher.expire_before else {
            return false;
        };
        (0..self.cache.files()).any(|f| self.cache.dirtied_at(f).is_some_and(|d| d <= t))
    }
}

/// The earlier of two optional times (`None` when both are).
#[inline]
fn earliest(a: Option<Time>, b: Option<Time>) -> Option<Time> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::preset;
    use bfq_workload::{FlowSpec, Placement};

    /// Reads a file sequentially with buffered 64 KiB reads while writing another with buffered writes.
    struct Mixed {
        flow: FlowSpec,
        file: FileId,
        write: bool,
        offset: u64,
        end: u64,
        ops: u64,
    }

    impl Process for Mixed {
        fn flow(&self) -> FlowSpec {
            self.flow.clone()
        }
        fn on_event(&mut self, ev: Event, _now: Time, out: &mut Actions) {
            if let Event::Completed { .. } = ev {
                self.ops += 1;
            }
            if self.offset >= self.end {
                out.exit = true;
                return;
            }
            let (file, offset, len) = (self.file, self.offset, 64 << 10);
            self.offset += len;
            let op = if self.write {
                Op::Write {
                    file,
                    offset,
                    len,
                    mode: IoMode::Buffered,
                }
            } else {
                Op::Read {
                    file,
                    offset,
                    len,
                    mode: IoMode::Buffered,
                    meta: false,
                }
            };
            out.ops.push((self.ops, op));
        }
        fn report(&self) -> ProcessReport {
            ProcessReport::default()
        }
    }

    fn busy_sim() -> Simulation {
        busy_sim_with("cfq")
    }

    fn busy_sim_with(name: &str) -> Simulation {
        let dev = preset("seagate-hdd").expect("preset").build();
        let policy = bfq_sched::registry::build(name, &dev.info(), &[] as &[&str]).expect("policy");
        let host = HostConfig {
            memory_bytes: 64 << 20,
            time_policy: false,
            ..HostConfig::default()
        };
        let mut sim = Simulation::new(dev, policy, host, 7);
        for (i, write) in [(0u32, false), (1, true)] {
            let file = sim
                .add_file(&FileSpec {
                    name: format!("f{i}"),
                    size: 32 << 20,
                    placement: Placement::Contiguous,
                    prewritten: true,
                })
                .expect("file fits");
            sim.spawn(
                0,
                Box::new(Mixed {
                    flow: FlowSpec::named(format!("p{i}")),
                    file,
                    write,
                    offset: 0,
                    end: 32 << 20,
                    ops: 0,
                }),
            );
        }
        sim
    }

    #[test]
    fn invariants_hold_through_a_busy_run_and_catch_a_broken_tag_count() {
        let mut sim = busy_sim();
        // Stop in the middle of the run, with requests queued, on the device and waiting for pages.
        sim.run_until(200 * bfq_sched::MS);
        assert!(!sim.reqs.is_empty(), "the run must be busy when it is checked");
        sim.check_invariants().expect("a healthy simulation");
        sim.tags.allocate(TagClass::SyncRead);
        let err = sim.check_invariants().expect_err("one tag too many");
        assert_eq!(err.what, "sim tags", "{err}");
        sim.tags.release(TagClass::SyncRead);
        sim.check_invariants().expect("repaired");
        sim.flusher.outstanding += 1;
        let err = sim.check_invariants().expect_err("a flusher request too many");
        assert_eq!(err.what, "sim flusher", "{err}");
    }

    #[test]
    fn every_policy_keeps_the_invariants_through_a_mixed_run() {
        for desc in bfq_sched::registry::policies() {
            let mut sim = busy_sim_with(desc.name);
            // In debug builds `run_until` checks after every step; check at a few points in release builds too.
            for ms in [50, 150, 400] {
                sim.run_until(ms * bfq_sched::MS);
                if let Err(e) = sim.check_invariants() {
                    panic!("{} at {ms} ms: {e}", desc.name);
                }
            }
            assert!(sim.metrics().block_requests > 100, "{}: the run did little", desc.name);
        }
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "invariant broken in sim tags")]
    fn debug_builds_check_after_every_step() {
        let mut sim = busy_sim();
        sim.run_until(100 * bfq_sched::MS);
        sim.tags.allocate(TagClass::Async);
        sim.run_until(200 * bfq_sched::MS);
    }
}
