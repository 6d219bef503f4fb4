//! One shared-memory segment between two processes: an anonymous `memfd` mapped by both.
//!
//! Why a memfd opened through `/proc/PID/fd` (rather than a named POSIX segment): it never has
//! a name, so nothing can be left in `/dev/shm` by a process that crashes at any moment — the
//! kernel frees the memory when the last mapping and descriptor go. The creator keeps its
//! descriptor open only until the peer has mapped it (the peer opens
//! `/proc/<creator pid>/fd/<fd>`, which needs the same user and pid namespace: when that
//! fails the pair falls back to TCP).
//!
//! Layout: one page of control words (per direction: the producer's `head`, the consumer's
//! `tail`, the messages it `delivered`, and two futex words with their "sleeping" flags — and
//! whether the consuming rank polls the ring itself —, and the counters of lent messages read
//! by single copy, each group on its own cache line),
//! then one data ring per direction.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::mem::HostMem;

/// Bytes of control words before the rings.
pub(crate) const CTRL: usize = 4096;
/// Identifies a ruCCL segment (checked by the process that opens it).
const MAGIC: u64 = u64::from_le_bytes(*b"RUCCLSHM");
const MAGIC_AT: usize = 2048;
const CAP_AT: usize = 2056;

/// The control words of one direction (offsets from the segment's start).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctrl {
    /// Producer: bytes published (a position in the ring, never wraps).
    pub head: usize,
    /// Producer rings it when the consumer sleeps.
    pub data_bell: usize,
    pub consumer_sleeps: usize,
    /// The consuming rank is awake (it waits or runs an op) and polls the ring and the
    /// exchange slots itself: a whole message, or an exchanged op, needs no wake-up of the
    /// reader thread (see `ring::Producer::push`, `shm_io`'s `poke`); cleared before any
    /// thread of its process sleeps.
    pub consumer_polls: usize,
    /// Consumer: bytes freed.
    pub tail: usize,
    /// Consumer rings it when the producer sleeps.
    pub space_bell: usize,
    pub producer_sleeps: usize,
    /// Consumer: data messages taken (released after reading).
    pub delivered: usize,
    /// Consumer: the lent messages (numbered from 1) it is done reading, in order.
    pub lent_done: usize,
    /// Consumer: the lent message it is about to read (see `shm_io`'s `Lending`).
    pub lent_reading: usize,
    /// Producer: lent messages up to this one were taken back (a failed op); not to be read.
    pub lent_revoked: usize,
    /// Producer: exchanged ops its rank published or finished while the consumer's rank did
    /// not poll (`shm_io`'s `poke`): the consumer's reader thread wakes its rank, which may
    /// wait for them.
    pub slot_pokes: usize,
}

impl Ctrl {
    pub(crate) fn of(dir: usize) -> Ctrl {
        let b = dir * 1024;
        Ctrl {
            head: b,
            data_bell: b + 8,
            consumer_sleeps: b + 12,
            consumer_polls: b + 16,
            tail: b + 64,
            space_bell: b + 72,
            producer_sleeps: b + 76,
            delivered: b + 128,
            lent_done: b + 192,
            lent_reading: b + 200,
            lent_revoked: b + 256,
            slot_pokes: b + 320,
        }
    }
}

/// A mapping of a segment, unmapped when dropped (after every region read from it is gone:
/// they hold it).
#[derive(Debug)]
pub(crate) struct Mapping {
    addr: usize,
    len: usize,
    /// Bytes of each direction's ring.
    pub cap: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `addr..addr + len` was mapped by `map` and nothing refers to it any more:
        // every borrow of it (regions, atomics) holds this mapping alive.
        unsafe {
            libc::munmap(self.addr as *mut libc::c_void, self.len);
        }
    }
}

/// Maps `len` bytes of `fd`, its pages touched as they are first used. Each process then
/// takes a page fault per 4 KiB of ring the first time round (a few microseconds), but a
/// pair that carries little never fills its ~48 MiB: with every page present at once
/// (`MAP_POPULATE`, until session 45), 16 processes on one host held 733 MiB each and took
/// 19 s to join for a 16-byte all_reduce (every pair of processes has a segment, every
/// communicator its own).
pub(super) fn map(fd: &impl AsRawFd, len: usize, cap: usize) -> io::Result<Mapping> {
    let flags = libc::MAP_SHARED;
    // SAFETY: a fresh shared mapping of `len` bytes of `fd` (its size checked by the caller);
    // the kernel picks the address, so nothing else is overwritten.
    let p =
        unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd.as_raw_fd(), 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(Mapping { addr: p as usize, len, cap })
}

/// A fresh, zero-filled memory file of `len` bytes (closed on exec), in no file system:
/// `name` shows only in `/proc/<pid>/maps` (`memfd:<name>`).
pub(super) fn memfd(len: usize, name: &std::ffi::CStr) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name; the returned descriptor (checked) is ours alone.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    File::from(fd.try_clone()?).set_len(len as u64)?;
    Ok(fd)
}

/// Opens the memory file that process `pid` holds as descriptor `fd`.
pub(super) fn open_fd(pid: u32, fd: i32) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(format!("/proc/{pid}/fd/{fd}"))
}

