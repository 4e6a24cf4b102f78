//! Memory of a simulation is bounded by its working set, not by simulated time (issue 16, defect 1).

use bfq_sim::host::PageCache;
use bfq_sim::{HostConfig, Simulation};
use bfq_suite::scenario::Era;
use bfq_workload::workloads;

/// 2000 simulated seconds of ten sequential readers. Before the fix, pages dropped from the cache and pages that
/// became clean again left stale entries in the page cache's LRU queue that only an eviction past them removed:
/// 0.5 MB per simulated second, a peak of 51.6 million entries here (measured with the old queue rules and this
/// test). The queue now holds at most twice
/// the clean pages plus a constant, and clean pages never exceed the cache's capacity by more than one completion,
/// so its peak is bounded by the cache size whatever the duration.
#[test]
fn page_cache_structures_stay_bounded_over_2000_simulated_seconds() {
    let dev_cfg = bfq_sim::device::resolve("seagate-hdd").expect("preset");
    let dev = dev_cfg.build();
    let info = dev.info();
    let policy = bfq_sched::build("bfq", &info, &[] as &[&str]).expect("bfq");
    let host = HostConfig::default();
    let capacity = host.memory_bytes / bfq_sim::host::layout::PAGE_BYTES;
    let mut sim = Simulation::new(dev, policy, host, 1);
    let wl = workloads::build("10r-seq", &Era::Current.settings(false), info.rotational, 0, 1).expect("workload");
    for f in &wl.files {
        sim.add_file(f).expect("file");
    }
    for p in wl.processes {
        sim.spawn(0, p);
    }
    let seconds: u64 = 2000;
    sim.run_until(seconds * 1_000_000_000);
    let cache = sim.page_cache();
    // The readers did cycle through their files many times (otherwise nothing was dropped and the test proves
    // nothing): ten files read at the disk's rate for 2000 s is far more than the cache holds.
    let read_pages = sim.metrics().bytes_between(0, seconds * 1_000_000_000)[0] / bfq_sim::host::layout::PAGE_BYTES;
    assert!(
        read_pages > 4 * capacity,
        "only {read_pages} pages read, cache {capacity}"
    );
    let largest_completion = u64::from(info.max_sectors) * 512 / bfq_sim::host::layout::PAGE_BYTES;
    let bound = PageCache::lru_bound(capacity, largest_completion);
    assert!(
        cache.lru_peak() <= bound,
        "LRU queue peaked at {} entries, bound {bound} (cache {capacity} pages)",
        cache.lru_peak()
    );
    assert!(cache.clean_pages() <= capacity);
}
