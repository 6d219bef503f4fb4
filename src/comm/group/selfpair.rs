//! Sends to and receives from the rank itself, inside a group. NCCL allows them between
//! `ncclGroupStart/End` (torch's `all_to_all` over NCCL sends every rank its own block so),
//! and a user porting such a loop adds them here too: the k-th send a communicator adds to
//! its own rank pairs with the k-th receive it adds from its own rank, and the pair is one
//! device copy. No message and no sequence number are involved, so the copies run before the
//! group's other calls (once the non-blocking ops issued before the group have run, as for
//! any call); that order cannot matter, as a pair whose tensors another call of the same
//! communicator writes (or whose received tensor it reads) is refused. Outside a group
//! a send to self could never meet its receive: `validate` refuses it.

use std::time::Instant;

use super::super::Communicator;
use super::super::validate::{self, Call, Input, Output};
use crate::device::{Device, Range};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::op::OpKind;
use crate::tensor::Tensor;

/// One send to self and its receive from self.
pub(super) struct SelfCopy<'a, D: Device> {
    comm: &'a Communicator<D>,
    from: &'a Tensor<D>,
    to: &'a Tensor<D>,
    /// Where the send and the receive were added in the group's call order.
    pub(super) at: [usize; 2],
}

/// What a group runs: its calls but the pairs, each call's place in the group's call order
/// (empty when there are no pairs: the places are the positions), and the pairs.
pub(super) struct Split<'a, D: Device> {
    pub(super) calls: Vec<(&'a Communicator<D>, Call<'a, D>)>,
    pub(super) places: Vec<usize>,
    pub(super) pairs: Vec<SelfCopy<'a, D>>,
}

/// Whether `call` on `comm` sends to or receives from `comm`'s own rank: `Some(true)` for a
/// send, `Some(false)` for a receive.
fn to_self<D: Device>(comm: &Communicator<D>, call: &Call<'_, D>) -> Option<bool> {
    match call.kind {
        OpKind::Send | OpKind::Recv if call.peer == Some(comm.rank) => Some(call.kind == OpKind::Send),
        _ => None,
    }
}

/// The tensor a send reads or a receive writes.
fn tensor<'a, D: Device>(call: &Call<'a, D>) -> Option<&'a Tensor<D>> {
    match (call.output, call.input) {
        (Output::One(t), _) | (_, Input::One(t)) => Some(t),
        _ => None,
    }
}

