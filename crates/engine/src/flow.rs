//! The client side of a flow: blocking and asynchronous reads and writes.

use crate::buf::AlignedBuf;
use crate::error::EngineError;
use crate::shared::{lock, Cmd, Completion, FlowShared, Follower, IoCmd, Shared};
use crate::FileRef;
use bfq_sched::{Direction, FlowId};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Largest single request, in bytes (what one Linux read or write transfers at most, rounded down to 1 MiB).
pub const MAX_REQUEST_BYTES: usize = 2047 * 1024 * 1024;

/// A client's I/O context, the kernel's per-process `io_context`: the policy schedules per flow. `Send` but not
/// `Sync`: one thread uses it at a time. Dropping it tells the policy the flow exited; asynchronous requests still
/// outstanding then complete and their buffers are freed.
pub struct Flow {
    id: FlowId,
    name: String,
    engine: Arc<Shared>,
    me: Arc<FlowShared>,
    /// Asynchronous requests submitted and not yet returned by `wait`.
    outstanding: Cell<usize>,
    /// Completions taken from the shared queue in one go and not yet returned.
    ready: RefCell<VecDeque<Completion>>,
}

impl Flow {
    pub(crate) fn new(id: FlowId, name: String, engine: Arc<Shared>, me: Arc<FlowShared>) -> Flow {
        Flow {
            id,
            name,
            engine,
            me,
            outstanding: Cell::new(0),
            ready: RefCell::new(VecDeque::new()),
        }
    }

