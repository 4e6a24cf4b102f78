//! mq-deadline, the current blk-mq version with I/O priorities (kernel `mq-deadline.c`; docs/SCHEDULERS.md,
//! mq-deadline).
//!
//! Three priority levels (RT, BE, IDLE, from the issuing flow's class) each keep their own sector-sorted lists and
//! FIFOs ([`DeadlineLists`]); batching, direction choice and write starvation work as in legacy
//! [`deadline`](crate::deadline), with each batch continuing from the start sector of the level's last dispatched
//! request (`latest_pos`).
//! Levels are served in strict priority order: a level waits while a higher one has requests queued or on the
//! device. When at least two levels have requests (queued or on the device), a BE or IDLE request older than
//! `prio_aging_expire` goes first, so that lower levels cannot starve. `async_depth` caps the scheduler tags held by
//! async I/O and writes.
//!
//! Not modelled: the at-head dispatch list (every insert here is a normal one) and zoned-write locking.

use crate::deadline::{
    batch_direction, count, ms_to_time, DeadlineLists, FIFO_BATCH, FRONT_MERGES, READ_EXPIRE, WRITES_STARVED,
    WRITE_EXPIRE,
};
use crate::device::DeviceInfo;
use crate::merge::IntMap;
use crate::scheduler::{BlockLayer, Scheduler};
use crate::tunables::{DefaultValue, TunableSpec, TunableValues};
use crate::types::{Decision, Direction, FlowId, FlowInfo, IoClass, Request, Time};

/// Default `prio_aging_expire`, in ms: a BE or IDLE request queued this long is served ahead of higher levels.
pub const DEFAULT_PRIO_AGING_EXPIRE_MS: i64 = 10_000;
/// Largest accepted `prio_aging_expire`, in ms (one hour).
pub const MAX_PRIO_AGING_EXPIRE_MS: i64 = 3_600_000;
/// Largest accepted `async_depth`, in requests: the largest scheduler tag count a blk-mq queue can have.
pub const MAX_ASYNC_DEPTH: i64 = 10_240;

/// Default `async_depth` on `dev`: its `nr_requests` (so nothing is limited), within the accepted range.
fn default_async_depth(dev: &DeviceInfo) -> i64 {
    i64::from(dev.nr_requests).clamp(1, MAX_ASYNC_DEPTH)
}

/// mq-deadline's tunables, named and scaled as in sysfs.
pub static TUNABLES: [TunableSpec; 7] = [
    READ_EXPIRE,
    WRITE_EXPIRE,
    WRITES_STARVED,
    FIFO_BATCH,
    FRONT_MERGES,
    TunableSpec::new(
        "prio_aging_expire",
        DEFAULT_PRIO_AGING_EXPIRE_MS,
        0,
        MAX_PRIO_AGING_EXPIRE_MS,
        "ms",
        "a BE or IDLE request waiting this long is served before higher priority levels",
    ),
    TunableSpec {
        name: "async_depth",
        default: DefaultValue::Device(default_async_depth, "nr_requests"),
        min: 1,
        max: MAX_ASYNC_DEPTH,
        unit: "requests",
        doc: "scheduler tags that async I/O and writes may hold at once (sync reads are never limited)",
    },
];

/// Number of priority levels (RT, BE, IDLE).
const LEVELS: usize = 3;

/// The mq-deadline policy.
#[derive(Debug, Clone)]
pub struct MqDeadline {
    /// Queued requests per level, indexed by [`IoClass::index`].
    levels: [DeadlineLists; LEVELS],
    /// Per level and direction: start sector of the last dispatched request; a batch goes on with the first request
    /// starting at or after it.
    latest_pos: [[u64; 2]; LEVELS],
    /// Per level: requests dispatched and not yet completed.
    in_flight: [u32; LEVELS],
    /// Level of each request on the device, by request id.
    in_flight_level: IntMap<u64, u8>,
    /// Class of each live flow, by flow id.
    classes: IntMap<u32, IoClass>,
    /// Direction of the current batch.
    last_dir: Direction,
    /// Requests sent in the current batch.
    batching: u32,
    /// Read batches started while writes waited.
    starved: u32,
    /// Deadline per direction (ns).
    expire: [Time; 2],
    fifo_batch: u32,
    writes_starved: u32,
    front_merges: bool,
    /// `prio_aging_expire` (ns).
    prio_aging_expire: Time,
    /// `async_depth` (requests).
    async_depth: u32,
    max_sectors: u32,
}

