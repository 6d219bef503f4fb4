//! The last calls a rank validated, remembered: a loop that repeats a few calls (a training
//! step's all_reduces, a benchmark) checks each in full once, then matches it field by field.
//! [`validate`] stays the one place that decides; this only skips re-deciding a call whose
//! every input to that decision is the same as last time's (its kind, reduce op, root, peer,
//! tags, and each tensor's device, dtype, element count, memory and offset in it), so a
//! remembered call binds exactly what [`validate`] would bind.
//!
//! What a repeat saves: validating a 16-byte exchanged op cost ~250 instructions; matching
//! it costs ~100, binding it ~30 (2 processes, callgrind: broadcast's non-root 1,576 -> 1,454
//! instructions an op, all_reduce 2,312 -> 2,163; PERFORMANCE.md, session 49). A call that
//! ran as an exchange keeps what that run worked out too ([`Again`]), and its repeats run
//! from it at once (`Communicator::again`).

use super::validate::{self, Call, Io, Tags, Tensors};
use crate::device::Device;
use crate::error::Result;
use crate::op::{Fingerprint, OpDesc, OpKind};
use crate::sched::{Binding, Lean};
use crate::types::{DType, Rank, ReduceOp};

/// One tensor of a call as validation sees it (`None`: no tensor).
#[derive(Clone, Copy, PartialEq)]
struct Side {
    mem: usize,
    off: usize,
    numel: usize,
    dtype: DType,
}

/// Every argument [`validate`] reads of a call of single tensors (a call with a list or
/// splits is never remembered).
#[derive(Clone, Copy)]
struct Key {
    kind: OpKind,
    op: Option<ReduceOp>,
    root: Option<Rank>,
    peer: Option<Rank>,
    in_place: bool,
    tags: Tags,
    input: Option<Side>,
    output: Option<Side>,
}

/// A call [`validate`] accepted, and what it decided: the op, and where each binding starts;
/// and, once the call ran as an exchange, what that run worked out ([`Again`]).
#[derive(Clone, Copy)]
pub(crate) struct Memo {
    key: Key,
    desc: OpDesc,
    input_base: usize,
    output_base: usize,
    input_elems: usize,
    again: Option<Again>,
}

/// What a call that ran as an exchange keeps for its repeats (`Communicator::again`): the
/// op's fingerprint and what the exchange derives from it, both functions of the op alone.
#[derive(Clone, Copy)]
pub(crate) struct Again {
    pub(crate) fp: Fingerprint,
    pub(crate) lean: Lean,
}

/// How many calls a rank remembers: a training step's few small collectives (the loss's
/// all_reduce, a flag's broadcast, a barrier) in turn each find theirs.
const KEPT: usize = 4;

/// The last [`KEPT`] calls a rank validated (each a [`Memo`]), the newest looked at first.
#[derive(Default)]
pub(crate) struct Memos {
    kept: [Option<Memo>; KEPT],
    /// Where the next call is remembered (the oldest's place).
    next: usize,
}

impl Memos {
    /// The memo of `call`, if it is one of the calls remembered.
    #[inline]
    pub(crate) fn find<D: Device>(&self, call: &Call<'_, D>, device: &D) -> Option<&Memo> {
        (1..=KEPT).find_map(|back| {
            let m = self.kept[(self.next + KEPT - back) % KEPT].as_ref()?;
            m.matches(call, device).then_some(m)
        })
    }

    /// Remembers `m` in the place of the oldest call.
    fn remember(&mut self, m: Memo) {
        self.kept[self.next] = Some(m);
        self.next = (self.next + 1) % KEPT;
    }

    /// Keeps `again` for every call remembered whose op is `desc` (what an exchange derives
    /// depends on the op alone).
    pub(crate) fn keep(&mut self, desc: &OpDesc, again: Again) {
        for m in self.kept.iter_mut().flatten() {
            if m.desc == *desc {
                m.again = Some(again);
            }
        }
    }
}

impl Memo {
    /// What the call's exchange kept, if it ran as one.
    #[inline]
    pub(crate) fn again(&self) -> Option<&Again> {
        self.again.as_ref()
    }

    /// Whether `call` is the call remembered ([`validate`] would decide as it did).
    #[inline]
    pub(crate) fn matches<D: Device>(&self, call: &Call<'_, D>, device: &D) -> bool {
        same(&self.key, call, device)
    }

    /// The input and output bindings of `call` (which [`matches`](Self::matches) the call
    /// remembered), as [`validate`] binds them.
    #[inline]
    pub(crate) fn bind<'a, D: Device, B>(
        &self,
        call: &Call<'a, D>,
        bind: impl Fn(&'a D::Buffer) -> B,
    ) -> (Binding<B>, Binding<B>) {
        let binding = |t: &Tensors<'a, D>, base: usize, side: Option<Side>| match (*t, side) {
            (Tensors::One(t), Some(s)) => Binding::Contig { buf: bind(t.buffer()), base, id: s.mem },
            _ => Binding::Unbound,
        };
        #[cfg(test)]
        HITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        (
            binding(&call.input, self.input_base, self.key.input),
            binding(&call.output, self.output_base, self.key.output),
        )
    }
}

