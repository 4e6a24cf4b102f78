//! The `engine:DIR` target: the suite's processes on real threads, their I/O scheduled by one of our own policies
//! in the io_uring engine ([`bfq_engine`]), on the loop device under DIR whose kernel scheduler is set to `none`
//! so that only our policy schedules.
//!
//! The engine does `O_DIRECT` I/O only, so the page cache that buffered I/O goes through on the kernel target is
//! stood in for by the smallest thing that keeps the workloads' request sizes and timing honest:
//! - **Buffered reads** go through a per-process, per-file readahead of [`READAHEAD_BYTES`] windows, as the
//!   kernel's on-demand readahead reaches in steady state: a miss reads the window holding it, and a read that
//!   reaches the last window read starts the next one asynchronously, so a sequential reader keeps one window in
//!   flight ahead of it (4 KiB `fio` reads become 128 KiB requests, as on the kernel target). Reads of data
//!   already read are served without I/O. Only the last [`KEPT_WINDOWS`] windows are kept.
//! - **Buffered writes** are written through at once (aligned, `O_DIRECT`): there is no writeback. `fsync` and
//!   `sync` flush through the engine.
//! - **Invalidate** (`posix_fadvise(DONTNEED)`) forgets the process's readahead data of that file.

use super::files::FileSet;
use super::runner::{Completion, FlowIo, IoBackend};
use super::{run_target, RealError, TargetBackend};
use crate::experiment::Experiment;
use crate::result::RunResult;
use bfq_engine::{AlignedBuf, Engine, EngineConfig, EngineError, FileRef, Flow, FlowOptions};
use bfq_workload::{FileId, FlowSpec, IoError, IoMode, Op};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

/// Readahead window, bytes: Linux's default `read_ahead_kb` (128 KiB), the size its on-demand readahead ramps up to.
pub const READAHEAD_BYTES: u64 = 128 * 1024;
/// Windows of readahead data kept per process and file: the one being consumed and the one ahead of it.
pub const KEPT_WINDOWS: u64 = 2;
/// I/O alignment of `O_DIRECT` buffers and offsets, bytes.
const ALIGN: u64 = 4096;

/// The engine backend: one engine (one policy) for the whole run, shared by every process thread.
pub struct EngineBackend {
    engine: Arc<Engine>,
    files: Arc<Vec<FileRef>>,
    sizes: Arc<Vec<u64>>,
}

impl EngineBackend {
    /// Starts an engine running policy `scheduler` with `tunables` for the device holding `files`, and opens every
    /// file for `O_DIRECT` I/O.
    pub fn open(files: &FileSet, scheduler: &str, tunables: &[String]) -> Result<EngineBackend, RealError> {
        let first = files
            .paths
            .first()
            .ok_or_else(|| RealError::Invalid("the scenario has no files for the engine to open".into()))?;
        let cfg = EngineConfig::for_path(first);
        let engine = Engine::start_named(scheduler, tunables, cfg)?;
        let mut refs = Vec::with_capacity(files.paths.len());
        for p in &files.paths {
            refs.push(engine.open(p, true)?);
        }
        Ok(EngineBackend {
            engine: Arc::new(engine),
            files: Arc::new(refs),
            sizes: Arc::new(files.sizes.clone()),
        })
    }
}

fn io_error(e: &EngineError) -> IoError {
    IoError::Device(e.to_string())
}

impl IoBackend for EngineBackend {
    type Flow = EngineFlow;

    fn open_flow(&self, spec: &FlowSpec) -> Result<EngineFlow, RealError> {
        let mut opts = FlowOptions::named(spec.name.clone())
            .class(spec.class, spec.prio)
            .group(spec.group);
        if let Some(w) = spec.weight {
            opts = opts.weight(w);
        }
        let flow = self.engine.flow(opts)?;
        Ok(EngineFlow {
            flow,
            files: Arc::clone(&self.files),
            sizes: Arc::clone(&self.sizes),
            ready: VecDeque::new(),
            inflight: HashMap::new(),
            next_tag: 0,
            ra: HashMap::new(),
            parked: Vec::new(),
        })
    }

