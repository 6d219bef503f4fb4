//! The hooks the layers above `comm` need from a [`Communicator`] — the peer API
//! (`crate::api`) and gradient buckets (`crate::grad`) — and nothing else uses: collectives
//! whose descriptor carries [`Tags`] (the op's algorithm and shape digest, so ranks that
//! disagree on them get a `Mismatch` from the core's own message checks), and failing the
//! communicator on every rank when one rank's arguments were rejected.

use super::validate::{Call, Input, Output};
use super::{Communicator, Work};
use crate::device::Device;
use crate::error::{CollectiveError, Result};
use crate::op::OpKind;
use crate::tensor::Tensor;
use crate::types::{Rank, ReduceOp};

pub(crate) use super::validate::Tags;

/// A communicator whose next calls carry `tags`.
pub(crate) struct Tagged<'c, D: Device> {
    comm: &'c Communicator<D>,
    tags: Tags,
}

impl<D: Device> Communicator<D> {
    /// This communicator, for calls whose descriptors carry `tags`.
    pub(crate) fn tagged(&self, tags: Tags) -> Tagged<'_, D> {
        Tagged { comm: self, tags }
    }

    /// Fails this communicator on every rank with `err`, as the collective this rank was about
    /// to run: ranks waiting in (or entering) that collective report `err` relayed, naming this
    /// rank; every later call on any rank fails. Returns the error as this rank reports it.
    /// For a rank whose own arguments were rejected, so that its peers do not wait for it.
    pub(crate) fn fail(&self, err: CollectiveError) -> CollectiveError {
        let mut local = self.lock();
        let err = err.with_rank(self.rank).with_seq(local.seq);
        self.shared.link.poison(self.rank, err.clone());
        local.failed.get_or_insert_with(|| err.clone());
        err
    }

    /// The error the rank that failed first poisoned this communicator with, as this rank
    /// reports it when it stands in the same op (its kind kept, that rank named); `None`
    /// while no rank has failed.
    pub(crate) fn first_failure(&self) -> Option<CollectiveError> {
        self.shared.link.poisoned(self.rank).map(|e| e.relayed(self.rank))
    }
}

impl<D: Device> Tagged<'_, D> {
    fn submit(&self, call: Call<'_, D>) -> Result<()> {
        self.comm.submit(Call { tags: self.tags, ..call })
    }

    /// [`Communicator::all_reduce_async`] (in place), tagged.
    pub(crate) fn all_reduce_async(&self, tensor: &Tensor<D>, op: ReduceOp) -> Result<Work> {
        self.comm.issue(Call { tags: self.tags, ..Call::all_reduce(tensor, op) })
    }

    /// [`Communicator::all_reduce_into_async`], tagged.
    pub(crate) fn all_reduce_into_async(&self, output: &Tensor<D>, input: &Tensor<D>, op: ReduceOp) -> Result<Work> {
        self.comm.issue(Call { tags: self.tags, ..Call::all_reduce_into(output, input, op) })
    }

    /// [`Communicator::reduce_into_async`], tagged.
    pub(crate) fn reduce_into_async(
        &self,
        output: &Tensor<D>,
        input: &Tensor<D>,
        op: ReduceOp,
        root: Rank,
    ) -> Result<Work> {
        self.comm.issue(Call { tags: self.tags, ..Call::reduce_into(output, input, op, root) })
    }

    /// [`Communicator::broadcast_async`] (in place), tagged.
    pub(crate) fn broadcast_async(&self, tensor: &Tensor<D>, root: Rank) -> Result<Work> {
        self.comm.issue(Call { tags: self.tags, ..Call::broadcast(tensor, root) })
    }

    /// [`Communicator::all_reduce`] (in place), tagged.
    pub(crate) fn all_reduce(&self, tensor: &mut Tensor<D>, op: ReduceOp) -> Result<()> {
        let (tensor, sole) = tensor.lend_sole();
        self.submit(Call { sole, ..Call::all_reduce(tensor, op) })
    }

    /// [`Communicator::all_reduce_into`], tagged.
    pub(crate) fn all_reduce_into(&self, output: &mut Tensor<D>, input: &Tensor<D>, op: ReduceOp) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call {
            sole,
            input: Input::One(input),
            output: Output::One(output),
            op: Some(op),
            ..Call::new(OpKind::AllReduce)
        })
    }

    /// [`Communicator::reduce_into`], tagged.
    pub(crate) fn reduce_into(
        &self,
        output: &mut Tensor<D>,
        input: &Tensor<D>,
        op: ReduceOp,
        root: Rank,
    ) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call {
            sole,
            input: Input::One(input),
            output: Output::One(output),
            op: Some(op),
            root: Some(root),
            ..Call::new(OpKind::Reduce)
        })
    }

    /// [`Communicator::reduce`] (in place), tagged.
    pub(crate) fn reduce(&self, tensor: &mut Tensor<D>, op: ReduceOp, root: Rank) -> Result<()> {
        let (tensor, sole) = tensor.lend_sole();
        self.submit(Call { sole, ..Call::reduce(tensor, op, root) })
    }

    /// [`Communicator::broadcast`] (in place), tagged.
    pub(crate) fn broadcast(&self, tensor: &mut Tensor<D>, root: Rank) -> Result<()> {
        let (t, sole) = tensor.lend_sole();
        self.submit(Call {
            sole,
            input: Input::One(t),
            output: Output::One(t),
            root: Some(root),
            in_place: true,
            ..Call::new(OpKind::Broadcast)
        })
    }

    /// [`Communicator::all_gather_into_tensor`], tagged.
    pub(crate) fn all_gather_into_tensor(&self, output: &mut Tensor<D>, input: &Tensor<D>) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call {
            sole,
            input: Input::One(input),
            output: Output::One(output),
            ..Call::new(OpKind::AllGather)
        })
    }

    /// [`Communicator::gather`], tagged.
    pub(crate) fn gather(&self, output: Option<&mut Tensor<D>>, input: &Tensor<D>, root: Rank) -> Result<()> {
        let (output, sole) = Tensor::lend_sole_opt(output);
        self.submit(Call { tags: self.tags, sole, ..Call::gather(self.comm.rank, output, input, root) })
    }

    /// [`Communicator::scatter`], tagged.
    pub(crate) fn scatter(&self, output: &mut Tensor<D>, input: Option<&Tensor<D>>, root: Rank) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call { tags: self.tags, sole, ..Call::scatter(self.comm.rank, output, input, root) })
    }

    /// [`Communicator::reduce_scatter_tensor`], tagged.
    pub(crate) fn reduce_scatter_tensor(&self, output: &mut Tensor<D>, input: &Tensor<D>, op: ReduceOp) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call {
            sole,
            input: Input::One(input),
            output: Output::One(output),
            op: Some(op),
            ..Call::new(OpKind::ReduceScatter)
        })
    }
}
