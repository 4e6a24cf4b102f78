//! Engine and host-model behaviour on a simple device whose service time is fixed per request plus per sector.

use bfq_sched::{DeviceInfo, Direction, Time, MS, SEC};
use bfq_sim::device::{DevRequest, Device};
use bfq_sim::{HostConfig, Simulation};
use bfq_workload::{Actions, Event, FileSpec, FlowSpec, IoMode, Op, Placement, Process, ProcessReport};
use std::collections::VecDeque;

/// Serves one request at a time: `base` ns plus `per_sector` ns per sector. Records what it saw.
struct SerialDevice {
    base: Time,
    per_sector: Time,
    depth: u32,
    busy_until: Time,
    queue: VecDeque<(Time, u64)>,
    seen: std::sync::Arc<std::sync::Mutex<Vec<(Direction, u64, u32)>>>,
}

impl Device for SerialDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: "serial".into(),
            rotational: false,
            queue_depth: self.depth,
            nr_requests: 64,
            max_sectors: 1024,
            capacity_sectors: 1 << 30,
        }
    }
    fn submit(&mut self, rq: DevRequest, now: Time) {
        let start = self.busy_until.max(now);
        self.busy_until = start + self.base + self.per_sector * u64::from(rq.sectors);
        self.queue.push_back((self.busy_until, rq.tag));
        self.seen.lock().unwrap().push((rq.dir, rq.sector, rq.sectors));
    }
    fn next_completion(&self) -> Option<Time> {
        self.queue.front().map(|x| x.0)
    }
    fn pop_completion(&mut self, now: Time) -> Option<u64> {
        if self.queue.front()?.0 <= now {
            self.queue.pop_front().map(|x| x.1)
        } else {
            None
        }
    }
}

type Seen = std::sync::Arc<std::sync::Mutex<Vec<(Direction, u64, u32)>>>;

fn device(depth: u32) -> (Box<dyn Device>, Seen) {
    let seen: Seen = Default::default();
    (
        Box::new(SerialDevice {
            base: 100_000,
            per_sector: 1_000,
            depth,
            busy_until: 0,
            queue: VecDeque::new(),
            seen: seen.clone(),
        }),
        seen,
    )
}

/// Reads a file front to back in `bs`-byte operations, once, then exits.
struct SeqReader {
    file: u32,
    size: u64,
    bs: u64,
    pos: u64,
    mode: IoMode,
    report: ProcessReport,
}

impl Process for SeqReader {
    fn flow(&self) -> FlowSpec {
        FlowSpec::named("seqreader")
    }
    fn on_event(&mut self, ev: Event, _now: Time, out: &mut Actions) {
        if let Event::Completed { result, .. } = ev {
            self.report.read_bytes += result.unwrap();
            self.report.ops += 1;
        }
        if self.pos >= self.size {
            out.exit = true;
            return;
        }
        let len = self.bs.min(self.size - self.pos);
        out.issue(
            0,
            Op::Read {
                file: self.file,
                offset: self.pos,
                len,
                mode: self.mode,
                meta: false,
            },
        );
        self.pos += len;
    }
    fn report(&self) -> ProcessReport {
        self.report.clone()
    }
}

/// Writes `size` bytes in `bs` chunks, then runs `last` (fsync or sync) and exits.
struct Writer {
    file: u32,
    size: u64,
    bs: u64,
    pos: u64,
    last: Option<Op>,
    report: ProcessReport,
}

impl Process for Writer {
    fn flow(&self) -> FlowSpec {
        FlowSpec::named("writer")
    }
    fn on_event(&mut self, ev: Event, now: Time, out: &mut Actions) {
        if let Event::Completed { tag: 1, .. } = ev {
            self.report.startup_ns = Some(now);
            out.exit = true;
            return;
        }
        if self.pos >= self.size {
            match self.last.take() {
                Some(op) => out.issue(1, op),
                None => out.exit = true,
            }
            return;
        }
        out.issue(
            0,
            Op::Write {
                file: self.file,
                offset: self.pos,
                len: self.bs,
                mode: IoMode::Buffered,
            },
        );
        self.pos += self.bs;
        self.report.written_bytes += self.bs;
    }
    fn report(&self) -> ProcessReport {
        self.report.clone()
    }
}

