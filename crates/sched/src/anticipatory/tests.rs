//! Behaviour tests of AS: anticipation and its breaking rules, batches, write-batch adaptation.

use super::*;
use crate::types::{Direction, RequestId};

/// A sector far from everything the tests read near the start of the disk (about 25 GB in).
pub(super) const FAR: u64 = 50_000_000;

pub(super) fn sched(p: Params) -> Anticipatory {
    let mut s = Anticipatory::new(&DeviceInfo::hdd(), p);
    for i in 0..64 {
        s.flow_started(&FlowInfo::new(FlowId(i)), 0);
    }
    s
}

pub(super) fn read(id: u64, flow: u32, sector: u64) -> Request {
    Request::new(RequestId(id), FlowId(flow), Direction::Read, true, sector, 8)
}

pub(super) fn write(id: u64, flow: u32, sector: u64) -> Request {
    Request::new(RequestId(id), FlowId(flow), Direction::Write, false, sector, 8)
}

#[track_caller]
pub(super) fn dispatched(s: &mut Anticipatory, now: Time) -> Request {
    match s.dispatch(now) {
        Decision::Dispatch(r) => r,
        d => panic!("expected a dispatch at {now}, got {d:?}"),
    }
}

/// Process `p` reads at `sector` at `t`, is served at once, and the read completes 1 ms later.
pub(super) fn serve_read(s: &mut Anticipatory, id: u64, p: u32, sector: u64, t: Time) -> Time {
    s.insert(read(id, p, sector), t);
    let r = dispatched(s, t);
    assert_eq!(r.id.0, id);
    s.completed(&r, t + MS);
    t + MS
}

#[test]
fn waits_for_a_close_read_from_the_same_process() {
    // Process 1 reads at sector 1000; process 2's read is far away. While 1's read is in flight AS waits for it
    // (WAIT_REQ: Nothing); after it completes AS waits up to antic_expire (6 ms) for 1's next read (WAIT_NEXT:
    // WaitUntil 1 ms + 6 ms). 1's next read arrives 1 ms later next to the previous one: it is dispatched at once,
    // ahead of process 2's older but far request.
    let mut s = sched(Params::default());
    s.insert(read(1, 1, 1000), 0);
    let r1 = dispatched(&mut s, 0);
    s.insert(read(2, 2, FAR), 100_000);
    assert_eq!(s.dispatch(100_000), Decision::Nothing);
    assert_eq!(s.antic_state(), Antic::WaitReq);
    s.completed(&r1, MS);
    assert_eq!(s.dispatch(MS), Decision::WaitUntil(7 * MS));
    s.insert(read(3, 1, 1008), 2 * MS);
    assert_eq!(dispatched(&mut s, 2 * MS).id.0, 3);
    // And again: process 1 keeps the disk while its think time stays short.
    let r3 = RequestId(3);
    s.completed(&read(r3.0, 1, 1008), 3 * MS);
    assert_eq!(s.dispatch(3 * MS), Decision::WaitUntil(9 * MS));
    assert_eq!(dispatched(&mut s, 9 * MS).id.0, 2);
}

/// Process 1 reads sequentially with `think` between a completion and its next read, then process 2's far read
/// arrives just after process 1's last completion. Returns what AS answers.
fn after_reads_with_think_time(think: Time) -> Decision {
    let mut s = sched(Params::default());
    let mut t = 0;
    for i in 0..4 {
        let done = serve_read(&mut s, i, 1, 1000 + 8 * i, t);
        // Nothing else is queued: AS answers Nothing between the reads.
        assert_eq!(s.dispatch(done), Decision::Nothing);
        t = done + think;
    }
    let last_done = t - think;
    s.insert(read(99, 2, FAR), last_done + 100_000);
    s.dispatch(last_done + 100_000)
}

#[test]
fn stops_waiting_when_the_process_thinks_longer_than_antic_expire() {
    // With 1 ms between a completion and the next read, process 1's mean think time (1 ms) is below antic_expire
    // (6 ms): AS waits for it. With 10 ms it is above: waiting would be wasted, process 2 is served at once.
    assert!(matches!(after_reads_with_think_time(MS), Decision::WaitUntil(_)));
    match after_reads_with_think_time(10 * MS) {
        Decision::Dispatch(r) => assert_eq!(r.id.0, 99),
        d => panic!("expected process 2's read, got {d:?}"),
    }
}

#[test]
fn anticipation_ends_at_antic_expire() {
    // Process 1's read completes at 1 ms and it sends nothing more: AS waits until exactly 1 + 6 = 7 ms, then
    // serves process 2's far read.
    let mut s = sched(Params::default());
    serve_read(&mut s, 1, 1, 1000, 0);
    s.insert(read(2, 2, FAR), MS + 1);
    assert_eq!(s.dispatch(MS + 1), Decision::WaitUntil(7 * MS));
    assert_eq!(s.dispatch(7 * MS - 1), Decision::WaitUntil(7 * MS));
    assert_eq!(dispatched(&mut s, 7 * MS).id.0, 2);
}

