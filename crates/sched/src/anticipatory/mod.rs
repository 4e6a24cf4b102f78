//! ANTICIPATORY (the Linux 2.6 `as` scheduler), kernel `as-iosched.c` (docs/SCHEDULERS.md, anticipatory).
//!
//! Deadline-like: per direction (sync and async, from [`Request::sync`]) a sector-sorted queue served by a one-way
//! elevator with short back seeks, and a FIFO for expiry. Sync and async requests alternate in batches; a direction
//! change waits until every request of the previous batch has completed. In sync batches, after a sync request of a
//! process is dispatched, AS *anticipates*: rather than seeking away to another process's request it waits (until the
//! request completes, then up to `antic_expire`) for the process's next, probably close, request, unless its history
//! (think time, seek distance, exit) or the candidate request says waiting is not worth it.
//!
//! Split by concern: [`elevator`] (sorted queues and the elevator choice), [`batch`] (adaptive write batches),
//! [`history`] (per-process think time and seek statistics).

pub mod batch;
pub mod elevator;
pub mod history;
mod invariants;

use crate::device::DeviceInfo;
use crate::merge::{absorb, IntMap, MergeIndex, MergeKind};
use crate::scheduler::Scheduler;
use crate::tunables::{TunableSpec, TunableValues};
use crate::types::{Decision, FlowId, FlowInfo, Request, Time, MS};
use batch::WriteBatch;
use elevator::{choose, DirQueue, SortKey};
use history::{FlowHistory, GlobalHistory, FIXED_ONE, HALF};
use std::collections::HashMap;

/// Index of the sync direction (reads and sync writes) in per-direction arrays.
pub const SYNC: usize = 0;
/// Index of the async direction (buffered writes) in per-direction arrays.
pub const ASYNC: usize = 1;

/// Base size of the "close request" window around the last dispatched sector, sectors (8192 = 4 MiB): a request this
/// close is about as cheap to serve as the anticipated process's own next request.
pub const CLOSE_WINDOW: u64 = 8192;

/// Longest anticipation for which the close window keeps doubling (once per ms), ms (20): past it (or past
/// `antic_expire`) every request counts as close, since the anticipation is about to end anyway.
pub const CLOSE_WINDOW_MAX_MS: u64 = 20;

/// Largest accepted `antic_expire`, ms (1000): an anticipation wait is a `WaitUntil`, bounded by one second.
pub const MAX_ANTIC_EXPIRE_MS: i64 = 1000;

/// Largest accepted expiry and batch time, ms (60 s).
pub const MAX_EXPIRE_MS: i64 = 60_000;

/// AS tunables, named and scaled as in sysfs (`/sys/block/<dev>/queue/iosched/`).
pub static TUNABLES: [TunableSpec; 5] = [
    TunableSpec::new(
        "read_expire",
        125,
        0,
        MAX_EXPIRE_MS,
        "ms",
        "FIFO deadline of sync requests",
    ),
    TunableSpec::new(
        "write_expire",
        250,
        0,
        MAX_EXPIRE_MS,
        "ms",
        "FIFO deadline of async requests",
    ),
    TunableSpec::new(
        "read_batch_expire",
        500,
        0,
        MAX_EXPIRE_MS,
        "ms",
        "length of a sync batch while async requests wait",
    ),
    TunableSpec::new(
        "write_batch_expire",
        125,
        0,
        MAX_EXPIRE_MS,
        "ms",
        "target length of an async batch (adapts write_batch_count)",
    ),
    TunableSpec::new(
        "antic_expire",
        6,
        0,
        MAX_ANTIC_EXPIRE_MS,
        "ms",
        "longest anticipation wait after a sync request completes; 0 = deadline with batches",
    ),
];

/// AS tunables in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// FIFO deadline of sync requests, ns.
    pub read_expire: Time,
    /// FIFO deadline of async requests, ns.
    pub write_expire: Time,
    /// Sync batch length while async requests wait, ns.
    pub read_batch_expire: Time,
    /// Target async batch length, ns.
    pub write_batch_expire: Time,
    /// Longest anticipation after a sync completion, ns; 0 disables anticipation.
    pub antic_expire: Time,
}

impl Default for Params {
    /// The sysfs defaults: 125, 250, 500, 125 and 6 ms.
    fn default() -> Self {
        Params {
            read_expire: 125 * MS,
            write_expire: 250 * MS,
            read_batch_expire: 500 * MS,
            write_batch_expire: 125 * MS,
            antic_expire: 6 * MS,
        }
    }
}

impl Params {
    /// Reads the parsed tunables (ms) into ns.
    pub fn from_tunables(t: &TunableValues) -> Self {
        let ms = |k: &str| u64::try_from(t.get(k)).unwrap_or(0).saturating_mul(MS);
        Params {
            read_expire: ms("read_expire"),
            write_expire: ms("write_expire"),
            read_batch_expire: ms("read_batch_expire"),
            write_batch_expire: ms("write_batch_expire"),
            antic_expire: ms("antic_expire"),
        }
    }
}

/// Anticipation state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Antic {
    /// Not anticipating.
    Off,
    /// Waiting for the anticipated process's last request to complete.
    WaitReq,
    /// Its request completed; waiting up to `antic_expire` from that completion for its next request.
    WaitNext,
    /// Anticipation just ended; serve the next request without starting another wait.
    Finished,
}

/// A queued request with its FIFO deadline.
#[derive(Debug)]
struct Entry {
    rq: Request,
    dir: usize,
    deadline: Time,
}

/// What the anticipation rules need to know of a candidate request.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    flow: FlowId,
    sync: bool,
    sector: u64,
    end: u64,
}

impl Candidate {
    fn of(rq: &Request) -> Self {
        Candidate {
            flow: rq.flow,
            sync: rq.sync,
            sector: rq.sector,
            end: rq.end(),
        }
    }
}

fn dir_of(rq: &Request) -> usize {
    if rq.sync {
        SYNC
    } else {
        ASYNC
    }
}

/// The anticipatory scheduler.
pub struct Anticipatory {
    p: Params,
    fifo_expire: [Time; 2],
    max_sectors: u32,

    entries: IntMap<u64, Entry>,
    dirs: [DirQueue; 2],
    index: MergeIndex,
    next_handle: u64,
    /// The elevator's next request per direction.
    next_rq: [Option<u64>; 2],
    /// End sector of the last dispatched request per direction (the elevator's head).
    last_sector: [u64; 2],
    /// When each direction's FIFO was last checked, ns.
    last_check_fifo: [Time; 2],
    queued_parts: usize,
    /// Requests on the device.
    in_flight: u32,

    /// Direction of the current batch.
    batch_dir: usize,
    /// The batch direction changed; nothing is dispatched until the previous batch's requests have completed.
    changed_batch: bool,
    /// A sync batch began; its clock starts at its first sync completion.
    new_batch: bool,
    /// When the current batch ends, ns.
    batch_expires: Time,
    write: WriteBatch,

