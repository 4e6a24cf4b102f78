//! Bad input on the command line: each case fails before any work with a one-line message on stderr that names
//! the problem and the fix, nothing on stdout, and a non-zero exit code (issue 16; more rows as its defects are
//! fixed).

use std::process::Command;

/// One case: the arguments, and what the one line of stderr must contain.
struct Case {
    args: &'static [&'static str],
    says: &'static str,
}

const CASES: &[Case] = &[
    // A negative number after a space is a value, not an option: the same message as `--duration=-1`.
    Case {
        args: &["run", "--duration", "-1"],
        says: "--duration -1 is out of range: give seconds in [1, 86400]",
    },
    Case {
        args: &["run", "--duration=-1"],
        says: "--duration -1 is out of range: give seconds in [1, 86400]",
    },
    Case {
        args: &["suite", "startup", "--duration", "-2"],
        says: "--duration -2 is out of range",
    },
    Case {
        args: &["suite", "startup", "--reps", "-3"],
        says: "--reps '-3' is not a number",
    },
    // A value clap cannot parse is one line too, not a usage block.
    Case {
        args: &["reproduce", "--reps", "-5"],
        says: "invalid value '-5' for '--reps <REPS>'",
    },
    Case {
        args: &["run", "--seed", "-5"],
        says: "invalid value '-5' for '--seed <SEED>'",
    },
    Case {
        args: &["reproduce", "--jobs", "many"],
        says: "invalid value 'many' for '--jobs <JOBS>'",
    },
    // A huge --jobs used to spawn that many threads before the first simulation.
    Case {
        args: &["reproduce", "--quick", "--jobs", "100000"],
        says: "--jobs 100000 is out of range: give 1..=1024 worker threads",
    },
    Case {
        args: &["suite", "throughput", "--jobs", "100000"],
        says: "--jobs 100000 is out of range",
    },
    Case {
        args: &["reproduce", "--jobs", "0"],
        says: "--jobs 0 is out of range",
    },
    // `run` printed the bare name ("workload '10x-seq': 10x-seq"); now the grammar and its limit, as `suite` does.
    Case {
        args: &["run", "--workload", "10x-seq"],
        says: "unknown workload `10x-seq`: expected idle or <N>r<M>w-seq|rand with N and M up to 10000",
    },
    // Silently accepted before (issue 16, defect 8): a duration under 1 ns ran for 0 ns; under a second a result
    // measures one slice.
    Case {
        args: &["run", "--duration", "1e-10"],
        says: "--duration 0.0000000001 is too short to measure a policy",
    },
    Case {
        args: &["suite", "video", "--duration", "0.04"],
        says: "--duration 0.04 is too short",
    },
    // Names given twice ran the same seeds twice, counted as repetitions.
    Case {
        args: &["suite", "throughput", "--sched", "bfq,cfq,bfq"],
        says: "--sched names 'bfq' twice: give each once (use --reps for repetitions)",
    },
    Case {
        args: &["suite", "throughput", "--workloads", "10r-seq,10r-seq"],
        says: "--workloads names '10r-seq' twice",
    },
    Case {
        args: &["suite", "throughput", "--target", "seagate-hdd,sim:seagate-hdd"],
        says: "--target names 'sim:seagate-hdd' twice",
    },
    Case {
        args: &["suite", "startup", "--apps", "xterm,xterm"],
        says: "--apps names 'xterm' twice",
    },
    Case {
        args: &["run", "--tune", "slice_idle=0", "--tune", "slice_idle=8"],
        says: "bfq tunable 'slice_idle' is given twice",
    },
    Case {
        args: &[
            "suite",
            "throughput",
            "--sched",
            "bfq",
            "--tune",
            "slice_idle=0",
            "--tune",
            "slice_idle=8",
        ],
        says: "--tune names 'slice_idle' twice",
    },
    // Real-target options on a simulator-only run did nothing.
    Case {
        args: &["suite", "startup", "--file-scale", "0.5"],
        says: "--file-scale applies to the real targets (engine:DIR, kernel:DIR) only",
    },
    Case {
        args: &["suite", "startup", "--app-cmd", "xterm /bin/true"],
        says: "--app-cmd applies to the real targets",
    },
    Case {
        args: &["suite", "startup", "--allow-device"],
        says: "--allow-device applies to the real targets",
    },
    // Seeds wrapped around u64 (a debug build panicked).
    Case {
        args: &["reproduce", "--quick", "--seed", "18446744073709551615", "--reps", "2"],
        says: "--seed 18446744073709551615 with 2 repetitions would wrap around",
    },
    Case {
        args: &["suite", "throughput", "--seed", "18446744073709551615", "--reps", "3"],
        says: "give a seed up to 18446744073709551613",
    },
    Case {
        args: &["record", "--capacity", "18446744073709551615", "--", "true"],
        says: "--capacity 18446744073709551615 is out of range",
    },
    // noop takes no tunables: the message said "accepted keys are " and ended there.
    Case {
        args: &["run", "--sched", "noop", "--tune", "foo=1"],
        says: "noop has no tunable 'foo': it has no tunables",
    },
];

