//! The `engine:DIR` target on a small `bfq loopdev` device (root only; skipped with a printed reason otherwise):
//! our policies schedule the suite's processes' I/O in the io_uring engine, the loop device's own scheduler is
//! `none` during the run and restored afterwards.

mod test_device;

use bfq_sched::SEC;
use bfq_suite::real::run_engine;
use bfq_suite::real::sched::scheduler_of;
use bfq_suite::real::sys;
use bfq_suite::target::Target;
use bfq_suite::{Experiment, Work};
use std::path::Path;
use test_device::Device;

fn scenario(dir: &Path, sched: &str, workload: &str, app: Option<&str>) -> Experiment {
    let mut sc = Experiment::new(
        Target::Engine(dir.to_path_buf()),
        sched,
        Work::background(workload, app),
    );
    sc.settings.warmup = 2 * SEC;
    sc.settings.duration = Some(3 * SEC);
    sc.settings.real.file_scale = 8.0 / 500.0; // 8 MiB background files
    sc
}

#[test]
fn engine_target_runs_our_policies_and_restores_the_scheduler() {
    if !sys::real_test_gate("engine_target_runs_our_policies_and_restores_the_scheduler") {
        return;
    }
    let d = Device::new("engine", 256 << 20);
    let dev = d.block();
    let before = scheduler_of(&dev).expect("scheduler").0;
    for sched in ["noop", "bfq"] {
        // Start-up of bash on an idle device: the profile's reads all complete, in well under the 60 s timeout.
        let r = run_engine(&scenario(&d.dir, sched, "idle", Some("bash"))).expect("engine start-up run");
        assert_eq!(r.target, format!("engine:{}", d.dir.display()));
        assert!(!r.timed_out, "{sched}: bash did not start");
        let s = r.startup_s.expect("a start-up time");
        assert!(s > 0.0 && s < 30.0, "{sched}: start-up {s} s");
        // Two buffered sequential readers for 3 s: they read through the engine's readahead windows, so the
        // device moved data (any real device does more than 1 MB/s), and nothing failed.
        let r = run_engine(&scenario(&d.dir, sched, "2r-seq", None)).expect("engine throughput run");
        assert!(r.read_mbps > 1.0, "{sched}: {} MB/s", r.read_mbps);
        assert_eq!(
            r.extra.get("io_errors").copied().unwrap_or(0.0),
            0.0,
            "{sched}: I/O errors"
        );
        assert_eq!(
            scheduler_of(&dev).expect("scheduler").0,
            before,
            "{sched}: scheduler restored"
        );
    }
    // Our policy names, not the kernel's: an unknown one is a clear error and changes nothing.
    let e = run_engine(&scenario(&d.dir, "no-such-policy", "idle", Some("bash"))).unwrap_err();
    assert!(e.to_string().contains("no-such-policy"), "{e}");
    assert_eq!(scheduler_of(&dev).expect("scheduler").0, before);
}
