//! Heap buffers aligned for `O_DIRECT`.

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

/// Alignment of every [`AlignedBuf`], in bytes: a page, which satisfies any logical block size up to 4 KiB.
pub const BUF_ALIGN: usize = 4096;
/// Lengths of [`AlignedBuf`]s are multiples of this many bytes (one sector).
pub const BUF_LEN_UNIT: usize = 512;

/// A zero-initialised heap buffer whose address is aligned to [`BUF_ALIGN`] (4096) bytes and whose length is a
/// multiple of [`BUF_LEN_UNIT`] (512) bytes, as `O_DIRECT` needs.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer owns its allocation exclusively, like a Vec<u8>, so moving it to another thread moves the only
// owner of the memory.
unsafe impl Send for AlignedBuf {}
// SAFETY: through a shared reference the buffer is only read (`as_slice`, `as_ptr`); writing needs `&mut self`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes, rounded up to a multiple of 512. `new(0)` allocates nothing.
    pub fn new(len: usize) -> AlignedBuf {
        let len = len.div_ceil(BUF_LEN_UNIT) * BUF_LEN_UNIT;
        if len == 0 {
            return AlignedBuf::empty();
        }
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size (len >= 512) and a power-of-two alignment; a null result is handled
        // below.
        let raw = unsafe { alloc_zeroed(layout) };
        match NonNull::new(raw) {
            Some(ptr) => AlignedBuf { ptr, len },
            None => handle_alloc_error(layout),
        }
    }

    /// A buffer of length 0 (no allocation).
    pub fn empty() -> AlignedBuf {
        // An aligned dangling pointer: never dereferenced for len 0.
        let ptr = NonNull::new(BUF_ALIGN as *mut u8).unwrap_or(NonNull::dangling());
        AlignedBuf { ptr, len: 0 }
    }

    fn layout(len: usize) -> Layout {
        match Layout::from_size_align(len, BUF_ALIGN) {
            Ok(l) => l,
            Err(_) => handle_alloc_error(Layout::new::<[u8; BUF_ALIGN]>()),
        }
    }

    /// Length in bytes (a multiple of 512).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The contents.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes, initialised (zeroed at allocation), owned by self and freed only on
        // drop; with len 0 it is a non-null, aligned dangling pointer, which from_raw_parts accepts.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The contents, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` guarantees no other reference to the bytes exists.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The start address (for alignment checks and the kernel).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The start address, for the kernel to write into (reads through io_uring or AIO). The caller keeps the buffer
    /// alive and unborrowed until the kernel is done with it.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: a non-zero len means ptr came from `alloc_zeroed` in `new` with `Self::layout(len)`, and len
            // never changes.
            unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
        }
    }
}

impl Default for AlignedBuf {
    fn default() -> Self {
        AlignedBuf::empty()
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> Self {
        let mut b = AlignedBuf::new(self.len);
        b.as_mut_slice().copy_from_slice(self.as_slice());
        b
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf").field("len", &self.len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_rounded_and_zeroed() {
        let mut b = AlignedBuf::new(1000);
        assert_eq!(b.len(), 1024);
        assert_eq!(b.as_ptr() as usize % BUF_ALIGN, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[3] = 7;
        let c = b.clone();
        assert_eq!(c.as_slice()[3], 7);
        assert!(AlignedBuf::new(0).is_empty());
    }

    #[test]
    fn every_length_is_aligned_zeroed_and_a_whole_number_of_sectors() {
        for len in [1, 511, 512, 513, 4095, 4096, 5000, 65_536, 1 << 20] {
            let mut b = AlignedBuf::new(len);
            assert_eq!(b.len(), len.div_ceil(BUF_LEN_UNIT) * BUF_LEN_UNIT, "len {len}");
            assert_eq!(b.len() % BUF_LEN_UNIT, 0);
            assert!(b.len() >= len && b.len() < len + BUF_LEN_UNIT);
            assert_eq!(b.as_ptr() as usize % BUF_ALIGN, 0, "len {len}");
            assert_eq!(b.as_mut_ptr() as usize % BUF_ALIGN, 0, "len {len}");
            assert!(b.as_slice().iter().all(|&x| x == 0), "len {len}");
            assert_eq!(b.as_slice().len(), b.len());
            let n = b.len();
            b.as_mut_slice()[n - 1] = 0xAB;
            assert_eq!(b.as_slice()[n - 1], 0xAB);
        }
    }

    #[test]
    fn empty_buffers_are_aligned_and_hold_nothing() {
        for b in [AlignedBuf::new(0), AlignedBuf::empty(), AlignedBuf::default()] {
            assert_eq!(b.len(), 0);
            assert!(b.as_slice().is_empty());
            assert_eq!(b.as_ptr() as usize % BUF_ALIGN, 0);
        }
    }

    #[test]
    fn clones_are_independent_copies() {
        let mut a = AlignedBuf::new(4096);
        a.as_mut_slice()[100] = 1;
        let mut b = a.clone();
        b.as_mut_slice()[100] = 2;
        assert_eq!(a.as_slice()[100], 1);
        assert_eq!(b.as_slice()[100], 2);
        assert_ne!(a.as_ptr(), b.as_ptr());
        assert_eq!(b.as_ptr() as usize % BUF_ALIGN, 0);
    }
}
