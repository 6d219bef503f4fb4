//! Shared host memory: the one kind of bytes the transport moves and the host device stores.
//!
//! A [`HostMem`] is a reference-counted, 8-byte-aligned block (64-byte-aligned when it is
//! allocated here and larger than a few words) that several threads may read
//! and write at once, *disjoint* ranges only. That rule is not left to the callers: every
//! access goes through a guard ([`HostMem::read`], [`HostMem::write`]) that registers its
//! range with the block, and a range that would overlap a live write (or a write that would
//! overlap a live read) is refused with a `Device` error instead of racing. Clones of one
//! block on two threads, a tensor used as input and output of one call, a peer reading a lent
//! range while its owner writes: each either runs on disjoint bytes or fails cleanly.
//!
//! The scheduler never relies on a refusal for correctness (it waits for lent ranges before
//! writing them); the check is what makes the safe API sound whatever a caller builds.
//!
//! The storage is `[AtomicU64]` so the type is `Send + Sync` without an `unsafe impl`; the
//! bytes are accessed non-atomically through raw pointers, which the atomic types allow when
//! accesses do not race — and the guards make sure they do not.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex};

use smallvec::SmallVec;

use crate::error::{CollectiveError, Result};

/// One registered access: a byte range and whether it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Borrow {
    off: usize,
    len: usize,
    write: bool,
}

impl Borrow {
    fn conflicts(&self, other: &Borrow) -> bool {
        (self.write || other.write) && self.off < other.off + other.len && other.off < self.off + self.len
    }

    /// The borrow as a [`Block::solo`] word (bit 0 set, bit 1 the write flag, 31 bits of
    /// offset, 31 bits of length), or `None` when its range does not fit.
    fn encode(&self) -> Option<u64> {
        let (off, len) = (u64::try_from(self.off).ok()?, u64::try_from(self.len).ok()?);
        (off < SOLO_LIMIT && len < SOLO_LIMIT).then_some(1 | (u64::from(self.write) << 1) | (off << 2) | (len << 33))
    }

    /// The borrow a [`Block::solo`] word other than [`EMPTY`] and [`LISTED`] holds.
    fn decode(word: u64) -> Borrow {
        // Both fields are below 2^31, so they fit a usize on every target `AtomicU64` has.
        let field = |shift: u32| ((word >> shift) & (SOLO_LIMIT - 1)) as usize;
        Borrow { off: field(2), len: field(33), write: word & 2 != 0 }
    }
}

/// Offsets and lengths a [`Block::solo`] word can hold are below this.
const SOLO_LIMIT: u64 = 1 << 31;
/// [`Block::solo`]: no live guard on the block.
const EMPTY: u64 = 0;
/// [`Block::solo`]: the live guards are in [`Block::borrows`].
const LISTED: u64 = 2;

