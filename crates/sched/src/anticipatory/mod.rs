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
