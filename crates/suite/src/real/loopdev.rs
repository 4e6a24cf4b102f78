//! `bfq loopdev`: test devices that the real targets may reconfigure.
//!
//! [`create`] writes a backing image in full (never sparse) under [`STATE_DIR`], attaches it with
//! `losetup --direct-io=on --find --show`, makes a file system on it (ext4 by default, made with its lazy
//! initialisation off so no background writes disturb measurements, and without discarding the device, which on a
//! loop device would punch holes into the image and make it sparse again) and mounts it on the given directory. A JSON
//! record beside the image ([`LoopRecord`]) proves that the tool made the device: the kernel target changes the
//! scheduler only of devices with such a record (see [`record_for_device`]). [`remove`] undoes everything and is
//! idempotent; a failed or interrupted [`create`] undoes what it did.
//!
//! Teardown never trusts a remembered device number alone: it detaches exactly the loop devices whose backing
//! file is the record's image, and unmounts only mounts of those devices.

use super::cleanup::Cleanup;
use super::sys::{self, io_err, AlignedBuf, BlockDev, DIRECT_ALIGN};
use super::RealError;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{IsTerminal, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where images and records live (outside the mounted directory, on the machine's own file system).
pub const STATE_DIR: &str = "/var/tmp/bfq-loop";

/// Smallest accepted device, bytes (ext4 with a journal needs a few MiB; below this nothing useful fits).
pub const MIN_SIZE_BYTES: u64 = 32 << 20;

/// Space left free on the image's file system after the image is written, bytes.
const FREE_SPACE_MARGIN_BYTES: u64 = 1 << 30;

/// Size of each write of zeros while filling the image, bytes.
const FILL_CHUNK_BYTES: usize = 8 << 20;

/// Attempts to unmount a busy file system, and the pause between them.
const UMOUNT_ATTEMPTS: u32 = 10;
const UMOUNT_RETRY_PAUSE: Duration = Duration::from_millis(200);

/// File system to make on a new device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsKind {
    /// ext4, mounted on the directory.
    Ext4,
    /// No file system: the raw device, linked as `DIR/device`.
    None,
}

impl FsKind {
    /// Parses `ext4` or `none`.
    pub fn parse(s: &str) -> Result<FsKind, RealError> {
        match s {
            "ext4" => Ok(FsKind::Ext4),
            "none" => Ok(FsKind::None),
            _ => Err(RealError::Invalid(format!(
                "unknown file system '{s}': use ext4 or none"
            ))),
        }
    }
    /// Name as accepted by [`FsKind::parse`].
    pub fn name(self) -> &'static str {
        match self {
            FsKind::Ext4 => "ext4",
            FsKind::None => "none",
        }
    }
}

/// Proof that `bfq loopdev` made a device, kept as `STATE_DIR/<key>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopRecord {
    /// Always `bfq loopdev`.
    pub tool: String,
    /// Canonical path of the directory.
    pub dir: PathBuf,
    /// Backing image.
    pub image: PathBuf,
    /// Size of the image and device, bytes.
    pub size_bytes: u64,
    /// File system made on it.
    pub fs: FsKind,
    /// Loop device node once attached (`/dev/loop3`).
    pub device: Option<PathBuf>,
    /// Whether the file system is mounted on `dir`.
    pub mounted: bool,
    /// Whether `create` made the directory (then `remove` deletes it if empty).
    pub created_dir: bool,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix_s: u64,
    /// Scheduler of the loop device when it was attached; restored before detaching, since a detached loop device
    /// keeps its queue settings for the next user.
    #[serde(default)]
    pub initial_scheduler: Option<String>,
}

const TOOL: &str = "bfq loopdev";

/// Parses a size such as `512M`, `16G`, `1T`, `300K` or `1048576` (units are powers of 1024; `MiB`, `GB`, ... are
/// accepted as the same). The result must be a multiple of 4096 bytes.
pub fn parse_size(text: &str) -> Result<u64, RealError> {
    let bad = |why: &str| {
        RealError::InvalidSize(format!(
            "'{text}' {why}: give a number with an optional unit K, M, G or T (powers of 1024), e.g. 512M or 16G"
        ))
    };
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(bad("has no number"));
    }
    let n: u64 = num.parse().map_err(|_| bad("is too large"))?;
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err(bad("has an unknown unit")),
    };
    let bytes = n.checked_mul(1u64 << shift).ok_or_else(|| bad("is too large"))?;
    if bytes % DIRECT_ALIGN != 0 {
        return Err(RealError::InvalidSize(format!(
            "'{text}' is {bytes} bytes, not a multiple of 4096: round it, e.g. to {}K",
            bytes.div_ceil(DIRECT_ALIGN) * 4
        )));
    }
    Ok(bytes)
}