/// Where a block's words live.
#[cfg_attr(not(all(target_os = "linux", not(miri))), allow(dead_code))]
enum Words {
    /// Up to [`INLINE_WORDS`] words, inside the block itself: a small tensor (a few scalars,
    /// what the peer API returns for a small op) costs one allocation, not two.
    Inline([AtomicU64; INLINE_WORDS]),
    /// Allocated by this process (the usual case), cache-line aligned.
    Heap(HeapWords),
    /// Memory someone else owns (a shared-memory segment mapped by two processes), kept alive
    /// by `_keep`; the `'static` is this block's promise, kept because `_keep` lives as long.
    Mapped(&'static [AtomicU64], #[allow(dead_code)] Arc<dyn Any + Send + Sync>),
}

impl Words {
    fn as_slice(&self) -> &[AtomicU64] {
        match self {
            Words::Inline(w) => w,
            Words::Heap(w) => w.as_slice(),
            Words::Mapped(w, _) => w,
        }
    }
}

/// A block's bytes and its live guards.
///
/// Most blocks have at most one guard at a time (one op reading or writing a tensor), so
/// that case takes no lock: `solo` holds the one live guard's borrow, encoded
/// ([`Borrow::encode`]), set and cleared with one compare-and-swap each. A second live guard
/// (or one whose range does not encode) moves every borrow into `borrows`, under its lock,
/// and `solo` reads [`LISTED`] until the list empties again. So the live guards are always
/// exactly one of: none (`solo` is [`EMPTY`], the list empty), the one in `solo` (the list
/// empty), or those in the list (`solo` is [`LISTED`]). `solo` leaves [`LISTED`] only under
/// the lock, and the list changes only under it.
struct Block {
    words: Words,
    len: usize,
    /// The one live guard's borrow, [`EMPTY`], or [`LISTED`].
    solo: AtomicU64,
    /// Live guards while `solo` is [`LISTED`]. Short: one entry per access in progress on
    /// this block (inline, so the list allocates nothing for up to four).
    borrows: Mutex<SmallVec<[Borrow; 4]>>,
}

impl Block {
    fn new(words: Words, len: usize) -> Self {
        Block { words, len, solo: AtomicU64::new(EMPTY), borrows: Mutex::new(SmallVec::new()) }
    }
}

/// Words a block holds inline (see [`Words::Inline`]).
const INLINE_WORDS: usize = 8;

#[path = "mem_heap.rs"]
mod heap;
#[cfg(test)]
use heap::HEAP_ALIGN;
use heap::HeapWords;

/// A block of host memory that ranks in one process can share without copying.
///
/// ```
/// use ruccl::mem::HostMem;
/// let m = HostMem::zeroed(8)?;
/// m.write(0, 4)?.copy_from_slice(&[1, 2, 3, 4]);
/// let r = m.read(2, 4)?;
/// assert_eq!(&*r, &[3, 4, 0, 0]);
/// assert!(m.write(3, 1).is_err()); // overlaps the live read
/// assert!(m.write(6, 2).is_ok()); // disjoint ranges are fine
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
#[derive(Clone)]
pub struct HostMem {
    block: Arc<Block>,
}

impl HostMem {
    /// Allocates `len` zeroed bytes.
    ///
    /// # Errors
    /// `Device` when the memory cannot be had (the process is never aborted).
    pub fn zeroed(len: usize) -> Result<Self> {
        let words = match len.div_ceil(8) {
            n if n <= INLINE_WORDS => Words::Inline(std::array::from_fn(|_| AtomicU64::new(0))),
            n => Words::Heap(HeapWords::zeroed(n).ok_or_else(|| {
                CollectiveError::device(format!("cannot allocate {len} bytes of host memory")).with_hint(
                    "the machine (or this process's memory limit) has not that much memory free: use smaller \
                         tensors, or free memory first",
                )
            })?),
        };
        Ok(HostMem { block: Arc::new(Block::new(words, len)) })
    }

    /// A block over memory this process did not allocate (a mapped shared-memory segment's
    /// ring), kept alive by `keep`.
    ///
    /// # Safety
    /// `words` must stay valid while `keep` lives, and every access to them that does not go
    /// through this block (the other process of a shared segment) must touch only bytes no
    /// guard of this block covers — the shared-memory ring's protocol guarantees it (a writer
    /// fills only space the reader has freed).
    #[cfg(all(target_os = "linux", not(miri)))]
    pub(crate) unsafe fn mapped(words: &'static [AtomicU64], keep: Arc<dyn Any + Send + Sync>) -> Self {
        let len = words.len() * 8;
        HostMem { block: Arc::new(Block::new(Words::Mapped(words, keep), len)) }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.block.len
    }

    /// Whether the block holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.block.len == 0
    }

    /// Whether this is the only handle on the block (nobody else can read or write it).
    pub(crate) fn is_unique(&self) -> bool {
        Arc::strong_count(&self.block) == 1
    }

    /// Whether nothing but this handle can reach the bytes: no other handle on the block, and
    /// memory this process allocated (not a segment another process maps).
    pub(crate) fn is_private(&self) -> bool {
        self.is_unique() && !matches!(self.block.words, Words::Mapped(..))
    }

    /// Whether two handles name the same block.
    pub fn same(&self, other: &HostMem) -> bool {
        Arc::ptr_eq(&self.block, &other.block)
    }

