//! The `kernel:DIR` target on a small `bfq loopdev` device (root only; skipped with a printed reason otherwise).
//!
//! One test function runs the scenarios in sequence on one 256 MiB device, so that they do not disturb each other
//! (each drops caches and switches the scheduler); the refusal test needs no device.

mod test_device;

use bfq_sched::SEC;
use bfq_suite::real::sched::scheduler_of;
use bfq_suite::real::sys::{self, BlockDev};
use bfq_suite::real::{run_kernel, RealError};
use bfq_suite::target::Target;
use bfq_suite::{Benchmark, Experiment, Work};
use std::path::Path;
use std::time::{Duration, Instant};
use test_device::Device;

/// The tests of this file run one at a time: each drops caches and loads the CPUs, which would disturb the others'
/// timings.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn root_or_skip(test: &str) -> bool {
    sys::real_test_gate(test)
}

fn current(dev: &BlockDev) -> String {
    scheduler_of(dev).expect("reads the scheduler").0
}

/// A quick start-up scenario: 2 s of warm-up, 4 MiB background files.
fn quick(dir: &Path, sched: &str, workload: &str) -> Experiment {
    let work = Work::background(workload, Some("bash"));
    let mut sc = Experiment::new(Target::Kernel(dir.to_path_buf()), sched, work);
    sc.settings.warmup = 2 * SEC;
    sc.settings.real.file_scale = 4.0 / 500.0;
    sc
}

#[test]
fn kernel_target_runs_and_restores_the_scheduler() {
    if !root_or_skip("kernel_target_runs_and_restores_the_scheduler") {
        return;
    }
    let _serial = serial();
    let d = Device::new("kernel", 256 << 20);
    let dev = d.block();
    // Start from a scheduler that is neither of the ones tested, to see it restored.
    std::fs::write(dev.queue().join("scheduler"), "mq-deadline").expect("sets the test device's scheduler");
    assert_eq!(current(&dev), "mq-deadline");

    // Idle start-up of the xterm profile under none, then under bfq with a tunable.
    for (sched, tunables) in [("none", vec![]), ("bfq", vec!["low_latency=1".to_string()])] {
        let mut sc = quick(&d.dir, sched, "idle");
        sc.work = Work::background("idle", Some("xterm"));
        sc.tunables = tunables;
        let t = Instant::now();
        let r = run_kernel(&sc).expect("runs");
        eprintln!(
            "idle xterm, {sched}: {:?} s in {:.1} s",
            r.startup_s,
            t.elapsed().as_secs_f64()
        );
        assert_eq!(r.target, format!("kernel:{}", d.dir.display()));
        assert_eq!(
            (r.benchmark, r.device.as_str()),
            (Benchmark::Startup, dev.name.as_str())
        );
        assert!(!r.timed_out);
        let s = r.startup_s.expect("started");
        assert!(s > 0.0 && s < 10.0, "start-up {s} s");
        // The profile's 6.2 MB were read from the device, within the window.
        assert!(r.read_mbps * r.extra["window_s"] >= 5.0, "{r:?}");
        assert_eq!(r.extra["io_errors"], 0.0);
        assert_eq!(current(&dev), "mq-deadline", "restored after {sched}");
    }

    // 2r-seq background under none and bfq: both start; the readers move data.
    for sched in ["none", "bfq"] {
        let sc = quick(&d.dir, sched, "2r-seq");
        let r = run_kernel(&sc).expect("runs");
        eprintln!(
            "bash under 2r-seq, {sched}: {:?} s, {:.1} MB/s read",
            r.startup_s, r.read_mbps
        );
        assert!(
            !r.timed_out && r.startup_s.is_some_and(|s| s > 0.0 && s < 30.0),
            "{r:?}"
        );
        assert!(r.read_mbps > 1.0, "{r:?}");
        assert!(r.extra["proc_read_mbps"] > 1.0, "{r:?}");
        assert_eq!(current(&dev), "mq-deadline");
    }

    // Throughput run with writers (buffered writes, fsync-free) and the sync loop.
    let mut sc = quick(&d.dir, "kyber", "1r1w-seq");
    sc.work = Work::background("1r1w-seq", None);
    sc.settings.duration = Some(2 * SEC);
    let r = run_kernel(&sc).expect("runs");
    assert_eq!(r.benchmark, Benchmark::Throughput);
    assert!(r.read_mbps > 1.0 && r.extra["proc_write_mbps"] > 1.0, "{r:?}");
    assert_eq!(current(&dev), "mq-deadline");

    // A real command, timed from spawn to exit.
    let mut sc = quick(&d.dir, "bfq", "idle");
    let cmd = format!("cat {}/bfq-files/* > /dev/null", d.dir.display());
    sc.work = Work::background("idle", Some(&cmd));
    sc.settings.real.app_cmd = Some(cmd);
    let r = run_kernel(&sc).expect("runs");
    assert!(r.startup_s.is_some_and(|s| s > 0.0 && s < 10.0), "{r:?}");
    assert_eq!(r.app, sc.settings.real.app_cmd);
    assert_eq!(current(&dev), "mq-deadline");

    // Failures restore too: an unknown tunable after switching to bfq, an unknown scheduler.
    let mut sc = quick(&d.dir, "bfq", "idle");
    sc.tunables = vec!["no_such_tunable=1".into()];
    let e = run_kernel(&sc).expect_err("fails");
    assert!(e.to_string().contains("no tunable 'no_such_tunable'"), "{e}");
    assert!(e.to_string().contains("low_latency"), "lists the real ones: {e}");
    assert_eq!(current(&dev), "mq-deadline", "restored after a failure");
    let mut sc = quick(&d.dir, "bfq", "idle");
    sc.tunables = vec!["slice_idle=notanumber".into()];
    assert!(run_kernel(&sc).is_err());
    assert_eq!(current(&dev), "mq-deadline", "restored after a rejected value");
    let e = run_kernel(&quick(&d.dir, "cfq", "idle")).expect_err("fails");
    assert!(e.to_string().contains("choose one of"), "{e}");
    assert_eq!(current(&dev), "mq-deadline");
}