fn reader(file: u32, size: u64, bs: u64, mode: IoMode) -> Box<dyn Process> {
    Box::new(SeqReader {
        file,
        size,
        bs,
        pos: 0,
        mode,
        report: Default::default(),
    })
}

fn writer(file: u32, size: u64, bs: u64, last: Option<Op>) -> Box<dyn Process> {
    Box::new(Writer {
        file,
        size,
        bs,
        pos: 0,
        last,
        report: Default::default(),
    })
}

fn file(size: u64) -> FileSpec {
    FileSpec {
        name: "f".into(),
        size,
        placement: Placement::Contiguous,
        prewritten: true,
    }
}

fn sim(depth: u32, sched: &str) -> (Simulation, Seen) {
    let (dev, seen) = device(depth);
    let info = dev.info();
    let policy = bfq_sched::build::<&str>(sched, &info, &[]).unwrap();
    let host = HostConfig {
        time_policy: false,
        ..HostConfig::default()
    };
    (Simulation::new(dev, policy, host, 1), seen)
}

#[test]
fn buffered_sequential_reads_become_readahead_sized_requests() {
    // 4 KiB buffered reads of an 8 MiB file: readahead ramps 16, 32, 64 KiB and then issues 128 KiB windows
    // (read_ahead_kb = 128), so the device sees 256-sector requests, not 8-sector ones.
    let (mut s, seen) = sim(1, "noop");
    let f = s.add_file(&file(8 << 20)).unwrap();
    let pid = s.spawn(0, reader(f, 8 << 20, 4096, IoMode::Buffered));
    let end = s.run_until_exit(pid, 60 * SEC).expect("reader finishes");
    let seen = seen.lock().unwrap();
    let total: u64 = seen.iter().map(|x| u64::from(x.2)).sum();
    assert_eq!(total, (8 << 20) / 512, "every page read exactly once");
    let big = seen.iter().filter(|x| x.2 == 256).count();
    assert!(
        big >= seen.len() - 4,
        "all but the ramp-up requests are 128 KiB: {:?}",
        &seen[..6]
    );
    assert_eq!(s.report(pid).unwrap().read_bytes, 8 << 20);
    // Device time: 64 requests * (0.1 ms + 256 us) ~= 23 ms plus ramp-up; CPU copies ~2k * 3 us ~= 6 ms. The
    // async readahead overlaps the two, so the run takes longer than the device time but far less than their
    // sum plus a per-request round trip.
    assert!(end > 20 * MS && end < 60 * MS, "took {end} ns");
}

#[test]
fn cached_data_is_not_read_again_until_caches_are_dropped() {
    let (mut s, seen) = sim(1, "noop");
    let f = s.add_file(&file(1 << 20)).unwrap();
    let a = s.spawn(0, reader(f, 1 << 20, 65536, IoMode::Buffered));
    s.run_until_exit(a, SEC).unwrap();
    let after_first = seen.lock().unwrap().len();
    let b = s.spawn(s.now(), reader(f, 1 << 20, 65536, IoMode::Buffered));
    s.run_until_exit(b, 2 * SEC).unwrap();
    assert_eq!(
        seen.lock().unwrap().len(),
        after_first,
        "second read served from the page cache"
    );
    s.drop_caches_at(s.now());
    let c = s.spawn(s.now() + 1, reader(f, 1 << 20, 65536, IoMode::Buffered));
    s.run_until_exit(c, 3 * SEC).unwrap();
    assert!(
        seen.lock().unwrap().len() > after_first,
        "after drop_caches the device is read again"
    );
}

