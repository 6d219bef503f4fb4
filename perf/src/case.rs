//! One half-row on one rank: the tensors a collective needs for a given count and placement,
//! how to fill them, the one ruCCL call that is timed, and what the result must be.
//!
//! Buffer sizes follow nccl-tests (`count` is the count passed to the call): all_gather and
//! gather receive `count * ranks`, reduce_scatter and scatter send `count * ranks`,
//! all_to_all sends and receives `count * ranks`; the rest move `count` each way. In-place
//! runs use one tensor of the larger size, laid out as NCCL's in-place convention.

use std::marker::PhantomData;

use ruccl::api::{self, PeerId};
use ruccl::{Communicator, Group, ReduceOp, Result, Tensor, Work};

use crate::check::{Gen, Num, count_wrong, tolerance};
use crate::device::PerfDevice;
use crate::run::Failure;
use crate::table::Coll;

/// The entry point a rank's timed call goes through.
pub enum Via<'a, D: PerfDevice> {
    /// A `Communicator` method.
    Comm(&'a Communicator<D>),
    /// The peer API, as this registered peer.
    Peer(PeerId),
}

// By hand: a derive would ask `D: Copy`, and only the reference is copied.
impl<D: PerfDevice> Clone for Via<'_, D> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<D: PerfDevice> Copy for Via<'_, D> {}

/// What one rank runs.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub coll: Coll,
    /// `None` for collectives that do not reduce.
    pub op: Option<ReduceOp>,
    pub root: usize,
    pub rank: usize,
    pub ranks: usize,
    pub count: usize,
    pub in_place: bool,
    /// `--nonblocking`: the call's `_async` form, then `Work::wait`.
    pub nonblocking: bool,
}

/// The elements of a rank's input and output for `coll` with count `c` among `n` ranks
/// (see the module docs).
pub fn lens(coll: Coll, c: usize, n: usize) -> (usize, usize) {
    match coll {
        Coll::AllReduce | Coll::Broadcast | Coll::Reduce | Coll::SendRecv => (c, c),
        Coll::AllGather | Coll::Gather => (c, c.saturating_mul(n)),
        Coll::ReduceScatter | Coll::Scatter => (c.saturating_mul(n), c),
        Coll::AllToAll | Coll::AllToAllV => (c.saturating_mul(n), c.saturating_mul(n)),
    }
}

/// The tensors of one half-row.
pub struct Case<T: Num, D: PerfDevice> {
    spec: Spec,
    /// Out-of-place input (absent in place, and on scatter's non-roots).
    input: Option<Tensor<D>>,
    /// The output, or the single in-place tensor.
    output: Tensor<D>,
    /// An empty tensor that stands in for `output` while the peer API holds it (in place).
    hole: Option<Tensor<D>>,
    /// all_to_allv's splits, out and in: `count` per peer.
    splits: Vec<usize>,
    _elem: PhantomData<fn() -> T>,
}

impl<T: Num, D: PerfDevice> Case<T, D> {
    /// Allocates zeroed tensors for `spec` on `dev`.
    pub fn new(dev: &D, spec: Spec) -> Result<Self> {
        let (c, n) = (spec.count, spec.ranks);
        let (in_len, out_len) = lens(spec.coll, c, n);
        let zeros = |len: usize| Tensor::zeros(dev, T::DTYPE, &[len]);
        let (input, output) = if spec.in_place {
            (None, zeros(in_len.max(out_len))?)
        } else if spec.coll == Coll::Scatter && spec.rank != spec.root {
            (None, zeros(out_len)?)
        } else {
            (Some(zeros(in_len)?), zeros(out_len)?)
        };
        let hole = Some(zeros(0)?);
        Ok(Case { spec, input, output, hole, splits: vec![c; n], _elem: PhantomData })
    }

    /// Writes this rank's inputs for `seed` and clears the output (so a stale result from
    /// an earlier run cannot pass the check).
    pub fn fill(&mut self, seed: u64) -> Result<()> {
        let s = self.spec;
        let g = Gen::new::<T>(s.op, s.ranks, seed);
        let r = s.rank;
        if s.in_place {
            // NCCL's in-place all_gather: this rank's block already sits at `rank`.
            let gather = s.coll == Coll::AllGather;
            write_pieces(&mut self.output, |j| match gather {
                true if j / s.count != r => T::default(),
                true => g.value(r, j % s.count),
                false => g.value(r, j),
            })
        } else {
            // Output first: after a peer-API broadcast the root's output *is* its input (the
            // API hands the sender's tensor back), and clearing it last would wipe the input.
            write_pieces(&mut self.output, |_| T::default())?;
            match &mut self.input {
                Some(input) => write_pieces(input, |j| g.value::<T>(r, j)),
                None => Ok(()),
            }
        }
    }

