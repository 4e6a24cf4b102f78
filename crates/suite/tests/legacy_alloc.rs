//! Request allocation of the legacy block layer as 3.13 runs it (issue 13, item 3), seen from a whole simulation.

use bfq_sched::tags::TagClass;
use bfq_sim::{HostConfig, Simulation};
use bfq_suite::scenario::Era;
use bfq_workload::workloads;

/// Five buffered writers and five sequential readers under CFQ on seagate-hdd (paper era: no writer rate cap, so
/// dirty pages pile up and the flusher floods the async pool). 3.13's allocator keeps separate sync and async
/// pools of 128: the flood fills only the async pool, so the readers always find requests (the sync pool's peak
/// stays at the readers' own demand, at most two readahead windows each) and keep reading. The flusher, the task
/// that fills the async pool, becomes a batcher and takes up to 32 more: the async pool holds more than 128
/// requests during a batch, and never more than the hard cap of 3/2 x 128 = 192.
#[test]
fn a_writer_flood_fills_the_async_pool_past_128_in_batches_and_never_starves_readers() {
    let dev_cfg = bfq_sim::device::resolve("seagate-hdd").expect("preset");
    let dev = dev_cfg.build();
    let info = dev.info();
    let policy = bfq_sched::build("cfq", &info, &[] as &[&str]).expect("cfq");
    let mut sim = Simulation::new(dev, policy, HostConfig::default(), 1);
    let wl = workloads::build("5r5w-seq", &Era::Paper.settings(false), info.rotational, 0, 1).expect("workload");
    for f in &wl.files {
        sim.add_file(f).expect("file");
    }
    for p in wl.processes {
        sim.spawn(0, p);
    }
    let secs = 60;
    sim.run_until(secs * 1_000_000_000);
    let tags = sim.tags();
    assert!(tags.is_legacy());
    let peak_async = tags.peak(TagClass::Async);
    assert!(
        peak_async > 128,
        "the flusher never batched: async pool peak {peak_async}"
    );
    assert!(peak_async <= 192, "past the hard cap: {peak_async}");
    let peak_sync = tags.peak(TagClass::SyncRead);
    assert!(
        peak_sync <= 10,
        "five readers with two windows each: sync pool peak {peak_sync}"
    );
    let read = sim.metrics().bytes_between(0, secs * 1_000_000_000)[0];
    assert!(read > 0, "the readers read");
}
