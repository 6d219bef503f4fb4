//! The direct path's work when every buffer is host memory and the kernels are the host's
//! ([`Device::host_memory`]): the group thread guards each buffer once for the whole op (one
//! read guard per input, one write guard per output) and runs the same element-wise kernels
//! the host device would, on the guarded bytes — no device operation, event or handle per
//! copy. The same reductions in the same order as the device path ([`super::execute`]), so
//! the same bits. A rank whose input shares memory with its output is left to the device
//! path, except an all_reduce, reduce or broadcast exactly in place (the in-place layouts of
//! all_gather and reduce_scatter, even of one rank, run there).

use super::{Buf, PerRank, Plan, each_chunk, missing};
use crate::device::{Device, kernels, stream};
use crate::error::Result;
use crate::mem::{HostMem, ReadGuard, WriteGuard};
use crate::op::{OpDesc, OpKind};
use crate::types::{Combine, ReduceOp, Scale};

/// Runs the op on host memory; `None` (nothing done) when the device or a buffer does not
/// allow it, and the caller runs the device path instead.
pub(super) fn run<D: Device>(dev: &D, desc: &OpDesc, p: &Plan<'_, D::Buffer>, chunk: usize) -> Option<Result<()>> {
    if !dev.host_memory() {
        return None;
    }
    let n = p.inputs.len();
    let size = desc.dtype.size();
    let block = desc.count * size;
    let root = desc.root.unwrap_or(0);
    let (in_len, out_len) = match desc.kind {
        OpKind::AllGather | OpKind::Gather => (block, n * block),
        OpKind::ReduceScatter | OpKind::Scatter => (n * block, block),
        OpKind::AllToAll => (n * block, n * block),
        _ => (block, block),
    };
    // What the op reads and writes on rank `r`.
    let reads = |r: usize| match desc.kind {
        OpKind::Broadcast | OpKind::Scatter => r == root,
        OpKind::Barrier => false,
        _ => true,
    };
    let writes = |r: usize| match desc.kind {
        OpKind::Reduce | OpKind::Gather => r == root,
        OpKind::Barrier => false,
        _ => true,
    };
    // Each rank's memory: (input, output, whether the input is the output).
    let mut mems: PerRank<RankMem<'_>> = PerRank::new();
    for r in 0..n {
        let input = if reads(r) { Some(p.inputs.get(r)?.as_ref()?) } else { None };
        let output = if writes(r) { Some(p.outputs.get(r)?.as_ref()?) } else { None };
        let alias = match (input, output) {
            (Some(i), Some(o)) if i.id == o.id => {
                // Only these ops' kernels read an input that is the output (in place); for the
                // others it is a layout (one rank's all_gather or reduce_scatter in place)
                // the device path runs.
                let in_place = matches!(desc.kind, OpKind::AllReduce | OpKind::Reduce | OpKind::Broadcast);
                if !in_place || i.base != o.base || in_len != out_len {
                    return None;
                }
                true
            }
            _ => false,
        };
        let input = if alias { None } else { host_of(dev, input)? };
        mems.push((input, host_of(dev, output)?, alias));
    }
    // A large op's reductions stream their destinations, as the host device's do.
    let store = kernels::Store::for_buffers(in_len.max(out_len));
    Some(Guarded::take(&mems, in_len, out_len).and_then(|mut g| g.run(desc, block, chunk, store)))
}

/// A buffer's host memory and base offset (`Some(None)` for no buffer); `None` when the
/// device lends no host memory for it.
#[allow(clippy::option_option)]
fn host_of<'b, D: Device>(dev: &D, b: Option<&Buf<'b, D::Buffer>>) -> Option<Option<(&'b HostMem, usize)>> {
    match b {
        None => Some(None),
        Some(b) => Some(Some((dev.host_mem(b.buf)?, b.base))),
    }
}

/// Every rank's guarded bytes for the op.
struct Guarded<'m> {
    /// Inputs, `None` where the op reads none or reads the output (in place).
    ins: PerRank<Option<ReadGuard<'m>>>,
    outs: PerRank<Option<WriteGuard<'m>>>,
    /// Whether rank `r`'s input is its output.
    alias: PerRank<bool>,
}

/// A rank's host memory for the op: its input and output (block, base offset), and whether
/// its input is its output.
type RankMem<'m> = (Option<(&'m HostMem, usize)>, Option<(&'m HostMem, usize)>, bool);

type Mems<'m> = [RankMem<'m>];

impl<'m> Guarded<'m> {
    /// Guards every buffer: inputs read (`in_len` bytes), outputs written (`out_len`).
    fn take(mems: &Mems<'m>, in_len: usize, out_len: usize) -> Result<Self> {
        let mut g = Guarded { ins: PerRank::new(), outs: PerRank::new(), alias: PerRank::new() };
        for &(input, output, alias) in mems {
            g.ins.push(input.map(|(m, base)| m.read(base, in_len)).transpose()?);
            g.outs.push(output.map(|(m, base)| m.write(base, out_len)).transpose()?);
            g.alias.push(alias);
        }
        Ok(g)
    }

