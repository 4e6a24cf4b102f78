//! The kernel target through the `bfq` binary, on a small `bfq loopdev` device (root and `BFQ_REAL_TESTS=1` only;
//! otherwise each test prints why it is skipped and passes): the application replay runs in its own process
//! (`bfq replay-app`) and every run reports its CPU use.

use bfq_suite::real::sys::real_test_gate;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Real tests share the machine's page cache and loop devices: one at a time.
static ONE: Mutex<()> = Mutex::new(());

fn bfq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bfq"))
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A `bfq loopdev` device made and removed through the binary (removed on a failing assertion too).
pub struct LoopDir(pub PathBuf);

impl LoopDir {
    pub fn new(tag: &str, size: &str) -> LoopDir {
        let dir = std::env::temp_dir().join(format!("bfq-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir(&dir);
        run_ok(bfq().args(["loopdev", "create", "--size", size]).arg(&dir));
        LoopDir(dir)
    }
}

impl Drop for LoopDir {
    fn drop(&mut self) {
        let out = bfq().args(["loopdev", "remove"]).arg(&self.0).output();
        if !out.is_ok_and(|o| o.status.success()) {
            eprintln!("could not remove the test device {}", self.0.display());
        }
    }
}

fn runs(out: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    match v.get("runs") {
        Some(serde_json::Value::Array(a)) => a.clone(),
        _ => v.as_array().cloned().unwrap_or_default(),
    }
}

#[test]
fn the_kernel_target_replays_the_application_in_its_own_process() {
    if !real_test_gate("the_kernel_target_replays_the_application_in_its_own_process") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dev = LoopDir::new("app", "256M");
    let out = tempfile::tempdir().expect("tempdir");
    run_ok(
        bfq()
            .args([
                "suite",
                "startup",
                "--sched",
                "bfq",
                "--workloads",
                "idle,2r-seq",
                "--apps",
                "bash",
            ])
            .args(["--reps", "1", "--warmup", "1", "--file-scale", "0.01", "--target"])
            .arg(format!("kernel:{}", dev.0.display()))
            .arg("--out")
            .arg(out.path()),
    );
    let rs = runs(out.path());
    assert_eq!(rs.len(), 2);
    for r in &rs {
        let x = &r["extra"];
        assert_eq!(x["app_process"].as_f64(), Some(1.0), "{r}");
        assert!(x["app_cpu_s"].as_f64().is_some_and(|c| c > 0.0 && c < 30.0), "{r}");
        assert!(x["app_wall_s"].as_f64().is_some_and(|w| w > 0.0), "{r}");
        assert!(
            x["cpu_busy_pct"].as_f64().is_some_and(|p| (0.0..=100.0).contains(&p)),
            "{r}"
        );
        assert!(x["loadavg_1m"].as_f64().is_some(), "{r}");
        assert!(r["startup_s"].as_f64().is_some_and(|s| s > 0.0 && s < 60.0), "{r}");
        assert_eq!(x["io_errors"].as_f64(), Some(0.0), "{r}");
    }
}

#[test]
fn replay_app_refuses_input_that_is_not_a_spec() {
    let out = bfq()
        .arg("replay-app")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("JSON application spec"), "{err}");
}

#[test]
fn calibrate_then_a_two_cell_validate_on_a_small_loop_device() {
    if !real_test_gate("calibrate_then_a_two_cell_validate_on_a_small_loop_device") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dev = LoopDir::new("validate", "1200M");
    let out = tempfile::tempdir().expect("tempdir");
    let model = out.path().join("loop.toml");
    let saved = out.path().join("loop.json");
    let t0 = std::time::Instant::now();
    let text = run_ok(
        bfq()
            .arg("calibrate")
            .arg(&dev.0)
            .args(["--probe-seconds", "1", "--out"])
            .arg(&model)
            .arg("--save")
            .arg(&saved),
    );
    assert!(t0.elapsed().as_secs() < 180, "calibrate took {:?}", t0.elapsed());
    assert!(
        text.contains("randread-4k-qd32") && text.contains("simulated"),
        "{text}"
    );
    let toml = std::fs::read_to_string(&model).expect("model written");
    assert!(toml.contains("model = \"measured\""), "{toml}");
    // The pair and host probes ran and their results went into the model (which way the pair probe decides
    // depends on the machine; the host's costs are always recorded).
    assert!(
        text.contains("# pair probe:") && text.contains("# host probe:"),
        "{text}"
    );
    assert!(toml.contains("[host]") && toml.contains("syscall_ns = "), "{toml}");
    // The simulator accepts the model.
    run_ok(
        bfq()
            .args(["run", "--workload", "idle", "--app", "bash", "--device"])
            .arg(&model),
    );
    // Fitting again from the saved measurements needs no device.
    run_ok(
        bfq()
            .arg("calibrate")
            .arg("--from")
            .arg(&saved)
            .arg("--out")
            .arg(out.path().join("again.toml")),
    );
    let vdir = out.path().join("v");
    let table = run_ok(
        bfq()
            .args([
                "validate",
                "--benchmarks",
                "startup",
                "--workloads",
                "idle",
                "--sched",
                "bfq,none",
            ])
            .args([
                "--app",
                "bash",
                "--reps",
                "1",
                "--warmup",
                "1",
                "--file-scale",
                "0.01",
                "--target",
            ])
            .arg(format!("kernel:{}", dev.0.display()))
            .arg("--model")
            .arg(&model)
            .arg("--out")
            .arg(&vdir),
    );
    assert!(table.contains("2 cells: "), "{table}");
    for f in ["validation.json", "validation.csv", "validation.html", "validation.txt"] {
        assert!(vdir.join(f).is_file(), "{f} missing");
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(vdir.join("validation.json")).expect("json")).expect("parses");
    let cells = v["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 2);
    for c in cells {
        assert!(c["ratio"].as_f64().is_some_and(|r| r > 0.0), "{c}");
        assert!(c["ranking_agrees"].is_boolean(), "{c}");
    }
}

#[test]
fn calibrate_and_validate_refuse_bad_input_in_one_line() {
    for (args, want) in [
        (vec!["calibrate", "/nonexistent/dir"], "does not exist|needs root"),
        (vec!["calibrate", "--from", "/nonexistent.json"], "cannot read"),
        (
            vec!["validate", "--target", "sim:nvme", "--model", "nvme"],
            "give --target kernel:DIR",
        ),
    ] {
        let out = bfq().args(&args).output().expect("runs");
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(want.split('|').any(|w| err.contains(w)), "{args:?}: {err}");
    }
}
