//! The heap allocation behind a [`HostMem`](super::HostMem) block: words that start on a
//! cache line, zeroed lazily by the system's `calloc`, and the huge-page advice for large
//! ones.

use std::alloc::Layout;
use std::sync::atomic::AtomicU64;

/// The alignment of every block [`HeapWords`] allocates: a cache line. Two blocks then share
/// their alignment, so a copy between equal offsets of two of them (a local copy, a peer's
/// single-copy read, a reduction) runs with source and destination mutually aligned: the
/// kernel's and `memcpy`'s `rep movsb` are ~10% slower when they are not (measured, 2
/// processes, a 128 KiB `process_vm_readv` plus a 128 KiB `memcpy` per call: 9.1-9.5 us
/// mutually aligned, 10.0-10.9 us at offsets 32 and 16 or 0 and 8 modulo 64). With only the
/// allocator's 16 bytes, a 256 KiB all_gather between 2 processes lost to OpenMPI, whose
/// buffers are page + 16 on both sides.
pub(super) const HEAP_ALIGN: usize = 64;

/// Words allocated by this process, zeroed, starting [`HEAP_ALIGN`]-aligned.
///
/// The allocation itself asks for 8-byte alignment and [`PAD_WORDS`] more words, and the
/// words start at its first aligned word: asked for 64-byte alignment, the system allocator
/// zeroes with `memset` after an aligned allocation, where `calloc` hands out fresh pages a
/// large block never has to touch (a 256 MiB tensor would cost ~25 ms and all its memory at
/// once, and its huge-page advice would come after its pages).
pub(super) struct HeapWords {
    /// The allocation (what is freed).
    base: std::ptr::NonNull<AtomicU64>,
    /// The first of the block's words, at most [`PAD_WORDS`] past `base`.
    start: std::ptr::NonNull<AtomicU64>,
    words: usize,
}

/// The words allocated beyond a block's own, to start it aligned.
const PAD_WORDS: usize = HEAP_ALIGN / 8 - 1;

// SAFETY: `HeapWords` owns its allocation as a `Box<[AtomicU64]>` would (nothing else frees
// or aliases it), and `AtomicU64` is `Send + Sync`.
unsafe impl Send for HeapWords {}
// SAFETY: as above: shared references hand out only `&[AtomicU64]`.
unsafe impl Sync for HeapWords {}

impl HeapWords {
    /// The layout of the allocation behind `words` words.
    fn layout(words: usize) -> Option<Layout> {
        Layout::array::<AtomicU64>(words.checked_add(PAD_WORDS)?).ok()
    }

    /// `words` zeroed words (at least one), or `None` when the memory cannot be had (never
    /// aborts).
    pub(super) fn zeroed(words: usize) -> Option<HeapWords> {
        if words == 0 {
            return None;
        }
        let layout = Self::layout(words)?;
        // SAFETY: `layout` has a non-zero size.
        let base = std::ptr::NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }.cast::<AtomicU64>())?;
        let skip = (HEAP_ALIGN - base.as_ptr() as usize % HEAP_ALIGN) % HEAP_ALIGN / 8;
        // SAFETY: `skip <= PAD_WORDS`, so `start..start + words` lies inside the allocation.
        let start = unsafe { base.add(skip) };
        #[cfg(all(target_os = "linux", not(miri)))]
        advise_huge_pages(start.as_ptr().cast::<u8>(), words * 8);
        Some(HeapWords { base, start, words })
    }

    pub(super) fn as_slice(&self) -> &[AtomicU64] {
        // SAFETY: `start` points to `words` zeroed (so valid) `AtomicU64`s inside the
        // allocation this value owns until it drops; the slice borrows `self`.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.words) }
    }
}

impl Drop for HeapWords {
    fn drop(&mut self) {
        if let Some(layout) = Self::layout(self.words) {
            // SAFETY: `base` was allocated in `zeroed` by the global allocator with this same
            // layout (computed from the same `words`), and is freed only here.
            unsafe { std::alloc::dealloc(self.base.as_ptr().cast::<u8>(), layout) };
        }
    }
}

/// Blocks at least this large ask for transparent huge pages.
#[cfg(all(target_os = "linux", not(miri)))]
const HUGE_MIN_BYTES: usize = 4 << 20;

/// Asks Linux to back the 2 MiB-aligned interior of a fresh block of `bytes` at `ptr` with
/// transparent huge pages (where THP is `madvise`, the usual default, nothing else does).
/// A large collective streams several buffers of hundreds of MiB at once: with 4 KiB pages
/// every 4 KiB of every stream is a TLB miss, and in a virtual machine each miss walks two
/// page tables; 2 MiB pages also make the first touch of a buffer 512 times fewer page
/// faults. A refusal (THP off, no `madvise` support) changes nothing but speed.
#[cfg(all(target_os = "linux", not(miri)))]
fn advise_huge_pages(ptr: *mut u8, bytes: usize) {
    const HUGE: usize = 2 << 20;
    if bytes < HUGE_MIN_BYTES {
        return;
    }
    let start = ptr as usize;
    let (lo, hi) = (start.next_multiple_of(HUGE), (start + bytes) / HUGE * HUGE);
    if hi > lo {
        // SAFETY: `lo..hi` lies inside the allocation this block now owns (and no one else
        // yet sees); MADV_HUGEPAGE changes how the kernel backs those pages, never their
        // contents, so the zeroes `alloc_zeroed` promised stay.
        unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
    }
}
