//! Scenario tests: CFQ driven by a tiny closed-loop simulator (readers that issue their next request when the
//! previous one completes, and a device that serves one request at a time with a service time chosen per test).

use super::*;
use crate::types::{Direction, GroupId, MS, SEC};

/// Service time of a request (ns).
pub(super) type ServiceFn = fn(&Request) -> Time;

/// 1 ms per request anywhere.
pub(super) fn flat_1ms(_: &Request) -> Time {
    MS
}

/// First sector of the "inner" zone of the test disk.
const INNER_ZONE: u64 = 1_000_000_000;

/// A zoned disk: a request in the outer zone takes 1 ms, the same request in the inner zone 2 ms (outer tracks
/// hold twice the sectors per revolution).
fn zoned(rq: &Request) -> Time {
    if rq.sector < INNER_ZONE {
        MS
    } else {
        2 * MS
    }
}

/// A process reading (or writing) sequentially, keeping up to `depth` requests outstanding.
#[derive(Clone)]
pub(super) struct Reader {
    pub(super) flow: FlowId,
    pub(super) next: u64,
    pub(super) sectors: u32,
    /// Distance between the starts of consecutive requests (sectors).
    pub(super) stride: u64,
    pub(super) depth: u32,
    pub(super) sync: bool,
    pub(super) start: Time,
    /// Stops issuing after this time.
    pub(super) stop: Time,
    /// Stops after this many requests.
    pub(super) max_requests: u64,
    pub(super) outstanding: u32,
    pub(super) issued: u64,
}

impl Reader {
    pub(super) fn new(flow: u32, sector: u64) -> Self {
        Reader {
            flow: FlowId(flow),
            next: sector,
            sectors: 256,
            stride: 256,
            depth: 1,
            sync: true,
            start: 0,
            stop: Time::MAX,
            max_requests: u64::MAX,
            outstanding: 0,
            issued: 0,
        }
    }
}

/// One dispatch seen by the device.
#[derive(Debug, Clone)]
pub(super) struct Served {
    pub(super) flow: FlowId,
    pub(super) dispatched: Time,
    pub(super) completed: Time,
    /// Device time spent on it (ns).
    pub(super) service: Time,
    pub(super) sectors: u64,
}

pub(super) struct Sim {
    pub(super) cfq: Cfq,
    pub(super) now: Time,
    pub(super) tags: usize,
    pub(super) service: ServiceFn,
    pub(super) readers: Vec<Reader>,
    /// Requests on the device: (completion time, request), served one at a time in dispatch order.
    pub(super) device: Vec<(Time, Request)>,
    pub(super) wakeup: Option<Time>,
    pub(super) log: Vec<Served>,
    pub(super) waits: u64,
    pub(super) next_id: u64,
}

impl Sim {
    pub(super) fn new(
        dev: &DeviceInfo,
        tunables: &[&str],
        tags: usize,
        service: ServiceFn,
        readers: Vec<Reader>,
    ) -> Self {
        let values = TunableValues::parse("cfq", &TUNABLES, dev, tunables).unwrap();
        Sim {
            cfq: Cfq::new(dev, Params::from_values(&values)),
            now: 0,
            tags,
            service,
            readers,
            device: Vec::new(),
            wakeup: None,
            log: Vec::new(),
            waits: 0,
            next_id: 0,
        }
    }

    pub(super) fn start_flow(&mut self, info: FlowInfo) {
        self.cfq.flow_started(&info, self.now);
    }

    fn issue_due(&mut self) {
        for i in 0..self.readers.len() {
            loop {
                let r = &self.readers[i];
                if r.outstanding >= r.depth || self.now < r.start || self.now >= r.stop || r.issued >= r.max_requests {
                    break;
                }
                let r = &mut self.readers[i];
                let dir = if r.sync { Direction::Read } else { Direction::Write };
                let rq = Request::new(RequestId(self.next_id), r.flow, dir, r.sync, r.next, r.sectors);
                self.next_id += 1;
                r.next += r.stride;
                r.outstanding += 1;
                r.issued += 1;
                self.cfq.insert(rq, self.now);
                self.pump();
            }
        }
    }