#[test]
fn every_bad_input_fails_with_one_line() {
    for case in CASES {
        let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
            .args(case.args)
            .output()
            .expect("runs the bfq binary");
        let err = String::from_utf8_lossy(&out.stderr);
        let args = case.args;
        assert!(!out.status.success(), "{args:?} should fail");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line, got {err:?}");
        assert!(err.starts_with("bfq: "), "{args:?}: {err:?}");
        assert!(
            err.contains(case.says),
            "{args:?}: {err:?} should contain {:?}",
            case.says
        );
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

#[test]
fn record_from_an_empty_trace_names_the_option_that_exists() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let trace = dir.path().join("empty.trace");
    std::fs::write(&trace, "").expect("writes the trace");
    let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .arg("record")
        .arg("--from-trace")
        .arg(&trace)
        .arg("--out")
        .arg(dir.path().join("x.profile"))
        .output()
        .expect("runs the bfq binary");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim_end().lines().count(), 1, "{err:?}");
    // It used to say the root pid "was not given", as if an option to give it existed.
    assert!(
        err.contains("is empty: save one with `bfq record --keep-trace FILE -- CMD`"),
        "{err:?}"
    );
    assert!(!err.contains("none was given"), "{err:?}");
}

#[test]
fn run_help_names_every_device_preset_and_no_missing_command() {
    let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["run", "--help"])
        .output()
        .expect("runs the bfq binary");
    let help = String::from_utf8_lossy(&out.stdout);
    // `bfq devices` does not exist; the help lists the presets itself.
    assert!(!help.contains("bfq devices"), "{help}");
    for name in bfq_sim::device::preset_names() {
        assert!(
            help.contains(name),
            "`bfq run --help` should name the preset {name}: {help}"
        );
    }
}

/// `--out` is checked before the first simulation (issue 16, defects 3 and 9): a file, a directory holding files bfq
/// did not write, and an over-long name each fail with one line. `reproduce` and `suite` print "running N
/// simulations" before they start work, so a single line on stderr shows that nothing ran.
#[test]
fn out_is_checked_before_any_work() {
    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::write(dir.path().join("afile"), "x").expect("file");
    std::fs::create_dir(dir.path().join("thesis")).expect("dir");
    std::fs::write(dir.path().join("thesis/chapter1.tex"), "x").expect("file");
    let long = "r".repeat(230);
    let cases: [(&[&str], &str); 5] = [
        (
            &["reproduce", "--quick", "--out", "afile"],
            "--out 'afile' is a file, not a directory",
        ),
        (
            &["reproduce", "--quick", "--out", "thesis"],
            "--out 'thesis' holds 'chapter1.tex', which bfq did not write",
        ),
        (&["suite", "startup", "--out", "afile"], "--out 'afile' is a file"),
        (
            &["suite", "throughput", "--out", &long],
            "the name is longer than 200 bytes",
        ),
        (
            &["reproduce", "--quick", "--out", "afile/sub"],
            "cannot use --out 'afile/sub': Not a directory",
        ),
    ];
    for (args, says) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("runs the bfq binary");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line, got {err:?}");
        assert!(err.contains(says), "{args:?}: {err:?} should contain {says:?}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("afile")).expect("kept"),
        "x",
        "the file is untouched"
    );
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .expect("lists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["afile", "thesis"], "no report and no staging directory left");
}

/// A re-run into an earlier report replaces it whole: a chart the new report does not link is gone (defect 9).
#[test]
fn a_rerun_leaves_only_its_own_files() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let run = || {
        let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
            .args([
                "suite",
                "fairness",
                "--sched",
                "noop",
                "--duration",
                "1",
                "--reps",
                "1",
                "--out",
                "r",
            ])
            .current_dir(dir.path())
            .output()
            .expect("runs the bfq binary");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    run();
    std::fs::write(dir.path().join("r/old-chart.svg"), "<svg/>").expect("writes");
    run();
    let r = dir.path().join("r");
    assert!(!r.join("old-chart.svg").exists(), "the stale chart is gone");
    assert!(r.join("report.html").exists() && r.join("results.json").exists());
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .expect("lists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["r"], "no staging or old directory left beside the report");
}

/// Profiles that used to replay as a start-up of 0 s or a shortened one are refused with the file and line (issue
/// 16, defect 4).
#[test]
fn empty_or_cut_profiles_are_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let whole = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/bash.recorded.profile"
    ))
    .expect("the committed bash profile");
    let lines: Vec<&str> = whole.lines().collect();
    let cases = [
        ("empty.profile", String::new(), "has no requests"),
        (
            "comments.profile",
            "# nothing\n\n# here\n".to_string(),
            "has no requests",
        ),
        (
            "files-only.profile",
            "file a 4096 contiguous\n".to_string(),
            "has no requests",
        ),
        ("cut.profile", lines[..lines.len() - 10].join("\n"), "may be cut short"),
    ];
    for (name, text, says) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("writes");
        let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
            .args(["run", "--app"])
            .arg(&path)
            .output()
            .expect("runs the bfq binary");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} should be refused");
        assert_eq!(err.trim_end().lines().count(), 1, "{name}: one line, got {err:?}");
        assert!(
            err.contains(says) && err.contains(name),
            "{name}: {err:?} should contain {says:?}"
        );
        assert!(out.stdout.is_empty(), "{name}: no result printed");
    }
}
