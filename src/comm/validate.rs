//! The one place that checks a caller's arguments. Every collective and point-to-point call
//! becomes a [`Call`], and [`validate`] turns it into an [`OpDesc`] plus buffer bindings or an
//! `InvalidArgument` error naming the op and the rank — before anything is sent, so the
//! communicator stays usable. Below this file a broken invariant is a bug, not a user error.

use crate::device::Device;
use crate::error::{CollectiveError, Result};
use crate::mem::Sole;
use crate::op::{OpDesc, OpKind};
use crate::sched::Binding;
use crate::tensor::Tensor;
use crate::types::{DType, Rank, ReduceOp};

mod alias;

use alias::aliasing;
pub(crate) use alias::overlaps;

/// An op's input or output: no tensor, one, or one per rank — the list forms (entry `k` is
/// rank `k`'s block: what goes to rank `k` in an input, what came from it in an output).
pub(crate) enum Tensors<'a, D: Device> {
    None,
    One(&'a Tensor<D>),
    List(&'a [Tensor<D>]),
}

/// What an op reads.
pub(crate) type Input<'a, D> = Tensors<'a, D>;
/// Where an op writes.
pub(crate) type Output<'a, D> = Tensors<'a, D>;

impl<D: Device> Clone for Tensors<'_, D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D: Device> Copy for Tensors<'_, D> {}

impl<'a, D: Device> Tensors<'a, D> {
    /// Its tensors: none, one, or the list.
    pub(crate) fn tensors(&self) -> &'a [Tensor<D>] {
        match *self {
            Tensors::None => &[],
            Tensors::One(t) => std::slice::from_ref(t),
            Tensors::List(l) => l,
        }
    }

    /// Its elements, all tensors together (`None` when there is no tensor).
    fn numel(&self) -> Option<usize> {
        match *self {
            Tensors::None => None,
            Tensors::One(t) => Some(t.numel()),
            Tensors::List(l) => Some(l.iter().map(Tensor::numel).sum()),
        }
    }
}

/// What a layer above `comm` adds to a call for the ranks to agree on (the peer API's
/// strategy and tensor shape); see [`OpDesc::algorithm`] and [`OpDesc::shape`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Tags {
    pub algorithm: Option<crate::config::Algorithm>,
    pub shape: Option<u64>,
    /// The composite call this op is a step of ([`crate::op::Composite`]).
    pub part_of: Option<crate::op::Composite>,
}

/// One call, as the public method received it. In-place calls pass the same tensor as
/// input and output.
pub(crate) struct Call<'a, D: Device> {
    pub kind: OpKind,
    pub input: Input<'a, D>,
    pub output: Output<'a, D>,
    pub op: Option<ReduceOp>,
    pub root: Option<Rank>,
    pub peer: Option<Rank>,
    pub in_place: bool,
    pub tags: Tags,
    /// `all_to_all_single_with_splits`'s output and input splits (rows of dimension 0 per
    /// peer), in torch's order.
    pub splits: Option<[&'a [usize]; 2]>,
    /// The caller's proof that it holds the output exclusively (a blocking method's `&mut`
    /// output: [`Tensor::lend_sole`]); an exchange then writes it without registering.
    pub sole: Sole<'a>,
}

impl<'a, D: Device> Call<'a, D> {
    pub(crate) fn new(kind: OpKind) -> Self {
        Call {
            kind,
            input: Input::None,
            output: Output::None,
            op: None,
            root: None,
            peer: None,
            in_place: false,
            tags: Tags::default(),
            splits: None,
            sole: Sole::none(),
        }
    }
}

