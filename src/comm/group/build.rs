//! [`Group`]'s builder methods: one per call of a [`Communicator`]'s blocking API, each
//! adding that call on the communicator it names. They take the same arguments in the same
//! order (output first), and the group checks them as the blocking methods do.

use super::Group;
use crate::comm::Communicator;
use crate::comm::validate::Call;
use crate::device::Device;
use crate::tensor::Tensor;
use crate::types::{Rank, ReduceOp};

impl<'a, D: Device> Group<'a, D> {
    /// [`Communicator::all_reduce`] on `comm`.
    pub fn all_reduce(&mut self, comm: &'a Communicator<D>, tensor: &'a mut Tensor<D>, op: ReduceOp) -> &mut Self {
        self.push(comm, Call::all_reduce(tensor, op))
    }

    /// [`Communicator::all_reduce_into`] on `comm`.
    pub fn all_reduce_into(
        &mut self,
        comm: &'a Communicator<D>,
        output: &'a mut Tensor<D>,
        input: &'a Tensor<D>,
        op: ReduceOp,
    ) -> &mut Self {
        self.push(comm, Call::all_reduce_into(output, input, op))
    }

    /// [`Communicator::broadcast`] on `comm`.
    pub fn broadcast(&mut self, comm: &'a Communicator<D>, tensor: &'a mut Tensor<D>, root: Rank) -> &mut Self {
        self.push(comm, Call::broadcast(tensor, root))
    }

    /// [`Communicator::reduce`] on `comm`.
    pub fn reduce(
        &mut self,
        comm: &'a Communicator<D>,
        tensor: &'a mut Tensor<D>,
        op: ReduceOp,
        root: Rank,
    ) -> &mut Self {
        self.push(comm, Call::reduce(tensor, op, root))
    }

    /// [`Communicator::all_gather_into_tensor`] on `comm`.
    pub fn all_gather_into_tensor(
        &mut self,
        comm: &'a Communicator<D>,
        output: &'a mut Tensor<D>,
        input: &'a Tensor<D>,
    ) -> &mut Self {
        self.push(comm, Call::all_gather_into_tensor(output, input))
    }

    /// [`Communicator::reduce_scatter_tensor`] on `comm`.
    pub fn reduce_scatter_tensor(
        &mut self,
        comm: &'a Communicator<D>,
        output: &'a mut Tensor<D>,
        input: &'a Tensor<D>,
        op: ReduceOp,
    ) -> &mut Self {
        self.push(comm, Call::reduce_scatter_tensor(output, input, op))
    }

    /// [`Communicator::all_to_all_single`] on `comm`.
    pub fn all_to_all_single(
        &mut self,
        comm: &'a Communicator<D>,
        output: &'a mut Tensor<D>,
        input: &'a Tensor<D>,
    ) -> &mut Self {
        self.push(comm, Call::all_to_all_single(output, input))
    }

    /// [`Communicator::all_to_all_single_with_splits`] on `comm`.
    pub fn all_to_all_single_with_splits(
        &mut self,
        comm: &'a Communicator<D>,
        output: &'a mut Tensor<D>,
        input: &'a Tensor<D>,
        output_splits: &'a [usize],
        input_splits: &'a [usize],
    ) -> &mut Self {
        self.push(comm, Call::all_to_all_single_with_splits(output, input, output_splits, input_splits))
    }

    /// [`Communicator::barrier`] on `comm`.
    pub fn barrier(&mut self, comm: &'a Communicator<D>) -> &mut Self {
        self.push(comm, Call::barrier())
    }

    /// [`Communicator::send`] on `comm`.
    pub fn send(&mut self, comm: &'a Communicator<D>, tensor: &'a Tensor<D>, peer: Rank) -> &mut Self {
        self.push(comm, Call::send(tensor, peer))
    }

    /// [`Communicator::recv`] on `comm`.
    pub fn recv(&mut self, comm: &'a Communicator<D>, tensor: &'a mut Tensor<D>, peer: Rank) -> &mut Self {
        self.push(comm, Call::recv(tensor, peer))
    }

    /// [`Communicator::broadcast_into`] on `comm` (`input` is read on the root only).
    pub fn broadcast_into(
        &mut self,
        comm: &'a Communicator<D>,
        output: &'a mut Tensor<D>,
        input: Option<&'a Tensor<D>>,
        root: Rank,
    ) -> &mut Self {
        self.push(comm, Call::broadcast_into(comm.rank(), output, input, root))
    }

