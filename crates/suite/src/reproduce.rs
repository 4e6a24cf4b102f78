//! `bfq reproduce`: the reference matrix of the seeds on the simulator, run in parallel, with the checklist of the
//! seeds' claims computed from the measurements.

use crate::benchmarks::{run_fairness, run_iozone, Zones};
use crate::report::ChecklistItem;
use crate::result::RunResult;
use crate::scenario::{run_sim, Era, ScenarioError, SimScenario};
use bfq_sched::SEC;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Every scheduler the seeds and modern users compare, in report order.
pub const SCHEDULERS: [&str; 7] = ["bfq", "cfq", "deadline", "noop", "anticipatory", "mq-deadline", "kyber"];

/// The heavy background workloads of the published figures.
pub const HEAVY: [&str; 4] = ["10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"];

/// One unit of work.
#[derive(Debug, Clone)]
pub enum Job {
    /// A throughput or start-up scenario.
    Sim(SimScenario),
    /// Weighted sequential readers placed in disk zones.
    Fairness {
        /// Device preset.
        device: String,
        /// Scheduler.
        sched: String,
        /// Tunables.
        tunables: Vec<String>,
        /// Reader weights.
        weights: Vec<u32>,
        /// File placement.
        zones: Zones,
        /// Seed.
        seed: u64,
        /// Repetition.
        rep: u32,
    },
    /// iozone-style phases.
    Iozone {
        /// Device preset.
        device: String,
        /// Scheduler.
        sched: String,
        /// Threads.
        threads: u32,
        /// File size per thread, bytes.
        file_size: u64,
        /// Seed.
        seed: u64,
        /// Repetition.
        rep: u32,
    },
}