    fn pump(&mut self) {
        self.wakeup = None;
        while self.device.len() < self.tags {
            match self.cfq.dispatch(self.now) {
                Decision::Dispatch(rq) => {
                    let begin = self.device.last().map_or(self.now, |&(t, _)| t.max(self.now));
                    let service = (self.service)(&rq);
                    let done = begin + service;
                    self.log.push(Served {
                        flow: rq.flow,
                        dispatched: self.now,
                        completed: done,
                        service,
                        sectors: u64::from(rq.sectors),
                    });
                    self.device.push((done, rq));
                }
                Decision::WaitUntil(t) => {
                    assert!(t > self.now && t - self.now <= SEC);
                    self.waits += 1;
                    self.wakeup = Some(t);
                    break;
                }
                Decision::Nothing => break,
            }
        }
    }

    pub(super) fn run(&mut self, end: Time) {
        self.issue_due();
        self.pump();
        loop {
            let mut next = self.device.first().map(|&(t, _)| t);
            if let Some(w) = self.wakeup {
                next = Some(next.map_or(w, |n| n.min(w)));
            }
            for r in &self.readers {
                if r.outstanding < r.depth && r.start > self.now && r.issued < r.max_requests {
                    next = Some(next.map_or(r.start, |n| n.min(r.start)));
                }
            }
            let Some(t) = next else { break };
            if t > end {
                break;
            }
            self.now = t;
            while self.device.first().is_some_and(|&(d, _)| d <= self.now) {
                let (_, rq) = self.device.remove(0);
                self.cfq.completed(&rq, self.now);
                self.pump();
                if let Some(r) = self.readers.iter_mut().find(|r| r.flow == rq.flow) {
                    r.outstanding -= 1;
                }
                self.issue_due();
            }
            self.issue_due();
            self.pump();
        }
        assert_eq!(self.cfq.forced, 0, "the liveness guard had to step in");
    }

    pub(super) fn first_dispatch(&self, flow: u32) -> Option<Time> {
        self.log.iter().find(|s| s.flow == FlowId(flow)).map(|s| s.dispatched)
    }

    fn last_completion(&self, flow: u32) -> Option<Time> {
        self.log
            .iter()
            .filter(|s| s.flow == FlowId(flow))
            .map(|s| s.completed)
            .max()
    }

    /// Device time and sectors of `flow` among requests completed by `end`.
    pub(super) fn usage(&self, flow: u32, end: Time) -> (Time, u64) {
        self.log
            .iter()
            .filter(|s| s.flow == FlowId(flow) && s.completed <= end)
            .fold((0, 0), |(t, n), s| (t + s.service, n + s.sectors))
    }

    /// Runs of consecutive dispatches of one flow: (flow, first dispatch, first dispatch of the next run).
    pub(super) fn runs(&self) -> Vec<(FlowId, Time, Time)> {
        let mut out: Vec<(FlowId, Time, Time)> = Vec::new();
        for s in &self.log {
            match out.last_mut() {
                Some(last) if last.0 == s.flow => {}
                Some(last) => {
                    last.2 = s.dispatched;
                    out.push((s.flow, s.dispatched, s.dispatched));
                }
                None => out.push((s.flow, s.dispatched, s.dispatched)),
            }
        }
        out.pop();
        out
    }
}

/// Two readers interleaving 256-sector chunks of one file (flow 1 from sector 0, flow 2 from 256, each skipping the
/// other's chunks) on a one-tag HDD with 1 ms requests, run for 500 ms: CFQ's cooperating-queue case.
pub(super) fn interleaved_pair_for_500_ms() -> Sim {
    let mut a = Reader::new(1, 0);
    a.stride = 512;
    let mut b = Reader::new(2, 256);
    b.stride = 512;
    let mut sim = Sim::new(&DeviceInfo::hdd(), &[], 1, flat_1ms, vec![a, b]);
    sim.run(500 * MS);
    sim
}

pub(super) fn rq(id: u64, flow: u32, sector: u64, sync: bool) -> Request {
    let dir = if sync { Direction::Read } else { Direction::Write };
    Request::new(RequestId(id), FlowId(flow), dir, sync, sector, 8)
}

pub(super) fn dispatched(c: &mut Cfq, now: Time) -> Option<Request> {
    match c.dispatch(now) {
        Decision::Dispatch(r) => Some(r),
        _ => None,
    }
}

pub(super) fn cfq(dev: &DeviceInfo, tunables: &[&str]) -> Cfq {
    let values = TunableValues::parse("cfq", &TUNABLES, dev, tunables).unwrap();
    Cfq::new(dev, Params::from_values(&values))
}

