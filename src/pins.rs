//! What the non-blocking ops in flight hold of tensors' memory, from issue to completion, so
//! that a tensor read or written through its own methods ([`Tensor::to_vec`],
//! [`Tensor::copy_from_slice`], [`Tensor::try_clone`]) before its op's [`Work`] is done fails
//! with an error naming the op, instead of returning half-reduced data or changing what the
//! op sends. An op's input is held for reading (reading it meanwhile is fine, writing it is
//! refused), its output for writing (any access is refused).
//!
//! The op's own accesses go through the device, never through these methods, so they are
//! never refused; a blocking call cannot overlap a pending op of its own communicator (it
//! runs after it), and the group and blocking paths hold nothing. While no op is pending
//! (the usual case of blocking code) a check is one atomic load.
//!
//! [`Tensor::to_vec`]: crate::Tensor::to_vec
//! [`Tensor::copy_from_slice`]: crate::Tensor::copy_from_slice
//! [`Tensor::try_clone`]: crate::Tensor::try_clone
//! [`Work`]: crate::Work

use std::any::TypeId;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use smallvec::SmallVec;

use crate::error::{CollectiveError, Result};
use crate::op::OpDesc;
use crate::types::Rank;

/// Memory: the device type and its `mem_id` (ids of two device types may coincide).
type Mem = (TypeId, usize);

/// One held range.
struct Pin {
    /// Which hold it belongs to.
    hold: u64,
    mem: Mem,
    off: usize,
    len: usize,
    /// Whether the op writes it.
    write: bool,
    /// The op, its number and its rank, for the error.
    op: OpDesc,
    seq: u64,
    rank: Rank,
}

/// Shards of the table, by memory: ranks issuing ops from several threads rarely meet.
const SHARDS: usize = 16;

static TABLE: [Mutex<Vec<Pin>>; SHARDS] = [const { Mutex::new(Vec::new()) }; SHARDS];
/// Pins in the table: a check with none returns at once.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static NEXT_HOLD: AtomicU64 = AtomicU64::new(1);

fn shard(mem: Mem) -> MutexGuard<'static, Vec<Pin>> {
    let i = (mem.1 >> 4).wrapping_add(mem.1) % SHARDS;
    TABLE[i].lock().unwrap_or_else(|e| e.into_inner())
}

/// A byte range of one buffer an op reads or writes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held {
    pub mem: Mem,
    pub off: usize,
    pub len: usize,
    pub write: bool,
}

impl Held {
    /// `len` bytes at `off` of the memory `id` of a device of type `D`.
    pub(crate) fn of<D: 'static>(id: usize, off: usize, len: usize, write: bool) -> Self {
        Held { mem: (TypeId::of::<D>(), id), off, len, write }
    }
}

/// An op's ranges, held until it is dropped (or [`release`](Self::release)d).
#[derive(Debug, Default)]
pub(crate) struct Hold {
    id: u64,
    /// The memory of each range (for its shard).
    mems: SmallVec<[Mem; 2]>,
}

impl Hold {
    /// Holds `ranges` for `op`, rank `rank`'s op number `seq`.
    pub(crate) fn new(ranges: &[Held], op: OpDesc, rank: Rank, seq: u64) -> Self {
        let id = NEXT_HOLD.fetch_add(1, Ordering::Relaxed);
        let mut mems = SmallVec::new();
        for r in ranges.iter().filter(|r| r.len > 0) {
            LIVE.fetch_add(1, Ordering::SeqCst);
            let pin = Pin { hold: id, mem: r.mem, off: r.off, len: r.len, write: r.write, op, seq, rank };
            shard(r.mem).push(pin);
            mems.push(r.mem);
        }
        Hold { id, mems }
    }

    /// Lets go of the ranges (before the op's waiters are woken, so that they find the
    /// tensor free). Called again, or on drop, it does nothing more.
    pub(crate) fn release(&mut self) {
        for mem in self.mems.drain(..) {
            let mut pins = shard(mem);
            if let Some(i) = pins.iter().position(|p| p.hold == self.id && p.mem == mem) {
                pins.swap_remove(i);
                LIVE.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.release();
    }
}

/// Whether `access` (a tensor's own read, or write) may go ahead: an error naming the
/// pending op that holds an overlapping range for writing (or, when `access` writes, for
/// reading).
pub(crate) fn check(access: Held) -> Result<()> {
    if LIVE.load(Ordering::SeqCst) == 0 || access.len == 0 {
        return Ok(());
    }
    let pins = shard(access.mem);
    let Some(p) = pins.iter().find(|p| {
        p.mem == access.mem
            && (p.write || access.write)
            && p.off < access.off + access.len
            && access.off < p.off + p.len
    }) else {
        return Ok(());
    };
    Err(CollectiveError::invalid(format!(
        "this tensor is {} by {} (op #{} of rank {}), a non-blocking op not finished yet: {} it only once its \
         `Work` is done (`wait`, or `is_completed` true)",
        if p.write { "written" } else { "read" },
        p.op,
        p.seq,
        p.rank,
        if access.write { "write" } else { "read" },
    ))
    .with_op(if access.write { "Tensor write" } else { "Tensor read" }))
}