    antic: Antic,
    /// Process of the last dispatched sync request (cleared by an async dispatch).
    antic_flow: Option<FlowId>,
    /// A request of `antic_flow` completed since the last dispatch.
    ioc_finished: bool,
    /// When that completion happened: the anticipation clock, ns.
    antic_start: Time,
    flows: HashMap<FlowId, FlowHistory>,
    global: GlobalHistory,
}

impl Anticipatory {
    /// AS for `dev` with the given parameters.
    pub fn new(dev: &DeviceInfo, p: Params) -> Self {
        Anticipatory {
            p,
            fifo_expire: [p.read_expire, p.write_expire],
            max_sectors: dev.max_sectors.max(1),
            entries: IntMap::default(),
            dirs: [DirQueue::default(), DirQueue::default()],
            index: MergeIndex::new(),
            next_handle: 0,
            next_rq: [None; 2],
            last_sector: [0; 2],
            last_check_fifo: [0; 2],
            queued_parts: 0,
            in_flight: 0,
            batch_dir: SYNC,
            changed_batch: false,
            new_batch: false,
            batch_expires: p.read_batch_expire,
            write: WriteBatch::new(p.write_batch_expire),
            antic: Antic::Off,
            antic_flow: None,
            ioc_finished: false,
            antic_start: 0,
            flows: HashMap::new(),
            global: GlobalHistory::default(),
        }
    }

    /// Registry constructor.
    pub fn build(dev: &DeviceInfo, t: &TunableValues) -> Box<dyn Scheduler> {
        Box::new(Anticipatory::new(dev, Params::from_tunables(t)))
    }

    /// Current anticipation state (for tests and inspection).
    pub fn antic_state(&self) -> Antic {
        self.antic
    }

    /// Current adaptive write batch size, requests.
    pub fn write_batch_count(&self) -> u32 {
        self.write.count
    }

    /// The statistics kept for `flow`, if any.
    pub fn history(&self, flow: FlowId) -> Option<&FlowHistory> {
        self.flows.get(&flow)
    }

    /// Scheduler-wide statistics.
    pub fn global_history(&self) -> &GlobalHistory {
        &self.global
    }

    fn key(&self, h: u64) -> Option<SortKey> {
        self.entries.get(&h).map(|e| (e.rq.sector, h))
    }

    fn flow_mut(&mut self, flow: FlowId) -> &mut FlowHistory {
        self.flows.entry(flow).or_default()
    }

    /// Drops the history of an exited process once nothing refers to it any more.
    fn maybe_forget(&mut self, flow: FlowId) {
        if self.antic_flow != Some(flow) && self.flows.get(&flow).is_some_and(FlowHistory::idle_and_gone) {
            self.flows.remove(&flow);
        }
    }

    fn set_antic_flow(&mut self, flow: Option<FlowId>) {
        let old = std::mem::replace(&mut self.antic_flow, flow);
        if let Some(old) = old {
            if Some(old) != flow {
                self.maybe_forget(old);
            }
        }
    }

    /// The elevator's better choice between handle `a` and handle `b` in direction `d`.
    fn choose_handle(&self, d: usize, a: Option<u64>, b: Option<u64>) -> Option<u64> {
        let ka = a.and_then(|h| self.key(h));
        let kb = b.and_then(|h| self.key(h));
        choose(self.last_sector[d], ka, kb).map(|k| k.1)
    }

    fn fifo_head(&mut self, d: usize) -> Option<u64> {
        let entries = &self.entries;
        self.dirs[d].fifo_head(|h| entries.contains_key(&h))
    }

    /// FIFO expiry of direction `d`, checked at most once per `fifo_expire[d]` to avoid seek storms.
    fn fifo_expired(&mut self, d: usize, now: Time) -> bool {
        if now.abs_diff(self.last_check_fifo[d]) < self.fifo_expire[d] {
            return false;
        }
        self.last_check_fifo[d] = now;
        match self.fifo_head(d) {
            Some(h) => self.entries.get(&h).is_some_and(|e| now > e.deadline),
            None => false,
        }
    }

    fn batch_expired(&self, now: Time) -> bool {
        if self.changed_batch || self.new_batch {
            return false;
        }
        if self.batch_dir == SYNC {
            now > self.batch_expires
        } else {
            now > self.batch_expires || self.write.left == 0
        }
    }

    /// The anticipation wait has run `antic_expire` past the anticipated process's completion.
    fn antic_expired(&self, now: Time) -> bool {
        now >= self.antic_start.saturating_add(self.p.antic_expire)
    }

    /// Is `c` close to where the head is, so that serving it costs about as little as the anticipated process's next
    /// request? The window starts at 8192 sectors and doubles per ms of anticipation; past 20 ms or `antic_expire`
    /// everything is close. Failing the window, a seek shorter than the process's mean seek (or, for a process
    /// without history, the mean of new processes) is close too.
    fn is_close(&self, f: &FlowHistory, sector: u64, now: Time) -> bool {
        let last = self.last_sector[self.batch_dir];
        let delay_ms = if self.antic == Antic::Off || !self.ioc_finished {
            0
        } else {
            now.saturating_sub(self.antic_start) / MS
        };
        if delay_ms > CLOSE_WINDOW_MAX_MS || delay_ms > self.p.antic_expire / MS {
            return true;
        }
        // delay_ms <= 20, so the shift cannot overflow.
        let delta = CLOSE_WINDOW << delay_ms;
        if last <= sector.saturating_add(delta / 2) && sector <= last.saturating_add(delta) {
            return true;
        }
        let seek = last.abs_diff(sector);
        let mean = if f.seek.samples == 0 {
            self.global.new_seek_mean
        } else {
            f.seek.mean
        };
        mean > seek
    }

    /// Should anticipation stop (or not start) given candidate `c` (the request that would be served otherwise, or
    /// a new arrival)? Implements every breaking rule of §4; may update statistics (cooperation, exit estimates).
    fn can_break(&mut self, c: Option<Candidate>, now: Time) -> bool {
        let Some(p) = self.antic_flow else {
            return true;
        };
        if c.is_some_and(|c| c.flow == p) {
            return true; // the anticipated process's own request (a read, or a write: fsync-style)
        }
        if self.ioc_finished && self.antic_expired(now) {
            return true; // timed out
        }
        let Some(f) = self.flows.get(&p) else {
            return true;
        };
        // More requests of the process queued here: no need to wait for them. The kernel (`as_can_break_anticipation`)
        // also breaks on the process's requests on the elevator's dispatch list that the driver has not fetched yet
        // (`nr_dispatched`, decremented in `as_activate_request`); a policy here hands a request straight to the
        // device, so that list is always empty. Requests already on the device do not count: a sequential reader's
        // readahead window in flight does not stop AS from waiting for the reader's next window.
        if f.queued > 0 {
            return true;
        }
        if let Some(c) = c.filter(|c| c.sync) {
            if self.is_close(f, c.sector, now) {
                // Cooperation: a close request of another process counts in the anticipated process's history.
                let exited = f.exited;
                let no_ttime = f.ttime.samples == 0;
                if exited {
                    if no_ttime {
                        self.global.saw_exit();
                    }
                    self.global.saw_cooperator();
                }
                if let Some(f) = self.flows.get_mut(&p) {
                    f.record_sync_arrival(&mut self.global, c.sector, c.end, now);
                }
                return true;
            }
        }
        let (exited, ttime) = (f.exited, f.ttime);
        if exited {
            if ttime.samples == 0 {
                self.global.saw_exit();
            }
            if self.global.exit_no_coop > HALF {
                return true;
            }
        }
        if ttime.samples == 0 {
            self.global.new_ttime_mean > self.p.antic_expire
                || self.global.exit_prob.saturating_mul(self.global.exit_no_coop) > HALF * FIXED_ONE
        } else {
            ttime.mean > self.p.antic_expire // the process thinks too long between requests
        }
    }