#[test]
fn direct_reads_bypass_the_cache_and_split_at_max_sectors() {
    let (mut s, seen) = sim(4, "noop");
    let f = s.add_file(&file(4 << 20)).unwrap();
    let pid = s.spawn(0, reader(f, 4 << 20, 1 << 20, IoMode::Direct));
    s.run_until_exit(pid, SEC).unwrap();
    let seen = seen.lock().unwrap();
    // 1 MiB direct reads split into two 512 KiB (1024-sector) requests each.
    assert_eq!(seen.len(), 8);
    assert!(seen.iter().all(|x| x.2 == 1024));
    assert_eq!(s.page_cache().resident_pages(), 0);
}

#[test]
fn fsync_writes_back_and_waits() {
    let (mut s, seen) = sim(1, "noop");
    let f = s.add_file(&file(4 << 20)).unwrap();
    let pid = s.spawn(0, writer(f, 2 << 20, 65536, Some(Op::Fsync { file: f })));
    let end = s.run_until_exit(pid, 10 * SEC).unwrap();
    let written: u64 = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|x| x.0 == Direction::Write)
        .map(|x| u64::from(x.2))
        .sum();
    assert_eq!(written, (2 << 20) / 512, "fsync wrote every dirty page");
    assert_eq!(s.page_cache().dirty_pages(), 0);
    // Writing 2 MiB at 1 us/sector takes >= 4 ms of device time; fsync returned after it.
    assert!(end >= 4 * MS);
}

#[test]
fn dirty_data_is_written_back_when_it_expires() {
    // Below the background threshold nothing is written until the data is older than dirty_expire (30 s), at the
    // next periodic flusher wake-up (every 5 s), i.e. at 35 s.
    let (mut s, seen) = sim(1, "noop");
    let f = s.add_file(&file(4 << 20)).unwrap();
    let pid = s.spawn(0, writer(f, 1 << 20, 65536, None));
    s.run_until(29 * SEC);
    assert!(s.lifetime(pid).unwrap().1.is_some());
    assert!(seen.lock().unwrap().is_empty(), "nothing written before expiry");
    s.run_until(36 * SEC);
    assert_eq!(s.page_cache().dirty_pages(), 0);
    assert!(!seen.lock().unwrap().is_empty());
}

#[test]
fn writers_are_throttled_above_the_dirty_limit() {
    // With 64 MiB of memory the dirty limit is 20% = 12.8 MiB; writing 40 MiB must wait for the device, so it takes
    // at least (40 - 12.8) MiB of device time at 1 us/sector = ~56 ms.
    let (dev, _seen) = device(1);
    let info = dev.info();
    let policy = bfq_sched::build::<&str>("noop", &info, &[]).unwrap();
    let host = HostConfig {
        memory_bytes: 64 << 20,
        time_policy: false,
        ..HostConfig::default()
    };
    let mut s = Simulation::new(dev, policy, host, 1);
    let f = s.add_file(&file(64 << 20)).unwrap();
    let pid = s.spawn(0, writer(f, 40 << 20, 1 << 20, None));
    let end = s.run_until_exit(pid, 10 * SEC).unwrap();
    let min_device = ((40u64 << 20) - (64u64 << 20) / 5) / 512 * 1_000;
    assert!(
        end >= min_device,
        "writer finished at {end} ns, device needs {min_device} ns"
    );
    assert!(s.page_cache().dirty_pages() <= (64u64 << 20) / 4096 / 5 + 256);
}

#[test]
fn same_inputs_same_results() {
    let run = || {
        let (mut s, seen) = sim(4, "noop");
        let f = s.add_file(&file(4 << 20)).unwrap();
        let g = s.add_file(&file(4 << 20)).unwrap();
        let a = s.spawn(0, reader(f, 4 << 20, 4096, IoMode::Buffered));
        s.spawn(MS, writer(g, 2 << 20, 4096, Some(Op::Sync)));
        s.run_until(5 * SEC);
        let v = seen.lock().unwrap().clone();
        (v, s.lifetime(a), s.metrics().device_requests)
    };
    assert_eq!(run(), run());
}

