//! Staging memory owned by one rank and reused across ops: where incoming bytes wait when
//! their destination is still lent out (host staging for host payloads, device scratch for
//! device payloads), and where a device that the host cannot read puts the bytes it sends.
//! All of it comes from the device (`alloc_staging`, `alloc`), is fallible, and is trimmed
//! after each op so that one large op does not pin its peak forever.

use crate::error::Result;
use crate::mem::HostMem;
use crate::types::Rank;

/// Free send slots kept between ops (the largest in-flight volume is regrown on demand).
const KEEP_FREE_SLOTS: usize = 16;
/// Bytes of free send slots kept between ops.
const KEEP_FREE_BYTES: usize = 256 << 20;

/// One send staging slot and the lend that holds it, if any.
#[derive(Debug)]
pub(crate) struct SendSlot {
    pub(crate) mem: HostMem,
    /// `(peer, ticket)` of the lend; ticket `u64::MAX` while the download into it runs.
    pub(crate) held_by: Option<(Rank, u64)>,
}

/// A rank's reusable staging memory.
#[derive(Debug)]
pub struct Staging<B, E> {
    recv: Option<HostMem>,
    recv_dev: Option<B>,
    pub(crate) send: Vec<SendSlot>,
    /// The bookkeeping vectors of the last op, emptied, so that the next one allocates none.
    pub(super) spare: Spare<E>,
}

/// An op's bookkeeping vectors, kept between ops (small: a few words per peer and lend).
pub(super) struct Spare<E> {
    pub(super) lends: Vec<super::Lend>,
    pub(super) sent: Vec<u32>,
    pub(super) received: Vec<u32>,
    pub(super) inflight: Vec<super::InFlight<E>>,
}

impl<E> Default for Spare<E> {
    fn default() -> Self {
        Spare { lends: Vec::new(), sent: Vec::new(), received: Vec::new(), inflight: Vec::new() }
    }
}

impl<E> std::fmt::Debug for Spare<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spare").field("lends", &self.lends.capacity()).finish_non_exhaustive()
    }
}

/// The staging memory an op holds, allocated when it first needs some (a communicator's
/// first op that sends or receives a message; an exchange never does).
pub(super) fn get<B, E>(stage: &mut Option<Box<Staging<B, E>>>) -> &mut Staging<B, E> {
    stage.get_or_insert_with(Box::default)
}

/// Takes a spare vector for per-peer counters of `world` ranks, zeroed.
pub(super) fn counters(v: &mut Vec<u32>, world: usize) -> Vec<u32> {
    let mut v = std::mem::take(v);
    v.clear();
    v.resize(world, 0);
    v
}

impl<B, E> Default for Staging<B, E> {
    fn default() -> Self {
        Staging { recv: None, recv_dev: None, send: Vec::new(), spare: Spare::default() }
    }
}

impl<B: Clone, E> Staging<B, E> {
    /// The host receive staging block, grown to at least `len` bytes.
    pub(crate) fn recv_host(&mut self, len: usize, alloc: impl FnOnce(usize) -> Result<HostMem>) -> Result<HostMem> {
        match &self.recv {
            Some(m) if m.len() >= len => Ok(m.clone()),
            _ => {
                let m = alloc(len)?;
                self.recv = Some(m.clone());
                Ok(m)
            }
        }
    }

    /// The device receive staging buffer, grown to at least `len` bytes.
    pub(crate) fn recv_device(
        &mut self,
        len: usize,
        alloc: impl FnOnce(usize) -> Result<B>,
        len_of: impl Fn(&B) -> usize,
    ) -> Result<B> {
        match &self.recv_dev {
            Some(b) if len_of(b) >= len => Ok(b.clone()),
            _ => {
                let b = alloc(len)?;
                self.recv_dev = Some(b.clone());
                Ok(b)
            }
        }
    }

    /// Frees the send slots whose lend was released.
    pub(crate) fn reclaim_released(&mut self, is_released: impl Fn(Rank, u64) -> bool) {
        for slot in &mut self.send {
            if let Some((p, t)) = slot.held_by
                && t != u64::MAX
                && is_released(p, t)
            {
                slot.held_by = None;
            }
        }
    }

    /// The index of a free send slot of at least `len` bytes, growing the pool when none is
    /// free (a plan may lend many chunks before it receives anything: waiting here could
    /// deadlock).
    pub(crate) fn send_slot(&mut self, len: usize, alloc: impl FnOnce(usize) -> Result<HostMem>) -> Result<usize> {
        if let Some(i) = self.send.iter().position(|x| x.held_by.is_none() && x.mem.len() >= len) {
            return Ok(i);
        }
        let mem = alloc(len)?;
        if let Some(i) = self.send.iter().position(|x| x.held_by.is_none()) {
            self.send[i].mem = mem;
            return Ok(i);
        }
        self.send.push(SendSlot { mem, held_by: None });
        Ok(self.send.len() - 1)
    }

    /// After an op, when every lend was released or reclaimed: keeps at most a few free
    /// slots and bytes (the smallest ones).
    pub(crate) fn trim(&mut self) {
        if self.send.is_empty() {
            return;
        }
        for s in &mut self.send {
            s.held_by = None;
        }
        self.send.sort_by_key(|s| s.mem.len());
        let mut kept = 0usize;
        let mut n = 0;
        self.send.retain(|s| {
            n += 1;
            kept += s.mem.len();
            n <= KEEP_FREE_SLOTS && kept <= KEEP_FREE_BYTES
        });
    }
}
