//! The `kernel:DIR` target: the suite's processes on real threads doing plain `pread`/`pwrite` (buffered, or
//! O_DIRECT for [`IoMode::Direct`]), scheduled by the Linux kernel's own scheduler on the loop device under DIR.
//!
//! [`KernelBackend`] executes operations as follows:
//! - buffered reads and writes: `pread`/`pwrite` on the process's thread, one at a time, in submission order (S's
//!   background jobs are synchronous fio jobs at depth 1, so nothing is lost);
//! - O_DIRECT reads and writes: submitted through Linux AIO from the process's thread (so several can be in
//!   flight, as the readahead of a start-up replay is in S's replayer), with offsets rounded down and ends rounded
//!   up to 4096 bytes and page-aligned buffers; the completion reports the bytes of the requested range;
//! - `Fsync`: `fsync(2)`; `Sync`: `sync(2)`; `Invalidate`: `posix_fadvise(POSIX_FADV_DONTNEED)`.
//!
//! A process's I/O class and priority are applied to its thread with `ioprio_set`; weights and groups are not
//! (they would need cgroups).

use super::aio::{Aio, AioDone};
use super::files::FileSet;
use super::runner::{Completion, FlowIo, IoBackend};
use super::sys::{self, io_err, AlignedBuf, BlockDev, DIRECT_ALIGN};
use super::{loopdev, run_target, RealError, TargetBackend};
use crate::experiment::Experiment;
use crate::result::RunResult;
use crate::target::kernel_scheduler;
use bfq_sched::IoClass;
use bfq_workload::{FileId, FlowSpec, IoError, IoMode, Op};
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::Arc;
use std::time::Instant;

/// O_DIRECT operations in flight per process at most; more wait on the process's thread.
pub const AIO_DEPTH: usize = 64;

/// `IOPRIO_WHO_PROCESS` (with id 0: the calling thread).
const IOPRIO_WHO_PROCESS: libc::c_int = 1;
/// Shift of the class in an ioprio value.
const IOPRIO_CLASS_SHIFT: u32 = 13;

struct KFile {
    buffered: File,
    direct: Option<File>,
}

/// Plain system-call I/O on the scenario's files; see the module documentation.
pub struct KernelBackend {
    files: Arc<Vec<KFile>>,
    direct_everywhere: bool,
}

impl KernelBackend {
    /// Opens every file of `set` for reading and writing, buffered and (where the file system allows it) with
    /// O_DIRECT.
    pub fn open(set: &FileSet) -> Result<KernelBackend, RealError> {
        let mut files = Vec::with_capacity(set.paths.len());
        let mut direct_everywhere = true;
        for p in &set.paths {
            let buffered = OpenOptions::new()
                .read(true)
                .write(true)
                .open(p)
                .map_err(io_err(format!("cannot open {}", p.display())))?;
            let direct = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(p)
                .ok();
            direct_everywhere &= direct.is_some();
            files.push(KFile { buffered, direct });
        }
        Ok(KernelBackend {
            files: Arc::new(files),
            direct_everywhere,
        })
    }

    /// Whether every file could be opened with O_DIRECT (otherwise direct operations on the others are buffered).
    pub fn direct_everywhere(&self) -> bool {
        self.direct_everywhere
    }
}

fn ioprio_value(spec: &FlowSpec) -> Option<libc::c_int> {
    if spec.class == IoClass::Be && spec.prio == bfq_sched::DEFAULT_IOPRIO {
        return None; // leave the kernel's default
    }
    let class = match spec.class {
        IoClass::Rt => 1,
        IoClass::Be => 2,
        IoClass::Idle => 3,
    };
    Some((class << IOPRIO_CLASS_SHIFT) | libc::c_int::from(spec.prio.min(7)))
}

impl IoBackend for KernelBackend {
    type Flow = KernelFlow;

    fn open_flow(&self, spec: &FlowSpec) -> Result<KernelFlow, RealError> {
        if let Some(v) = ioprio_value(spec) {
            // SAFETY: plain syscall on the calling thread.
            let rc = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, v) };
            if rc < 0 {
                return Err(RealError::Io {
                    context: format!("cannot set the I/O priority of {}", spec.name),
                    source: std::io::Error::last_os_error(),
                });
            }
        }
        Ok(KernelFlow {
            files: self.files.clone(),
            aio: Aio::new(AIO_DEPTH).ok(),
            slots: Vec::new(),
            free_bufs: Vec::new(),
            pending: VecDeque::new(),
            ready: VecDeque::new(),
            buf: Vec::new(),
        })
    }

    fn name(&self) -> &'static str {
        "kernel"
    }
}