#[test]
fn antic_expire_zero_never_waits() {
    // antic_expire = 0 turns AS into deadline with batches: the far read is served right away.
    let mut s = sched(Params {
        antic_expire: 0,
        ..Params::default()
    });
    serve_read(&mut s, 1, 1, 1000, 0);
    s.insert(read(2, 2, FAR), MS + 1);
    assert_eq!(dispatched(&mut s, MS + 1).id.0, 2);
}

#[test]
fn exited_process_stops_anticipation_once_exits_are_learned() {
    // Each round a fresh process reads twice (1 ms think time), exits, and another process's far read arrives.
    // An exit alone does not break anticipation until AS has learned that exited processes are not followed by
    // cooperating I/O: each timed-out anticipation on an exited process raises exit_no_coop by 1/8 towards 256
    // (0, 32, 60, 84, 105, 123, 139). From the seventh round (exit_no_coop 139 > 128) the far read is served at once.
    let mut s = sched(Params::default());
    for round in 0..10u64 {
        let t0 = round * 100 * MS;
        let p = 2 * round as u32;
        let q = p + 1;
        let base = 1000 + round * 100;
        let t = serve_read(&mut s, 10 * round, p, base, t0);
        let t = serve_read(&mut s, 10 * round + 1, p, base + 8, t + MS);
        s.flow_exited(FlowId(p), t);
        s.insert(read(10 * round + 2, q, FAR + round), t + 100_000);
        let d = s.dispatch(t + 100_000);
        if round < 6 {
            assert_eq!(d, Decision::WaitUntil(t + 6 * MS), "round {round}");
            let r = dispatched(&mut s, t + 6 * MS);
            s.completed(&r, t + 7 * MS);
        } else {
            match d {
                Decision::Dispatch(r) => s.completed(&r, t + 2 * MS),
                d => panic!("round {round}: expected an immediate dispatch, got {d:?}"),
            }
        }
    }
    assert!(s.global_history().exit_no_coop > HALF);
}

#[test]
fn a_write_from_the_anticipated_process_ends_anticipation() {
    // While AS anticipates process 1, a write from process 3 changes nothing, but a write from process 1 (the
    // fsync pattern: the reader now writes) ends the anticipation and process 2's far read is served.
    let mut s = sched(Params::default());
    serve_read(&mut s, 1, 1, 1000, 0);
    s.insert(read(2, 2, FAR), MS + 1);
    assert!(matches!(s.dispatch(MS + 1), Decision::WaitUntil(_)));
    s.insert(write(3, 3, 2 * FAR), 2 * MS);
    assert_eq!(s.dispatch(2 * MS), Decision::WaitUntil(7 * MS));
    s.insert(write(4, 1, 3 * FAR), 3 * MS);
    assert_eq!(s.antic_state(), Antic::Finished);
    assert_eq!(dispatched(&mut s, 3 * MS).id.0, 2);
}

#[test]
fn a_close_read_from_another_process_is_served_and_counted_as_cooperation() {
    // A read of process 2 right next to process 1's last read is as cheap as 1's own next read: no waiting, and it
    // updates process 1's seek history (the cooperation rule).
    let mut s = sched(Params::default());
    serve_read(&mut s, 1, 1, 1000, 0);
    s.insert(read(2, 2, 1008), MS + 1);
    assert_eq!(dispatched(&mut s, MS + 1).id.0, 2);
    let h = s.history(FlowId(1)).unwrap();
    assert!(h.seek.samples > 0 && h.last_pos == 1016);
}

#[test]
fn batches_switch_direction_only_after_the_previous_batch_completed() {
    // Two reads in flight when the read batch expires with a write waiting: AS switches to writes but dispatches
    // nothing until both reads have completed (Nothing after the first completion), then the write.
    let mut s = sched(Params {
        antic_expire: 0,
        ..Params::default()
    });
    s.insert(read(1, 1, 1000), 0);
    s.insert(read(2, 1, 5000), 0);
    s.insert(read(3, 1, 9000), 0);
    s.insert(write(4, 2, FAR), 0);
    let r1 = dispatched(&mut s, 0);
    let r2 = dispatched(&mut s, 0);
    assert_eq!((r1.id.0, r2.id.0), (1, 2));
    let t = 600 * MS; // past read_batch_expire (500 ms)
    assert_eq!(s.dispatch(t), Decision::Nothing);
    s.completed(&r1, t + MS);
    assert_eq!(s.dispatch(t + MS), Decision::Nothing);
    s.completed(&r2, t + 2 * MS);
    let w = dispatched(&mut s, t + 2 * MS);
    assert_eq!(w.id.0, 4);
    assert!(s.queued() == 1, "read 3 waits for the next read batch");
}

