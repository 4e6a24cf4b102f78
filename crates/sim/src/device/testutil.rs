//! Test helpers: drive a device with closed-loop flows (each keeps `depth` requests outstanding) and measure.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use bfq_sched::{Direction, Time};

use super::{DevRequest, Device};

/// A small deterministic generator (SplitMix64) for test workloads.
pub(crate) struct Lcg(u64);

impl Lcg {
    pub(crate) fn new(seed: u64) -> Lcg {
        Lcg(seed)
    }
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Submits one command at `t` to `dev` and advances it until that command completes; its completion time, ns.
pub(crate) fn complete_one(dev: &mut dyn Device, dir: Direction, sector: u64, sectors: u32, t: Time) -> Time {
    const TAG: u64 = 1 << 40;
    dev.submit(
        DevRequest {
            tag: TAG,
            dir,
            sector,
            sectors,
        },
        t,
    );
    loop {
        let n = dev.next_completion().expect("a submitted command completes");
        if dev.pop_completion(n) == Some(TAG) {
            return n;
        }
    }
}

/// Submits `writes` (sector, sectors) at time 0, tagged by their index, and serves what `dev` reports; each write's
/// completion time, ns (`Time::MAX` for one that never completed).
pub(crate) fn write_all(dev: &mut dyn Device, writes: &[(u64, u32)]) -> Vec<Time> {
    for (tag, &(sector, sectors)) in writes.iter().enumerate() {
        dev.submit(
            DevRequest {
                tag: tag as u64,
                dir: Direction::Write,
                sector,
                sectors,
            },
            0,
        );
    }
    let mut at = vec![Time::MAX; writes.len()];
    while let Some(t) = dev.next_completion() {
        while let Some(tag) = dev.pop_completion(t) {
            at[tag as usize] = t;
        }
    }
    at
}

type Gen<'a> = Box<dyn FnMut(u64) -> (Direction, u64, u32) + 'a>;

/// One closed-loop submitter: `depth` requests outstanding, each replaced `think` ns after it completes.
pub(crate) struct Flow<'a> {
    depth: u32,
    think: Time,
    gen: Gen<'a>,
}

