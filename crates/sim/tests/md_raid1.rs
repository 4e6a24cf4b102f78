//! md RAID1 as Linux runs it: md above two member disks, each with its own scheduler instance (docs/DEVICES.md,
//! "md RAID1"). The physics the layering implies, on the `seagate-raid1` preset.

use bfq_sched::{Time, SEC};
use bfq_sim::device::{preset, Device, DeviceConfig, Hdd, Md1, Raid1};
use bfq_sim::{HostConfig, Simulation};
use bfq_workload::{FileSpec, Placement};

mod common;
use common::SeqReader;

const FILE_BYTES: u64 = 512 << 20;
const RUN: Time = 4 * SEC;

fn raid_cfg() -> bfq_sim::device::Raid1Config {
    match preset("seagate-raid1") {
        Some(DeviceConfig::Raid1(c)) => c,
        _ => panic!("seagate-raid1 is a RAID1 preset"),
    }
}

/// Aggregate MB/s of two sequential readers (4 KiB buffered reads, files far apart) on `dev` under host policy
/// `host_sched`.
fn two_readers(dev: Box<dyn Device>, host_sched: &str) -> f64 {
    let info = dev.info();
    let policy = bfq_sched::build::<&str>(host_sched, &info, &[]).expect("policy");
    let host = HostConfig {
        time_policy: false,
        ..HostConfig::default()
    };
    let mut sim = Simulation::new(dev, policy, host, 1);
    let pids: Vec<_> = [0.0, 0.5]
        .iter()
        .map(|&at| {
            let f = sim
                .add_file(&FileSpec {
                    name: "f".into(),
                    size: FILE_BYTES,
                    placement: Placement::At(at),
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

/// One member disk's media rate at the start of the device, MB/s.
fn disk_rate() -> f64 {
    Hdd::new(&raid_cfg().disk).media_rate_bytes_per_s(0) / 1e6
}

#[test]
fn two_sequential_readers_under_noop_use_both_mirrors() {
    // read_balance sends the first reader's first read to the first idle member and the second reader's to the
    // other (the first is busy), and from then on each read continues the sequential marker of "its" member.
    // Each member then streams one reader (its own noop has nothing else to interleave), so the pair reads faster
    // than one disk's media rate can, which it can only do with both mirrors.
    let md = Md1::new(&raid_cfg(), "noop", &[] as &[&str]).expect("md");
    assert_eq!(md.member_schedulers(), 2);
    let rate = two_readers(Box::new(md), "noop");
    println!("md, noop per member: {rate:.1} MB/s; one disk {:.1}", disk_rate());
    assert!(
        rate > 1.5 * disk_rate(),
        "two readers {rate} MB/s, one disk {}",
        disk_rate()
    );
}

#[test]
fn bfq_runs_on_each_member_and_idles_per_member() {
    // One BFQ instance per member: each serves its own reader and idles for it on its own disk, so both disks
    // stream. The old model, one BFQ above the pair, idles for one reader at a time across both disks: while it
    // idles for reader A, reader B's member has nothing to do, so the pair gets about one disk's rate.
    let md = Md1::new(&raid_cfg(), "bfq", &[] as &[&str]).expect("md");
    for i in 0..2 {
        assert_eq!(md.member_policy(i).name(), "bfq", "member {i} runs its own bfq");
    }
    let per_member = two_readers(Box::new(md), "noop");
    let above = two_readers(Box::new(Raid1::new(&raid_cfg())), "bfq");
    println!("bfq per member {per_member:.1} MB/s, one bfq above the pair {above:.1} MB/s");
    assert!(per_member > 1.5 * disk_rate(), "bfq per member {per_member} MB/s");
    assert!(
        above < 1.2 * disk_rate(),
        "one bfq above the pair {above} MB/s, one disk {}",
        disk_rate()
    );
}

/// A 4 KiB read at `sector` with handle `tag`.
fn read_at(tag: u64, sector: u64) -> bfq_sim::device::DevRequest {
    bfq_sim::device::DevRequest {
        tag,
        dir: bfq_sched::Direction::Read,
        sector,
        sectors: 8,
    }
}

/// Serves everything `dev` holds, returning the time the last request completed.
fn drain(dev: &mut dyn Device, mut now: Time) -> Time {
    while let Some(t) = dev.next_completion() {
        now = now.max(t);
        while dev.pop_completion(now).is_some() {}
    }
    now
}

#[test]
fn md_sends_a_read_between_two_busy_members_to_the_nearer_head_and_a_tie_to_the_first() {
    // 3.13's read_balance, with no sequential marker or idle member to settle it, takes the member whose head
    // (the end of its last completed request) is nearest to the read, keeping the first member on a tie (a
    // strict "nearer than the best so far"). Heads at 1 000 008 and 3 000 008; both members kept busy by a read
    // that continues each one's stream; then a read 100 000 sectors below the second head goes to the second
    // member, and one exactly between the heads to the first.
    let mut md = Md1::new(&raid_cfg(), "noop", &[] as &[&str]).expect("md");
    md.submit(read_at(1, 1_000_000), 0); // both idle: the first member
    md.submit(read_at(2, 3_000_000), 0); // the first busy: the second
    let now = drain(&mut md, 0);
    assert_eq!(md.sent_per_disk(), [[1, 0], [1, 0]]);
    md.submit(read_at(3, 1_000_008), now); // continues member 0's head
    md.submit(read_at(4, 3_000_008), now); // continues member 1's head
    assert_eq!(md.sent_per_disk(), [[2, 0], [2, 0]], "each continues its member");
    md.submit(read_at(5, 2_900_008), now);
    assert_eq!(md.sent_per_disk(), [[2, 0], [3, 0]], "nearer the second head");
    md.submit(read_at(6, 2_000_008), now);
    assert_eq!(md.sent_per_disk(), [[3, 0], [3, 0]], "a tie goes to the first member");
}

#[test]
fn the_old_raid1_model_sends_a_read_between_two_busy_mirrors_to_the_nearer_head() {
    // The single-queue model (one scheduler above the pair) keeps each mirror's head at the end of the last
    // request sent to it; with both mirrors busy a read goes to the nearer one.
    let mut r = Raid1::new(&raid_cfg());
    r.submit(read_at(1, 1_000_000), 0); // both idle, heads equal: the first mirror
    r.submit(read_at(2, 3_000_000), 0); // the first busy: the idle second
    assert_eq!(r.sent_per_disk(), [[1, 0], [1, 0]]);
    r.submit(read_at(3, 2_900_000), 0);
    assert_eq!(r.sent_per_disk(), [[1, 0], [2, 0]], "nearer the second head");
    r.submit(read_at(4, 1_100_000), 0);
    assert_eq!(r.sent_per_disk(), [[2, 0], [2, 0]], "nearer the first head");
}

#[test]
fn md_sends_a_read_that_continues_a_members_request_in_flight_to_that_member() {
    // 3.13's read_balance takes a member at once when the read starts where the last read sent to it ends
    // (`next_seq_sect`, set when a read is sent, not when it completes) or where its head is. Both members are busy
    // and both heads are still at 0 (nothing has completed), so only the sequential marker can send the read that
    // continues the second member's request in flight to the second member; by distance it would be a tie, which
    // goes to the first.
    let mut md = Md1::new(&raid_cfg(), "noop", &[] as &[&str]).expect("md");
    md.submit(read_at(1, 1_000_000), 0); // both idle: the first member
    md.submit(read_at(2, 3_000_000), 0); // the first busy: the second
    md.submit(read_at(3, 3_000_008), 0);
    assert_eq!(
        md.sent_per_disk(),
        [[1, 0], [2, 0]],
        "the continuation went to the other member"
    );
}

/// A sync read of 8 sectors at `sector` by `flow`, as the host hands it to a device.
fn flow_read(flow: u32, sector: u64) -> bfq_sched::Request {
    bfq_sched::Request::new(
        bfq_sched::RequestId(0),
        bfq_sched::FlowId(flow),
        bfq_sched::Direction::Read,
        true,
        sector,
        8,
    )
}

/// Submits `rq` with handle `tag` at `now` and runs the device until it completes; its completion time.
fn complete(dev: &mut dyn Device, tag: u64, rq: &bfq_sched::Request, now: Time) -> Time {
    dev.submit_request(tag, rq, now);
    loop {
        let t = dev.next_completion().expect("the request completes");
        if dev.pop_completion(t) == Some(tag) {
            return t;
        }
    }
}

#[test]
fn a_process_start_and_exit_reach_the_members_schedulers() {
    // Each member runs its own BFQ (v7r2: the newest would inject process 2's request while idling). Process 3
    // reads at 500 000 000 and exits, which leaves that stretch in the first member's drive cache; process 1 then
    // reads once at 1 000 000 from the same (idle, first) member, whose BFQ idles for its next request (a sync
    // reader on a rotational disk). Process 2 reads 8 cached sectors at 500 000 008, far from process 1's (so no
    // cooperation rule applies), on the same member (it is idle and first). If process 1 exits first, md passes
    // the exit to the members and BFQ stops idling for it: process 2's read is a cache hit served at once, instead
    // of after the idle wait (24 ms: v7r2 idles 3 x slice_idle for a raised queue, and a new queue is raised).
    let wait = |sched: &str, exit: bool, class: bfq_sched::IoClass| {
        let mut md = Md1::new(&raid_cfg(), sched, &[] as &[&str]).expect("md");
        for f in [1, 2, 3] {
            let info = bfq_sched::FlowInfo::new(bfq_sched::FlowId(f));
            md.flow_started(&if f == 1 { info.with_class(class, 4) } else { info }, 0);
        }
        let t = complete(&mut md, 3, &flow_read(3, 500_000_000), 0);
        md.flow_exited(bfq_sched::FlowId(3), t);
        let t = complete(&mut md, 1, &flow_read(1, 1_000_000), t + 20 * bfq_sched::MS);
        if exit {
            md.flow_exited(bfq_sched::FlowId(1), t);
        }
        assert_eq!(md.sent_per_disk(), [[2, 0], [0, 0]]);
        complete(&mut md, 2, &flow_read(2, 500_000_008), t) - t
    };
    let be = bfq_sched::IoClass::Be;
    let (after_exit, while_idling) = (wait("bfq-v7r2", true, be), wait("bfq-v7r2", false, be));
    assert!(
        after_exit < bfq_sched::MS && while_idling > 4 * bfq_sched::MS,
        "process 2 waited {after_exit} ns after process 1's exit and {while_idling} ns without it"
    );
    // The class a process starts with reaches the members too. CFQ never idles for an idle-class queue (3.13's
    // `cfq_should_idle`), so with CFQ on the members process 2 is served at once although process 1 has not
    // exited, and after CFQ's idle wait (slice_idle, 8 ms) if process 1 is best effort. (Our bfq-v7r2 model waits
    // 24 ms for an idle-class process 1 here, as for a best-effort one: its new queue is raised, and a raised sync
    // queue is idled for; so BFQ members cannot show the class.)
    let idle_class = wait("cfq", false, bfq_sched::IoClass::Idle);
    let best_effort = wait("cfq", false, be);
    assert!(
        best_effort > 4 * bfq_sched::MS,
        "cfq did not idle for a best-effort reader: {best_effort} ns"
    );
    assert!(
        idle_class < bfq_sched::MS,
        "process 2 waited {idle_class} ns for an idle-class process"
    );
}