    /// A number naming the block: equal for every handle on it, distinct between blocks that
    /// are alive at the same time.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.block) as usize
    }

    /// Checks that `off..off + len` lies inside the block.
    pub fn check(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|end| end <= self.block.len)
    }

    /// Base pointer, 8-byte aligned, with provenance over the whole block.
    fn base(&self) -> *mut u8 {
        // Derived from the whole slice (not its first element), so offsets anywhere in the
        // block stay inside the pointer's provenance. Writing through it is allowed because
        // the words are atomics (interior mutability).
        self.block.words.as_slice().as_ptr().cast::<u8>().cast_mut()
    }

    /// Registers `b` (in bounds or not): inline, the usual case — no live guard, and `b` fits
    /// the solo word — and out of line, everything else ([`acquire_slow`](Self::acquire_slow)).
    #[inline]
    fn acquire(&self, off: usize, len: usize, write: bool) -> Result<Borrow> {
        let b = Borrow { off, len, write };
        // Acquire: the accesses of the guard released before (its Release in `unregister`)
        // happen before ours.
        if len != 0
            && self.check(off, len)
            && let Some(code) = b.encode()
            && self.block.solo.compare_exchange(EMPTY, code, Ordering::Acquire, Ordering::Relaxed).is_ok()
        {
            return Ok(b);
        }
        self.acquire_slow(b)
    }

    #[cold]
    #[inline(never)]
    fn acquire_slow(&self, b: Borrow) -> Result<Borrow> {
        let Borrow { off, len, .. } = b;
        if !self.check(off, len) {
            return Err(CollectiveError::device(format!(
                "range {off}..{} is outside a {}-byte host buffer",
                off.saturating_add(len),
                self.block.len
            )));
        }
        if len == 0 {
            return Ok(b);
        }
        let solo = &self.block.solo;
        let code = b.encode();
        let mut live = self.block.borrows.lock().unwrap_or_else(|e| e.into_inner());
        let mut seen = solo.load(Ordering::Acquire);
        loop {
            match seen {
                // The list is ours (under the lock).
                LISTED => break,
                EMPTY => {
                    let (next, listed) = match code {
                        Some(code) => (code, false),
                        None => (LISTED, true),
                    };
                    match solo.compare_exchange(EMPTY, next, Ordering::Acquire, Ordering::Acquire) {
                        Ok(_) if listed => break,
                        Ok(_) => return Ok(b),
                        Err(now) => seen = now,
                    }
                }
                one => {
                    let c = Borrow::decode(one);
                    if c.conflicts(&b) {
                        return Err(conflict(&b, &c));
                    }
                    // Move the solo guard into the list; if it was released meanwhile (or
                    // another thread took the solo word), look again.
                    match solo.compare_exchange(one, LISTED, Ordering::Acquire, Ordering::Acquire) {
                        Ok(_) => {
                            live.push(c);
                            break;
                        }
                        Err(now) => seen = now,
                    }
                }
            }
        }
        if let Some(c) = live.iter().find(|c| c.conflicts(&b)) {
            // The list holds `c`, so `solo` rightly stays LISTED.
            return Err(conflict(&b, c));
        }
        live.push(b);
        Ok(b)
    }

    /// Lets `b` go: inline when it is the solo guard, out of line when listed.
    #[inline]
    fn unregister(&self, b: Borrow) {
        // Release: our accesses happen before those of the next guard to take the range.
        if b.len == 0
            || b.encode().is_some_and(|code| {
                self.block.solo.compare_exchange(code, EMPTY, Ordering::Release, Ordering::Relaxed).is_ok()
            })
        {
            return;
        }
        self.unregister_slow(b);
    }

    #[cold]
    #[inline(never)]
    fn unregister_slow(&self, b: Borrow) {
        let solo = &self.block.solo;
        // Not the solo guard, so `solo` is LISTED with `b` in the list, and stays so while we
        // hold the lock.
        let mut live = self.block.borrows.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = live.iter().position(|c| *c == b) {
            live.swap_remove(i);
        }
        if live.is_empty() {
            solo.store(EMPTY, Ordering::Release);
        }
    }

    /// Reads `off..off + len`. Other reads of the range may run at the same time; writes
    /// that overlap it are refused while the guard lives.
    ///
    /// # Errors
    /// `Device` when the range is out of bounds or overlaps a live write.
    #[inline]
    pub fn read(&self, off: usize, len: usize) -> Result<ReadGuard<'_>> {
        let borrow = self.acquire(off, len, false)?;
        // SAFETY: in bounds (checked by `acquire`); no live write overlaps the range and none
        // can start while the guard (which owns the registration) lives.
        let bytes = unsafe { std::slice::from_raw_parts(self.base().add(off), len) };
        Ok(ReadGuard { mem: self, borrow: Some(borrow), bytes })
    }

    /// [`write`](Self::write), without registering the range when `sole` proves this the
    /// only handle on the block, held exclusively: then no other access can start while the
    /// guard lives, and none is running (every other handle was dropped, after its own
    /// accesses). A plain load of the handle count and an acquire fence instead of two
    /// compare-and-swaps: each of those cost a 16-byte op between 4 threads on 2 cores
    /// ~5-8% (PERFORMANCE.md, session 26).
    ///
    /// # Errors
    /// As [`write`](Self::write).
    #[inline]
    pub(crate) fn write_sole(&self, sole: Sole<'_>, off: usize, len: usize) -> Result<WriteGuard<'_>> {
        if self.held_solely(sole, off, len) {
            // SAFETY: in bounds (checked); `sole` was made from a `&mut` borrow of the value
            // holding a handle on this block (the block is alive while it lives, so no other
            // block has its id), and that handle is the only one: no other value can reach
            // the bytes, and only the holder of the proof (the crate, for one op) accesses
            // them through the handle meanwhile, never while this guard lives (`Sole`). No
            // guard is live (`solo` is empty; there is no list without a live guard).
            let bytes = unsafe { std::slice::from_raw_parts_mut(self.base().add(off), len) };
            return Ok(WriteGuard { mem: self, borrow: None, bytes });
        }
        self.write(off, len)
    }

    /// [`read`](Self::read), without registering the range when `sole` proves this the only
    /// handle on the block, held exclusively (as [`write_sole`](Self::write_sole)): an
    /// in-place op reads its input so (two compare-and-swaps fewer an op, the second of them
    /// after the exchange slot's stores, where it waited for their line).
    ///
    /// # Errors
    /// As [`read`](Self::read).
    #[inline]
    pub(crate) fn read_sole(&self, sole: Sole<'_>, off: usize, len: usize) -> Result<ReadGuard<'_>> {
        if self.held_solely(sole, off, len) {
            // SAFETY: as `write_sole`'s: no other value can reach the bytes, and the holder
            // of the proof writes none of them while this guard lives.
            let bytes = unsafe { std::slice::from_raw_parts(self.base().add(off), len) };
            return Ok(ReadGuard { mem: self, borrow: None, bytes });
        }
        self.read(off, len)
    }

    /// Whether `sole` proves this handle the block's only one, held exclusively, with no
    /// guard live and `off..off + len` in bounds and not empty; then the accesses of every
    /// handle dropped before happen before the caller's.
    #[inline]
    fn held_solely(&self, sole: Sole<'_>, off: usize, len: usize) -> bool {
        let held = len != 0
            && sole.block == Some(self.id())
            && self.check(off, len)
            && self.is_private()
            && self.block.solo.load(Ordering::Relaxed) == EMPTY;
        if held {
            // Pairs with the release decrement of every handle dropped before: their
            // accesses happen before ours.
            fence(Ordering::Acquire);
        }
        held
    }

    /// Writes `off..off + len`, exclusively: any overlapping access is refused while the
    /// guard lives.
    ///
    /// # Errors
    /// `Device` when the range is out of bounds or overlaps a live read or write.
    #[inline]
    pub fn write(&self, off: usize, len: usize) -> Result<WriteGuard<'_>> {
        let borrow = self.acquire(off, len, true)?;
        // SAFETY: in bounds; no other live access overlaps the range, and none can start
        // while the guard lives, so this is the only reference to these bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(self.base().add(off), len) };
        Ok(WriteGuard { mem: self, borrow: Some(borrow), bytes })
    }
}

