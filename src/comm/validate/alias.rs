//! Whether a call's tensors share memory, and whether that makes it in place or wrong: judged
//! by memory (the device's `mem_id`), never by which argument a tensor was passed as.

use super::{Call, Input, Name, Output, Tensors};
use crate::device::Device;
use crate::op::OpKind;
use crate::tensor::Tensor;
use crate::types::Rank;

/// Whether two tensors on `device` share at least one byte (judged by memory, its `mem_id`).
#[inline]
pub(crate) fn overlaps<D: Device>(device: &D, a: &Tensor<D>, b: &Tensor<D>) -> bool {
    let end = |t: &Tensor<D>| t.byte_offset() + t.byte_len();
    a.byte_len() > 0
        && b.byte_len() > 0
        && device.mem_id(a.buffer()) == device.mem_id(b.buffer())
        && a.byte_offset() < end(b)
        && b.byte_offset() < end(a)
}

/// Whether an out-of-place call's input and output share memory, judged by memory (the
/// device's `mem_id`), never by which argument a tensor was passed as. An output that is
/// exactly where the op's in-place form keeps its data — the input itself, or block `rank`
/// for all_gather / gather (input inside the output) and reduce_scatter / scatter (output
/// inside the input), as NCCL defines in place — runs in place (`Ok(true)`). Any other
/// overlap would let the op overwrite bytes it still has to read: an error naming the two.
#[inline]
pub(super) fn aliasing<D: Device>(call: &Call<'_, D>, rank: Rank, device: &D) -> std::result::Result<bool, String> {
    match (&call.input, &call.output) {
        (Input::List(_), _) | (_, Output::List(_)) => list_aliasing(call, rank, device),
        (Input::One(x), Output::One(y)) if overlaps(device, x, y) => aliased_one(call, rank, x, y),
        _ => Ok(false),
    }
}

/// [`aliasing`] of a call whose input and output are one tensor each, and overlap: in place
/// where the in-place form keeps the data, block `rank` of the larger tensor (a caller's
/// tensors all start at byte 0: there, only on rank 0) or the input itself; an error
/// otherwise.
#[inline(never)]
fn aliased_one<D: Device>(
    call: &Call<'_, D>,
    rank: Rank,
    x: &Tensor<D>,
    y: &Tensor<D>,
) -> std::result::Result<bool, String> {
    let start = |t: &Tensor<D>| t.byte_offset();
    let exact = match call.kind {
        OpKind::AllGather | OpKind::Gather => start(x) == start(y) + rank * x.byte_len(),
        OpKind::ReduceScatter | OpKind::Scatter => start(y) == start(x) + rank * y.byte_len(),
        _ => start(x) == start(y) && x.byte_len() == y.byte_len(),
    };
    if exact {
        return Ok(true);
    }
    Err(format!(
        "the output overlaps the input without being where the in-place form of {} keeps it (same memory, {} \
         and {} bytes): pass the same tensor for an in-place call, or disjoint tensors",
        call.kind.name(),
        x.byte_len(),
        y.byte_len()
    ))
}

/// [`aliasing`] of a call with a list. Outputs never share memory with each other (inputs,
/// only read, may). An output may be an input only where the in-place form keeps the data:
/// entry `rank` of the list — the input of all_gather and gather is `output[rank]`, the
/// output of reduce_scatter and scatter is `input[rank]` — or, for all_to_all, every
/// `output[k]` is `input[k]`; then the call runs in place. Any other overlap is an error.
fn list_aliasing<D: Device>(call: &Call<'_, D>, rank: Rank, device: &D) -> std::result::Result<bool, String> {
    let overlap = |a: &Tensor<D>, b: &Tensor<D>| overlaps(device, a, b);
    let same = |a: &Tensor<D>, b: &Tensor<D>| {
        overlap(a, b) && a.byte_offset() == b.byte_offset() && a.byte_len() == b.byte_len()
    };
    let (ins, outs) = (call.input.tensors(), call.output.tensors());
    let name = |x: &Tensors<'_, D>, what, k| Name(what, matches!(x, Tensors::List(_)).then_some(k));
    let (input, output) = (|k| name(&call.input, "input", k), |k| name(&call.output, "output", k));
    for (i, a) in outs.iter().enumerate() {
        if let Some(j) = outs[i + 1..].iter().position(|b| overlap(a, b)) {
            return Err(format!("{} and {} are the same memory", output(i), output(i + 1 + j)));
        }
    }
    // Every (input, output) pair that overlaps: none (out of place), or the in-place form's.
    let mut pairs = ins.iter().enumerate().flat_map(|(i, x)| {
        outs.iter().enumerate().filter(move |(_, y)| overlap(x, y)).map(move |(o, y)| (i, o, same(x, y)))
    });
    let Some(first) = pairs.next() else { return Ok(false) };
    let in_place = |(i, o, same): (usize, usize, bool)| {
        same && match (call.input, call.output) {
            (Input::List(_), Output::List(_)) => i == o,
            (Input::List(_), _) => i == rank,
            _ => o == rank,
        }
    };
    let wrong = std::iter::once(first).chain(pairs).find(|&p| !in_place(p));
    let all_to_all = call.kind == OpKind::AllToAll;
    match wrong {
        // all_to_all runs in place only when every block is.
        None if all_to_all && !ins.iter().zip(outs).all(|(x, y)| same(x, y)) => Err(format!(
            "{} is {} but not every output is its input: all_to_all of lists runs in place only when \
             output[k] is input[k] for every k, else on disjoint tensors",
            input(first.0),
            output(first.1)
        )),
        None => Ok(true),
        Some((i, o, _)) => Err(format!(
            "{} and {} share memory; in place, {}: pass disjoint tensors otherwise",
            input(i),
            output(o),
            match (call.input, call.output) {
                _ if all_to_all => "output[k] must be input[k] for every k".to_string(),
                (Input::List(_), _) => format!("rank {rank}'s output must be input[{rank}]"),
                _ => format!("rank {rank}'s input must be output[{rank}]"),
            }
        )),
    }
}