impl MqDeadline {
    /// An mq-deadline policy for `dev` with tunables `t` (see [`TUNABLES`]).
    pub fn new(dev: &DeviceInfo, t: &TunableValues) -> Self {
        MqDeadline {
            levels: Default::default(),
            latest_pos: [[0; 2]; LEVELS],
            in_flight: [0; LEVELS],
            in_flight_level: IntMap::default(),
            classes: IntMap::default(),
            last_dir: Direction::Read,
            batching: 0,
            starved: 0,
            expire: [ms_to_time(t.get("read_expire")), ms_to_time(t.get("write_expire"))],
            fifo_batch: count(t.get("fifo_batch")),
            writes_starved: count(t.get("writes_starved")),
            front_merges: t.flag("front_merges"),
            prio_aging_expire: ms_to_time(t.get("prio_aging_expire")),
            async_depth: count(t.get("async_depth")).max(1),
            max_sectors: dev.max_sectors.max(1),
        }
    }

    /// Registry constructor.
    pub fn build(dev: &DeviceInfo, t: &TunableValues) -> Box<dyn Scheduler> {
        Box::new(MqDeadline::new(dev, t))
    }

    /// True if level `l` has requests queued or on the device.
    fn busy(&self, l: usize) -> bool {
        !self.levels[l].is_empty() || self.in_flight[l] > 0
    }

    /// One dispatch attempt from level `l`: continue the batch, or start a new one (choosing the direction and
    /// checking the FIFO). With `aged_before`, the chosen request is sent only if it was inserted at or before that
    /// time (ns); the batch state (direction, count, starvation) changes either way, as in the kernel.
    fn dispatch_level(&mut self, l: usize, now: Time, aged_before: Option<Time>) -> Option<Request> {
        let lists = &self.levels[l];
        let cont = lists.first_at_or_after(self.last_dir, self.latest_pos[l][self.last_dir.index()]);
        let (dir, h) = match cont {
            Some(h) if self.batching < self.fifo_batch => (self.last_dir, h),
            _ => {
                let (reads, writes) = (lists.has(Direction::Read), lists.has(Direction::Write));
                let dir = batch_direction(reads, writes, &mut self.starved, self.writes_starved)?;
                let next = lists.first_at_or_after(dir, self.latest_pos[l][dir.index()]);
                let h = match next {
                    Some(h) if !lists.fifo_expired(dir, now) => h,
                    _ => lists.fifo_head(dir)?,
                };
                self.last_dir = dir;
                self.batching = 0;
                (dir, h)
            }
        };
        if let Some(limit) = aged_before {
            match self.levels[l].start(h) {
                Some(start) if start <= limit => {}
                _ => return None,
            }
        }
        let rq = self.levels[l].take(h)?;
        self.batching = self.batching.saturating_add(1);
        self.latest_pos[l][dir.index()] = rq.sector;
        self.in_flight[l] = self.in_flight[l].saturating_add(1);
        // `l` < LEVELS, so it fits in a u8.
        self.in_flight_level.insert(rq.id.0, l as u8);
        Some(rq)
    }
}