/// An O_DIRECT operation in flight.
struct Slot {
    tag: u64,
    buf: AlignedBuf,
    /// Bytes between the aligned start and the requested offset.
    head: u64,
    /// Requested length.
    len: u64,
}

/// One process's I/O in the kernel target.
pub struct KernelFlow {
    files: Arc<Vec<KFile>>,
    aio: Option<Aio>,
    slots: Vec<Option<Slot>>,
    free_bufs: Vec<AlignedBuf>,
    pending: VecDeque<(u64, Op)>,
    ready: VecDeque<Completion>,
    buf: Vec<u8>,
}

fn errno_to_io_error(errno: i32, what: &str) -> IoError {
    let e = std::io::Error::from_raw_os_error(errno);
    match errno {
        libc::EIO => IoError::Device(format!("{what}: {e}")),
        libc::EINVAL => IoError::Other(format!("{what}: {e} (misaligned O_DIRECT request?)")),
        _ => IoError::Other(format!("{what}: {e}")),
    }
}

fn io_error(e: &std::io::Error, what: &str) -> IoError {
    match e.raw_os_error() {
        Some(n) => errno_to_io_error(n, what),
        None => IoError::Other(format!("{what}: {e}")),
    }
}

/// The aligned range covering `offset..offset + len`: (aligned offset, head, aligned length).
fn aligned(offset: u64, len: u64) -> (u64, u64, u64) {
    let start = offset / DIRECT_ALIGN * DIRECT_ALIGN;
    let end = (offset + len).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
    (start, offset - start, end - start)
}

impl KernelFlow {
    /// The file table (a cheap shared handle, so files can be used while `self` is borrowed mutably).
    fn table(&self) -> Arc<Vec<KFile>> {
        self.files.clone()
    }

    fn take_buf(&mut self, len: u64) -> AlignedBuf {
        match self.free_bufs.iter().position(|b| b.len() as u64 >= len) {
            Some(i) => self.free_bufs.swap_remove(i),
            None => AlignedBuf::new(len as usize),
        }
    }

    /// Starts an O_DIRECT op through AIO; `false` if it must run synchronously instead.
    fn try_submit_direct(&mut self, tag: u64, fd: RawFd, write: bool, offset: u64, len: u64) -> bool {
        let Some(aio) = self.aio.as_ref() else { return false };
        if !aio.has_room() {
            return false;
        }
        let (start, head, alen) = aligned(offset, len);
        let mut buf = self.take_buf(alen);
        let idx = match self.slots.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        let ptr = buf.as_mut_ptr();
        let Some(aio) = self.aio.as_mut() else { return false };
        // SAFETY: the buffer is kept in `slots[idx]` until its completion is reaped in `reap`, and the file stays
        // open in `files` (shared, never closed while flows exist). `Aio::drop` waits for in-flight operations
        // before the slots are freed (it is declared before them in the struct, so it drops first).
        let r = unsafe { aio.submit(fd, write, ptr, alen, start, idx as u64) };
        match r {
            Ok(()) => {
                self.slots[idx] = Some(Slot { tag, buf, head, len });
                true
            }
            Err(e) => {
                self.free_bufs.push(buf);
                self.ready.push_back(Completion {
                    tag,
                    result: Err(io_error(&e, "io_submit")),
                });
                true
            }
        }
    }

    fn reap(&mut self, d: AioDone) -> Option<Completion> {
        let slot = self.slots.get_mut(d.data as usize)?.take()?;
        let result = if d.res < 0 {
            Err(errno_to_io_error((-d.res) as i32, "O_DIRECT I/O"))
        } else {
            Ok((d.res as u64).saturating_sub(slot.head).min(slot.len))
        };
        self.free_bufs.push(slot.buf);
        Some(Completion { tag: slot.tag, result })
    }

