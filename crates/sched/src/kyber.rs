//! KYBER (blk-mq, for fast devices), kernel `kyber-iosched.c` in its current, histogram-based version
//! (docs/SCHEDULERS.md, kyber).
//!
//! Requests wait in one FIFO per scheduling domain (READ, WRITE, DISCARD, OTHER). Sending one to the device takes a
//! token of its domain; a domain's tokens (device-wide) are its current queue depth. Domains are served round-robin,
//! in batches. On completion, each request's total latency (since insert) and I/O latency (since dispatch) go into
//! per-domain histograms (with one latency timeout per domain, shared by both); a timer 100 ms after completions
//! turns them into percentiles and rescales the depths: when
//! the device looks congested (some domain's p90 I/O latency misses its target) the domains meeting their target
//! are throttled, and domains missing their target get more depth.
//!
//! A policy has no timer of its own: the depth timer is evaluated lazily at the next insert, dispatch or completion
//! at or after its expiry, and when requests wait for tokens [`Kyber::dispatch`] answers `WaitUntil` the expiry so
//! the adjustment is not late when it matters. Nothing queued means `Nothing`, never `WaitUntil`.

use crate::device::DeviceInfo;
use crate::merge::{absorb, IntMap, MergeIndex};
use crate::scheduler::{BlockLayer, Scheduler};
use crate::tunables::{TunableSpec, TunableValues};
use crate::types::{Decision, Direction, FlowId, FlowInfo, Request, Time, MS, SEC};
use std::collections::VecDeque;

/// Scheduling domain of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Domain {
    /// Reads, sync or async.
    Read = 0,
    /// Writes, sync or async.
    Write = 1,
    /// Discards (our request type has none; kept so the token and latency tables match Kyber's).
    Discard = 2,
    /// Everything else (flushes and the like; our request type has none).
    Other = 3,
}

impl Domain {
    /// All domains in round-robin order.
    pub const ALL: [Domain; 4] = [Domain::Read, Domain::Write, Domain::Discard, Domain::Other];

    /// Index for per-domain arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The domain of `rq`: reads to READ, writes to WRITE.
    pub fn of(rq: &Request) -> Domain {
        match rq.dir {
            Direction::Read => Domain::Read,
            Direction::Write => Domain::Write,
        }
    }
}

/// Number of scheduling domains.
pub const DOMAINS: usize = 4;

/// Domains with latency statistics and adaptive depth (READ, WRITE, DISCARD; OTHER has no target).
pub const LATENCY_DOMAINS: usize = 3;

/// Most tokens (the initial and largest depth) per domain, requests: 256 reads, 128 writes, 64 discards, 16 other.
/// Reads get the most because they are what processes wait for; "other" operations are rare and heavy.
pub const MAX_DEPTH: [u32; DOMAINS] = [256, 128, 64, 16];

/// Batch size per domain, requests: how many the round-robin takes from a domain before moving on (16 reads,
/// 8 writes, 1 discard, 1 other), so reads get the larger share of dispatch opportunities.
pub const BATCH_SIZE: [u32; DOMAINS] = [16, 8, 1, 1];

/// Latency target of discards, ns (5 s, fixed in Kyber): discards are slow and nobody waits for them.
pub const DISCARD_LAT: Time = 5 * SEC;

/// Histogram buckets per domain and latency type (8).
pub const BUCKETS: usize = 8;

/// Buckets 0..GOOD_BUCKETS are at or below the target (4): bucket width is target / 4, so bucket 3 ends at the
/// target and buckets 4..7 cover up to twice the target and beyond.
pub const GOOD_BUCKETS: u8 = 4;

/// log2 of the number of good buckets: bucket width is `target >> LATENCY_SHIFT`, and depth scales by `(b+1) >> 2`.
pub const LATENCY_SHIFT: u32 = 2;

