//! What the non-blocking ops in flight hold of tensors' memory, from issue to completion, so
//! that a tensor read or written through its own methods ([`Tensor::to_vec`],
//! [`Tensor::copy_from_slice`], [`Tensor::try_clone`]) before its op's [`Work`] is done fails
//! with an error naming the op, instead of returning half-reduced data or changing what the
//! op sends. An op's input is held for reading (reading it meanwhile is fine, writing it is
//! refused), its output for writing (any access is refused).
//!
//! Calls of *other* communicators are checked too ([`racing`]): nothing orders them with
//! the pending op, so one that writes what it uses, or reads what it writes, is refused. A
//! communicator's own later calls run after its pending ops and are never refused.
//!
//! ruCCL's own devices check the same in their `Device::write` and `Device::read`, which a
//! tensor's buffer handle reaches without its methods ([`check_device`]); a device
//! implemented elsewhere is not checked there.
//!
//! The op's own accesses go through the device's other paths (uploads, downloads, copies,
//! kernels), never through these, so they are never refused. The group path holds nothing
//! (its calls return only once done); a blocking op holds its memory while it runs only on a
//! device without memory guards of its own ([`Hold::blocking`]), so that two ranks given one
//! buffer are caught instead of racing. While no op is pending (the usual case of blocking code) a check is one atomic
//! load.
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

/// Who holds a range: the rank's communicator handle (its own later ops run after it) and
/// the communicator it is a rank of (two of its ranks on one memory are a race).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    pub rank: usize,
    pub comm: usize,
}

/// Memory: the device type and its `mem_id` (ids of two device types may coincide).
pub(crate) type Mem = (TypeId, usize);

/// One held range.
struct Pin {
    /// Which hold it belongs to.
    hold: u64,
    /// The communicator (rank) whose op holds it: its own later ops run after it.
    owner: Owner,
    mem: Mem,
    off: usize,
    len: usize,
    /// Whether the op writes it.
    write: bool,
    /// The op, its number and its rank, for the error.
    op: OpDesc,
    seq: u64,
    rank: Rank,
    /// Whether a blocking op holds it (on a device without memory guards): another rank's
    /// call clashing with it is a race, not a call to make later.
    blocking: bool,
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

    /// Whether two ops holding `self` and `other` would race if they ran at once: the same
    /// bytes, and one of them writes them.
    pub(crate) fn clashes(&self, other: &Held) -> bool {
        self.mem == other.mem
            && (self.write || other.write)
            && self.len > 0
            && other.len > 0
            && self.off < other.off + other.len
            && other.off < self.off + self.len
    }
}

/// An op's ranges (its input and outputs: one or two for a send or receive).
pub(crate) type Ranges = SmallVec<[Held; 2]>;

/// Whether ops holding `a` and `b` would race if they ran at once.
pub(crate) fn clash(a: &[Held], b: &[Held]) -> bool {
    a.iter().any(|x| b.iter().any(|y| x.clashes(y)))
}

/// The ranges of a run of ops, by memory: whether another op clashes with them looks only at
/// those on its own memory (a group of thousands of sends and receives stays linear).
#[derive(Debug, Default)]
pub(crate) struct ByMem(std::collections::HashMap<Mem, Ranges>);

impl ByMem {
    /// The ranges of one op.
    pub(crate) fn of(ranges: &[Held]) -> Self {
        let mut by = ByMem::default();
        by.add(ranges);
        by
    }

    /// Adds an op's ranges.
    pub(crate) fn add(&mut self, ranges: &[Held]) {
        for r in ranges {
            self.0.entry(r.mem).or_default().push(*r);
        }
    }