/// Runs one write batch of requests that each take `service` (one at a time) while a read waits, then the first
/// read of the next batch; returns the adapted write_batch_count (12 before).
fn write_batch_count_after(service: Time) -> u32 {
    let mut s = sched(Params {
        antic_expire: 0,
        ..Params::default()
    });
    assert_eq!(s.write_batch_count(), 12);
    s.insert(read(1, 1, 0), 0);
    for i in 0..20 {
        s.insert(write(100 + i, 2, 1_000_000 + 16 * i), 0);
    }
    let r1 = dispatched(&mut s, 0);
    assert_eq!(r1.id.0, 1);
    assert_eq!(
        s.dispatch(0),
        Decision::Nothing,
        "the write batch waits for the read to complete"
    );
    let mut now = MS;
    s.completed(&r1, now);
    let mut read_waiting = false;
    loop {
        let rq = dispatched(&mut s, now);
        if rq.dir == Direction::Write {
            if !read_waiting {
                s.insert(read(2, 1, 5000), now + 1);
                read_waiting = true;
            }
            now += service;
            s.completed(&rq, now);
        } else {
            assert_eq!(rq.id.0, 2);
            s.completed(&rq, now + MS);
            return s.write_batch_count();
        }
    }
}

#[test]
fn write_batch_count_adapts() {
    // The write batch starts when the read completes at 1 ms; its time is measured to the first completion of the
    // next read batch (1 ms after the read is dispatched). Target 125 ms.
    // 12 writes of 1 ms: 13 ms, count used up, 125 > 3 * 13: double to 24.
    assert_eq!(write_batch_count_after(MS), 24);
    // 12 writes of 5 ms: 61 ms, used up, 125 <= 3 * 61: one more, 13.
    assert_eq!(write_batch_count_after(5 * MS), 13);
    // One write of 200 ms ends the batch by time: 201 ms > 125 but <= 375: one fewer, 11.
    assert_eq!(write_batch_count_after(200 * MS), 11);
    // One write of 400 ms: 401 ms > 3 * 125: halve to 6.
    assert_eq!(write_batch_count_after(400 * MS), 6);
}

#[test]
fn fifo_expiry_serves_old_reads_across_the_elevator() {
    // With anticipation off, a read batch sweeps upwards; a read behind the head that has waited past read_expire
    // (125 ms) is served before the elevator's choice once the FIFO is checked.
    let mut s = sched(Params {
        antic_expire: 0,
        ..Params::default()
    });
    s.insert(read(1, 1, FAR), 0);
    let r1 = dispatched(&mut s, 0);
    s.insert(read(2, 2, 10), MS);
    s.insert(read(3, 3, FAR + 100), 130 * MS);
    s.completed(&r1, 130 * MS);
    assert_eq!(dispatched(&mut s, 130 * MS).id.0, 2);
}

#[test]
fn conformance_run_exercises_anticipation_only_when_enabled() {
    // The randomized conformance sequence has sync readers close together and far apart: with the default
    // antic_expire AS must have anticipated (answered WaitUntil) at least once; with antic_expire = 0 never, since
    // batches and FIFOs alone never need a timer.
    use crate::conformance::{run, Config};
    let cfg = Config::new(7, DeviceInfo::hdd());
    let report = run("anticipatory", &cfg).unwrap();
    assert!(report.waits > 0);
    let mut cfg = Config::new(7, DeviceInfo::hdd());
    cfg.tunables = vec!["antic_expire=0".into()];
    let report = run("anticipatory", &cfg).unwrap();
    assert_eq!(report.waits, 0);
}