/// Delay of the depth-adjustment timer after a completion, ns (100 ms, `HZ/10`): adjust often enough to follow
/// load changes, rarely enough to collect samples.
pub const TIMER_DELAY: Time = 100 * MS;

/// Samples after which a percentile is computed at the next timer run (500): enough for a stable p99.
pub const MIN_SAMPLES: u32 = 500;

/// How long after the first timer evaluation that finds samples a domain's percentiles are computed even with fewer
/// than 500 samples, ns (1 s, the kernel's `latency_timeout = jiffies + HZ`): a lightly loaded domain still gets
/// adjusted.
pub const SAMPLE_WINDOW: Time = SEC;

/// Share of scheduler tags async requests may hold, percent (75): keeps tags free for sync requests.
pub const ASYNC_PERCENT: u32 = 75;

/// Percentile of I/O latency that decides congestion (p90): not too sensitive to outliers.
pub const CONGESTION_PERCENTILE: u32 = 90;

/// Percentile of total latency that scales a domain's depth (p99).
pub const DEPTH_PERCENTILE: u32 = 99;

/// Largest accepted latency target, ns (60 s).
pub const MAX_LAT_NSEC: i64 = 60_000_000_000;

/// Kyber tunables, named and scaled as in sysfs.
pub static TUNABLES: [TunableSpec; 2] = [
    TunableSpec::new(
        "read_lat_nsec",
        2_000_000,
        1,
        MAX_LAT_NSEC,
        "ns",
        "target latency of reads",
    ),
    TunableSpec::new(
        "write_lat_nsec",
        10_000_000,
        1,
        MAX_LAT_NSEC,
        "ns",
        "target latency of writes",
    ),
];

/// Latency type: index into a domain's pair of histograms.
const TOTAL: usize = 0;
/// I/O latency (since dispatch).
const IO: usize = 1;

/// Bucket of `latency` for `target`: width `target/4` (at least 1 ns), latency exactly at the target in bucket 3, 0
/// in bucket 0, anything beyond 2x the target in bucket 7.
pub fn bucket(latency: Time, target: Time) -> usize {
    if latency == 0 {
        return 0;
    }
    let width = (target >> LATENCY_SHIFT).max(1);
    usize::try_from((latency - 1) / width)
        .unwrap_or(BUCKETS - 1)
        .min(BUCKETS - 1)
}

/// A latency histogram of one domain and type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Histogram {
    /// Sample counts per bucket.
    pub buckets: [u32; BUCKETS],
}

impl Histogram {
    fn add(&mut self, latency: Time, target: Time) {
        if let Some(c) = self.buckets.get_mut(bucket(latency, target)) {
            *c = c.saturating_add(1);
        }
    }

    /// The bucket holding the `p`-th percentile, once there are enough samples; the histogram is then cleared.
    /// `None` while there is not enough data.
    ///
    /// "Enough" follows the kernel's `calculate_percentile`: 500 samples, or the domain's latency timeout has
    /// passed. `timeout` is that timeout, one per domain and shared by the domain's two histograms (I/O and total
    /// latency): the first evaluation that finds samples arms it one second ahead, and any computation (of either
    /// histogram) disarms it. So after the I/O histogram is computed at the timeout, the total-latency histogram's
    /// evaluation in the same timer run re-arms it and waits: at low IOPS the p99 that sets the depth is recomputed
    /// only every 500 completions.
    fn percentile(&mut self, p: u32, now: Time, timeout: &mut Option<Time>) -> Option<u8> {
        let total: u64 = self.buckets.iter().map(|&c| u64::from(c)).sum();
        if total == 0 {
            return None;
        }
        let deadline = *timeout.get_or_insert(now.saturating_add(SAMPLE_WINDOW));
        if total < u64::from(MIN_SAMPLES) && now < deadline {
            return None;
        }
        *timeout = None;
        let mut rank = (total * u64::from(p)).div_ceil(100);
        let mut found = BUCKETS - 1;
        for (b, &c) in self.buckets.iter().enumerate().take(BUCKETS - 1) {
            if u64::from(c) >= rank {
                found = b;
                break;
            }
            rank -= u64::from(c);
        }
        *self = Histogram::default();
        u8::try_from(found).ok()
    }
}

