//! Reads, writes, flows, policies, the tag limit and idle timers on small temporary files.

mod common;

use bfq_engine::{AlignedBuf, Engine, EngineConfig, EngineError, FlowOptions};
use bfq_sched::wrap::{Hooks, Wrapped};
use bfq_sched::{Decision, DeviceInfo, Direction, FlowId, FlowInfo, IoClass, Request, Scheduler, Time, MS};
use common::*;
use std::sync::{Arc, Mutex};

/// The test configuration, with or without leader/followers ([`EngineConfig::lead`]): every test runs in both.
fn cfg(lead: bool) -> EngineConfig {
    EngineConfig {
        lead,
        device: DeviceInfo::ssd(),
        ..EngineConfig::default()
    }
}

#[test]
fn blocking_and_async_reads_return_the_file_contents_under_every_policy() {
    for lead in [false, true] {
        blocking_and_async_reads_return_the_file_contents_under_every_policy_in(lead);
    }
}

fn blocking_and_async_reads_return_the_file_contents_under_every_policy_in(lead: bool) {
    let dir = TempDir::new("policies");
    let path = dir.path().join("data");
    pattern_file(&path, 4 << 20);
    for desc in bfq_sched::policies() {
        let engine = Arc::new(Engine::start_named::<&str>(desc.name, &[], cfg(lead)).unwrap());
        let file = engine.open(&path, false).unwrap();
        assert_eq!(file.size_bytes(), 4 << 20);
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let engine = Arc::clone(&engine);
                std::thread::spawn(move || {
                    let flow = engine.flow(FlowOptions::named(format!("t{t}"))).unwrap();
                    // Blocking reads, sequential within the thread's quarter.
                    let mut buf = AlignedBuf::new(16 << 10);
                    for i in 0..16u64 {
                        let off = t * (1 << 20) + i * (16 << 10);
                        assert_eq!(flow.read(file, off, &mut buf).unwrap(), 16 << 10);
                        assert!(check_pattern(buf.as_slice(), off), "{} data at {off}", flow.name());
                    }
                    // Asynchronous reads, 8 in flight, contiguous (so merge-capable policies merge some).
                    for i in 0..8u64 {
                        let off = t * (1 << 20) + i * 4096;
                        flow.submit_read(file, off, AlignedBuf::new(4096), off).unwrap();
                    }
                    for _ in 0..8 {
                        let c = flow.wait().unwrap();
                        assert_eq!(c.result.unwrap(), 4096);
                        assert!(check_pattern(c.buf.as_slice(), c.tag));
                    }
                    assert!(matches!(flow.wait(), Err(EngineError::NothingInFlight)));
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let engine = Arc::try_unwrap(engine).unwrap();
        let stats = engine.shutdown().unwrap();
        assert_eq!(stats.submitted, 4 * 24, "{}", desc.name);
        assert_eq!(stats.completed, stats.submitted, "{}", desc.name);
        assert_eq!(stats.errors, 0, "{}", desc.name);
        assert!(stats.max_in_flight <= 32);
        assert!(stats.dispatched <= stats.submitted);
    }
}

#[test]
fn writes_then_reads_round_trip_with_merging() {
    for lead in [false, true] {
        writes_then_reads_round_trip_with_merging_in(lead);
    }
}

fn writes_then_reads_round_trip_with_merging_in(lead: bool) {
    let dir = TempDir::new("write");
    let path = dir.path().join("data");
    pattern_file(&path, 1 << 20);
    // One tag: contiguous writes queue behind each other and noop merges them into vectored requests.
    let engine = Engine::start_named::<&str>(
        "noop",
        &[],
        EngineConfig {
            tag_limit: 1,
            ..cfg(lead)
        },
    )
    .unwrap();
    let file = engine.open(&path, true).unwrap();
    let flow = engine.flow(FlowOptions::named("w")).unwrap();
    for i in 0..64u64 {
        let mut b = AlignedBuf::new(4096);
        b.as_mut_slice().fill(i as u8 + 1);
        flow.submit_write(file, i * 4096, b, i).unwrap();
    }
    for _ in 0..64 {
        assert_eq!(flow.wait().unwrap().result.unwrap(), 4096);
    }
    flow.fsync(file).unwrap();
    let mut big = AlignedBuf::new(64 * 4096);
    assert_eq!(flow.read(file, 0, &mut big).unwrap(), 64 * 4096);
    for i in 0..64usize {
        assert!(
            big.as_slice()[i * 4096..(i + 1) * 4096]
                .iter()
                .all(|&b| b == i as u8 + 1),
            "block {i}"
        );
    }
    drop(flow);
    let stats = engine.shutdown().unwrap();
    assert!(stats.dispatched < stats.submitted, "expected merging: {stats:?}");
    assert_eq!(stats.max_in_flight, 1);
    assert_eq!(stats.bytes_written, 64 * 4096);
    assert_eq!(stats.fsyncs, 1);
}

/// Wraps a policy and records what the engine does with it.
struct Probe {
    inner: Box<dyn Scheduler>,
    log: Arc<Mutex<ProbeLog>>,
}

#[derive(Default)]
struct ProbeLog {
    in_flight: u32,
    max_in_flight: u32,
    started: Vec<FlowInfo>,
    exited: Vec<FlowId>,
    inserted: u64,
    completed: u64,
}

impl Scheduler for Probe {
    fn name(&self) -> &'static str {
        "probe"
    }
    fn flow_started(&mut self, flow: &FlowInfo, now: Time) {
        self.log.lock().unwrap().started.push(flow.clone());
        self.inner.flow_started(flow, now)
    }
    fn flow_exited(&mut self, flow: FlowId, now: Time) {
        self.log.lock().unwrap().exited.push(flow);
        self.inner.flow_exited(flow, now)
    }
    fn insert(&mut self, rq: Request, now: Time) {
        self.log.lock().unwrap().inserted += 1;
        self.inner.insert(rq, now)
    }
    fn dispatch(&mut self, now: Time) -> Decision {
        let d = self.inner.dispatch(now);
        if let Decision::Dispatch(_) = d {
            let mut l = self.log.lock().unwrap();
            l.in_flight += 1;
            l.max_in_flight = l.max_in_flight.max(l.in_flight);
        }
        d
    }
    fn completed(&mut self, rq: &Request, now: Time) {
        let mut l = self.log.lock().unwrap();
        l.in_flight -= 1;
        l.completed += 1;
        drop(l);
        self.inner.completed(rq, now)
    }
    fn queued(&self) -> usize {
        self.inner.queued()
    }
    fn depth_limit(&self, dir: Direction, sync: bool, nr: u32) -> u32 {
        self.inner.depth_limit(dir, sync, nr)
    }
}

#[test]
fn the_tag_limit_holds_and_flows_reach_the_policy() {
    for lead in [false, true] {
        the_tag_limit_holds_and_flows_reach_the_policy_in(lead);
    }
}

fn the_tag_limit_holds_and_flows_reach_the_policy_in(lead: bool) {
    let dir = TempDir::new("tags");
    let path = dir.path().join("data");
    pattern_file(&path, 2 << 20);
    let log = Arc::new(Mutex::new(ProbeLog::default()));
    let inner = bfq_sched::build::<&str>("bfq", &DeviceInfo::ssd(), &[]).unwrap();
    let engine = Engine::start(
        Box::new(Probe {
            inner,
            log: Arc::clone(&log),
        }),
        EngineConfig {
            tag_limit: 3,
            ..cfg(lead)
        },
    )
    .unwrap();
    let file = engine.open(&path, false).unwrap();
    let flow = engine
        .flow(FlowOptions::named("rt").class(IoClass::Rt, 2).weight(500).group(0))
        .unwrap();
    for i in 0..100u64 {
        // Random-ish, non-contiguous offsets.
        let off = (i * 7919 % 500) * 4096;
        flow.submit_read(file, off, AlignedBuf::new(4096), off).unwrap();
    }
    for _ in 0..100 {
        let c = flow.wait().unwrap();
        c.result.unwrap();
        assert!(check_pattern(c.buf.as_slice(), c.tag));
    }
    let id = flow.id();
    drop(flow);
    let stats = engine.shutdown().unwrap();
    let l = log.lock().unwrap();
    assert!(
        l.max_in_flight <= 3 && l.max_in_flight >= 2,
        "max in flight {}",
        l.max_in_flight
    );
    assert_eq!(stats.max_in_flight, l.max_in_flight);
    assert_eq!(l.inserted, 100);
    assert_eq!(l.started.len(), 1);
    assert_eq!(l.started[0].id, id);
    assert_eq!(l.started[0].class, IoClass::Rt);
    assert_eq!(l.started[0].prio, 2);
    assert_eq!(l.started[0].weight, Some(500));
    assert_eq!(l.exited, vec![id]);
}

#[test]
fn wait_until_is_served_by_an_io_uring_timer() {
    for lead in [false, true] {
        wait_until_is_served_by_an_io_uring_timer_in(lead);
    }
}

fn wait_until_is_served_by_an_io_uring_timer_in(lead: bool) {
    let dir = TempDir::new("timer");
    let path = dir.path().join("data");
    pattern_file(&path, 1 << 20);
    let engine = Engine::start(Box::new(Delayer::new(20 * MS)), cfg(lead)).unwrap();
    let file = engine.open(&path, false).unwrap();
    let flow = engine.flow(FlowOptions::named("r")).unwrap();
    let mut buf = AlignedBuf::new(4096);
    for i in 0..3u64 {
        let t0 = std::time::Instant::now();
        flow.read(file, i * 4096, &mut buf).unwrap();
        let waited = t0.elapsed();
        assert!(
            waited >= std::time::Duration::from_millis(20),
            "served after {waited:?}"
        );
        assert!(
            waited < std::time::Duration::from_millis(1000),
            "served after {waited:?}"
        );
    }
    drop(flow);
    let stats = engine.shutdown().unwrap();
    assert!(stats.timers_armed >= 3 && stats.timers_fired >= 3, "{stats:?}");
}

/// Lets at most `limit` writes hold scheduler tags, and records the most it ever held.
struct WriteLimiter {
    limit: u32,
    writes_held: Arc<Mutex<(u32, u32)>>,
}

impl Hooks for WriteLimiter {
    fn name(&self) -> &'static str {
        "write-limiter"
    }
    fn on_insert(&mut self, rq: &Request, _: Time) {
        if rq.dir == Direction::Write {
            let mut h = self.writes_held.lock().unwrap();
            h.0 += 1;
            h.1 = h.1.max(h.0);
        }
    }
    fn on_completed(&mut self, rq: &Request, _: Time) {
        if rq.dir == Direction::Write {
            self.writes_held.lock().unwrap().0 -= rq.parts() as u32;
        }
    }
    fn depth_limit(&self, dir: Direction, _sync: bool, nr: u32, _inner: u32) -> u32 {
        match dir {
            Direction::Write => self.limit,
            Direction::Read => nr,
        }
    }
}