/// Records the metadata flag of every request the policy is handed.
struct MetaSeen(std::sync::Arc<std::sync::Mutex<Vec<bool>>>);

impl bfq_sched::wrap::Hooks for MetaSeen {
    fn name(&self) -> &'static str {
        "meta-seen"
    }
    fn on_insert(&mut self, rq: &bfq_sched::Request, _now: Time) {
        self.0.lock().unwrap().push(rq.meta);
    }
}

/// A start-up profile's `RM` reads (metadata, REQ_META) reach the policy with `Request::meta` set, its `R` reads
/// without it: CFQ's preemption and request choice can then favour them as 3.13's did for ext4's metadata.
#[test]
fn metadata_reads_of_a_profile_reach_the_policy_flagged() {
    let (dev, _) = device(1);
    let info = dev.info();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let noop = bfq_sched::build::<&str>("noop", &info, &[]).unwrap();
    let policy = Box::new(bfq_sched::wrap::Wrapped::new(noop, MetaSeen(seen.clone())));
    let mut s = Simulation::new(dev, policy, HostConfig::default(), 1);
    let profile = bfq_workload::profile::Profile::parse_file(
        "profile t\nfile a 1048576 contiguous\nRM 0 0 4096 0\nR 0 65536 4096 0\nRM 0 131072 4096 0\nend 3\n",
    )
    .unwrap();
    for f in &profile.files {
        s.add_file(f).unwrap();
    }
    let pid = s.spawn(
        0,
        Box::new(bfq_workload::startup::Startup::new(std::sync::Arc::new(profile), 0, 0)),
    );
    s.run_until_exit(pid, 10 * SEC).expect("the start-up finishes");
    assert_eq!(*seen.lock().unwrap(), vec![true, false, true]);
}

/// Issues three direct reads at once: one at 0 and two contiguous ones further on, then exits when all are done.
struct Burst {
    done: u32,
}

impl Process for Burst {
    fn flow(&self) -> FlowSpec {
        FlowSpec::named("burst")
    }
    fn on_event(&mut self, ev: Event, _now: Time, out: &mut Actions) {
        match ev {
            Event::Completed { .. } => {
                self.done += 1;
                out.exit = self.done == 3;
            }
            _ => {
                for (tag, offset) in [(0, 0), (1, 1 << 20), (2, (1 << 20) + 4096)] {
                    let mode = IoMode::Direct;
                    out.issue(
                        tag,
                        Op::Read {
                            file: 0,
                            offset,
                            len: 4096,
                            mode,
                            meta: false,
                        },
                    );
                }
            }
        }
    }
    fn report(&self) -> ProcessReport {
        ProcessReport::default()
    }
}

/// Legacy block layer (noop): a bio that merges into a queued request takes no request. The first read goes to the
/// device (depth 1), the second waits in the elevator, the third extends it: three block requests live, two tags
/// held. (blk-mq policies have no such rule: mq-deadline holds three tags.)
#[test]
fn a_merged_request_takes_no_tag_on_a_legacy_queue() {
    for (sched, tags) in [("noop", 2), ("mq-deadline", 3)] {
        let (mut s, _) = sim(1, sched);
        let f = s.add_file(&file(4 << 20)).unwrap();
        assert_eq!(f, 0);
        let pid = s.spawn(0, Box::new(Burst { done: 0 }));
        s.run_until(10_000);
        assert_eq!(s.tags().allocated(bfq_sched::tags::TagClass::SyncRead), tags, "{sched}");
        s.run_until_exit(pid, SEC).expect("the reads complete");
        assert_eq!(s.tags().total(), 0, "{sched}: every tag returned");
    }
}