/// A queued request.
#[derive(Debug)]
struct Queued {
    rq: Request,
    inserted: Time,
}

/// What is remembered of a dispatched request until it completes.
#[derive(Debug, Clone, Copy)]
struct Dispatched {
    domain: usize,
    inserted: Time,
    dispatched: Time,
}

/// The Kyber scheduler.
pub struct Kyber {
    /// Latency target per latency domain, ns.
    target: [Time; LATENCY_DOMAINS],
    max_sectors: u32,
    queues: [VecDeque<u64>; DOMAINS],
    entries: IntMap<u64, Queued>,
    index: MergeIndex,
    next_handle: u64,
    queued_parts: usize,
    /// Current depth (tokens) per domain.
    depth: [u32; DOMAINS],
    /// Tokens held by requests on the device, per domain.
    in_use: [u32; DOMAINS],
    cur_domain: usize,
    batching: u32,
    in_flight: IntMap<u64, Dispatched>,
    /// [domain][TOTAL or IO] latency histograms.
    hist: [[Histogram; 2]; LATENCY_DOMAINS],
    /// Per domain, the time after which a percentile is computed with fewer than 500 samples (the kernel's
    /// `latency_timeout`, shared by the domain's two histograms); `None` when disarmed.
    latency_timeout: [Option<Time>; LATENCY_DOMAINS],
    /// Last p99 total-latency bucket per domain, kept for the next congested timer run.
    remembered_p99: [Option<u8>; LATENCY_DOMAINS],
    /// When the depth timer expires, ns.
    timer: Option<Time>,
}

impl Kyber {
    /// Kyber for `dev` with read and write latency targets in ns.
    pub fn new(dev: &DeviceInfo, read_lat: Time, write_lat: Time) -> Self {
        Kyber {
            target: [read_lat, write_lat, DISCARD_LAT],
            max_sectors: dev.max_sectors.max(1),
            queues: Default::default(),
            entries: IntMap::default(),
            index: MergeIndex::new(),
            next_handle: 0,
            queued_parts: 0,
            depth: MAX_DEPTH,
            in_use: [0; DOMAINS],
            cur_domain: 0,
            batching: 0,
            in_flight: IntMap::default(),
            hist: Default::default(),
            latency_timeout: [None; LATENCY_DOMAINS],
            remembered_p99: [None; LATENCY_DOMAINS],
            timer: None,
        }
    }

    /// Registry constructor.
    pub fn build(dev: &DeviceInfo, t: &TunableValues) -> Box<dyn Scheduler> {
        let ns = |k: &str| u64::try_from(t.get(k)).unwrap_or(1).max(1);
        Box::new(Kyber::new(dev, ns("read_lat_nsec"), ns("write_lat_nsec")))
    }

    /// Current depth (tokens) of `d`, requests.
    pub fn depth(&self, d: Domain) -> u32 {
        self.depth[d.index()]
    }

    /// Tokens of `d` held by requests on the device.
    pub fn in_use(&self, d: Domain) -> u32 {
        self.in_use[d.index()]
    }

    /// When the depth timer expires, if armed, ns.
    pub fn timer(&self) -> Option<Time> {
        self.timer
    }

    fn run_timer_if_due(&mut self, now: Time) {
        if self.timer.is_some_and(|t| now >= t) {
            self.timer = None;
            self.adjust_depths(now);
        }
    }

