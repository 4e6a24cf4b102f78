//! The conformance checker every policy must pass.
//!
//! It plays a seeded random sequence of flows starting and exiting, inserts (sequential, random, and contiguous
//! ones that invite merging), dispatches under a bounded number of tags, out-of-order completions and timer expiries,
//! then stops arrivals and drains. After every call it checks the contract of [`Scheduler`]:
//!
//! - every inserted request is dispatched exactly once (directly or merged into another) and completed once;
//! - a merged request is one direction, contiguous, no longer than the device's maximum request size;
//! - `Nothing` comes only when nothing is queued, or while requests are in flight (a completion will call again);
//! - `WaitUntil` is strictly in the future and at most [`Config::max_wait_until`] ahead;
//! - [`Scheduler::queued`] always equals the number of inserted, undispatched requests;
//! - [`Scheduler::check_invariants`] holds after every call (each call is one numbered step);
//! - nothing panics, and everything drains once arrivals stop.
//!
//! [`Config::from_seed`] draws the whole configuration (device, flows, load, write and sync shares, tunables within
//! each policy's [`TunableSpec`] ranges) from one seed, so one number reproduces a failure: errors name the seed and
//! the step, and the integration test reruns one seed given in [`SEED_ENV`].
//!
//! The returned [`Report`] holds each request's insert and dispatch times, so a policy's own tests can check the
//! wait bound that policy promises.

use crate::device::DeviceInfo;
use crate::registry;
use crate::scheduler::Scheduler;
use crate::tunables::TunableSpec;
use crate::types::{Decision, Direction, FlowId, FlowInfo, GroupId, IoClass, Request, RequestId, Time, MS, SEC, US};
use std::collections::{BTreeMap, HashMap};

/// Environment variable that names one seed for the seeded conformance test to rerun
/// (`BFQ_CONFORMANCE_SEED=1234 cargo test -p bfq-sched --test conformance`).
pub const SEED_ENV: &str = "BFQ_CONFORMANCE_SEED";

/// Most simulated events (completions or timer expiries) the drain phase may take after arrivals stop. Every
/// configuration drawn here drains in far fewer; reaching it means a policy keeps answering without making
/// progress, and the run fails instead of stopping silently.
pub const MAX_DRAIN_STEPS: u64 = 10_000_000;

/// Longest simulated time the drain phase may take after arrivals stop (ns): a policy that has not sent every
/// queued request to the device by then is starving someone, and the run fails.
pub const MAX_DRAIN_TIME: Time = 600 * SEC;

/// Parameters of one conformance run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Seed of the random sequence.
    pub seed: u64,
    /// Random operations before arrivals stop (then the run drains).
    pub ops: usize,
    /// The device the policy is built for; its `queue_depth` is the tag limit.
    pub device: DeviceInfo,
    /// Most flows alive at once.
    pub max_flows: usize,
    /// Inserts are skipped while this many requests are queued, which keeps the offered load bounded.
    pub max_queued: usize,
    /// Each dispatched request completes within this time after dispatch (ns).
    pub max_service: Time,
    /// Random time steps between operations are shorter than this (ns); only jumps straight to the next completion
    /// or to the policy's `WaitUntil` time can be longer. So a completion is noticed, and the freed tag offered to
    /// the policy, less than `max_step` after it is due: while a policy that never waits has requests queued, it
    /// dispatches at least once every `max_service + max_step`.
    pub max_step: Time,
    /// Largest accepted `WaitUntil` horizon (ns).
    pub max_wait_until: Time,
    /// Share of inserts that are writes, in percent.
    pub write_percent: u32,
    /// Share of writes that are sync (reads always are), in percent.
    pub sync_write_percent: u32,
    /// Tunables passed to the policy.
    pub tunables: Vec<String>,
}

impl Config {
    /// 12 000 operations on `device` with the given seed: up to 16 flows, 48 queued requests, 0-4 ms service, time
    /// steps under 3 ms.
    pub fn new(seed: u64, device: DeviceInfo) -> Self {
        Config {
            seed,
            ops: 12_000,
            device,
            max_flows: 16,
            max_queued: 48,
            max_service: 4 * MS,
            max_step: 3 * MS,
            max_wait_until: SEC,
            write_percent: 30,
            sync_write_percent: 30,
            tunables: Vec::new(),
        }
    }