/// `call`'s key: `None` for a call with a list or splits, or a tensor on another device
/// (left to [`validate`], which names it).
#[inline]
fn key<D: Device>(call: &Call<'_, D>, device: &D) -> Option<Key> {
    if call.splits.is_some() {
        return None;
    }
    let side = |t: &Tensors<'_, D>| -> Option<Option<Side>> {
        match *t {
            Tensors::None => Some(None),
            Tensors::One(t) if t.device().same_device(device) => Some(Some(Side {
                mem: device.mem_id(t.buffer()),
                off: t.byte_offset(),
                numel: t.numel(),
                dtype: t.dtype(),
            })),
            _ => None,
        }
    };
    Some(Key {
        kind: call.kind,
        op: call.op,
        root: call.root,
        peer: call.peer,
        in_place: call.in_place,
        tags: call.tags,
        input: side(&call.input)?,
        output: side(&call.output)?,
    })
}

/// Whether `call` is the call `k` describes: [`key`] of `call` equal to `k`, compared in
/// place, the cheapest fields first (building the key and comparing it as a whole, with
/// `Option`s' and floats' derived comparisons out of line, cost a 16-byte op ~200
/// instructions, nearly what validating it does).
#[inline]
fn same<D: Device>(k: &Key, call: &Call<'_, D>, device: &D) -> bool {
    let side = |t: &Tensors<'_, D>, s: &Option<Side>| match (*t, s) {
        (Tensors::None, None) => true,
        (Tensors::One(t), Some(s)) => {
            t.numel() == s.numel
                && t.byte_offset() == s.off
                && t.dtype() == s.dtype
                && device.mem_id(t.buffer()) == s.mem
                && t.device().same_device(device)
        }
        _ => false,
    };
    k.kind == call.kind
        && k.in_place == call.in_place
        && k.root == call.root
        && k.peer == call.peer
        && call.splits.is_none()
        && side(&call.input, &k.input)
        && side(&call.output, &k.output)
        && same_op(k.op, call.op)
        && same_tags(&k.tags, &call.tags)
}

/// `a == b`, the untagged case (every call but the peer API's and the composite calls'
/// steps) read off the discriminants alone: the derived comparison of the three `Option`s ran
/// out of line (~18 instructions a call).
#[inline]
fn same_tags(a: &Tags, b: &Tags) -> bool {
    let plain = |t: &Tags| t.algorithm.is_none() && t.shape.is_none() && t.part_of.is_none();
    if plain(a) { plain(b) } else { a == b }
}

/// `a == b`, with `PreMulSum`'s scalar compared by its bits (as the fingerprint does; a NaN
/// never reaches a memo, `validate` refuses it).
#[inline]
fn same_op(a: Option<ReduceOp>, b: Option<ReduceOp>) -> bool {
    match (a, b) {
        (Some(ReduceOp::PreMulSum(x)), Some(ReduceOp::PreMulSum(y))) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// [`validate`]s `call`, or binds it as `memo` says when `memo` holds the same call; a call
/// `validate` accepts is remembered in `memo` (an error leaves it as it was). No `memo`:
/// validated, remembered nowhere.
#[inline]
pub(crate) fn validate<'a, D: Device, B>(
    memo: Option<&mut Memos>,
    call: &Call<'a, D>,
    rank: Rank,
    world: usize,
    device: &D,
    bind: impl Fn(&'a D::Buffer) -> B,
) -> Result<(OpDesc, Io<B>)> {
    if let Some(m) = memo.as_ref().and_then(|memo| memo.find(call, device)) {
        let (input, output) = m.bind(call, bind);
        return Ok((m.desc, Io { input, output, input_elems: m.input_elems, blocks: None }));
    }
    let key = key(call, device);
    let (desc, io) = validate::validate(call, rank, world, device, bind)?;
    if let (Some(key), Some(memo)) = (key, memo) {
        let base = |b: &Binding<B>| match b {
            Binding::Contig { base, .. } => *base,
            _ => 0,
        };
        memo.remember(Memo {
            key,
            desc,
            input_base: base(&io.input),
            output_base: base(&io.output),
            input_elems: io.input_elems,
            again: None,
        });
    }
    Ok((desc, io))
}

/// How many calls a memo matched in this process (the tests check that they ran it).
#[cfg(test)]
pub(crate) static HITS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[cfg(test)]
#[path = "memo_tests.rs"]
mod tests;
