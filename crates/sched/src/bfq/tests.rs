//! Scenario tests of the whole policy, driven against a tiny test device: it serves requests in dispatch order
//! (or all in parallel, for a queueing SSD), each taking a seek time when it does not start where the head is,
//! plus its size divided by the transfer rate of the zone it lies in (the outer half of the disk is faster).

use super::*;
use crate::types::{FlowInfo, RequestId, MS, SEC, US};
use std::collections::HashMap;

pub(super) fn bfq(dev: &DeviceInfo, pairs: &[&str]) -> Bfq {
    let v = TunableValues::parse("bfq", &TUNABLES, dev, pairs).unwrap();
    Bfq::new(dev, Params::from_values(&v))
}

/// The test device.
#[derive(Clone)]
pub(super) struct TestDev {
    /// Time the (serial) device becomes free.
    free_at: Time,
    head: u64,
    /// Sectors below this are in the outer (fast) zone.
    zone_split: u64,
    /// Transfer rates (sectors per ms) of the outer and inner zones.
    outer_rate: u64,
    inner_rate: u64,
    /// Time of a non-contiguous access.
    seek: Time,
    /// All requests in parallel, each with its own service time (a queueing SSD).
    parallel: bool,
}

impl TestDev {
    pub(super) fn hdd() -> Self {
        TestDev {
            free_at: 0,
            head: 0,
            zone_split: 1 << 30,
            outer_rate: 200,
            inner_rate: 100,
            seek: 8 * MS,
            parallel: false,
        }
    }
    pub(super) fn ssd() -> Self {
        TestDev {
            free_at: 0,
            head: 0,
            zone_split: u64::MAX,
            outer_rate: 500,
            inner_rate: 500,
            seek: 100 * US,
            parallel: true,
        }
    }
    fn completion(&mut self, rq: &Request, now: Time) -> Time {
        let seek = if rq.sector == self.head { 0 } else { self.seek };
        let rate = if rq.sector < self.zone_split {
            self.outer_rate
        } else {
            self.inner_rate
        };
        let t = seek + u64::from(rq.sectors) * MS / rate.max(1);
        self.head = rq.end();
        if self.parallel {
            now + t
        } else {
            self.free_at = self.free_at.max(now) + t;
            self.free_at
        }
    }
}

/// A process issuing reads: sequential from `next`, or random over a span; it keeps `depth` requests
/// outstanding and issues the next one `think` after a completion.
#[derive(Clone)]
pub(super) struct Proc {
    pub(super) info: FlowInfo,
    pub(super) next: u64,
    pub(super) random: bool,
    pub(super) size: u32,
    pub(super) depth: u32,
    pub(super) think: Time,
    pub(super) start: Time,
    pub(super) sync: bool,
    /// Stop issuing after this many requests.
    pub(super) limit: u64,
    /// Sectors skipped between sequential requests (so they are near but not mergeable).
    pub(super) gap: u64,
    outstanding: u32,
    issued: u64,
    next_issue: Time,
    rng: u64,
}

impl Proc {
    pub(super) fn seq(id: u32, start_sector: u64) -> Self {
        Proc {
            info: FlowInfo::new(FlowId(id)),
            next: start_sector,
            random: false,
            size: 256,
            depth: 2,
            think: 0,
            start: 0,
            sync: true,
            limit: u64::MAX,
            gap: 0,
            outstanding: 0,
            issued: 0,
            next_issue: 0,
            rng: u64::from(id) * 0x9E37_79B9_7F4A_7C15 + 1,
        }
    }
    pub(super) fn random(id: u32) -> Self {
        let mut p = Proc::seq(id, 0);
        p.random = true;
        p.size = 8;
        p.depth = 1;
        p
    }
    fn sector(&mut self) -> u64 {
        if self.random {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            (self.rng % (1 << 28)) & !7
        } else {
            let s = self.next;
            self.next += u64::from(self.size) + self.gap;
            s
        }
    }
}