#[test]
fn refuses_devices_it_did_not_make() {
    if !root_or_skip("refuses_devices_it_did_not_make") {
        return;
    }
    let _serial = serial();
    // A directory on the machine's own disk.
    let tmp = tempfile::tempdir().expect("tempdir");
    let dev = BlockDev::of_dir(tmp.path()).expect("device");
    let before = std::fs::read_to_string(dev.queue().join("scheduler")).expect("reads");
    let sc = quick(tmp.path(), "bfq", "idle");
    match run_kernel(&sc) {
        Err(RealError::NotOurDevice { device, .. }) => assert_eq!(device, dev.dev_path()),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let after = std::fs::read_to_string(dev.queue().join("scheduler")).expect("reads");
    assert_eq!(before, after, "the machine's disk was not touched");
    assert!(
        std::fs::read_dir(tmp.path()).expect("lists").next().is_none(),
        "no files made"
    );
    // A directory on a file system without a block device.
    if Path::new("/dev/shm").is_dir() {
        let e = run_kernel(&quick(Path::new("/dev/shm"), "bfq", "idle")).expect_err("refused");
        assert!(e.to_string().contains("not a block device"), "{e}");
    }
}

/// Child half of `interrupt_restores_the_scheduler`: a long run to be interrupted.
#[test]
#[ignore = "run by interrupt_restores_the_scheduler as a child process"]
fn child_long_run_for_interrupt() {
    let Ok(dir) = std::env::var("BFQ_TEST_CHILD_DIR") else {
        return;
    };
    let mut sc = quick(Path::new(&dir), "bfq", "1r-seq");
    sc.work = Work::background("1r-seq", None);
    sc.settings.duration = Some(60 * SEC);
    let _ = run_kernel(&sc);
}

#[test]
fn interrupt_restores_the_scheduler() {
    if !root_or_skip("interrupt_restores_the_scheduler") {
        return;
    }
    let _serial = serial();
    let d = Device::new("kernel-int", 64 << 20);
    let dev = d.block();
    assert_eq!(current(&dev), "none");
    let exe = std::env::current_exe().expect("test binary");
    let child = std::process::Command::new(exe)
        .args(["--exact", "child_long_run_for_interrupt", "--ignored", "--nocapture"])
        .env("BFQ_TEST_CHILD_DIR", &d.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawns");
    let started = Instant::now();
    while current(&dev) != "bfq" {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "child never switched to bfq"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signals our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let out = child.wait_with_output().expect("waits");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "child: {err}");
    assert_eq!(current(&dev), "none", "restored on Ctrl-C; child said: {err}");
}
