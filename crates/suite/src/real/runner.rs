//! Runs the workload's [`Process`] state machines on real threads in real time, executing their operations
//! through an [`IoBackend`].
//!
//! # Semantics (the same as the simulator's)
//! - One thread per process. Time is `CLOCK_MONOTONIC` in ns since the runner was made ([`Runner::now`]); a
//!   process spawned at `at` gets [`Event::Start`] at the first moment `now >= at`.
//! - The operations of one [`Actions`] are submitted in order to the process's [`FlowIo`], which may run them
//!   concurrently (the kernel backend runs O_DIRECT reads and writes asynchronously, buffered ones one after the
//!   other; see [`super::kernel`]). Each completion is delivered as [`Event::Completed`] with the op's tag and its
//!   byte count or [`IoError`].
//! - `Op::Invalidate` takes effect at once and gets no completion.
//! - `sleep_until` is honoured unless an event comes first: every event cancels the pending sleep, and the process
//!   says again what it wants. A process with nothing outstanding and no sleep waits for the end of the run.
//! - After `exit` (or when the run stops) the process is told nothing more; its outstanding operations are still
//!   waited for (and counted) before its thread ends.
//!
//! # Plugging in a backend
//! Implement [`IoBackend`] (shared by all threads; opens a per-process [`FlowIo`] *inside* the process's thread,
//! so thread-bound settings such as the I/O priority apply) and [`FlowIo`] (`submit`, `invalidate`, `wait`). The
//! timeline in [`super::timeline`] then runs any scenario on it.

use super::RealError;
use bfq_sched::Time;
use bfq_workload::{Actions, Event, FileId, FlowSpec, IoError, Op, Process, ProcessReport};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest a process thread blocks without checking whether the run was stopped, ns.
pub const STOP_POLL_NS: Time = 10_000_000;

/// The end of one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The tag the process gave the operation.
    pub tag: u64,
    /// Bytes transferred (0 for fsync and sync), or why it failed.
    pub result: Result<u64, IoError>,
}

/// Where the I/O of the real targets goes: one per run, shared by every process thread.
pub trait IoBackend: Send + Sync + 'static {
    /// One process's handle.
    type Flow: FlowIo;
    /// Opens the flow of a process with identity `spec` (class, priority, weight, group); called on the process's
    /// own thread before its first event.
    fn open_flow(&self, spec: &FlowSpec) -> Result<Self::Flow, RealError>;
    /// Short backend name for reports (`kernel`, `engine`).
    fn name(&self) -> &'static str;
}

/// One process's I/O: submits operations and hands back their completions.
pub trait FlowIo {
    /// Starts `op` (never [`Op::Invalidate`]) with `tag`. Must not block for long; a failure to start is reported
    /// later as that op's completion.
    fn submit(&mut self, tag: u64, op: &Op);
    /// Drops `file`'s cached pages (`posix_fadvise(DONTNEED)` or nothing for a backend without a page cache).
    fn invalidate(&mut self, file: FileId);
    /// Waits for one completion of a submitted operation until `deadline`; `None` if there was none by then.
    /// Called only while operations are outstanding.
    fn wait(&mut self, deadline: Instant) -> Option<Completion>;
}

/// Identifies a process of a [`Runner`].
pub type ProcId = usize;

/// What one process did, once the run is over.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcOutcome {
    /// Flow name.
    pub name: String,
    /// When it got its start event, ns (`None` if the run stopped first).
    pub started_at: Option<Time>,
    /// When it exited, ns (`None` if it was still running when the run stopped).
    pub exited_at: Option<Time>,
    /// Its own report.
    pub report: ProcessReport,
    /// Why it could not run, if its flow could not be opened.
    pub error: Option<String>,
}

#[derive(Default)]
struct Shared {
    read_bytes: AtomicU64,
    written_bytes: AtomicU64,
    cancel: AtomicBool,
    exited: Mutex<Option<Time>>,
    exited_cv: Condvar,
}

struct Slot {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<ProcOutcome>>,
}

/// Real-time executor of processes.
pub struct Runner<B: IoBackend> {
    backend: Arc<B>,
    origin: Instant,
    stop: Arc<AtomicBool>,
    slots: Vec<Slot>,
}