impl Scheduler for MqDeadline {
    fn name(&self) -> &'static str {
        "mq-deadline"
    }

    fn block_layer(&self) -> BlockLayer {
        BlockLayer::BlkMq
    }

    fn flow_started(&mut self, flow: &FlowInfo, _now: Time) {
        self.classes.insert(flow.id.0, flow.class);
    }

    fn flow_exited(&mut self, flow: FlowId, _now: Time) {
        // Its queued requests already sit in their level; later inserts from it (none expected) count as BE.
        self.classes.remove(&flow.0);
    }

    fn insert(&mut self, rq: Request, now: Time) {
        let class = self.classes.get(&rq.flow.0).copied().unwrap_or(IoClass::Be);
        let expire = self.expire[rq.dir.index()];
        // The removed request (if a merge chained) needs no bookkeeping: batches continue from a position.
        let _ = self.levels[class.index()].insert(rq, now, expire, self.front_merges, self.max_sectors);
    }

    fn dispatch(&mut self, now: Time) -> Decision {
        // Anti-starvation: with two or more levels active, BE then IDLE requests older than prio_aging_expire first.
        if let Some(aged_before) = now.checked_sub(self.prio_aging_expire) {
            if (0..LEVELS).filter(|&l| self.busy(l)).count() >= 2 {
                for class in [IoClass::Be, IoClass::Idle] {
                    if let Some(rq) = self.dispatch_level(class.index(), now, Some(aged_before)) {
                        return Decision::Dispatch(rq);
                    }
                }
            }
        }
        // Strict priority: a level is served only when every higher one is idle (nothing queued, nothing in flight).
        for l in 0..LEVELS {
            if let Some(rq) = self.dispatch_level(l, now, None) {
                return Decision::Dispatch(rq);
            }
            if self.busy(l) {
                break;
            }
        }
        Decision::Nothing
    }

    fn completed(&mut self, rq: &Request, _now: Time) {
        if let Some(l) = self.in_flight_level.remove(&rq.id.0) {
            let l = usize::from(l);
            crate::counter::dec(&mut self.in_flight[l], "mq-deadline in_flight[level]");
        }
    }

    fn queued(&self) -> usize {
        self.levels.iter().map(DeadlineLists::queued).sum()
    }

    /// Each priority level's lists agree ([`DeadlineLists::check_invariants`]), and each level's in-flight count
    /// equals its dispatched, uncompleted requests.
    fn check_invariants(&self) -> Result<(), crate::InvariantViolation> {
        for lists in &self.levels {
            lists.check_invariants()?;
        }
        for (l, &n) in self.in_flight.iter().enumerate() {
            let held = self.in_flight_level.values().filter(|&&x| usize::from(x) == l).count();
            crate::ensure_invariant!(
                n as usize == held,
                "mq-deadline",
                "level {l}: in_flight {n} != {held} dispatched requests of that level"
            );
        }
        Ok(())
    }

    fn depth_limit(&self, dir: Direction, sync: bool, nr_requests: u32) -> u32 {
        if dir == Direction::Read && sync {
            nr_requests
        } else {
            self.async_depth.min(nr_requests)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{RequestId, MS, SEC};

    const RT: FlowId = FlowId(1);
    const BE: FlowId = FlowId(2);
    const IDLE: FlowId = FlowId(3);

    fn policy_on(dev: &DeviceInfo, pairs: &[&str]) -> MqDeadline {
        let t = TunableValues::parse("mq-deadline", &TUNABLES, dev, pairs).expect("valid tunables");
        let mut p = MqDeadline::new(dev, &t);
        p.flow_started(&FlowInfo::new(RT).with_class(IoClass::Rt, 0), 0);
        p.flow_started(&FlowInfo::new(BE), 0);
        p.flow_started(&FlowInfo::new(IDLE).with_class(IoClass::Idle, 0), 0);
        p
    }

    fn policy(pairs: &[&str]) -> MqDeadline {
        policy_on(&DeviceInfo::hdd(), pairs)
    }

    fn rq(id: u64, flow: FlowId, sector: u64) -> Request {
        Request::new(RequestId(id), flow, Direction::Read, true, sector, 8)
    }

    fn next(p: &mut MqDeadline, now: Time) -> Request {
        match p.dispatch(now) {
            Decision::Dispatch(r) => r,
            other => panic!("expected a dispatch at {now} ns, got {other:?}"),
        }
    }

    #[test]
    fn rt_before_be_before_idle_and_lower_levels_wait_for_in_flight() {
        // Inserted lowest level first and at the lowest sectors, so neither age nor position favours RT: strict
        // priority alone orders them. A lower level also waits while a higher one still has a request on the
        // device (Nothing, although requests are queued), and goes as soon as it completes.
        let mut p = policy(&[]);
        p.insert(rq(0, IDLE, 100), 0);
        p.insert(rq(1, BE, 200), 0);
        p.insert(rq(2, RT, 300), 0);
        let mut order = Vec::new();
        for _ in 0..3 {
            let r = next(&mut p, MS);
            order.push(r.flow);
            assert_eq!(
                p.dispatch(MS),
                Decision::Nothing,
                "a lower level must wait for {:?}",
                r.flow
            );
            p.completed(&r, 2 * MS);
        }
        assert_eq!(order, vec![RT, BE, IDLE]);
        assert_eq!(p.queued(), 0);
    }

    #[test]
    fn unknown_flow_counts_as_best_effort() {
        // A flow never announced is BE: it goes after RT and before IDLE.
        let mut p = policy(&[]);
        p.insert(rq(0, IDLE, 100), 0);
        p.insert(rq(1, FlowId(99), 200), 0);
        p.insert(rq(2, RT, 300), 0);
        let mut order = Vec::new();
        for _ in 0..3 {
            let r = next(&mut p, MS);
            order.push(r.id.0);
            p.completed(&r, MS);
        }
        assert_eq!(order, vec![2, 1, 0]);
    }

    #[test]
    fn aged_be_request_is_served_while_rt_keeps_arriving() {
        // One BE read at t=0, then an RT read every millisecond, each dispatched and completed before the next one
        // arrives, so RT always has something queued and strict priority alone would starve BE forever. At
        // t = prio_aging_expire (10 s) the BE request is old enough and two levels are busy: it must go then, and
        // not a millisecond before.
        let mut p = policy(&[]);
        p.insert(rq(0, BE, 0), 0);
        let mut served_at = None;
        let mut t = 0;
        let mut id = 1;
        while t <= 11 * SEC {
            p.insert(rq(id, RT, id * 1000), t);
            id += 1;
            let r = next(&mut p, t);
            p.completed(&r, t);
            if r.flow == BE {
                served_at = Some(t);
                break;
            }
            t += MS;
        }
        assert_eq!(served_at, Some(DEFAULT_PRIO_AGING_EXPIRE_MS as Time * MS));
    }

    #[test]
    fn aged_idle_request_goes_before_younger_be() {
        // Aging covers IDLE too: an IDLE request older than prio_aging_expire (100 ms here) goes before a younger
        // BE one; before it has aged, strict priority serves BE first.
        let mut p = policy(&["prio_aging_expire=100"]);
        p.insert(rq(0, IDLE, 500), 0);
        p.insert(rq(1, BE, 100), 150 * MS);
        assert_eq!(next(&mut p, 150 * MS).id.0, 0, "the aged IDLE request goes first");
        let mut p = policy(&["prio_aging_expire=100"]);
        p.insert(rq(0, IDLE, 500), 0);
        p.insert(rq(1, BE, 100), 50 * MS);
        assert_eq!(next(&mut p, 60 * MS).id.0, 1, "not aged yet: strict priority");
    }

    #[test]
    fn batches_continue_from_the_last_position() {
        // Within one level a batch climbs from the start of the last dispatched request (latest_pos), here 500, so
        // the later-inserted 700 and 900 go before 100; with nothing left above, the batch wraps to 100.
        let mut p = policy(&[]);
        p.insert(rq(0, BE, 500), 0);
        assert_eq!(next(&mut p, 0).sector, 500);
        for (id, sector) in [(1, 100), (2, 900), (3, 700)] {
            p.insert(rq(id, BE, sector), MS);
        }
        let order: Vec<u64> = (0..3).map(|_| next(&mut p, MS).sector).collect();
        assert_eq!(order, vec![700, 900, 100]);
    }

    // A batch takes fifo_batch requests in sector order; only when it ends is the FIFO consulted, and an expired
    // request then starts the next batch. With fifo_batch=2, A (sector 1000, inserted at 0, due at 500 ms) and
    // B, C, D (100, 200, 300, inserted at 10 ms): at 600 ms the first batch is B and C, the second starts at the
    // expired A, and D follows; at 100 ms, with nothing expired, the order is plain sector order.
    #[test]
    fn a_batch_of_fifo_batch_requests_ends_before_the_fifo_is_consulted() {
        let order_at = |now: Time| {
            let mut p = policy(&["fifo_batch=2"]);
            p.insert(rq(0, BE, 1000), 0);
            for (id, sector) in [(1, 100), (2, 200), (3, 300)] {
                p.insert(rq(id, BE, sector), 10 * MS);
            }
            (0..4).map(|_| next(&mut p, now).sector).collect::<Vec<u64>>()
        };
        assert_eq!(order_at(600 * MS), vec![100, 200, 1000, 300]);
        assert_eq!(order_at(100 * MS), vec![100, 200, 300, 1000]);
    }

    // A flow that exited is forgotten: a request that still arrives under its id counts as best effort.
    #[test]
    fn an_exited_flow_counts_as_best_effort() {
        let mut p = policy(&[]);
        p.flow_exited(RT, 0);
        p.insert(rq(0, RT, 500), 0);
        p.insert(rq(1, BE, 100), 0);
        assert_eq!(next(&mut p, 0).sector, 100, "one level, sector order");
    }

    #[test]
    fn depth_limit_caps_async_and_writes_only() {
        // Default async_depth is nr_requests, so nothing is limited; with async_depth=16, async reads and all
        // writes get at most 16 tags (and never more than nr_requests), sync reads always get all of them.
        let mut dev = DeviceInfo::hdd();
        dev.nr_requests = 256;
        let p = policy_on(&dev, &[]);
        assert_eq!(p.async_depth, 256);
        for (dir, sync) in [
            (Direction::Read, true),
            (Direction::Read, false),
            (Direction::Write, true),
        ] {
            assert_eq!(p.depth_limit(dir, sync, 256), 256);
        }
        let p = policy(&["async_depth=16"]);
        assert_eq!(p.depth_limit(Direction::Read, true, 64), 64);
        assert_eq!(p.depth_limit(Direction::Read, false, 64), 16);
        assert_eq!(p.depth_limit(Direction::Write, true, 64), 16);
        assert_eq!(p.depth_limit(Direction::Write, false, 64), 16);
        assert_eq!(p.depth_limit(Direction::Write, false, 8), 8);
    }

    #[test]
    fn rt_wait_bound_under_bounded_load() {
        // The RT level is served whenever it has requests queued (strict priority; aging is pushed out of reach
        // with prio_aging_expire at its maximum), and its batching, direction choice and write starvation are
        // legacy deadline's. So once an RT request R is queued past its deadline, every dispatch until R's is an RT
        // one and the legacy bound (derived in deadline's `wait_bound_under_bounded_load`) holds for RT requests,
        // counting only RT requests ahead of R. Lower levels have no such bound without aging.
        crate::deadline::tests::check_wait_bound("mq-deadline", &["prio_aging_expire=3600000"], Some(IoClass::Rt));
    }

    #[test]
    fn merges_stay_within_a_level() {
        // Contiguous requests of different levels are never merged; of the same level they are.
        let mut p = policy(&[]);
        p.insert(rq(0, BE, 100), 0);
        p.insert(rq(1, RT, 108), 0);
        p.insert(rq(2, BE, 108), 0);
        let a = next(&mut p, MS);
        assert_eq!((a.id.0, a.parts()), (1, 1));
        p.completed(&a, MS);
        let b = next(&mut p, MS);
        assert_eq!((b.sector, b.sectors, b.parts()), (100, 16, 2));
    }

    #[test]
    fn check_invariants_catches_a_broken_in_flight_count() {
        let mut p = policy_on(&DeviceInfo::ssd(), &[]);
        p.insert(Request::new(RequestId(1), BE, Direction::Read, true, 0, 8), 0);
        p.insert(Request::new(RequestId(2), BE, Direction::Read, true, 800, 8), 0);
        assert!(matches!(p.dispatch(0), Decision::Dispatch(_)));
        p.check_invariants().expect("healthy");
        p.in_flight[0] += 1;
        assert_eq!(
            p.check_invariants().expect_err("in flight off by one").what,
            "mq-deadline"
        );
    }
}