impl<'a> Flow<'a> {
    pub(crate) fn new(depth: u32, think: Time, gen: impl FnMut(u64) -> (Direction, u64, u32) + 'a) -> Flow<'a> {
        Flow {
            depth,
            think,
            gen: Box::new(gen),
        }
    }
}

/// What one flow got.
#[derive(Debug, Clone, Default)]
pub(crate) struct FlowStats {
    pub completed: u64,
    pub bytes: u64,
    pub latency_sum: Time,
    pub max_latency: Time,
}

impl FlowStats {
    pub(crate) fn mean_latency(&self) -> Time {
        self.latency_sum.checked_div(self.completed).unwrap_or(0)
    }
}

/// Runs `flows` against `dev` from time 0 until `stop(stats)` holds after a completion or `max_time` passes.
/// Returns each flow's statistics; the time of the last completion is in the returned `elapsed`.
pub(crate) fn run_timed(
    dev: &mut dyn Device,
    mut flows: Vec<Flow<'_>>,
    mut stop: impl FnMut(&[FlowStats]) -> bool,
    max_time: Time,
) -> (Vec<FlowStats>, Time) {
    let mut stats = vec![FlowStats::default(); flows.len()];
    let mut issued = vec![0u64; flows.len()];
    let mut inflight: HashMap<u64, (usize, Time, u64)> = HashMap::new();
    let mut pending: BinaryHeap<Reverse<(Time, usize)>> = BinaryHeap::new();
    let mut next_tag = 0u64;
    for (f, flow) in flows.iter().enumerate() {
        for _ in 0..flow.depth {
            pending.push(Reverse((0, f)));
        }
    }
    let mut last = 0;
    loop {
        let tc = dev.next_completion();
        let ts = pending.peek().map(|Reverse((t, _))| *t);
        let submit_first = match (ts, tc) {
            (Some(s), Some(c)) => s <= c,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        if submit_first {
            let Reverse((t, f)) = pending.pop().unwrap();
            if t > max_time {
                break;
            }
            let (dir, sector, sectors) = (flows[f].gen)(issued[f]);
            issued[f] += 1;
            next_tag += 1;
            inflight.insert(next_tag, (f, t, sectors as u64 * 512));
            dev.submit(
                DevRequest {
                    tag: next_tag,
                    dir,
                    sector,
                    sectors,
                },
                t,
            );
        } else {
            let t = tc.unwrap();
            if t > max_time {
                break;
            }
            // A device may ask to be advanced for internal work (an HDD's destage, an array member's piece)
            // without completing a host request then.
            let Some(tag) = dev.pop_completion(t) else {
                continue;
            };
            let (f, t0, bytes) = inflight.remove(&tag).expect("unknown tag completed");
            let s = &mut stats[f];
            s.completed += 1;
            s.bytes += bytes;
            s.latency_sum += t - t0;
            s.max_latency = s.max_latency.max(t - t0);
            last = t;
            if stop(&stats) {
                break;
            }
            pending.push(Reverse((t + flows[f].think, f)));
        }
    }
    (stats, last)
}

/// Like [`run_timed`], returning only the statistics.
pub(crate) fn run(
    dev: &mut dyn Device,
    flows: Vec<Flow<'_>>,
    stop: impl FnMut(&[FlowStats]) -> bool,
    max_time: Time,
) -> Vec<FlowStats> {
    run_timed(dev, flows, stop, max_time).0
}

/// Result of a single closed-loop run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoopResult {
    pub iops: f64,
    pub mb_s: f64,
    pub mean_latency: Time,
    pub elapsed: Time,
}

/// Keeps `depth` requests from `gen` outstanding until `n` have completed; measures from time 0.
pub(crate) fn closed_loop(
    dev: &mut dyn Device,
    depth: u32,
    n: u64,
    gen: impl FnMut(u64) -> (Direction, u64, u32),
) -> LoopResult {
    let (stats, elapsed) = run_timed(
        dev,
        vec![Flow::new(depth, 0, gen)],
        |s| s[0].completed >= n,
        Time::MAX / 2,
    );
    let s = &stats[0];
    let secs = elapsed.max(1) as f64 / 1e9;
    LoopResult {
        iops: s.completed as f64 / secs,
        mb_s: s.bytes as f64 / secs / 1e6,
        mean_latency: s.mean_latency(),
        elapsed,
    }
}

/// Headline figures of every preset (run with `--ignored --nocapture`); the numbers quoted in docs/DEVICES.md.
#[test]
#[ignore]
fn headline_report() {
    use super::config::{preset, preset_names};
    for name in preset_names() {
        let cfg = preset(name).unwrap();
        let cap = cfg.build().info().capacity_sectors;
        let qd = cfg.build().info().queue_depth.min(32);
        let rnd = |seed: u64, dir: Direction| {
            let mut rng = Lcg::new(seed);
            move |_| (dir, rng.below(cap / 8) * 8, 8u32)
        };
        let n_rand = if cfg.build().info().rotational { 2_000 } else { 20_000 };
        let r1 = closed_loop(cfg.build().as_mut(), 1, n_rand, rnd(1, Direction::Read));
        let rq = closed_loop(cfg.build().as_mut(), qd, n_rand, rnd(2, Direction::Read));
        let s = closed_loop(cfg.build().as_mut(), qd, 4_000, |i| (Direction::Read, i * 256, 256));
        let si = closed_loop(cfg.build().as_mut(), qd, 2_000, |i| {
            (Direction::Read, cap - 600_000 + i * 256, 256)
        });
        let w = closed_loop(cfg.build().as_mut(), qd, 20_000, |i| (Direction::Write, i * 256, 256));
        let rw1 = closed_loop(cfg.build().as_mut(), 1, 100, rnd(3, Direction::Write));
        let rwq = closed_loop(
            cfg.build().as_mut(),
            qd,
            if n_rand > 2000 { 20_000 } else { 300 },
            rnd(4, Direction::Write),
        );
        println!(
            "{name:18} 4K rand read QD1 {:8.0} IOPS ({:7.1} us) QD{qd} {:8.0} IOPS | seq 128K read outer {:7.1} inner {:7.1} MB/s | seq write {:7.1} MB/s | 4K rand write QD1 {:8.1} QD{qd} {:8.1} IOPS",
            r1.iops,
            r1.mean_latency as f64 / 1e3,
            rq.iops,
            s.mb_s,
            si.mb_s,
            w.mb_s,
            rw1.iops,
            rwq.iops
        );
    }
}

/// Rough speed of the NVMe model alone (run with `--ignored --nocapture`).
#[test]
#[ignore]
fn nvme_speed_probe() {
    let mut d = super::config::preset("nvme").unwrap().build();
    let mut rng = Lcg::new(1);
    let start = std::time::Instant::now();
    let n = 5_000_000u64;
    let mut t = 0;
    for tag in 0..32 {
        d.submit(
            DevRequest {
                tag,
                dir: Direction::Read,
                sector: rng.below(1 << 30) * 8,
                sectors: 8,
            },
            0,
        );
    }
    for tag in 32..n {
        t = d.next_completion().unwrap();
        d.pop_completion(t).unwrap();
        d.submit(
            DevRequest {
                tag,
                dir: Direction::Read,
                sector: rng.below(1 << 30) * 8,
                sectors: 8,
            },
            t,
        );
    }
    let el = start.elapsed().as_secs_f64();
    println!(
        "nvme model: {:.1} M requests/s (virtual {} ms)",
        n as f64 / el / 1e6,
        t / 1_000_000
    );
}