    /// Runs the collective once (the timed unit), through `via`.
    pub fn run(&mut self, via: Via<'_, D>) -> std::result::Result<(), Failure> {
        match via {
            Via::Comm(comm) => Ok(self.run_comm(comm)?),
            Via::Peer(peer) => self.run_peer(peer),
        }
    }

    fn run_comm(&mut self, comm: &Communicator<D>) -> Result<()> {
        let s = self.spec;
        if s.nonblocking {
            return self.issue(comm)?.into_iter().try_for_each(|w| w.wait());
        }
        let op = s.op.unwrap_or(ReduceOp::Sum);
        let out = &mut self.output;
        if s.in_place {
            return match s.coll {
                Coll::AllReduce => comm.all_reduce(out, op),
                Coll::AllGather => comm.all_gather_into_tensor_in_place(out),
                Coll::ReduceScatter => comm.reduce_scatter_tensor_in_place(out, op),
                Coll::Broadcast => comm.broadcast(out, s.root),
                Coll::Reduce => comm.reduce(out, op, s.root),
                Coll::AllToAll => comm.all_to_all_single_in_place(out),
                // The caller never asks: these have no in-place form.
                Coll::SendRecv | Coll::Gather | Coll::Scatter | Coll::AllToAllV => Ok(()),
            };
        }
        let Some(inp) = self.input.as_ref() else {
            // Only scatter's non-roots have no input.
            return comm.scatter(out, None, s.root);
        };
        match s.coll {
            Coll::AllReduce => comm.all_reduce_into(out, inp, op),
            Coll::AllGather => comm.all_gather_into_tensor(out, inp),
            Coll::ReduceScatter => comm.reduce_scatter_tensor(out, inp, op),
            Coll::Broadcast => comm.broadcast_into(out, Some(inp), s.root),
            Coll::Reduce => comm.reduce_into(out, inp, op, s.root),
            Coll::AllToAll => comm.all_to_all_single(out, inp),
            Coll::AllToAllV => comm.all_to_all_single_with_splits(out, inp, &self.splits, &self.splits),
            Coll::Gather => comm.gather(Some(out), inp, s.root),
            Coll::Scatter => comm.scatter(out, Some(inp), s.root),
            Coll::SendRecv => send_recv(comm, inp, out, s.rank, s.ranks),
        }
    }

    /// `--nonblocking`: issues the call's `_async` form (sendrecv: a send and a receive, as
    /// torch's `isend` and `irecv`), its handles to wait on.
    fn issue(&self, comm: &Communicator<D>) -> Result<Vec<Work>> {
        let s = self.spec;
        let op = s.op.unwrap_or(ReduceOp::Sum);
        let out = &self.output;
        let one = |w: Result<Work>| w.map(|w| vec![w]);
        if s.in_place {
            return one(match s.coll {
                Coll::AllReduce => comm.all_reduce_async(out, op),
                Coll::AllGather => comm.all_gather_into_tensor_in_place_async(out),
                Coll::ReduceScatter => comm.reduce_scatter_tensor_in_place_async(out, op),
                Coll::Broadcast => comm.broadcast_async(out, s.root),
                Coll::Reduce => comm.reduce_async(out, op, s.root),
                Coll::AllToAll => comm.all_to_all_single_in_place_async(out),
                // The caller never asks: these have no in-place form.
                Coll::SendRecv | Coll::Gather | Coll::Scatter | Coll::AllToAllV => return Ok(Vec::new()),
            });
        }
        let Some(inp) = self.input.as_ref() else {
            return one(comm.scatter_async(out, None, s.root));
        };
        one(match s.coll {
            Coll::AllReduce => comm.all_reduce_into_async(out, inp, op),
            Coll::AllGather => comm.all_gather_into_tensor_async(out, inp),
            Coll::ReduceScatter => comm.reduce_scatter_tensor_async(out, inp, op),
            Coll::Broadcast => comm.broadcast_into_async(out, Some(inp), s.root),
            Coll::Reduce => comm.reduce_into_async(out, inp, op, s.root),
            Coll::AllToAll => comm.all_to_all_single_async(out, inp),
            Coll::AllToAllV => comm.all_to_all_single_with_splits_async(out, inp, &self.splits, &self.splits),
            Coll::Gather => comm.gather_async(Some(out), inp, s.root),
            Coll::Scatter => comm.scatter_async(out, Some(inp), s.root),
            Coll::SendRecv => {
                let (next, prev) = ((s.rank + 1) % s.ranks, (s.rank + s.ranks - 1) % s.ranks);
                return Ok(vec![comm.send_async(inp, next)?, comm.recv_async(out, prev)?]);
            }
        })
    }

