//! Errors reported by the engine.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong between a client call and the device. Errors always reach the caller; the engine
/// never hangs a client on a failed request.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The io_uring instance or the reactor thread could not be set up.
    #[error("cannot set up the io_uring engine: {0} (is io_uring enabled? see /proc/sys/kernel/io_uring_disabled)")]
    Setup(#[source] io::Error),
    /// The policy could not be built from its name and tunables.
    #[error("cannot build the scheduling policy: {0}")]
    Policy(#[from] bfq_sched::ConfigError),
    /// A file could not be opened (missing, permission, or the file system refuses `O_DIRECT`).
    #[error("cannot open {path} with O_DIRECT: {source}")]
    Open {
        /// The path given to [`Engine::open`](crate::Engine::open).
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// An offset, length or buffer address does not meet the file's `O_DIRECT` alignment. Checked before
    /// anything is submitted.
    #[error("misaligned {what}: {value} is not a multiple of {align} bytes (the logical block size for O_DIRECT)")]
    Misaligned {
        /// `"offset"`, `"length"` or `"buffer address"`.
        what: &'static str,
        /// The offending value (bytes, or the address).
        value: u64,
        /// The required alignment in bytes.
        align: u32,
    },
    /// A request of zero bytes or larger than one request may be.
    #[error("invalid request length {len} bytes: must be between 1 and {max} bytes")]
    BadLength {
        /// The requested length in bytes.
        len: usize,
        /// The largest length accepted, in bytes.
        max: usize,
    },
    /// A write to a file opened read-only.
    #[error("file was opened read-only; open it with writable = true to write")]
    ReadOnly,
    /// A [`FileRef`](crate::FileRef) that belongs to another engine.
    #[error("this file was opened by a different engine")]
    ForeignFile,
    /// A read returned fewer bytes than asked: the request reached the end of the file (for example the file was
    /// truncated under the reader). The bytes that were read are at the start of the buffer.
    #[error("short read at offset {offset}: {transferred} of {requested} bytes (end of file)")]
    ShortRead {
        /// File offset of the request, in bytes.
        offset: u64,
        /// Bytes asked for.
        requested: usize,
        /// Bytes actually read (0 at or past the end of the file).
        transferred: usize,
    },
    /// A write stored fewer bytes than given.
    #[error("short write at offset {offset}: {transferred} of {requested} bytes")]
    ShortWrite {
        /// File offset of the request, in bytes.
        offset: u64,
        /// Bytes given.
        requested: usize,
        /// Bytes actually written.
        transferred: usize,
    },
    /// The kernel failed the request: `EIO` for a device error, `ENOSPC` for a full file system, and so on.
    /// [`EngineError::errno`] gives the number.
    #[error("{op} at offset {offset} failed: {source}")]
    Io {
        /// `"read"`, `"write"` or `"fsync"`.
        op: &'static str,
        /// File offset of the request, in bytes (0 for fsync).
        offset: u64,
        /// The kernel's error.
        source: io::Error,
    },
    /// The engine has shut down (or is shutting down) and accepts no more requests.
    #[error("the engine has shut down")]
    ShutDown,
    /// [`Flow::wait`](crate::Flow::wait) was called with no asynchronous request outstanding on the flow.
    #[error("wait() called with no asynchronous request in flight on this flow")]
    NothingInFlight,
    /// The scheduling policy panicked or stalled (held requests without dispatching any while the device was
    /// idle and no timer was set); the engine failed the requests it held and stopped accepting new ones.
    #[error("the scheduling policy failed: {0}")]
    PolicyFailed(String),
    /// The reactor lost its io_uring instance (an unexpected kernel error).
    #[error("io_uring failed: {0}")]
    Ring(#[source] io::Error),
}

impl EngineError {
    /// The `errno` behind a kernel error (`libc::EIO`, `libc::ENOSPC`, ...), if this is one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            EngineError::Io { source, .. } | EngineError::Open { source, .. } => source.raw_os_error(),
            EngineError::Setup(e) | EngineError::Ring(e) => e.raw_os_error(),
            _ => None,
        }
    }
}