    fn name(&self) -> &'static str {
        "engine"
    }
}

/// What an engine request of a flow is for.
enum Purpose {
    /// A process's direct read or write: complete `tag` with `len` bytes (the aligned request starts `head`
    /// bytes before the process's offset).
    Op { tag: u64, head: u64, len: u64 },
    /// A readahead window `[start, end)` of `file`.
    Window { file: FileId, start: u64, end: u64 },
}

/// Readahead state of one file of one process.
#[derive(Default)]
struct Readahead {
    /// Data read: `[lo, hi)`.
    cached: Option<(u64, u64)>,
    /// Windows in flight: `(start, end)`.
    inflight: Vec<(u64, u64)>,
}

/// A buffered read waiting for a window.
struct Parked {
    tag: u64,
    file: FileId,
    offset: u64,
    len: u64,
}

/// One process's handle on the engine.
pub struct EngineFlow {
    flow: Flow,
    files: Arc<Vec<FileRef>>,
    sizes: Arc<Vec<u64>>,
    ready: VecDeque<Completion>,
    inflight: HashMap<u64, Purpose>,
    next_tag: u64,
    ra: HashMap<FileId, Readahead>,
    parked: Vec<Parked>,
}

fn aligned(offset: u64, len: u64) -> (u64, u64, u64) {
    let start = offset / ALIGN * ALIGN;
    let end = (offset + len.max(1)).div_ceil(ALIGN) * ALIGN;
    (start, offset - start, end - start)
}

impl EngineFlow {
    fn file(&self, file: FileId) -> Result<FileRef, IoError> {
        self.files
            .get(file as usize)
            .copied()
            .ok_or_else(|| IoError::Other(format!("no file {file} in this scenario")))
    }

    fn done(&mut self, tag: u64, result: Result<u64, IoError>) {
        self.ready.push_back(Completion { tag, result });
    }

    /// Submits a read or a write (`write`, sync or async: `sync`) to the engine.
    fn submit_engine(
        &mut self,
        write: bool,
        sync: bool,
        file: FileRef,
        start: u64,
        alen: u64,
        purpose: Purpose,
    ) -> bool {
        let t = self.next_tag;
        self.next_tag += 1;
        let buf = AlignedBuf::new(alen as usize);
        let r = match (write, sync) {
            (true, true) => self.flow.submit_write(file, start, buf, t),
            (true, false) => self.flow.submit_write_async(file, start, buf, t),
            (false, _) => self.flow.submit_read(file, start, buf, t),
        };
        match r {
            Ok(()) => {
                self.inflight.insert(t, purpose);
                true
            }
            Err(e) => {
                if let Purpose::Op { tag, .. } = purpose {
                    self.done(tag, Err(io_error(&e)));
                }
                false
            }
        }
    }

    fn direct(&mut self, tag: u64, write: bool, sync: bool, file: FileId, offset: u64, len: u64) {
        let f = match self.file(file) {
            Ok(f) => f,
            Err(e) => return self.done(tag, Err(e)),
        };
        let size = self.sizes.get(file as usize).copied().unwrap_or(0);
        if offset.saturating_add(len) > size {
            return self.done(tag, Err(IoError::OutOfRange));
        }
        let (start, head, alen) = aligned(offset, len);
        self.submit_engine(write, sync, f, start, alen, Purpose::Op { tag, head, len });
    }