/// Proof that a block is held exclusively by the caller while `'a` lasts: made from a `&mut`
/// borrow of the value holding a handle on it ([`lend_sole`]), it names the block.
/// [`HostMem::write_sole`] then needs only that the handle is the block's only one. Whoever
/// holds the proof must not touch the block otherwise while a guard `write_sole` gave out
/// without registering lives (the exchange reads every part before it writes). [`Sole::none`]
/// proves nothing (every write registers).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sole<'a> {
    block: Option<usize>,
    _borrow: PhantomData<&'a ()>,
}

impl Sole<'_> {
    /// No proof.
    pub(crate) const fn none() -> Self {
        Sole { block: None, _borrow: PhantomData }
    }
}

/// `value`, shared, with the proof that it is held exclusively while the share lives: for
/// the block of the [`HostMem`] `buf` finds in it, when its buffer is one (the host device's);
/// else no proof.
pub(crate) fn lend_sole<T, B: Any>(value: &mut T, buf: impl FnOnce(&mut T) -> &mut B) -> (&T, Sole<'_>) {
    let block = (buf(value) as &mut dyn Any).downcast_mut::<HostMem>().map(|m| m.id());
    (value, Sole { block, _borrow: PhantomData })
}

/// The error for `b` refused because of the live borrow `c`.
fn conflict(b: &Borrow, c: &Borrow) -> CollectiveError {
    CollectiveError::device(format!(
        "host buffer bytes {}..{} cannot be {} while bytes {}..{} are being {} (the same memory is used twice \
         at once: a buffer shared between tensors, threads or an op's input and output)",
        b.off,
        b.off + b.len,
        if b.write { "written" } else { "read" },
        c.off,
        c.off + c.len,
        if c.write { "written" } else { "read" },
    ))
    .with_hint(
        "a tensor an op reads or writes must not be read, written or used by another op until that op is over: \
         wait for its Work (or its blocking call) first, and give every op's input and output memory of their own; \
         if an op failed with this error, its communicator is aborted: create a new one",
    )
}