    /// Whether to wait for the anticipated process instead of serving `c`.
    fn can_anticipate(&mut self, c: Option<Candidate>, now: Time) -> bool {
        self.antic_flow.is_some() && self.antic != Antic::Finished && !self.can_break(c, now)
    }

    /// The anticipation timer fired: stop, and learn about exits.
    fn antic_timeout(&mut self) {
        self.antic = Antic::Finished;
        if let Some(f) = self.antic_flow.and_then(|p| self.flows.get(&p)) {
            let (no_ttime, exited) = (f.ttime.samples == 0, f.exited);
            if no_ttime {
                self.global.saw_exit(); // the process has exited or timed out before its first think time
            }
            if exited {
                self.global.saw_exit_without_cooperator();
            }
        }
    }

    /// Answer for an anticipation in progress: wait for a completion, or until the anticipation deadline.
    fn wait_decision(&mut self, now: Time) -> Option<Decision> {
        if self.antic == Antic::WaitReq {
            if self.in_flight > 0 {
                return Some(Decision::Nothing);
            }
            // Defensive: nothing in flight can complete, so start the timed wait now rather than hang.
            self.ioc_finished = true;
            self.antic_start = now;
            self.antic = Antic::WaitNext;
        }
        if self.antic == Antic::WaitNext {
            let deadline = self.antic_start.saturating_add(self.p.antic_expire);
            if now < deadline {
                return Some(Decision::WaitUntil(deadline));
            }
            self.antic_timeout();
        }
        None
    }

    /// Moves request `h` to the device.
    fn move_to_dispatch(&mut self, h: u64) -> Decision {
        let Some(e) = self.entries.remove(&h) else {
            return Decision::Nothing;
        };
        let d = e.dir;
        let key = (e.rq.sector, h);
        self.dirs[d].sorted.remove(&key);
        self.index.remove(h, &e.rq);
        self.last_sector[d] = e.rq.end();
        if d == SYNC {
            self.set_antic_flow(Some(e.rq.flow)); // in case we anticipate after it
        } else {
            self.set_antic_flow(None);
            // Not a counter: what is left of the write batch's budget, which a batch may overrun (then it ends).
            self.write.left = self.write.left.saturating_sub(1);
        }
        self.ioc_finished = false;
        self.antic = Antic::Off;
        self.next_rq[d] = self.dirs[d].next_after(self.last_sector[d], key).map(|k| k.1);
        self.queued_parts = self.queued_parts.saturating_sub(e.rq.parts());
        self.in_flight += 1;
        let f = self.flow_mut(e.rq.flow);
        crate::counter::dec(&mut f.queued, "anticipatory flow queued");
        f.in_flight += 1;
        Decision::Dispatch(e.rq)
    }

    /// Starts a batch in direction `d` with its oldest request; `None` if that direction is empty.
    fn start_batch(&mut self, d: usize, now: Time) -> Option<u64> {
        if d == SYNC {
            if self.batch_dir == ASYNC {
                self.changed_batch = true;
            }
        } else {
            if self.batch_dir == SYNC {
                self.changed_batch = true;
                self.new_batch = false;
            }
            self.write.start(now);
        }
        self.batch_dir = d;
        self.last_check_fifo[d] = now;
        self.fifo_head(d)
    }
}

impl Scheduler for Anticipatory {
    /// A legacy (single-queue block layer) elevator: sync and async requests have pools of their own.
    fn separate_sync_pool(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "anticipatory"
    }

    fn flow_started(&mut self, flow: &FlowInfo, _now: Time) {
        let f = self.flow_mut(flow.id);
        f.exited = false;
    }

    fn flow_exited(&mut self, flow: FlowId, _now: Time) {
        if let Some(f) = self.flows.get_mut(&flow) {
            f.exited = true;
        }
        self.maybe_forget(flow);
    }

    fn would_merge(&self, rq: &Request) -> bool {
        let entries = &self.entries;
        self.index
            .find(rq, self.max_sectors, true, |h| entries.get(&h).map(|e| &e.rq))
            .is_some()
    }

    fn insert(&mut self, rq: Request, now: Time) {
        let d = dir_of(&rq);
        let cand = Candidate::of(&rq);
        if rq.sync {
            let f = self.flows.entry(rq.flow).or_default();
            f.record_sync_arrival(&mut self.global, rq.sector, rq.end(), now);
        }
        self.queued_parts += rq.parts();

        let entries = &self.entries;
        let merge = self
            .index
            .find(&rq, self.max_sectors, true, |h| entries.get(&h).map(|e| &e.rq));
        let handle = match merge.and_then(|(h, kind)| self.entries.get_mut(&h).map(|e| (h, kind, e))) {
            Some((h, kind, e)) => {
                // Merged: the queued request keeps its identity, FIFO position and (earlier) deadline.
                self.index.remove(h, &e.rq);
                if kind == MergeKind::Front {
                    self.dirs[d].sorted.remove(&(e.rq.sector, h));
                }
                absorb(&mut e.rq, rq, kind);
                self.index.add(h, &e.rq);
                self.dirs[d].sorted.insert((e.rq.sector, h));
                h
            }
            None => {
                let h = self.next_handle;
                self.next_handle += 1;
                self.index.add(h, &rq);
                self.dirs[d].sorted.insert((rq.sector, h));
                self.dirs[d].fifo.push_back(h);
                self.flow_mut(rq.flow).queued += 1;
                let deadline = now.saturating_add(self.fifo_expire[d]);
                self.entries.insert(h, Entry { rq, dir: d, deadline });
                h
            }
        };
        self.next_rq[d] = self.choose_handle(d, Some(handle), self.next_rq[d]);

        if matches!(self.antic, Antic::WaitReq | Antic::WaitNext) && self.can_break(Some(cand), now) {
            self.antic = Antic::Finished;
        }
    }