    /// Starts the readahead window holding byte `at` of `file` unless it is read or in flight.
    fn start_window(&mut self, file: FileId, at: u64) {
        let size = self.sizes.get(file as usize).copied().unwrap_or(0);
        let start = at / READAHEAD_BYTES * READAHEAD_BYTES;
        if start >= size {
            return;
        }
        let end = (start + READAHEAD_BYTES).min(size.div_ceil(ALIGN) * ALIGN);
        let ra = self.ra.entry(file).or_default();
        if ra.inflight.iter().any(|&(s, _)| s == start) || ra.cached.is_some_and(|(lo, hi)| lo <= start && end <= hi) {
            return;
        }
        ra.inflight.push((start, end));
        let Ok(f) = self.file(file) else { return };
        if !self.submit_engine(false, true, f, start, end - start, Purpose::Window { file, start, end }) {
            if let Some(ra) = self.ra.get_mut(&file) {
                ra.inflight.retain(|&(s, _)| s != start);
            }
        }
    }

    /// A buffered read: served from the readahead data, parked on a window in flight, or a miss that starts one.
    fn buffered_read(&mut self, tag: u64, file: FileId, offset: u64, len: u64) {
        let size = self.sizes.get(file as usize).copied().unwrap_or(0);
        if offset.saturating_add(len) > size {
            return self.done(tag, Err(IoError::OutOfRange));
        }
        if len == 0 {
            return self.done(tag, Ok(0));
        }
        let end = offset + len;
        let ra = self.ra.entry(file).or_default();
        let hit = ra.cached.is_some_and(|(lo, hi)| lo <= offset && end <= hi);
        if hit {
            self.done(tag, Ok(len));
        } else {
            self.parked.push(Parked { tag, file, offset, len });
            // Every window the read touches.
            let mut at = offset / READAHEAD_BYTES * READAHEAD_BYTES;
            while at < end {
                self.start_window(file, at);
                at += READAHEAD_BYTES;
            }
        }
        // Reaching the last window read starts the next one, so that a sequential reader finds it ready.
        let ra = self.ra.entry(file).or_default();
        let frontier = ra
            .inflight
            .iter()
            .map(|&(_, e)| e)
            .chain(ra.cached.map(|(_, hi)| hi))
            .max()
            .unwrap_or(0);
        if end + READAHEAD_BYTES >= frontier && ra.inflight.len() < KEPT_WINDOWS as usize {
            self.start_window(file, frontier);
        }
    }

    fn window_done(&mut self, file: FileId, start: u64, end: u64, ok: Result<(), IoError>) {
        let ra = self.ra.entry(file).or_default();
        ra.inflight.retain(|&(s, _)| s != start);
        if ok.is_ok() {
            ra.cached = Some(match ra.cached {
                Some((lo, hi)) if hi == start => (lo.max(end.saturating_sub(KEPT_WINDOWS * READAHEAD_BYTES)), end),
                Some((lo, hi)) if start <= hi && lo <= end => (lo.min(start), hi.max(end)),
                _ => (start, end),
            });
        }
        let cached = ra.cached;
        let busy: Vec<(u64, u64)> = ra.inflight.clone();
        let mut still = Vec::new();
        let mut restart = Vec::new();
        for p in std::mem::take(&mut self.parked) {
            let pend = p.offset + p.len;
            if p.file != file {
                still.push(p);
            } else if cached.is_some_and(|(lo, hi)| lo <= p.offset && pend <= hi) {
                self.ready.push_back(Completion {
                    tag: p.tag,
                    result: Ok(p.len),
                });
            } else if busy.iter().any(|&(s, e)| s < pend && p.offset < e) {
                still.push(p);
            } else if let Err(e) = &ok {
                self.ready.push_back(Completion {
                    tag: p.tag,
                    result: Err(e.clone()),
                });
            } else {
                // The data it waited for was dropped before it was consumed: read it again.
                restart.push((p.offset, pend));
                still.push(p);
            }
        }
        for (from, to) in restart {
            let mut at = from / READAHEAD_BYTES * READAHEAD_BYTES;
            while at < to {
                self.start_window(file, at);
                at += READAHEAD_BYTES;
            }
        }
        self.parked = still;
    }