// Reader 1 is always backlogged (it reissues the moment a request completes) and reader 2 waits from t=0. CFQ
// keeps serving reader 1 for its whole 100 ms slice, which starts at its first completion (1 ms): reader 2 gets
// the disk only at about 101 ms. (Two busy queues: 2*100 ms fits the 300 ms target, so no scaling.)
#[test]
fn sync_queue_gets_its_whole_slice() {
    let mut sim = Sim::new(
        &DeviceInfo::hdd(),
        &[],
        1,
        flat_1ms,
        vec![Reader::new(1, 0), Reader::new(2, 500_000_000)],
    );
    sim.run(150 * MS);
    let b = sim.first_dispatch(2).unwrap();
    assert!((101 * MS..=103 * MS).contains(&b), "reader 2 first served at {b} ns");
    assert!(sim.log.iter().take_while(|s| s.flow == FlowId(1)).count() >= 100);
}

// Reader 1 issues 5 requests and stops. After its last completion its queue is empty; on a rotational disk CFQ
// idles slice_idle = 8 ms for its next request (answering WaitUntil), and only then moves on to reader 2.
#[test]
fn idles_8ms_after_a_sync_queue_empties_on_a_disk() {
    let mut a = Reader::new(1, 0);
    a.max_requests = 5;
    let mut sim = Sim::new(
        &DeviceInfo::hdd(),
        &[],
        1,
        flat_1ms,
        vec![a, Reader::new(2, 500_000_000)],
    );
    sim.run(100 * MS);
    let last_a = sim.last_completion(1).unwrap();
    assert_eq!(last_a, 5 * MS);
    assert_eq!(sim.first_dispatch(2), Some(last_a + 8 * MS));
    assert!(sim.waits > 0);
}

// On a non-rotational device with command queueing, 3.13's `cfq_should_idle` ignores a queue's idle window (no
// seek to save); only the last queue of a service tree is idled for. Reader 2 shares reader 1's tree, so when
// reader 1's queue empties CFQ serves reader 2 right away and never answers WaitUntil, with the 3.13 default
// slice_idle of 8 ms on flash and with group idling off as well.
#[test]
fn no_idling_on_a_non_rotational_ncq_device() {
    for tunables in [&[][..], &["group_idle=0"][..]] {
        let mut a = Reader::new(1, 0);
        a.max_requests = 5;
        let mut sim = Sim::new(
            &DeviceInfo::ssd(),
            tunables,
            32,
            flat_1ms,
            vec![a, Reader::new(2, 500_000_000)],
        );
        sim.run(100 * MS);
        assert_eq!(sim.waits, 0, "idled with {tunables:?}");
        assert!(sim.first_dispatch(2).unwrap() <= sim.last_completion(1).unwrap());
    }
}

// Three always-backlogged readers at priorities 0, 4 and 7. Three queues times 100 ms fit the 300 ms target, so
// slices are unscaled: 180, 100 and 40 ms. Each turn lasts the slice plus the first request (the slice starts at
// the first completion) plus at most one request of overrun.
#[test]
fn slice_lengths_per_priority() {
    let dev = DeviceInfo::hdd();
    let mut sim = Sim::new(
        &dev,
        &[],
        1,
        flat_1ms,
        vec![
            Reader::new(1, 0),
            Reader::new(2, 300_000_000),
            Reader::new(3, 600_000_000),
        ],
    );
    for (f, prio) in [(1, 0), (2, 4), (3, 7)] {
        sim.start_flow(FlowInfo::new(FlowId(f)).with_class(IoClass::Be, prio));
    }
    sim.run(2 * SEC);
    for (f, slice) in [(1, 180 * MS), (2, 100 * MS), (3, 40 * MS)] {
        let turns: Vec<Time> = sim
            .runs()
            .iter()
            .filter(|r| r.0 == FlowId(f))
            .map(|r| r.2 - r.1)
            .collect();
        assert!(turns.len() >= 2, "flow {f}: {turns:?}");
        for t in &turns[1..] {
            assert!(
                (slice + MS..=slice + 3 * MS).contains(t),
                "flow {f}: turn {t} ns, slice {slice}"
            );
        }
    }
}

// Five always-backlogged readers at priority 4 with low_latency: 5 x 100 ms would exceed the 300 ms target, so
// each slice shrinks to 100*300/500 = 60 ms once the busy-queue average has reached 5 (it starts at 4: 75 ms).
// Without low_latency the slices stay 100 ms.
#[test]
fn target_latency_scales_slices() {
    for (tunables, slice) in [(&[][..], 60 * MS), (&["low_latency=0"][..], 100 * MS)] {
        let readers = (0..5).map(|i| Reader::new(i, u64::from(i) * 100_000_000)).collect();
        let mut sim = Sim::new(&DeviceInfo::hdd(), tunables, 1, flat_1ms, readers);
        sim.run(3 * SEC);
        let runs = sim.runs();
        assert!(runs.len() >= 10);
        for r in &runs[6..] {
            let t = r.2 - r.1;
            assert!((slice + MS..=slice + 3 * MS).contains(&t), "{tunables:?}: turn {t}");
        }
    }
}