    /// The peer API's form. Out of place, the input is handed over as an alias of the same
    /// memory (so nothing is copied): the API leaves it as it was and returns a new tensor,
    /// which becomes the output. In place (all_reduce only), the output itself is handed over,
    /// its only handle, and the API returns the result in the same memory.
    fn run_peer(&mut self, peer: PeerId) -> std::result::Result<(), Failure> {
        let s = self.spec;
        let op = s.op.unwrap_or(ReduceOp::Sum);
        if s.in_place {
            if s.coll != Coll::AllReduce {
                return Err(Failure::Harness(format!("--api peer has no in-place {}", s.coll.name())));
            }
            let hole = self.hole.take().ok_or_else(|| Failure::Harness("the in-place tensor is gone".into()))?;
            let mine = std::mem::replace(&mut self.output, hole);
            let got = api::all_reduce::<D::Peer>(peer, mine, op)?;
            self.hole = Some(std::mem::replace(&mut self.output, got));
            return Ok(());
        }
        let Some(inp) = self.input.as_ref() else {
            return Err(Failure::Harness(format!("--api peer has no in-place {}", s.coll.name())));
        };
        let alias = || Tensor::from_buffer(inp.device(), inp.buffer().clone(), inp.dtype(), inp.shape());
        match s.coll {
            Coll::AllReduce => self.output = api::all_reduce::<D::Peer>(peer, alias()?, op)?,
            Coll::AllGather => self.output = api::all_gather::<D::Peer>(peer, alias()?)?,
            Coll::ReduceScatter => self.output = api::reduce_scatter::<D::Peer>(peer, alias()?, op)?,
            Coll::Broadcast => {
                let mine = (s.rank == s.root).then(alias).transpose()?;
                self.output = api::broadcast::<D::Peer>(peer, mine)?;
            }
            Coll::Reduce => {
                // Non-roots get nothing back; their (zeroed) output stays as the check expects.
                if let Some(t) = api::reduce::<D::Peer>(peer, alias()?, op, PeerId::from(s.root))? {
                    self.output = t;
                }
            }
            Coll::AllToAll | Coll::AllToAllV | Coll::SendRecv | Coll::Gather | Coll::Scatter => {
                return Err(Failure::Harness(format!("the peer API has no {}", s.coll.name())));
            }
        }
        Ok(())
    }

