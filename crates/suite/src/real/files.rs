//! The scenario's files on a real file system: created under `DIR/bfq-files/`, written in full when the spec says
//! so (never sparse), and reused between runs when an existing file already has the right size and all its blocks
//! allocated (writing ten 500 MiB files for every run would take longer than the run).

use super::sys::{self, io_err, AlignedBuf};
use super::RealError;
use bfq_workload::FileSpec;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Subdirectory of DIR holding the files.
pub const FILES_SUBDIR: &str = "bfq-files";

/// Size of each write when filling a file, bytes.
const FILL_CHUNK_BYTES: usize = 4 << 20;

/// The files of a scenario, in `FileId` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSet {
    /// Path of file *i*.
    pub paths: Vec<PathBuf>,
    /// Size of file *i* at the start of the run, bytes (0 for files that start empty).
    pub sizes: Vec<u64>,
    /// Bytes written while preparing (0 when every file was reused).
    pub written_bytes: u64,
}

/// A file name from a spec name: letters, digits, `-`, `_` and `.` kept, anything else made `_`.
fn file_name(name: &str, index: usize) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    if clean.is_empty() || clean.starts_with('.') {
        format!("file{index}")
    } else {
        clean
    }
}

/// Whether `path` is a regular file of exactly `size` bytes with every block allocated (not sparse).
fn reusable(path: &Path, size: u64) -> bool {
    match std::fs::metadata(path) {
        Ok(m) => m.is_file() && m.len() == size && m.blocks() * 512 >= size,
        Err(_) => false,
    }
}

/// Creates (or reuses) the files of `specs` under `dir/bfq-files/`, file *i* for spec *i*. A prewritten file is
/// written in full with zeros and flushed; any other file is made empty. Checks the free space first.
pub fn prepare_files(dir: &Path, specs: &[FileSpec]) -> Result<FileSet, RealError> {
    let base = dir.join(FILES_SUBDIR);
    std::fs::create_dir_all(&base).map_err(io_err(format!("cannot create {}", base.display())))?;
    let mut paths = Vec::with_capacity(specs.len());
    let mut seen = std::collections::HashSet::new();
    for (i, s) in specs.iter().enumerate() {
        let mut name = file_name(&s.name, i);
        if !seen.insert(name.clone()) {
            name = format!("{name}.{i}");
            seen.insert(name.clone());
        }
        paths.push(base.join(name));
    }
    // Space needed: what must be (re)written, minus what the old versions free.
    let mut need: u64 = 0;
    for (s, p) in specs.iter().zip(&paths) {
        if s.prewritten && !reusable(p, s.size) {
            let old = std::fs::metadata(p).map_or(0, |m| m.blocks() * 512);
            need += s.size.saturating_sub(old);
        }
    }
    let free = sys::free_bytes(&base)?;
    if need > free {
        return Err(RealError::Invalid(format!(
            "not enough space in {}: the files need {} MiB more, {} MiB are free; use a larger device or a smaller \
             file scale",
            dir.display(),
            need.div_ceil(1 << 20),
            free >> 20
        )));
    }
    let mut written = 0u64;
    let mut sizes = Vec::with_capacity(specs.len());
    let zeros = AlignedBuf::new(FILL_CHUNK_BYTES);
    for (s, p) in specs.iter().zip(&paths) {
        if !s.prewritten {
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(p)
                .map_err(io_err(format!("cannot create {}", p.display())))?;
            sizes.push(0);
            continue;
        }
        sizes.push(s.size);
        if reusable(p, s.size) {
            continue;
        }
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(p)
            .map_err(io_err(format!("cannot create {}", p.display())))?;
        let mut left = s.size;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            f.write_all(&zeros.as_slice()[..n])
                .map_err(io_err(format!("cannot write {}", p.display())))?;
            left -= n as u64;
        }
        f.sync_all().map_err(io_err(format!("cannot flush {}", p.display())))?;
        let _ = sys::fadvise_dontneed(std::os::fd::AsRawFd::as_raw_fd(&f));
        written += s.size;
    }
    Ok(FileSet {
        paths,
        sizes,
        written_bytes: written,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bfq_workload::Placement;

    fn spec(name: &str, size: u64, prewritten: bool) -> FileSpec {
        FileSpec {
            name: name.into(),
            size,
            placement: Placement::Contiguous,
            prewritten,
        }
    }

    #[test]
    fn files_are_written_in_full_and_reused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let specs = vec![
            spec("largefile0", 1 << 20, true),
            spec("largefile_write0", 1 << 20, false),
            spec("x/y", 10_000, true),
            spec("largefile0", 4096, true),
        ];
        let fs = prepare_files(tmp.path(), &specs).expect("prepares");
        assert_eq!(fs.written_bytes, (1 << 20) + 10_000 + 4096);
        assert_eq!(fs.sizes, vec![1 << 20, 0, 10_000, 4096]);
        for (p, s) in fs.paths.iter().zip(&fs.sizes) {
            let m = std::fs::metadata(p).expect("exists");
            assert_eq!(m.len(), *s);
            assert!(m.blocks() * 512 >= *s, "{} is sparse", p.display());
        }
        assert_ne!(fs.paths[0], fs.paths[3]);
        assert!(fs.paths[2].ends_with("x_y"));
        // A writer's file that grew is emptied again; full files are reused.
        std::fs::write(&fs.paths[1], b"data").expect("writes");
        let again = prepare_files(tmp.path(), &specs).expect("prepares");
        assert_eq!(again.written_bytes, 0);
        assert_eq!(std::fs::metadata(&fs.paths[1]).expect("exists").len(), 0);
        // A sparse file of the right size is rewritten.
        let f = std::fs::File::create(&fs.paths[0]).expect("creates");
        f.set_len(1 << 20).expect("sets length");
        let third = prepare_files(tmp.path(), &specs).expect("prepares");
        assert_eq!(third.written_bytes, 1 << 20);
    }
}