    fn dispatch(&mut self, now: Time) -> Decision {
        let reads = !self.dirs[SYNC].is_empty();
        let writes = !self.dirs[ASYNC].is_empty();

        // A write batch that ran out of work with no reads waiting was not limited by the device.
        if self.batch_dir == ASYNC && !reads && (self.write.left == 0 || !writes) {
            self.write.idled = true;
        }
        if !(reads || writes) {
            return Decision::Nothing;
        }
        if let Some(d) = self.wait_decision(now) {
            return d;
        }
        if self.changed_batch {
            if self.in_flight > 0 {
                return Decision::Nothing;
            }
            self.changed_batch_done(now);
        }

        let mut chosen: Option<u64> = None;
        let mut from_fifo = false;
        if !(reads && writes && self.batch_expired(now)) {
            // The batch is still running (or only one direction has work).
            let next = self.next_rq[self.batch_dir];
            if self.batch_dir == SYNC && self.p.antic_expire > 0 {
                if self.fifo_expired(SYNC, now) {
                    chosen = self.fifo_head(SYNC);
                    from_fifo = true;
                } else {
                    let cand = next.and_then(|h| self.entries.get(&h)).map(|e| Candidate::of(&e.rq));
                    if self.can_anticipate(cand, now) {
                        if self.antic == Antic::Off {
                            if self.ioc_finished {
                                self.antic = Antic::WaitNext;
                            } else {
                                self.antic = Antic::WaitReq;
                            }
                        }
                        if let Some(d) = self.wait_decision(now) {
                            return d;
                        }
                    }
                }
            }
            if chosen.is_none() {
                if let Some(h) = next {
                    if reads && !writes {
                        // No writes waiting: the read batch goes on.
                        self.batch_expires = now.saturating_add(self.p.read_batch_expire);
                    }
                    chosen = Some(h);
                }
            }
        }
        if chosen.is_none() {
            // Not in a batch any more: choose a direction. After a read batch with writes waiting, writes.
            let d = if reads && !(writes && self.batch_dir == SYNC) {
                SYNC
            } else {
                ASYNC
            };
            chosen = self.start_batch(d, now);
        }
        if !from_fifo && self.fifo_expired(self.batch_dir, now) {
            chosen = self.fifo_head(self.batch_dir).or(chosen);
        }
        if self.changed_batch {
            if self.in_flight > 0 {
                return Decision::Nothing;
            }
            self.changed_batch_done(now);
        }
        match chosen {
            Some(h) => self.move_to_dispatch(h),
            // Unreachable while the direction queues and FIFOs agree; serve anything rather than stall.
            None => match self.fifo_head(SYNC).or_else(|| self.fifo_head(ASYNC)) {
                Some(h) => self.move_to_dispatch(h),
                None => Decision::Nothing,
            },
        }
    }

    fn completed(&mut self, rq: &Request, now: Time) {
        crate::counter::dec(&mut self.in_flight, "anticipatory in_flight");
        if let Some(f) = self.flows.get_mut(&rq.flow) {
            crate::counter::dec(&mut f.in_flight, "anticipatory flow in_flight");
            if rq.sync {
                f.io_running = true;
                f.last_end = now;
            }
        }
        if self.changed_batch && self.in_flight == 0 {
            // The previous batch has fully completed: the new one starts now. On this path (the kernel's
            // `as_completed_request`) the batch's expiry is set for either direction.
            self.batch_expires = now.saturating_add(self.batch_expire(self.batch_dir));
            self.changed_batch_done(now);
        }
        if self.new_batch && self.batch_dir == dir_of(rq) {
            // The first completion of a sync batch: adapt the write batch, start the read batch clock. The write
            // batch's time is read the kernel's way (`update_write_batch`): from the batch expiry, which on the
            // completion path above already holds the read batch's (see `WriteBatch::write_time`).
            let write_time = batch::write_time(now, self.batch_expires, self.p.write_batch_expire);
            self.write.adapt(write_time, self.p.write_batch_expire);
            self.batch_expires = now.saturating_add(self.p.read_batch_expire);
            self.new_batch = false;
        }
        if self.antic_flow == Some(rq.flow) {
            self.antic_start = now;
            self.ioc_finished = true;
            if self.antic == Antic::WaitReq {
                self.antic = Antic::WaitNext;
            }
        }
        self.maybe_forget(rq.flow);
    }

    fn queued(&self) -> usize {
        self.queued_parts
    }

    fn check_invariants(&self) -> Result<(), crate::InvariantViolation> {
        self.check()
    }
}

impl Anticipatory {
    /// The previous batch has drained: start the clock of the new one (a sync batch's clock starts at its first
    /// completion instead).
    fn changed_batch_done(&mut self, now: Time) {
        self.changed_batch = false;
        if self.batch_dir == ASYNC {
            self.batch_expires = now.saturating_add(self.p.write_batch_expire);
            self.write.started = now;
        } else {
            self.new_batch = true;
        }
    }

    /// The length of a batch in direction `d`, ns (`batch_expire[d]` in the kernel).
    fn batch_expire(&self, d: usize) -> Time {
        if d == SYNC {
            self.p.read_batch_expire
        } else {
            self.p.write_batch_expire
        }
    }
}

#[cfg(test)]
mod tests;

/// Tests written against the mutants cargo-mutants left alive in this file (docs/TESTING.md, `anticipatory/`):
/// each asserts a decision of the policy, with the reasoning beside it.
#[cfg(test)]
mod mutant_tests {
    use super::tests::{dispatched, read, sched, serve_read, write, FAR};
    use super::*;

    // An exited process's history is dropped once nothing refers to it (the kernel frees the `as_io_context` with
    // the process), so a new process that gets the same id starts without history and is judged by what new
    // processes do. Process 1 first thinks 1 ms (its first sample, which sets the new-process think time to
    // 1/8 ms), then 20 ms between reads: its own mean is far above antic_expire (6 ms), so AS would not wait for
    // it. It exits while AS still points at it; process 2's read moves AS on (and forgets process 1). A new
    // process 1 then reads once; when process 3's far read arrives, AS waits for it (no history: the new-process
    // mean of 1/8 ms is short). Had the old history been kept, its 20 ms think times would serve process 3 at once.
    #[test]
    fn a_new_process_with_an_exited_ones_id_starts_without_history() {
        let mut s = sched(Params::default());
        let mut t = serve_read(&mut s, 1, 1, 1000, 0);
        t = serve_read(&mut s, 2, 1, 1008, t + MS);
        for i in 0..6 {
            t = serve_read(&mut s, 3 + i, 1, 1016 + 8 * i, t + 20 * MS);
        }
        assert!(s.history(FlowId(1)).unwrap().ttime.mean > 6 * MS);
        s.flow_exited(FlowId(1), t);
        // Process 2's far read: process 1 exited and thinks long, so it is served at once.
        s.insert(read(20, 2, FAR), t);
        let r = dispatched(&mut s, t);
        assert_eq!(r.id.0, 20);
        s.completed(&r, t + MS);
        t += MS;
        // A new process 1 reads; AS first waits its 6 ms for process 2 (no history, short new-process mean).
        s.flow_started(&FlowInfo::new(FlowId(1)), t);
        s.insert(read(21, 1, 1000), t);
        assert_eq!(s.dispatch(t), Decision::WaitUntil(t + 6 * MS));
        let r = dispatched(&mut s, t + 6 * MS);
        assert_eq!(r.id.0, 21);
        t += 7 * MS;
        s.completed(&r, t);
        // Process 3's far read: AS anticipates the new process 1.
        s.insert(read(22, 3, FAR + 1000), t + 100_000);
        assert_eq!(s.dispatch(t + 100_000), Decision::WaitUntil(t + 6 * MS));
    }