    /// Whether an op holding `ranges` would race with those added ([`clash`]).
    pub(crate) fn clashes(&self, ranges: &[Held]) -> bool {
        ranges.iter().any(|r| self.0.get(&r.mem).is_some_and(|held| held.iter().any(|h| h.clashes(r))))
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
    /// Holds `ranges` for `op`, rank `rank`'s op number `seq` on the communicator `owner`.
    pub(crate) fn new(ranges: &[Held], owner: Owner, op: OpDesc, rank: Rank, seq: u64) -> Self {
        Self::held_by(ranges, owner, (op, rank, seq), false)
    }

    /// [`new`](Self::new) for a blocking op while it runs (see [`racing`]).
    pub(crate) fn blocking(ranges: &[Held], owner: Owner, op: OpDesc, rank: Rank, seq: u64) -> Self {
        Self::held_by(ranges, owner, (op, rank, seq), true)
    }

    fn held_by(ranges: &[Held], owner: Owner, (op, rank, seq): (OpDesc, Rank, u64), blocking: bool) -> Self {
        let id = NEXT_HOLD.fetch_add(1, Ordering::Relaxed);
        let mut mems = SmallVec::new();
        for r in ranges.iter().filter(|r| r.len > 0) {
            LIVE.fetch_add(1, Ordering::SeqCst);
            let pin =
                Pin { hold: id, owner, mem: r.mem, off: r.off, len: r.len, write: r.write, op, seq, rank, blocking };
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

/// Whether any op holds anything (one atomic load): callers skip their checks when not.
#[inline]
pub(crate) fn any() -> bool {
    LIVE.load(Ordering::SeqCst) > 0
}

/// The pending op, other than `owner`'s own (`None`: any), holding a range that `access`
/// conflicts with: one it writes, or, when `access` writes, one it reads. As its message:
/// "written by all_reduce(sum, 4 x f32) (op #3 of rank 1)"; and whether the two race
/// rather than wait for each other: the holder is a blocking op, or another rank of
/// `owner`'s communicator (ranks of one communicator given one memory).
fn conflict(access: &Held, owner: Option<Owner>) -> Option<(bool, String, bool)> {
    if access.len == 0 || !any() {
        return None;
    }
    let pins = shard(access.mem);
    let p = pins.iter().find(|p| {
        owner.is_none_or(|o| o.rank != p.owner.rank)
            && access.clashes(&Held { mem: p.mem, off: p.off, len: p.len, write: p.write })
    })?;
    let race = p.blocking || owner.is_some_and(|o| o.comm == p.owner.comm);
    let verb = if p.write { "written" } else { "read" };
    Some((p.write, format!("{verb} by {} (op #{} of rank {})", p.op, p.seq, p.rank), race))
}

/// Whether `access` (a tensor's own read, or write) may go ahead: an error naming the
/// pending op that holds an overlapping range for writing (or, when `access` writes, for
/// reading).
pub(crate) fn check(access: Held) -> Result<()> {
    let Some((_, by, _)) = conflict(&access, None) else { return Ok(()) };
    Err(CollectiveError::invalid(format!(
        "this tensor is {by}, a non-blocking op not finished yet: {} it only once its `Work` is done (`wait`, or \
         `is_completed` true)",
        if access.write { "write" } else { "read" },
    ))
    .with_op(if access.write { "Tensor write" } else { "Tensor read" })
    .with_hint("wait for that op's `Work` first; neither the tensor nor the op was touched"))
}

/// [`check`] for an access through a built-in device's `Device::write` or `Device::read`
/// (`call`), which a tensor's buffer handle reaches without the tensor's methods: the same
/// refusal, naming the call and the bytes.
pub(crate) fn check_device(access: Held, call: &str) -> Result<()> {
    let Some((_, by, _)) = conflict(&access, None) else { return Ok(()) };
    Err(CollectiveError::invalid(format!(
        "bytes {}..{} of this buffer are {by}, a non-blocking op not finished yet: {} them only once its `Work` is \
         done (`wait`, or `is_completed` true)",
        access.off,
        access.off.saturating_add(access.len),
        if access.write { "write" } else { "read" },
    ))
    .with_op(call)
    .with_hint("wait for that op's `Work` first; neither the buffer nor the op was touched"))
}

/// The first of `ranges` that an op of another communicator (or another rank) holds at
/// once: its number, what holds it ([`conflict`]'s message: `written by all_reduce(sum, 4 x
/// f32) (op #3 of rank 1)`), and whether the two race: a blocking op ([`Hold::blocking`]) or
/// another rank of `owner`'s communicator holds it (ranks given one memory), rather than a
/// pending non-blocking op of another communicator (nothing orders the two: the call may
/// wait for that op's `Work`). Ops of `owner`'s own rank run in issue order.
pub(crate) fn racing(ranges: &[Held], owner: Owner) -> Option<(usize, String, bool)> {
    ranges.iter().enumerate().find_map(|(i, r)| conflict(r, Some(owner)).map(|(_, by, race)| (i, by, race)))
}