/// Takes the sends to self and receives from self out of `calls` and pairs them.
///
/// # Errors
/// `InvalidArgument` naming the rank: a send to self without its receive (or the reverse),
/// a pair whose tensors differ in dtype, length or device or partly overlap, or one whose
/// tensors another call of the communicator in the group writes (or, the received one, reads).
pub(super) fn split<'a, D: Device>(calls: Vec<(&'a Communicator<D>, Call<'a, D>)>) -> Result<Split<'a, D>> {
    if !calls.iter().any(|(c, call)| to_self(c, call).is_some()) {
        return Ok(Split { calls, places: Vec::new(), pairs: Vec::new() });
    }
    // Per communicator (by address): its unpaired sends and receives to self, in call order.
    let mut open: Vec<(usize, Vec<usize>, Vec<usize>)> = Vec::new();
    let mut pairs = Vec::new();
    for (i, (comm, call)) in calls.iter().enumerate() {
        let Some(send) = to_self(comm, call) else { continue };
        let key = super::addr(comm);
        let k = match open.iter().position(|o| o.0 == key) {
            Some(k) => k,
            None => {
                open.push((key, Vec::new(), Vec::new()));
                open.len() - 1
            }
        };
        let o = &mut open[k];
        if send {
            o.1.push(i)
        } else {
            o.2.push(i)
        }
        if let (Some(&s), Some(&r)) = (o.1.first(), o.2.first()) {
            o.1.remove(0);
            o.2.remove(0);
            pairs.push(pair(&calls, s, r)?);
        }
    }
    if let Some((_, sends, recvs)) = open.iter().find(|o| !o.1.is_empty() || !o.2.is_empty()) {
        let i = sends.first().or(recvs.first()).copied().unwrap_or(0);
        let rank = calls[i].0.rank;
        let (what, missing) =
            if sends.is_empty() { ("receives from", "send to") } else { ("sends to", "receive from") };
        let op = if sends.is_empty() { "recv from itself" } else { "send to itself" };
        return Err(CollectiveError::invalid(format!(
            "rank {rank} {what} itself in this group (call #{i}, counting the group's calls from 0 in the order \
             they were added) without a matching {missing} itself: a send to self and a receive from self pair up \
             in the order they are added, and each pair is a local copy"
        ))
        .with_rank(rank)
        .with_op(format!("{op} (group call #{i})"))
        .on_usable_communicator());
    }
    let paired: Vec<usize> = pairs.iter().flat_map(|p: &SelfCopy<'a, D>| p.at).collect();
    let (mut rest, mut places) = (Vec::with_capacity(calls.len()), Vec::with_capacity(calls.len()));
    for (i, c) in calls.into_iter().enumerate() {
        if !paired.contains(&i) {
            rest.push(c);
            places.push(i);
        }
    }
    Ok(Split { calls: rest, places, pairs })
}

/// Calls `s` (a send to self) and `r` (a receive from self) of `calls` as a pair, checked.
fn pair<'a, D: Device>(calls: &[(&'a Communicator<D>, Call<'a, D>)], s: usize, r: usize) -> Result<SelfCopy<'a, D>> {
    let comm = calls[s].0;
    let (dev, rank) = (comm.device(), comm.rank);
    let fail = |msg: String| {
        CollectiveError::invalid(format!(
            "rank {rank}'s send to itself (call #{s}) and receive from itself (call #{r}; the group's calls \
             counted from 0 in the order they were added): {msg}"
        ))
        .with_rank(rank)
        .with_op(format!("send/recv to itself (group calls #{s} and #{r})"))
        .on_usable_communicator()
    };
    let (Some(from), Some(to)) = (tensor(&calls[s].1), tensor(&calls[r].1)) else {
        return Err(fail("a call without its tensor".to_string()));
    };
    if let Some(t) = [from, to].into_iter().find(|t| !t.device().same_device(dev)) {
        return Err(fail(format!(
            "a tensor is on {} but this communicator's device is {}",
            t.device().describe(),
            dev.describe()
        )));
    }
    if (from.dtype(), from.numel()) != (to.dtype(), to.numel()) {
        return Err(fail(format!(
            "{} x {} sent, {} x {} received: the two must match",
            from.numel(),
            from.dtype(),
            to.numel(),
            to.dtype()
        )));
    }
    let overlap = |a: &Tensor<D>, b: &Tensor<D>| validate::overlaps(dev, a, b);
    if overlap(from, to) && from.byte_offset() != to.byte_offset() {
        return Err(fail("the two tensors partly overlap: pass the same tensor, or disjoint ones".to_string()));
    }
    // Every other call of this communicator in the group: what it reads and what it writes.
    let key = super::addr(comm);
    for (i, (c, call)) in calls.iter().enumerate() {
        if i == s || i == r || super::addr(c) != key {
            continue;
        }
        let reads = call.input.tensors().iter().any(|x| overlap(x, to));
        let writes = call.output.tensors().iter().any(|o| overlap(o, to) || overlap(o, from));
        if reads || writes {
            return Err(fail(format!(
                "call #{i} ({}) {} the same memory, and the copy is not ordered with it: use other tensors, or \
                 another group",
                call.kind.name(),
                if writes { "writes" } else { "reads" }
            )));
        }
    }
    Ok(SelfCopy { comm, from, to, at: [s, r] })
}

/// Runs every pair's copy (all enqueued, then waited for with each communicator's deadline),
/// after the non-blocking ops its communicator issued earlier; each pair's result, for both
/// of its calls.
pub(super) fn copy_all<D: Device>(pairs: &[SelfCopy<'_, D>]) -> Vec<Result<()>> {
    pairs.iter().for_each(|p| super::drain_queued(p.comm));
    let label = |p: &SelfCopy<'_, D>| format!("send/recv({} x {}, to itself)", p.from.numel(), p.from.dtype());
    let enqueued: Vec<Result<Option<D::Event>>> = pairs
        .iter()
        .map(|p| {
            if !p.comm.is_usable() {
                return Err(CollectiveError::new(
                    ErrorKind::Aborted,
                    "this communicator failed earlier or was aborted; create a new one",
                )
                .with_rank(p.comm.rank)
                .with_op(label(p)));
            }
            let (from, to) = (p.from, p.to);
            if from.byte_len() == 0
                || p.comm.device().mem_id(from.buffer()) == p.comm.device().mem_id(to.buffer())
                    && from.byte_offset() == to.byte_offset()
            {
                return Ok(None);
            }
            let src = Range::new(from.buffer().clone(), from.byte_offset(), from.byte_len());
            let dst = Range::new(to.buffer().clone(), to.byte_offset(), to.byte_len());
            p.comm.device().copy(&src, &dst).map(Some)
        })
        .collect();
    pairs
        .iter()
        .zip(enqueued)
        .map(|(p, e)| {
            let deadline = Instant::now() + p.comm.config().timeout();
            let done = match e? {
                Some(ev) => p.comm.device().wait(&ev, Some(deadline)),
                None => Ok(()),
            };
            done.map_err(|e| e.with_rank(p.comm.rank).with_op(label(p)))
        })
        .collect()
}