    /// The timer: congestion from p90 I/O latency, then depth rescaling from p99 total latency.
    fn adjust_depths(&mut self, now: Time) {
        let mut congested = false;
        for (h, timeout) in self.hist.iter_mut().zip(self.latency_timeout.iter_mut()) {
            if h[IO]
                .percentile(CONGESTION_PERCENTILE, now, timeout)
                .is_some_and(|b| b >= GOOD_BUCKETS)
            {
                congested = true;
            }
        }
        let domains = self
            .hist
            .iter_mut()
            .zip(self.latency_timeout.iter_mut())
            .zip(self.remembered_p99.iter_mut())
            .zip(self.depth.iter_mut().zip(MAX_DEPTH));
        for (((h, timeout), remembered), (depth, max)) in domains {
            let mut p99 = h[TOTAL].percentile(DEPTH_PERCENTILE, now, timeout);
            // Domains reach enough samples at different times: keep the last p99 for the next congestion, and once
            // used under congestion, forget it so the domain is not throttled twice on the same data.
            if congested {
                p99 = p99.or(*remembered);
                *remembered = None;
            } else if p99.is_some() {
                *remembered = p99;
            }
            let Some(b) = p99 else { continue };
            if congested || b >= GOOD_BUCKETS {
                // Scale linearly with p99 vs target: p99 at 3/4 of the target gives 3/4 of the depth, at 2x
                // (bucket 7) twice the depth.
                let scaled = (u64::from(*depth) * (u64::from(b) + 1)) >> LATENCY_SHIFT;
                *depth = u32::try_from(scaled.clamp(1, u64::from(max))).unwrap_or(max);
            }
        }
    }

    /// Dispatches the head of domain `d` if it has a request and a free token.
    fn take(&mut self, d: usize, now: Time) -> Option<Request> {
        let h = *self.queues[d].front()?;
        if self.in_use[d] >= self.depth[d] {
            return None;
        }
        self.queues[d].pop_front();
        let q = self.entries.remove(&h)?;
        self.index.remove(h, &q.rq);
        self.in_use[d] += 1;
        self.batching += 1;
        self.queued_parts = self.queued_parts.saturating_sub(q.rq.parts());
        self.in_flight.insert(
            q.rq.id.0,
            Dispatched {
                domain: d,
                inserted: q.inserted,
                dispatched: now,
            },
        );
        Some(q.rq)
    }
}

