//! The exchange's second half: this rank's result computed from every rank's part (copied
//! in rank order, or reduced in rank order so every rank gets the same bits).

use std::borrow::Borrow;

use super::Exchange;
use crate::algo::{Slot, Span};
use crate::device::{Device, kernels};
use crate::error::{CollectiveError, Result};
use crate::mem::HostMem;
use crate::op::{OpDesc, OpKind};
use crate::sched::Binding;
use crate::transport::slots::Slots;
use crate::types::{Combine, Rank, ReduceOp, Scale};

impl<D: Device, B: Borrow<D::Buffer>> Exchange<'_, D, B> {
    /// This rank's result, from every rank's part.
    pub(super) fn result(&self, slots: &Slots, desc: &OpDesc, size: usize) -> Result<()> {
        let (me, count) = (self.view.rank, desc.count);
        let (root, block) = (desc.root.unwrap_or(0), count * size);
        let out = Span::new(Slot::Output, 0, count);
        match desc.kind {
            OpKind::AllReduce => self.reduce_parts(slots, out, 0, size),
            OpKind::Reduce if me == root => self.reduce_parts(slots, out, 0, size),
            OpKind::ReduceScatter => self.reduce_parts(slots, out, me * block, size),
            OpKind::AllGather => self.copy_parts(slots, 0, size),
            OpKind::Gather if me == root => self.copy_parts(slots, 0, size),
            OpKind::AllToAll => self.copy_parts(slots, me * block, size),
            OpKind::Broadcast if !(me == root && desc.in_place) => self.copy_part(slots, root, 0, out, size),
            OpKind::Scatter => self.copy_part(slots, root, me * block, out, size),
            _ => Ok(()),
        }
    }

    /// Block `q` of the output = bytes `off..` of `q`'s part, for every rank `q` (all_gather,
    /// gather, all_to_all). An output that is one buffer is written under one guard; a list of
    /// tensors block by block.
    fn copy_parts(&self, slots: &Slots, off: usize, size: usize) -> Result<()> {
        let (n, count) = (self.view.shared.world, self.view.fp.desc.count);
        if !matches!(self.bufs.output, Binding::Contig { .. }) {
            return (0..n)
                .try_for_each(|q| self.copy_part(slots, q, off, Span::new(Slot::Output, q * count, count), size));
        }
        let (mem, o, len) = self.host(Span::new(Slot::Output, 0, n * count), size)?;
        if len == 0 {
            return Ok(());
        }
        let mut w = mem.write_sole(self.sole, o, len)?;
        for (q, block) in w.chunks_mut(len / n).enumerate() {
            self.part_into(slots, q, off, block, size)?;
        }
        Ok(())
    }

    /// `out` = bytes `off..` of `q`'s part: from `q`'s slot, or this rank's input when `q` is
    /// this rank and it published nothing ([`Reads::quiet`]).
    fn part_into(&self, slots: &Slots, q: Rank, off: usize, out: &mut [u8], size: usize) -> Result<()> {
        if q == self.view.rank && self.lean.quiet {
            let desc = &self.view.fp.desc;
            if desc.in_place && desc.kind == OpKind::Gather {
                // The input is this rank's block of the output: already where it belongs.
                return Ok(());
            }
            // What it would have published (`own_part`: its input, for reduce and gather).
            let Some(span) = self.own_part(desc)? else {
                return Err(CollectiveError::protocol(format!("{} has no part of its own to read", desc.kind.name())));
            };
            let (mem, o, len) = self.host(span, size)?;
            if off.checked_add(out.len()).is_none_or(|end| end > len) {
                return Err(CollectiveError::protocol(format!(
                    "bytes {off}..+{} of this rank's own part of op #{}, which has {len}",
                    out.len(),
                    self.view.seq
                )));
            }
            out.copy_from_slice(&mem.read_sole(self.sole, o + off, out.len())?);
            return Ok(());
        }
        if slots.read(q, self.view.seq, off, out) { Ok(()) } else { Err(self.past_slot(q)) }
    }

    /// `dst` = bytes `off..` of `q`'s part.
    fn copy_part(&self, slots: &Slots, q: Rank, off: usize, dst: Span, size: usize) -> Result<()> {
        let (mem, o, len) = self.host(dst, size)?;
        if len == 0 {
            return Ok(());
        }
        let mut w = mem.write_sole(self.sole, o, len)?;
        self.part_into(slots, q, off, &mut w, size)
    }

    /// `dst` = the reduction, in rank order, of bytes `off..` of every rank's part.
    fn reduce_parts(&self, slots: &Slots, dst: Span, off: usize, size: usize) -> Result<()> {
        let (mem, o, len) = self.host(dst, size)?;
        if len == 0 {
            return Ok(());
        }
        // The parts are copied out of the slots (their words are atomics) into words, so that
        // every dtype's view of them is aligned: on the stack when they fit, in a buffer only
        // as large as they need (zeroing a 1 KiB buffer per op cost a 16-byte reduce ~80
        // instructions), else on the heap.
        let words = (self.view.shared.world * len).div_ceil(8);
        let out = (&*mem, o, len);
        match words {
            0..=16 => self.reduce_into(slots, &mut [0u64; 16][..words], off, out),
            17..=128 => self.reduce_into(slots, &mut [0u64; 128][..words], off, out),
            _ => self.reduce_into(slots, &mut vec![0u64; words], off, out),
        }
    }

    /// [`reduce_parts`](Self::reduce_parts) into bytes `o..o + len` of `mem`, the parts copied
    /// into `buf` first: all of them before the output is written, since a quiet root's own
    /// part is its input, which is its output in place.
    fn reduce_into(&self, slots: &Slots, buf: &mut [u64], off: usize, out: (&HostMem, usize, usize)) -> Result<()> {
        let (mem, o, len) = out;
        let n = self.view.shared.world;
        let size = self.view.fp.desc.dtype.size();
        if len > 0 && len.is_multiple_of(8) && off.is_multiple_of(8) {
            // Whole words: each part's words straight out of its slot into its own.
            for (q, p) in buf.chunks_mut(len / 8).take(n).enumerate() {
                if q == self.view.rank && self.lean.quiet {
                    self.part_into(slots, q, off, bytemuck::cast_slice_mut(p), size)?;
                } else if !slots.read_words(q, self.view.seq, off / 8, p) {
                    return Err(self.past_slot(q));
                }
            }
        } else {
            let parts = &mut bytemuck::cast_slice_mut::<u64, u8>(buf)[..n * len];
            for (q, p) in parts.chunks_mut(len).enumerate() {
                self.part_into(slots, q, off, p, size)?;
            }
        }
        let desc = &self.view.fp.desc;
        let combine = desc.op.map_or(Combine::Sum, ReduceOp::combine);
        if len.is_multiple_of(8) && kernels::reduce_words(desc.dtype, combine, buf, len / 8, n) {
            // Folded into the first part's words: copied out.
            let mut guard = mem.write_sole(self.sole, o, len)?;
            guard.copy_from_slice(&bytemuck::cast_slice::<u64, u8>(buf)[..len]);
            return self.finish_avg(&mut guard);
        }
        let parts = &bytemuck::cast_slice::<u64, u8>(buf)[..n * len];
        let mut guard = mem.write_sole(self.sole, o, len)?;
        let out: &mut [u8] = &mut guard;
        if len / size <= kernels::SMALL {
            kernels::reduce_packed(desc.dtype, combine, out, parts)?;
            return self.finish_avg(out);
        }
        let (first, rest) = parts.split_at(len);
        // The other parts' slices: in an array when few (no collect per op).
        let mut few: [&[u8]; 8] = [&[]; 8];
        let many: Vec<&[u8]>;
        let srcs: &[&[u8]] = if n - 1 <= few.len() {
            few.iter_mut().zip(rest.chunks(len)).for_each(|(s, c)| *s = c);
            &few[..n - 1]
        } else {
            many = rest.chunks(len).collect();
            &many
        };
        kernels::reduce_many(desc.dtype, combine, out, Some(first), srcs)?;
        self.finish_avg(out)
    }

    /// An `Avg`'s division of the sum `out` holds (see [`ReduceOp::avg_prescale`]).
    fn finish_avg(&self, out: &mut [u8]) -> Result<()> {
        let (desc, n) = (&self.view.fp.desc, self.view.shared.world);
        if desc.op == Some(ReduceOp::Avg) {
            // f16: the parts were pre-multiplied by 2^-k (the op's prologue), which was the
            // whole division when the world is a power of two (`ReduceOp::avg_prescale`).
            match ReduceOp::Avg.avg_prescale(desc.dtype, n) {
                Some(_) if n.is_power_of_two() => {}
                Some(k) => {
                    kernels::scale(desc.dtype, Scale::DivBy(n as u64), out, None)?;
                    kernels::scale(desc.dtype, Scale::MulBy(2f64.powi(k as i32)), out, None)?;
                }
                None => kernels::scale(desc.dtype, Scale::DivBy(n as u64), out, None)?,
            }
        }
        Ok(())
    }
}
