//! Seed 003's ten-thread iozone on its device class, the SAN LUN preset (`san-lun`, docs/DEVICES.md, SAN LUN): the
//! order in which the schedulers pass writes on would decide how fast the array destages them, if the host
//! interleaved them as 2.6.18 did.

use bfq_suite::reproduce::{IOZONE_DEVICE, IOZONE_READ_AHEAD_KB};
use bfq_suite::{Experiment, RunResult, Work};

fn iozone(device: &str, sched: &str, threads: u32, file_size: u64) -> RunResult {
    let mut e = Experiment::sim(device, sched, Work::Iozone { threads, file_size });
    e.settings.read_ahead_kb = Some(IOZONE_READ_AHEAD_KB);
    e.run().unwrap_or_else(|err| panic!("{device} {sched}: {err}"))
}

fn kbps(r: &RunResult, key: &str) -> f64 {
    r.extra.get(key).copied().unwrap_or(0.0)
}

#[test]
fn ten_threads_write_alike_on_the_san_lun_because_the_host_sends_per_file_runs() {
    // The seed found deadline 2.8x faster than noop writing with ten threads. The LUN model has the mechanism that
    // makes the order matter (interleaved streams destage slower than sorted runs: `array::tests`), but the
    // simulated host hands every scheduler the same order: its flusher writes one dirty file at a time in 512 KiB
    // requests, so the writes reach the LUN as long per-file runs, which it takes at its link's rate (400 MB/s)
    // under every scheduler. In 2.6.18 each of the ten throttled writers wrote dirty pages back itself
    // (`balance_dirty_pages`, before 3.2's I/O-less throttling), so their requests interleaved in the queue: the
    // order noop keeps and deadline sorts. That host behaviour is not modelled, so the write and re-write rates
    // must come out equal here (within 2 %); a model of it would make this assertion fail, and the seed's claim
    // checkable (docs/DEVICES.md, SAN LUN).
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