    // The FIFO is checked at most once per read_expire (125 ms), so that many expired requests cannot make the
    // elevator seek back and forth for each of them (`as_fifo_expired`: "a hopeless seekstorm"), and a request is
    // expired only once its deadline has passed (`time_after`, strict). Anticipation is off, the head is far out
    // (FAR); read 2 at sector 10, far behind, is due at 0 + 125 ms; reads 3, 4 and 5 lie ahead. At 125 ms the check
    // runs (125 ms after the first, at 0) and read 2 is due but not overdue: the elevator serves 3. At 130 ms read 2
    // is overdue, but the last check was 5 ms ago: the elevator serves 4. At 250 ms the next check finds read 2 and
    // serves it across the disk.
    #[test]
    fn the_fifo_is_checked_once_per_expiry_interval() {
        let mut s = sched(Params {
            antic_expire: 0,
            ..Params::default()
        });
        s.insert(read(1, 1, FAR), 0);
        assert_eq!(dispatched(&mut s, 0).id.0, 1);
        s.insert(read(2, 2, 10), 0);
        s.insert(read(3, 3, FAR + 100), MS);
        s.insert(read(4, 4, FAR + 200), MS);
        s.insert(read(5, 5, FAR + 300), MS);
        assert_eq!(dispatched(&mut s, 125 * MS).id.0, 3);
        assert_eq!(dispatched(&mut s, 130 * MS).id.0, 4);
        assert_eq!(dispatched(&mut s, 250 * MS).id.0, 2);
    }

    // A read batch's clock starts at its first completion (`as_batch_expired` answers "not expired" while
    // `new_batch` or `changed_batch` is set): the batch expiry still holds an old time then. A write batch runs
    // until 200 ms (its expiry 125 ms, passed); the switch to reads dispatches read 1 with writes still waiting.
    // Read 2 goes next, in the same batch, although `now` is past the stale expiry; had the batch been judged
    // expired, AS would switch back to writes and wait for read 1 (Nothing).
    #[test]
    fn a_read_batch_does_not_expire_before_its_first_completion() {
        let mut s = sched(Params {
            antic_expire: 0,
            ..Params::default()
        });
        s.insert(write(10, 9, FAR), 0);
        let w = dispatched(&mut s, 0);
        assert_eq!(w.id.0, 10);
        s.insert(write(11, 9, FAR + 8 * 64), MS);
        s.insert(read(1, 1, 1000), MS);
        s.insert(read(2, 2, 2000), MS);
        s.completed(&w, 200 * MS);
        assert_eq!(dispatched(&mut s, 200 * MS).id.0, 1, "the write batch is over: reads");
        assert_eq!(
            dispatched(&mut s, 200 * MS).id.0,
            2,
            "the read batch has not started its clock"
        );
    }

    // A batch expires only once its time has passed (`time_after`, strict): at the expiry the batch goes on, one
    // nanosecond later it ends. Read batch: the first read batch's clock is read_batch_expire (500 ms) from the
    // start; with a write waiting it is not extended. At 500 ms read 2 is served, at 500 ms + 1 ns the batch is
    // over and AS switches to the write (after read 2 completes).
    #[test]
    fn a_read_batch_ends_just_after_its_expiry() {
        let mut s = sched(Params {
            antic_expire: 0,
            ..Params::default()
        });
        s.insert(read(1, 1, 1000), 0);
        s.insert(read(2, 1, 2000), 0);
        s.insert(read(3, 1, 3000), 0);
        s.insert(write(4, 2, FAR), 0);
        let r = dispatched(&mut s, 0);
        s.completed(&r, MS);
        let r = dispatched(&mut s, 500 * MS);
        assert_eq!(r.id.0, 2, "at its expiry the read batch goes on");
        s.completed(&r, 500 * MS + 1);
        assert_eq!(
            dispatched(&mut s, 500 * MS + 1).id.0,
            4,
            "one ns later the write batch begins"
        );
    }

    // The same for a write batch: it started at 0 (its clock set when the switch completed), so it expires at
    // write_batch_expire = 125 ms. At 125 ms the second write is served although a read waits; at 125 ms + 1 ns
    // the read is.
    #[test]
    fn a_write_batch_ends_just_after_its_expiry() {
        let mut s = sched(Params {
            antic_expire: 0,
            ..Params::default()
        });
        for i in 0..4 {
            s.insert(write(10 + i, 9, FAR + 64 * i), 0);
        }
        let w = dispatched(&mut s, 0);
        assert_eq!(w.id.0, 10);
        s.completed(&w, MS);
        s.insert(read(1, 1, 1000), MS);
        let w = dispatched(&mut s, 125 * MS);
        assert_eq!(w.id.0, 11, "at its expiry the write batch goes on");
        s.completed(&w, 125 * MS + 1);
        assert_eq!(
            dispatched(&mut s, 125 * MS + 1).id.0,
            1,
            "one ns later the read batch begins"
        );
    }

    /// Process 1 reads at 10 000 000 and 10 000 008 (1 ms think time, seeks of 0); its second read completes at
    /// 3 ms, so the head is at `L` = 10 000 016. Process 3's read at sector 8 (more than `MAXBACK` behind: the
    /// elevator would wrap to it, so any other read goes first) makes AS anticipate process 1 (WaitUntil 3 ms +
    /// antic_expire). Process 2's read at `L + offset` arrives `delay` after that completion. Returns whether AS
    /// stopped waiting and served process 2's read.
    fn serves_other_read(p: Params, delay: Time, offset: i64) -> bool {
        const L: u64 = 10_000_016;
        let mut s = sched(p);
        let t = serve_read(&mut s, 1, 1, 10_000_000, 0);
        let t = serve_read(&mut s, 2, 1, 10_000_008, t + MS);
        assert_eq!(t, 3 * MS);
        s.insert(read(3, 3, 8), t);
        assert_eq!(s.dispatch(t), Decision::WaitUntil(t + p.antic_expire));
        let now = t + delay;
        s.insert(read(4, 2, L.saturating_add_signed(offset)), now);
        match s.dispatch(now) {
            Decision::Dispatch(r) => {
                assert_eq!(r.id.0, 4);
                true
            }
            Decision::WaitUntil(u) => {
                assert_eq!(u, t + p.antic_expire);
                false
            }
            d => panic!("{d:?}"),
        }
    }

