//! The report files as a whole: what `write_all` writes, that it is deterministic, and that Chromium renders the
//! HTML page (skipped with a printed reason when Chromium is not installed).

use bfq_suite::report::{figures, write_all, ChecklistItem, ReportMeta};
use bfq_suite::RunResult;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn run(benchmark: &str, app: Option<&str>, scheduler: &str, workload: &str, rep: u32) -> RunResult {
    // Deterministic pseudo-measurements that differ by scheduler, workload and repetition.
    let sched_factor = match scheduler {
        "bfq" => 1.0,
        "cfq" => 6.0,
        "deadline" => 11.0,
        _ => 3.0,
    };
    let load = match workload {
        "0r0w" => 0.0,
        "1r-seq" => 0.5,
        "10r-seq" => 1.0,
        "10r-rand" => 2.5,
        "5r5w-seq" => 1.6,
        _ => 2.0,
    };
    let jitter = 1.0 + 0.04 * rep as f64;
    let startup = 0.3 * (1.0 + load * sched_factor) * jitter;
    let throughput = if workload.ends_with("rand") {
        1.5 + 0.1 * sched_factor
    } else {
        (100.0 - 4.0 * sched_factor * load) * (2.0 - jitter)
    };
    let mut extra = BTreeMap::new();
    if benchmark == "startup" {
        extra.insert("frames_dropped_pct".to_string(), load * sched_factor * 0.5);
    }
    let timed_out = benchmark == "startup" && scheduler == "deadline" && workload == "10r-rand" && rep == 1;
    RunResult {
        benchmark: serde_json::from_value(serde_json::Value::String(benchmark.into())).expect("a benchmark name"),
        target: "sim:seagate-hdd".into(),
        device: "seagate-hdd".into(),
        scheduler: scheduler.into(),
        tunables: Vec::new(),
        workload: workload.into(),
        app: app.map(str::to_string),
        rep,
        seed: 1000 + rep as u64,
        startup_s: (benchmark == "startup" && !timed_out).then_some(startup),
        timed_out,
        throughput_mbps: throughput,
        read_mbps: throughput * 0.75,
        write_mbps: throughput * 0.25,
        sched_cpu_ns_per_request: None,
        extra,
        scenario: Vec::new(),
    }
}

fn results() -> Vec<RunResult> {
    let mut out = Vec::new();
    let scheds = ["bfq", "cfq", "deadline", "noop"];
    for rep in 0..3 {
        for app in ["xterm", "lowriter"] {
            for w in ["0r0w", "10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"] {
                for s in scheds {
                    out.push(run("startup", Some(app), s, w, rep));
                }
            }
        }
        for w in ["1r-seq", "10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"] {
            for s in scheds {
                out.push(run("throughput", None, s, w, rep));
            }
        }
    }
    out
}

fn meta() -> ReportMeta {
    ReportMeta::new("bfq reproduce --target sim:seagate-hdd --reps 3 --seed 1000", 1000)
}

fn checklist() -> Vec<ChecklistItem> {
    vec![
        ChecklistItem::new(
            "bfq: xterm start-up under 10r-seq within 3x the idle time",
            true,
            "0.62 s vs idle 0.31 s",
        ),
        ChecklistItem::new(
            "bfq: aggregate throughput under 10r-seq >= 90% of cfq's",
            true,
            "96 MB/s vs 76 MB/s",
        ),
        ChecklistItem::new(
            "deadline: lowriter starts under 10r-rand",
            false,
            "X: 1 of 3 runs timed out after 60 s",
        ),
    ]
}