// An RT request preempts a BE queue in service (same group, RT over non-RT): it is the very next dispatch.
#[test]
fn rt_preempts_be() {
    let mut c = cfq(&DeviceInfo::hdd(), &[]);
    c.flow_started(&FlowInfo::new(FlowId(1)), 0);
    c.flow_started(&FlowInfo::new(FlowId(2)).with_class(IoClass::Rt, 4), 0);
    for i in 0..10 {
        c.insert(rq(i, 1, 1000 + i * 100, true), 0);
    }
    assert_eq!(dispatched(&mut c, 0).unwrap().flow, FlowId(1));
    c.insert(rq(100, 2, 900_000_000, true), MS);
    assert_eq!(dispatched(&mut c, MS).unwrap().flow, FlowId(2));
    // ...but a BE request does not preempt an RT queue.
    c.insert(rq(101, 2, 900_000_008 + 100, true), MS);
    c.insert(rq(102, 3, 5_000_000, true), MS);
    assert_eq!(dispatched(&mut c, MS).unwrap().flow, FlowId(2));
}

// An IDLE-class reader waiting from t=0 gets nothing while a BE reader stays backlogged (two requests
// outstanding on a one-request device, so its queue never empties); it is served only after the BE reader stops
// and CFQ has idled 8 ms for it.
#[test]
fn idle_class_only_when_others_idle() {
    let mut be = Reader::new(1, 0);
    be.depth = 2;
    be.stop = 300 * MS;
    let mut sim = Sim::new(
        &DeviceInfo::hdd(),
        &[],
        1,
        flat_1ms,
        vec![be, Reader::new(2, 500_000_000)],
    );
    sim.start_flow(FlowInfo::new(FlowId(2)).with_class(IoClass::Idle, 7));
    sim.run(500 * MS);
    let last_be = sim.last_completion(1).unwrap();
    assert!(last_be >= 300 * MS);
    assert!(sim.first_dispatch(2).unwrap() >= last_be + 8 * MS);
}

// An async queue waits while a sync request is on the device (slice_idle=0 so the emptied sync queue is not idled
// for); once it completes the async queue dispatches. With low_latency, right after a sync request completed
// later than fifo_expire_sync, async depth is ramped down to 1.
#[test]
fn async_waits_for_sync_in_flight() {
    let mut c = cfq(&DeviceInfo::hdd(), &["slice_idle=0"]);
    c.insert(rq(1, 1, 100, true), 0);
    let s = dispatched(&mut c, 0).unwrap();
    for i in 0..6 {
        c.insert(rq(10 + i, 2, 50_000_000 + i * 1000, false), 0);
    }
    assert_eq!(c.dispatch(0), Decision::Nothing);
    // The sync request took 200 ms: a delayed sync.
    c.completed(&s, 200 * MS);
    assert!(dispatched(&mut c, 200 * MS).is_some());
    assert!(dispatched(&mut c, 200 * MS).is_none(), "async depth ramps from 1");
}

// Two busy sync queues: the active one may have quantum/2 = 4 requests on the device while its slice has not
// started (it might end soon); after the first completion sets a 100 ms slice, up to quantum = 8. A lone queue
// has no limit.
#[test]
fn quantum_limits_dispatch_depth() {
    let mut c = cfq(&DeviceInfo::hdd(), &[]);
    for i in 0..20 {
        c.insert(rq(i, 1, 1000 + i * 100, true), 0);
        c.insert(rq(100 + i, 2, 900_000_000 + i * 100, true), 0);
    }
    let mut on_device = Vec::new();
    while let Some(r) = dispatched(&mut c, 0) {
        on_device.push(r);
    }
    assert_eq!(on_device.len(), 4);
    assert!(on_device.iter().all(|r| r.flow == FlowId(1)));
    c.completed(&on_device.remove(0), MS);
    while let Some(r) = dispatched(&mut c, MS) {
        on_device.push(r);
    }
    assert_eq!(on_device.len(), 8);

    let mut c = cfq(&DeviceInfo::hdd(), &[]);
    for i in 0..20 {
        c.insert(rq(i, 1, 1000 + i * 100, true), 0);
    }
    let n = std::iter::from_fn(|| dispatched(&mut c, 0)).count();
    assert_eq!(n, 20);
}

