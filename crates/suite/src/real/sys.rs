//! Small wrappers around the Linux interfaces the real targets use: root check, external commands, mount table,
//! block devices in sysfs, aligned buffers, page-cache control and memory locking.

use super::RealError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Alignment of O_DIRECT buffers, offsets and lengths, bytes (the page size; covers 512- and 4096-byte logical
/// blocks).
pub const DIRECT_ALIGN: u64 = 4096;

/// Bytes per sector in `/sys/block/*/stat` (always 512, whatever the device's block size).
pub const STAT_SECTOR_BYTES: u64 = 512;

/// Whether the process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The environment variable that asks for the tests that change the machine: they make loop devices, mount file
/// systems, switch I/O schedulers, drop caches and trace the kernel. Unset, those tests print a skip line and
/// pass; set to `1`, a machine that cannot run them fails them (`.ci/run` sets it when it runs as root).
pub const REAL_TESTS_ENV: &str = "BFQ_REAL_TESTS";

/// Whether the user asked for the tests that change the machine ([`REAL_TESTS_ENV`] is `1`).
pub fn real_tests_requested() -> bool {
    std::env::var(REAL_TESTS_ENV).is_ok_and(|v| v == "1")
}

/// Prints `SKIP <test>: <why>` on the process's standard error, past the test harness's output capture (which
/// takes only the `print!` family), so that a test that passes without running shows up in `cargo test`'s output
/// without `--nocapture`. `.ci/run` counts these lines.
pub fn print_skip(test: &str, why: &str) {
    use std::io::Write;
    let line = format!("SKIP {test}: {why}\n");
    // One write of the whole line, so that parallel tests do not interleave within it; a closed stderr is not
    // worth failing a test for.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// The end of a test that cannot run because the machine lacks `why` (Chromium, tracefs, a tool): without
/// [`REAL_TESTS_ENV`] a visible skip line ([`print_skip`]); with it, a failure, because `.ci/run` sets it where
/// the machine can run every test.
///
/// # Panics
/// When [`REAL_TESTS_ENV`] is `1`.
pub fn skip_or_fail(test: &str, why: &str) {
    if real_tests_requested() {
        panic!("{test}: {REAL_TESTS_ENV}=1 asks for it but it cannot run here: {why}");
    }
    print_skip(test, why);
}

/// The gate of every test that changes the machine: true if `test` should run. Without [`REAL_TESTS_ENV`] it
/// prints a visible `SKIP <test>: ...` line ([`print_skip`]) and returns false; with it, a machine that lacks what
/// the test needs (root, the loop driver, the tools) fails the test, so that a skip is never silent where the test
/// was asked for.
///
/// # Panics
/// When the tests were asked for and [`loop_devices_unavailable`] gives a reason.
pub fn real_test_gate(test: &str) -> bool {
    if !real_tests_requested() {
        print_skip(
            test,
            &format!("changes the machine; set {REAL_TESTS_ENV}=1 (as root) to run it"),
        );
        return false;
    }
    if let Some(why) = loop_devices_unavailable() {
        panic!("{test}: {REAL_TESTS_ENV}=1 asks for it but it cannot run here: {why}");
    }
    true
}

/// Why loop-device tests cannot run here (`None` when they can): they need root, the loop driver
/// (`/dev/loop-control`), and `losetup`, `mkfs.ext4` and `mount` on the `PATH`. Tests print the reason and skip.
pub fn loop_devices_unavailable() -> Option<String> {
    if !is_root() {
        return Some("needs root (loop devices, mount, sysfs schedulers, drop_caches)".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no loop driver (/dev/loop-control is missing)".into());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for tool in ["losetup", "mkfs.ext4", "mount"] {
        let found = std::env::split_paths(&path)
            .chain(["/sbin", "/usr/sbin"].map(PathBuf::from))
            .any(|d| d.join(tool).is_file());
        if !found {
            return Some(format!("{tool} is not installed"));
        }
    }
    None
}

/// Fails with [`RealError::NotRoot`] unless root; `what` names the action that needs root.
pub fn require_root(what: &str) -> Result<(), RealError> {
    if is_root() {
        Ok(())
    } else {
        Err(RealError::NotRoot(what.to_string()))
    }
}

/// Runs `program args...`, returning its standard output; a non-zero exit becomes [`RealError::Command`] with the
/// program's standard error.
pub fn run_command(program: &str, args: &[&str]) -> Result<String, RealError> {
    let line = std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new(program).args(args).output().map_err(|e| RealError::Io {
        context: format!("cannot run `{line}` (is {program} installed?)"),
        source: e,
    })?;
    if !out.status.success() {
        return Err(RealError::Command {
            command: line,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// An `io::Error` with what was being done.
pub fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> RealError {
    let context = context.into();
    move |source| RealError::Io { context, source }
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Device major number (0 for file systems without a block device).
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// File system type (`ext4`, `tmpfs`, ...).
    pub fstype: String,
    /// Mount source (`/dev/loop3`, ...).
    pub source: String,
}

/// Undoes mountinfo's octal escapes (`\040` for a space, ...).
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = u32::from(b[i + 1] - b'0') * 64 + u32::from(b[i + 2] - b'0') * 8 + u32::from(b[i + 3] - b'0');
            out.push((v & 0xff) as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses the text of `/proc/self/mountinfo`; malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        if sep < 6 || fields.len() < sep + 3 {
            continue;
        }
        let Some((maj, min)) = fields[2].split_once(':') else {
            continue;
        };
        let (Ok(major), Ok(minor)) = (maj.parse(), min.parse()) else {
            continue;
        };
        out.push(Mount {
            major,
            minor,
            mount_point: PathBuf::from(unescape(fields[4])),
            fstype: fields[sep + 1].to_string(),
            source: unescape(fields[sep + 2]),
        });
    }
    out
}

/// The current mount table.
pub fn mounts() -> Result<Vec<Mount>, RealError> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").map_err(io_err("cannot read /proc/self/mountinfo"))?;
    Ok(parse_mountinfo(&text))
}

/// The mount that holds `path` (canonicalized): the last-mounted among those whose mount point is the longest prefix.
pub fn mount_of(path: &Path) -> Result<Mount, RealError> {
    let canon = path
        .canonicalize()
        .map_err(io_err(format!("cannot resolve {}", path.display())))?;
    let all = mounts()?;
    let mut best: Option<&Mount> = None;
    for m in &all {
        if canon.starts_with(&m.mount_point)
            && best.is_none_or(|b| m.mount_point.as_os_str().len() >= b.mount_point.as_os_str().len())
        {
            best = Some(m);
        }
    }
    best.cloned()
        .ok_or_else(|| RealError::Invalid(format!("no mount holds {}", canon.display())))
}

/// Whether `path` (canonicalized) is itself a mount point.
pub fn is_mount_point(path: &Path) -> Result<bool, RealError> {
    let canon = path
        .canonicalize()
        .map_err(io_err(format!("cannot resolve {}", path.display())))?;
    Ok(mounts()?.iter().any(|m| m.mount_point == canon))
}

/// Counters of `/sys/block/<dev>/stat` (see the kernel's `Documentation/block/stat.rst`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStat {
    /// Read requests completed.
    pub read_ios: u64,
    /// Sectors (512 B) read.
    pub read_sectors: u64,
    /// Time spent on reads, ms (summed over requests).
    pub read_ticks_ms: u64,
    /// Write requests completed.
    pub write_ios: u64,
    /// Sectors (512 B) written.
    pub write_sectors: u64,
    /// Time spent on writes, ms.
    pub write_ticks_ms: u64,
}

impl DiskStat {
    /// Parses the text of a `stat` file.
    pub fn parse(text: &str) -> Option<DiskStat> {
        let v: Vec<u64> = text.split_whitespace().map(|t| t.parse().ok()).collect::<Option<_>>()?;
        if v.len() < 8 {
            return None;
        }
        Some(DiskStat {
            read_ios: v[0],
            read_sectors: v[2],
            read_ticks_ms: v[3],
            write_ios: v[4],
            write_sectors: v[6],
            write_ticks_ms: v[7],
        })
    }

    /// `self - earlier`, counter by counter (saturating).
    pub fn since(&self, earlier: &DiskStat) -> DiskStat {
        DiskStat {
            read_ios: self.read_ios.saturating_sub(earlier.read_ios),
            read_sectors: self.read_sectors.saturating_sub(earlier.read_sectors),
            read_ticks_ms: self.read_ticks_ms.saturating_sub(earlier.read_ticks_ms),
            write_ios: self.write_ios.saturating_sub(earlier.write_ios),
            write_sectors: self.write_sectors.saturating_sub(earlier.write_sectors),
            write_ticks_ms: self.write_ticks_ms.saturating_sub(earlier.write_ticks_ms),
        }
    }
}

/// A block device as seen in sysfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDev {
    /// Kernel name of the whole device (`loop3`); the scheduler lives on it.
    pub name: String,
    /// Its sysfs directory (`/sys/devices/virtual/block/loop3`).
    pub sys: PathBuf,
    /// sysfs directory of the node that holds the file system (the partition, if any; else `sys`), whose `stat`
    /// counts the file system's I/O.
    pub stat_sys: PathBuf,
}

impl BlockDev {
    /// The device with number `major:minor`; for a partition, `name` and `sys` are its parent disk's.
    pub fn from_numbers(major: u32, minor: u32) -> Result<BlockDev, RealError> {
        if major == 0 {
            return Err(RealError::Invalid(format!(
                "device {major}:{minor} is not a block device (a virtual file system such as tmpfs or overlay)"
            )));
        }
        let link = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
        let node = link
            .canonicalize()
            .map_err(io_err(format!("cannot resolve {}", link.display())))?;
        let sys = if node.join("partition").exists() {
            node.parent().map(Path::to_path_buf).unwrap_or_else(|| node.clone())
        } else {
            node.clone()
        };
        let name = sys
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| RealError::Sysfs {
                path: sys.clone(),
                why: "odd sysfs path",
            })?;
        Ok(BlockDev {
            name,
            sys,
            stat_sys: node,
        })
    }

    /// The device holding the file system that `dir` is on.
    pub fn of_dir(dir: &Path) -> Result<BlockDev, RealError> {
        let m = mount_of(dir)?;
        BlockDev::from_numbers(m.major, m.minor).map_err(|e| match e {
            RealError::Invalid(msg) => RealError::Invalid(format!(
                "{} is on {} ({}): {msg}; use a directory on a loop device (bfq loopdev create)",
                dir.display(),
                m.mount_point.display(),
                m.fstype
            )),
            other => other,
        })
    }

    /// The device node (`/dev/loop3`).
    pub fn dev_path(&self) -> PathBuf {
        PathBuf::from("/dev").join(&self.name)
    }

    /// Its request-queue directory in sysfs.
    pub fn queue(&self) -> PathBuf {
        self.sys.join("queue")
    }

    /// Whether the device calls itself rotational.
    pub fn rotational(&self) -> bool {
        std::fs::read_to_string(self.queue().join("rotational")).is_ok_and(|s| s.trim() == "1")
    }

    /// For a loop device, the file it is backed by (`None` for other devices or a detached loop device).
    pub fn backing_file(&self) -> Option<PathBuf> {
        let s = std::fs::read_to_string(self.sys.join("loop/backing_file")).ok()?;
        Some(PathBuf::from(s.trim_end_matches('\n')))
    }

    /// Current I/O counters of the file system's node.
    pub fn stat(&self) -> Result<DiskStat, RealError> {
        let p = self.stat_sys.join("stat");
        let text = std::fs::read_to_string(&p).map_err(io_err(format!("cannot read {}", p.display())))?;
        DiskStat::parse(&text).ok_or(RealError::Sysfs {
            path: p,
            why: "cannot parse",
        })
    }
}

/// The O_DIRECT buffer of the real targets: the engine's, one type for both (zeroed, 4096-byte aligned, length a
/// multiple of 512 bytes).
pub use bfq_engine::AlignedBuf;

/// `sync(2)`: writes back every dirty page of the system and waits.
pub fn sync_all() {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() }
}

/// Drops the clean page cache, dentries and inodes (`echo 3 > /proc/sys/vm/drop_caches`). Needs root.
pub fn drop_caches() -> Result<(), RealError> {
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(io_err("cannot drop caches (/proc/sys/vm/drop_caches)"))
}

/// `posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)`: drops a file's clean cached pages.
pub fn fadvise_dontneed(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: plain syscall on a descriptor the caller owns.
    let rc = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}

/// Keeps the whole process resident (`mlockall(MCL_CURRENT | MCL_FUTURE)`) while alive, so that dropping caches
/// leaves only the measured files cold; unlocks on drop.
pub struct MemoryLock {
    locked: bool,
}

impl MemoryLock {
    /// Locks; if the kernel refuses (limits), the run goes on unlocked and [`MemoryLock::locked`] says so.
    pub fn lock() -> MemoryLock {
        // SAFETY: mlockall has no memory-safety preconditions.
        let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
        MemoryLock { locked: rc == 0 }
    }
    /// Whether the memory is locked.
    pub fn locked(&self) -> bool {
        self.locked
    }
}

impl Drop for MemoryLock {
    fn drop(&mut self) {
        if self.locked {
            // SAFETY: undoes our mlockall.
            unsafe {
                libc::munlockall();
            }
        }
    }
}

/// Free bytes available to unprivileged users on the file system holding `path` (`statvfs`).
pub fn free_bytes(path: &Path) -> Result<u64, RealError> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| RealError::Invalid(format!("path {} contains a NUL byte", path.display())))?;
    // SAFETY: statvfs fills the zeroed struct; c is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(RealError::Io {
            context: format!("cannot statvfs {}", path.display()),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_parses_and_unescapes() {
        let text = "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n\
                    40 36 7:3 / /var/my\\040dir rw,relatime - ext4 /dev/loop3 rw\n\
                    garbage line\n\
                    41 36 0:52 / /tmp rw shared:5 - tmpfs tmpfs rw\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 3);
        assert_eq!((m[0].major, m[0].minor), (98, 0));
        assert_eq!(m[1].mount_point, PathBuf::from("/var/my dir"));
        assert_eq!((m[1].fstype.as_str(), m[1].source.as_str()), ("ext4", "/dev/loop3"));
        assert_eq!(m[2].fstype, "tmpfs");
    }

    #[test]
    fn disk_stat_parses_and_subtracts() {
        let a = DiskStat::parse("  10 0 80 5 20 1 160 7 0 12 12 0 0 0 0").expect("parses");
        assert_eq!(
            (a.read_ios, a.read_sectors, a.write_sectors, a.write_ticks_ms),
            (10, 80, 160, 7)
        );
        let b = DiskStat::parse("15 0 100 6 20 1 200 9 0 12 12").expect("parses");
        let d = b.since(&a);
        assert_eq!((d.read_ios, d.read_sectors, d.write_sectors), (5, 20, 40));
        assert!(DiskStat::parse("1 2 3").is_none());
    }

    #[test]
    fn aligned_buffers_are_aligned_and_zeroed() {
        let mut b = AlignedBuf::new(5000);
        assert_eq!(b.len(), 5120);
        assert_eq!(b.as_mut_ptr() as usize % DIRECT_ALIGN as usize, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
    }

    /// Without `BFQ_REAL_TESTS=1` the gate says skip, whatever the user (root included): `cargo test` then touches
    /// no device (issue 16, defect 5). With it (CI as root) the gate lets the test run on a machine that can.
    #[test]
    fn the_real_test_gate_skips_unless_asked() {
        if real_tests_requested() {
            assert_eq!(real_test_gate("gate"), loop_devices_unavailable().is_none());
        } else {
            assert!(!real_test_gate("gate"));
        }
    }
}

