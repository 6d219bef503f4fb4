//! Shared host memory: the one kind of bytes the transport moves and the host device stores.
//!
//! A [`HostMem`] is a reference-counted, 8-byte-aligned block that several threads may read
//! and write *disjoint* ranges of at once. The scheduler upholds that rule: a range lent to a
//! peer is never written until the peer has released it, and a peer only reads ranges lent to
//! it. The storage is `[AtomicU64]` so the type is `Send + Sync` without an `unsafe impl`;
//! the bytes are accessed non-atomically through raw pointers, which the atomic types allow
//! when accesses do not race.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// A block of host memory that ranks in one process can share without copying.
#[derive(Clone)]
pub struct HostMem {
    words: Arc<[AtomicU64]>,
    len: usize,
}

impl HostMem {
    /// Allocates `len` zeroed bytes.
    pub fn zeroed(len: usize) -> Self {
        let words = len.div_ceil(8);
        let uninit = Arc::<[AtomicU64]>::new_zeroed_slice(words);
        // SAFETY: an all-zero bit pattern is a valid `AtomicU64` (it is a valid `u64`).
        let words = unsafe { uninit.assume_init() };
        HostMem { words, len }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the block holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether two handles name the same block.
    pub fn same(&self, other: &HostMem) -> bool {
        Arc::ptr_eq(&self.words, &other.words)
    }

    /// Base pointer; 8-byte aligned.
    pub(crate) fn base(&self) -> *mut u8 {
        // `as_ptr` of the first atomic is the start of the block; for an empty block the
        // pointer is dangling but never dereferenced (every range has length 0).
        match self.words.first() {
            Some(w) => w.as_ptr().cast::<u8>(),
            None => std::ptr::NonNull::<u64>::dangling().as_ptr().cast::<u8>(),
        }
    }

    /// Checks that `off..off + len` lies inside the block.
    pub(crate) fn check(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// A shared view of `off..off + len`.
    ///
    /// # Safety
    /// Nobody may write the range while the returned slice lives.
    pub(crate) unsafe fn bytes(&self, off: usize, len: usize) -> &[u8] {
        debug_assert!(self.check(off, len), "range {off}+{len} outside {} bytes", self.len);
        // SAFETY: in bounds (checked by every caller through `check`), and the caller
        // guarantees no concurrent writer.
        unsafe { std::slice::from_raw_parts(self.base().add(off), len) }
    }

    /// An exclusive view of `off..off + len`.
    ///
    /// # Safety
    /// Nobody else may read or write the range while the returned slice lives.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn bytes_mut(&self, off: usize, len: usize) -> &mut [u8] {
        debug_assert!(self.check(off, len), "range {off}+{len} outside {} bytes", self.len);
        // SAFETY: in bounds, and the caller guarantees exclusive access to the range.
        unsafe { std::slice::from_raw_parts_mut(self.base().add(off), len) }
    }
}

impl fmt::Debug for HostMem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostMem({} bytes @ {:p})", self.len, self.base())
    }
}

/// A range of a [`HostMem`]: what a send lends to a peer.
#[derive(Clone, Debug)]
pub struct HostRegion {
    /// The block.
    pub mem: HostMem,
    /// Offset in bytes.
    pub off: usize,
    /// Length in bytes.
    pub len: usize,
}

impl HostRegion {
    /// Whether two regions share at least one byte.
    pub fn overlaps(&self, other: &HostRegion) -> bool {
        self.mem.same(&other.mem) && self.off < other.off + other.len && other.off < self.off + self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_aligned_and_overlap() {
        let m = HostMem::zeroed(13);
        assert_eq!(m.len(), 13);
        assert_eq!(m.base() as usize % 8, 0);
        // SAFETY: single-threaded test.
        unsafe {
            assert!(m.bytes(0, 13).iter().all(|&b| b == 0));
            m.bytes_mut(3, 2).copy_from_slice(&[7, 8]);
            assert_eq!(m.bytes(2, 4), &[0, 7, 8, 0]);
        }
        let a = HostRegion { mem: m.clone(), off: 0, len: 4 };
        let b = HostRegion { mem: m.clone(), off: 4, len: 4 };
        let c = HostRegion { mem: m, off: 3, len: 2 };
        assert!(!a.overlaps(&b));
        assert!(a.overlaps(&c) && b.overlaps(&c));
        assert!(!a.overlaps(&HostRegion { mem: HostMem::zeroed(8), off: 0, len: 4 }));
        assert!(HostMem::zeroed(0).is_empty());
    }
}