    fn run(&mut self, desc: &OpDesc, block: usize, chunk: usize, store: kernels::Store) -> Result<()> {
        let n = self.outs.len();
        let size = desc.dtype.size();
        let chunk = (chunk / size).max(1) * size;
        let root = desc.root.unwrap_or(0);
        let Guarded { ins, outs, alias } = self;
        let k = Kernel { desc, n, store };
        match desc.kind {
            OpKind::AllReduce => each_chunk(block, chunk, |o, len| {
                // Rank 0's result, then copied to every other rank's output.
                let (head, tail) = outs.split_at_mut(1);
                let d = &mut out(&mut head[0])?[o..o + len];
                let acc = if alias[0] { None } else { Some(&input(&ins[0])?[o..o + len]) };
                let mut srcs: PerRank<&[u8]> = PerRank::new();
                for r in 1..n {
                    let s = if alias[r] { out_ref(&tail[r - 1])? } else { input(&ins[r])? };
                    srcs.push(&s[o..o + len]);
                }
                k.reduce(d, acc, &srcs)?;
                drop(srcs);
                for t in tail.iter_mut() {
                    stream::copy(&mut out(t)?[o..o + len], d);
                }
                Ok(())
            }),
            OpKind::Reduce => each_chunk(block, chunk, |o, len| {
                // Non-roots write nothing: every input is a read guard.
                let d = &mut out(&mut outs[root])?[o..o + len];
                let acc = if alias[root] { None } else { Some(&input(&ins[root])?[o..o + len]) };
                let mut srcs: PerRank<&[u8]> = PerRank::new();
                for r in (0..n).filter(|&r| r != root) {
                    srcs.push(&input(&ins[r])?[o..o + len]);
                }
                k.reduce(d, acc, &srcs)
            }),
            OpKind::Broadcast => each_chunk(block, chunk, |o, len| {
                let (before, rest) = outs.split_at_mut(root);
                let (mine, after) = rest.split_at_mut(1);
                if alias[root] {
                    let s = &out_ref(&mine[0])?[o..o + len];
                    before.iter_mut().chain(after).try_for_each(|t| copy(t, o, s))
                } else {
                    let s = &input(&ins[root])?[o..o + len];
                    before.iter_mut().chain(after).chain(mine).try_for_each(|t| copy(t, o, s))
                }
            }),
            OpKind::AllGather => each_chunk(block, chunk, |o, len| {
                for t in outs.iter_mut() {
                    for (q, i) in ins.iter().enumerate() {
                        copy(t, q * block + o, &input(i)?[o..o + len])?;
                    }
                }
                Ok(())
            }),
            OpKind::ReduceScatter => each_chunk(block, chunk, |o, len| {
                for (r, t) in outs.iter_mut().enumerate() {
                    let at = r * block + o;
                    let acc = &input(&ins[r])?[at..at + len];
                    let mut srcs: PerRank<&[u8]> = PerRank::new();
                    for q in (0..n).filter(|&q| q != r) {
                        srcs.push(&input(&ins[q])?[at..at + len]);
                    }
                    k.reduce(&mut out(t)?[o..o + len], Some(acc), &srcs)?;
                }
                Ok(())
            }),
            OpKind::AllToAll => each_chunk(block, chunk, |o, len| {
                for (r, t) in outs.iter_mut().enumerate() {
                    for (q, i) in ins.iter().enumerate() {
                        copy(t, q * block + o, &input(i)?[r * block + o..r * block + o + len])?;
                    }
                }
                Ok(())
            }),
            OpKind::Gather => each_chunk(block, chunk, |o, len| {
                for (q, i) in ins.iter().enumerate() {
                    copy(&mut outs[root], q * block + o, &input(i)?[o..o + len])?;
                }
                Ok(())
            }),
            OpKind::Scatter => each_chunk(block, chunk, |o, len| {
                let s = input(&ins[root])?;
                for (r, t) in outs.iter_mut().enumerate() {
                    copy(t, o, &s[r * block + o..r * block + o + len])?;
                }
                Ok(())
            }),
            _ => Ok(()),
        }
    }
}

/// A rank's guarded input.
fn input<'g>(g: &'g Option<ReadGuard<'_>>) -> Result<&'g [u8]> {
    g.as_deref().ok_or_else(missing)
}

/// A rank's guarded output, to write.
fn out<'g>(g: &'g mut Option<WriteGuard<'_>>) -> Result<&'g mut [u8]> {
    g.as_deref_mut().ok_or_else(missing)
}

/// A rank's guarded output, read (the input of an in-place call).
fn out_ref<'g>(g: &'g Option<WriteGuard<'_>>) -> Result<&'g [u8]> {
    g.as_deref().ok_or_else(missing)
}

/// `t[off..off + s.len()] = s`.
fn copy(t: &mut Option<WriteGuard<'_>>, off: usize, s: &[u8]) -> Result<()> {
    stream::copy(&mut out(t)?[off..off + s.len()], s);
    Ok(())
}

/// The op's reduction, as the host device runs it.
struct Kernel<'a> {
    desc: &'a OpDesc,
    n: usize,
    /// How its reductions write their destinations (`run` decides from the buffers' size).
    store: kernels::Store,
}

impl Kernel<'_> {
    /// `d = acc (op) srcs...` (`d` itself as the accumulator when `acc` is `None`: in place),
    /// then the average's division by the world size.
    fn reduce(&self, d: &mut [u8], acc: Option<&[u8]>, srcs: &[&[u8]]) -> Result<()> {
        let dtype = self.desc.dtype;
        if srcs.is_empty() {
            // One rank: its own input.
            if let Some(a) = acc {
                stream::copy(d, a);
            }
        } else {
            let combine = self.desc.op.map_or(Combine::Sum, ReduceOp::combine);
            kernels::reduce_many_with(dtype, combine, d, acc, srcs, self.store)?;
        }
        if self.desc.op == Some(ReduceOp::Avg) {
            kernels::scale(dtype, Scale::DivBy(self.n as u64), d, None)?;
        }
        Ok(())
    }
}