/// Policy + device + processes in virtual time.
pub(super) struct Sim {
    pub(super) b: Bfq,
    pub(super) dev: TestDev,
    pub(super) tags: u32,
    pub(super) now: Time,
    pub(super) procs: Vec<Proc>,
    in_dev: Vec<(Time, Request)>,
    next_id: u64,
    wakeup: Option<Time>,
    /// Sectors completed per flow.
    pub(super) served: HashMap<u32, u64>,
    /// (dispatch time, flow, insert time) per dispatched request part.
    pub(super) log: Vec<(Time, FlowId, Time)>,
    inserted_at: HashMap<u64, Time>,
    /// (time asked, horizon) of every WaitUntil.
    pub(super) waits: Vec<(Time, Time)>,
    /// Largest number of requests in the device.
    pub(super) max_in_dev: usize,
    /// Count sectors only after this time.
    pub(super) measure_from: Time,
}

impl Sim {
    pub(super) fn new(b: Bfq, dev: TestDev, tags: u32, procs: Vec<Proc>) -> Self {
        let mut s = Sim {
            b,
            dev,
            tags,
            now: 0,
            procs,
            in_dev: Vec::new(),
            next_id: 0,
            wakeup: None,
            served: HashMap::new(),
            log: Vec::new(),
            inserted_at: HashMap::new(),
            waits: Vec::new(),
            max_in_dev: 0,
            measure_from: 0,
        };
        for p in s.procs.iter_mut() {
            p.next_issue = p.start;
        }
        let infos: Vec<FlowInfo> = s.procs.iter().map(|p| p.info.clone()).collect();
        for i in infos {
            s.b.flow_started(&i, 0);
        }
        s
    }

    fn issue_due(&mut self) {
        for i in 0..self.procs.len() {
            loop {
                let p = &mut self.procs[i];
                if p.next_issue > self.now || p.outstanding >= p.depth || p.issued >= p.limit {
                    break;
                }
                let sector = p.sector();
                let dir = Direction::Read;
                let rq = Request::new(RequestId(self.next_id), p.info.id, dir, p.sync, sector, p.size);
                p.outstanding += 1;
                p.issued += 1;
                self.inserted_at.insert(self.next_id, self.now);
                self.next_id += 1;
                self.b.insert(rq, self.now);
            }
        }
    }

    fn pump(&mut self) {
        self.wakeup = None;
        while (self.in_dev.len() as u32) < self.tags {
            match self.b.dispatch(self.now) {
                Decision::Dispatch(rq) => {
                    for id in std::iter::once(rq.id).chain(rq.merged.iter().copied()) {
                        let t = self.inserted_at.remove(&id.0).unwrap_or(self.now);
                        self.log.push((self.now, rq.flow, t));
                    }
                    let done = self.dev.completion(&rq, self.now);
                    self.in_dev.push((done, rq));
                    self.max_in_dev = self.max_in_dev.max(self.in_dev.len());
                }
                Decision::WaitUntil(t) => {
                    assert!(t > self.now);
                    self.waits.push((self.now, t));
                    self.wakeup = Some(t);
                    break;
                }
                Decision::Nothing => break,
            }
        }
    }

    /// Runs until `end` (ns).
    pub(super) fn run_until(&mut self, end: Time) {
        loop {
            self.issue_due();
            self.pump();
            let next_done = self.in_dev.iter().map(|x| x.0).min();
            let next_issue = self
                .procs
                .iter()
                .filter(|p| p.outstanding < p.depth && p.issued < p.limit)
                .map(|p| p.next_issue.max(self.now))
                .min();
            let next = [next_done, self.wakeup, next_issue].into_iter().flatten().min();
            let Some(next) = next else { break };
            if next > end {
                break;
            }
            self.now = self.now.max(next);
            // Complete everything due.
            while let Some(i) = self.in_dev.iter().position(|x| x.0 <= self.now) {
                let (_, rq) = self.in_dev.swap_remove(i);
                self.b.completed(&rq, self.now);
                if self.now >= self.measure_from {
                    *self.served.entry(rq.flow.0).or_insert(0) += u64::from(rq.sectors);
                }
                if let Some(p) = self.procs.iter_mut().find(|p| p.info.id == rq.flow) {
                    p.outstanding = p.outstanding.saturating_sub(rq.parts() as u32);
                    p.next_issue = self.now + p.think;
                }
                self.pump();
            }
        }
        self.now = self.now.max(end);
    }

    pub(super) fn queue_of(&self, f: u32) -> u32 {
        self.b.flows.get(&f).map_or(NONE, |c| c.sync_q)
    }
}

fn hdd1() -> DeviceInfo {
    let mut d = DeviceInfo::hdd();
    d.queue_depth = 1;
    d
}

