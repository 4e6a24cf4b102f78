//! Helpers shared by the engine's integration tests: temporary files on a file system that supports O_DIRECT.

#![allow(dead_code)]

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A directory under /var/tmp (a real disk, unlike a tmpfs /tmp on many systems), removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = PathBuf::from(format!(
            "/var/tmp/bfq-engine-test-{}-{}-{}",
            tag,
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&p).expect("create temp dir under /var/tmp");
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The byte at `offset` of a pattern file: differs between neighbouring 512-byte blocks.
pub fn pattern_byte(offset: u64) -> u8 {
    let block = offset / 512;
    (block.wrapping_mul(31) ^ (offset % 512)) as u8
}

/// Creates a fully written file of `len` bytes filled with [`pattern_byte`].
pub fn pattern_file(path: &Path, len: u64) {
    let mut f = File::create(path).expect("create test file");
    let mut chunk = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < len {
        let n = ((len - off) as usize).min(chunk.len());
        for (i, b) in chunk[..n].iter_mut().enumerate() {
            *b = pattern_byte(off + i as u64);
        }
        f.write_all(&chunk[..n]).expect("write test file");
        off += n as u64;
    }
    f.sync_all().expect("sync test file");
}

/// Checks that `data` read at `offset` matches the pattern.
pub fn check_pattern(data: &[u8], offset: u64) -> bool {
    data.iter()
        .enumerate()
        .all(|(i, &b)| b == pattern_byte(offset + i as u64))
}

pub fn is_root() -> bool {
    // SAFETY: plain syscall.
    unsafe { libc::geteuid() == 0 }
}

/// The environment variable that asks for the tests that change the machine (loop devices, mounts); the same as
/// `bfq_suite::real::sys::REAL_TESTS_ENV`, which this crate cannot depend on.
pub const REAL_TESTS_ENV: &str = "BFQ_REAL_TESTS";

/// Whether the tests that change the machine were asked for.
pub fn real_tests_requested() -> bool {
    std::env::var(REAL_TESTS_ENV).is_ok_and(|v| v == "1")
}

/// Prints `SKIP <test>: <why>` on standard error past the test harness's capture (which takes only the `print!`
/// family), so that the skip shows in `cargo test`'s output; `.ci/run` counts these lines. The same as
/// `bfq_suite::real::sys::print_skip`.
pub fn print_skip(test: &str, why: &str) {
    let line = format!("SKIP {test}: {why}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// The gate of a test that changes the machine: true if it should run; otherwise prints a visible skip line.
pub fn real_test_gate(test: &str) -> bool {
    if real_tests_requested() {
        true
    } else {
        print_skip(
            test,
            &format!("changes the machine; set {REAL_TESTS_ENV}=1 (as root) to run it"),
        );
        false
    }
}

pub fn have(cmd: &str) -> bool {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {cmd}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

pub fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A loop device over a backing file, detached on drop.
pub struct LoopDev {
    pub dev: String,
}

impl LoopDev {
    pub fn attach(backing: &Path, extra: &[&str]) -> Result<LoopDev, String> {
        let mut args = vec!["--find", "--show"];
        args.extend_from_slice(extra);
        let b = backing.to_str().ok_or("non-UTF-8 path")?;
        args.push(b);
        let dev = run("losetup", &args)?;
        Ok(LoopDev { dev })
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = run("losetup", &["-d", &self.dev]);
    }
}

/// A mount point, unmounted on drop.
pub struct Mount {
    pub dir: PathBuf,
}

impl Mount {
    pub fn new(dev: &str, dir: &Path) -> Result<Mount, String> {
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        run("mount", &[dev, dir.to_str().ok_or("non-UTF-8 path")?])?;
        Ok(Mount { dir: dir.to_path_buf() })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(d) = self.dir.to_str() {
            // Retry for a while if something still holds the file system.
            for _ in 0..50 {
                if run("umount", &[d]).is_ok() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            eprintln!("could not unmount {d}");
        }
    }
}

/// A small ext4 file system on a loop device over a file in `tmp`, mounted at `tmp/mnt`. Drop order: mount, then
/// loop device (fields drop in declaration order).
pub struct SmallFs {
    pub mount: Mount,
    pub lo: LoopDev,
}

impl SmallFs {
    pub fn new(tmp: &Path, size_mib: u64) -> Result<SmallFs, String> {
        let img = tmp.join("fs.img");
        let f = File::create(&img).map_err(|e| e.to_string())?;
        f.set_len(size_mib << 20).map_err(|e| e.to_string())?;
        drop(f);
        run("mkfs.ext4", &["-q", "-F", img.to_str().ok_or("path")?])?;
        let lo = LoopDev::attach(&img, &[])?;
        let mount = Mount::new(&lo.dev, &tmp.join("mnt"))?;
        Ok(SmallFs { mount, lo })
    }
}

/// Skips a test that was asked for ([`REAL_TESTS_ENV`]) but lacks something the machine should have (root, a
/// tool that `.ci/run` installs): that is a failure, never a silent pass.
///
/// # Panics
/// Always: the test was asked for and cannot run.
pub fn skip(test: &str, why: &str) {
    panic!("{test}: {REAL_TESTS_ENV}=1 asks for it but it cannot run here: {why}");
}

/// A test policy that holds each request until `hold` ns after its insertion, answering `WaitUntil` meanwhile:
/// it exercises the engine's timer and keeps requests queued for shutdown tests.
pub struct Delayer {
    hold: bfq_sched::Time,
    queue: std::collections::VecDeque<(bfq_sched::Time, bfq_sched::Request)>,
}

impl Delayer {
    /// Holds every request `hold` ns.
    pub fn new(hold: bfq_sched::Time) -> Delayer {
        Delayer {
            hold,
            queue: std::collections::VecDeque::new(),
        }
    }
}

impl bfq_sched::Scheduler for Delayer {
    fn name(&self) -> &'static str {
        "delayer"
    }
    fn flow_started(&mut self, _: &bfq_sched::FlowInfo, _: bfq_sched::Time) {}
    fn flow_exited(&mut self, _: bfq_sched::FlowId, _: bfq_sched::Time) {}
    fn insert(&mut self, rq: bfq_sched::Request, now: bfq_sched::Time) {
        self.queue.push_back((now + self.hold, rq));
    }
    fn dispatch(&mut self, now: bfq_sched::Time) -> bfq_sched::Decision {
        match self.queue.front() {
            None => bfq_sched::Decision::Nothing,
            Some(&(t, _)) if t > now => bfq_sched::Decision::WaitUntil(t),
            Some(_) => self.queue.pop_front().map_or(bfq_sched::Decision::Nothing, |(_, rq)| {
                bfq_sched::Decision::Dispatch(rq)
            }),
        }
    }
    fn completed(&mut self, _: &bfq_sched::Request, _: bfq_sched::Time) {}
    fn queued(&self) -> usize {
        self.queue.len()
    }
}