    /// An O_DIRECT read or write of `offset..offset + len` on `d`, run on this thread over the aligned range; the
    /// bytes of the requested range.
    fn direct_sync(&mut self, d: &File, write: bool, offset: u64, len: u64) -> Result<u64, IoError> {
        let (start, head, alen) = aligned(offset, len);
        let mut buf = self.take_buf(alen);
        let r = if write {
            d.write_all_at(&buf.as_slice()[..alen as usize], start).map(|()| len)
        } else {
            d.read_at(&mut buf.as_mut_slice()[..alen as usize], start)
                .map(|n| (n as u64).saturating_sub(head).min(len))
        };
        self.free_bufs.push(buf);
        r.map_err(|e| io_error(&e, if write { "pwrite (O_DIRECT)" } else { "pread (O_DIRECT)" }))
    }

    /// The scratch buffer, at least `len` bytes.
    fn scratch(&mut self, len: u64) -> &mut [u8] {
        if self.buf.len() < len as usize {
            self.buf.resize(len as usize, 0);
        }
        &mut self.buf[..len as usize]
    }

    /// A buffered read through the page cache; short at the end of the file.
    fn buffered_read(&mut self, f: &KFile, offset: u64, len: u64) -> Result<u64, IoError> {
        let buf = self.scratch(len);
        let mut done = 0u64;
        while done < len {
            match f.buffered.read_at(&mut buf[done as usize..], offset + done) {
                Ok(0) => break, // end of file: a short read
                Ok(n) => done += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(&e, "pread")),
            }
        }
        Ok(done)
    }

    /// A buffered write into the page cache.
    fn buffered_write(&mut self, f: &KFile, offset: u64, len: u64) -> Result<u64, IoError> {
        let buf = self.scratch(len);
        f.buffered
            .write_all_at(buf, offset)
            .map_err(|e| io_error(&e, "pwrite"))?;
        Ok(len)
    }

    /// Runs one operation synchronously on this thread.
    fn execute(&mut self, op: &Op) -> Result<u64, IoError> {
        let table = self.table();
        let file_of = |id: FileId| {
            table
                .get(id as usize)
                .ok_or_else(|| IoError::Other(format!("no file {id} in this scenario")))
        };
        match *op {
            Op::Read {
                file,
                offset,
                len,
                mode,
                ..
            }
            | Op::Write {
                file,
                offset,
                len,
                mode,
            } => {
                let write = matches!(op, Op::Write { .. });
                let f = file_of(file)?;
                match (mode, f.direct.as_ref()) {
                    (IoMode::Direct | IoMode::DirectAsync, Some(d)) => self.direct_sync(d, write, offset, len),
                    _ if write => self.buffered_write(f, offset, len),
                    _ => self.buffered_read(f, offset, len),
                }
            }
            Op::Fsync { file } => {
                file_of(file)?.buffered.sync_all().map_err(|e| io_error(&e, "fsync"))?;
                Ok(0)
            }
            Op::Sync => {
                sys::sync_all();
                Ok(0)
            }
            Op::Invalidate { file } => {
                self.invalidate(file);
                Ok(0)
            }
        }
    }
}

impl FlowIo for KernelFlow {
    fn submit(&mut self, tag: u64, op: &Op) {
        if let Op::Read {
            file,
            offset,
            len,
            mode: IoMode::Direct | IoMode::DirectAsync,
            ..
        }
        | Op::Write {
            file,
            offset,
            len,
            mode: IoMode::Direct | IoMode::DirectAsync,
        } = *op
        {
            let write = matches!(op, Op::Write { .. });
            let fd = self
                .files
                .get(file as usize)
                .and_then(|f| f.direct.as_ref())
                .map(AsRawFd::as_raw_fd);
            if let Some(fd) = fd {
                if self.try_submit_direct(tag, fd, write, offset, len) {
                    return;
                }
            }
        }
        self.pending.push_back((tag, op.clone()));
    }

    fn invalidate(&mut self, file: FileId) {
        if let Some(f) = self.files.get(file as usize) {
            let _ = sys::fadvise_dontneed(f.buffered.as_raw_fd());
        }
    }