    fn flush(&mut self, tag: u64, files: &[FileId]) {
        for &f in files {
            let r = self
                .file(f)
                .and_then(|fr| self.flow.fsync(fr).map_err(|e| io_error(&e)));
            if let Err(e) = r {
                return self.done(tag, Err(e));
            }
        }
        self.done(tag, Ok(0));
    }

    /// Handles one engine completion.
    fn engine_done(&mut self, c: bfq_engine::Completion) {
        let Some(purpose) = self.inflight.remove(&c.tag) else {
            return;
        };
        match purpose {
            Purpose::Op { tag, head, len } => {
                let r = match c.result {
                    Ok(n) => Ok((n as u64).saturating_sub(head).min(len)),
                    Err(EngineError::ShortRead { .. }) => Ok(0),
                    Err(e) => Err(io_error(&e)),
                };
                self.done(tag, r);
            }
            Purpose::Window { file, start, end } => {
                let ok = match c.result {
                    Ok(_) | Err(EngineError::ShortRead { .. }) => Ok(()),
                    Err(e) => Err(io_error(&e)),
                };
                self.window_done(file, start, end, ok);
            }
        }
    }
}

impl FlowIo for EngineFlow {
    fn submit(&mut self, tag: u64, op: &Op) {
        match *op {
            Op::Read {
                file,
                offset,
                len,
                mode: IoMode::Direct | IoMode::DirectAsync,
                ..
            } => self.direct(tag, false, true, file, offset, len),
            // Buffered writes are written through, sync; a replayed trace's async write stays async.
            Op::Write {
                file,
                offset,
                len,
                mode,
            } => self.direct(tag, true, mode != IoMode::DirectAsync, file, offset, len),
            Op::Read {
                file,
                offset,
                len,
                mode: IoMode::Buffered,
                ..
            } => self.buffered_read(tag, file, offset, len),
            Op::Fsync { file } => self.flush(tag, &[file]),
            Op::Sync => {
                let all: Vec<FileId> = (0..self.files.len() as FileId).collect();
                self.flush(tag, &all);
            }
            Op::Invalidate { file } => self.invalidate(file),
        }
    }

    fn invalidate(&mut self, file: FileId) {
        if let Some(ra) = self.ra.get_mut(&file) {
            ra.cached = None;
        }
    }

    fn wait(&mut self, deadline: Instant) -> Option<Completion> {
        loop {
            if let Some(c) = self.ready.pop_front() {
                return Some(c);
            }
            if self.flow.in_flight() == 0 {
                // Nothing can complete: let the caller see its deadline.
                let now = Instant::now();
                if deadline > now {
                    std::thread::sleep(deadline - now);
                }
                return None;
            }
            match self.flow.wait_until(deadline) {
                Ok(Some(c)) => self.engine_done(c),
                Ok(None) => return None,
                Err(_) => return None,
            }
        }
    }
}

/// Runs `exp` on the engine target (`engine:DIR`) through [`run_target`]: the engine runs our policy
/// `exp.scheduler` with `exp.tunables`, and the device's kernel scheduler is set to `none` so that only our policy
/// schedules.
pub fn run_engine(exp: &Experiment) -> Result<RunResult, RealError> {
    run_target::<EngineBackend>(exp)
}

impl TargetBackend for EngineBackend {
    const NEEDS_ROOT: &'static str =
        "the engine target (it switches the device's I/O scheduler to none and drops caches)";
    fn open_for(exp: &Experiment, files: &FileSet) -> Result<Self, RealError> {
        EngineBackend::open(files, &exp.scheduler, &exp.tunables)
    }
    fn device_scheduler(_exp: &Experiment) -> (&str, &[String]) {
        ("none", &[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_covers_the_request_and_an_empty_one_reads_a_block() {
        assert_eq!(aligned(0, 0), (0, 0, 4096));
        assert_eq!(aligned(4096, 0), (4096, 0, 4096));
        assert_eq!(aligned(4000, 200), (0, 4000, 8192));
    }
}
