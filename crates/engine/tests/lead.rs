//! The concurrency rules of leader/followers ([`EngineConfig::lead`]): a client that waits runs the engine loop
//! when nobody else does, and the reactor thread serves the engine whenever no client does. No request is lost
//! while a client leads (a request sent while the leader sleeps in the kernel wakes it), timers fire with no
//! client waiting, and shutdown drains with clients blocked, leading or following.
//!
//! Hangs are what these rules prevent, so each scenario runs on its own thread under a watchdog: a scenario that
//! does not finish within `WATCHDOG` fails the test instead of hanging it (the bound is far above the scenarios'
//! milliseconds of work; it is a failure detector, not a timing assertion).

mod common;

use bfq_engine::{AlignedBuf, Engine, EngineConfig, EngineError, EngineStats, FlowOptions};
use bfq_sched::{Decision, FlowId, FlowInfo, Request, Scheduler, Time, MS};
use common::*;
use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

const WATCHDOG: Duration = Duration::from_secs(60);

/// Runs `f` on a thread and fails if it does not finish within [`WATCHDOG`] (a lost wake-up would hang it).
fn within_watchdog<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(WATCHDOG) {
        Ok(()) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: not finished after {WATCHDOG:?} (lost wake-up?)"),
    }
}

fn lead_cfg() -> EngineConfig {
    EngineConfig {
        lead: true,
        ..EngineConfig::default()
    }
}

/// FIFO policy that holds the requests of one flow (`held`) until `threshold` requests of other flows have
/// completed, asking for a timer an hour away meanwhile (so the engine does not take the hold for a stall, and
/// only a wake-up by the engine, not the timer, can end the hold within the watchdog).
struct Gate {
    held: FlowId,
    threshold: u64,
    others_done: u64,
    held_q: VecDeque<Request>,
    q: VecDeque<Request>,
}

impl Scheduler for Gate {
    fn name(&self) -> &'static str {
        "gate"
    }
    fn flow_started(&mut self, _: &FlowInfo, _: Time) {}
    fn flow_exited(&mut self, _: FlowId, _: Time) {}
    fn insert(&mut self, rq: Request, _: Time) {
        if rq.flow == self.held {
            self.held_q.push_back(rq);
        } else {
            self.q.push_back(rq);
        }
    }
    fn dispatch(&mut self, now: Time) -> Decision {
        if let Some(rq) = self.q.pop_front() {
            return Decision::Dispatch(rq);
        }
        if self.held_q.is_empty() {
            return Decision::Nothing;
        }
        if self.others_done >= self.threshold {
            return self.held_q.pop_front().map_or(Decision::Nothing, Decision::Dispatch);
        }
        Decision::WaitUntil(now + 3_600_000 * MS)
    }
    fn completed(&mut self, rq: &Request, _: Time) {
        if rq.flow != self.held {
            self.others_done += 1;
        }
    }
    fn queued(&self) -> usize {
        self.q.len() + self.held_q.len()
    }
}

/// A reads one block that the policy releases only after B's 64 reads have completed. A is alone when it starts
/// waiting, so it usually leads and sleeps in the kernel on the gate's timer; B's requests are sent meanwhile.
/// If a request sent while the leader sleeps did not wake it, B's reads would never be issued, the gate would
/// never open and the round would hang. Both modes run the same rounds; only `lead` may lead.
#[test]
fn requests_sent_while_a_leader_sleeps_are_served() {
    let dir = TempDir::new("lead-gate");
    let path = dir.path().join("data");
    pattern_file(&path, 4 << 20);
    for lead in [false, true] {
        let path = path.clone();
        let totals = within_watchdog("gate rounds", move || {
            let mut totals = EngineStats::default();
            for round in 0..10u64 {
                // Flow ids are given in creation order from 1: A is the first flow.
                let gate = Gate {
                    held: FlowId(1),
                    threshold: 64,
                    others_done: 0,
                    held_q: VecDeque::new(),
                    q: VecDeque::new(),
                };
                let engine = Engine::start(
                    Box::new(gate),
                    EngineConfig {
                        lead,
                        ..EngineConfig::default()
                    },
                )
                .unwrap();
                let file = engine.open(&path, false).unwrap();
                let a = engine.flow(FlowOptions::named("a")).unwrap();
                assert_eq!(a.id(), FlowId(1));
                let b = engine.flow(FlowOptions::named("b")).unwrap();
                let a_off = (round % 16) * 4096;
                let reader = std::thread::spawn(move || {
                    let mut buf = AlignedBuf::new(4096);
                    let n = a.read(file, a_off, &mut buf).unwrap();
                    assert!(check_pattern(buf.as_slice(), a_off));
                    n
                });
                for i in 0..64u64 {
                    let off = (1 << 20) + i * 4096;
                    b.submit_read(file, off, AlignedBuf::new(4096), off).unwrap();
                }
                for _ in 0..64 {
                    let c = b.wait().unwrap();
                    assert_eq!(c.result.unwrap(), 4096);
                    assert!(check_pattern(c.buf.as_slice(), c.tag));
                }
                assert_eq!(reader.join().unwrap(), 4096);
                drop(b);
                let s = engine.shutdown().unwrap();
                assert_eq!((s.completed, s.errors), (65, 0));
                totals.client_leads += s.client_leads;
                totals.inline_serves += s.inline_serves;
                totals.leader_sleeps += s.leader_sleeps;
            }
            totals
        });
        if lead {
            // Ten rounds of two clients that mostly find the loop free: some calls must have run it.
            assert!(totals.client_leads + totals.inline_serves > 0, "{totals:?}");
        } else {
            // Without `lead` only the reactor thread runs the loop.
            assert_eq!(
                (totals.client_leads, totals.inline_serves, totals.leader_sleeps),
                (0, 0, 0)
            );
        }
    }
}

