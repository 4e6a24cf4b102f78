//! What the engine learns about a file and the block device under it, from `fstat`, block-device ioctls and
//! `/sys/dev/block/MAJ:MIN/queue`.

use bfq_sched::DeviceInfo;
use std::fs;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// `BLKGETSIZE64`: the size of a block device in bytes (`_IOR(0x12, 114, u64)`).
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;

/// Hardware queue depth assumed when sysfs does not tell (a typical NCQ depth).
const DEFAULT_QUEUE_DEPTH: u32 = 32;

/// The sysfs directory of a block device number, resolving a partition to its whole disk's `queue` directory.
fn sysfs_queue_dir(major: u32, minor: u32) -> Option<PathBuf> {
    let base = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let q = base.join("queue");
    if q.is_dir() {
        return Some(q);
    }
    // A partition: its parent directory is the disk.
    let parent = fs::canonicalize(&base).ok()?.parent()?.join("queue");
    parent.is_dir().then_some(parent)
}

fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The block device number a path lives on: the device itself for a block special file, else the file system's.
fn device_number(meta: &fs::Metadata) -> (u32, u32) {
    let dev = if meta.file_type().is_block_device() {
        meta.rdev()
    } else {
        meta.dev()
    };
    (libc::major(dev), libc::minor(dev))
}

/// Best-effort [`DeviceInfo`] for the block device holding `path` (or `path` itself if it is a block device), from
/// `/sys/dev/block/MAJ:MIN/queue`: `rotational`, `nr_requests`, `max_sectors_kb`, and the capacity. Anything
/// unknown keeps the value of [`DeviceInfo::ssd`]; the name is the path.
pub fn device_info_for(path: &Path) -> DeviceInfo {
    let mut info = DeviceInfo::ssd();
    info.name = path.display().to_string();
    let Ok(meta) = fs::metadata(path) else {
        return info;
    };
    let (major, minor) = device_number(&meta);
    let Some(q) = sysfs_queue_dir(major, minor) else {
        return info;
    };
    if let Some(r) = read_u64(&q.join("rotational")) {
        info.rotational = r != 0;
    }
    if let Some(n) = read_u64(&q.join("nr_requests")) {
        info.nr_requests = n.clamp(1, u64::from(u32::MAX)) as u32;
    }
    if let Some(kb) = read_u64(&q.join("max_sectors_kb")) {
        info.max_sectors = (kb * 2).clamp(1, u64::from(u32::MAX)) as u32;
    }
    let disk = q.parent().map(Path::to_path_buf);
    if let Some(disk) = disk {
        if let Some(sectors) = read_u64(&disk.join("size")) {
            info.capacity_sectors = sectors;
        }
        info.queue_depth = read_u64(&disk.join("device/queue_depth"))
            .or_else(|| read_u64(&disk.join("mq/0/nr_tags")))
            .map(|d| d.clamp(1, 4096) as u32)
            .unwrap_or(DEFAULT_QUEUE_DEPTH);
    }
    info
}

/// Size and `O_DIRECT` alignment of an open file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    /// Size in bytes when opened.
    pub size_bytes: u64,
    /// Logical block size of the backing device, in bytes: offsets and lengths must be multiples of it.
    pub logical_block_size: u32,
    /// `(st_dev, st_ino)`, or `(st_rdev, 0)` for a block device: identifies the file across opens.
    pub identity: (u64, u64),
}

/// Reads the geometry of an open file.
pub(crate) fn geometry(fd: BorrowedFd<'_>, meta: &fs::Metadata) -> std::io::Result<Geometry> {
    if meta.file_type().is_block_device() {
        let mut size: u64 = 0;
        let mut lbs: libc::c_int = 0;
        // SAFETY: the ioctls write one u64 and one int into the given, valid locations.
        unsafe {
            if libc::ioctl(fd.as_raw_fd(), BLKGETSIZE64 as _, &mut size as *mut u64) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::ioctl(fd.as_raw_fd(), libc::BLKSSZGET as _, &mut lbs as *mut libc::c_int) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        return Ok(Geometry {
            size_bytes: size,
            logical_block_size: lbs.clamp(512, 65536) as u32,
            identity: (meta.rdev(), 0),
        });
    }
    let (major, minor) = device_number(meta);
    let lbs = sysfs_queue_dir(major, minor)
        .and_then(|q| read_u64(&q.join("logical_block_size")))
        .unwrap_or(512)
        .clamp(512, 65536) as u32;
    Ok(Geometry {
        size_bytes: meta.size(),
        logical_block_size: lbs,
        identity: (meta.dev(), meta.ino()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_info_defaults_for_a_missing_path() {
        let d = device_info_for(Path::new("/nonexistent/for/sure"));
        assert_eq!(d.name, "/nonexistent/for/sure");
        assert_eq!(d.nr_requests, DeviceInfo::ssd().nr_requests);
    }

    #[test]
    fn device_info_reads_sysfs_for_tmp() {
        let d = device_info_for(Path::new("/tmp"));
        assert!(d.nr_requests >= 1 && d.max_sectors >= 1 && d.queue_depth >= 1);
    }
}