#[test]
fn the_policy_depth_limit_bounds_inserted_writes() {
    for lead in [false, true] {
        the_policy_depth_limit_bounds_inserted_writes_in(lead);
    }
}

fn the_policy_depth_limit_bounds_inserted_writes_in(lead: bool) {
    let dir = TempDir::new("depth");
    let path = dir.path().join("data");
    pattern_file(&path, 1 << 20);
    let held = Arc::new(Mutex::new((0, 0)));
    let inner = bfq_sched::build::<&str>("noop", &DeviceInfo::ssd(), &[]).unwrap();
    let engine = Engine::start(
        Box::new(Wrapped::new(
            inner,
            WriteLimiter {
                limit: 2,
                writes_held: Arc::clone(&held),
            },
        )),
        cfg(lead),
    )
    .unwrap();
    let file = engine.open(&path, true).unwrap();
    let w = engine.flow(FlowOptions::named("w")).unwrap();
    let r = engine.flow(FlowOptions::named("r")).unwrap();
    for i in 0..40u64 {
        // Far apart, so that nothing merges.
        w.submit_write(file, i * 8192, AlignedBuf::new(4096), i).unwrap();
        r.submit_read(file, i * 8192 + 4096, AlignedBuf::new(4096), i).unwrap();
    }
    for _ in 0..40 {
        w.wait().unwrap().result.unwrap();
        r.wait().unwrap().result.unwrap();
    }
    drop((w, r));
    engine.shutdown().unwrap();
    let (now_held, max_held) = *held.lock().unwrap();
    assert_eq!(now_held, 0);
    assert!((1..=2).contains(&max_held), "writes held at once: {max_held}");
}