    // The close window (`as_close_req`): 8192 sectors ahead and half that behind the head while the wait has run
    // under a millisecond, doubling each whole millisecond of waiting (2.5 ms: 32 768 and 16 384). Process 1's
    // seek mean is 0, so only the window makes a read close. A close read is about as cheap as the awaited one:
    // AS serves it; one sector further, it keeps waiting.
    #[test]
    fn the_close_window_doubles_each_millisecond_of_waiting() {
        let p = Params::default();
        let cases: [(Time, i64, bool); 8] = [
            (500_000, 8192, true),
            (500_000, 8193, false),
            (500_000, -4096, true),
            (500_000, -4097, false),
            (2 * MS + 500_000, 32_768, true),
            (2 * MS + 500_000, 32_769, false),
            (2 * MS + 500_000, -16_384, true),
            (2 * MS + 500_000, -16_385, false),
        ];
        for (delay, offset, close) in cases {
            assert_eq!(
                serves_other_read(p, delay, offset),
                close,
                "delay {delay} ns, offset {offset}"
            );
        }
    }

    // Past 20 ms of waiting every read counts as close (the window would be 8192 << 20 = 2^33 sectors and more):
    // with antic_expire 100 ms, at 20 ms the window is still 2^33 sectors ahead (one more is not close), at 60 ms
    // any read is.
    #[test]
    fn after_20_ms_of_waiting_every_read_is_close() {
        let p = Params {
            antic_expire: 100 * MS,
            ..Params::default()
        };
        assert!(serves_other_read(p, 20 * MS, 1 << 33));
        assert!(!serves_other_read(p, 20 * MS, (1 << 33) + 1));
        assert!(serves_other_read(p, 60 * MS, 1 << 40));
    }

    // While the awaited request is still on the device the window is the base 8192 sectors, whatever time has
    // passed since the process's previous completion (the clock of the wait starts at the completion). Process 1
    // completed a read at 1 ms, then its next read went out at 2 ms and is in flight; at 30 ms (29 ms after that
    // completion) a read 8193 sectors ahead arrives: not close, AS keeps waiting for process 1 (Nothing).
    #[test]
    fn while_the_awaited_request_is_in_flight_the_window_does_not_grow() {
        let mut s = sched(Params::default());
        let t = serve_read(&mut s, 1, 1, 1_000_000, 0);
        s.insert(read(2, 1, 1_000_008), t + MS);
        let r2 = dispatched(&mut s, t + MS);
        s.insert(read(3, 3, FAR), t + MS);
        assert_eq!(s.dispatch(t + MS), Decision::Nothing);
        assert_eq!(s.antic_state(), Antic::WaitReq);
        s.insert(read(4, 2, 1_000_016 + 8193), 30 * MS);
        assert_eq!(s.dispatch(30 * MS), Decision::Nothing);
        s.completed(&r2, 31 * MS);
        assert_eq!(s.dispatch(31 * MS), Decision::WaitUntil(37 * MS));
    }

    /// Process 1 reads once or twice (`reads`; 1 ms between a completion and the next read), `setup` adjusts the
    /// statistics, then process 2's far read arrives 100 µs after process 1's last completion. True if AS waits
    /// for process 1 (WaitUntil), false if it serves process 2's read at once.
    fn waits_for(reads: u64, setup: impl FnOnce(&mut Anticipatory)) -> bool {
        let mut s = sched(Params::default());
        let mut t = 0;
        for i in 0..reads {
            t = serve_read(&mut s, 1 + i, 1, 1000 + 8 * i, if i == 0 { 0 } else { t + MS });
        }
        setup(&mut s);
        s.insert(read(9, 2, FAR), t + 100_000);
        match s.dispatch(t + 100_000) {
            Decision::WaitUntil(u) => {
                assert_eq!(u, t + 6 * MS);
                true
            }
            Decision::Dispatch(r) => {
                assert_eq!(r.id.0, 9);
                false
            }
            d => panic!("{d:?}"),
        }
    }

    // A process without think-time history is judged by what new processes do (`as_can_break_anticipation`): AS
    // does not wait if new processes' first think time exceeds antic_expire (6 ms), or if the chance that it has
    // exited (exit_prob) times the chance that nobody cooperates then (exit_no_coop) exceeds one half (both
    // x 256: 128 x 256). Each threshold is strict: at it AS waits, one unit over it does not.
    #[test]
    fn a_new_process_is_waited_for_unless_new_processes_think_long_or_exit() {
        assert!(waits_for(1, |_| ()));
        assert!(waits_for(1, |s| s.global.new_ttime_mean = 6 * MS));
        assert!(!waits_for(1, |s| s.global.new_ttime_mean = 6 * MS + 1));
        let with = |prob, no_coop| {
            move |s: &mut Anticipatory| {
                s.global.exit_prob = prob;
                s.global.exit_no_coop = no_coop;
            }
        };
        assert!(waits_for(1, with(128, 256)), "0.5 x 1.0 is not over one half");
        assert!(!waits_for(1, with(129, 256)));
        assert!(!waits_for(1, with(256, 129)));
        // The new-process think time (0 here) is short in these two: the exit estimate alone decides.
    }

    // A process with history is waited for while its own mean think time is at most antic_expire (6 ms; strict).
    #[test]
    fn a_process_is_waited_for_while_its_mean_think_time_is_at_most_antic_expire() {
        let mean = |m| move |s: &mut Anticipatory| s.flows.get_mut(&FlowId(1)).unwrap().ttime.mean = m;
        assert!(waits_for(2, mean(6 * MS)));
        assert!(!waits_for(2, mean(6 * MS + 1)));
    }

    // An exited process is not waited for once AS has learned that exited processes are mostly not followed by a
    // cooperating request: exit_no_coop over one half (128 of 256; strict).
    #[test]
    fn an_exited_process_is_waited_for_until_exits_are_learned() {
        let exited = |no_coop| {
            move |s: &mut Anticipatory| {
                s.flow_exited(FlowId(1), 3 * MS);
                s.global.exit_no_coop = no_coop;
            }
        };
        assert!(waits_for(2, exited(128)));
        assert!(!waits_for(2, exited(129)));
    }

    /// Serves process `p`'s read at `sector` at `t`, completing 1 ms later; then process `q`'s far read arrives
    /// 100 µs after that completion. True if AS waits for `p` (and, waiting, lets the wait run out at the 6 ms
    /// deadline and serves `q`'s read then), false if it serves `q`'s read at once. `q`'s read completes 1 ms after
    /// its dispatch; returns the time of that completion too.
    fn new_reader_then_far_read(s: &mut Anticipatory, id: u64, p: u32, q: u32, t: Time) -> (bool, Time) {
        let done = serve_read(s, id, p, 1000 + 8 * id, t);
        let now = done + 100_000;
        s.insert(read(id + 1, q, FAR + 8 * id), now);
        let (waited, at) = match s.dispatch(now) {
            Decision::WaitUntil(u) => {
                assert_eq!(u, done + 6 * MS);
                (true, u)
            }
            Decision::Dispatch(r) => {
                assert_eq!(r.id.0, id + 1);
                s.completed(&r, now + MS);
                return (false, now + MS);
            }
            d => panic!("{d:?}"),
        };
        let r = dispatched(s, at);
        assert_eq!(r.id.0, id + 1);
        s.completed(&r, at + MS);
        (waited, at + MS)
    }