fn read_all(paths: &[PathBuf]) -> Vec<(String, Vec<u8>)> {
    paths
        .iter()
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn write_all_writes_every_file_deterministically() {
    let results = results();
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let pa = write_all(a.path(), &results, &meta(), &checklist()).unwrap();
    let pb = write_all(&b.path().join("nested"), &results, &meta(), &checklist()).unwrap();
    let fa = read_all(&pa);
    let fb = read_all(&pb);
    assert_eq!(fa.len(), fb.len());
    for ((na, ba), (nb, bb)) in fa.iter().zip(&fb) {
        assert_eq!(na, nb);
        assert!(ba == bb, "{na} differs between two runs");
        assert!(!ba.is_empty(), "{na} is empty");
    }

    let figs = figures(&results, &meta());
    let names: Vec<&str> = fa.iter().map(|(n, _)| n.as_str()).collect();
    for fixed in [
        "results.json",
        "results.csv",
        "summary.csv",
        "result_list.txt",
        "summary.txt",
        "report.html",
    ] {
        assert!(names.contains(&fixed), "{fixed} missing");
    }
    for fig in &figs {
        assert!(names.contains(&format!("{}-table.txt", fig.slug).as_str()));
        assert!(names.contains(&format!("{}.svg", fig.slug).as_str()));
    }
    assert_eq!(names.len(), 6 + 2 * figs.len());

    let json = std::fs::read_to_string(a.path().join("results.json")).unwrap();
    let back: Vec<RunResult> = serde_json::from_str(&json).unwrap();
    assert_eq!(back.len(), results.len());
    // serde_json parses floats to within an ulp unless its float_roundtrip feature is on: compare closely.
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(1.0);
    for (x, y) in back.iter().zip(&results) {
        let same = x.benchmark == y.benchmark
            && x.workload == y.workload
            && x.scheduler == y.scheduler
            && x.app == y.app
            && x.rep == y.rep
            && x.timed_out == y.timed_out
            && close(x.throughput_mbps, y.throughput_mbps)
            && close(x.read_mbps, y.read_mbps)
            && x.startup_s.is_some() == y.startup_s.is_some()
            && close(x.startup_s.unwrap_or(0.0), y.startup_s.unwrap_or(0.0))
            && x.extra.keys().eq(y.extra.keys());
        assert!(same, "results.json does not round-trip: {x:?} vs {y:?}");
    }
    let csv = std::fs::read_to_string(a.path().join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + results.len());
    assert!(csv.lines().next().unwrap().ends_with(",extra.frames_dropped_pct"));
}

fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Runs headless Chromium to take a screenshot; gives up (killing that child) after two minutes. Returns
/// Chromium's stderr for diagnostics.
fn screenshot(browser: &Path, html: &Path, png: &Path, profile: &Path) -> String {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,2000")
        .arg(format!("file://{}", html.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    // Drain stderr on a thread so a chatty Chromium cannot block on a full pipe.
    let mut stderr = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        let _ = stderr.read_to_string(&mut err);
        err
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match child.try_wait().expect("waiting for chromium") {
            Some(_) => break,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium did not finish within 120 s");
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    reader.join().unwrap_or_default()
}

#[test]
fn chromium_renders_the_report() {
    let Some(browser) = chromium() else {
        bfq_suite::real::sys::skip_or_fail(
            "chromium_renders_the_report",
            "Chromium is not installed (apt-get install -y chromium)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    write_all(dir.path(), &results(), &meta(), &checklist()).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let png = dir.path().join("report.png");
    let stderr = screenshot(&browser, &dir.path().join("report.html"), &png, profile.path());
    let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("no screenshot ({e}); chromium said: {stderr}"));
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(bytes.len() > 20_000, "screenshot is only {} bytes", bytes.len());
    // For looking at the output by hand: BFQ_REPORT_SCREENSHOT=<png> keeps the screenshot, BFQ_REPORT_DIR=<dir>
    // writes the report there too.
    if let Ok(keep) = std::env::var("BFQ_REPORT_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
    if let Ok(keep) = std::env::var("BFQ_REPORT_DIR") {
        write_all(Path::new(&keep), &results(), &meta(), &checklist()).unwrap();
    }
}