/// The runner's clock: ns since `origin`.
fn now_ns(origin: Instant) -> Time {
    origin.elapsed().as_nanos() as Time
}

fn instant_at(origin: Instant, t: Time) -> Instant {
    origin + Duration::from_nanos(t)
}

impl<B: IoBackend> Runner<B> {
    /// A runner over `backend`; its clock starts now.
    pub fn new(backend: B) -> Self {
        Runner {
            backend: Arc::new(backend),
            origin: Instant::now(),
            stop: Arc::new(AtomicBool::new(false)),
            slots: Vec::new(),
        }
    }

    /// Time since the runner was made, ns.
    pub fn now(&self) -> Time {
        now_ns(self.origin)
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Blocks the calling thread until `t` (runner time, ns).
    pub fn sleep_until(&self, t: Time) {
        let target = instant_at(self.origin, t);
        let now = Instant::now();
        if target > now {
            std::thread::sleep(target - now);
        }
    }

    /// Starts `p` on its own thread, to get its start event at `at` (ns).
    pub fn spawn(&mut self, at: Time, p: Box<dyn Process>) -> Result<ProcId, RealError> {
        let shared = Arc::new(Shared::default());
        let (backend, stop, origin, sh) = (self.backend.clone(), self.stop.clone(), self.origin, shared.clone());
        let name = p.flow().name;
        let handle = std::thread::Builder::new()
            .name(format!("bfq-{}", name.chars().take(10).collect::<String>()))
            .spawn(move || run_process(&*backend, p, at, origin, &stop, &sh))
            .map_err(super::sys::io_err(format!("cannot start a thread for {name}")))?;
        self.slots.push(Slot {
            shared,
            handle: Some(handle),
        });
        Ok(self.slots.len() - 1)
    }

    /// Waits until process `id` exits or the runner's clock reaches `until`; returns its exit time if it exited.
    pub fn wait_exit(&self, id: ProcId, until: Time) -> Option<Time> {
        let sh = &self.slots.get(id)?.shared;
        let mut g = sh.exited.lock().ok()?;
        loop {
            if let Some(t) = *g {
                return Some(t);
            }
            let now = self.now();
            if now >= until {
                return None;
            }
            g = sh.exited_cv.wait_timeout(g, Duration::from_nanos(until - now)).ok()?.0;
        }
    }

    /// Tells process `id` to stop at its next event (its outstanding operations still complete).
    pub fn cancel(&self, id: ProcId) {
        if let Some(s) = self.slots.get(id) {
            s.shared.cancel.store(true, Ordering::SeqCst);
        }
    }

    /// Bytes read and written by all processes so far, as their completions reported them.
    pub fn bytes(&self) -> (u64, u64) {
        self.slots.iter().fold((0, 0), |(r, w), s| {
            (
                r + s.shared.read_bytes.load(Ordering::Relaxed),
                w + s.shared.written_bytes.load(Ordering::Relaxed),
            )
        })
    }

    /// Stops every process, waits for their threads, and returns their outcomes in spawn order.
    pub fn finish(mut self) -> Vec<ProcOutcome> {
        self.stop.store(true, Ordering::SeqCst);
        self.slots
            .iter_mut()
            .map(|s| match s.handle.take().map(JoinHandle::join) {
                Some(Ok(o)) => o,
                _ => ProcOutcome {
                    name: String::new(),
                    started_at: None,
                    exited_at: None,
                    report: ProcessReport::default(),
                    error: Some("process thread panicked".into()),
                },
            })
            .collect()
    }
}

impl<B: IoBackend> Drop for Runner<B> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for s in &mut self.slots {
            if let Some(h) = s.handle.take() {
                let _ = h.join();
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Dir {
    Read,
    Write,
    Other,
}

fn run_process<B: IoBackend>(
    backend: &B,
    mut p: Box<dyn Process>,
    at: Time,
    origin: Instant,
    stop: &AtomicBool,
    sh: &Shared,
) -> ProcOutcome {
    let spec = p.flow();
    let mut outcome = ProcOutcome {
        name: spec.name.clone(),
        started_at: None,
        exited_at: None,
        report: ProcessReport::default(),
        error: None,
    };
    let halted = || stop.load(Ordering::Relaxed) || sh.cancel.load(Ordering::Relaxed);
    // Wait for the start time, checking for a stop.
    loop {
        if halted() {
            outcome.report = p.report();
            return outcome;
        }
        let now = now_ns(origin);
        if now >= at {
            break;
        }
        std::thread::sleep(Duration::from_nanos((at - now).min(STOP_POLL_NS)));
    }
    let mut flow = match backend.open_flow(&spec) {
        Ok(f) => f,
        Err(e) => {
            outcome.error = Some(e.to_string());
            outcome.report = p.report();
            return outcome;
        }
    };
    let mut kinds: HashMap<u64, Dir> = HashMap::new();
    let mut outstanding = 0usize;
    let mut actions = Actions::default();
    let mut event = Event::Start;
    outcome.started_at = Some(now_ns(origin));
    let count = |kinds: &mut HashMap<u64, Dir>, c: &Completion| {
        if let (Some(d), Ok(n)) = (kinds.remove(&c.tag), &c.result) {
            match d {
                Dir::Read => sh.read_bytes.fetch_add(*n, Ordering::Relaxed),
                Dir::Write => sh.written_bytes.fetch_add(*n, Ordering::Relaxed),
                Dir::Other => 0,
            };
        }
    };
    'run: loop {
        actions.clear();
        p.on_event(event, now_ns(origin), &mut actions);
        for (tag, op) in actions.ops.drain(..) {
            let dir = match op {
                Op::Invalidate { file } => {
                    flow.invalidate(file);
                    continue;
                }
                Op::Read { .. } => Dir::Read,
                Op::Write { .. } => Dir::Write,
                Op::Fsync { .. } | Op::Sync => Dir::Other,
            };
            kinds.insert(tag, dir);
            flow.submit(tag, &op);
            outstanding += 1;
        }
        if actions.exit {
            let t = now_ns(origin);
            outcome.exited_at = Some(t);
            if let Ok(mut g) = sh.exited.lock() {
                *g = Some(t);
            }
            sh.exited_cv.notify_all();
            break 'run;
        }
        let sleep = actions.sleep_until;
        // Wait for the next event: a completion, the end of the sleep, or the end of the run.
        event = loop {
            if halted() {
                break 'run;
            }
            let now = now_ns(origin);
            if let Some(s) = sleep {
                if now >= s {
                    break Event::Woke;
                }
            }
            let until = sleep.map_or(now + STOP_POLL_NS, |s| s.min(now + STOP_POLL_NS));
            if outstanding > 0 {
                if let Some(c) = flow.wait(instant_at(origin, until)) {
                    outstanding -= 1;
                    count(&mut kinds, &c);
                    break Event::Completed {
                        tag: c.tag,
                        result: c.result,
                    };
                }
            } else {
                std::thread::sleep(Duration::from_nanos(until.saturating_sub(now)));
            }
        };
    }
    // Told nothing more; outstanding operations still complete (a backend must not hang, so this ends).
    while outstanding > 0 {
        if let Some(c) = flow.wait(Instant::now() + Duration::from_nanos(STOP_POLL_NS)) {
            outstanding -= 1;
            count(&mut kinds, &c);
        }
    }
    outcome.report = p.report();
    outcome
}

/// A backend that needs no device: every operation takes a fixed time and succeeds (reads and writes transfer
/// their full length). For tests of the runner and the timeline.
#[derive(Debug, Clone)]
pub struct FixedLatencyBackend {
    /// Time each operation takes, ns.
    pub latency_ns: Time,
}

/// The flow of a [`FixedLatencyBackend`]: completes operations in submission order, each `latency_ns` after the
/// previous one ends (one at a time, like a device with one tag).
pub struct FixedLatencyFlow {
    latency: Duration,
    queue: std::collections::VecDeque<(u64, u64)>,
    busy_until: Option<Instant>,
}

impl IoBackend for FixedLatencyBackend {
    type Flow = FixedLatencyFlow;
    fn open_flow(&self, _spec: &FlowSpec) -> Result<FixedLatencyFlow, RealError> {
        Ok(FixedLatencyFlow {
            latency: Duration::from_nanos(self.latency_ns),
            queue: Default::default(),
            busy_until: None,
        })
    }
    fn name(&self) -> &'static str {
        "fixed"
    }
}

impl FlowIo for FixedLatencyFlow {
    fn submit(&mut self, tag: u64, op: &Op) {
        let bytes = match op {
            Op::Read { len, .. } | Op::Write { len, .. } => *len,
            _ => 0,
        };
        if self.queue.is_empty() {
            self.busy_until = Some(Instant::now() + self.latency);
        }
        self.queue.push_back((tag, bytes));
    }
    fn invalidate(&mut self, _file: FileId) {}
    fn wait(&mut self, deadline: Instant) -> Option<Completion> {
        let due = self.busy_until?;
        if due > deadline {
            let now = Instant::now();
            if deadline > now {
                std::thread::sleep(deadline - now);
            }
            return None;
        }
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let (tag, bytes) = self.queue.pop_front()?;
        self.busy_until = (!self.queue.is_empty()).then(|| Instant::now() + self.latency);
        Some(Completion { tag, result: Ok(bytes) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bfq_sched::SEC;
    use bfq_workload::fio::{JobConfig, Limit, Pattern};
    use bfq_workload::readers::Reader;
    use bfq_workload::rng::stream;

    /// Sleeps 20 ms, reads twice at once, then exits.
    struct Sleeper {
        phase: u32,
        woke_at: Time,
    }
    impl Process for Sleeper {
        fn flow(&self) -> FlowSpec {
            FlowSpec::named("sleeper")
        }
        fn on_event(&mut self, event: Event, now: Time, out: &mut Actions) {
            match (self.phase, event) {
                (0, Event::Start) => {
                    self.phase = 1;
                    out.sleep_until = Some(now + 20_000_000);
                }
                (1, Event::Woke) => {
                    self.phase = 2;
                    self.woke_at = now;
                    for tag in [1, 2] {
                        out.issue(
                            tag,
                            Op::Read {
                                file: 0,
                                offset: 0,
                                len: 100,
                                mode: bfq_workload::IoMode::Buffered,
                                meta: false,
                            },
                        );
                    }
                }
                (2, Event::Completed { tag: 1, .. }) => self.phase = 3,
                (3, Event::Completed { tag: 2, .. }) => out.exit = true,
                _ => panic!("unexpected event in phase {}", self.phase),
            }
        }
        fn report(&self) -> ProcessReport {
            ProcessReport {
                ops: u64::from(self.phase),
                startup_ns: Some(self.woke_at),
                ..Default::default()
            }
        }
    }

    #[test]
    fn sleeps_completions_and_exit_follow_the_protocol() {
        let mut r = Runner::new(FixedLatencyBackend { latency_ns: 5_000_000 });
        let id = r
            .spawn(10_000_000, Box::new(Sleeper { phase: 0, woke_at: 0 }))
            .expect("spawns");
        let exit = r.wait_exit(id, 5 * SEC).expect("exits");
        // Start at >= 10 ms, sleep 20 ms, two 5 ms reads one after the other.
        assert!(exit >= 40_000_000, "exit at {exit}");
        assert!(exit < 500_000_000, "exit at {exit}");
        assert_eq!(r.bytes(), (200, 0));
        let out = r.finish();
        assert_eq!(out[0].exited_at, Some(exit));
        assert!(out[0].report.startup_ns.expect("woke") >= 30_000_000);
    }

    #[test]
    fn greedy_processes_stop_when_the_run_ends() {
        let mut r = Runner::new(FixedLatencyBackend { latency_ns: 100_000 });
        for i in 0..3 {
            let name = format!("r{i}");
            let mut cfg = JobConfig::new(name.clone(), 0, 1 << 20, Pattern::Sequential);
            cfg.limit = Limit::Forever;
            r.spawn(0, Box::new(Reader::new(cfg, stream(1, &name))))
                .expect("spawns");
        }
        let id = r.spawn(0, Box::new(Sleeper { phase: 0, woke_at: 0 })).expect("spawns");
        assert!(r.wait_exit(id, 10 * SEC).is_some());
        r.sleep_until(100_000_000);
        let (read, _) = r.bytes();
        let out = r.finish();
        assert_eq!(out.len(), 4);
        assert!(out[..3]
            .iter()
            .all(|o| o.exited_at.is_none() && o.report.read_bytes > 0));
        // At 100 µs per 4 KiB read, each reader did hundreds of reads in 100 ms.
        assert!(read > 3 * 100 * 4096, "{read} bytes");
    }
}