// A new flow is raised ×30 at its first request, and its request is dispatched ahead of a backlogged
// sequential reader's: raising cuts its budget to 2 × min_budget and multiplies its weight by 30, so its finish
// time is tiny, and its arrival preempts the reader ("wants to preempt" holds for a raising candidate).
#[test]
fn new_flow_is_raised_and_served_first() {
    let mut reader = Proc::seq(1, 0);
    reader.depth = 4;
    let mut newcomer = Proc::random(2);
    newcomer.start = 3 * SEC;
    newcomer.limit = 1;
    let mut sim = Sim::new(bfq(&hdd1(), &[]), TestDev::hdd(), 1, vec![reader, newcomer]);
    sim.run_until(3 * SEC);
    // The reader has been served for 3 s: its own raising (it was new too) must have ended or be unrelated.
    sim.run_until(3 * SEC + 1);
    let q2 = sim.queue_of(2);
    assert_ne!(q2, NONE);
    assert_eq!(sim.b.q(q2).wr.coeff, 30, "new sync queue raised x30");
    sim.run_until(4 * SEC);
    let inserted = 3 * SEC;
    let pos = sim
        .log
        .iter()
        .position(|&(_, f, t)| f == FlowId(2) && t >= inserted)
        .unwrap();
    let reader_after: usize = sim.log[..pos]
        .iter()
        .filter(|&&(d, f, _)| f == FlowId(1) && d >= inserted)
        .count();
    assert!(
        reader_after <= 1,
        "reader dispatched {reader_after} requests before the newcomer"
    );
    let wait = sim.log[pos].0 - sim.log[pos].2;
    assert!(wait <= 20 * MS, "newcomer waited {wait} ns");
}

// Interactive raising lasts wr_duration = ref_rate * 7 s / peak, i.e. 14000 * 7 / 9333 = 10.5 s at the initial
// HDD estimate, if the queue receives little service (8 sectors every 100 ms); soft real-time raising is
// disabled so that only the interactive period runs.
#[test]
fn raising_ends_after_its_duration() {
    let mut light = Proc::random(1);
    light.think = 100 * MS;
    let mut sim = Sim::new(bfq(&hdd1(), &["wr_max_softrt_rate=0"]), TestDev::hdd(), 1, vec![light]);
    let dur = sim.b.wr_duration();
    assert!(dur.abs_diff(10_500 * MS) < MS, "{dur}");
    sim.run_until(10 * SEC);
    let q = sim.queue_of(1);
    assert_eq!(sim.b.q(q).wr.coeff, 30, "still raised at 10 s");
    sim.run_until(11 * SEC);
    assert_eq!(sim.b.q(q).wr.coeff, 1, "raising over after 10.5 s");
}

// Raising also ends once the queue has received 120000 sectors while raised: a sequential reader alone on the
// disk is raised at its first request and loses raising at the dispatch that takes it past 120 K sectors.
#[test]
fn raising_ends_after_120k_sectors() {
    let reader = Proc::seq(1, 0);
    let mut sim = Sim::new(bfq(&hdd1(), &[]), TestDev::hdd(), 1, vec![reader]);
    let mut dispatched = 0u64;
    let mut ended_at = None;
    for step in 0..4000 {
        sim.run_until(step * 2 * MS);
        let q = sim.queue_of(1);
        if q == NONE {
            continue;
        }
        dispatched = sim.log.len() as u64 * 256;
        if sim.b.q(q).wr.coeff == 1 {
            ended_at = Some(dispatched);
            break;
        }
    }
    let at = ended_at.expect("raising ended");
    assert!(
        (120_000..=120_000 + 2 * 256).contains(&at),
        "raising ended after {at} sectors ({dispatched})"
    );
}

// A seeky queue (random 8-sector reads) in a symmetric scenario idles at most BFQ_MIN_TT = 2 ms: the idle
// timer's horizon is capped once its seek history says SEEKY.
#[test]
fn seeky_flow_idles_at_most_2ms() {
    let mut a = Proc::random(1);
    a.think = 500 * US;
    let mut b = Proc::random(2);
    b.think = 500 * US;
    let mut sim = Sim::new(bfq(&hdd1(), &["low_latency=0"]), TestDev::hdd(), 1, vec![a, b]);
    sim.run_until(2 * SEC);
    let late: Vec<Time> = sim.waits.iter().filter(|w| w.0 > SEC).map(|w| w.1 - w.0).collect();
    assert!(!late.is_empty(), "the queues do idle");
    assert!(late.iter().all(|&d| d <= 2 * MS), "max idle {:?}", late.iter().max());
}

