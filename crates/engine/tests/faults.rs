//! Error paths with injected faults, and shutdown. Tests that need root (loop devices, mounts, device-mapper) skip
//! with a printed reason without it, and always tear down what they set up.

mod common;

use bfq_engine::{AlignedBuf, Engine, EngineConfig, EngineError, FlowOptions};
use bfq_sched::wrap::{Hooks, Wrapped};
use bfq_sched::{Decision, DeviceInfo, FlowId, FlowInfo, Request, Scheduler, Time, MS};
use common::*;
use std::fs::{self, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// A noop engine, with or without leader/followers ([`EngineConfig::lead`]): every test runs in both.
fn noop(lead: bool) -> Engine {
    Engine::start_named::<&str>(
        "noop",
        &[],
        EngineConfig {
            lead,
            ..EngineConfig::default()
        },
    )
    .unwrap()
}

#[test]
fn a_missing_file_names_its_path() {
    for lead in [false, true] {
        a_missing_file_names_its_path_in(lead);
    }
}

fn a_missing_file_names_its_path_in(lead: bool) {
    let engine = noop(lead);
    let e = engine.open(Path::new("/var/tmp/no/such/file-bfq"), false).unwrap_err();
    assert!(matches!(e, EngineError::Open { .. }));
    assert_eq!(e.errno(), Some(libc::ENOENT));
    assert!(e.to_string().contains("/var/tmp/no/such/file-bfq"), "{e}");
}

#[test]
fn misaligned_requests_are_refused_before_submission() {
    for lead in [false, true] {
        misaligned_requests_are_refused_before_submission_in(lead);
    }
}

fn misaligned_requests_are_refused_before_submission_in(lead: bool) {
    let dir = TempDir::new("align");
    let path = dir.path().join("data");
    pattern_file(&path, 1 << 20);
    let engine = noop(lead);
    let file = engine.open(&path, false).unwrap();
    let lbs = file.logical_block_size();
    assert!(lbs >= 512 && lbs.is_power_of_two());
    let flow = engine.flow(FlowOptions::named("r")).unwrap();
    let mut buf = AlignedBuf::new(4096);
    let e = flow.read(file, 100, &mut buf).unwrap_err();
    assert!(
        matches!(
            e,
            EngineError::Misaligned {
                what: "offset",
                value: 100,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("offset"), "{e}");
    let e = flow.submit_read(file, 7, AlignedBuf::new(4096), 0).unwrap_err();
    assert!(matches!(e, EngineError::Misaligned { .. }));
    assert_eq!(flow.in_flight(), 0, "nothing was submitted");
    let e = flow.read(file, 0, &mut AlignedBuf::new(0)).unwrap_err();
    assert!(matches!(e, EngineError::BadLength { len: 0, .. }));
    // Writes to a read-only file and files of another engine are refused too.
    assert!(matches!(flow.write(file, 0, &buf), Err(EngineError::ReadOnly)));
    let other = noop(lead);
    let foreign = other.open(&path, false).unwrap();
    assert!(matches!(flow.read(foreign, 0, &mut buf), Err(EngineError::ForeignFile)));
    // The engine still works.
    assert_eq!(flow.read(file, 4096, &mut buf).unwrap(), 4096);
    assert!(check_pattern(buf.as_slice(), 4096));
}

#[test]
fn lengths_misaligned_for_a_4k_sector_device_are_refused() {
    for lead in [false, true] {
        lengths_misaligned_for_a_4k_sector_device_are_refused_in(lead);
    }
}

fn lengths_misaligned_for_a_4k_sector_device_are_refused_in(lead: bool) {
    if !real_test_gate("lengths_misaligned_for_a_4k_sector_device") {
        return;
    }
    if !is_root() || !have("losetup") {
        return skip("lengths_misaligned_for_a_4k_sector_device", "needs root and losetup");
    }
    let dir = TempDir::new("4k");
    let img = dir.path().join("img");
    pattern_file(&img, 4 << 20);
    let lo = match LoopDev::attach(&img, &["--sector-size", "4096", "--direct-io=on"]) {
        Ok(l) => l,
        Err(e) => return skip("lengths_misaligned_for_a_4k_sector_device", &e),
    };
    let engine = noop(lead);
    let file = engine.open(Path::new(&lo.dev), false).unwrap();
    assert_eq!(file.logical_block_size(), 4096);
    assert_eq!(file.size_bytes(), 4 << 20);
    let flow = engine.flow(FlowOptions::named("r")).unwrap();
    let e = flow.read(file, 0, &mut AlignedBuf::new(512)).unwrap_err();
    assert!(
        matches!(
            e,
            EngineError::Misaligned {
                what: "length",
                value: 512,
                align: 4096
            }
        ),
        "{e}"
    );
    let e = flow.read(file, 512, &mut AlignedBuf::new(4096)).unwrap_err();
    assert!(matches!(e, EngineError::Misaligned { what: "offset", .. }), "{e}");
    let mut buf = AlignedBuf::new(8192);
    assert_eq!(flow.read(file, 8192, &mut buf).unwrap(), 8192);
    assert!(check_pattern(buf.as_slice(), 8192));
}

#[test]
fn a_file_truncated_under_a_reader_gives_short_reads() {
    for lead in [false, true] {
        a_file_truncated_under_a_reader_gives_short_reads_in(lead);
    }
}

fn a_file_truncated_under_a_reader_gives_short_reads_in(lead: bool) {
    let dir = TempDir::new("trunc");
    let path = dir.path().join("data");
    pattern_file(&path, 1 << 20);
    let engine = noop(lead);
    let file = engine.open(&path, false).unwrap();
    let flow = engine.flow(FlowOptions::named("r")).unwrap();
    let mut buf = AlignedBuf::new(64 << 10);
    assert_eq!(flow.read(file, 0, &mut buf).unwrap(), 64 << 10);
    // Someone truncates the file to 100 KiB while we read.
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(100 << 10)
        .unwrap();
    // Straddling the new end: the part before it is read.
    match flow.read(file, 64 << 10, &mut buf) {
        Err(EngineError::ShortRead {
            offset,
            requested,
            transferred,
        }) => {
            assert_eq!((offset, requested, transferred), (64 << 10, 64 << 10, 36 << 10));
            assert!(check_pattern(&buf.as_slice()[..transferred], 64 << 10));
        }
        other => panic!("expected a short read, got {other:?}"),
    }
    // Past the end: nothing.
    let e = flow.read(file, 512 << 10, &mut buf).unwrap_err();
    assert!(matches!(e, EngineError::ShortRead { transferred: 0, .. }), "{e}");
    // Asynchronous reads report it in their completion.
    flow.submit_read(file, 900 << 10, AlignedBuf::new(4096), 9).unwrap();
    let c = flow.wait().unwrap();
    assert_eq!(c.tag, 9);
    assert!(matches!(c.result, Err(EngineError::ShortRead { transferred: 0, .. })));
    drop(flow);
    let stats = engine.shutdown().unwrap();
    assert_eq!(stats.errors, 3);
}

/// A block device whose own I/O fails: a loop device over a file on a small ext4 file system that is then shut
/// down, so that the loop driver's reads of its backing file fail and it completes the engine's requests with an
/// I/O error. (This kernel has no device-mapper driver, so a dm `error` target is not available; this reaches the
/// same path, a raw block device answering EIO, with the loop driver alone.)
#[test]
fn a_block_device_whose_backing_fails_gives_eio() {
    for lead in [false, true] {
        a_block_device_whose_backing_fails_gives_eio_in(lead);
    }
}

fn a_block_device_whose_backing_fails_gives_eio_in(lead: bool) {
    const NAME: &str = "a_block_device_whose_backing_fails_gives_eio";
    if !real_test_gate(NAME) {
        return;
    }
    if !is_root() || !have("losetup") || !have("mkfs.ext4") {
        return skip(NAME, "needs root, losetup and mkfs.ext4");
    }
    let dir = TempDir::new("backing");
    // Declared first, dropped last: the inner loop device is detached before the file system is unmounted.
    let fs = match SmallFs::new(dir.path(), 32) {
        Ok(f) => f,
        Err(e) => return skip(NAME, &e),
    };
    let img = fs.mount.dir.join("disk.img");
    pattern_file(&img, 4 << 20);
    let lo = match LoopDev::attach(&img, &["--direct-io=on"]) {
        Ok(l) => l,
        Err(e) => return skip(NAME, &e),
    };
    let engine = noop(lead);
    let file = engine.open(Path::new(&lo.dev), false).unwrap();
    let flow = engine.flow(FlowOptions::named("r")).unwrap();
    let mut buf = AlignedBuf::new(4096);
    // Before the failure the device serves the pattern.
    assert_eq!(flow.read(file, 4096, &mut buf).unwrap(), 4096);
    assert!(check_pattern(buf.as_slice(), 4096));
    let root = fs::File::open(&fs.mount.dir).unwrap();
    let flags = EXT4_GOING_FLAGS_NOLOGFLUSH;
    // SAFETY: the ioctl reads one u32 from a valid location.
    let r = unsafe { libc::ioctl(root.as_raw_fd(), EXT4_IOC_SHUTDOWN as _, &flags as *const u32) };
    assert_eq!(r, 0, "EXT4_IOC_SHUTDOWN: {}", std::io::Error::last_os_error());
    // A block the engine never read (so no cache above the backing file can answer it) now fails with EIO.
    let e = flow.read(file, 3 << 20, &mut buf).unwrap_err();
    assert_eq!(e.errno(), Some(libc::EIO), "{e}");
    // And the engine keeps working for the next request, which fails the same way rather than hanging.
    flow.submit_read(file, 2 << 20, AlignedBuf::new(4096), 1).unwrap();
    assert_eq!(flow.wait().unwrap().result.unwrap_err().errno(), Some(libc::EIO));
    drop(flow);
    drop(root);
    engine.shutdown().unwrap();
    drop(lo);
    drop(fs);
}

/// `EXT4_IOC_SHUTDOWN` (`_IOR('X', 125, __u32)`): stops an ext4 file system so that all further I/O fails with EIO.
const EXT4_IOC_SHUTDOWN: libc::c_ulong = 0x8004_587d;
/// Shut down without flushing the journal.
const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;

#[test]
fn a_file_system_that_goes_down_gives_eio() {
    for lead in [false, true] {
        a_file_system_that_goes_down_gives_eio_in(lead);
    }
}

fn a_file_system_that_goes_down_gives_eio_in(lead: bool) {
    if !real_test_gate("a_file_system_that_goes_down_gives_eio") {
        return;
    }
    if !is_root() || !have("losetup") || !have("mkfs.ext4") {
        return skip(
            "a_file_system_that_goes_down_gives_eio",
            "needs root, losetup and mkfs.ext4",
        );
    }
    let dir = TempDir::new("down");
    let fs = match SmallFs::new(dir.path(), 32) {
        Ok(f) => f,
        Err(e) => return skip("a_file_system_that_goes_down_gives_eio", &e),
    };
    let path = fs.mount.dir.join("data");
    pattern_file(&path, 1 << 20);
    let engine = noop(lead);
    let file = engine.open(&path, true).unwrap();
    let flow = engine.flow(FlowOptions::named("r")).unwrap();
    let mut buf = AlignedBuf::new(4096);
    assert_eq!(flow.read(file, 0, &mut buf).unwrap(), 4096);
    let root = fs::File::open(&fs.mount.dir).unwrap();
    let flags = EXT4_GOING_FLAGS_NOLOGFLUSH;
    // SAFETY: the ioctl reads one u32 from a valid location.
    let r = unsafe { libc::ioctl(root.as_raw_fd(), EXT4_IOC_SHUTDOWN as _, &flags as *const u32) };
    assert_eq!(r, 0, "EXT4_IOC_SHUTDOWN: {}", std::io::Error::last_os_error());
    let e = flow.read(file, 8192, &mut buf).unwrap_err();
    assert_eq!(e.errno(), Some(libc::EIO), "{e}");
    let e = flow.write(file, 0, &buf).unwrap_err();
    assert_eq!(e.errno(), Some(libc::EIO), "{e}");
    flow.submit_read(file, 16384, AlignedBuf::new(4096), 1).unwrap();
    assert_eq!(flow.wait().unwrap().result.unwrap_err().errno(), Some(libc::EIO));
    drop(flow);
    drop(root);
    engine.shutdown().unwrap();
    drop(fs);
}

#[test]
fn a_full_file_system_gives_enospc() {
    for lead in [false, true] {
        a_full_file_system_gives_enospc_in(lead);
    }
}

fn a_full_file_system_gives_enospc_in(lead: bool) {
    if !real_test_gate("a_full_file_system_gives_enospc") {
        return;
    }
    if !is_root() || !have("losetup") || !have("mkfs.ext4") {
        return skip("a_full_file_system_gives_enospc", "needs root, losetup and mkfs.ext4");
    }
    let dir = TempDir::new("full");
    let fs = match SmallFs::new(dir.path(), 16) {
        Ok(f) => f,
        Err(e) => return skip("a_full_file_system_gives_enospc", &e),
    };
    let path = fs.mount.dir.join("grow");
    fs::File::create(&path).unwrap();
    let engine = noop(lead);
    let file = engine.open(&path, true).unwrap();
    let flow = engine.flow(FlowOptions::named("w")).unwrap();
    let buf = AlignedBuf::new(1 << 20);
    let mut err = None;
    for i in 0..64u64 {
        match flow.write(file, i << 20, &buf) {
            Ok(n) => assert_eq!(n, 1 << 20),
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    let e = err.expect("a 16 MiB file system cannot take 64 MiB");
    // A write that partly fits may come back short before the next one fails with ENOSPC.
    let e = match e {
        EngineError::ShortWrite { .. } => flow.write(file, 63 << 20, &buf).unwrap_err(),
        e => e,
    };
    assert_eq!(e.errno(), Some(libc::ENOSPC), "{e}");
    assert!(e.to_string().contains("No space left"), "{e}");
    drop(flow);
    engine.shutdown().unwrap();
    drop(fs);
}

#[test]
fn shutdown_drains_requests_in_flight_and_later_use_fails() {
    for lead in [false, true] {
        shutdown_drains_requests_in_flight_and_later_use_fails_in(lead);
    }
}

fn shutdown_drains_requests_in_flight_and_later_use_fails_in(lead: bool) {
    let dir = TempDir::new("drain");
    let path = dir.path().join("data");
    pattern_file(&path, 4 << 20);
    let engine = Engine::start(
        Box::new(Delayer::new(30 * MS)),
        EngineConfig {
            tag_limit: 4,
            lead,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let file = engine.open(&path, false).unwrap();
    let t_submit = Instant::now();
    let flows: Vec<_> = (0..4)
        .map(|i| engine.flow(FlowOptions::named(format!("f{i}"))).unwrap())
        .collect();
    for (i, f) in flows.iter().enumerate() {
        for k in 0..16u64 {
            let off = (i as u64 * 16 + k) * 4096;
            f.submit_read(file, off, AlignedBuf::new(4096), off).unwrap();
        }
    }
    // A client blocked in a read while the engine shuts down also gets its data.
    let blocked = engine.flow(FlowOptions::named("blocked")).unwrap();
    let reader = std::thread::spawn(move || {
        let mut b = AlignedBuf::new(4096);
        let r = blocked
            .read(file, 1 << 20, &mut b)
            .map(|n| (n, check_pattern(b.as_slice(), 1 << 20)));
        (r, blocked)
    });
    // Shut down once the engine has accepted the blocked client's read (it publishes its counters whenever the
    // thread running the loop goes to sleep, and the held requests make it sleep).
    while engine.stats().submitted < 65 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let stats = engine.shutdown().unwrap();
    // Every request was held 30 ms from its insertion, which came after `t_submit`.
    assert!(
        t_submit.elapsed() >= Duration::from_millis(30),
        "shutdown waited for the held requests"
    );
    assert_eq!(stats.submitted, 65);
    assert_eq!(stats.completed, 65);
    assert_eq!(stats.errors, 0);
    for f in &flows {
        for _ in 0..16 {
            let c = f.wait().unwrap();
            assert_eq!(c.result.unwrap(), 4096);
            assert!(check_pattern(c.buf.as_slice(), c.tag));
        }
        assert!(matches!(f.wait(), Err(EngineError::NothingInFlight)));
        assert!(matches!(
            f.read(file, 0, &mut AlignedBuf::new(4096)),
            Err(EngineError::ShutDown)
        ));
        assert!(matches!(
            f.submit_read(file, 0, AlignedBuf::new(4096), 0),
            Err(EngineError::ShutDown)
        ));
        assert!(matches!(f.fsync(file), Err(EngineError::ShutDown)));
    }
    let (r, blocked) = reader.join().unwrap();
    assert_eq!(r.unwrap(), (4096, true));
    assert!(matches!(
        blocked.read(file, 0, &mut AlignedBuf::new(4096)),
        Err(EngineError::ShutDown)
    ));
}

/// Panics on the `n`-th insert.
struct Faulty {
    inserts: u32,
    panic_at: u32,
}

impl Hooks for Faulty {
    fn name(&self) -> &'static str {
        "faulty"
    }
    fn on_insert(&mut self, _: &Request, _: Time) {
        self.inserts += 1;
        assert!(self.inserts != self.panic_at, "injected fault");
    }
}

#[test]
fn a_panicking_policy_fails_requests_instead_of_hanging() {
    for lead in [false, true] {
        a_panicking_policy_fails_requests_instead_of_hanging_in(lead);
    }
}

fn a_panicking_policy_fails_requests_instead_of_hanging_in(lead: bool) {
    let dir = TempDir::new("panic");
    let path = dir.path().join("data");
    pattern_file(&path, 1 << 20);
    let inner = bfq_sched::build::<&str>("noop", &DeviceInfo::ssd(), &[]).unwrap();
    let engine = Engine::start(
        Box::new(Wrapped::new(
            inner,
            Faulty {
                inserts: 0,
                panic_at: 3,
            },
        )),
        EngineConfig {
            lead,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let file = engine.open(&path, false).unwrap();
    let flow = engine.flow(FlowOptions::named("r")).unwrap();
    let mut buf = AlignedBuf::new(4096);
    flow.read(file, 0, &mut buf).unwrap();
    flow.read(file, 4096, &mut buf).unwrap();
    let e = flow.read(file, 8192, &mut buf).unwrap_err();
    assert!(matches!(e, EngineError::PolicyFailed(_)), "{e}");
    assert!(e.to_string().contains("injected fault"), "{e}");
    assert!(matches!(flow.read(file, 0, &mut buf), Err(EngineError::ShutDown)));
    engine.shutdown().unwrap();
}

/// Accepts requests and never dispatches them.
struct BlackHole(usize);

impl Scheduler for BlackHole {
    fn name(&self) -> &'static str {
        "black-hole"
    }
    fn flow_started(&mut self, _: &FlowInfo, _: Time) {}
    fn flow_exited(&mut self, _: FlowId, _: Time) {}
    fn insert(&mut self, _: Request, _: Time) {
        self.0 += 1;
    }
    fn dispatch(&mut self, _: Time) -> Decision {
        Decision::Nothing
    }
    fn completed(&mut self, _: &Request, _: Time) {}
    fn queued(&self) -> usize {
        self.0
    }
}

#[test]
fn a_stalled_policy_fails_requests_instead_of_hanging() {
    for lead in [false, true] {
        a_stalled_policy_fails_requests_instead_of_hanging_in(lead);
    }
}

fn a_stalled_policy_fails_requests_instead_of_hanging_in(lead: bool) {
    let dir = TempDir::new("stall");
    let path = dir.path().join("data");
    pattern_file(&path, 1 << 20);
    let engine = Engine::start(
        Box::new(BlackHole(0)),
        EngineConfig {
            lead,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let file = engine.open(&path, false).unwrap();
    let flow = engine.flow(FlowOptions::named("r")).unwrap();
    let e = flow.read(file, 0, &mut AlignedBuf::new(4096)).unwrap_err();
    assert!(matches!(e, EngineError::PolicyFailed(_)), "{e}");
    assert!(e.to_string().contains("black-hole"), "{e}");
    engine.shutdown().unwrap();
}
