//! When an NCQ disk fixes its next command decides how sequential readers share it under a policy that does not
//! idle (noop). `../shared/docs/fidelity.md` §4 and docs/DEVICES.md ("NCQ and the decision point") give the
//! mechanism; these tests check the physics it implies on the `seagate-hdd` preset (decision at transfer start) and
//! the `enterprise-hdd` preset (the same mechanics, decision at completion).

use bfq_sched::{Time, SEC};
use bfq_sim::device::{preset, Hdd};
use bfq_sim::{HostConfig, Simulation};
use bfq_workload::{FileSpec, Placement};

mod common;
use common::SeqReader;

/// Each reader's file: 512 MiB, larger than any reader gets through in the measured time.
const FILE_BYTES: u64 = 512 << 20;
/// Measured time.
const RUN: Time = 4 * SEC;

/// Aggregate MB/s of `readers` sequential readers under noop on preset `device`, with `read_ahead_kb`.
fn aggregate_mb_s(device: &str, readers: u32, read_ahead_kb: u64) -> f64 {
    let dev = preset(device).expect("preset").build();
    let info = dev.info();
    let policy = bfq_sched::build::<&str>("noop", &info, &[]).expect("noop");
    let host = HostConfig {
        read_ahead_kb,
        time_policy: false,
        ..HostConfig::default()
    };
    let mut sim = Simulation::new(dev, policy, host, 1);
    let pids: Vec<_> = (0..readers)
        .map(|_| {
            let f = sim
                .add_file(&FileSpec {
                    name: "f".into(),
                    size: FILE_BYTES,
                    placement: Placement::Contiguous,
                    prewritten: true,
                })
                .expect("file fits");
            sim.spawn(0, Box::new(SeqReader::new(f, FILE_BYTES)))
        })
        .collect();
    sim.run_until(RUN);
    let bytes: u64 = pids.iter().map(|&p| sim.report(p).expect("pid").read_bytes).sum();
    bytes as f64 / (RUN as f64 / 1e9) / 1e6
}

/// The media rate where the readers' files lie (the outer zone), MB/s.
fn zone_rate(device: &str) -> f64 {
    let Some(bfq_sim::device::DeviceConfig::Hdd(cfg)) = preset(device) else {
        panic!("{device} is an HDD preset");
    };
    Hdd::new(&cfg).media_rate_bytes_per_s(0) / 1e6
}

/// Time to read one 128 KiB readahead window (the host's default `read_ahead_kb`) at `rate_mb_s`, ms.
fn window_ms(kib: u64, rate_mb_s: f64) -> f64 {
    (kib * 1024) as f64 / (rate_mb_s * 1e6) * 1e3
}

#[test]
fn one_reader_streams_at_the_zone_rate() {
    // Readahead keeps two windows in flight and issues the window after next ~100 us (the reader's copies) after a
    // window completes; the only candidate is that reader's next window, contiguous with the head, so the drive
    // never repositions: the zone's media rate, less the short ramp-up of the first windows.
    let rate = aggregate_mb_s("seagate-hdd", 1, 128);
    let zone = zone_rate("seagate-hdd");
    assert!(rate > 0.9 * zone && rate <= zone * 1.001, "{rate} MB/s vs zone {zone}");
}

#[test]
fn two_readers_lose_most_of_the_rate_when_the_drive_decides_at_transfer_start() {
    // With the decision at transfer start, a reader's next window (issued ~100 us after its previous window
    // completed, i.e. after the current transfer started) is never a candidate: the other reader's queued window
    // is, so the drive alternates readers about every window. Each switch costs a seek between the files plus on
    // average half a revolution (4.2 ms at 7200 rpm), more than a 128 KiB window's transfer (under 1 ms), so the
    // pair gets well under half the single-reader rate.
    let one = aggregate_mb_s("seagate-hdd", 1, 128);
    let two = aggregate_mb_s("seagate-hdd", 2, 128);
    assert!(two < 0.5 * one, "two readers {two} MB/s vs one {one}");
    // Larger readahead windows amortise the same switch cost over four times the data. Modelling a switch as a
    // fixed cost c (derived from the 128 KiB figure: c = window/two - window/one), 512 KiB windows should give at
    // least 512 KiB / (512 KiB / one + c); allow 5 % for the switch cost's rotational spread.
    let two_512 = aggregate_mb_s("seagate-hdd", 2, 512);
    let c_ms = window_ms(128, two) - window_ms(128, one);
    let predicted = 512.0 * 1024.0 / 1e6 / ((window_ms(512, one) + c_ms) / 1e3);
    assert!(
        two_512 > 2.0 * two && two_512 > 0.95 * predicted,
        "512 KiB windows: {two_512} MB/s vs 128 KiB {two}, fixed-switch-cost prediction {predicted}"
    );
}

#[test]
fn a_drive_deciding_at_completion_streams_ten_readers_near_the_single_rate() {
    // Deciding at completion, the drive sees the current reader's next window already queued (it arrived during
    // the transfer) with zero positioning, so it keeps streaming that reader until another command's age passes the
    // 2.4 s limit: a handful of switches in the run, each a few ms, against 4 s of streaming. The same mechanics
    // deciding at transfer start switch about every window instead.
    let one = aggregate_mb_s("enterprise-hdd", 1, 128);
    let ten = aggregate_mb_s("enterprise-hdd", 10, 128);
    assert!(
        ten > 0.9 * one,
        "ten readers {ten} MB/s vs one {one} (decision at completion)"
    );
    let ten_desktop = aggregate_mb_s("seagate-hdd", 10, 128);
    assert!(
        ten_desktop < 0.5 * ten,
        "decision at transfer start: ten readers {ten_desktop} MB/s vs {ten} at completion"
    );
}