/// The buffers a validated call binds to the plan's input and output slots: the call's own,
/// lent (`B = &Buffer`: an op run at once on the caller's stack borrows them for its whole
/// run), or handles of the op's own (an op that outlives the call: a queued `Work`, an
/// `OpRun`, a group's).
pub(crate) struct Io<B> {
    pub input: Binding<B>,
    pub output: Binding<B>,
    /// Elements of the input (for `PreMulSum`'s pre-scaled copy).
    pub input_elems: usize,
    /// `all_to_all_single_with_splits`'s blocks, (first element, length): one per peer in
    /// the input (what it sends), then one per peer in the output (what it receives).
    pub blocks: Option<Vec<(usize, usize)>>,
}

/// The whole numbers an integer dtype holds, as `lo..hi` in `f64` (`hi` excluded: 2^63 and
/// 2^64 are exact in `f64`, their predecessors are not); `None` for floats.
fn integer_bounds(dtype: DType) -> Option<(f64, f64)> {
    let two = |e: i32| 2f64.powi(e);
    Some(match dtype {
        DType::I8 => (-128.0, 128.0),
        DType::U8 => (0.0, 256.0),
        DType::I32 => (-two(31), two(31)),
        DType::U32 => (0.0, two(32)),
        DType::I64 => (-two(63), two(63)),
        DType::U64 => (0.0, two(64)),
        _ => return None,
    })
}

/// The op label of this call's errors: the [`OpDesc`] it describes, as every later message
/// about the call prints it (its count read off the arguments, which are not checked yet).
fn label<D: Device>(call: &Call<'_, D>, world: usize) -> String {
    let input = call.input.numel();
    let first_output = call.output.tensors().first();
    let output = match call.output {
        Output::List(_) => first_output.map(Tensor::numel),
        _ => call.output.numel(),
    };
    let per_rank = |total: Option<usize>| total.map(|t| t / world.max(1));
    // A total the ranks cannot split evenly is named as it is, not floored (a 5-element
    // all_to_all of 2 ranks read `all_to_all(2 x f32)`).
    let uneven = |total: Option<usize>| total.filter(|t| !t.is_multiple_of(world.max(1)));
    let (count, total) = match call.kind {
        OpKind::AllGather | OpKind::Split | OpKind::ReduceScatter if call.in_place => {
            (per_rank(output), uneven(output))
        }
        OpKind::AllToAll => (per_rank(input), uneven(input)),
        OpKind::AllToAllV => (input, None),
        OpKind::Broadcast | OpKind::Scatter | OpKind::Recv | OpKind::ReduceScatter => (output, None),
        _ => (input, None),
    };
    let dtype = call.input.tensors().first().or(first_output).map_or(DType::U8, Tensor::dtype);
    let desc = OpDesc {
        kind: call.kind,
        dtype,
        count: count.unwrap_or(0),
        op: call.op,
        root: call.root,
        peer: call.peer,
        in_place: call.in_place,
        algorithm: call.tags.algorithm,
        shape: call.tags.shape,
        part_of: call.tags.part_of,
    };
    let label = desc.to_string();
    match total {
        // The count is the first "N x dtype" the label holds.
        Some(t) => label.replacen(&format!("{} x {dtype}", desc.count), &format!("{t} x {dtype} in all"), 1),
        None => label,
    }
}

