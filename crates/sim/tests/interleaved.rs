//! Interleaved readers (S's `interleaved_io`: N processes reading one area in interleaved 16 KiB direct reads,
//! together one sequential stream) on the `seagate-hdd` model: which scheduling mechanisms decide their throughput.
//! docs/DEVICES.md ("Interleaved readers and the drive's prefetch") gives the analysis.

use bfq_sched::bfq::era::Era;
use bfq_sched::bfq::tunables::Params;
use bfq_sched::bfq::Bfq;
use bfq_sched::{Scheduler, Time, TunableValues, SEC};
use bfq_sim::device::{preset, DeviceConfig, Hdd};
use bfq_sim::{HostConfig, Simulation};
use bfq_workload::interleaved::InterleavedReader;
use bfq_workload::{FileSpec, Placement};

/// The shared area: 1 GiB at the start of the disk (its outer zone).
const AREA: u64 = 1 << 30;
/// Warm-up (S's 5 s) and measured time.
const WARMUP: Time = 5 * SEC;
const MEASURE: Time = 5 * SEC;

/// The policy to run: a registered scheduler, or bfq-v7r2 with early queue merging switched off.
enum Policy {
    Named(&'static str),
    V7r2WithoutMerging,
}

/// Aggregate MB/s of `readers` interleaved readers over the measured time.
fn interleaved_mb_s(policy: Policy, readers: u32) -> f64 {
    let dev = preset("seagate-hdd").expect("preset").build();
    let info = dev.info();
    let sched: Box<dyn Scheduler> = match policy {
        Policy::Named(name) => bfq_sched::build::<&str>(name, &info, &[]).expect("registered"),
        Policy::V7r2WithoutMerging => {
            let desc = bfq_sched::find("bfq-v7r2").expect("registered");
            let t = TunableValues::parse::<&str>("bfq-v7r2", desc.tunables, &info, &[]).expect("defaults");
            Box::new(Bfq::with_era(&info, Params::from_values(&t), Era::V7r2).without_queue_merging())
        }
    };
    let host = HostConfig {
        time_policy: false,
        ..HostConfig::default()
    };
    let mut sim = Simulation::new(dev, sched, host, 1);
    let file = sim
        .add_file(&FileSpec {
            name: "area".into(),
            size: AREA,
            placement: Placement::At(0.0),
            prewritten: true,
        })
        .expect("fits");
    for r in InterleavedReader::group(file, AREA, readers) {
        sim.spawn(0, Box::new(r));
    }
    sim.run_until(WARMUP + MEASURE);
    sim.metrics().mbps_between(WARMUP, WARMUP + MEASURE)[0]
}

/// The media rate of the outer zone, MB/s.
fn zone_rate() -> f64 {
    let Some(DeviceConfig::Hdd(cfg)) = preset("seagate-hdd") else {
        panic!("seagate-hdd is an HDD preset");
    };
    Hdd::new(&cfg).media_rate_bytes_per_s(0) / 1e6
}

#[test]
fn readers_stream_unless_a_scheduler_idles_for_each_without_merging_them() {
    // Together the readers read the area front to back; alone each skips N - 1 blocks. A scheduler that does not
    // idle (noop, deadline) keeps one request of every reader in the drive: the queued commands always include the
    // block right after the head, so the drive streams at the zone's media rate. One that idles for a process
    // (BFQ, CFQ, AS) streams too only if it sees the readers cooperate: BFQ merges their queues (early queue
    // merging, the reason BFQ has it), CFQ merges close cooperators, AS breaks its anticipation for a request close
    // to the head. With BFQ's merging switched off (v7r2, which has no injection or stable merging to hide it),
    // it idles for one reader at a time: while it waits for reader i's next block, N - 1 blocks pass under the
    // head unread, and the others' blocks are read later after a seek back. So throughput falls to about 1/N of
    // the stream or below, as in the kernel's own measurement of CFQ before it merged cooperating queues
    // (read-test2, an interleaved reader like dump(8): 12 MB/s against 90 MB/s with merging on a SATA disk).
    let zone = zone_rate();
    for readers in [3, 9] {
        for name in ["noop", "deadline", "bfq", "bfq-v7r2", "cfq", "anticipatory"] {
            let r = interleaved_mb_s(Policy::Named(name), readers);
            assert!(
                r > 0.9 * zone,
                "{name}, {readers} readers: {r} MB/s against the zone's {zone}"
            );
        }
        let merged = interleaved_mb_s(Policy::Named("bfq-v7r2"), readers);
        let idled = interleaved_mb_s(Policy::V7r2WithoutMerging, readers);
        assert!(
            idled < 1.5 * zone / f64::from(readers),
            "{readers} readers, v7r2 without merging: {idled} MB/s, above 1.5/N of the zone's {zone}"
        );
        assert!(
            idled < 0.5 * merged,
            "{readers} readers: without merging {idled}, with {merged} MB/s"
        );
    }
}