impl Job {
    /// Runs the job.
    pub fn run(&self) -> Result<RunResult, ScenarioError> {
        match self {
            Job::Sim(sc) => run_sim(sc),
            Job::Fairness {
                device,
                sched,
                tunables,
                weights,
                zones,
                seed,
                rep,
            } => run_fairness(device, sched, tunables, weights, *zones, 30 * SEC, *seed).map(|mut r| {
                r.rep = *rep;
                r
            }),
            Job::Iozone {
                device,
                sched,
                threads,
                file_size,
                seed,
                rep,
            } => run_iozone(device, sched, &[], *threads, *file_size, *seed).map(|mut r| {
                r.rep = *rep;
                r
            }),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The jobs, in report order.
    pub jobs: Vec<Job>,
    /// Schedulers skipped because they are not registered.
    pub skipped: Vec<String>,
}

/// Builds the reference matrix: the full one, or with `quick` a small one that still backs every checklist line.
pub fn plan(quick: bool, reps: u32, seed: u64) -> Plan {
    let mut skipped = Vec::new();
    let scheds: Vec<&str> = SCHEDULERS
        .iter()
        .copied()
        .filter(|s| {
            let ok = bfq_sched::find(s).is_some();
            if !ok {
                skipped.push(s.to_string());
            }
            ok
        })
        .collect();
    let mut jobs = Vec::new();
    let mut add = |device: &str, workloads: &[&str], apps: &[&str], throughput: &[&str]| {
        for rep in 0..reps {
            let seed = seed + u64::from(rep);
            for &s in &scheds {
                for &w in throughput {
                    let mut sc = SimScenario::new(device, s, w);
                    sc.seed = seed;
                    sc.rep = rep;
                    sc.era = Era::Current;
                    sc.duration = 20 * SEC;
                    jobs.push(Job::Sim(sc));
                }
                for &app in apps {
                    for &w in workloads {
                        let mut sc = SimScenario::new(device, s, w);
                        sc.app = Some(app.to_string());
                        sc.seed = seed;
                        sc.rep = rep;
                        jobs.push(Job::Sim(sc));
                    }
                }
            }
        }
    };
    let heavy_and_idle = ["0r0w", "10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"];
    let throughput = ["1r-seq", "10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"];
    if quick {
        add(
            "seagate-hdd",
            &["0r0w", "10r-seq", "5r5w-seq"],
            &["xterm"],
            &["1r-seq", "10r-seq", "10r-rand"],
        );
        add(
            "plextor-ssd",
            &["0r0w", "10r-seq"],
            &["xterm"],
            &["10r-seq", "10r-rand"],
        );
    } else {
        // 004 figures 1-6: Seagate HDD and RAID1.
        add("seagate-hdd", &heavy_and_idle, &["xterm", "oowriter"], &throughput);
        add("seagate-raid1", &heavy_and_idle, &["xterm", "oowriter"], &throughput);
        // 004 figures 7-9 and 001: the Plextor SSD (raw readers only, no writers).
        add(
            "plextor-ssd",
            &["0r0w", "10r-seq", "10r-rand"],
            &["bash", "xterm", "oowriter"],
            &["1r-seq", "10r-seq", "10r-rand"],
        );
        // 004 figures 10-15: slower devices with lighter, read-only workloads.
        for d in ["toshiba-1.8-hdd", "transcend-microsd", "sandisk-emmc"] {
            add(
                d,
                &["0r0w", "5r-seq", "5r-rand"],
                &["xterm"],
                &["1r-seq", "5r-seq", "5r-rand"],
            );
        }
        // 001: bash, xterm and lowriter on the Hitachi HDD.
        add("hitachi-hdd", &heavy_and_idle, &["bash", "xterm", "lowriter"], &[]);
    }
    // 000: throughput distributed by weight independently of zone bit recording (S's fairness test, low_latency=0).
    let zones: &[Zones] = if quick {
        &[Zones::Mixed]
    } else {
        &[Zones::Outer, Zones::Inner, Zones::Mixed]
    };
    for &z in zones {
        for (s, t) in [
            ("bfq", vec!["low_latency=0".to_string()]),
            ("cfq", vec!["low_latency=0".to_string()]),
        ] {
            if bfq_sched::find(s).is_none() {
                continue;
            }
            jobs.push(Job::Fairness {
                device: "seagate-hdd".into(),
                sched: s.into(),
                tunables: t,
                weights: vec![1, 2, 4],
                zones: z,
                seed,
                rep: 0,
            });
        }
    }
    // 003: iozone with 1 and 10 threads (file sizes scaled to the simulator; larger than the 4 GiB page cache in
    // aggregate for 10 threads).
    let threads: &[(u32, u64)] = if quick {
        &[(1, 1 << 30)]
    } else {
        &[(1, 6 << 30), (10, 1 << 30)]
    };
    for &(n, size) in threads {
        for &s in &scheds {
            jobs.push(Job::Iozone {
                device: "plextor-ssd".into(),
                sched: s.into(),
                threads: n,
                file_size: size,
                seed,
                rep: 0,
            });
        }
    }
    Plan { jobs, skipped }
}

/// Runs `jobs` on `threads` worker threads, calling `progress(done, total)` after each; results keep job order.
pub fn run_all(
    jobs: &[Job],
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Vec<Result<RunResult, ScenarioError>> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Result<RunResult, ScenarioError>>>> = Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let r = job.run();
                if let Ok(mut v) = slots.lock() {
                    v[i] = Some(r);
                }
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, jobs.len());
            });
        }
    });
    slots
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(ScenarioError::Invalid("job did not run".into()))))
        .collect()
}