/// Checks `call` for `rank` of `world` on `device`; `bind` makes what the bindings hold of a
/// tensor's buffer (the buffer lent, or a handle of the op's own).
pub(crate) fn validate<'a, D: Device, B>(
    call: &Call<'a, D>,
    rank: Rank,
    world: usize,
    device: &D,
    bind: impl Fn(&'a D::Buffer) -> B,
) -> Result<(OpDesc, Io<B>)> {
    let fail = |msg: String| CollectiveError::invalid(msg).with_rank(rank).with_op(label(call, world));
    let n = world;
    // Ranks: the root's, then the peer's.
    let range =
        |what: &str, r: Rank| format!("{what} {r} is out of range for a communicator of {n} ranks (valid: 0..{n})");
    if let Some(r) = call.root
        && r >= n
    {
        return Err(fail(range("root", r)));
    }
    if let Some(r) = call.peer
        && r >= n
    {
        return Err(fail(range("peer", r)).with_peer(r));
    }
    if let Some(p) = call.peer
        && p == rank
    {
        return Err(fail(format!(
            "rank {rank} cannot {} itself outside a group: a send to self and a receive from self added to one \
             `Group` are a local copy (as between ncclGroupStart/End)",
            if call.kind == OpKind::Send { "send to" } else { "receive from" }
        ))
        .with_peer(p));
    }
    if let Some(ReduceOp::PreMulSum(s)) = call.op
        && !s.is_finite()
    {
        return Err(fail(format!("PreMulSum scalar {s} is not finite")));
    }
    // Devices and dtypes: every tensor's, named as an error names it. What the first tensor
    // was is kept as plain numbers (which side, which index) and named only for an error: a
    // `Name` copied per tensor out of the array below, just written, stalled a 16-byte op's
    // validation on a failed store forward (~5% of a rooted op with 4 ranks on one core).
    let name = |output: bool, list: bool, k: usize| Name(if output { "output" } else { "input" }, list.then_some(k));
    let mut dtype: Option<(DType, bool, bool, usize)> = None;
    for (output, x) in [(false, &call.input), (true, &call.output)] {
        let list = matches!(x, Tensors::List(_));
        for (k, t) in x.tensors().iter().enumerate() {
            if !t.device().same_device(device) {
                return Err(fail(format!(
                    "{} is on {} but this communicator's device is {}",
                    name(output, list, k),
                    t.device().describe(),
                    device.describe()
                )));
            }
            match dtype {
                None => dtype = Some((t.dtype(), output, list, k)),
                Some((d, o, l, i)) if d != t.dtype() => {
                    return Err(fail(format!(
                        "dtypes differ: {} is {d} but {} is {} (an op's tensors all hold one dtype)",
                        name(o, l, i),
                        name(output, list, k),
                        t.dtype()
                    )));
                }
                _ => {}
            }
        }
    }
    let dtype = dtype.map_or(DType::U8, |(d, ..)| d);
    if let Some(ReduceOp::PreMulSum(s)) = call.op
        && let Some((lo, hi)) = integer_bounds(dtype)
        && !(s.fract() == 0.0 && s >= lo && s < hi)
    {
        return Err(fail(format!(
            "PreMulSum scalar {s} is not a value of {dtype}: integer tensors are multiplied by the scalar in their \
             own type, so it must be a whole number from {lo} to below {hi}; scale float tensors instead"
        )));
    }
    let is_root = call.root == Some(rank);
    let in_n = call.input.numel();
    let out_one = match &call.output {
        Output::One(t) => Some(t.numel()),
        _ => None,
    };
    let need = |what: &str, got: Option<usize>, want: usize| -> Result<()> {
        if got == Some(want) { Ok(()) } else { Err(fail(missing(what, got, want))) }
    };
    // A list: one tensor per rank, each of `c` elements (`whose`: where `c` comes from).
    let per_rank = |what: &'static str, l: &[Tensor<D>], c: usize, whose: &str| -> Result<()> {
        if l.len() != n {
            return Err(fail(format!("{what} list has {} tensors, expected one per rank ({n})", l.len())));
        }
        match l.iter().enumerate().find(|(_, t)| t.numel() != c) {
            Some((k, t)) => {
                Err(fail(format!("{} has {} elements, expected {c} ({whose})", Name(what, Some(k)), t.numel())))
            }
            None => Ok(()),
        }
    };
    let count = match call.kind {
        OpKind::AllReduce => {
            let c = in_n.unwrap_or(0);
            need("output", out_one, c)?;
            c
        }
        OpKind::Broadcast => {
            let c = out_one.unwrap_or(0);
            if is_root {
                need("input on the root", in_n, c)?;
            }
            c
        }
        OpKind::Reduce => {
            let c = in_n.unwrap_or(0);
            if is_root {
                need("output on the root", out_one, c)?;
            }
            c
        }
        OpKind::AllGather | OpKind::Split if call.in_place => {
            let total = out_one.unwrap_or(0);
            if total % n != 0 {
                return Err(fail(format!("output has {total} elements, not divisible by the world size {n}")));
            }
            total / n
        }
        OpKind::AllGather | OpKind::Split => {
            let c = in_n.unwrap_or(0);
            match &call.output {
                Output::List(l) => per_rank("output", l, c, "the input's")?,
                _ => need("output", out_one, n * c)?,
            }
            c
        }
        OpKind::ReduceScatter => {
            if let Input::List(l) = call.input {
                let c = out_one.unwrap_or(0);
                per_rank("input", l, c, "the output's")?;
                c
            } else {
                let total = in_n.unwrap_or(0);
                if !total.is_multiple_of(n) {
                    return Err(fail(format!("input has {total} elements, not divisible by the world size {n}")));
                }
                let c = if call.in_place { total / n } else { out_one.unwrap_or(0) };
                need("input", in_n, n * c)?;
                c
            }
        }
        OpKind::AllToAll => {
            if let (Input::List(ins), Output::List(outs)) = (call.input, call.output) {
                let c = ins.first().map_or(0, Tensor::numel);
                let whose = "input[0]'s: all_to_all of lists moves blocks of one size; for blocks of different \
                             sizes use all_to_all_single_with_splits";
                per_rank("input", ins, c, whose)?;
                per_rank("output", outs, c, whose)?;
                c
            } else {
                let total = in_n.unwrap_or(0);
                if !total.is_multiple_of(n) {
                    return Err(fail(format!("input has {total} elements, not divisible by the world size {n}")));
                }
                need("output", out_one, total)?;
                total / n
            }
        }
        OpKind::Gather => {
            let c = in_n.unwrap_or(0);
            if is_root {
                match &call.output {
                    Output::List(l) => per_rank("output", l, c, "the input's")?,
                    _ => need("output on the root", out_one, n * c)?,
                }
            }
            c
        }
        OpKind::Scatter => {
            let c = out_one.unwrap_or(0);
            if is_root {
                match call.input {
                    Input::List(l) => per_rank("input", l, c, "the output's")?,
                    _ => need("input on the root", in_n, n * c)?,
                }
            }
            c
        }
        OpKind::AllToAllV => in_n.unwrap_or(0),
        OpKind::Send => in_n.unwrap_or(0),
        OpKind::Recv => out_one.unwrap_or(0),
        OpKind::Barrier => 0,
    };
    let blocks = if call.kind == OpKind::AllToAllV { Some(uneven(call, rank, n).map_err(fail)?) } else { None };
    let aliased = if call.in_place { false } else { aliasing(call, rank, device).map_err(fail)? };
    if aliased && call.kind == OpKind::AllToAllV {
        return Err(fail("the output is the input: all_to_all_single_with_splits runs out of place only".to_string()));
    }
    let desc = OpDesc {
        kind: call.kind,
        dtype,
        count,
        op: call.op,
        root: call.root,
        peer: call.peer,
        in_place: call.in_place || aliased,
        algorithm: call.tags.algorithm,
        shape: call.tags.shape,
        part_of: call.tags.part_of,
    };
    let size = dtype.size();
    let id = |t: &Tensor<D>| device.mem_id(t.buffer());
    let contig = |t: &'a Tensor<D>, base: usize| Binding::Contig {
        buf: bind(t.buffer()),
        base: t.byte_offset() + base * size,
        id: id(t),
    };
    // A list is one buffer per block of the plan's slot: every plan of an op with a list
    // keeps each span inside one block (`Bindings::locate` refuses one that crosses).
    let blocks_of = |l: &'a [Tensor<D>]| {
        // Views (`Tensor::narrow`) are the crate's own and never go in a list.
        debug_assert!(l.iter().all(|t| t.byte_offset() == 0));
        Binding::Blocks { bufs: l.iter().map(|t| (bind(t.buffer()), id(t))).collect(), block: count * size }
    };
    let input = match call.input {
        Input::None => Binding::Unbound,
        Input::One(t) if call.in_place && call.kind == OpKind::AllGather => contig(t, rank * count),
        Input::One(t) => contig(t, 0),
        Input::List(l) => blocks_of(l),
    };
    let output = match call.output {
        Output::None => Binding::Unbound,
        Output::One(t) if call.in_place && call.kind == OpKind::ReduceScatter => contig(t, rank * count),
        Output::One(t) => contig(t, 0),
        Output::List(l) => blocks_of(l),
    };
    Ok((desc, Io { input, output, input_elems: in_n.unwrap_or(0), blocks }))
}