impl Mapping {
    /// Creates a segment with two rings of `cap` bytes (a multiple of 64); returns its mapping
    /// and the descriptor the peer opens.
    pub(crate) fn create(cap: usize) -> io::Result<(Arc<Mapping>, OwnedFd)> {
        let len = CTRL + 2 * cap;
        let fd = memfd(len, c"ruccl-shm")?;
        let m = map(&fd, len, cap)?;
        m.u64_at(MAGIC_AT).store(MAGIC, Ordering::SeqCst);
        m.u64_at(CAP_AT).store(cap as u64, Ordering::SeqCst);
        Ok((Arc::new(m), fd))
    }

    /// Maps the segment that process `pid` created as descriptor `fd`.
    pub(crate) fn open(pid: u32, fd: i32) -> io::Result<Arc<Mapping>> {
        let f = open_fd(pid, fd)?;
        let len = f.metadata()?.len() as usize;
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
        if len < CTRL || !(len - CTRL).is_multiple_of(128) {
            return Err(bad("not a ruCCL segment (size)"));
        }
        let m = map(&f, len, (len - CTRL) / 2)?;
        if m.u64_at(MAGIC_AT).load(Ordering::SeqCst) != MAGIC || m.u64_at(CAP_AT).load(Ordering::SeqCst) != m.cap as u64
        {
            return Err(bad("not a ruCCL segment (magic)"));
        }
        Ok(Arc::new(m))
    }

    /// The word at `off` (8-aligned, inside the control page).
    pub(crate) fn u64_at(&self, off: usize) -> &AtomicU64 {
        assert!(off.is_multiple_of(8) && off + 8 <= CTRL, "control word out of place");
        // SAFETY: aligned, inside the mapping, which lives as long as the returned reference;
        // only ever accessed atomically (by both processes).
        unsafe { AtomicU64::from_ptr((self.addr + off) as *mut u64) }
    }

    /// The futex word at `off` (4-aligned, inside the control page).
    pub(crate) fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= CTRL, "control word out of place");
        // SAFETY: as `u64_at`.
        unsafe { AtomicU32::from_ptr((self.addr + off) as *mut u32) }
    }

    /// The address of byte `off` of the mapping (in bounds: checked).
    pub(super) fn addr_of(&self, off: usize) -> usize {
        assert!(off <= self.len, "outside the segment");
        self.addr + off
    }

    /// The mapping's length in bytes.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The offset of direction `dir`'s ring in the segment.
    pub(crate) fn ring_at(&self, dir: usize) -> usize {
        CTRL + dir * self.cap
    }

    /// Copies `src` to `off` in the segment.
    ///
    /// The ring's protocol makes this the only access to those bytes: the producer writes
    /// only space the consumer freed and has not been published yet.
    pub(crate) fn copy_in(&self, off: usize, src: &[u8]) {
        assert!(off.checked_add(src.len()).is_some_and(|e| e <= self.len), "write outside the segment");
        // SAFETY: in bounds (checked); the destination is producer-owned space (see above),
        // and `src` is this process's memory, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), (self.addr + off) as *mut u8, src.len()) }
    }

    /// Copies from `off` in the segment into `dst` (published bytes the producer does not
    /// touch until the consumer frees them).
    pub(crate) fn copy_out(&self, off: usize, dst: &mut [u8]) {
        assert!(off.checked_add(dst.len()).is_some_and(|e| e <= self.len), "read outside the segment");
        // SAFETY: in bounds (checked); published, not-yet-freed bytes are not written by the
        // producer; `dst` is this process's memory.
        unsafe { std::ptr::copy_nonoverlapping((self.addr + off) as *const u8, dst.as_mut_ptr(), dst.len()) }
    }

    /// Direction `dir`'s ring as host memory, for messages read in place.
    pub(crate) fn ring_mem(self: &Arc<Self>, dir: usize) -> HostMem {
        let at = self.ring_at(dir);
        // SAFETY: the ring lies inside the mapping, page-aligned (CTRL and cap are multiples of
        // 8; the mapping is page-aligned); the slice lives as long as the mapping, which the
        // block keeps (`keep`). The other process writes only freed ring space: no guard of
        // the block covers it (the consumer frees a record after its last read).
        let words: &'static [AtomicU64] =
            unsafe { std::slice::from_raw_parts((self.addr + at) as *const AtomicU64, self.cap / 8) };
        let keep: Arc<dyn std::any::Any + Send + Sync> = self.clone();
        // SAFETY: see above.
        unsafe { HostMem::mapped(words, keep) }
    }
}

/// Sleeps on `word` while it equals `val`, for at most `t` (a shared, not private, futex: the
/// word lives in a segment two processes map).
pub(crate) fn futex_wait(word: &AtomicU32, val: u32, t: Duration) {
    let ts = libc::timespec { tv_sec: t.as_secs() as libc::time_t, tv_nsec: t.subsec_nanos() as libc::c_long };
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call; the kernel only
    // compares it and sleeps.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            val,
            &ts as *const libc::timespec,
            0usize,
            0u32,
        );
    }
}

/// Wakes every process sleeping on `word`.
pub(crate) fn futex_wake(word: &AtomicU32) {
    // SAFETY: as `futex_wait`; waking reads nothing.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX, 0usize, 0usize, 0u32);
    }
}