// The FIFO is consulted once per slot. Flow 2 queues rX (sector 10, t=0), rY (2e6, t=1 ms), rZ (50.1e6, t=2 ms)
// while flow 1 holds the disk at sector 50e6. When flow 2's slot starts at 208 ms all three are past the 125 ms
// sync deadline: the first dispatch is the FIFO head rX; the next one is not the FIFO's again but the elevator's
// choice, which `cfq_dispatch_insert` makes afresh from rX's neighbours: its successor rY at 2e6 (rX has no
// predecessor), then rZ. (Keeping the choice made before rX jumped the queue, rZ forward of the head at 50e6,
// would give [10, 12, 11].)
#[test]
fn fifo_expiry_once_per_slice() {
    let mut c = cfq(&DeviceInfo::hdd(), &[]);
    c.insert(rq(1, 1, 50_000_000, true), 0);
    let first = dispatched(&mut c, 0).unwrap();
    c.insert(rq(10, 2, 10, true), 0);
    c.insert(rq(11, 2, 2_000_000, true), MS);
    c.insert(rq(12, 2, 50_100_000, true), 2 * MS);
    c.completed(&first, 200 * MS);
    assert_eq!(c.dispatch(200 * MS), Decision::WaitUntil(208 * MS));
    let order: Vec<u64> = (0..3).map(|_| dispatched(&mut c, 208 * MS).unwrap().id.0).collect();
    assert_eq!(order, vec![10, 11, 12]);
}

// After a dispatch the next request is chosen between the dispatched request's neighbours as seen from its first
// sector (`cfq_find_next_rq` compares from `blk_rq_pos(last)`): with the head at 10 000, B (10 000) goes first; from
// its start, P at 9 990 costs 2 x 10 = 20 (a back seek) and N at 10 030 costs 30, so P is next. (Seen from B's end,
// 10 008, P would cost 36 and N 22.)
#[test]
fn the_next_request_is_chosen_from_the_dispatched_requests_start() {
    let mut c = cfq(&DeviceInfo::hdd(), &[]);
    c.insert(rq(1, 1, 9_992, true), 0);
    let a = dispatched(&mut c, 0).unwrap();
    assert_eq!(a.end(), 10_000);
    for (id, sector) in [(2, 10_000), (3, 9_990), (4, 10_030)] {
        c.insert(rq(id, 1, sector, true), 0);
    }
    let order: Vec<u64> = (0..3).map(|_| dispatched(&mut c, 0).unwrap().id.0).collect();
    assert_eq!(order, vec![2, 3, 4]);
}

// Back-seek choice: with the head at 10 008, a request 50 sectors behind (cost 2*50 = 100) beats one 150 ahead,
// but one 100 behind (cost 200) does not.
#[test]
fn back_seek_choice() {
    for (back, expect_back) in [(50, true), (100, false)] {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        c.insert(rq(1, 1, 10_000, true), 0);
        let r = dispatched(&mut c, 0).unwrap();
        assert_eq!(r.end(), 10_008);
        c.insert(rq(2, 1, 10_008 - back - 8, true), 0);
        c.insert(rq(3, 1, 10_008 + 150, true), 0);
        let got = dispatched(&mut c, 0).unwrap().id.0;
        assert_eq!(got == 2, expect_back, "back {back}");
    }
}

// CFQ's fairness is in time: two always-backlogged sync readers of equal priority, one in the fast outer zone
// (1 ms per request) and one in the slow inner zone (2 ms per request), each get 100 ms slices in turn, so about
// equal device time, and therefore the outer reader moves about twice the sectors. (BFQ would equalise sectors.)
#[test]
fn fairness_is_in_time_not_sectors() {
    let mut sim = Sim::new(
        &DeviceInfo::hdd(),
        &[],
        1,
        zoned,
        vec![Reader::new(1, 0), Reader::new(2, INNER_ZONE)],
    );
    let end = 10 * SEC;
    sim.run(end);
    let (t_outer, s_outer) = sim.usage(1, end);
    let (t_inner, s_inner) = sim.usage(2, end);
    let time_ratio = t_outer as f64 / t_inner as f64;
    let sector_ratio = s_outer as f64 / s_inner as f64;
    assert!((0.95..=1.05).contains(&time_ratio), "time ratio {time_ratio}");
    assert!((1.85..=2.15).contains(&sector_ratio), "sector ratio {sector_ratio}");
}