    // An anticipation that runs out on a process without think-time history counts as evidence that new processes
    // exit (`as_antic_timeout`: exit_prob rises by 1/8 towards 1). With nobody cooperating after exits
    // (exit_no_coop 256) and exit_prob at 128, a new process is still waited for (128 x 256 is not over one half);
    // after that wait ran out, exit_prob is 144 and the next new process is not waited for.
    #[test]
    fn a_wait_that_runs_out_on_a_new_process_teaches_that_new_processes_exit() {
        let mut s = sched(Params::default());
        s.global.exit_no_coop = 256;
        s.global.exit_prob = 128;
        let (waited, t) = new_reader_then_far_read(&mut s, 10, 1, 2, 0);
        assert!(waited, "process 1 is new and exits are not likely enough yet");
        // Process 2 (new, its read served at the timeout) is now the one AS would wait for.
        s.insert(read(30, 3, 2 * FAR), t + 100_000);
        assert_eq!(dispatched(&mut s, t + 100_000).id.0, 30, "process 2 is not waited for");
    }

    /// Process 1 reads twice (a think-time sample of 1 ms, so it has history) and exits; then `setup` sets the
    /// statistics, and process 2's read at `sector` arrives. It is served at once (the test asserts so). Process 3's
    /// far read then arrives 100 µs after process 2's read completes: true if AS waits for process 2 (new).
    fn after_an_exited_process(sector: u64, setup: impl FnOnce(&mut Anticipatory)) -> bool {
        let mut s = sched(Params::default());
        let t = serve_read(&mut s, 1, 1, 1000, 0);
        let t = serve_read(&mut s, 2, 1, 1008, t + MS);
        s.flow_exited(FlowId(1), t);
        setup(&mut s);
        s.insert(read(3, 2, sector), t + 100_000);
        let r = dispatched(&mut s, t + 100_000);
        assert_eq!(r.id.0, 3);
        let t = t + 2 * MS;
        s.completed(&r, t);
        s.insert(read(4, 3, 2 * FAR), t + 100_000);
        match s.dispatch(t + 100_000) {
            Decision::WaitUntil(u) => {
                assert_eq!(u, t + 6 * MS);
                true
            }
            Decision::Dispatch(r) => {
                assert_eq!(r.id.0, 4);
                false
            }
            d => panic!("{d:?}"),
        }
    }

    // Leaving an exited process that had think-time history is no evidence that new processes exit: exit_prob
    // rises only for an exited process without history (`as_can_break_anticipation`). Process 1 exited with
    // history; with exit_no_coop 256 a far read is served at once (the exit rule), and exit_prob stays at 128, so
    // the new process 2 is then waited for (128 x 256 is not over one half). The same holds when the read that ends
    // the wait is close to process 1's and counts as cooperation (exit_no_coop falls to 224, exit_prob stays at
    // 146: 146 x 224 = 32 704, not over 32 768).
    #[test]
    fn an_exited_process_with_history_does_not_raise_the_exit_estimate() {
        assert!(after_an_exited_process(FAR, |s| {
            s.global.exit_no_coop = 256;
            s.global.exit_prob = 128;
        }));
        assert!(after_an_exited_process(1016, |s| {
            s.global.exit_no_coop = 256;
            s.global.exit_prob = 146;
        }));
    }

    // A read arriving after the wait would have run out ends it without teaching AS anything (`as_antic_expired`
    // is checked first in `as_can_break_anticipation`): exit_no_coop stays at 128 and an exited process is still
    // waited for next time. (Counting the late read as a timed-out wait on an exited process would raise
    // exit_no_coop to 144, over one half, and the next exited process would not be waited for.)
    #[test]
    fn a_read_arriving_after_the_wait_would_have_ended_teaches_nothing() {
        let mut s = sched(Params::default());
        s.global.exit_no_coop = 128;
        let t = serve_read(&mut s, 1, 1, 1000, 0);
        let t = serve_read(&mut s, 2, 1, 1008, t + MS);
        s.flow_exited(FlowId(1), t);
        s.insert(read(3, 2, FAR), t + 10 * MS);
        let r = dispatched(&mut s, t + 10 * MS);
        assert_eq!(r.id.0, 3);
        s.completed(&r, t + 11 * MS);
        // Process 4 reads twice, exits, and process 5's far read arrives at once: AS waits for process 4.
        let t = serve_read(&mut s, 4, 4, 5000, t + 20 * MS);
        let t = serve_read(&mut s, 5, 4, 5008, t + MS);
        s.flow_exited(FlowId(4), t);
        s.insert(read(6, 5, 2 * FAR), t + 100_000);
        assert_eq!(s.dispatch(t + 100_000), Decision::WaitUntil(t + 6 * MS));
    }

    // A process that has another request queued is not waited for: it already has I/O to do (`nr_queued`). Process
    // 1 reads sequentially (seek mean 0, settled after three samples), then queues a read 10 M sectors ahead
    // (its seek sample is clamped to 131 072, so its seek mean stays near 40 000) just after process 2's read
    // 100 000 sectors ahead: the elevator's next is process 2's read, not close, and process 1 thinks 1 ms; AS
    // serves process 2's read at once because process 1 has a request queued.
    #[test]
    fn a_process_with_a_request_queued_is_not_waited_for() {
        let mut s = sched(Params::default());
        let mut t = 0;
        for i in 0..4 {
            t = serve_read(&mut s, 1 + i, 1, 1_000_000 + 8 * i, if i == 0 { 0 } else { t + MS });
        }
        let head = 1_000_032;
        s.insert(read(10, 2, head + 100_000), t + 100_000);
        s.insert(read(11, 1, head + 10_000_000), t + 100_000);
        assert!(s.history(FlowId(1)).unwrap().seek.mean < 100_000);
        assert_eq!(dispatched(&mut s, t + 100_000).id.0, 10);
    }

    // A flow that starts again under an id AS still remembers (here the exited process AS was last serving) is a
    // running process: it is not treated as exited. With exit_no_coop 256 an exited process is never waited for;
    // the restarted one, which thinks 1 ms, is.
    #[test]
    fn a_restarted_flow_is_not_treated_as_exited() {
        let exited = |s: &mut Anticipatory| {
            s.flow_exited(FlowId(1), 3 * MS);
            s.global.exit_no_coop = 256;
        };
        assert!(!waits_for(2, exited));
        assert!(waits_for(2, |s: &mut Anticipatory| {
            exited(s);
            s.flow_started(&FlowInfo::new(FlowId(1)), 3 * MS);
        }));
    }