/// Formats bytes in binary units (`512 MiB`, `16.0 GiB`).
pub fn format_size(bytes: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if bytes >= GIB {
        format!("{:.1} GiB", bytes as f64 / GIB as f64)
    } else {
        format!("{} MiB", bytes / MIB)
    }
}

/// FNV-1a, 64 bits: a stable key from a path.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The file-name key of a directory's record and image: its path made readable, plus a hash of the full path.
pub fn key_for(dir: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let readable: String = dir
        .to_string_lossy()
        .trim_matches('/')
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(80)
        .collect();
    format!("{readable}-{:016x}", fnv1a(dir.as_os_str().as_bytes()))
}

fn state_dir() -> PathBuf {
    PathBuf::from(STATE_DIR)
}

fn record_path(dir: &Path) -> PathBuf {
    state_dir().join(format!("{}.json", key_for(dir)))
}

fn save(rec: &LoopRecord) -> Result<(), RealError> {
    let path = record_path(&rec.dir);
    let tmp = path.with_extension("json.tmp");
    let text =
        serde_json::to_string_pretty(rec).map_err(|e| RealError::Invalid(format!("cannot encode record: {e}")))?;
    std::fs::write(&tmp, text).map_err(io_err(format!("cannot write {}", tmp.display())))?;
    std::fs::rename(&tmp, &path).map_err(io_err(format!("cannot write {}", path.display())))
}

/// Every record in [`STATE_DIR`] (unreadable ones are skipped).
pub fn records() -> Vec<LoopRecord> {
    let Ok(rd) = std::fs::read_dir(state_dir()) else {
        return Vec::new();
    };
    let mut out: Vec<LoopRecord> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|t| serde_json::from_str::<LoopRecord>(&t).ok())
        .filter(|r| r.tool == TOOL)
        .collect();
    out.sort_by(|a, b| a.dir.cmp(&b.dir));
    out
}

/// The canonical form of `dir` if it exists, else its absolute form.
fn resolve_dir(dir: &Path) -> Result<PathBuf, RealError> {
    match dir.canonicalize() {
        Ok(p) => Ok(p),
        Err(_) => {
            let cwd = std::env::current_dir().map_err(io_err("cannot read the current directory"))?;
            Ok(cwd.join(dir))
        }
    }
}

/// The record of the device mounted on (or made for) `dir`, if `bfq loopdev` made one.
pub fn record_for_dir(dir: &Path) -> Result<Option<LoopRecord>, RealError> {
    let d = resolve_dir(dir)?;
    Ok(records().into_iter().find(|r| r.dir == d))
}

/// The record proving that `dev` was made by `bfq loopdev`: its node is a record's device and it is backed by
/// that record's image.
pub fn record_for_device(dev: &BlockDev) -> Option<LoopRecord> {
    let backing = dev.backing_file()?;
    records()
        .into_iter()
        .find(|r| r.device.as_deref() == Some(dev.dev_path().as_path()) && r.image == backing)
}

/// Loop devices currently backed by `image` (found through sysfs, whatever the record says).
pub fn loops_backed_by(image: &Path) -> Vec<BlockDev> {
    let Ok(rd) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        let Ok(sys) = e.path().canonicalize() else { continue };
        let dev = BlockDev {
            name,
            stat_sys: sys.clone(),
            sys,
        };
        if let Some(b) = dev.backing_file() {
            // A deleted image shows as "<path> (deleted)".
            let b = b.to_string_lossy();
            let b = b.strip_suffix(" (deleted)").unwrap_or(&b);
            if Path::new(b) == image {
                out.push(dev);
            }
        }
    }
    out
}

/// What [`create`] should make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateOptions {
    /// Device size, bytes (multiple of 4096, at least [`MIN_SIZE_BYTES`]).
    pub size_bytes: u64,
    /// File system.
    pub fs: FsKind,
    /// Show progress on standard error while writing the image (only if it is a terminal).
    pub progress: bool,
}