// Groups share time by weight: the root group (weight 1000) against a child group (default weight 500), one
// backlogged reader each, split the disk about 2:1 in time.
#[test]
fn groups_share_time_by_weight() {
    let mut sim = Sim::new(
        &DeviceInfo::hdd(),
        &[],
        1,
        flat_1ms,
        vec![Reader::new(1, 0), Reader::new(2, 500_000_000)],
    );
    sim.start_flow(FlowInfo::new(FlowId(2)).with_group(GroupId(1)));
    let ratio = root_to_child_time_over_10_s(&mut sim);
    assert!((1.8..=2.2).contains(&ratio), "root/child time ratio {ratio}");
}

/// Runs `sim` for 10 s and returns the device time flow 1 (root group) got over the time flow 2 (child) got.
pub(super) fn root_to_child_time_over_10_s(sim: &mut Sim) -> f64 {
    let end = 10 * SEC;
    sim.run(end);
    let (t_root, _) = sim.usage(1, end);
    let (t_child, _) = sim.usage(2, end);
    t_root as f64 / t_child as f64
}

// An async queue used up its dispatch allowance: with another queue busy it expires after
// 2*slice_async_rq*(8-prio) dispatches in a slot: 16 at priority 4, 32 at priority 0.
#[test]
fn async_queue_expires_after_its_dispatch_allowance() {
    let mut c = cfq(&DeviceInfo::hdd(), &[]);
    c.flow_started(&FlowInfo::new(FlowId(2)).with_class(IoClass::Be, 0), 0);
    for i in 0..100 {
        c.insert(rq(i, 1, 1000 + i * 100, false), 0);
        c.insert(rq(1000 + i, 2, 900_000_000 + i * 100, false), 0);
    }
    // (flow, dispatches) of each slot, a slot ending when no queue is active after a dispatch.
    let mut slots: Vec<(u32, usize)> = Vec::new();
    let mut n = 0;
    while let Some(r) = dispatched(&mut c, 0) {
        n += 1;
        c.completed(&r, 0);
        if c.active.is_none() {
            slots.push((r.flow.0, n));
            n = 0;
        }
    }
    assert_eq!(slots[0], (1, 16));
    assert_eq!(slots[1], (2, 32));
}

// A sync request preempts an async queue in service.
#[test]
fn sync_preempts_async() {
    let mut c = cfq(&DeviceInfo::hdd(), &[]);
    for i in 0..10 {
        c.insert(rq(i, 1, 1000 + i * 100, false), 0);
    }
    let w = dispatched(&mut c, 0).unwrap();
    assert_eq!(w.flow, FlowId(1));
    c.insert(rq(50, 2, 900_000_000, true), MS);
    c.completed(&w, 2 * MS);
    assert_eq!(dispatched(&mut c, 2 * MS).unwrap().flow, FlowId(2));
}

// IOPS mode (slice_idle=0 on a queueing SSD): groups are charged by dispatches, not time. The root group (weight
// 1000) reads 2 ms requests in the inner zone, a child group (500) 1 ms requests in the outer zone, both deep.
// In IOPS mode the root gets about twice the child's requests (so four times its time); in time mode (3.13's
// default slice_idle of 8 ms: no IOPS mode) about twice its time, hence equal requests.
#[test]
fn iops_mode_charges_groups_by_dispatches() {
    for (tunables, iops) in [(&["slice_idle=0"][..], true), (&[][..], false)] {
        // Deeper than the device (32 tags), so the queues never empty and the groups stay busy.
        // (A gap between requests keeps them from merging.)
        let mut root = Reader::new(1, INNER_ZONE);
        root.depth = 64;
        root.stride = 512;
        let mut child = Reader::new(2, 0);
        child.depth = 64;
        child.stride = 512;
        let mut sim = Sim::new(&DeviceInfo::ssd(), tunables, 32, zoned, vec![root, child]);
        sim.start_flow(FlowInfo::new(FlowId(2)).with_group(GroupId(1)));
        let end = 10 * SEC;
        sim.run(end);
        assert_eq!(sim.cfq.iops_mode(), iops);
        let (t_root, s_root) = sim.usage(1, end);
        let (t_child, s_child) = sim.usage(2, end);
        let (time, reqs) = (t_root as f64 / t_child as f64, s_root as f64 / s_child as f64);
        if iops {
            assert!(
                (1.8..=2.2).contains(&reqs),
                "IOPS mode: request ratio {reqs}, time ratio {time}"
            );
        } else {
            assert!(
                (1.8..=2.2).contains(&time),
                "time mode: time ratio {time}, request ratio {reqs}"
            );
        }
    }
}