    fn wait(&mut self, deadline: Instant) -> Option<Completion> {
        if let Some(c) = self.ready.pop_front() {
            return Some(c);
        }
        // Completed asynchronous operations first, without blocking.
        if let Some(d) = self.aio.as_mut().and_then(|a| a.wait(Instant::now())) {
            if let Some(c) = self.reap(d) {
                return Some(c);
            }
        }
        if let Some((tag, op)) = self.pending.pop_front() {
            let result = self.execute(&op);
            return Some(Completion { tag, result });
        }
        let d = self.aio.as_mut()?.wait(deadline)?;
        self.reap(d)
    }
}

/// Fails unless `dev` was made by `bfq loopdev` (or `allow_device` is set).
pub fn check_device(dev: &BlockDev, dir: &std::path::Path, allow_device: bool) -> Result<(), RealError> {
    if allow_device || loopdev::record_for_device(dev).is_some() {
        return Ok(());
    }
    Err(RealError::NotOurDevice {
        dir: dir.to_path_buf(),
        device: dev.dev_path(),
    })
}

/// Runs `exp` on the kernel target (`kernel:DIR`) through [`run_target`]: plain reads and writes, scheduled by
/// the device's kernel scheduler, switched to the kernel's name for `exp.scheduler` with `exp.tunables`.
pub fn run_kernel(exp: &Experiment) -> Result<RunResult, RealError> {
    run_target::<KernelBackend>(exp)
}

impl TargetBackend for KernelBackend {
    const NEEDS_ROOT: &'static str = "the kernel target (it switches I/O schedulers and drops caches)";
    fn open_for(_exp: &Experiment, files: &FileSet) -> Result<Self, RealError> {
        KernelBackend::open(files)
    }
    fn device_scheduler(exp: &Experiment) -> (&str, &[String]) {
        (
            kernel_scheduler(&exp.scheduler).unwrap_or(&exp.scheduler),
            &exp.tunables,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::real::files::prepare_files;
    use bfq_workload::{FileSpec, Placement};
    use std::time::Duration;

    #[test]
    fn alignment_covers_the_request() {
        assert_eq!(aligned(0, 4096), (0, 0, 4096));
        assert_eq!(aligned(512, 100), (0, 512, 4096));
        assert_eq!(aligned(4000, 200), (0, 4000, 8192));
        assert_eq!(aligned(8192, 65536), (8192, 0, 65536));
    }

    #[test]
    fn kernel_flow_reads_writes_and_reports_errors() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let specs = vec![FileSpec {
            name: "f".into(),
            size: 1 << 20,
            placement: Placement::Contiguous,
            prewritten: true,
        }];
        let set = prepare_files(tmp.path(), &specs).expect("prepares");
        let be = KernelBackend::open(&set).expect("opens");
        let mut fl = be.open_flow(&FlowSpec::named("t")).expect("flow");
        let rd = |tag: u64, offset: u64, len: u64, mode: IoMode| {
            (
                tag,
                Op::Read {
                    file: 0,
                    offset,
                    len,
                    mode,
                    meta: false,
                },
            )
        };
        let ops = vec![
            rd(1, 0, 4096, IoMode::Buffered),
            rd(2, 512, 1000, IoMode::Direct),
            rd(3, (1 << 20) - 100, 4096, IoMode::Direct), // runs past the end: short
            rd(4, 0, 10, IoMode::Buffered),
            (
                5,
                Op::Write {
                    file: 0,
                    offset: 4096,
                    len: 8192,
                    mode: IoMode::Direct,
                },
            ),
            (6, Op::Fsync { file: 0 }),
            (7, Op::Sync),
            (
                8,
                Op::Read {
                    file: 9,
                    offset: 0,
                    len: 1,
                    mode: IoMode::Buffered,
                    meta: false,
                },
            ),
        ];
        for (t, op) in &ops {
            fl.submit(*t, op);
        }
        fl.invalidate(0);
        let mut got = Vec::new();
        for _ in 0..ops.len() {
            let c = fl.wait(Instant::now() + Duration::from_secs(5)).expect("completes");
            got.push((c.tag, c.result.map_err(|_| ())));
        }
        got.sort();
        assert_eq!(
            got,
            vec![
                (1, Ok(4096)),
                (2, Ok(1000)),
                (3, Ok(100)),
                (4, Ok(10)),
                (5, Ok(8192)),
                (6, Ok(0)),
                (7, Ok(0)),
                (8, Err(()))
            ]
        );
        assert!(fl.wait(Instant::now()).is_none());
    }
}