    /// [`Communicator::reduce_into`] on `comm`.
    pub fn reduce_into(
        &mut self,
        comm: &'a Communicator<D>,
        output: &'a mut Tensor<D>,
        input: &'a Tensor<D>,
        op: ReduceOp,
        root: Rank,
    ) -> &mut Self {
        self.push(comm, Call::reduce_into(output, input, op, root))
    }

    /// [`Communicator::all_gather`] on `comm`: one output tensor per rank.
    pub fn all_gather(
        &mut self,
        comm: &'a Communicator<D>,
        outputs: &'a mut [Tensor<D>],
        input: &'a Tensor<D>,
    ) -> &mut Self {
        self.push(comm, Call::all_gather(outputs, input))
    }

    /// [`Communicator::all_gather_into_tensor_in_place`] on `comm`.
    pub fn all_gather_into_tensor_in_place(
        &mut self,
        comm: &'a Communicator<D>,
        output: &'a mut Tensor<D>,
    ) -> &mut Self {
        self.push(comm, Call::all_gather_into_tensor_in_place(output))
    }

    /// [`Communicator::reduce_scatter_tensor_in_place`] on `comm`.
    pub fn reduce_scatter_tensor_in_place(
        &mut self,
        comm: &'a Communicator<D>,
        tensor: &'a mut Tensor<D>,
        op: ReduceOp,
    ) -> &mut Self {
        self.push(comm, Call::reduce_scatter_tensor_in_place(tensor, op))
    }

    /// [`Communicator::all_to_all_single_in_place`] on `comm`.
    pub fn all_to_all_single_in_place(&mut self, comm: &'a Communicator<D>, tensor: &'a mut Tensor<D>) -> &mut Self {
        self.push(comm, Call::all_to_all_single_in_place(tensor))
    }

    /// [`Communicator::gather`] on `comm` (`output` is written on the root only).
    pub fn gather(
        &mut self,
        comm: &'a Communicator<D>,
        output: Option<&'a mut Tensor<D>>,
        input: &'a Tensor<D>,
        root: Rank,
    ) -> &mut Self {
        self.push(comm, Call::gather(comm.rank(), output.map(|o| &*o), input, root))
    }

    /// [`Communicator::scatter`] on `comm` (`input` is read on the root only).
    pub fn scatter(
        &mut self,
        comm: &'a Communicator<D>,
        output: &'a mut Tensor<D>,
        input: Option<&'a Tensor<D>>,
        root: Rank,
    ) -> &mut Self {
        self.push(comm, Call::scatter(comm.rank(), output, input, root))
    }

    /// [`Communicator::gather_into_list`] on `comm` (`outputs` are written on the root only).
    pub fn gather_into_list(
        &mut self,
        comm: &'a Communicator<D>,
        outputs: Option<&'a mut [Tensor<D>]>,
        input: &'a Tensor<D>,
        root: Rank,
    ) -> &mut Self {
        self.push(comm, Call::gather_into_list(comm.rank(), outputs.map(|o| &*o), input, root))
    }

    /// [`Communicator::scatter_from_list`] on `comm` (`inputs` are read on the root only).
    pub fn scatter_from_list(
        &mut self,
        comm: &'a Communicator<D>,
        output: &'a mut Tensor<D>,
        inputs: Option<&'a [Tensor<D>]>,
        root: Rank,
    ) -> &mut Self {
        self.push(comm, Call::scatter_from_list(comm.rank(), output, inputs, root))
    }

    /// [`Communicator::reduce_scatter`] on `comm`: one input tensor per rank.
    pub fn reduce_scatter(
        &mut self,
        comm: &'a Communicator<D>,
        output: &'a mut Tensor<D>,
        inputs: &'a [Tensor<D>],
        op: ReduceOp,
    ) -> &mut Self {
        self.push(comm, Call::reduce_scatter(output, inputs, op))
    }

    /// [`Communicator::all_to_all`] on `comm`: one output and one input tensor per rank.
    pub fn all_to_all(
        &mut self,
        comm: &'a Communicator<D>,
        outputs: &'a mut [Tensor<D>],
        inputs: &'a [Tensor<D>],
    ) -> &mut Self {
        self.push(comm, Call::all_to_all(outputs, inputs))
    }
}
