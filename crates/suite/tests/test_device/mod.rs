//! The `bfq loopdev` device the real-target tests run on (root and `BFQ_REAL_TESTS=1` only): created in a fresh
//! directory under the system's temporary directory, removed when dropped, on failure too. Included by each
//! `real_*` test file with `mod test_device;`.

use bfq_suite::real::loopdev::{self, CreateOptions, FsKind};
use bfq_suite::real::sys::BlockDev;
use std::path::PathBuf;

/// A `bfq loopdev` device with ext4 mounted on `dir`, removed when dropped.
pub struct Device {
    /// Where the device's file system is mounted.
    pub dir: PathBuf,
}

impl Device {
    /// A device of `size` bytes mounted on `bfq-real-<tag>-<pid>` in the temporary directory.
    pub fn new(tag: &str, size: u64) -> Device {
        let dir = std::env::temp_dir().join(format!("bfq-real-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir(&dir);
        let opts = CreateOptions {
            size_bytes: size,
            fs: FsKind::Ext4,
            progress: false,
        };
        loopdev::create(&dir, &opts).expect("creates the test device");
        Device { dir }
    }

    /// The block device behind `dir`.
    pub fn block(&self) -> BlockDev {
        BlockDev::of_dir(&self.dir).expect("device")
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        if let Err(e) = loopdev::remove(&self.dir) {
            eprintln!("could not remove the test device: {e}");
        }
    }
}