// Cooperating processes: two readers interleave 256-sector chunks of one file (each alone skips 256 sectors, not
// seeky). When one empties, the other's next request is right at the head, so CFQ switches to it instead of
// idling and schedules a merge, which happens at the next request: both then use one shared queue. When the
// shared queue turns seeky it is split again at the next requests.
#[test]
fn cooperating_queues_merge_and_split() {
    let mut sim = interleaved_pair_for_500_ms();
    let qa = sim.cfq.flows[&FlowId(1)].sync_q;
    let qb = sim.cfq.flows[&FlowId(2)].sync_q;
    assert!(qa.is_some() && qa == qb, "not merged: {qa:?} {qb:?}");
    assert!(sim.cfq.queues[qa.unwrap() as usize].coop);
    for r in &mut sim.readers {
        r.stride = 40_000_000;
    }
    sim.run(3 * SEC);
    let qa = sim.cfq.flows[&FlowId(1)].sync_q;
    let qb = sim.cfq.flows[&FlowId(2)].sync_q;
    assert_ne!(qa, qb, "not split");
}

/// CFQ wrapped so that a conformance run fails if the liveness guard ever has to force a dispatch.
struct Guarded(Cfq);

impl Scheduler for Guarded {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn flow_started(&mut self, flow: &FlowInfo, now: Time) {
        self.0.flow_started(flow, now);
    }
    fn flow_exited(&mut self, flow: FlowId, now: Time) {
        self.0.flow_exited(flow, now);
    }
    fn insert(&mut self, rq: Request, now: Time) {
        self.0.insert(rq, now);
    }
    fn dispatch(&mut self, now: Time) -> Decision {
        let d = self.0.dispatch(now);
        assert_eq!(self.0.forced, 0, "liveness guard used at {now}");
        d
    }
    fn completed(&mut self, rq: &Request, now: Time) {
        self.0.completed(rq, now);
    }
    fn queued(&self) -> usize {
        self.0.queued()
    }
}

// The randomized conformance sequence with extreme tunables (every limit at an end of its range) on both device
// kinds: no panic or overflow, every request served once, idle waits within the 1 s bound, and the liveness guard
// never needed (every hold-back has a request on the device or a timer to end it).
#[test]
fn conformance_with_extreme_tunables_never_needs_the_guard() {
    let sets: [&[&str]; 4] = [
        &[],
        &["slice_idle=0", "group_idle=0"],
        &[
            "quantum=1",
            "fifo_expire_sync=0",
            "fifo_expire_async=0",
            "back_seek_max=0",
            "slice_sync=1",
            "slice_async=1",
            "slice_async_rq=1",
            "slice_idle=1000",
            "group_idle=1000",
            "target_latency=1",
        ],
        &[
            "quantum=1024",
            "fifo_expire_sync=100000",
            "back_seek_max=1073741824",
            "back_seek_penalty=1000",
            "slice_sync=10000",
            "slice_async=10000",
            "slice_async_rq=1000",
            "target_latency=100000",
            "low_latency=0",
        ],
    ];
    for tunables in sets {
        for dev in [DeviceInfo::hdd(), DeviceInfo::ssd()] {
            for seed in [7, 8] {
                let mut cfg = crate::conformance::Config::new(seed, dev.clone());
                cfg.tunables = tunables.iter().map(|s| s.to_string()).collect();
                let policy = Box::new(Guarded(cfq(&dev, tunables)));
                let report = crate::conformance::run_policy(policy, &cfg)
                    .unwrap_or_else(|e| panic!("{tunables:?} on {}: {e}", dev.name));
                assert!(report.records.len() > 1000);
            }
        }
    }
}

