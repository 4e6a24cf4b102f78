//! Writeback throttling (blk-wbt) in the simulator's host model: the current era's kernels enable it for none
//! (noop), mq-deadline and kyber; BFQ disables it; the paper era (3.13) has none (docs/DEVICES.md, "Host:
//! writeback throttling"; `bfq_sim::host::wbt`).

use bfq_sched::SEC;
use bfq_suite::scenario::Era;
use bfq_suite::{Experiment, Work};

fn startup(device: &str, sched: &str, wbt_lat_us: Option<u64>) -> bfq_suite::RunResult {
    let mut sc = Experiment::sim(device, sched, Work::background("5r5w-seq", Some("xterm")));
    sc.settings.duration = Some(20 * SEC);
    sc.settings.wbt_lat_us = wbt_lat_us;
    sc.run().unwrap_or_else(|e| panic!("{device} {sched}: {e}"))
}

#[test]
fn xterm_starts_under_5r5w_seq_on_fast_devices_with_none_mq_deadline_and_kyber() {
    // On the real kernel (a loop device on this machine) xterm under 5r5w-seq starts in about 1 s with none. Without
    // wbt the simulated flusher kept up to a request pool's worth of 512 KiB writes on the device ahead of every
    // read, and xterm took tens of seconds or did not start. With wbt it must start on both fast devices with all
    // three schedulers.
    for device in ["nvme", "plextor-ssd"] {
        for sched in ["noop", "mq-deadline", "kyber"] {
            let r = startup(device, sched, None);
            assert!(
                r.startup_s.is_some() && !r.timed_out,
                "{device} {sched}: xterm did not start ({:?})",
                r.startup_s
            );
        }
    }
}

#[test]
fn wbt_bounds_the_writeback_queued_ahead_of_each_read_on_nvme() {
    // The NVMe model serves commands in arrival order, so each of xterm's dependent reads waits for everything
    // dispatched before it. wbt lets at most max_depth = 16 background writes be in flight (the kernel's default
    // depth; scaled further down while reads miss the 2 ms target), each at most 512 KiB (max_sectors), which the
    // drive takes at its program rate once its buffer is full (2000 MB/s, docs/DEVICES.md); the ten background
    // readers add at most two 128 KiB windows each at the 3000 MB/s link. So a read waits at most
    // 16 x 0.524 / 2000 + 20 x 0.131 / 3000 s = 5.1 ms beyond its own service, and xterm's at most 718 reads
    // (its profile) add at most 718 x 5.1 ms = 3.7 s to its idle start-up. Without wbt (the same run with
    // wbt_lat_usec = 0) the flusher's depth is bounded only by the request pool, so the bound must not hold.
    let idle = {
        let mut sc = Experiment::sim("nvme", "noop", Work::background("idle", Some("xterm")));
        sc.settings.duration = Some(20 * SEC);
        sc.run().unwrap().startup_s.expect("xterm starts on an idle nvme")
    };
    let wait_s = 16.0 * 0.524 / 2000.0 + 20.0 * 0.131 / 3000.0;
    let bound = idle + 718.0 * wait_s;
    let with = startup("nvme", "noop", None).startup_s.expect("starts with wbt");
    let without = startup("nvme", "noop", Some(0)).startup_s.unwrap_or(60.0);
    assert!(with <= bound, "with wbt: {with} s, bound {bound} s (idle {idle} s)");
    assert!(
        without > bound,
        "without wbt: {without} s, bound {bound} s: wbt made no difference"
    );
}

#[test]
fn wbt_follows_the_era_and_the_scheduler() {
    let nvme = bfq_sim::device::preset("nvme").unwrap().build().info();
    let hdd = bfq_sim::device::preset("seagate-hdd").unwrap().build().info();
    // The kernel's defaults: 2 ms on non-rotational devices, 75 ms on rotational ones.
    assert_eq!(Era::Current.wbt_target("none", &nvme), Some(2_000_000));
    assert_eq!(Era::Current.wbt_target("kyber", &hdd), Some(75_000_000));
    assert_eq!(Era::Current.wbt_target("mq-deadline", &hdd), Some(75_000_000));
    // BFQ disables it; the legacy elevators and the paper era's kernel do not have it.
    for sched in ["bfq", "bfq-v7r2", "cfq", "deadline", "anticipatory"] {
        assert_eq!(Era::Current.wbt_target(sched, &nvme), None, "{sched}");
    }
    assert_eq!(Era::Paper.wbt_target("none", &nvme), None);
}