/// Records the direction and sync flag of every inserted request.
struct SyncRecorder {
    seen: Arc<Mutex<Vec<(Direction, bool)>>>,
}

impl Hooks for SyncRecorder {
    fn name(&self) -> &'static str {
        "sync-recorder"
    }
    fn on_insert(&mut self, rq: &Request, _: Time) {
        self.seen.lock().unwrap().push((rq.dir, rq.sync));
    }
}

#[test]
fn async_writes_reach_the_policy_as_async_and_everything_else_as_sync() {
    for lead in [false, true] {
        async_writes_reach_the_policy_as_async_and_everything_else_as_sync_in(lead);
    }
}

fn async_writes_reach_the_policy_as_async_and_everything_else_as_sync_in(lead: bool) {
    let dir = TempDir::new("asyncw");
    let path = dir.path().join("data");
    pattern_file(&path, 1 << 20);
    for policy in ["bfq", "cfq", "mq-deadline"] {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let inner = bfq_sched::build::<&str>(policy, &DeviceInfo::ssd(), &[]).unwrap();
        let hooks = SyncRecorder {
            seen: Arc::clone(&seen),
        };
        let engine = Engine::start(Box::new(Wrapped::new(inner, hooks)), cfg(lead)).unwrap();
        let file = engine.open(&path, true).unwrap();
        let flow = engine.flow(FlowOptions::named("w")).unwrap();
        for i in 0..8u64 {
            // Far apart, so that nothing merges: one request per submission.
            flow.submit_write_async(file, i * 65536, AlignedBuf::new(4096), i)
                .unwrap();
            flow.submit_write(file, i * 65536 + 16384, AlignedBuf::new(4096), 100 + i)
                .unwrap();
            flow.submit_read(file, i * 65536 + 32768, AlignedBuf::new(4096), 200 + i)
                .unwrap();
        }
        for _ in 0..24 {
            assert_eq!(flow.wait().unwrap().result.unwrap(), 4096, "{policy}");
        }
        drop(flow);
        let stats = engine.shutdown().unwrap();
        assert_eq!((stats.completed, stats.errors), (24, 0), "{policy}");
        let seen = seen.lock().unwrap();
        let count = |d: Direction, s: bool| seen.iter().filter(|&&x| x == (d, s)).count();
        assert_eq!(count(Direction::Write, false), 8, "{policy}: async writes");
        assert_eq!(count(Direction::Write, true), 8, "{policy}: sync writes");
        assert_eq!(count(Direction::Read, true), 8, "{policy}: reads");
    }
}