/// A read registration of a range that outlives any borrow: while it lives, writes to the
/// range are refused, so another process may read its bytes by address (the shared-memory
/// transport's single-copy messages).
#[cfg_attr(not(all(target_os = "linux", not(miri))), allow(dead_code))]
#[derive(Debug)]
pub(crate) struct Lease {
    mem: HostMem,
    borrow: Borrow,
}

#[cfg_attr(not(all(target_os = "linux", not(miri))), allow(dead_code))]
impl Lease {
    /// Registers a read of `r`, if `r` is memory this process allocated (not a mapped
    /// segment, whose bytes may be another pair's ring) and no write overlaps it.
    pub(crate) fn new(r: &HostRegion) -> Option<Lease> {
        if matches!(r.mem.block.words, Words::Mapped(..)) {
            return None;
        }
        let borrow = r.mem.acquire(r.off, r.len, false).ok()?;
        Some(Lease { mem: r.mem.clone(), borrow })
    }

    /// The address of the range's first byte in this process.
    pub(crate) fn addr(&self) -> u64 {
        self.mem.base() as u64 + self.borrow.off as u64
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.mem.unregister(self.borrow);
    }
}

/// Shared access to a range of a [`HostMem`]; dereferences to `[u8]`.
pub struct ReadGuard<'a> {
    mem: &'a HostMem,
    /// The registered range (`None`: unregistered, [`HostMem::read_sole`]).
    borrow: Option<Borrow>,
    bytes: &'a [u8],
}

impl Deref for ReadGuard<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes
    }
}

impl Drop for ReadGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(b) = self.borrow {
            self.mem.unregister(b);
        }
    }
}

/// Exclusive access to a range of a [`HostMem`]; dereferences to `[u8]`.
pub struct WriteGuard<'a> {
    mem: &'a HostMem,
    /// The registered range (`None`: unregistered, [`HostMem::write_sole`]).
    borrow: Option<Borrow>,
    bytes: &'a mut [u8],
}

impl Deref for WriteGuard<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes
    }
}

impl DerefMut for WriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.bytes
    }
}

impl Drop for WriteGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(b) = self.borrow {
            self.mem.unregister(b);
        }
    }
}

impl fmt::Debug for ReadGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let off = (self.bytes.as_ptr() as usize).wrapping_sub(self.mem.base() as usize);
        write!(f, "ReadGuard({off}..{} of {:?})", off + self.bytes.len(), self.mem)
    }
}

impl fmt::Debug for WriteGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let off = (self.bytes.as_ptr() as usize).wrapping_sub(self.mem.base() as usize);
        write!(f, "WriteGuard({off}..{} of {:?})", off + self.bytes.len(), self.mem)
    }
}

impl fmt::Debug for HostMem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostMem({} bytes @ {:#x})", self.block.len, self.id())
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

    /// Reads the whole region.
    ///
    /// # Errors
    /// As [`HostMem::read`].
    pub fn read(&self) -> Result<ReadGuard<'_>> {
        self.mem.read(self.off, self.len)
    }
}

#[cfg(test)]
#[path = "mem_tests.rs"]
mod tests;