impl Scheduler for Kyber {
    fn name(&self) -> &'static str {
        "kyber"
    }

    fn block_layer(&self) -> BlockLayer {
        BlockLayer::BlkMq
    }

    fn flow_started(&mut self, _flow: &FlowInfo, _now: Time) {}

    fn flow_exited(&mut self, _flow: FlowId, _now: Time) {}

    fn insert(&mut self, rq: Request, now: Time) {
        self.run_timer_if_due(now);
        let d = Domain::of(&rq).index();
        self.queued_parts += rq.parts();
        let entries = &self.entries;
        let merge = self
            .index
            .find(&rq, self.max_sectors, true, |h| entries.get(&h).map(|q| &q.rq));
        if let Some((h, kind, q)) = merge.and_then(|(h, kind)| self.entries.get_mut(&h).map(|q| (h, kind, q))) {
            self.index.remove(h, &q.rq);
            absorb(&mut q.rq, rq, kind);
            self.index.add(h, &q.rq);
            return;
        }
        let h = self.next_handle;
        self.next_handle += 1;
        self.index.add(h, &rq);
        self.entries.insert(h, Queued { rq, inserted: now });
        if let Some(q) = self.queues.get_mut(d) {
            q.push_back(h);
        }
    }

    fn dispatch(&mut self, now: Time) -> Decision {
        self.run_timer_if_due(now);
        if self.queued_parts == 0 {
            return Decision::Nothing;
        }
        if self.batching < BATCH_SIZE[self.cur_domain] {
            if let Some(rq) = self.take(self.cur_domain, now) {
                return Decision::Dispatch(rq);
            }
        }
        // Not entitled to more of this batch, or its domain is empty or out of tokens: start another batch with the
        // next domain that can dispatch (wrapping back to this one last).
        self.batching = 0;
        for _ in 0..DOMAINS {
            self.cur_domain = (self.cur_domain + 1) % DOMAINS;
            if let Some(rq) = self.take(self.cur_domain, now) {
                return Decision::Dispatch(rq);
            }
        }
        // Every domain with requests is out of tokens; their holders are on the device and will complete. If the
        // depth timer is armed, come back when it may grant more tokens.
        match self.timer {
            Some(t) if t > now => Decision::WaitUntil(t),
            _ => Decision::Nothing,
        }
    }

    fn completed(&mut self, rq: &Request, now: Time) {
        self.run_timer_if_due(now);
        let Some(f) = self.in_flight.remove(&rq.id.0) else {
            return;
        };
        if let Some(u) = self.in_use.get_mut(f.domain) {
            crate::counter::dec(u, "kyber in_use[domain]");
        }
        if let (Some(h), Some(&target)) = (self.hist.get_mut(f.domain), self.target.get(f.domain)) {
            h[TOTAL].add(now.saturating_sub(f.inserted), target);
            h[IO].add(now.saturating_sub(f.dispatched), target);
            let t = now.saturating_add(TIMER_DELAY);
            self.timer = Some(self.timer.map_or(t, |old| old.min(t)));
        }
    }

    fn queued(&self) -> usize {
        self.queued_parts
    }

    /// The queued count equals the parts of the held requests; every held request is in exactly one domain queue
    /// and the queues hold nothing else; each domain's tokens in use equal its requests on the device; the merge
    /// index names only held requests.
    fn check_invariants(&self) -> Result<(), crate::InvariantViolation> {
        use crate::ensure_invariant;
        let parts: usize = self.entries.values().map(|q| q.rq.parts()).sum();
        ensure_invariant!(
            parts == self.queued_parts,
            "kyber",
            "queued {} != {parts} held request parts",
            self.queued_parts
        );
        let in_queues: usize = self.queues.iter().map(VecDeque::len).sum();
        ensure_invariant!(
            in_queues == self.entries.len() && self.queues.iter().flatten().all(|h| self.entries.contains_key(h)),
            "kyber",
            "{in_queues} handles in the domain queues for {} held requests",
            self.entries.len()
        );
        for (d, &n) in self.in_use.iter().enumerate() {
            let held = self.in_flight.values().filter(|f| f.domain == d).count();
            ensure_invariant!(
                n as usize == held,
                "kyber",
                "domain {d}: {n} tokens in use != {held} requests on the device"
            );
        }
        self.index
            .check_invariants(self.entries.len(), |h| self.entries.get(&h).map(|q| &q.rq))
            .map_err(|e| crate::InvariantViolation::new("kyber merge index", e))
    }

    /// Async requests (writes without the sync flag) may hold only 75 % of the scheduler tags. Every read counts as
    /// sync here, as in Linux, where reads are always synchronous operations.
    fn depth_limit(&self, dir: Direction, sync: bool, nr_requests: u32) -> u32 {
        if dir == Direction::Read || sync {
            nr_requests
        } else {
            (u64::from(nr_requests) * u64::from(ASYNC_PERCENT) / 100).max(1) as u32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::RequestId;

    fn kyber() -> Kyber {
        Kyber::new(&DeviceInfo::ssd(), 2 * MS, 10 * MS)
    }

    fn rq(id: u64, dir: Direction) -> Request {
        // Spread out so that nothing merges.
        Request::new(RequestId(id), FlowId(0), dir, dir == Direction::Read, id * 1000, 8)
    }

    #[track_caller]
    fn dispatched(k: &mut Kyber, now: Time) -> Request {
        match k.dispatch(now) {
            Decision::Dispatch(r) => r,
            d => panic!("expected a dispatch, got {d:?}"),
        }
    }

    // The p-th percentile is the bucket holding the ceil(total x p / 100)-th sample: of 500 samples, 450 in bucket 0
    // and 50 in bucket 5, the 90th percentile (sample 450) is still in bucket 0 and the 99th (sample 495) in
    // bucket 5; 451 samples in bucket 0 would move the 90th nowhere but the 99th still lies beyond them.
    #[test]
    fn the_percentile_is_the_bucket_of_the_ranked_sample() {
        let mut h = Histogram::default();
        h.buckets[0] = 450;
        h.buckets[5] = 50;
        let mut timeout = None;
        assert_eq!(h.clone().percentile(99, 0, &mut timeout), Some(5));
        assert_eq!(h.percentile(90, 0, &mut timeout), Some(0));
    }

    #[test]
    fn queued_counts_the_requests_held() {
        let mut k = kyber();
        assert_eq!(k.queued(), 0);
        k.insert(rq(0, Direction::Read), 0);
        k.insert(rq(1, Direction::Write), 0);
        assert_eq!(k.queued(), 2);
    }

    #[test]
    fn buckets_split_at_the_target() {
        // Width target/4: exactly the target is the last good bucket (3), one ns more is the first bad one (4),
        // anything past twice the target is bucket 7.
        let t = 2 * MS;
        assert_eq!(bucket(0, t), 0);
        assert_eq!(bucket(t, t), 3);
        assert_eq!(bucket(t + 1, t), 4);
        assert_eq!(bucket(100 * t, t), 7);
        assert_eq!(bucket(100, 0), 7, "a zero target cannot divide by zero");
    }

    #[test]
    fn percentile_needs_500_samples_or_the_domain_timeout() {
        // 499 samples: the first evaluation arms the timeout (1 s ahead) and waits; the 500th sample: computed, the
        // histogram consumed and the timeout disarmed.
        let mut timeout = None;
        let mut h = Histogram::default();
        for _ in 0..499 {
            h.add(MS, 2 * MS);
        }
        assert_eq!(h.percentile(99, SEC / 2, &mut timeout), None);
        assert_eq!(timeout, Some(SEC / 2 + SEC));
        h.add(3 * MS, 2 * MS);
        assert_eq!(h.percentile(99, SEC / 2, &mut timeout), Some(1));
        assert_eq!(h.buckets.iter().sum::<u32>(), 0);
        assert_eq!(timeout, None);
        // A few samples are enough once the timeout, armed at the first evaluation that found them, has passed.
        h.add(3 * MS, 2 * MS);
        assert_eq!(h.percentile(99, 10 * SEC, &mut timeout), None);
        assert_eq!(h.percentile(99, 11 * SEC - 1, &mut timeout), None);
        assert_eq!(h.percentile(99, 11 * SEC, &mut timeout), Some(5));
    }

    #[test]
    fn the_latency_timeout_is_shared_by_a_domains_two_histograms() {
        // A domain at low IOPS: 10 completions, so both histograms hold 10 samples. When the timeout passes, the I/O
        // histogram (evaluated first in a timer run) is computed and disarms the shared timeout; the total-latency
        // histogram's evaluation right after re-arms it and waits another second. With a timeout per histogram
        // both would be computed in that run.
        let mut timeout = None;
        let (mut io, mut total) = (Histogram::default(), Histogram::default());
        for _ in 0..10 {
            io.add(MS, 2 * MS);
            total.add(MS, 2 * MS);
        }
        assert_eq!(io.percentile(90, 0, &mut timeout), None);
        assert_eq!(total.percentile(99, 0, &mut timeout), None);
        assert_eq!(io.percentile(90, SEC, &mut timeout), Some(1));
        assert_eq!(
            total.percentile(99, SEC, &mut timeout),
            None,
            "re-armed by the I/O computation"
        );
        assert_eq!(timeout, Some(2 * SEC));
        assert_eq!(total.percentile(99, 2 * SEC, &mut timeout), Some(1));
    }

    /// Every 10 ms a read and a write are inserted, dispatched at once, the write completes after `write_lat` and
    /// the read after `read_lat`; runs for `rounds` rounds starting at `start`. Returns the end time.
    fn load(k: &mut Kyber, start: Time, rounds: u64, read_lat: Time, write_lat: Time) -> Time {
        let mut t = start;
        for i in 0..rounds {
            let (r, w) = (rq(2 * i, Direction::Read), rq(2 * i + 1, Direction::Write));
            k.insert(r, t);
            k.insert(w, t);
            let a = dispatched(k, t);
            let b = dispatched(k, t);
            let (r, w) = if a.dir == Direction::Read { (a, b) } else { (b, a) };
            let mut done = [(t + read_lat, r), (t + write_lat, w)];
            done.sort_by_key(|d| d.0);
            for (at, rq) in &done {
                k.completed(rq, *at);
            }
            t += 10 * MS;
        }
        t
    }

    #[test]
    fn shrinks_write_depth_when_reads_miss_their_target() {
        // Reads take 5 ms on the device against a 2 ms target: p90 I/O latency in bucket 7, so the device is
        // congested (computed once per second: the domain's latency timeout). Writes meet their 10 ms target (1 ms,
        // bucket 0): each time their p99 total latency is known under congestion their depth is scaled by
        // (0+1)/4: 128 -> 32 -> 8 -> 2 -> 1. At 100 completions a second the p99 needs 500 samples (the shared
        // timeout is re-armed by the I/O computation just before it), so 5 s per step: nothing after 1.5 s, one
        // step by 7.5 s, all four by 30 s. Reads miss their target, so their depth would double, capped at 256.
        let mut k = kyber();
        let t = load(&mut k, 0, 150, 5 * MS, MS);
        assert_eq!(k.depth(Domain::Write), 128, "no p99 before 500 samples");
        let t = load(&mut k, t, 600, 5 * MS, MS);
        assert_eq!(k.depth(Domain::Write), 32);
        load(&mut k, t, 2250, 5 * MS, MS);
        assert_eq!(k.depth(Domain::Write), 1);
        assert_eq!(k.depth(Domain::Read), 256);
    }

    #[test]
    fn keeps_depths_when_every_domain_meets_its_target() {
        // No congestion and no domain missing its target: nothing to adjust. Run long enough (as long as the test
        // above, whose write depth shrinks four times) for the p90 and p99 to be computed many times: a wrong
        // congestion verdict would scale the write depth by (0+1)/4 each time.
        let mut k = kyber();
        let t = load(&mut k, 0, 300, MS, MS);
        assert_eq!((k.depth(Domain::Read), k.depth(Domain::Write)), (256, 128));
        load(&mut k, t, 2250, MS, MS);
        assert_eq!((k.depth(Domain::Read), k.depth(Domain::Write)), (256, 128));
    }

    #[test]
    fn grows_a_throttled_domain_back_when_it_misses_its_target() {
        // Writes throttled to depth 8 wait 30 ms in the scheduler before a 1 ms service: their total latency (31 ms)
        // misses the 10 ms target (bucket 7) while reads are fast and the device is not congested (I/O latencies
        // good). Kyber eases the throttling: depth * (7+1)/4, doubling per adjustment up to the maximum, 128. At 25
        // completions a second each adjustment waits for 500 samples (20 s): four of them in 104 s.
        let mut k = kyber();
        k.depth[Domain::Write.index()] = 8;
        let mut t = 0;
        let mut seen = vec![8];
        for i in 0..2600u64 {
            k.insert(rq(2 * i, Direction::Read), t);
            let r = dispatched(&mut k, t);
            assert_eq!(r.dir, Direction::Read);
            k.completed(&r, t + MS);
            k.insert(rq(2 * i + 1, Direction::Write), t + MS);
            let w = dispatched(&mut k, t + 31 * MS);
            assert_eq!(w.dir, Direction::Write);
            k.completed(&w, t + 32 * MS);
            if seen.last() != Some(&k.depth(Domain::Write)) {
                seen.push(k.depth(Domain::Write));
            }
            t += 40 * MS;
        }
        assert_eq!(seen, vec![8, 16, 32, 64, 128]);
    }

    #[test]
    fn tokens_limit_dispatch_per_domain() {
        // WRITE has 2 tokens: two writes go out, the third waits for a completion; reads have their own tokens.
        let mut k = kyber();
        k.depth[Domain::Write.index()] = 2;
        for i in 0..4 {
            k.insert(rq(10 + i, Direction::Write), 0);
        }
        let w1 = dispatched(&mut k, 0);
        dispatched(&mut k, 0);
        assert_eq!(k.in_use(Domain::Write), 2);
        assert_eq!(
            k.dispatch(0),
            Decision::Nothing,
            "no timer armed and no tokens: wait for a completion"
        );
        k.insert(rq(1, Direction::Read), 0);
        assert_eq!(dispatched(&mut k, 0).dir, Direction::Read);
        k.completed(&w1, MS);
        assert_eq!(dispatched(&mut k, MS).dir, Direction::Write);
        // Now the timer is armed (a completion happened): blocked on tokens, Kyber asks to be called at its expiry.
        // The kernel's timer runs HZ/10 after the completion: 100 ms, written out so that a wrong constant fails.
        assert_eq!(k.dispatch(MS), Decision::WaitUntil(MS + 100 * MS));
    }

    #[test]
    fn never_waits_with_nothing_queued() {
        // A completion arms the timer, but with nothing queued the answer is Nothing, not WaitUntil.
        let mut k = kyber();
        k.insert(rq(1, Direction::Read), 0);
        let r = dispatched(&mut k, 0);
        k.completed(&r, MS);
        assert_eq!(k.timer(), Some(MS + 100 * MS), "armed HZ/10 after the completion");
        assert_eq!(k.dispatch(MS), Decision::Nothing);
    }

    #[test]
    fn round_robin_in_batches_between_domains() {
        // With plenty of tokens: 16 reads, then 8 writes, then 16 reads, then 8 writes.
        let mut k = kyber();
        for i in 0..40 {
            k.insert(rq(2 * i, Direction::Read), 0);
            k.insert(rq(2 * i + 1, Direction::Write), 0);
        }
        let order: Vec<Direction> = (0..48).map(|_| dispatched(&mut k, 0).dir).collect();
        let mut expected = Vec::new();
        for _ in 0..2 {
            expected.extend([Direction::Read; 16]);
            expected.extend([Direction::Write; 8]);
        }
        assert_eq!(order, expected);
    }

    #[test]
    fn async_requests_get_75_percent_of_the_tags() {
        // Async writes: 48 of 64 tags. Sync writes and reads (always sync in Linux): all 64.
        let k = kyber();
        assert_eq!(k.depth_limit(Direction::Write, false, 64), 48);
        assert_eq!(k.depth_limit(Direction::Write, true, 64), 64);
        assert_eq!(k.depth_limit(Direction::Read, true, 64), 64);
        assert_eq!(k.depth_limit(Direction::Write, false, 1), 1);
    }

    #[test]
    fn check_invariants_catches_a_broken_token_count() {
        let mut k = kyber();
        k.insert(rq(1, Direction::Read), 0);
        k.insert(rq(2, Direction::Write), 0);
        assert!(matches!(k.dispatch(0), Decision::Dispatch(_)));
        k.check_invariants().expect("healthy");
        k.in_use[2] += 1;
        assert_eq!(k.check_invariants().expect_err("tokens off by one").what, "kyber");
        k.in_use[2] -= 1;
        k.queued_parts += 1;
        assert!(k.check_invariants().is_err());
    }
}