    /// Adds this rank's call to `group`, on `comm` (`--group`). The parser only lets
    /// through what [`Options::halves`](crate::args::Options::halves) says a group can run.
    pub fn push<'a>(
        &'a mut self,
        comm: &'a Communicator<D>,
        group: &mut Group<'a, D>,
    ) -> std::result::Result<(), Failure> {
        let s = self.spec;
        let op = s.op.unwrap_or(ReduceOp::Sum);
        let out = &mut self.output;
        // The same calls as `run_comm`, in their group form.
        if s.in_place {
            match s.coll {
                Coll::AllReduce => group.all_reduce(comm, out, op),
                Coll::AllGather => group.all_gather_into_tensor_in_place(comm, out),
                Coll::ReduceScatter => group.reduce_scatter_tensor_in_place(comm, out, op),
                Coll::Broadcast => group.broadcast(comm, out, s.root),
                Coll::Reduce => group.reduce(comm, out, op, s.root),
                Coll::AllToAll => group.all_to_all_single_in_place(comm, out),
                // The caller never asks: these have no in-place form.
                Coll::SendRecv | Coll::Gather | Coll::Scatter | Coll::AllToAllV => group,
            };
            return Ok(());
        }
        let Some(inp) = self.input.as_ref() else {
            // Only scatter's non-roots have no input.
            group.scatter(comm, out, None, s.root);
            return Ok(());
        };
        match s.coll {
            Coll::AllReduce => group.all_reduce_into(comm, out, inp, op),
            Coll::AllGather => group.all_gather_into_tensor(comm, out, inp),
            Coll::ReduceScatter => group.reduce_scatter_tensor(comm, out, inp, op),
            Coll::Broadcast => group.broadcast_into(comm, out, Some(inp), s.root),
            Coll::Reduce => group.reduce_into(comm, out, inp, op, s.root),
            Coll::AllToAll => group.all_to_all_single(comm, out, inp),
            Coll::AllToAllV => group.all_to_all_single_with_splits(comm, out, inp, &self.splits, &self.splits),
            Coll::Gather => group.gather(comm, Some(out), inp, s.root),
            Coll::Scatter => group.scatter(comm, out, Some(inp), s.root),
            // One group holds every rank's send and receive, so no ordering is needed.
            Coll::SendRecv => {
                let (next, prev) = ((s.rank + 1) % s.ranks, (s.rank + s.ranks - 1) % s.ranks);
                group.send(comm, inp, next).recv(comm, out, prev)
            }
        };
        Ok(())
    }

    /// Counts this rank's wrong elements after a run on inputs from [`fill`](Self::fill)
    /// with the same `seed`.
    pub fn wrong(&self, seed: u64) -> Result<u64> {
        let s = self.spec;
        let g = Gen::new::<T>(s.op, s.ranks, seed);
        let ulps = tolerance::<T>(s.op);
        let (c, r, n, root) = (s.count, s.rank, s.ranks, s.root);
        let op = s.op.unwrap_or(ReduceOp::Sum);
        let red = |j: usize| g.reduced::<T>(op, n, j);
        let all = 0..self.output.numel();
        let out = &self.output;
        match s.coll {
            Coll::AllReduce => wrong_in(out, all, ulps, red),
            Coll::AllGather => wrong_in(out, all, ulps, |j| g.value::<T>(j / c, j % c)),
            // In place, only block `rank` is defined afterwards.
            Coll::ReduceScatter if s.in_place => wrong_in(out, r * c..(r + 1) * c, ulps, |i| red(r * c + i)),
            Coll::ReduceScatter => wrong_in(out, all, ulps, |i| red(r * c + i)),
            Coll::Broadcast => wrong_in(out, all, ulps, |j| g.value::<T>(root, j)),
            Coll::Reduce if r == root => wrong_in(out, all, ulps, red),
            // Non-roots' buffers must be left alone.
            Coll::Reduce if s.in_place => wrong_in(out, all, 0, |j| g.value::<T>(r, j)),
            Coll::Reduce => wrong_in(out, all, 0, |_| T::default()),
            Coll::AllToAll | Coll::AllToAllV => wrong_in(out, all, ulps, |j| g.value::<T>(j / c, r * c + j % c)),
            Coll::Gather if r == root => wrong_in(out, all, ulps, |j| g.value::<T>(j / c, j % c)),
            Coll::Gather => wrong_in(out, all, 0, |_| T::default()),
            Coll::Scatter => wrong_in(out, all, ulps, |i| g.value::<T>(root, r * c + i)),
            Coll::SendRecv => wrong_in(out, all, ulps, |i| g.value::<T>((r + n - 1) % n, i)),
        }
    }
}

/// Elements a host copy holds at a time while a tensor is filled or checked: the harness
/// needs no host memory of a buffer's size besides the buffers themselves (a 1 GiB row on
/// 4 ranks would otherwise take 4 GiB more while filling).
const PIECE: usize = 1 << 18;

/// Writes `value(j)` into every element `j` of `t`, a piece at a time.
fn write_pieces<T: Num, D: PerfDevice>(t: &mut Tensor<D>, value: impl Fn(usize) -> T) -> Result<()> {
    let mut buf = Vec::with_capacity(PIECE.min(t.numel()));
    for start in (0..t.numel()).step_by(PIECE) {
        buf.clear();
        buf.extend((start..(start + PIECE).min(t.numel())).map(&value));
        t.write_at(start, &buf)?;
    }
    Ok(())
}

/// How many elements `j` of `t` in `range` are not `want(j - range.start)` (within `ulps`),
/// read a piece at a time.
fn wrong_in<T: Num, D: PerfDevice>(
    t: &Tensor<D>,
    range: std::ops::Range<usize>,
    ulps: u64,
    want: impl Fn(usize) -> T,
) -> Result<u64> {
    let mut buf = vec![T::default(); PIECE.min(range.len())];
    let mut wrong = 0;
    for at in range.clone().step_by(PIECE) {
        let got = &mut buf[..PIECE.min(range.end - at)];
        t.read_at(at, got)?;
        let base = at - range.start;
        wrong += count_wrong(got, ulps, |i| want(base + i));
    }
    Ok(wrong)
}

/// Sends `input` to rank `rank + 1` and receives from `rank - 1` (ring order), the two in
/// one group, as nccl-tests' sendrecv does (`ncclGroupStart`, `ncclSend`, `ncclRecv`,
/// `ncclGroupEnd`): they move together. The caller skips `n == 1`.
fn send_recv<D: PerfDevice>(
    comm: &Communicator<D>,
    input: &Tensor<D>,
    output: &mut Tensor<D>,
    rank: usize,
    n: usize,
) -> Result<()> {
    let (next, prev) = ((rank + 1) % n, (rank + n - 1) % n);
    let mut group = Group::new();
    group.send(comm, input, next).recv(comm, output, prev);
    group.run()
}