/// The distinct items of `xs`, in first-seen order.
fn distinct<T: PartialEq>(xs: impl Iterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for x in xs {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = xs.collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Mean start-up over repetitions, `None` if any repetition timed out or there is no run.
fn startup(rs: &[RunResult], dev: &str, sched: &str, app: &str, wl: &str) -> Option<Option<f64>> {
    let runs: Vec<&RunResult> = rs
        .iter()
        .filter(|r| {
            r.benchmark == "startup"
                && r.device == dev
                && r.scheduler == sched
                && r.app.as_deref() == Some(app)
                && r.workload == wl
        })
        .collect();
    if runs.is_empty() {
        return None;
    }
    if runs.iter().any(|r| r.timed_out) {
        return Some(None);
    }
    Some(mean(runs.iter().filter_map(|r| r.startup_s)))
}

fn throughput(rs: &[RunResult], dev: &str, sched: &str, wl: &str) -> Option<f64> {
    mean(
        rs.iter()
            .filter(|r| r.benchmark == "throughput" && r.device == dev && r.scheduler == sched && r.workload == wl)
            .map(|r| r.throughput_mbps),
    )
}

/// The checklist of the seeds' claims, each computed from `rs`.
pub fn checklist(rs: &[RunResult]) -> Vec<ChecklistItem> {
    let mut out = Vec::new();
    let devices = distinct(rs.iter().map(|r| r.device.clone()));
    let is_hdd = |d: &str| d.contains("hdd") || d.contains("raid");
    // 1. Start-up with bfq 5-14x lower than with cfq under heavy loads (000, 004 figures 2, 5).
    for dev in devices
        .iter()
        .filter(|d| d.as_str() == "seagate-hdd" || d.as_str() == "seagate-raid1")
    {
        for wl in HEAVY {
            let (Some(Some(b)), Some(c)) = (
                startup(rs, dev, "bfq", "xterm", wl),
                startup(rs, dev, "cfq", "xterm", wl),
            ) else {
                continue;
            };
            let (ratio, shown) = match c {
                Some(c) => (c / b, format!("{:.1}x", c / b)),
                None => (f64::INFINITY, format!("> {:.0}x (cfq: X)", 60.0 / b)),
            };
            out.push(ChecklistItem::new(
                format!("xterm start-up under {wl}, {dev}: bfq {shown} faster than cfq (seed: 5-14x)"),
                ratio >= 5.0,
                format!(
                    "bfq {b:.2} s, cfq {}",
                    c.map_or("X".to_string(), |c| format!("{c:.2} s"))
                ),
            ));
        }
    }
    // 2. bfq start-up close to idle (within 1.5x) under every workload, except 5r5w-seq for the heavy application.
    let bfq_startups = || rs.iter().filter(|r| r.benchmark == "startup" && r.scheduler == "bfq");
    let apps = distinct(bfq_startups().filter_map(|r| r.app.clone().map(|a| (r.device.clone(), a))));
    for (dev, app) in &apps {
        let Some(Some(idle)) = startup(rs, dev, "bfq", app, "0r0w") else {
            continue;
        };
        let heavy_app = app == "oowriter" || app == "lowriter";
        let workloads = distinct(
            bfq_startups()
                .filter(|r| &r.device == dev && r.app.as_ref() == Some(app))
                .map(|r| r.workload.clone())
                .filter(|w| w != "0r0w" && !(heavy_app && w == "5r5w-seq")),
        );
        // Ratio to idle per workload; a timeout (X) ranks as the worst.
        let ratios: Vec<(String, Option<f64>)> = workloads
            .into_iter()
            .filter_map(|w| startup(rs, dev, "bfq", app, &w).map(|v| (w, v.map(|v| v / idle))))
            .collect();
        let rank = |r: &Option<f64>| r.unwrap_or(f64::INFINITY);
        let Some((wl, worst)) = ratios.iter().max_by(|a, b| rank(&a.1).total_cmp(&rank(&b.1))) else {
            continue;
        };
        out.push(ChecklistItem::new(
            format!(
                "{app} start-up with bfq on {dev} stays within 1.5x of idle ({idle:.2} s) under every workload{}: worst {} \
                 under {wl}",
                if heavy_app { " but 5r5w-seq" } else { "" },
                worst.map_or("X".to_string(), |x| format!("{x:.2}x"))
            ),
            rank(worst) <= 1.5,
            format!("{} workloads checked", ratios.len()),
        ));
    }
    // 3. Throughput with sequential workloads on HDDs at least that of cfq and above deadline and noop.
    for dev in devices.iter().filter(|d| is_hdd(d)) {
        for wl in ["10r-seq", "5r5w-seq"] {
            let Some(b) = throughput(rs, dev, "bfq", wl) else {
                continue;
            };
            let others: Vec<(&str, f64)> = ["cfq", "deadline", "noop"]
                .iter()
                .filter_map(|s| throughput(rs, dev, s, wl).map(|t| (*s, t)))
                .collect();
            if others.is_empty() {
                continue;
            }
            let pass = others.iter().all(|&(s, t)| if s == "cfq" { b >= t } else { b > t });
            let detail = others
                .iter()
                .map(|(s, t)| format!("{s} {t:.1}"))
                .collect::<Vec<_>>()
                .join(", ");
            out.push(ChecklistItem::new(
                format!("{wl} throughput on {dev}: bfq {b:.1} MB/s >= cfq and > deadline, noop (seed: 15-30% above cfq, up to 150% above deadline/noop)"),
                pass,
                detail,
            ));
        }
    }
    // 4. bfq's lower throughput with 10r-rand on HDDs, about half the others' (004 figure 1), stated honestly.
    for dev in devices.iter().filter(|d| is_hdd(d)) {
        let Some(b) = throughput(rs, dev, "bfq", "10r-rand") else {
            continue;
        };
        let Some(o) = mean(
            ["cfq", "deadline", "noop"]
                .iter()
                .filter_map(|s| throughput(rs, dev, s, "10r-rand")),
        ) else {
            continue;
        };
        let ratio = b / o;
        out.push(ChecklistItem::new(
            format!(
                "10r-rand throughput on {dev}: bfq at {:.0}% of the others' mean (seed: about half)",
                ratio * 100.0
            ),
            (0.35..=0.75).contains(&ratio),
            format!("bfq {b:.2} MB/s, cfq/deadline/noop mean {o:.2} MB/s"),
        ));
    }
    // 5. On the SSD, throughput loss at most 0.05% with sequential readers and at most 6% with random ones.
    for dev in devices.iter().filter(|d| d.contains("ssd")) {
        for (wl, limit) in [("10r-seq", 0.05), ("10r-rand", 6.0)] {
            let Some(b) = throughput(rs, dev, "bfq", wl) else {
                continue;
            };
            let best = ["cfq", "deadline", "noop"]
                .iter()
                .filter_map(|s| throughput(rs, dev, s, wl))
                .fold(f64::NAN, f64::max);
            if best.is_nan() {
                continue;
            }
            let loss = (1.0 - b / best) * 100.0;
            out.push(ChecklistItem::new(
                format!("{wl} throughput on {dev}: bfq loses {loss:.2}% against the best of cfq/deadline/noop (seed: at most {limit}%)"),
                loss <= limit,
                format!("bfq {b:.1} MB/s, best other {best:.1} MB/s"),
            ));
        }
    }
    // 6. Throughput distributed by weight independently of zone (000).
    // CFQ's fairness runs are in the report for contrast (it shares time, not sectors); only BFQ's are a claim.
    for r in rs.iter().filter(|r| r.benchmark == "fairness" && r.scheduler == "bfq") {
        let err = r.extra.get("max_share_error_pct").copied().unwrap_or(f64::NAN);
        let shares: Vec<String> = (0..)
            .map_while(|i| r.extra.get(&format!("share_{i}_pct")).map(|s| format!("{s:.1}%")))
            .collect();
        let bfq = r.scheduler == "bfq";
        out.push(ChecklistItem::new(
            format!(
                "weights {} with files in the {} zone(s), {}: shares off by at most {err:.1}% {}",
                r.workload.split('-').next().unwrap_or(""),
                r.workload.rsplit('-').next().unwrap_or(""),
                r.scheduler,
                if bfq {
                    "(seed: exactly as desired, independent of ZBR; pass within 2%)"
                } else {
                    "(reference: CFQ shares time, not sectors; pass if within 2%)"
                }
            ),
            err <= 2.0,
            format!("shares {}", shares.join(" / ")),
        ));
    }
    out
}