/// What is wrong with `what`, which has `got` elements (`None`: no tensor) where the call
/// needs `want`.
#[cold]
#[inline(never)]
fn missing(what: &str, got: Option<usize>, want: usize) -> String {
    match got {
        Some(g) => format!("{what} has {g} elements, expected {want}"),
        None => format!("{what} is required on this rank"),
    }
}

/// A tensor of a call as errors name it: `input`, `output`, or entry `k` of a list
/// (`input[2]`).
#[derive(Clone, Copy)]
struct Name(&'static str, Option<usize>);

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.1 {
            Some(k) => write!(f, "{}[{k}]", self.0),
            None => f.write_str(self.0),
        }
    }
}

/// The blocks of `all_to_all_single_with_splits` on `rank` of `world` (see [`Io::blocks`]),
/// from its splits in rows of dimension 0, as torch counts them; or what is wrong with them.
fn uneven<D: Device>(call: &Call<'_, D>, rank: Rank, world: usize) -> std::result::Result<Vec<(usize, usize)>, String> {
    let (Some([out_splits, in_splits]), Input::One(x), Output::One(y)) = (call.splits, call.input, call.output) else {
        return Err("an input, an output and both splits are required".to_string());
    };
    // (rows of dimension 0, elements per row)
    let rows = |t: &Tensor<D>, what: &str| match t.shape().split_first() {
        Some((&rows, rest)) => Ok((rows, rest.iter().product::<usize>())),
        None => Err(format!("the {what} is a scalar: splits count rows of its dimension 0")),
    };
    let ((in_rows, in_row), (out_rows, out_row)) = (rows(x, "input")?, rows(y, "output")?);
    if in_row != out_row && in_rows > 0 && out_rows > 0 {
        return Err(format!(
            "a row of the input has {in_row} elements and one of the output {out_row}: rows are what the ranks \
             exchange, so they must be the same size"
        ));
    }
    let mut blocks = Vec::with_capacity(2 * world);
    for (what, splits, total, row) in [("input", in_splits, in_rows, in_row), ("output", out_splits, out_rows, out_row)]
    {
        if splits.len() != world {
            return Err(format!("{what}_splits has {} entries, expected one per rank ({world})", splits.len()));
        }
        let sum = splits.iter().try_fold(0usize, |a, &s| a.checked_add(s));
        if sum != Some(total) {
            let sum = sum.map_or_else(|| "more than usize::MAX".to_string(), |s| s.to_string());
            return Err(format!("{what}_splits add up to {sum} rows, but the {what} has {total} (its dimension 0)"));
        }
        let mut first = 0;
        for &s in splits {
            blocks.push((first * row, s * row));
            first += s;
        }
    }
    if in_splits[rank] != out_splits[rank] {
        return Err(format!(
            "input_splits[{rank}] is {} but output_splits[{rank}] is {}: the block rank {rank} keeps for itself is \
             copied, so the two must be equal",
            in_splits[rank], out_splits[rank]
        ));
    }
    Ok(blocks)
}