#[test]
fn files_get_disjoint_sector_ranges_and_reopening_keeps_the_base() {
    for lead in [false, true] {
        files_get_disjoint_sector_ranges_and_reopening_keeps_the_base_in(lead);
    }
}

fn files_get_disjoint_sector_ranges_and_reopening_keeps_the_base_in(lead: bool) {
    let dir = TempDir::new("bases");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    pattern_file(&a, 1 << 20);
    pattern_file(&b, 1 << 20);
    let engine = Engine::start_named::<&str>("noop", &[], cfg(lead)).unwrap();
    let fa = engine.open(&a, false).unwrap();
    let fb = engine.open(&b, false).unwrap();
    let fa2 = engine.open(&a, true).unwrap();
    assert_eq!(fa.sector_base(), 0);
    assert!(fb.sector_base() >= (1 << 20) / 512, "b starts after a");
    assert_eq!(fa2.sector_base(), fa.sector_base());
    assert!(fa2.writable() && !fa.writable());
    // Requests on two files at the same offsets are never merged into one I/O: each reads its own file.
    let flow = engine.flow(FlowOptions::named("r")).unwrap();
    for (i, f) in [fa, fb, fa2].into_iter().enumerate() {
        flow.submit_read(f, 8192, AlignedBuf::new(4096), i as u64).unwrap();
    }
    for _ in 0..3 {
        let c = flow.wait().unwrap();
        c.result.unwrap();
        assert!(check_pattern(c.buf.as_slice(), 8192));
    }
}

#[test]
fn dropping_a_flow_with_requests_outstanding_neither_hangs_nor_leaks_into_other_flows() {
    for lead in [false, true] {
        dropping_a_flow_with_requests_outstanding_neither_hangs_nor_leaks_into_other_flows_in(lead);
    }
}

fn dropping_a_flow_with_requests_outstanding_neither_hangs_nor_leaks_into_other_flows_in(lead: bool) {
    let dir = TempDir::new("dropflow");
    let path = dir.path().join("data");
    pattern_file(&path, 1 << 20);
    let engine = Engine::start_named::<&str>("bfq", &[], cfg(lead)).unwrap();
    let file = engine.open(&path, false).unwrap();
    let gone = engine.flow(FlowOptions::named("gone")).unwrap();
    for i in 0..32u64 {
        gone.submit_read(file, i * 4096, AlignedBuf::new(4096), i).unwrap();
    }
    drop(gone);
    let stay = engine.flow(FlowOptions::named("stay")).unwrap();
    let mut buf = AlignedBuf::new(4096);
    assert_eq!(stay.read(file, 0, &mut buf).unwrap(), 4096);
    assert!(matches!(stay.wait(), Err(EngineError::NothingInFlight)));
    drop(stay);
    let stats = engine.shutdown().unwrap();
    assert_eq!(stats.completed, 33);
}
