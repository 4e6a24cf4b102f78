//! Linux native asynchronous I/O (`io_setup`, `io_submit`, `io_getevents`), used by the kernel target for
//! O_DIRECT reads and writes: a process submits from its own thread, so the kernel's scheduler sees all of its
//! requests in one I/O context, as S's start-up replayer does with libaio.

use std::os::fd::RawFd;
use std::time::Instant;

/// `IOCB_CMD_PREAD`.
const IOCB_CMD_PREAD: u16 = 0;
/// `IOCB_CMD_PWRITE`.
const IOCB_CMD_PWRITE: u16 = 1;

/// The kernel's `struct iocb` (little-endian layout: `aio_key` before `aio_rw_flags`).
#[repr(C)]
#[derive(Default)]
struct Iocb {
    aio_data: u64,
    aio_key: u32,
    aio_rw_flags: i32,
    aio_lio_opcode: u16,
    aio_reqprio: i16,
    aio_fildes: u32,
    aio_buf: u64,
    aio_nbytes: u64,
    aio_offset: i64,
    aio_reserved2: u64,
    aio_flags: u32,
    aio_resfd: u32,
}

/// The kernel's `struct io_event`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

/// An AIO context with room for `depth` operations in flight.
pub struct Aio {
    ctx: libc::c_ulong,
    depth: usize,
    in_flight: usize,
}

// SAFETY: the context is a kernel handle usable from any thread; we use it from one at a time.
unsafe impl Send for Aio {}

/// A finished AIO operation: the `data` given at submission and the kernel's result (bytes, or `-errno`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AioDone {
    /// What the submitter attached.
    pub data: u64,
    /// Bytes transferred, or a negated errno.
    pub res: i64,
}

impl Aio {
    /// A context for `depth` operations in flight.
    pub fn new(depth: usize) -> std::io::Result<Aio> {
        let mut ctx: libc::c_ulong = 0;
        // SAFETY: io_setup writes the context handle into ctx.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_io_setup,
                depth as libc::c_long,
                &mut ctx as *mut libc::c_ulong,
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Aio {
            ctx,
            depth,
            in_flight: 0,
        })
    }

    /// Operations in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether another operation fits.
    pub fn has_room(&self) -> bool {
        self.in_flight < self.depth
    }

    /// Submits a read (`write == false`) or write of `len` bytes at `offset` of `fd` into/from `buf`.
    ///
    /// # Safety
    /// `buf` must stay valid (and, for a read, otherwise unused) for `len` bytes until the operation's completion
    /// has been returned by [`Aio::wait`], and `fd` must stay open until then.
    pub unsafe fn submit(
        &mut self,
        fd: RawFd,
        write: bool,
        buf: *mut u8,
        len: u64,
        offset: u64,
        data: u64,
    ) -> std::io::Result<()> {
        let mut cb = Iocb {
            aio_data: data,
            aio_lio_opcode: if write { IOCB_CMD_PWRITE } else { IOCB_CMD_PREAD },
            aio_fildes: fd as u32,
            aio_buf: buf as u64,
            aio_nbytes: len,
            aio_offset: offset as i64,
            ..Iocb::default()
        };
        let mut list = [&mut cb as *mut Iocb];
        // SAFETY: one valid iocb; the kernel copies it during the call.
        let rc = unsafe { libc::syscall(libc::SYS_io_submit, self.ctx, 1 as libc::c_long, list.as_mut_ptr()) };
        if rc == 1 {
            self.in_flight += 1;
            Ok(())
        } else if rc < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Err(std::io::Error::other("io_submit accepted no operation"))
        }
    }

    /// Waits for one completion until `deadline` (at once if it has passed); `None` if none came.
    pub fn wait(&mut self, deadline: Instant) -> Option<AioDone> {
        if self.in_flight == 0 {
            return None;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let mut ts = libc::timespec {
            tv_sec: left.as_secs() as libc::time_t,
            tv_nsec: left.subsec_nanos() as libc::c_long,
        };
        let mut ev = [IoEvent::default()];
        loop {
            // SAFETY: room for one event; ts is a valid relative timeout.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_io_getevents,
                    self.ctx,
                    1 as libc::c_long,
                    1 as libc::c_long,
                    ev.as_mut_ptr(),
                    &mut ts as *mut libc::timespec,
                )
            };
            if rc == 1 {
                self.in_flight -= 1;
                return Some(AioDone {
                    data: ev[0].data,
                    res: ev[0].res,
                });
            }
            if rc < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                let left = deadline.saturating_duration_since(Instant::now());
                ts.tv_sec = left.as_secs() as libc::time_t;
                ts.tv_nsec = left.subsec_nanos() as libc::c_long;
                continue;
            }
            return None;
        }
    }
}

impl Drop for Aio {
    fn drop(&mut self) {
        // Destroying the context waits for (or cancels) what is in flight before the buffers go away.
        // SAFETY: ctx came from io_setup.
        unsafe {
            libc::syscall(libc::SYS_io_destroy, self.ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::real::sys::AlignedBuf;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    use std::time::Duration;

    #[test]
    fn reads_asynchronously_with_o_direct() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("f");
        let mut f = std::fs::File::create(&path).expect("creates");
        f.write_all(&vec![7u8; 64 << 10]).expect("writes");
        f.sync_all().expect("syncs");
        // tmpfs has no O_DIRECT; fall back to a buffered descriptor there (AIO then completes synchronously).
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .or_else(|_| std::fs::File::open(&path))
            .expect("opens");
        let mut aio = Aio::new(4).expect("io_setup");
        let mut a = AlignedBuf::new(8192);
        let mut b = AlignedBuf::new(4096);
        // SAFETY: buffers and file outlive the waits below.
        unsafe {
            aio.submit(file.as_raw_fd(), false, a.as_mut_ptr(), 8192, 0, 11)
                .expect("submits");
            aio.submit(file.as_raw_fd(), false, b.as_mut_ptr(), 4096, 60 << 10, 22)
                .expect("submits");
        }
        let mut got = Vec::new();
        while let Some(d) = aio.wait(Instant::now() + Duration::from_secs(5)) {
            got.push((d.data, d.res));
        }
        got.sort();
        assert_eq!(got, vec![(11, 8192), (22, 4096)]);
        assert!(a.as_slice().iter().all(|&x| x == 7) && b.as_slice()[..4096].iter().all(|&x| x == 7));
        assert!(aio.wait(Instant::now()).is_none());
    }
}