    /// A configuration for policy `name` drawn entirely from `seed`: a rotational or non-rotational device with
    /// 1-32 hardware tags, 1-32 flows, 4-128 queued requests, 0-100 % writes of which 0-100 % sync, 0.1-10 ms
    /// service, time steps under 0.1-5 ms, and each tunable either left at its default or drawn from its
    /// [`TunableSpec`] range (time tunables at most one second, so that the wait bound of one second holds).
    /// Unknown policy names get no tunables (the run then reports the unknown name).
    pub fn from_seed(seed: u64, name: &str) -> Self {
        let mut rng = Rng(seed ^ 0xC0F1_6000_5EED, Vec::new());
        let mut device = if rng.chance(50) {
            DeviceInfo::hdd()
        } else {
            DeviceInfo::ssd()
        };
        device.queue_depth = 1 + rng.below(32) as u32;
        device.max_sectors = 8 << rng.below(8);
        let mut cfg = Config::new(seed, device);
        cfg.ops = 3_000 + rng.below(9_000) as usize;
        cfg.max_flows = 1 + rng.below(32) as usize;
        cfg.max_queued = 4 + rng.below(125) as usize;
        cfg.max_service = 100 * US + rng.below(10 * MS - 100 * US);
        cfg.max_step = 100 * US + rng.below(5 * MS - 100 * US);
        cfg.write_percent = rng.below(101) as u32;
        cfg.sync_write_percent = rng.below(101) as u32;
        if let Some(desc) = registry::find(name) {
            for spec in desc.tunables {
                if rng.chance(50) {
                    let v = draw_tunable(&mut rng, spec, &cfg.device);
                    cfg.tunables.push(format!("{}={v}", spec.name));
                }
            }
        }
        cfg
    }
}

/// A value for `spec` within its range: its minimum, its maximum, or a value around its default (half to twice),
/// each equally likely. Millisecond values are capped at 1 000 and microsecond ones at 1 000 000, the checker's
/// bound on how far ahead a policy may wait.
fn draw_tunable(rng: &mut Rng, spec: &TunableSpec, dev: &DeviceInfo) -> i64 {
    let cap = match spec.unit {
        "ms" => 1_000,
        "us" => 1_000_000,
        _ => i64::MAX,
    };
    let (lo, hi) = (spec.min, spec.max.min(cap).max(spec.min));
    let v = match rng.below(3) {
        0 => lo,
        1 => hi,
        _ => {
            let d = spec.default_for(dev).clamp(lo, hi);
            let (a, b) = ((d / 2).max(lo), d.saturating_mul(2).clamp(lo, hi).max(1));
            a + rng.below((b - a + 1).max(1) as u64) as i64
        }
    };
    v.clamp(lo, hi)
}

/// What one request went through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// Request id.
    pub id: RequestId,
    /// Issuing flow.
    pub flow: FlowId,
    /// Its flow's class.
    pub class: IoClass,
    /// Direction.
    pub dir: Direction,
    /// Sync flag.
    pub sync: bool,
    /// Insert time (ns).
    pub inserted: Time,
    /// Dispatch time (ns).
    pub dispatched: Time,
}

impl RequestRecord {
    /// Time spent queued in the policy (ns).
    pub fn wait(&self) -> Time {
        self.dispatched - self.inserted
    }
}

/// Outcome of a successful run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// One record per inserted request, in dispatch order.
    pub records: Vec<RequestRecord>,
    /// Requests sent to the device (merged ones count once).
    pub device_requests: u64,
    /// `WaitUntil` answers seen.
    pub waits: u64,
    /// Simulated time at the end of the drain (ns).
    pub end: Time,
}

impl Report {
    /// Longest wait of the requests matching `pred` (ns).
    pub fn max_wait(&self, pred: impl Fn(&RequestRecord) -> bool) -> Time {
        self.records
            .iter()
            .filter(|r| pred(r))
            .map(RequestRecord::wait)
            .max()
            .unwrap_or(0)
    }
}

/// SplitMix64: a tiny, well-mixed, seedable generator, so the checker needs no dependency.
/// The harness's source of choices: a splitmix64 stream, optionally preceded by a script of bytes (the fuzzer's
/// input, see [`run_script`]) that decides the choices until it runs out.
struct Rng(u64, Vec<u8>);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        if !self.1.is_empty() {
            // As many script bytes as `n` needs (the script is stored reversed, so popping takes them in order).
            let bytes = if n <= 1 << 8 {
                1
            } else if n <= 1 << 16 {
                2
            } else {
                8
            };
            let mut v = 0u64;
            for _ in 0..bytes {
                v = (v << 8) | u64::from(self.1.pop().unwrap_or(0));
            }
            return v % n;
        }
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

struct FlowState {
    info: FlowInfo,
    next_sector: u64,
    seeky: bool,
}