#[test]
fn a_streaming_reader_keeps_its_batch_when_writes_arrive() {
    // A buffered sequential reader keeps two readahead windows in flight: its next read is issued (and dispatched)
    // before the previous one completes, so at times none of its reads is queued. A writeback burst arriving then
    // must not end the read batch: it ends only when writes wait and read_batch_expire (500 ms, from the batch's
    // first completion) is up. Until then every dispatch is a read; after it, the writes get their batch.
    let mut s = sched(Params::default());
    let mut id = 1;
    s.insert(read(id, 1, 0), 0);
    let mut older = dispatched(&mut s, 0);
    id += 1;
    s.insert(read(id, 1, 8), 0);
    let mut newer = dispatched(&mut s, 0);
    let mut sector = 16;
    let mut wid = 1_000_000;
    let mut t: Time = 0;
    let mut first_write = None;
    for step in 0..1000u64 {
        if step == 10 {
            // Writes arrive while both of the reader's reads are in flight and none is queued.
            for k in 0..32 {
                wid += 1;
                s.insert(write(wid, 0, FAR + 8 * k), t + 1);
                assert_eq!(s.dispatch(t + 1), Decision::Nothing, "the read batch must go on");
            }
        }
        t += MS;
        s.completed(&older, t);
        // The reader consumes the window and issues its next one.
        id += 1;
        s.insert(read(id, 1, sector), t + 10_000);
        sector += 8;
        // Once the batch is over AS drains the reads in flight before the write batch starts (Nothing).
        let r = match s.dispatch(t + 10_000) {
            Decision::Dispatch(r) if r.dir == Direction::Read => r,
            _ => {
                first_write = Some(t);
                break;
            }
        };
        older = newer;
        newer = r;
    }
    let switched = first_write.expect("the writes got a batch eventually");
    // The batch clock started at the first completion (1 ms) and stopped being pushed when the writes came (10 ms).
    assert!(switched >= 500 * MS, "read batch ended early, at {switched} ns");
    assert!(switched <= 520 * MS, "read batch overran, to {switched} ns");
}

#[test]
fn anticipation_holds_while_the_readers_next_window_is_in_flight() {
    // A sequential reader keeps two readahead windows on the device and none queued. Another process's far read
    // arrives: AS keeps anticipating (Nothing), because the kernel breaks anticipation on the process's queued
    // requests and those on the dispatch list not yet fetched by the driver, not on those on the device. Before
    // the fix AS broke here and readers interleaved (53 MB/s under 10r-seq on seagate-hdd instead of ~135).
    let mut s = sched(Params::default());
    s.insert(read(1, 1, 1000), 0);
    let r1 = dispatched(&mut s, 0);
    s.insert(read(2, 1, 1008), 10_000);
    let _r2 = dispatched(&mut s, 10_000);
    s.insert(read(3, 2, FAR), 20_000);
    assert_eq!(s.dispatch(20_000), Decision::Nothing);
    assert_eq!(s.antic_state(), Antic::WaitReq);
    // The first window completes; the reader's next window comes at once and is served ahead of the far read.
    s.completed(&r1, MS);
    s.insert(read(4, 1, 1016), MS + 50_000);
    assert_eq!(dispatched(&mut s, MS + 50_000).id.0, 4);
}

#[test]
fn a_read_batch_with_no_read_queued_hands_over_to_waiting_writes() {
    // Anticipation off: a read is on the device, none queued, a write waits. The kernel's dispatch has no rule that
    // holds a read batch for reads in flight: it switches to writes (and waits for the read to complete). A read
    // arriving after the completion waits for the write batch. (The removed hold rule kept the batch on reads: it
    // stood in for the anticipation that the misread breaking rule had lost.)
    let mut s = sched(Params {
        antic_expire: 0,
        ..Params::default()
    });
    s.insert(read(1, 1, 1000), 0);
    let r1 = dispatched(&mut s, 0);
    s.insert(write(2, 2, FAR), 10_000);
    assert_eq!(s.dispatch(10_000), Decision::Nothing, "the switch waits for the read");
    s.completed(&r1, MS);
    s.insert(read(3, 1, 1008), MS + 10_000);
    assert_eq!(dispatched(&mut s, MS + 10_000).id.0, 2, "the write batch runs first");
}

#[test]
fn write_batch_count_doubles_when_the_switch_completes_the_last_write() {
    // Two slow writes (200 ms each) on the device when the write batch ends with a read waiting. The last write's
    // completion starts the read batch and sets the batch expiry to the read batch's end; the first read's
    // completion then computes the write time as 0 (2.6.32's `update_write_batch`): the full batch looks fast and
    // the count doubles, although the batch took over 200 ms, more than the 125 ms target (the documented intent
    // would have taken one off).
    let mut s = sched(Params {
        antic_expire: 0,
        ..Params::default()
    });
    for i in 0..12 {
        s.insert(write(100 + i, 2, 1_000_000 + 16 * i), 0);
    }
    let mut in_flight = Vec::new();
    for _ in 0..12 {
        in_flight.push(dispatched(&mut s, 0));
    }
    s.insert(read(1, 1, 0), 1_000);
    assert_eq!(
        s.dispatch(1_000),
        Decision::Nothing,
        "the read waits for the write batch to drain"
    );
    let mut now = 0;
    for w in &in_flight {
        now += 20 * MS;
        s.completed(w, now);
    }
    let r = dispatched(&mut s, now);
    assert_eq!(r.id.0, 1);
    s.completed(&r, now + MS);
    assert_eq!(s.write_batch_count(), 24);
}