/// Makes a loop device of `opts.size_bytes` and mounts it on `dir` (created if missing; must be empty and not a
/// mount point). Needs root. On any failure, or an interrupt, everything made so far is undone.
pub fn create(dir: &Path, opts: &CreateOptions) -> Result<LoopRecord, RealError> {
    sys::require_root("bfq loopdev create")?;
    if opts.size_bytes < MIN_SIZE_BYTES {
        return Err(RealError::InvalidSize(format!(
            "{} is too small: give at least {}",
            format_size(opts.size_bytes),
            format_size(MIN_SIZE_BYTES)
        )));
    }
    let created_dir = !dir.exists();
    if created_dir {
        std::fs::create_dir_all(dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
    }
    let dir = dir
        .canonicalize()
        .map_err(io_err(format!("cannot resolve {}", dir.display())))?;
    let undo_dir = |created: bool, d: &Path| {
        if created {
            let _ = std::fs::remove_dir(d);
        }
    };
    if let Some(r) = record_for_dir(&dir)? {
        return Err(RealError::Invalid(format!(
            "{} already has a bfq loop device ({}); run `bfq loopdev remove {}` first",
            dir.display(),
            r.device.map_or("not attached".into(), |d| d.display().to_string()),
            dir.display()
        )));
    }
    if !dir.is_dir() {
        return Err(RealError::Invalid(format!("{} is not a directory", dir.display())));
    }
    if sys::is_mount_point(&dir)? {
        return Err(RealError::Invalid(format!(
            "{} is already a mount point; give an empty directory",
            dir.display()
        )));
    }
    let non_empty = std::fs::read_dir(&dir)
        .map_err(io_err(format!("cannot list {}", dir.display())))?
        .next()
        .is_some();
    if non_empty {
        return Err(RealError::Invalid(format!(
            "{} is not empty; give an empty or new directory (its contents would be hidden by the mount)",
            dir.display()
        )));
    }
    let sd = state_dir();
    std::fs::create_dir_all(&sd).map_err(io_err(format!("cannot create {}", sd.display())))?;
    let free = sys::free_bytes(&sd)?;
    if free < opts.size_bytes + FREE_SPACE_MARGIN_BYTES {
        undo_dir(created_dir, &dir);
        return Err(RealError::Invalid(format!(
            "not enough space in {} for a {} image: {} free, and {} must stay free; give a smaller --size",
            sd.display(),
            format_size(opts.size_bytes),
            format_size(free),
            format_size(FREE_SPACE_MARGIN_BYTES)
        )));
    }
    let key = key_for(&dir);
    let mut rec = LoopRecord {
        tool: TOOL.to_string(),
        dir: dir.clone(),
        image: sd.join(format!("{key}.img")),
        size_bytes: opts.size_bytes,
        fs: opts.fs,
        device: None,
        mounted: false,
        created_dir,
        created_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        initial_scheduler: None,
    };
    if rec.image.exists() {
        undo_dir(created_dir, &dir);
        return Err(RealError::Invalid(format!(
            "{} exists without a record; delete it by hand if no loop device uses it (losetup -j {})",
            rec.image.display(),
            rec.image.display()
        )));
    }
    // The record claims the directory first; every later step is undone by `teardown` from it.
    save(&rec)?;
    let guard = {
        let r = rec.clone();
        Cleanup::register(
            format!("remove the loop device being made for {}", dir.display()),
            move || teardown(&r).map(|_| ()).map_err(|e| e.to_string()),
        )
    };
    let made = build(&mut rec, opts);
    match made {
        Ok(()) => {
            guard.disarm();
            Ok(rec)
        }
        Err(e) => {
            // Dropping the guard tears down; report the original error.
            if let Err(t) = guard.run() {
                eprintln!("bfq: undoing the partial device failed too: {t}");
            }
            Err(e)
        }
    }
}

fn build(rec: &mut LoopRecord, opts: &CreateOptions) -> Result<(), RealError> {
    write_image(&rec.image, rec.size_bytes, opts.progress)?;
    let image = rec.image.to_string_lossy().into_owned();
    let out = sys::run_command("losetup", &["--direct-io=on", "--find", "--show", &image])?;
    let node = PathBuf::from(out.trim());
    if !node.to_string_lossy().starts_with("/dev/loop") {
        return Err(RealError::Invalid(format!(
            "losetup printed an unexpected device '{}'",
            out.trim()
        )));
    }
    rec.device = Some(node.clone());
    let name = node
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    rec.initial_scheduler = std::fs::read_to_string(format!("/sys/block/{name}/queue/scheduler"))
        .ok()
        .and_then(|t| super::sched::parse_scheduler_list(&t).1);
    save(rec)?;
    let dio = std::fs::read_to_string(format!("/sys/block/{name}/loop/dio")).unwrap_or_default();
    if dio.trim() != "1" {
        eprintln!(
            "bfq: warning: {} did not enable direct I/O; data will be cached twice",
            node.display()
        );
    }
    let dev = node.to_string_lossy().into_owned();
    let dir = rec.dir.to_string_lossy().into_owned();
    match rec.fs {
        FsKind::Ext4 => {
            sys::run_command(
                "mkfs.ext4",
                &[
                    "-q",
                    "-F",
                    "-m",
                    "0",
                    "-E",
                    "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
                    &dev,
                ],
            )?;
            sys::run_command("mount", &["-t", "ext4", &dev, &dir])?;
            rec.mounted = true;
        }
        FsKind::None => {
            std::os::unix::fs::symlink(&node, rec.dir.join("device"))
                .map_err(io_err(format!("cannot link {}/device", rec.dir.display())))?;
        }
    }
    save(rec)
}

/// Fills `path` with `size` bytes of zeros (O_DIRECT where the file system allows it, so the page cache is not
/// flooded), then flushes it to the disk.
fn write_image(path: &Path, size: u64, progress: bool) -> Result<(), RealError> {
    let open = |direct: bool| {
        let mut o = OpenOptions::new();
        o.write(true).create_new(true);
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(path)
    };
    let (mut file, direct): (File, bool) = match open(true) {
        Ok(f) => (f, true),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => (
            open(false).map_err(io_err(format!("cannot create {}", path.display())))?,
            false,
        ),
        Err(e) => return Err(io_err(format!("cannot create {}", path.display()))(e)),
    };
    let buf = AlignedBuf::new(FILL_CHUNK_BYTES);
    let show = progress && std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut last_shown = Instant::now();
    let mut done = 0u64;
    while done < size {
        let n = (size - done).min(buf.len() as u64) as usize;
        file.write_all(&buf.as_slice()[..n])
            .map_err(io_err(format!("cannot write {}", path.display())))?;
        done += n as u64;
        if !direct && done.is_multiple_of(256 << 20) {
            // Keep dirty pages bounded and out of the cache.
            file.sync_data()
                .map_err(io_err(format!("cannot flush {}", path.display())))?;
            let _ = sys::fadvise_dontneed(std::os::fd::AsRawFd::as_raw_fd(&file));
        }
        if show && (last_shown.elapsed() >= Duration::from_millis(250) || done == size) {
            last_shown = Instant::now();
            let secs = started.elapsed().as_secs_f64().max(1e-3);
            eprint!(
                "\rwriting {}: {:>3}% ({} of {}, {:.0} MB/s)   ",
                path.display(),
                done * 100 / size.max(1),
                format_size(done),
                format_size(size),
                done as f64 / secs / 1e6
            );
            let _ = std::io::stderr().flush();
        }
    }
    if show {
        eprintln!();
    }
    file.sync_all()
        .map_err(io_err(format!("cannot flush {}", path.display())))?;
    let _ = sys::fadvise_dontneed(std::os::fd::AsRawFd::as_raw_fd(&file));
    Ok(())
}

/// What [`remove`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removed {
    /// Mount points unmounted.
    pub unmounted: Vec<PathBuf>,
    /// Loop devices detached.
    pub detached: Vec<PathBuf>,
    /// Whether the image was deleted.
    pub image_deleted: bool,
    /// Whether a record existed (false: there was nothing to remove).
    pub had_record: bool,
}

