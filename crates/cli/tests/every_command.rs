//! Every command of the CLI, in one table (issue 21, item 5): its help, a run that works where one is quick and
//! needs no root, and each user-facing error message it can give before any work. Errors are one line on stderr
//! that starts with `bfq: `, names the problem and the fix, with nothing on stdout and a non-zero exit.
//!
//! The rows about argument values (ranges, duplicates, `--out`, `--jobs`) live in `bad_input.rs`, the trace
//! options in `replay_cli.rs` and the suite's in `suite_cli.rs`; this table has at least one row per command and
//! every message those do not cover. Commands that need root (`record`, `loopdev create`) are exercised for real
//! by the tests gated on `BFQ_REAL_TESTS` (`record.rs`, `crates/suite/tests/real_loopdev.rs`).

use std::path::Path;
use std::process::Command;

/// What a row expects.
enum Want {
    /// Exit 0 and stdout containing this text.
    Ok(&'static str),
    /// Exit 0, stdout empty, and this one line on stderr (a warning that is not an error).
    Note(&'static str),
    /// A non-zero exit, nothing on stdout, and one line on stderr containing this text.
    Err(&'static str),
}

/// One row: the arguments (`{dir}` is replaced by a fresh temporary directory holding the files below) and what
/// must happen.
struct Row {
    args: &'static [&'static str],
    want: Want,
}

const ROWS: &[Row] = &[
    // The program itself.
    Row {
        args: &["--help"],
        want: Want::Ok("Usage: bfq <COMMAND>"),
    },
    Row {
        args: &["--version"],
        want: Want::Ok("bfq "),
    },
    Row {
        args: &["nosuch"],
        want: Want::Err("unrecognized subcommand 'nosuch' (see bfq --help)"),
    },
    // schedulers
    Row {
        args: &["schedulers", "--help"],
        want: Want::Ok("Usage: bfq schedulers"),
    },
    Row {
        args: &["schedulers"],
        want: Want::Ok("bfq-v7r2"),
    },
    Row {
        args: &["schedulers", "kyber"],
        want: Want::Ok("read_lat_nsec"),
    },
    Row {
        args: &["schedulers", "nosuch"],
        want: Want::Err("unknown scheduler 'nosuch': choose one of bfq, bfq-v7r2, noop"),
    },
    // run
    Row {
        args: &["run", "--help"],
        want: Want::Ok("Usage: bfq run"),
    },
    Row {
        args: &[
            "run",
            "--sched",
            "noop",
            "--device",
            "nvme",
            "--workload",
            "2r-seq",
            "--duration",
            "1",
        ],
        want: Want::Ok("throughput"),
    },
    Row {
        args: &["run", "--sched", "nosuch"],
        want: Want::Err("unknown scheduler 'nosuch': choose one of"),
    },
    Row {
        args: &["run", "--device", "nosuch"],
        want: Want::Err("unknown device 'nosuch': not a preset (seagate-hdd,"),
    },
    Row {
        args: &["run", "--device", "{dir}/missing.toml"],
        want: Want::Err("cannot read device file"),
    },
    Row {
        args: &["run", "--device", "{dir}/bad.toml"],
        want: Want::Err("invalid device field 'model' = (missing): say which model the file describes"),
    },
    Row {
        args: &["run", "--sched", "bfq", "--tune", "slice_idle=99999999999"],
        want: Want::Err("bfq tunable 'slice_idle' = 99999999999 is out of range: expected 0..=1000 ms"),
    },
    Row {
        args: &["run", "--sched", "bfq", "--tune", "slice_idle"],
        want: Want::Err("tunable 'slice_idle' is malformed: write it as key=value"),
    },
    Row {
        args: &["run", "--sched", "bfq", "--tune", "slice_idle=abc"],
        want: Want::Err("bfq tunable 'slice_idle': 'abc' is not a number; expected 0..=1000 ms"),
    },
    // Unknown or incomplete arguments: clap's message, its tip and the help to read, on one line.
    Row {
        args: &["run", "--device-file", "x"],
        want: Want::Err(
            "unexpected argument '--device-file' found; a similar argument exists: '--device' (see bfq run --help)",
        ),
    },
    Row {
        args: &["run", "--duration"],
        want: Want::Err("a value is required for '--duration <DURATION>' but none was supplied (see bfq run --help)"),
    },
    Row {
        args: &["run", "extra"],
        want: Want::Err("unexpected argument 'extra' found (see bfq run --help)"),
    },
    // reproduce (a full run is pinned by reproduce_digest.rs)
    Row {
        args: &["reproduce", "--help"],
        want: Want::Ok("Usage: bfq reproduce"),
    },
    Row {
        args: &["reproduce", "--quick", "--out", "/proc/bfq-no-such-dir/out"],
        want: Want::Err("cannot write the report"),
    },
    // suite
    Row {
        args: &["suite", "--help"],
        want: Want::Ok("Usage: bfq suite"),
    },
    Row {
        args: &["suite"],
        want: Want::Err("the following required arguments were not provided: <BENCHMARK> (see bfq suite --help)"),
    },
    Row {
        args: &["suite", "nosuch"],
        want: Want::Err("unknown benchmark 'nosuch': choose one of throughput, startup, video"),
    },
    Row {
        args: &["suite", "startup", "--target", "sim:nosuch"],
        want: Want::Err("target sim:nosuch: unknown device 'nosuch'"),
    },
    Row {
        args: &["suite", "startup", "--apps", "nosuch"],
        want: Want::Err("unknown application 'nosuch': use bash, xterm"),
    },
    Row {
        args: &["suite", "startup", "--apps", "{dir}/missing.profile"],
        want: Want::Err("cannot read profile"),
    },
    Row {
        args: &["suite", "startup", "--apps", "{dir}/bad.profile"],
        want: Want::Err("bad.profile"),
    },
    Row {
        args: &["suite", "startup", "--profile", "nosuch"],
        want: Want::Err("unknown profile 'nosuch': use paper, s2013 or current"),
    },
    // record (needs root for real work; its argument errors come first)
    Row {
        args: &["record", "--help"],
        want: Want::Ok("Usage: bfq record"),
    },
    Row {
        args: &["record"],
        want: Want::Err("no command given: use bfq record [OPTIONS] -- CMD [ARGS...]"),
    },
    Row {
        args: &["record", "--timeout", "5h", "--", "true"],
        want: Want::Err("unknown unit `h` (use ms, s or m)"),
    },
    // loopdev
    Row {
        args: &["loopdev", "--help"],
        want: Want::Ok("Usage: bfq loopdev"),
    },
    Row {
        args: &["loopdev", "list"],
        want: Want::Ok(""),
    },
    Row {
        args: &["loopdev", "create", "--size", "12Q", "{dir}/mnt"],
        want: Want::Err("invalid size '12Q' has an unknown unit: give a number with an optional unit K, M, G or T"),
    },
    Row {
        args: &["loopdev", "create"],
        want: Want::Err("the following required arguments were not provided: --size <SIZE> <DIR>"),
    },
    Row {
        args: &["loopdev", "remove", "{dir}/never-made"],
        want: Want::Note("nothing to remove: no bfq loop device for"),
    },
    // calibrate and validate (root for real work; their argument errors come first)
    Row {
        args: &["calibrate", "--help"],
        want: Want::Ok("Usage: bfq calibrate"),
    },
    Row {
        args: &["calibrate", "{dir}/no-such-device"],
        want: Want::Err("does not exist: give the directory made by `bfq loopdev create` (or its raw device)"),
    },
    Row {
        args: &["validate", "--help"],
        want: Want::Ok("Usage: bfq validate"),
    },
    Row {
        args: &["validate"],
        want: Want::Err("the following required arguments were not provided: --target <TARGET> --model <MODEL>"),
    },
    Row {
        args: &["validate", "--from", "{dir}/missing.json"],
        want: Want::Err("give a validation.json written by bfq validate"),
    },
    Row {
        args: &["validate", "--from", "{dir}/v.json", "--out", "{dir}/again"],
        want: Want::Ok("reported again; files in"),
    },
    Row {
        args: &[
            "validate",
            "--from",
            "{dir}/v.json",
            "--model",
            "nvme",
            "--warmup",
            "1",
            "--duration",
            "1",
            "--out",
            "{dir}/nvme",
        ],
        want: Want::Ok("simulated again with nvme; files in"),
    },
    Row {
        args: &[
            "validate",
            "--from",
            "{dir}/v.json",
            "--model",
            "floppy",
            "--out",
            "{dir}/floppy",
        ],
        want: Want::Err("--model floppy: unknown device 'floppy'"),
    },
    // replay (its options are tabled in replay_cli.rs)
    Row {
        args: &["replay", "--help"],
        want: Want::Ok("Usage: bfq replay"),
    },
    Row {
        args: &["replay", "{dir}/missing.trace"],
        want: Want::Err("is not a readable file"),
    },
];

#[test]
fn every_command_helps_works_and_fails_with_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("bad.toml"), "kind = \"hdd\"\nrpm = \"fast\"\n").expect("write");
    std::fs::write(d.join("bad.profile"), "this is not a profile\n").expect("write");
    std::fs::write(
        d.join("v.json"),
        include_str!("../../suite/tests/data/validation-loop-2x2.json"),
    )
    .expect("write");
    let mut failures = Vec::new();
    for row in ROWS {
        let args: Vec<String> = row
            .args
            .iter()
            .map(|a| a.replace("{dir}", &d.display().to_string()))
            .collect();
        let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
            .args(&args)
            .env_remove("BFQ_REAL_DIR")
            .output()
            .expect("runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let problem = match row.want {
            Want::Ok(text) => (!out.status.success() || !stdout.contains(text))
                .then(|| format!("should succeed with {text:?} on stdout")),
            Want::Note(text) => (!out.status.success()
                || !stdout.is_empty() && !stdout.contains(text) && !stderr.contains(text))
            .then(|| format!("should succeed and say {text:?}")),
            Want::Err(text) => {
                let one_line = stderr.trim_end().lines().count() == 1 && stderr.starts_with("bfq: ");
                (out.status.success() || !stdout.is_empty() || !one_line || !stderr.contains(text))
                    .then(|| format!("should fail with one line containing {text:?}"))
            }
        };
        if let Some(p) = problem {
            failures.push(format!(
                "bfq {}: {p}; got exit {:?}, stdout {:?}, stderr {:?}",
                args.join(" "),
                out.status.code(),
                stdout.chars().take(300).collect::<String>(),
                stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every subcommand the binary has appears in the table, so a new command cannot arrive untested.
#[test]
fn the_table_covers_every_subcommand() {
    let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .arg("--help")
        .output()
        .expect("runs");
    let help = String::from_utf8_lossy(&out.stdout);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 7, "{help}");
    for c in commands {
        assert!(
            ROWS.iter().any(|r| r.args.first() == Some(&c) && r.args.len() > 1),
            "no row for `bfq {c}`"
        );
    }
    assert!(Path::new(env!("CARGO_BIN_EXE_bfq")).exists());
}
