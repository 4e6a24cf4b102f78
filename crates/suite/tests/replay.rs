//! Trace replay on the simulator (docs/TRACES.md): the committed fixture under the six schedulers of the issue,
//! deterministically; open-loop issue times exactly as recorded; and behaviour that follows from the replay rules
//! (speed, pacing, mapping, slowdown), on small synthetic MSR and FIU traces written by a helper.

use bfq_suite::experiment::{Experiment, Work};
use bfq_suite::replay::{self, ReplayOutcome, ReplayWork};
use bfq_suite::report::{write_all, ReportMeta};
use bfq_workload::trace::replay::{Mapping, Pacing, ReplayOptions};
use bfq_workload::trace::{fiu, msr, ParseOptions, TraceFormat};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const SCHEDULERS: [&str; 6] = ["bfq", "cfq", "deadline", "noop", "mq-deadline", "kyber"];

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/traces/loop-fio.blkparse")
}

fn work(path: &Path, options: ReplayOptions) -> Arc<ReplayWork> {
    let (label, trace) = replay::load_trace(path, None, &ParseOptions::default()).expect("loads");
    Arc::new(ReplayWork::new(label, trace, options))
}

fn run(device: &str, sched: &str, w: &Arc<ReplayWork>) -> ReplayOutcome {
    replay::run(&Experiment::sim(device, sched, Work::Replay(w.clone()))).expect("replays")
}

/// Writes a small synthetic trace file (the test helper of the issue): `n` requests of two streams.
fn synthetic(dir: &Path, format: TraceFormat, n: u64, response_ns: u64) -> PathBuf {
    let mut text = String::new();
    for i in 0..n {
        let t = 1_000_000_000_000 + i * 2_000_000; // every 2 ms
        match format {
            TraceFormat::Msr => {
                text.push_str(&msr::line(t, "src1", 0, false, i * 65_536, 65_536, response_ns));
                text.push_str(&msr::line(
                    t + 1_000_000,
                    "src1",
                    1,
                    true,
                    (i * 7919 % 4096) * 4096,
                    4096,
                    response_ns,
                ));
            }
            _ => {
                text.push_str(&fiu::line(t, 100, "reader", i * 128, 128, false));
                text.push_str(&fiu::line(t + 1_000_000, 200, "writer", (i * 7919 % 4096) * 8, 8, true));
            }
        }
    }
    let path = dir.join(format!("synthetic.{}", format.name()));
    std::fs::write(&path, text).expect("writes");
    path
}

#[test]
fn the_fixture_replays_under_every_scheduler_deterministically() {
    let w = work(&fixture(), ReplayOptions::default());
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut bytes = Vec::new();
    for attempt in 0..2 {
        let mut results = Vec::new();
        for s in SCHEDULERS {
            let o = run("seagate-hdd", s, &w);
            let t = o.total();
            assert_eq!(t.extra["requests"], w.trace.requests.len() as f64, "{s}");
            assert!(!t.timed_out, "{s}: every request completes");
            results.extend(o.results);
        }
        let dir = tmp.path().join(format!("run{attempt}"));
        let files = write_all(&dir, &results, &ReportMeta::new("bfq replay", 1), &[]).expect("writes");
        let mut all = Vec::new();
        for f in &files {
            all.push((
                f.file_name().expect("name").to_owned(),
                std::fs::read(f).expect("reads"),
            ));
        }
        bytes.push(all);
    }
    assert_eq!(bytes[0], bytes[1], "same seed, same bytes");
    let names: Vec<String> = bytes[0].iter().map(|(n, _)| n.to_string_lossy().into_owned()).collect();
    for want in ["results.json", "results.csv", "summary.txt", "report.html"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    assert!(names.iter().any(|n| n.ends_with(".svg")));
}

#[test]
fn the_simulator_issues_each_request_at_its_recorded_time() {
    for speed in [1.0, 3.0] {
        let w = work(
            &fixture(),
            ReplayOptions {
                speed,
                ..ReplayOptions::default()
            },
        );
        for s in ["bfq", "noop"] {
            let o = run("seagate-hdd", s, &w);
            assert_eq!(o.lateness_ns.len(), w.trace.requests.len());
            assert!(
                o.lateness_ns.iter().all(|&d| d == 0),
                "{s} at speed {speed}: every request on time"
            );
            let l = o.lateness.expect("open loop");
            assert_eq!((l.median_ns, l.max_ns), (0, 0));
            assert_eq!(o.total().extra["lateness_max_ms"], 0.0);
        }
    }
}

#[test]
fn the_binary_form_of_the_fixture_replays_like_its_text() {
    let text = work(&fixture(), ReplayOptions::default());
    let bin = work(&fixture().with_file_name("loop-fio"), ReplayOptions::default());
    assert_eq!(bin.trace.format, TraceFormat::Blktrace);
    assert_eq!(bin.label, "loop-fio");
    let (a, b) = (run("nvme", "kyber", &text), run("nvme", "kyber", &bin));
    for (x, y) in a.results.iter().zip(&b.results) {
        assert_eq!(
            (&x.workload, x.throughput_mbps, &x.extra),
            (&y.workload, y.throughput_mbps, &y.extra)
        );
    }
}

#[test]
fn faster_replays_move_the_same_bytes_in_less_time() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = synthetic(tmp.path(), TraceFormat::Fiu, 200, 0);
    let at = |speed: f64| {
        let w = work(
            &path,
            ReplayOptions {
                speed,
                ..ReplayOptions::default()
            },
        );
        run("nvme", "mq-deadline", &w).total().throughput_mbps
    };
    let (x1, x2) = (at(1.0), at(2.0));
    // 400 requests over 0.4 s: the NVMe model serves each in well under the 1 ms gap, so the span is the schedule
    // (halved at speed 2) plus one service time: throughput nearly doubles, and cannot more than double.
    assert!(
        x2 > 1.8 * x1 && x2 <= 2.0 * x1 * 1.001,
        "speed 1: {x1} MB/s, speed 2: {x2} MB/s"
    );
}