struct Pending {
    flow: FlowId,
    class: IoClass,
    dir: Direction,
    sync: bool,
    sector: u64,
    sectors: u32,
    inserted: Time,
}

struct Harness {
    cfg: Config,
    rng: Rng,
    policy: Box<dyn Scheduler>,
    now: Time,
    flows: BTreeMap<FlowId, FlowState>,
    next_flow: u32,
    next_id: u64,
    pending: HashMap<RequestId, Pending>,
    /// (completion time, sequence) -> request
    in_flight: BTreeMap<(Time, u64), Request>,
    seq: u64,
    wakeup: Option<Time>,
    report: Report,
    last_flow: Option<FlowId>,
    last_kind: Option<(bool, bool)>,
    /// Calls made to the policy so far: the step a failure is reported at.
    step: u64,
}

/// Runs the conformance sequence against the registered policy `name`.
pub fn run(name: &str, cfg: &Config) -> Result<Report, String> {
    let policy = registry::build(name, &cfg.device, &cfg.tunables).map_err(|e| e.to_string())?;
    run_policy(policy, cfg)
}

/// Most operations a script run plays before it drains (bounds a fuzzer's run time per input).
pub const MAX_SCRIPT_OPS: usize = 4_000;

/// Runs the conformance checker on `name` with the choices taken from `script` (a fuzzer's input): its first 8
/// bytes seed [`Config::from_seed`] (device, flows, load, tunables), and the rest decide the harness's operations,
/// one or a few bytes per choice, until they run out (then the seeded stream goes on). The run plays one operation
/// per script byte, at most [`MAX_SCRIPT_OPS`], then drains. Every contract of the module doc is checked.
pub fn run_script(name: &str, script: &[u8]) -> Result<Report, String> {
    let (head, rest) = script.split_at(script.len().min(8));
    let mut seed = [0u8; 8];
    seed[..head.len()].copy_from_slice(head);
    let mut cfg = Config::from_seed(u64::from_le_bytes(seed), name);
    cfg.ops = rest.len().min(MAX_SCRIPT_OPS);
    let policy = registry::build(name, &cfg.device, &cfg.tunables).map_err(|e| e.to_string())?;
    run_with(policy, &cfg, rest.iter().rev().copied().collect())
}

/// Runs the conformance sequence against an already built policy.
pub fn run_policy(policy: Box<dyn Scheduler>, cfg: &Config) -> Result<Report, String> {
    run_with(policy, cfg, Vec::new())
}

fn run_with(policy: Box<dyn Scheduler>, cfg: &Config, script: Vec<u8>) -> Result<Report, String> {
    let mut h = Harness {
        cfg: cfg.clone(),
        rng: Rng(cfg.seed ^ 0x005E_ED0F_B0F0, script),
        policy,
        now: 0,
        flows: BTreeMap::new(),
        next_flow: 0,
        next_id: 0,
        pending: HashMap::new(),
        in_flight: BTreeMap::new(),
        seq: 0,
        wakeup: None,
        report: Report::default(),
        last_flow: None,
        last_kind: None,
        step: 0,
    };
    let name = h.policy.name();
    h.verify("construction")
        .map_err(|e| format!("{name}, seed {}, step 0: {e}", cfg.seed))?;
    h.play()
        .map_err(|e| format!("{name}, seed {}, step {}: {e}", cfg.seed, h.step))?;
    h.drain()
        .map_err(|e| format!("{name}, seed {}, step {} (drain): {e}", cfg.seed, h.step))?;
    Ok(h.report)
}

impl Harness {
    fn play(&mut self) -> Result<(), String> {
        for _ in 0..4 {
            self.start_flow()?;
        }
        for _ in 0..self.cfg.ops {
            let r = self.rng.below(100);
            match r {
                0..=2 => self.start_flow()?,
                3..=4 => self.exit_flow()?,
                5..=49 => self.insert()?,
                50..=54 => {
                    // A plug flush: one flow issues several contiguous requests at once, inviting merges.
                    let n = 2 + self.rng.below(5);
                    for _ in 0..n {
                        self.insert_for(None, true)?;
                    }
                }
                55..=89 => self.advance()?,
                _ => {}
            }
            self.pump()?;
        }
        Ok(())
    }