    // The legacy block layer asks the elevator whether a new request would merge into a queued one before it takes
    // a request from the pool (`elv_merge`): a read just after or just before a queued read of the same direction
    // would; one with a gap, or a write next to a read, would not.
    #[test]
    fn only_a_contiguous_request_of_the_same_direction_would_merge() {
        let mut s = sched(Params::default());
        s.insert(read(1, 1, 1000), 0);
        assert!(s.would_merge(&read(2, 1, 1008)), "back merge");
        assert!(s.would_merge(&read(3, 1, 992)), "front merge");
        assert!(!s.would_merge(&read(4, 1, 1016)), "a gap of 8 sectors");
        assert!(!s.would_merge(&write(5, 1, 1008)), "a write after a read");
    }

    // A front merge moves the queued request's start: it must leave the sorted queue under its old start, or AS
    // would go on seeing a read queued after serving it. Read 1 at 1000 grows to start at 992; once it is served
    // no read is queued, so a write that arrives is served at once (with a phantom read queued, the read batch
    // would go on, 500 ms, with nothing to dispatch).
    #[test]
    fn a_front_merged_read_leaves_no_trace_once_served() {
        let mut s = sched(Params {
            antic_expire: 0,
            ..Params::default()
        });
        s.insert(read(1, 1, 1000), 0);
        s.insert(read(2, 1, 992), 0);
        assert_eq!(s.queued(), 2, "two parts");
        let r = dispatched(&mut s, 0);
        assert_eq!((r.id.0, r.sector, r.sectors), (1, 992, 16));
        s.completed(&r, MS);
        s.insert(write(3, 2, FAR), MS);
        assert_eq!(dispatched(&mut s, MS).id.0, 3);
    }

    /// Write 1 is dispatched at 0 (a write batch: it expires at 125 ms) and completes at 200 ms; if `idle`, AS is
    /// asked to dispatch once more at 0, with nothing queued. A read arrives at 200 ms, is served at once (the
    /// switch happens in the dispatch path, so the write batch's time is read as the true 200 ms) and completes at
    /// 201 ms. Returns the adapted write_batch_count (12 before).
    fn write_batch_count_after_a_lone_write(idle: bool) -> u32 {
        let mut s = sched(Params {
            antic_expire: 0,
            ..Params::default()
        });
        s.insert(write(1, 9, FAR), 0);
        let w = dispatched(&mut s, 0);
        if idle {
            assert_eq!(s.dispatch(0), Decision::Nothing);
        }
        s.completed(&w, 200 * MS);
        s.insert(read(2, 1, 1000), 200 * MS);
        let r = dispatched(&mut s, 200 * MS);
        assert_eq!(r.id.0, 2);
        s.completed(&r, 201 * MS);
        s.write_batch_count()
    }

    // A write batch that ran out of writes while no read waited was limited by the work, not by the device, so its
    // length says nothing about the device (`write_batch_idled`): the count stays at 12. When a read was waiting
    // the whole time instead, the batch's 201 ms (over the 125 ms target, under 3x) takes one off: 11.
    #[test]
    fn a_write_batch_that_went_idle_does_not_shrink_the_count() {
        assert_eq!(write_batch_count_after_a_lone_write(true), 12);
        assert_eq!(write_batch_count_after_a_lone_write(false), 11);
    }

    // The wait for the next request is timed from the completion of the awaited one (`as_completed_request` moves
    // WAIT_REQ to WAIT_NEXT then), not from when AS is next asked: process 1's read completes at 1 ms, AS is asked
    // at 3 ms and waits until 1 + 6 = 7 ms.
    #[test]
    fn the_wait_runs_from_the_awaited_completion() {
        let mut s = sched(Params::default());
        s.insert(read(1, 1, 1000), 0);
        let r = dispatched(&mut s, 0);
        s.insert(read(2, 2, FAR), 100_000);
        assert_eq!(s.dispatch(100_000), Decision::Nothing);
        s.completed(&r, MS);
        assert_eq!(s.dispatch(3 * MS), Decision::WaitUntil(7 * MS));
    }

    // When the last write of a batch completes with a read waiting, the completion starts the read batch and sets
    // the batch expiry to the read batch's length, 500 ms (`as_completed_request`, `batch_expire[REQ_SYNC]`), before
    // the first read completes. With a write still queued nothing moves that expiry, so the write batch's time is
    // read (2.6.32's `update_write_batch`) as first completion + 125 - (switch + 500) < 0, i.e. 0, even though
    // the first read takes 50 ms: the full batch doubles to 24. (Had the expiry been the write batch's 125 ms, the
    // time would read 50 ms and the count grow by one, to 13; had it been 0, 175 ms, and shrink to 11.)
    #[test]
    fn a_switch_on_completion_sets_the_read_batchs_expiry() {
        let mut s = sched(Params {
            antic_expire: 0,
            ..Params::default()
        });
        for i in 0..13 {
            s.insert(write(100 + i, 2, 1_000_000 + 16 * i), 0);
        }
        let batch: Vec<Request> = (0..12).map(|_| dispatched(&mut s, 0)).collect();
        s.insert(read(1, 1, 0), 1_000);
        assert_eq!(s.dispatch(1_000), Decision::Nothing, "the batch drains first");
        let mut now = 0;
        for w in &batch {
            now += 10 * MS;
            s.completed(w, now);
        }
        let r = dispatched(&mut s, now);
        assert_eq!(r.id.0, 1);
        s.completed(&r, now + 50 * MS);
        assert_eq!(s.write_batch_count(), 24);
    }

    // Outside the window a read is still close if it is nearer than the awaited process's own mean seek
    // (`as_close_req`: "better than what we're expecting"; strict). Process 1 seeks 100 000 sectors between its
    // two reads (one sample: its seek mean is 100 000; new processes' expected seek is 1/8 of it, 12 500). Half a
    // millisecond after its completion (window 8192), a read 99 999 sectors from the head is close and served; one
    // 100 000 sectors away is not, and AS waits.
    #[test]
    fn a_read_nearer_than_the_processs_mean_seek_is_close() {
        let serves = |offset: u64| {
            let mut s = sched(Params::default());
            let t = serve_read(&mut s, 1, 1, 10_000_000, 0);
            let t = serve_read(&mut s, 2, 1, 10_100_008, t + MS);
            assert_eq!(s.history(FlowId(1)).unwrap().seek.mean, 100_000);
            s.insert(read(3, 3, 8), t);
            assert_eq!(s.dispatch(t), Decision::WaitUntil(t + 6 * MS));
            s.insert(read(4, 2, 10_100_016 + offset), t + 500_000);
            match s.dispatch(t + 500_000) {
                Decision::Dispatch(r) => r.id.0 == 4,
                Decision::WaitUntil(u) => {
                    assert_eq!(u, t + 6 * MS);
                    false
                }
                d => panic!("{d:?}"),
            }
        };
        assert!(serves(99_999));
        assert!(!serves(100_000));
    }
}
