//! `bfq replay` through the binary: its help, one-line errors before any work (bad options, bad traces with the
//! line or record at fault), and byte-identical reports from two runs with the same seed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/traces")
        .join(name)
        .display()
        .to_string()
}

fn bfq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(args)
        .output()
        .expect("runs bfq")
}

#[test]
fn help_names_the_formats_and_options() {
    let out = bfq(&["replay", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for want in [
        "--format", "--target", "--sched", "--mode", "--speed", "--map", "--area", "--flows", "--out", "--json",
        "blkparse", "blktrace", "msr", "fiu",
    ] {
        assert!(help.contains(want), "{want} missing from:\n{help}");
    }
    let top = bfq(&["--help"]);
    assert!(String::from_utf8_lossy(&top.stdout).contains("replay"));
}

#[test]
fn bad_input_fails_before_any_work_with_one_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, text: &[u8]| {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).expect("writes");
        p.display().to_string()
    };
    let bad_msr = write(
        "bad.csv",
        b"128166372003061629,hm,1,Read,0,4096,10\n128166372003061630,hm,1,Trim,0,4096,10\n",
    );
    let bad_fiu = write("bad.fiu", b"1 2 a 3 8 R 8 0 x\n1 2 a 3 8 R 8\n");
    let unknown = write("unknown.txt", b"hello there\n");
    let mut cut = std::fs::read(fixture("loop-fio.blktrace.0")).expect("fixture");
    cut.truncate(100);
    let cut = write("cut.blktrace.0", &cut);
    let blk = fixture("loop-fio.blkparse");
    let out_file = write("a-file", b"x");
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["replay", &bad_msr],
            format!(
                "{}: line 2: Type `Trim` is not Read or Write",
                tmp.path().join("bad.csv").display()
            ),
        ),
        (vec!["replay", &bad_fiu], "line 2: 7 fields, expected 9".into()),
        (vec!["replay", &unknown], "cannot tell the format of trace".into()),
        (
            vec!["replay", &unknown, "--format", "fiu"],
            "line 1: 2 fields, expected 9".into(),
        ),
        (
            vec!["replay", &cut],
            "cut.blktrace.0: record 2 at byte 48: cut: a payload of 8 bytes runs past the end (4 left)".into(),
        ),
        (
            vec!["replay", "/no/such/trace"],
            "trace /no/such/trace is not a readable file".into(),
        ),
        (
            vec!["replay", &blk, "--format", "tar"],
            "unknown trace format 'tar'".into(),
        ),
        (
            vec!["replay", &blk, "--mode", "half-open"],
            "unknown --mode 'half-open': use open or closed".into(),
        ),
        (
            vec!["replay", &blk, "--map", "fold"],
            "unknown --map 'fold': use wrap or scale".into(),
        ),
        (
            vec!["replay", &blk, "--flows", "colour"],
            "unknown --flows 'colour'".into(),
        ),
        (vec!["replay", &blk, "--speed", "0"], "--speed 0 is out of range".into()),
        (
            vec!["replay", &blk, "--speed", "-2"],
            "--speed -2 is out of range".into(),
        ),
        (
            vec!["replay", &blk, "--max-flows", "0"],
            "--max-flows 0 is out of range".into(),
        ),
        (
            vec!["replay", &blk, "--max-requests", "0"],
            "--max-requests 0 is out of range".into(),
        ),
        (
            vec!["replay", &blk, "--timeout", "0"],
            "--timeout 0 is out of range".into(),
        ),
        (vec!["replay", &blk, "--area", "12Q"], "--area invalid size".into()),
        (
            vec!["replay", &blk, "--area", "1K"],
            "--area invalid size '1K' is 1024 bytes, not a multiple of 4096".into(),
        ),
        (vec!["replay", &blk, "--area", "0"], "--area must be at least 4K".into()),
        (
            vec!["replay", &blk, "--area", "64T", "--target", "nvme"],
            "--area 64T is larger than the".into(),
        ),
        (
            vec!["replay", &blk, "--sched", "fastest"],
            "unknown scheduler 'fastest'".into(),
        ),
        (
            vec!["replay", &blk, "--sched", "bfq,bfq"],
            "--sched names 'bfq' twice".into(),
        ),
        (vec!["replay", &blk, "--target", "floppy"], "target sim:floppy".into()),
        (
            vec!["replay", &blk, "--target", "kernel:/tmp", "--sched", "cfq"],
            "scheduler 'cfq' does not exist in the kernel".into(),
        ),
        (
            vec!["replay", &blk, "--tune", "no_such_knob=1"],
            "tunable 'no_such_knob=1' applies to none".into(),
        ),
        (
            vec!["replay", &blk, "--allow-device"],
            "--allow-device applies to the real targets".into(),
        ),
        (vec!["replay", &blk, "--events", "X"], "unknown --events 'X'".into()),
        (vec!["replay", &blk, "--out", &out_file], "a-file".into()),
    ];
    for (args, says) in cases {
        let out = bfq(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(
            out.stdout.is_empty(),
            "{args:?}: nothing on stdout, got {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err}");
        assert!(err.contains(&says), "{args:?}: {err} should contain {says}");
    }
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("report dir")
        .map(|e| {
            let e = e.expect("entry");
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("reads"),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_same_seed_writes_the_same_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let blk = fixture("loop-fio.blktrace.0");
    let mut runs = Vec::new();
    for _ in 0..2 {
        // The same --out both times: the HTML report records the command line.
        let out = tmp.path().join("r");
        let o = bfq(&[
            "replay",
            &blk,
            "--target",
            "sim:seagate-hdd,nvme",
            "--json",
            "--out",
            &out.display().to_string(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
        // Two targets, six schedulers, the total and five flows each.
        let rows = json.as_array().expect("array");
        assert_eq!(rows.len(), 2 * 6 * 6);
        assert!(rows
            .iter()
            .all(|r| r["benchmark"] == "replay" && r["app"] == "loop-fio"));
        runs.push((o.stdout, files(&out)));
    }
    assert_eq!(runs[0], runs[1], "same seed, same bytes (stdout and every report file)");
    let names: Vec<&str> = runs[0].1.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"replay.txt") && names.contains(&"report.html") && names.contains(&"targets-side-by-side.txt"),
        "{names:?}"
    );
    let notes =
        String::from_utf8_lossy(&runs[0].1.iter().find(|(n, _)| n == "replay.txt").expect("notes").1).into_owned();
    assert!(notes.contains("offsets: wrap (offset modulo the area)"), "{notes}");
    assert!(
        notes.contains("sim:nvme kyber: issue lateness median 0.000 ms"),
        "{notes}"
    );
}