/// CPU time of `who` (`libc::RUSAGE_SELF`, `libc::RUSAGE_CHILDREN`, `libc::RUSAGE_THREAD`) as (user, system),
/// seconds; zeros if `getrusage` fails.
pub fn cpu_times(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage fills the zeroed struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (s(ru.ru_utime), s(ru.ru_stime))
}

/// The machine's CPU time counters from the first line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuStat {
    /// Ticks spent busy: user, nice, system, irq, softirq, steal.
    pub busy: u64,
    /// Ticks in all states (busy, idle and iowait).
    pub total: u64,
}

impl CpuStat {
    /// Parses the `cpu ` line of `/proc/stat`.
    pub fn parse(text: &str) -> Option<CpuStat> {
        let line = text.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        if v.len() < 5 {
            return None;
        }
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal (guest time is already in user).
        let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
        Some(CpuStat {
            busy,
            total: busy + at(3) + at(4),
        })
    }

    /// Reads `/proc/stat`; `None` if it cannot be read or parsed.
    pub fn read() -> Option<CpuStat> {
        CpuStat::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// Percentage of all CPUs' time spent busy between `earlier` and `self` (0-100); `None` over no time.
    pub fn busy_pct_since(&self, earlier: &CpuStat) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total)?;
        let busy = self.busy.checked_sub(earlier.busy)?;
        (total > 0).then(|| 100.0 * busy as f64 / total as f64)
    }
}

/// The 1-minute load average from `/proc/loadavg`; `None` if unreadable.
pub fn loadavg_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod cpu_tests {
    use super::*;

    #[test]
    fn cpu_busy_share_comes_from_proc_stat_deltas() {
        let a = CpuStat::parse("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4 5\n").expect("parses");
        assert_eq!(a, CpuStat { busy: 150, total: 1000 });
        let b = CpuStat::parse("cpu  200 0 100 850 50 0 0 0 0 0\n").expect("parses");
        assert_eq!(b.busy_pct_since(&a), Some(75.0));
        assert_eq!(a.busy_pct_since(&a), None);
        assert!(CpuStat::parse("intr 1 2").is_none());
        assert!(CpuStat::read().is_some());
        assert!(loadavg_1m().is_some_and(|l| l >= 0.0));
        let (u, s) = cpu_times(libc::RUSAGE_SELF);
        assert!(u >= 0.0 && s >= 0.0);
    }
}