fn umount(path: &Path) -> Result<(), RealError> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| RealError::Invalid(format!("path {} contains a NUL byte", path.display())))?;
    for attempt in 0..UMOUNT_ATTEMPTS {
        // SAFETY: c is a valid C string.
        let rc = unsafe { libc::umount2(c.as_ptr(), 0) };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EBUSY) if attempt + 1 < UMOUNT_ATTEMPTS => std::thread::sleep(UMOUNT_RETRY_PAUSE),
            Some(libc::EBUSY) => {
                return Err(RealError::Invalid(format!(
                    "{} is busy: leave it and close the programs using it (see `fuser -vm {}`), then run \
                     `bfq loopdev remove` again",
                    path.display(),
                    path.display()
                )))
            }
            Some(libc::EINVAL) => return Ok(()), // not mounted (any more)
            _ => return Err(io_err(format!("cannot unmount {}", path.display()))(e)),
        }
    }
    Ok(())
}

/// Undoes whatever exists of `rec`: unmounts the file systems of the loop devices backed by its image, puts their
/// scheduler back to the one they had when attached, detaches those devices, deletes the image, the `device` link, the directory (if made by `create` and empty) and the
/// record. Safe to repeat.
fn teardown(rec: &LoopRecord) -> Result<Removed, RealError> {
    let mut done = Removed {
        had_record: true,
        ..Removed::default()
    };
    let loops = loops_backed_by(&rec.image);
    let numbers: Vec<(u32, u32)> = loops
        .iter()
        .filter_map(|d| {
            let t = std::fs::read_to_string(d.sys.join("dev")).ok()?;
            let (a, b) = t.trim().split_once(':')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect();
    // Newest mounts first, in case something is stacked.
    let mut ours: Vec<PathBuf> = sys::mounts()?
        .into_iter()
        .filter(|m| numbers.contains(&(m.major, m.minor)))
        .map(|m| m.mount_point)
        .collect();
    ours.reverse();
    for mp in ours {
        umount(&mp)?;
        done.unmounted.push(mp);
    }
    let link = rec.dir.join("device");
    if rec.fs == FsKind::None && link.is_symlink() {
        let _ = std::fs::remove_file(&link);
    }
    for d in &loops {
        if let Some(initial) = &rec.initial_scheduler {
            // Best effort: a failure here must not keep the device attached.
            let _ = std::fs::write(d.queue().join("scheduler"), initial);
        }
        let node = d.dev_path();
        sys::run_command("losetup", &["-d", &node.to_string_lossy()])?;
        done.detached.push(node);
    }
    if !loops_backed_by(&rec.image).is_empty() {
        return Err(RealError::Invalid(format!(
            "{} is still attached to a loop device; run `losetup -j {}` to see which",
            rec.image.display(),
            rec.image.display()
        )));
    }
    match std::fs::remove_file(&rec.image) {
        Ok(()) => done.image_deleted = true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(format!("cannot delete {}", rec.image.display()))(e)),
    }
    if rec.created_dir {
        let _ = std::fs::remove_dir(&rec.dir);
    }
    match std::fs::remove_file(record_path(&rec.dir)) {
        Ok(()) => Ok(done),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(done),
        Err(e) => Err(io_err("cannot delete the record")(e)),
    }
}

/// Removes the device `bfq loopdev` made for `dir`: unmount, detach, delete the image and the record. Needs root.
/// Does nothing (and says so through [`Removed::had_record`]) if there is no record for `dir`; refuses to touch a
/// mount on `dir` that the tool did not make.
pub fn remove(dir: &Path) -> Result<Removed, RealError> {
    sys::require_root("bfq loopdev remove")?;
    match record_for_dir(dir)? {
        Some(rec) => teardown(&rec),
        None => {
            let d = resolve_dir(dir)?;
            if d.exists() && sys::is_mount_point(&d)? {
                return Err(RealError::Invalid(format!(
                    "{} is a mount point that bfq loopdev did not make; not touching it",
                    d.display()
                )));
            }
            Ok(Removed::default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_clear_errors() {
        assert_eq!(parse_size("512M").ok(), Some(512 << 20));
        assert_eq!(parse_size("16G").ok(), Some(16 << 30));
        assert_eq!(parse_size("16GiB").ok(), Some(16 << 30));
        assert_eq!(parse_size("1t").ok(), Some(1 << 40));
        assert_eq!(parse_size("8192").ok(), Some(8192));
        assert_eq!(parse_size(" 300K ").ok(), Some(300 << 10));
        for bad in [
            "",
            "G",
            "12X",
            "1.5G",
            "-1G",
            "99999999999999999999G",
            "100",
            "100000000T",
        ] {
            let e = parse_size(bad).expect_err(bad).to_string();
            assert!(e.contains(bad.trim()) || bad.is_empty(), "{e}");
            assert!(e.contains("512M") || e.contains("4096"), "{e}");
        }
    }

    #[test]
    fn keys_are_readable_stable_and_distinct() {
        let a = key_for(Path::new("/mnt/bfq test"));
        assert!(a.starts_with("mnt-bfq-test-"), "{a}");
        assert_eq!(a, key_for(Path::new("/mnt/bfq test")));
        assert_ne!(a, key_for(Path::new("/mnt/bfq-test")));
        assert_eq!(format_size(512 << 20), "512 MiB");
        assert_eq!(format_size(16 << 30), "16.0 GiB");
        assert_eq!(FsKind::parse("ext4").ok(), Some(FsKind::Ext4));
        assert!(FsKind::parse("xfs").is_err());
    }
}