    fn drain(&mut self) -> Result<(), String> {
        let deadline = self.now + MAX_DRAIN_TIME;
        let mut steps = 0u64;
        loop {
            self.pump()?;
            let next_done = self.in_flight.keys().next().map(|k| k.0);
            let next = match (next_done, self.wakeup) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => {
                    if self.pending.is_empty() {
                        break;
                    }
                    return Err(format!(
                        "{} requests queued, none in flight, and no timer: stuck",
                        self.pending.len()
                    ));
                }
            };
            if next > deadline {
                return Err(format!(
                    "not drained {} s after arrivals stopped ({} queued)",
                    MAX_DRAIN_TIME / SEC,
                    self.pending.len()
                ));
            }
            self.now = self.now.max(next);
            self.complete_due()?;
            steps += 1;
            if steps > MAX_DRAIN_STEPS {
                return Err(format!(
                    "drain did not converge in {MAX_DRAIN_STEPS} events ({} queued, {} in flight)",
                    self.pending.len(),
                    self.in_flight.len()
                ));
            }
        }
        self.report.end = self.now;
        Ok(())
    }

    fn start_flow(&mut self) -> Result<(), String> {
        if self.flows.len() >= self.cfg.max_flows {
            return Ok(());
        }
        let id = FlowId(self.next_flow);
        self.next_flow += 1;
        let class = match self.rng.below(10) {
            0 => IoClass::Rt,
            1 => IoClass::Idle,
            _ => IoClass::Be,
        };
        let mut info = FlowInfo::new(id).with_class(class, self.rng.below(8) as u8);
        if self.rng.chance(20) {
            info = info.with_weight(1 + self.rng.below(1000) as u32);
        }
        if self.rng.chance(20) {
            info = info.with_group(GroupId(1 + self.rng.below(2) as u32));
        }
        self.policy.flow_started(&info, self.now);
        let cap = self.cfg.device.capacity_sectors.max(1 << 20);
        let state = FlowState {
            info,
            next_sector: self.rng.below(cap / 2),
            seeky: self.rng.chance(40),
        };
        self.flows.insert(id, state);
        self.check("flow_started")
    }

    fn exit_flow(&mut self) -> Result<(), String> {
        if self.flows.len() <= 1 {
            return Ok(());
        }
        let k = self.rng.below(self.flows.len() as u64) as usize;
        let Some(id) = self.flows.keys().nth(k).copied() else {
            return Ok(());
        };
        self.flows.remove(&id);
        self.policy.flow_exited(id, self.now);
        self.check("flow_exited")
    }

    fn insert(&mut self) -> Result<(), String> {
        self.insert_for(None, false)
    }

    /// Inserts one request for `flow` (or a random live flow); `contiguous` forces it to follow the flow's last one.
    fn insert_for(&mut self, flow: Option<FlowId>, contiguous: bool) -> Result<(), String> {
        if self.pending.len() >= self.cfg.max_queued || self.flows.is_empty() {
            return Ok(());
        }
        let fid = match flow {
            Some(f) if self.flows.contains_key(&f) => f,
            _ if contiguous && self.last_flow.is_some_and(|f| self.flows.contains_key(&f)) => {
                self.last_flow.expect("checked")
            }
            _ => {
                let k = self.rng.below(self.flows.len() as u64) as usize;
                let Some((&fid, _)) = self.flows.iter().nth(k) else {
                    return Ok(());
                };
                fid
            }
        };
        self.last_flow = Some(fid);
        let max = self.cfg.device.max_sectors.clamp(1, 256) as u64;
        let sectors = if self.rng.chance(50) {
            8
        } else {
            1 + self.rng.below(max)
        } as u32;
        let cap = self.cfg.device.capacity_sectors.max(1 << 20);
        let (write, sync) = match (contiguous, self.last_kind) {
            (true, Some(kind)) => kind,
            _ => {
                let write = self.rng.chance(u64::from(self.cfg.write_percent));
                (write, !write || self.rng.chance(u64::from(self.cfg.sync_write_percent)))
            }
        };
        self.last_kind = Some((write, sync));
        let random = {
            let f = &self.flows[&fid];
            !contiguous && f.seeky && self.rng.chance(70)
        };
        let f = self.flows.get_mut(&fid).expect("flow exists");
        let sector = if random {
            self.rng.below(cap - 1024)
        } else {
            f.next_sector.min(cap - 1024)
        };
        f.next_sector = sector + u64::from(sectors);
        let id = RequestId(self.next_id);
        self.next_id += 1;
        let mut rq = Request::new(
            id,
            fid,
            if write { Direction::Write } else { Direction::Read },
            sync,
            sector,
            sectors,
        );
        rq.meta = self.rng.chance(2);
        self.pending.insert(
            id,
            Pending {
                flow: fid,
                class: f.info.class,
                dir: rq.dir,
                sync,
                sector,
                sectors,
                inserted: self.now,
            },
        );
        self.policy.insert(rq, self.now);
        self.check("insert")
    }

    fn advance(&mut self) -> Result<(), String> {
        let next_done = self.in_flight.keys().next().map(|k| k.0);
        let max_step = self.cfg.max_step.max(1);
        let step = match self.rng.below(4) {
            0 => self.rng.below((200 * US).min(max_step)),
            1 => self.rng.below(max_step),
            2 => next_done.map_or(0, |t| t.saturating_sub(self.now)),
            _ => self
                .wakeup
                .map_or(self.rng.below(MS.min(max_step)), |t| t.saturating_sub(self.now)),
        };
        self.now += step;
        self.complete_due()
    }

    fn complete_due(&mut self) -> Result<(), String> {
        while let Some((&(t, s), _)) = self.in_flight.iter().next() {
            if t > self.now {
                break;
            }
            let rq = self.in_flight.remove(&(t, s)).expect("present");
            self.policy.completed(&rq, self.now);
            self.check("completed")?;
            self.pump()?;
        }
        Ok(())
    }

    fn pump(&mut self) -> Result<(), String> {
        let tags = self.cfg.device.queue_depth.max(1) as usize;
        self.wakeup = None;
        while self.in_flight.len() < tags {
            let decision = self.policy.dispatch(self.now);
            // The step is the dispatch call; the queued count is compared once the request is accounted for.
            self.step += 1;
            match decision {
                Decision::Dispatch(rq) => {
                    self.accept(rq)?;
                    self.verify("dispatch")?;
                }
                Decision::WaitUntil(t) => {
                    self.verify("dispatch")?;
                    if t <= self.now {
                        return Err(format!("WaitUntil({t}) is not in the future (now {})", self.now));
                    }
                    if t - self.now > self.cfg.max_wait_until {
                        return Err(format!(
                            "WaitUntil {} ns ahead exceeds the bound {} ns",
                            t - self.now,
                            self.cfg.max_wait_until
                        ));
                    }
                    self.report.waits += 1;
                    self.wakeup = Some(t);
                    break;
                }
                Decision::Nothing => {
                    self.verify("dispatch")?;
                    if !self.pending.is_empty() && self.in_flight.is_empty() {
                        return Err(format!(
                            "Nothing with {} requests queued and none in flight",
                            self.pending.len()
                        ));
                    }
                    break;
                }
            }
        }
        Ok(())
    }

    fn accept(&mut self, rq: Request) -> Result<(), String> {
        let mut parts: Vec<(u64, u32)> = Vec::with_capacity(rq.parts());
        for id in std::iter::once(rq.id).chain(rq.merged.iter().copied()) {
            let p = self
                .pending
                .remove(&id)
                .ok_or_else(|| format!("request {} dispatched twice or never inserted", id.0))?;
            if p.dir != rq.dir {
                return Err(format!("request {} merged across directions", id.0));
            }
            parts.push((p.sector, p.sectors));
            self.report.records.push(RequestRecord {
                id,
                flow: p.flow,
                class: p.class,
                dir: p.dir,
                sync: p.sync,
                inserted: p.inserted,
                dispatched: self.now,
            });
        }
        parts.sort_unstable();
        let mut at = rq.sector;
        for &(s, n) in &parts {
            if s != at {
                return Err(format!("request {} covers its parts non-contiguously", rq.id.0));
            }
            at += u64::from(n);
        }
        if at != rq.end() {
            return Err(format!("request {} length does not match its parts", rq.id.0));
        }
        if rq.parts() > 1 && rq.sectors > self.cfg.device.max_sectors {
            return Err(format!("merged request {} exceeds max_sectors", rq.id.0));
        }
        let done = self.now + 1 + self.rng.below(self.cfg.max_service);
        self.seq += 1;
        self.in_flight.insert((done, self.seq), rq);
        self.report.device_requests += 1;
        Ok(())
    }

    /// Counts one call to the policy as a step, then checks its invariants and its queued count.
    fn check(&mut self, after: &str) -> Result<(), String> {
        self.step += 1;
        self.verify(after)
    }

    /// Checks the policy's invariants and its queued count after a call to `after`.
    fn verify(&self, after: &str) -> Result<(), String> {
        if let Err(v) = self.policy.check_invariants() {
            return Err(format!("after {after}: {v}"));
        }
        let q = self.policy.queued();
        if q != self.pending.len() {
            return Err(format!(
                "after {after}: queued() = {q} but {} requests are undispatched",
                self.pending.len()
            ));
        }
        Ok(())
    }
}