// Service-tree idling: seeky readers (every request 10 M sectors from the last) lose their idle window and go to
// the SYNC_NOIDLE tree. Two of them are served back to back without idling (when one empties the tree still holds
// the other), but a lone one, the last queue on its tree, is still idled for. (A background writer keeps
// requests queued, so idling shows as WaitUntil answers.)
#[test]
fn sync_noidle_tree_idles_only_for_its_last_queue() {
    for (n, expect_idle) in [(2u32, false), (1, true)] {
        let mut readers: Vec<Reader> = (0..n)
            .map(|i| {
                let mut r = Reader::new(i, u64::from(i) * 7_000_000);
                r.stride = 10_000_000 + u64::from(i) * 1000;
                r
            })
            .collect();
        let mut writer = Reader::new(9, 1_900_000_000);
        writer.sync = false;
        readers.push(writer);
        let mut sim = Sim::new(&DeviceInfo::hdd(), &[], 1, flat_1ms, readers);
        sim.run(300 * MS);
        for i in 0..n {
            let q = sim.cfq.flows[&FlowId(i)].sync_q.unwrap() as usize;
            assert!(sim.cfq.queues[q].seeky() && !sim.cfq.queues[q].idle_window);
            assert_eq!(sim.cfq.queues[q].workload(), Workload::SyncNoIdle);
        }
        let before = sim.waits;
        sim.run(600 * MS);
        assert_eq!(sim.waits > before, expect_idle, "{n} seeky readers");
    }
}

// 3.13 keeps group idling on a queueing SSD: with group_idle at its default of 8 ms (slice_idle 0, so no queue
// idling), when the last queue of a group empties while another group's reader waits, CFQ waits for the group
// (WaitUntil) instead of switching groups at once; with group_idle=0 as well, it switches at once. (Later kernels
// set slice_idle to 0 on flash; group_idle stayed 8.)
#[test]
fn group_idle_still_arms_on_a_queueing_ssd() {
    let run = |tunables: &[&str]| {
        let mut a = Reader::new(1, 0);
        a.max_requests = 5;
        let mut sim = Sim::new(
            &DeviceInfo::ssd(),
            tunables,
            32,
            flat_1ms,
            vec![a, Reader::new(2, 500_000_000)],
        );
        sim.start_flow(FlowInfo::new(FlowId(2)).with_group(GroupId(1)));
        sim.run(200 * MS);
        sim.waits
    };
    assert!(run(&["slice_idle=0"]) > 0, "group idle arms on flash in 3.13");
    assert_eq!(run(&["slice_idle=0", "group_idle=0"]), 0);
}

// The slice offset of `cfq_slice_offset` is signed in 3.13: a queue added to an idle group, counted before
// nr_cfqq includes it, gets (0 - 1) x (slice(sync, prio 0) - slice(sync, prio 4)) = -80 ms; the next queue of the
// group gets 0 x 80 ms. So the first key is 80 ms before `now`, the second at `now`.
#[test]
fn the_first_queue_of_an_idle_group_gets_a_negative_slice_offset() {
    let dev = DeviceInfo::hdd();
    let mut c = Cfq::new(&dev, Params::defaults(&dev));
    for f in [1, 2] {
        c.flow_started(&FlowInfo::new(FlowId(f)), 0);
    }
    let now = 10 * SEC;
    c.insert(Request::new(RequestId(1), FlowId(1), Direction::Read, true, 0, 8), now);
    c.insert(
        Request::new(RequestId(2), FlowId(2), Direction::Read, true, 1 << 30, 8),
        now,
    );
    let key = |f: u32| {
        let q = c.flows[&FlowId(f)].sync_q.expect("a sync queue");
        c.queues[q as usize].pos.expect("on a tree").key
    };
    let now_key = i64::try_from(now).unwrap();
    assert_eq!(key(1), now_key - 80 * MS as i64);
    assert_eq!(key(2), now_key);
}

// A queue with a merge pending keeps it: a new close cooperator does not replace the pending merge (3.13's
// `cfq_select_queue` calls `cfq_setup_merge` only when `new_cfqq` is empty).
#[test]
fn a_pending_merge_is_not_replaced_by_a_new_cooperator() {
    let dev = DeviceInfo::hdd();
    let mut c = Cfq::new(&dev, Params::defaults(&dev));
    for f in 1..=3 {
        c.flow_started(&FlowInfo::new(FlowId(f)), 0);
        c.insert(
            Request::new(
                RequestId(u64::from(f)),
                FlowId(f),
                Direction::Read,
                true,
                u64::from(f) << 20,
                8,
            ),
            0,
        );
    }
    let q = |c: &Cfq, f: u32| c.flows[&FlowId(f)].sync_q.expect("a sync queue");
    let (a, x, y) = (q(&c, 1), q(&c, 2), q(&c, 3));
    c.setup_merge_unless_pending(a, x);
    let first = c.merge_target(a).or(c.merge_target(x));
    assert!(first.is_some(), "a merge of queues 1 and 2 is pending");
    c.setup_merge_unless_pending(a, y);
    assert_eq!(c.merge_target(a).or(c.merge_target(x)), first, "still the first merge");
    assert_eq!(c.merge_target(y), None, "queue 3 is not drawn in");
}