// On a queueing SSD (non-rotational, NCQ detected) with equal weights and no raised queue, BFQ never idles:
// the device keeps itself busy with other queues' requests. Before NCQ is detected it may idle.
#[test]
fn no_idling_on_queueing_ssd_symmetric() {
    let procs: Vec<Proc> = (1..=4)
        .map(|i| {
            let mut p = Proc::seq(i, u64::from(i) << 24);
            p.depth = 4;
            p.size = 64;
            p.gap = 64;
            p.think = 50 * US;
            p
        })
        .collect();
    let mut sim = Sim::new(bfq(&DeviceInfo::ssd(), &["low_latency=0"]), TestDev::ssd(), 32, procs);
    sim.run_until(500 * MS);
    assert_eq!(sim.b.hw.hw_tag, Some(true), "NCQ detected");
    let before = sim.waits.len();
    sim.run_until(2 * SEC);
    assert_eq!(sim.waits.len(), before, "idled on a queueing SSD");
    assert!(sim.max_in_dev > 4);
}

// Asymmetric weights: on the same queueing SSD, a queue heavier than the lightest one does idle (otherwise the
// light queues' requests would fill the device while it is briefly empty and its share would be lost).
#[test]
fn asymmetric_weights_idle_on_queueing_ssd() {
    let procs: Vec<Proc> = (1..=4)
        .map(|i| {
            let mut p = Proc::seq(i, u64::from(i) << 24);
            p.depth = 4;
            p.size = 64;
            p.gap = 64;
            p.think = 50 * US;
            if i == 1 {
                p.info = p.info.with_weight(400);
            }
            p
        })
        .collect();
    let mut sim = Sim::new(bfq(&DeviceInfo::ssd(), &["low_latency=0"]), TestDev::ssd(), 32, procs);
    sim.run_until(500 * MS);
    assert_eq!(sim.b.hw.hw_tag, Some(true));
    let before = sim.waits.len();
    sim.run_until(2 * SEC);
    assert!(sim.waits.len() > before, "the heavy queue idles");
}

/// Runs three always-backlogged sequential readers weighted 1:2:4 starting at the given sectors and returns
/// their sectors in the measurement window.
fn weighted_run(starts: [u64; 3]) -> [u64; 3] {
    let procs: Vec<Proc> = starts
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let mut p = Proc::seq(i as u32 + 1, s);
            p.depth = 4;
            p.info = p.info.with_weight(100 << i);
            p
        })
        .collect();
    let mut dev = TestDev::hdd();
    dev.zone_split = 1 << 30;
    let mut sim = Sim::new(bfq(&hdd1(), &["low_latency=0"]), dev, 1, procs);
    sim.measure_from = 5 * SEC;
    sim.run_until(125 * SEC);
    [1, 2, 3].map(|f| sim.served.get(&f).copied().unwrap_or(0))
}

fn assert_shares(s: [u64; 3], what: &str) {
    let unit = s[0] as f64;
    for (i, &x) in s.iter().enumerate() {
        let want = (1u64 << i) as f64;
        let got = x as f64 / unit;
        assert!(
            (got / want - 1.0).abs() < 0.01,
            "{what}: shares {s:?}, flow {i}: {got:.4} vs {want}"
        );
    }
}

// Weight-proportional sector shares, independent of zone bit recording: three backlogged sequential readers
// weighted 1:2:4 get sectors 1:2:4 within 1%, whether all read the fast outer zone, all the slow inner zone,
// or one each in different zones. Service is counted in sectors, so the zone's speed changes how long a slot
// lasts, not how much it is charged. low_latency=0 as in the reference fairness test.
#[test]
fn weighted_shares_independent_of_zones() {
    let outer = 1 << 20;
    let inner = 3 << 30;
    assert_shares(weighted_run([outer, outer + (1 << 24), outer + (2 << 24)]), "all outer");
    assert_shares(weighted_run([inner, inner + (1 << 24), inner + (2 << 24)]), "all inner");
    assert_shares(weighted_run([outer, inner, outer + (1 << 24)]), "mixed zones");
}
