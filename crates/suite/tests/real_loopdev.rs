//! `bfq loopdev` round trips on the real machine (root only; skipped with a printed reason otherwise).

use bfq_suite::real::loopdev::{self, CreateOptions, FsKind};
use bfq_suite::real::sys;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn root_or_skip(test: &str) -> bool {
    sys::real_test_gate(test)
}

fn fresh_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bfq-real-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir(&d);
    d
}

/// Nothing of `rec` is left: no loop device on the image, no mount, no image, no record.
fn assert_gone(rec: &loopdev::LoopRecord) {
    assert!(loopdev::loops_backed_by(&rec.image).is_empty(), "loop device left");
    assert!(!rec.image.exists(), "image left");
    let mounted = sys::mounts().expect("mounts").iter().any(|m| m.mount_point == rec.dir);
    assert!(!mounted, "mount left");
    assert!(
        loopdev::record_for_dir(&rec.dir).expect("records").is_none(),
        "record left"
    );
}

/// Removes the device made for a directory when dropped, so a failing test leaves nothing behind.
struct Remove(PathBuf);
impl Drop for Remove {
    fn drop(&mut self) {
        let _ = loopdev::remove(&self.0);
    }
}

fn opts(size: u64, fs: FsKind) -> CreateOptions {
    CreateOptions {
        size_bytes: size,
        fs,
        progress: false,
    }
}

#[test]
fn create_and_remove_leave_nothing_behind() {
    if !root_or_skip("create_and_remove_leave_nothing_behind") {
        return;
    }
    let dir = fresh_dir("roundtrip");
    let _cleanup = Remove(dir.clone());
    let rec = loopdev::create(&dir, &opts(64 << 20, FsKind::Ext4)).expect("creates");
    let dev = rec.device.clone().expect("attached");
    // A full image, a direct-I/O loop device made by us, ext4 mounted on DIR.
    let m = std::fs::metadata(&rec.image).expect("image");
    assert_eq!(m.len(), 64 << 20);
    assert!(m.blocks() * 512 >= 64 << 20, "image is sparse (mkfs must not discard)");
    let loops = loopdev::loops_backed_by(&rec.image);
    assert_eq!(loops.len(), 1);
    assert_eq!(loops[0].dev_path(), dev);
    let dio = std::fs::read_to_string(loops[0].sys.join("loop/dio")).expect("dio");
    assert_eq!(dio.trim(), "1");
    let mnt = sys::mount_of(&dir).expect("mount");
    assert_eq!(
        (mnt.mount_point.as_path(), mnt.fstype.as_str()),
        (dir.as_path(), "ext4")
    );
    let bd = sys::BlockDev::of_dir(&dir).expect("device");
    assert_eq!(bd.dev_path(), dev);
    assert!(loopdev::record_for_device(&bd).is_some());
    // A second create on the same DIR is refused and changes nothing.
    let e = loopdev::create(&dir, &opts(64 << 20, FsKind::Ext4)).expect_err("refused");
    assert!(e.to_string().contains("already has"), "{e}");
    std::fs::write(dir.join("some-file"), b"x").expect("writes on the device");
    // A scheduler left changed on the device is put back before detaching: the free loop node keeps its queue
    // settings for the next user.
    let initial = rec.initial_scheduler.clone().expect("recorded");
    let sched_file = bd.queue().join("scheduler");
    std::fs::write(&sched_file, "kyber").expect("sets kyber on our device");

    let r = loopdev::remove(&dir).expect("removes");
    assert!(r.had_record && r.image_deleted);
    assert_eq!(r.detached, vec![dev]);
    assert_eq!(r.unmounted, vec![dir.clone()]);
    assert_gone(&rec);
    let after = std::fs::read_to_string(&sched_file).expect("the loop node stays");
    assert!(after.contains(&format!("[{initial}]")), "{after}");
    assert!(!dir.exists(), "the directory we made is removed");
    // Idempotent.
    let again = loopdev::remove(&dir).expect("removes nothing");
    assert!(!again.had_record);
}

#[test]
fn raw_device_and_rollbacks() {
    if !root_or_skip("raw_device_and_rollbacks") {
        return;
    }
    // --fs none: the raw device is linked as DIR/device.
    let dir = fresh_dir("raw");
    let _cleanup = Remove(dir.clone());
    let rec = loopdev::create(&dir, &opts(32 << 20, FsKind::None)).expect("creates");
    let link = std::fs::read_link(dir.join("device")).expect("link");
    assert_eq!(Some(link), rec.device.clone());
    loopdev::remove(&dir).expect("removes");
    assert_gone(&rec);

    // Too large for the disk: refused before anything is written, and the directory we made is gone again.
    let big = fresh_dir("big");
    let e = loopdev::create(&big, &opts(1 << 50, FsKind::Ext4)).expect_err("refused");
    assert!(e.to_string().contains("not enough space"), "{e}");
    assert!(!big.exists());
    // Too small, and a non-empty directory: refused.
    assert!(loopdev::create(&big, &opts(1 << 20, FsKind::Ext4)).is_err());
    let full = fresh_dir("full");
    std::fs::create_dir_all(&full).expect("mkdir");
    std::fs::write(full.join("f"), b"x").expect("writes");
    let e = loopdev::create(&full, &opts(32 << 20, FsKind::Ext4)).expect_err("refused");
    assert!(e.to_string().contains("not empty"), "{e}");
    std::fs::remove_dir_all(&full).expect("cleans");
}

/// Child half of `interrupted_create_leaves_nothing`: makes a large device slowly enough to be interrupted.
#[test]
#[ignore = "run by interrupted_create_leaves_nothing as a child process"]
fn child_create_for_interrupt() {
    let Ok(dir) = std::env::var("BFQ_TEST_CHILD_DIR") else {
        return;
    };
    let _ = loopdev::create(Path::new(&dir), &opts(8 << 30, FsKind::Ext4));
}

#[test]
fn interrupted_create_leaves_nothing() {
    if !root_or_skip("interrupted_create_leaves_nothing") {
        return;
    }
    let dir = fresh_dir("interrupt");
    let _cleanup = Remove(dir.clone());
    let exe = std::env::current_exe().expect("test binary");
    let child = std::process::Command::new(exe)
        .args(["--exact", "child_create_for_interrupt", "--ignored", "--nocapture"])
        .env("BFQ_TEST_CHILD_DIR", &dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawns");
    // Wait until the image is being written, then interrupt.
    let started = Instant::now();
    let rec = loop {
        if let Some(r) = loopdev::record_for_dir(&dir).expect("records") {
            if r.image.exists() {
                break r;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(20), "child did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signals our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let out = child.wait_with_output().expect("waits");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "child: {err}");
    assert!(err.contains("undone"), "child: {err}");
    assert_gone(&rec);
    assert!(!dir.exists());
}
