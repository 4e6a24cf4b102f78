//! Seed 003's ten-thread iozone on its device class, the SAN LUN preset (`san-lun`, docs/DEVICES.md, SAN LUN), with
//! the host's 2.6.18 writeback (throttled writers write back themselves; docs/DEVICES.md, "Host: 2.6.18
//! writeback"): the writes reach the queue interleaved across the files, in runs as long as one writer's request
//! batch.

use bfq_suite::reproduce::{IOZONE_DEVICE, IOZONE_READ_AHEAD_KB};
use bfq_suite::{Experiment, RunResult, Work};

fn iozone(device: &str, sched: &str, threads: u32, file_size: u64) -> RunResult {
    let mut e = Experiment::sim(device, sched, Work::Iozone { threads, file_size });
    e.settings.read_ahead_kb = Some(IOZONE_READ_AHEAD_KB);
    e.settings.kernel_2_6_18 = true;
    e.run().unwrap_or_else(|err| panic!("{device} {sched}: {err}"))
}

fn kbps(r: &RunResult, key: &str) -> f64 {
    r.extra.get(key).copied().unwrap_or(0.0)
}

#[test]
fn ten_threads_write_alike_on_the_san_lun_because_batches_of_one_file_reach_it() {
    // The seed found deadline 2.8x faster than noop writing with ten threads. The host now writes back as 2.6.18
    // did: each throttled writer writes dirty pages back itself, so the queue receives the ten files' requests
    // interleaved (`bfq-sim`'s `writer_writeback` test). But a writer woken for a free request becomes a
    // "batcher" and takes up to 32 requests (16 MiB of one file) in a row, so even under noop the LUN receives
    // runs of about 16 MiB per file: 2 MiB per member disk per run, which it destages faster than its link's
    // 400 MB/s brings data in (`array::tests`: runs of one 512 KiB request per file destage below the link, runs
    // of 16 at it). The LUN stays link-bound under every scheduler, so the write and re-write rates come out equal
    // (within 2 %); they stay equal even with the writers' CPU time per page raised tenfold, which cuts the runs
    // to about 2.6 requests (docs/DEVICES.md, "Host: 2.6.18 writeback"). A model that made this fail would need
    // the order to cost the array more (a RAID 5 group's partial-stripe writes, a smaller or differently destaged
    // cache: estimates of docs/DEVICES.md).
    let size = 1 << 30;
    let runs: Vec<(&str, RunResult)> = ["cfq", "deadline", "anticipatory", "noop"]
        .iter()
        .map(|&s| (s, iozone(IOZONE_DEVICE, s, 10, size)))
        .collect();
    for key in ["write_kbps", "rewrite_kbps"] {
        let v: Vec<f64> = runs.iter().map(|(_, r)| kbps(r, key)).collect();
        let (lo, hi) = v
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
        assert!(
            lo >= 0.98 * hi,
            "{key}: {:?}",
            runs.iter().map(|(s, r)| (s, kbps(r, key))).collect::<Vec<_>>()
        );
    }
}
