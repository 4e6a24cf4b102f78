//! 2.6.18's throttled writers write dirty pages back themselves (`balance_dirty_pages` before 3.2's I/O-less
//! throttling, `bfq_sim::host::throttle`): what order their writes reach the device in, against the flusher
//! alone (the default, I/O-less model). docs/DEVICES.md, "Host: 2.6.18 writeback".

use bfq_sched::{Time, SEC};
use bfq_sim::device::{preset, DevRequest, Device};
use bfq_sim::host::{DirtyThrottle, WriterWriteback};
use bfq_sim::{HostConfig, Simulation};
use bfq_workload::iozone::{Iozone, IozoneConfig, IozonePhase};
use bfq_workload::{FileSpec, Placement};
use std::sync::{Arc, Mutex};

/// Passes everything to the SAN LUN model and records the sector of every write it is given, in order.
struct Recorder {
    inner: Box<dyn Device>,
    writes: Arc<Mutex<Vec<u64>>>,
}

impl Device for Recorder {
    fn info(&self) -> bfq_sched::DeviceInfo {
        self.inner.info()
    }
    fn submit(&mut self, rq: DevRequest, now: Time) {
        if rq.dir == bfq_sched::Direction::Write {
            self.writes.lock().expect("lock").push(rq.sector);
        }
        self.inner.submit(rq, now);
    }
    fn next_completion(&self) -> Option<Time> {
        self.inner.next_completion()
    }
    fn pop_completion(&mut self, now: Time) -> Option<u64> {
        self.inner.pop_completion(now)
    }
}

const WRITERS: u64 = 10;
/// 2 GiB of page cache: a dirty limit of 819 MiB at 2.6.18's 40 %, well below the 2.5 GiB written.
const MEMORY: u64 = 2 << 30;
const FILE: u64 = 256 << 20;

/// Ten iozone writers (one `-i 0` write pass of 256 MiB each, 512 KiB records) under `sched` on the SAN LUN;
/// returns, for every write the device received, which writer's file it belongs to, and when the last writer
/// finished.
fn write_order(sched: &str, throttle: DirtyThrottle) -> (Vec<u64>, Time) {
    let inner = preset("san-lun").expect("preset").build();
    let info = inner.info();
    let writes = Arc::new(Mutex::new(Vec::new()));
    let dev = Box::new(Recorder {
        inner,
        writes: Arc::clone(&writes),
    });
    let policy = bfq_sched::build::<&str>(sched, &info, &[]).expect("registered");
    let host = HostConfig {
        memory_bytes: MEMORY,
        dirty_ratio: 40,
        dirty_background_ratio: 10,
        dirty_throttle: throttle,
        time_policy: false,
        ..HostConfig::default()
    };
    let mut sim = Simulation::new(dev, policy, host, 1);
    let mut pids = Vec::new();
    for i in 0..WRITERS {
        // Writer i's file starts at i / 10 of the device, so a sector names its writer.
        let file = sim
            .add_file(&FileSpec {
                name: format!("f{i}"),
                size: FILE,
                placement: Placement::At(i as f64 / WRITERS as f64),
                prewritten: false,
            })
            .expect("fits");
        let mut cfg = IozoneConfig::new(format!("iozone{i}"), file, FILE);
        cfg.phases = vec![IozonePhase::Write];
        pids.push(sim.spawn(0, Box::new(Iozone::new(cfg))));
    }
    let mut end = 0;
    for p in pids {
        end = end.max(sim.run_until_exit(p, 600 * SEC).expect("writer finishes"));
    }
    sim.check_invariants().expect("invariants");
    let per_file = info.capacity_sectors / WRITERS;
    let order = writes.lock().expect("lock").iter().map(|s| s / per_file).collect();
    (order, end)
}

/// Runs of consecutive writes to the same file.
fn runs(order: &[u64]) -> usize {
    1 + order.windows(2).filter(|w| w[0] != w[1]).count()
}

#[test]
fn throttled_writers_interleave_their_files_where_the_flusher_sends_one_file_at_a_time() {
    // Without the mechanism (I/O-less throttling, the default) the writers only sleep over the limit and the
    // flusher alone writes back, one dirty file after another until it is clean: the LUN receives a few long
    // per-file runs. In 2.6.18 each throttled writer writes back itself, taking the oldest-dirtied inode no other
    // writer holds, so ten writers hold ten different files and all wait for requests at once: the queue (FIFO
    // under noop) receives their files interleaved. A woken writer becomes a "batcher" and may take up to 32
    // requests in a row (2.6.18's BLK_BATCH_REQ, within 20 ms), so a run is at most a few batches long, not a
    // file's whole dirty part.
    let wb = DirtyThrottle::WriteBack(WriterWriteback::linux_2_6_18(MEMORY, 4));
    let (legacy, _) = write_order("noop", wb);
    let (io_less, _) = write_order("noop", DirtyThrottle::Sleep);
    let n = (legacy.len() + io_less.len()) / 2;
    let (r_legacy, r_io_less) = (runs(&legacy), runs(&io_less));
    assert!(
        r_legacy >= 5 * r_io_less,
        "{r_legacy} runs in {} writes with writers writing back, {r_io_less} in {} with the flusher alone",
        legacy.len(),
        io_less.len()
    );
    // Mean run: at most about a batch of 32 requests plus what slips in before the pool fills.
    assert!(
        (legacy.len() as f64 / r_legacy as f64) < 48.0,
        "{r_legacy} runs in {n} writes"
    );
}

#[test]
fn the_slower_a_writer_prepares_its_requests_the_finer_the_files_interleave() {
    // A woken writer may take a batch of up to 32 requests, but it prepares them one after another, spending CPU
    // time on every page (`submit_ns_per_page`). Free of cost, it fills the pool at once and the queue receives
    // its batch as one run. The longer each request takes to prepare, the more requests complete meanwhile, each
    // freeing a place that wakes another waiting writer, so more writers submit side by side and the runs of one
    // file get shorter: the number of runs grows with the CPU time per page.
    let runs_at = |ns: Time| {
        let mut wb = WriterWriteback::linux_2_6_18(MEMORY, 4);
        wb.submit_ns_per_page = ns;
        let (order, _) = write_order("noop", DirtyThrottle::WriteBack(wb));
        (runs(&order), order.len())
    };
    // Measured: 126 runs in 3546 writes free of cost, 123 in 3524 at the default 2 µs per page (a 512 KiB request
    // takes 0.26 ms to prepare, far less than the LUN's 1.3 ms per request at its link's rate: batches still fill
    // the pool), 2676 in 3572 at 20 µs (2.6 ms per request, slower than the LUN).
    let (free, default, slow) = (runs_at(0), runs_at(2_000), runs_at(20_000));
    assert!(
        slow.0 > default.0 && slow.0 > free.0,
        "runs, writes: {free:?} {default:?} {slow:?}"
    );
    assert!(slow.0 >= 3 * free.0, "runs, writes: {free:?} {default:?} {slow:?}");
}
