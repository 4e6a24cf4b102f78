//! `bfq suite` from the command line: one-line errors for bad input, and a small run that writes the report.

use std::path::PathBuf;
use std::process::{Command, Output};

fn bfq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(args)
        .output()
        .expect("runs the bfq binary")
}

#[test]
fn bad_input_gives_one_line_errors() {
    let cases: [(&[&str], &str); 8] = [
        (&["suite", "bogus"], "unknown benchmark 'bogus'"),
        (&["suite", "startup", "--sched", "bfq,zzz"], "unknown scheduler 'zzz'"),
        (&["suite", "throughput", "--workloads", "3x"], "unknown workload"),
        (&["suite", "startup", "--apps", "emacs"], "unknown application 'emacs'"),
        (
            &["suite", "startup", "--target", "sim:floppy"],
            "unknown device 'floppy'",
        ),
        (
            &["suite", "startup", "--target", "nvme:/x"],
            "unknown target kind 'nvme'",
        ),
        (&["suite", "startup", "--reps", "0"], "--reps 0 is out of range"),
        (&["suite", "startup", "--reps", "many"], "--reps 'many' is not a number"),
    ];
    for (args, want) in cases {
        let out = bfq(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(err.contains(want), "{args:?}: {err:?} should contain {want:?}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line: {err:?}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

#[test]
fn a_real_target_on_a_missing_directory_is_a_one_line_error() {
    let dir = std::env::temp_dir().join(format!("bfq-cli-unavail-{}", std::process::id()));
    let out = bfq(&[
        "suite",
        "throughput",
        "--target",
        "sim:seagate-hdd,engine:/nonexistent/bfq-x",
        "--sched",
        "noop",
        "--workloads",
        "1r-seq",
        "--duration",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    // Not root: root is needed; root: /mnt/x is not a loop device's mount (not a directory, or not ours).
    assert!(
        err.contains("root") || err.contains("not a directory") || err.contains("bfq loopdev"),
        "{err}"
    );
    assert_eq!(
        err.trim().lines().last().map(|l| l.starts_with("bfq: ")),
        Some(true),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn small_run_prints_the_table_and_writes_the_report() {
    let dir: PathBuf = std::env::temp_dir().join(format!("bfq-cli-suite-{}", std::process::id()));
    let out = bfq(&[
        "suite",
        "interleaved",
        "--sched",
        "bfq,noop",
        "--workloads",
        "3r",
        "--duration",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("# Workload  bfq noop"), "{stdout}");
    assert!(stdout.contains("3r-interleaved"), "{stdout}");
    for f in ["report.html", "results.json", "results.csv", "summary.txt"] {
        assert!(dir.join(f).exists(), "{f}");
    }
    // The report records the arguments as given, not a command rebuilt from the parsed options.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let want = format!(
        "<code>bfq suite interleaved --sched bfq,noop --workloads 3r --duration 1 --out {}</code>",
        dir.display()
    );
    assert!(html.contains(&want), "{want} not in the report");
    let _ = std::fs::remove_dir_all(dir);
}

/// `--file-scale` is a factor in (0, 1] (limits::MAX_FILE_SCALE): 1 is accepted, anything above or at most 0 is a
/// one-line error.
#[test]
fn file_scale_boundary() {
    for bad in ["0", "-0.5", "1.0001", "2", "100", "NaN"] {
        let arg = format!("--file-scale={bad}");
        let out = bfq(&["suite", "throughput", &arg]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--file-scale {bad} should fail");
        assert!(
            err.contains("is out of range: give a factor in (0, 1]"),
            "{bad}: {err:?}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{bad}: one line: {err:?}");
    }
    // In range: accepted (the run then fails later, on the missing directory of the real target).
    for good in ["1", "0.01"] {
        let out = bfq(&[
            "suite",
            "throughput",
            "--target",
            "engine:/nonexistent/bfq-cli-scale",
            "--sched",
            "noop",
            "--file-scale",
            good,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("--file-scale"), "--file-scale {good} is accepted: {err}");
    }
}

#[test]
fn help_lists_the_benchmarks() {
    let out = bfq(&["suite", "--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for b in [
        "throughput",
        "startup",
        "video",
        "fairness",
        "interleaved",
        "iozone",
        "--profile",
        "kernel:<dir>",
    ] {
        assert!(text.contains(b), "{b} missing from help");
    }
}