    /// The id the policy knows this flow by.
    pub fn id(&self) -> FlowId {
        self.id
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Asynchronous requests submitted and not yet returned by [`Flow::wait`].
    pub fn in_flight(&self) -> usize {
        self.outstanding.get()
    }

    fn check(&self, file: FileRef, offset: u64, len: usize, addr: usize, dir: Direction) -> Result<u32, EngineError> {
        if file.engine != self.engine.engine_id {
            return Err(EngineError::ForeignFile);
        }
        if dir == Direction::Write && !file.writable {
            return Err(EngineError::ReadOnly);
        }
        if len == 0 || len > MAX_REQUEST_BYTES {
            return Err(EngineError::BadLength {
                len,
                max: MAX_REQUEST_BYTES,
            });
        }
        let align = file.logical_block_size;
        let a = u64::from(align);
        if !offset.is_multiple_of(a) {
            return Err(EngineError::Misaligned {
                what: "offset",
                value: offset,
                align,
            });
        }
        if !(len as u64).is_multiple_of(a) {
            return Err(EngineError::Misaligned {
                what: "length",
                value: len as u64,
                align,
            });
        }
        if !(addr as u64).is_multiple_of(a) {
            return Err(EngineError::Misaligned {
                what: "buffer address",
                value: addr as u64,
                align,
            });
        }
        Ok(len as u32)
    }

    fn blocking(&self, cmd: IoCmd) -> Result<usize, EngineError> {
        self.engine.send(Cmd::Io(cmd))?;
        self.wait_sync()
    }

    /// Waits for the result of the one blocking request in flight. The reactor always delivers one: a request
    /// accepted before shutdown completes, and a failing reactor fails what it holds.
    fn wait_sync(&self) -> Result<usize, EngineError> {
        // With `lead`: run the engine until the result is in, if nobody else runs it; else wait below as a
        // follower (registered until this returns).
        let mut _follower = None;
        if self.engine.lead {
            let until = || lock(&self.me.state).sync.is_some();
            loop {
                if let Some(r) = lock(&self.me.state).sync.take() {
                    return r;
                }
                match crate::reactor::lead_or_follow(&self.engine, &until) {
                    None => continue,
                    Some(f) => {
                        _follower = Some(f);
                        break;
                    }
                }
            }
        }
        let seen = self.me.delivered.load(Ordering::Acquire);
        let mut st = lock(&self.me.state);
        if st.sync.is_none() {
            drop(st);
            self.me.spin_for_delivery(seen);
            st = lock(&self.me.state);
        }
        loop {
            if let Some(r) = st.sync.take() {
                return r;
            }
            st.waiting = true;
            st = self.me.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Reads `buf.len()` bytes at byte `offset` of `file` into `buf`, blocking until done. Returns the bytes read
    /// (always `buf.len()`); fewer bytes (the end of the file) is [`EngineError::ShortRead`], with what was read
    /// at the start of `buf`.
    pub fn read(&self, file: FileRef, offset: u64, buf: &mut AlignedBuf) -> Result<usize, EngineError> {
        let len = self.check(file, offset, buf.len(), buf.as_ptr() as usize, Direction::Read)?;
        self.blocking(IoCmd {
            flow: self.id,
            dir: Direction::Read,
            file: file.index,
            offset,
            len,
            ptr: buf.as_mut_ptr(),
            buf: None,
            tag: 0,
            sync: true,
        })
    }

    /// Writes `buf` at byte `offset` of `file`, blocking until done (`O_DIRECT`: the data has reached the device,
    /// not necessarily its stable storage; see [`Flow::fsync`]). Returns the bytes written.
    pub fn write(&self, file: FileRef, offset: u64, buf: &AlignedBuf) -> Result<usize, EngineError> {
        let len = self.check(file, offset, buf.len(), buf.as_ptr() as usize, Direction::Write)?;
        self.blocking(IoCmd {
            flow: self.id,
            dir: Direction::Write,
            file: file.index,
            offset,
            len,
            // The kernel only reads through this pointer for a write.
            ptr: buf.as_ptr() as *mut u8,
            buf: None,
            tag: 0,
            sync: true,
        })
    }

    /// Flushes `file` to stable storage, blocking until done. Not scheduled by the policy.
    pub fn fsync(&self, file: FileRef) -> Result<(), EngineError> {
        if file.engine != self.engine.engine_id {
            return Err(EngineError::ForeignFile);
        }
        self.engine.send(Cmd::Fsync {
            flow: self.id,
            file: file.index,
        })?;
        self.wait_sync().map(|_| ())
    }

    fn submit(
        &self,
        dir: Direction,
        file: FileRef,
        offset: u64,
        mut buf: AlignedBuf,
        tag: u64,
        sync: bool,
    ) -> Result<(), EngineError> {
        let len = self.check(file, offset, buf.len(), buf.as_ptr() as usize, dir)?;
        let ptr = buf.as_mut_ptr();
        let cmd = Cmd::Io(IoCmd {
            flow: self.id,
            dir,
            file: file.index,
            offset,
            len,
            ptr,
            buf: Some(buf),
            tag,
            sync,
        });
        if self.engine.lead && self.outstanding.get() > 0 {
            self.engine.send_deferred(cmd)?;
        } else {
            self.engine.send(cmd)?;
        }
        self.outstanding.set(self.outstanding.get() + 1);
        Ok(())
    }

    /// Starts reading `buf.len()` bytes at `offset` of `file` into `buf` without waiting; [`Flow::wait`] returns
    /// the buffer with `tag`. On an error here nothing was submitted (and the buffer is dropped).
    pub fn submit_read(&self, file: FileRef, offset: u64, buf: AlignedBuf, tag: u64) -> Result<(), EngineError> {
        self.submit(Direction::Read, file, offset, buf, tag, true)
    }

    /// Starts writing `buf` at `offset` of `file` without waiting; [`Flow::wait`] returns the buffer with `tag`.
    pub fn submit_write(&self, file: FileRef, offset: u64, buf: AlignedBuf, tag: u64) -> Result<(), EngineError> {
        self.submit(Direction::Write, file, offset, buf, tag, true)
    }

    /// Like [`Flow::submit_write`], but the block request is async (not `REQ_SYNC`), as background writeback is:
    /// the policy queues it as an async request (BFQ and CFQ in their shared async queues, the depth limits of
    /// async I/O apply) and it draws from the async tag pool. Used to replay a block trace's async writes.
    pub fn submit_write_async(&self, file: FileRef, offset: u64, buf: AlignedBuf, tag: u64) -> Result<(), EngineError> {
        self.submit(Direction::Write, file, offset, buf, tag, false)
    }

    /// Waits for the next asynchronous request of this flow to complete, in completion order. Fails with
    /// [`EngineError::NothingInFlight`] when none is outstanding (instead of blocking forever).
    pub fn wait(&self) -> Result<Completion, EngineError> {
        if self.outstanding.get() == 0 {
            return Err(EngineError::NothingInFlight);
        }
        let mut ready = self.ready.borrow_mut();
        // With `lead`: run the engine until a result is in, if nobody else runs it; else wait below as a
        // follower (registered until this returns).
        let mut _follower = None;
        if ready.is_empty() && self.engine.lead {
            let until = || !lock(&self.me.state).done.is_empty();
            loop {
                {
                    let mut st = lock(&self.me.state);
                    if !st.done.is_empty() {
                        std::mem::swap(&mut *ready, &mut st.done);
                        break;
                    }
                }
                match crate::reactor::lead_or_follow(&self.engine, &until) {
                    None => continue,
                    Some(f) => {
                        _follower = Some(f);
                        break;
                    }
                }
            }
        }
        if ready.is_empty() {
            let seen = self.me.delivered.load(Ordering::Acquire);
            let mut st = lock(&self.me.state);
            if st.done.is_empty() {
                drop(st);
                self.me.spin_for_delivery(seen);
                st = lock(&self.me.state);
            }
            while st.done.is_empty() {
                st.waiting = true;
                st = self.me.cv.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            std::mem::swap(&mut *ready, &mut st.done);
        }
        let c = ready.pop_front().ok_or(EngineError::NothingInFlight)?;
        self.outstanding.set(self.outstanding.get() - 1);
        Ok(c)
    }

    /// Like [`Flow::wait`], but gives up at `deadline`: `Ok(None)` if no request completed by then.
    pub fn wait_until(&self, deadline: std::time::Instant) -> Result<Option<Completion>, EngineError> {
        if self.outstanding.get() == 0 {
            return Err(EngineError::NothingInFlight);
        }
        let mut ready = self.ready.borrow_mut();
        if ready.is_empty() {
            // With `lead`, a follower: the reactor thread serves the engine while this waits (it does not lead).
            let _follower = self.engine.lead.then(|| Follower::new(&self.engine));
            let mut st = lock(&self.me.state);
            while st.done.is_empty() {
                let now = std::time::Instant::now();
                if now >= deadline {
                    return Ok(None);
                }
                st.waiting = true;
                st = self
                    .me
                    .cv
                    .wait_timeout(st, deadline - now)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
            std::mem::swap(&mut *ready, &mut st.done);
        }
        let c = ready.pop_front().ok_or(EngineError::NothingInFlight)?;
        self.outstanding.set(self.outstanding.get() - 1);
        Ok(Some(c))
    }

    /// Returns a completed asynchronous request if one is ready, without blocking.
    pub fn try_wait(&self) -> Option<Completion> {
        if self.outstanding.get() == 0 {
            return None;
        }
        let mut ready = self.ready.borrow_mut();
        if ready.is_empty() {
            // With `lead`, a client that polls and finds nothing runs one pass of the loop if it is free (reaping
            // what completed), so that polling makes progress without the reactor thread.
            if self.engine.lead && lock(&self.me.state).done.is_empty() {
                crate::reactor::serve_inline(&self.engine);
            }
            let mut st = lock(&self.me.state);
            std::mem::swap(&mut *ready, &mut st.done);
        }
        let c = ready.pop_front()?;
        self.outstanding.set(self.outstanding.get() - 1);
        Some(c)
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        // Fails harmlessly after shutdown.
        let _ = self.engine.send(Cmd::FlowExit(self.id));
    }
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flow")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish()
    }
}
