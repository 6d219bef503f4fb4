//! How each public call is described: one constructor per collective and point-to-point
//! call, shared by the blocking methods of [`Communicator`](super::Communicator), the
//! non-blocking ones that return a [`Work`](super::Work), and [`Group`](super::Group) calls —
//! so all three describe a call the same way, and [`validate`](super::validate) checks it
//! once.

use super::validate::{Call, Input, Output};
use crate::device::Device;
use crate::op::OpKind;
use crate::tensor::Tensor;
use crate::types::{Rank, ReduceOp};

impl<'a, D: Device> Call<'a, D> {
    fn in_place(kind: OpKind, t: &'a Tensor<D>) -> Self {
        Call { input: Input::One(t), output: Output::One(t), in_place: true, ..Call::new(kind) }
    }

    fn into(kind: OpKind, output: &'a Tensor<D>, input: &'a Tensor<D>) -> Self {
        Call { input: Input::One(input), output: Output::One(output), ..Call::new(kind) }
    }

    pub(crate) fn all_reduce(t: &'a Tensor<D>, op: ReduceOp) -> Self {
        Call { op: Some(op), ..Self::in_place(OpKind::AllReduce, t) }
    }

    pub(crate) fn all_reduce_into(output: &'a Tensor<D>, input: &'a Tensor<D>, op: ReduceOp) -> Self {
        Call { op: Some(op), ..Self::into(OpKind::AllReduce, output, input) }
    }

    pub(crate) fn broadcast(t: &'a Tensor<D>, root: Rank) -> Self {
        Call { root: Some(root), ..Self::in_place(OpKind::Broadcast, t) }
    }

    /// `input` is only read on the root; elsewhere it is ignored.
    pub(crate) fn broadcast_into(rank: Rank, output: &'a Tensor<D>, input: Option<&'a Tensor<D>>, root: Rank) -> Self {
        Call {
            input: input.filter(|_| rank == root).map_or(Input::None, Input::One),
            output: Output::One(output),
            root: Some(root),
            ..Call::new(OpKind::Broadcast)
        }
    }

    pub(crate) fn reduce(t: &'a Tensor<D>, op: ReduceOp, root: Rank) -> Self {
        Call { op: Some(op), root: Some(root), ..Self::in_place(OpKind::Reduce, t) }
    }

    pub(crate) fn reduce_into(output: &'a Tensor<D>, input: &'a Tensor<D>, op: ReduceOp, root: Rank) -> Self {
        Call { op: Some(op), root: Some(root), ..Self::into(OpKind::Reduce, output, input) }
    }

    pub(crate) fn barrier() -> Self {
        Call::new(OpKind::Barrier)
    }

    pub(crate) fn all_gather(outputs: &'a [Tensor<D>], input: &'a Tensor<D>) -> Self {
        Call { input: Input::One(input), output: Output::List(outputs), ..Call::new(OpKind::AllGather) }
    }

    pub(crate) fn all_gather_into_tensor(output: &'a Tensor<D>, input: &'a Tensor<D>) -> Self {
        Self::into(OpKind::AllGather, output, input)
    }

    pub(crate) fn all_gather_into_tensor_in_place(t: &'a Tensor<D>) -> Self {
        Self::in_place(OpKind::AllGather, t)
    }

    pub(crate) fn reduce_scatter_tensor(output: &'a Tensor<D>, input: &'a Tensor<D>, op: ReduceOp) -> Self {
        Call { op: Some(op), ..Self::into(OpKind::ReduceScatter, output, input) }
    }

    pub(crate) fn reduce_scatter_tensor_in_place(t: &'a Tensor<D>, op: ReduceOp) -> Self {
        Call { op: Some(op), ..Self::in_place(OpKind::ReduceScatter, t) }
    }

    pub(crate) fn all_to_all_single(output: &'a Tensor<D>, input: &'a Tensor<D>) -> Self {
        Self::into(OpKind::AllToAll, output, input)
    }

    pub(crate) fn all_to_all_single_in_place(t: &'a Tensor<D>) -> Self {
        Self::in_place(OpKind::AllToAll, t)
    }

    pub(crate) fn all_to_all_single_with_splits(
        output: &'a Tensor<D>,
        input: &'a Tensor<D>,
        output_splits: &'a [usize],
        input_splits: &'a [usize],
    ) -> Self {
        Call { splits: Some([output_splits, input_splits]), ..Self::into(OpKind::AllToAllV, output, input) }
    }

    /// `output` is only written on the root; elsewhere it is ignored.
    pub(crate) fn gather(rank: Rank, output: Option<&'a Tensor<D>>, input: &'a Tensor<D>, root: Rank) -> Self {
        let output = match output {
            Some(o) if rank == root => Output::One(o),
            _ => Output::None,
        };
        Call { input: Input::One(input), output, root: Some(root), ..Call::new(OpKind::Gather) }
    }

    /// `outputs` are only written on the root; elsewhere they are ignored.
    pub(crate) fn gather_into_list(
        rank: Rank,
        outputs: Option<&'a [Tensor<D>]>,
        input: &'a Tensor<D>,
        root: Rank,
    ) -> Self {
        let output = outputs.filter(|_| rank == root).map_or(Output::None, Output::List);
        Call { input: Input::One(input), output, root: Some(root), ..Call::new(OpKind::Gather) }
    }

    /// `input` is only read on the root; elsewhere it is ignored.
    pub(crate) fn scatter(rank: Rank, output: &'a Tensor<D>, input: Option<&'a Tensor<D>>, root: Rank) -> Self {
        let input = input.filter(|_| rank == root).map_or(Input::None, Input::One);
        Call { input, output: Output::One(output), root: Some(root), ..Call::new(OpKind::Scatter) }
    }

    /// `inputs` are only read on the root; elsewhere they are ignored.
    pub(crate) fn scatter_from_list(
        rank: Rank,
        output: &'a Tensor<D>,
        inputs: Option<&'a [Tensor<D>]>,
        root: Rank,
    ) -> Self {
        let input = inputs.filter(|_| rank == root).map_or(Input::None, Input::List);
        Call { input, output: Output::One(output), root: Some(root), ..Call::new(OpKind::Scatter) }
    }

    pub(crate) fn reduce_scatter(output: &'a Tensor<D>, inputs: &'a [Tensor<D>], op: ReduceOp) -> Self {
        Call {
            input: Input::List(inputs),
            output: Output::One(output),
            op: Some(op),
            ..Call::new(OpKind::ReduceScatter)
        }
    }

    pub(crate) fn all_to_all(outputs: &'a [Tensor<D>], inputs: &'a [Tensor<D>]) -> Self {
        Call { input: Input::List(inputs), output: Output::List(outputs), ..Call::new(OpKind::AllToAll) }
    }

    pub(crate) fn send(t: &'a Tensor<D>, peer: Rank) -> Self {
        Call { input: Input::One(t), peer: Some(peer), ..Call::new(OpKind::Send) }
    }

    pub(crate) fn recv(t: &'a Tensor<D>, peer: Rank) -> Self {
        Call { output: Output::One(t), peer: Some(peer), ..Call::new(OpKind::Recv) }
    }
}
