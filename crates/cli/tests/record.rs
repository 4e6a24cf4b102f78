//! `bfq record`: the committed recorded profiles replay in the simulator; a saved trace gives the committed bash
//! profile back; and, where root and ftrace are available, recording real commands end to end (otherwise those
//! tests print a visible `SKIP` line and pass, unless `BFQ_REAL_TESTS=1` asks for them, when they fail instead).

use bfq_suite::real::sys::skip_or_fail;
use bfq_workload::profile::Profile;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Live recordings drop the page cache and share tracefs: one at a time.
static LIVE: Mutex<()> = Mutex::new(());

fn bfq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bfq"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A temporary directory for one test's files, removed when dropped (on a failing assertion too).
fn tmpdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("bfq-record-test-")
        .tempdir()
        .expect("temp dir")
}

fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

fn load(path: &Path) -> Profile {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Profile::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Replays a profile on the simulated Seagate disk with no background load; returns the start-up time, s.
fn replay(path: &Path, sched: &str) -> f64 {
    let out = run_ok(
        bfq()
            .args([
                "run",
                "--device",
                "seagate-hdd",
                "--workload",
                "idle",
                "--sched",
                sched,
                "--app",
            ])
            .arg(path),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("start-up"))
        .expect("a start-up line");
    line.rsplit(": ")
        .next()
        .and_then(|v| v.trim_end_matches(" s").parse().ok())
        .unwrap_or_else(|| panic!("no start-up time in `{line}`"))
}

#[test]
fn committed_profiles_replay_in_the_simulator() {
    let dir = repo().join("profiles");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("profiles/") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("profile") {
            continue;
        }
        let p = load(&path);
        p.validate().expect("valid");
        let st = p.stats();
        assert!(st.requests >= 1 && st.bytes >= 4096, "{}", path.display());
        let t = replay(&path, "bfq");
        assert!(t > 0.0 && t < 60.0, "{}: start-up {t} s", path.display());
        n += 1;
    }
    assert!(n >= 2, "at least bash and xterm are recorded");
}

#[test]
fn saved_trace_gives_the_committed_bash_profile() {
    let dir = tmpdir();
    let out = dir.path().join("bash-from-trace.profile");
    let trace = repo().join("crates/cli/tests/data/bash-exit.trace");
    run_ok(
        bfq()
            .args(["record", "--name", "bash", "--capacity", "536870912", "--from-trace"])
            .arg(&trace)
            .arg("--out")
            .arg(&out),
    );
    let got = load(&out);
    let committed = load(&repo().join("profiles/bash.recorded.profile"));
    assert_eq!(got, committed);
    let st = got.stats();
    assert_eq!((st.requests, st.bytes), (65, 2_019_328));
}

#[test]
fn usage_errors_are_one_line() {
    let out = bfq().args(["record"]).output().expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no command given"), "{err}");
    let out = bfq()
        .args(["record", "--timeout", "3h", "--", "true"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let out = bfq()
        .args(["record", "--from-trace", "/nonexistent/trace"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("cannot read trace"), "{err}");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let out = bfq().args(["record", "--", "true"]).output().expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("needs root"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

/// Why live recording cannot be tested here, if it cannot.
fn live_unavailable() -> Option<String> {
    if !bfq_suite::real::sys::real_tests_requested() {
        return Some(format!(
            "it changes the machine (ftrace, drop_caches); set {}=1 as root to run it",
            bfq_suite::real::sys::REAL_TESTS_ENV
        ));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    let fs = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    let mounted = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .any(|r| Path::new(r).join("instances").is_dir());
    if !mounted && !fs.contains("tracefs") && !fs.contains("debugfs") {
        return Some("the kernel has no tracefs".into());
    }
    None
}

fn tracing_state() -> (Vec<String>, Vec<PathBuf>) {
    let mounts = std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("tracefs") || l.contains("debugfs"))
        .map(str::to_string)
        .collect();
    let instances = ["/sys/kernel/tracing/instances", "/sys/kernel/debug/tracing/instances"]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|rd| rd.flatten().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().contains("bfq-record-"))
        .collect();
    (mounts, instances)
}

#[test]
fn records_a_real_command_end_to_end() {
    const THIS: &str = "records_a_real_command_end_to_end";
    let dir = tmpdir();
    if let Some(why) = live_unavailable() {
        skip_or_fail(THIS, &format!("live recording needs root and ftrace ({why})"));
        return;
    }
    let _one = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let before = tracing_state();
    let data = dir.path().join("data.bin");
    let bytes: Vec<u8> = (0..2u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::write(&data, &bytes).expect("data file");
    let out = dir.path().join("cat.profile");
    let rec = bfq()
        .args(["record", "--name", "cat", "--out"])
        .arg(&out)
        .args(["--", "sh", "-c"])
        .arg(format!("cat '{}' > /dev/null", data.display()))
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&rec.stderr);
    if !rec.status.success() && err.contains("tracing is unavailable") {
        skip_or_fail(THIS, err.trim());
        return;
    }
    assert!(rec.status.success(), "{err}");
    assert_eq!(tracing_state(), before, "tracing settings restored");
    let p = load(&out);
    let st = p.stats();
    assert!(st.requests >= 1, "at least one read");
    // The 2 MiB file was written back and dropped from the cache, so cat read it from the device.
    assert!(st.bytes >= 2 << 20, "{} bytes read", st.bytes);
    assert_eq!(p.name, "cat");
    assert!(replay(&out, "noop") > 0.0);
    let _ = std::fs::remove_file(&data);
}

#[test]
fn timeout_keeps_what_was_read_and_ctrl_c_restores_everything() {
    const THIS: &str = "timeout_keeps_what_was_read_and_ctrl_c_restores_everything";
    let dir = tmpdir();
    if let Some(why) = live_unavailable() {
        skip_or_fail(THIS, &format!("live recording needs root and ftrace ({why})"));
        return;
    }
    let _one = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let before = tracing_state();

    // Timeout: the command is killed, the profile is written with a note.
    let out = dir.path().join("sleep.profile");
    let t0 = Instant::now();
    let rec = bfq()
        .args(["record", "--timeout", "400ms", "--out"])
        .arg(&out)
        .args(["--", "sleep", "30"])
        .output()
        .expect("runs");
    assert!(t0.elapsed() < Duration::from_secs(20), "the timeout fired");
    let err = String::from_utf8_lossy(&rec.stderr);
    if !rec.status.success() && err.contains("tracing is unavailable") {
        skip_or_fail(THIS, err.trim());
        return;
    }
    assert!(rec.status.success(), "{err}");
    let text = std::fs::read_to_string(&out).expect("written");
    assert!(text.contains("killed at the timeout"), "{text}");
    assert_eq!(tracing_state(), before, "restored after a timeout");

    // SIGINT: nothing written, error exit, tracing removed.
    let out2 = dir.path().join("interrupted.profile");
    let mut child = bfq()
        .args(["record", "--out"])
        .arg(&out2)
        .args(["--", "sleep", "30"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns");
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signals our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let t0 = Instant::now();
    let status = child.wait().expect("waits");
    assert!(t0.elapsed() < Duration::from_secs(10), "stopped promptly");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err).expect("reads");
    assert!(!status.success());
    assert!(err.contains("interrupted"), "{err}");
    assert!(!out2.exists(), "nothing written");
    assert_eq!(tracing_state(), before, "restored after Ctrl-C");
}