/// Requests held for an idle timer (armed by whichever thread ran the loop when they arrived, possibly the
/// submitting client) complete although no client waits or polls: the client only watches the engine's published
/// counters, so the reactor thread must serve the timers and the completions.
#[test]
fn timers_fire_and_requests_complete_with_no_client_waiting() {
    let dir = TempDir::new("lead-timer");
    let path = dir.path().join("data");
    pattern_file(&path, 1 << 20);
    let stats = within_watchdog("timer without waiters", move || {
        let engine = Engine::start(Box::new(Delayer::new(2 * MS)), lead_cfg()).unwrap();
        let file = engine.open(&path, false).unwrap();
        let flow = engine.flow(FlowOptions::named("poller")).unwrap();
        for i in 0..16u64 {
            flow.submit_read(file, i * 4096, AlignedBuf::new(4096), i * 4096)
                .unwrap();
        }
        // The reactor publishes its counters whenever it goes to sleep.
        while engine.stats().completed < 16 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let before = engine.stats();
        for _ in 0..16 {
            let c = flow.try_wait().expect("all 16 completed");
            assert_eq!(c.result.unwrap(), 4096);
            assert!(check_pattern(c.buf.as_slice(), c.tag));
        }
        assert_eq!(before.client_leads, 0, "no client waited: {before:?}");
        drop(flow);
        engine.shutdown().unwrap()
    });
    assert_eq!((stats.completed, stats.errors), (16, 0));
    // Each request was held for a timer: at least one fired, and no client ran the loop to wait.
    assert!(stats.timers_fired >= 1, "{stats:?}");
}

/// A client that never waits but polls `try_wait` makes progress by itself with `lead`: each poll that finds
/// nothing runs a pass when the loop is free. All 256 reads complete with their data, and polls ran passes.
#[test]
fn a_polling_client_runs_the_loop_itself() {
    let dir = TempDir::new("lead-poll");
    let path = dir.path().join("data");
    pattern_file(&path, 1 << 20);
    let stats = within_watchdog("polling client", move || {
        let engine = Engine::start_named::<&str>("noop", &[], lead_cfg()).unwrap();
        let file = engine.open(&path, false).unwrap();
        let flow = engine.flow(FlowOptions::named("poller")).unwrap();
        let mut next = 0u64;
        for _ in 0..8 {
            flow.submit_read(file, next * 4096, AlignedBuf::new(4096), next * 4096)
                .unwrap();
            next += 1;
        }
        let mut got = 0;
        while got < 256 {
            match flow.try_wait() {
                Some(c) => {
                    assert_eq!(c.result.unwrap(), 4096);
                    assert!(check_pattern(c.buf.as_slice(), c.tag));
                    got += 1;
                    if next < 256 {
                        let off = next % 256 * 4096;
                        flow.submit_read(file, off, c.buf, off).unwrap();
                        next += 1;
                    }
                }
                None => std::thread::yield_now(),
            }
        }
        drop(flow);
        engine.shutdown().unwrap()
    });
    assert_eq!((stats.completed, stats.errors), (256, 0));
    // The only client submits and polls all the time: some of those calls found the loop free and ran a pass.
    assert!(stats.inline_serves > 0, "{stats:?}");
}

/// Four clients blocked in reads (one of them usually leading, the others waiting for it or for the reactor) and
/// a shutdown from another thread: every accepted read completes with its data, a client's reads after its first
/// `ShutDown` all fail the same way, and nothing hangs.
#[test]
fn shutdown_with_clients_leading_and_following_drains_them() {
    let dir = TempDir::new("lead-shutdown");
    let path = dir.path().join("data");
    pattern_file(&path, 4 << 20);
    let (stats, outcomes) = within_watchdog("shutdown with waiters", move || {
        let engine = Engine::start(Box::new(Delayer::new(3 * MS)), lead_cfg()).unwrap();
        let file = engine.open(&path, false).unwrap();
        let started = Arc::new(Mutex::new(0u32));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let flow = engine.flow(FlowOptions::named(format!("c{t}"))).unwrap();
                let started = Arc::clone(&started);
                std::thread::spawn(move || {
                    let mut out = Vec::new();
                    let mut buf = AlignedBuf::new(4096);
                    for i in 0..50u64 {
                        let off = t * (1 << 20) + i * 4096;
                        if i == 1 {
                            *started.lock().unwrap() += 1;
                        }
                        out.push(match flow.read(file, off, &mut buf) {
                            Ok(n) => {
                                assert!(check_pattern(buf.as_slice(), off));
                                Ok(n)
                            }
                            Err(e) => Err(e),
                        });
                    }
                    out
                })
            })
            .collect();
        // Shut down once every client has completed a read and is issuing the next ones.
        while *started.lock().unwrap() < 4 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let stats = engine.shutdown().unwrap();
        let outcomes: Vec<Vec<Result<usize, EngineError>>> = threads.into_iter().map(|h| h.join().unwrap()).collect();
        (stats, outcomes)
    });
    let mut ok = 0;
    for out in &outcomes {
        let first_err = out.iter().position(|r| r.is_err()).unwrap_or(out.len());
        assert!(
            first_err >= 1,
            "every client completed its first read before the shutdown"
        );
        for r in &out[..first_err] {
            assert_eq!(r.as_ref().unwrap(), &4096);
        }
        for r in &out[first_err..] {
            assert!(matches!(r, Err(EngineError::ShutDown)), "{r:?}");
        }
        ok += first_err as u64;
    }
    // What the engine accepted is exactly what completed, without errors.
    assert_eq!(stats.submitted, ok);
    assert_eq!((stats.completed, stats.errors), (ok, 0));
}
