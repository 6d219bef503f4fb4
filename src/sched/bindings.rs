//! Where an op's plan slots live: the buffers bound to its input, output and scratch, and
//! how a plan span resolves to a device range in them.

use crate::algo::{Slot, Span};
#[cfg(doc)]
use crate::device::Device;
use crate::device::Range;
use crate::error::{CollectiveError, Result};

/// Where a slot's spans live. Buffers are handles (clones name the same memory), so a running
/// op owns what it touches.
pub(crate) enum Binding<B> {
    /// Not used by this op.
    Unbound,
    /// One buffer, spans offset by `base` bytes. `id` is the buffer's memory id
    /// ([`Device::mem_id`]): two bindings of the same memory share it.
    Contig { buf: B, base: usize, id: usize },
    /// One buffer per block of `block` bytes (a list of tensors, one per rank: the list forms
    /// of all_gather, gather, scatter, reduce_scatter and all_to_all), with their memory ids.
    /// A span must lie inside one block.
    Blocks { bufs: Vec<(B, usize)>, block: usize },
}

impl<B: Clone> Binding<&B> {
    /// The same binding, with handles of its own on the buffers.
    pub(crate) fn cloned(self) -> Binding<B> {
        match self {
            Binding::Unbound => Binding::Unbound,
            Binding::Contig { buf, base, id } => Binding::Contig { buf: buf.clone(), base, id },
            Binding::Blocks { bufs, block } => {
                Binding::Blocks { bufs: bufs.into_iter().map(|(b, id)| (b.clone(), id)).collect(), block }
            }
        }
    }
}

/// The three slots of a plan.
pub(crate) struct Bindings<B> {
    pub input: Binding<B>,
    pub output: Binding<B>,
    pub scratch: Binding<B>,
}

/// A resolved span: a device range and the memory id it lies in.
pub(super) struct Resolved<B> {
    pub(super) range: Range<B>,
    pub(super) id: usize,
}

impl<B> Resolved<B> {
    pub(super) fn key(&self) -> (usize, usize, usize) {
        (self.id, self.range.off, self.range.len)
    }
}

impl<B: Clone> Bindings<B> {
    pub(super) fn resolve(&self, s: Span, size: usize) -> Result<Resolved<B>> {
        let (buf, off, len, id) = self.locate(s, size)?;
        Ok(Resolved { range: Range::new(buf.clone(), off, len), id })
    }
}

impl<B> Bindings<B> {
    /// Where `s` lies, borrowed: (buffer, byte offset, byte length, memory id).
    #[inline]
    pub(super) fn locate(&self, s: Span, size: usize) -> Result<(&B, usize, usize, usize)> {
        let b = match s.slot {
            Slot::Input => &self.input,
            Slot::Output => &self.output,
            Slot::Scratch => &self.scratch,
        };
        let (off, len) = (s.off * size, s.len * size);
        match b {
            Binding::Contig { buf, base, id } => Ok((buf, base + off, len, *id)),
            Binding::Blocks { bufs, block } => {
                let (k, inner) = if *block == 0 { (0, 0) } else { (off / block, off % block) };
                match bufs.get(k) {
                    Some((buf, id)) if inner + len <= *block || len == 0 => Ok((buf, inner, len, *id)),
                    _ => Err(misfit(s)),
                }
            }
            Binding::Unbound => Err(unbound(s)),
        }
    }
}

#[cold]
#[inline(never)]
fn misfit(s: Span) -> CollectiveError {
    CollectiveError::protocol(format!("plan span {s:?} does not fit a block of the list of tensors bound to it"))
}

#[cold]
#[inline(never)]
fn unbound(s: Span) -> CollectiveError {
    CollectiveError::protocol(format!("plan uses unbound slot {:?}", s.slot))
}