#[test]
fn closed_loop_replays_take_at_least_as_long_as_open_loop_ones() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = synthetic(tmp.path(), TraceFormat::Fiu, 100, 0);
    for s in ["bfq", "deadline"] {
        let open = run("seagate-hdd", s, &work(&path, ReplayOptions::default()));
        let closed = run(
            "seagate-hdd",
            s,
            &work(
                &path,
                ReplayOptions {
                    pacing: Pacing::Closed,
                    ..ReplayOptions::default()
                },
            ),
        );
        // A closed-loop flow waits for each completion before its recorded gap: it never issues earlier, so the
        // same bytes take at least as long. Its requests never queue behind each other, so its latency is no worse
        // at the median.
        assert!(
            closed.total().throughput_mbps <= open.total().throughput_mbps * 1.000_001,
            "{s}"
        );
        assert!(closed.lateness.is_none());
        let p50 = |o: &ReplayOutcome| o.total().extra["latency_p50_ms"];
        assert!(
            p50(&closed) <= p50(&open) * 1.05,
            "{s}: closed {} open {}",
            p50(&closed),
            p50(&open)
        );
    }
}

#[test]
fn msr_response_times_give_the_slowdown() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Recorded responses of 10 µs (faster than any disk) and of 1 s (slower than any request here).
    let fast = synthetic(&tmp.path().join("a").tap_mkdir(), TraceFormat::Msr, 100, 10_000);
    let slow = synthetic(&tmp.path().join("b").tap_mkdir(), TraceFormat::Msr, 100, 1_000_000_000);
    let opts = ReplayOptions::default();
    let o_fast = run("seagate-hdd", "cfq", &work(&fast, opts));
    let o_slow = run("seagate-hdd", "cfq", &work(&slow, opts));
    // No pid in MSR: flows are volumes (disk 0 and disk 1).
    let rows: Vec<&str> = o_fast.results.iter().map(|r| r.workload.as_str()).collect();
    assert_eq!(rows, ["all", "vol-src1:0", "vol-src1:1"]);
    // The same replay, compared with two recorded response times 10^5 apart: the slowdowns are 10^5 apart.
    let (a, b) = (o_fast.total().extra["slowdown"], o_slow.total().extra["slowdown"]);
    assert!(a > 1.0 && b < 1.0, "{a} {b}");
    assert!((a / b / 1e5 - 1.0).abs() < 1e-6, "{a} / {b}");
}

#[test]
fn offsets_beyond_the_device_wrap_or_scale_into_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("far.csv");
    // Offsets past 10 TB: beyond every simulated device.
    let text: String = (0..50u64)
        .map(|i| {
            msr::line(
                i * 1_000_000,
                "h",
                0,
                false,
                10_000_000_000_000 + i * (1 << 30),
                4096,
                0,
            )
        })
        .collect();
    std::fs::write(&path, text).expect("writes");
    for mapping in [Mapping::Wrap, Mapping::Scale] {
        let w = work(
            &path,
            ReplayOptions {
                mapping,
                ..ReplayOptions::default()
            },
        );
        let o = run("plextor-ssd", "noop", &w);
        assert_eq!(o.total().extra["requests"], 50.0);
        assert!(!o.total().timed_out);
        let mapped = o
            .notes
            .iter()
            .find(|n| n.starts_with("offsets: "))
            .expect("mapping note");
        assert!(
            mapped.contains(mapping.name()) && mapped.contains("50 of 50 requests remapped"),
            "{mapped}"
        );
    }
}

trait TapMkdir {
    fn tap_mkdir(self) -> PathBuf;
}

impl TapMkdir for PathBuf {
    fn tap_mkdir(self) -> PathBuf {
        std::fs::create_dir_all(&self).expect("mkdir");
        self
    }
}
