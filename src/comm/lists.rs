//! `torch.distributed`'s list forms of gather, scatter, reduce_scatter and all_to_all: one
//! tensor per rank instead of one tensor of `world_size` blocks (all_gather's list form is
//! in `blocks.rs`, beside its tensor forms). Each method only describes its call.
//!
//! A list form is the same op as its tensor form — the same descriptor and fingerprint, the
//! same plans, entry `k` of a list standing for block `k` — so a rank that calls one form and
//! a peer that calls the other agree, and get the same bits. An output may be an input only
//! where the in-place form keeps the data (entry `rank` of the list); other overlaps are
//! refused. The examples use the hidden `on_ranks` helper of `collectives.rs`.

use super::Communicator;
use super::validate::Call;
use crate::device::Device;
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::{Rank, ReduceOp};

impl<D: Device> Communicator<D> {
    /// Gathers every rank's `input` into `outputs[rank]` on `root`
    /// (`torch.distributed.gather` with a `gather_list`). Only the root needs the list: it
    /// must pass `Some` with one tensor per rank, each with the input's element count; other
    /// ranks' lists are ignored (pass `None`). The [`gather`](Self::gather) of a peer that
    /// passes one tensor is the same op.
    ///
    /// # Errors
    /// `InvalidArgument` when the root passes no list, one of the wrong length or with a
    /// tensor of the wrong element count or dtype, two outputs on the same memory, or an
    /// input that is an output other than `outputs[root]` (that one runs in place).
    ///
    /// ```
    /// # use ruccl::{Communicator, DType, HostDevice, ReduceOp, Tensor, UniqueId};
    /// # fn on_ranks<T: Send>(n: usize, f: impl Fn(Communicator<HostDevice>) -> ruccl::Result<T> + Sync) -> ruccl::Result<Vec<T>> {
    /// #     let (id, f) = (UniqueId::new()?, &f);
    /// #     std::thread::scope(|s| {
    /// #         let ranks: Vec<_> = (0..n).map(|r| { let id = id.clone(); s.spawn(move || f(Communicator::new(HostDevice::default(), n, id, r)?)) }).collect();
    /// #         ranks.into_iter().map(|r| r.join().expect("a rank panicked")).collect()
    /// #     })
    /// # }
    /// let out = on_ranks(3, |comm| {
    ///     let dev = *comm.device();
    ///     let x = Tensor::from_slice(&dev, &[comm.rank() as u32, 7], &[2])?;
    ///     let mut outs = (0..3).map(|_| Tensor::zeros(&dev, DType::U32, &[2])).collect::<ruccl::Result<Vec<_>>>()?;
    ///     let outputs = (comm.rank() == 1).then_some(&mut outs[..]); // root 1
    ///     comm.gather_into_list(outputs, &x, 1)?;
    ///     outs.iter().map(|t| t.to_vec::<u32>()).collect::<ruccl::Result<Vec<_>>>()
    /// })?;
    /// assert_eq!(out[1], vec![vec![0, 7], vec![1, 7], vec![2, 7]]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn gather_into_list(&self, outputs: Option<&mut [Tensor<D>]>, input: &Tensor<D>, root: Rank) -> Result<()> {
        self.submit(Call::gather_into_list(self.rank, outputs.map(|o| &*o), input, root))
    }

    /// Sends the root's `inputs[k]` to rank `k`'s `output` (`torch.distributed.scatter`
    /// with a `scatter_list`). Only the root needs the list: it must pass `Some` with one
    /// tensor per rank, each with the output's element count; other ranks' lists are ignored
    /// (pass `None`). The [`scatter`](Self::scatter) of a peer that passes one tensor is the
    /// same op.
    ///
    /// # Errors
    /// `InvalidArgument` when the root passes no list, one of the wrong length or with a
    /// tensor of the wrong element count or dtype, or an output that is an input other than
    /// `inputs[root]` (that one runs in place).
    ///
    /// ```
    /// # use ruccl::{Communicator, DType, HostDevice, ReduceOp, Tensor, UniqueId};
    /// # fn on_ranks<T: Send>(n: usize, f: impl Fn(Communicator<HostDevice>) -> ruccl::Result<T> + Sync) -> ruccl::Result<Vec<T>> {
    /// #     let (id, f) = (UniqueId::new()?, &f);
    /// #     std::thread::scope(|s| {
    /// #         let ranks: Vec<_> = (0..n).map(|r| { let id = id.clone(); s.spawn(move || f(Communicator::new(HostDevice::default(), n, id, r)?)) }).collect();
    /// #         ranks.into_iter().map(|r| r.join().expect("a rank panicked")).collect()
    /// #     })
    /// # }
    /// let out = on_ranks(3, |comm| {
    ///     let dev = *comm.device();
    ///     let inputs = (0..3).map(|k| Tensor::from_slice(&dev, &[10 * k as i64], &[1])).collect::<ruccl::Result<Vec<_>>>()?;
    ///     let mut y = Tensor::zeros(&dev, DType::I64, &[1])?;
    ///     comm.scatter_from_list(&mut y, (comm.rank() == 0).then_some(&inputs[..]), 0)?;
    ///     y.to_vec::<i64>()
    /// })?;
    /// assert_eq!(out, vec![vec![0], vec![10], vec![20]]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn scatter_from_list(&self, output: &mut Tensor<D>, inputs: Option<&[Tensor<D>]>, root: Rank) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call { sole, ..Call::scatter_from_list(self.rank, output, inputs, root) })
    }

    /// Reduces every rank's `inputs[k]` into rank `k`'s `output`
    /// (`torch.distributed.reduce_scatter`): `inputs` has one tensor per rank, each with the
    /// output's element count. The same op as
    /// [`reduce_scatter_tensor`](Self::reduce_scatter_tensor), with the input's blocks as
    /// separate tensors.
    ///
    /// # Errors
    /// `InvalidArgument` for a list of the wrong length, a tensor of the wrong element count
    /// or dtype, or an output that is an input other than `inputs[rank]` (that one runs in
    /// place).
    ///
    /// ```
    /// # use ruccl::{Communicator, DType, HostDevice, ReduceOp, Tensor, UniqueId};
    /// # fn on_ranks<T: Send>(n: usize, f: impl Fn(Communicator<HostDevice>) -> ruccl::Result<T> + Sync) -> ruccl::Result<Vec<T>> {
    /// #     let (id, f) = (UniqueId::new()?, &f);
    /// #     std::thread::scope(|s| {
    /// #         let ranks: Vec<_> = (0..n).map(|r| { let id = id.clone(); s.spawn(move || f(Communicator::new(HostDevice::default(), n, id, r)?)) }).collect();
    /// #         ranks.into_iter().map(|r| r.join().expect("a rank panicked")).collect()
    /// #     })
    /// # }
    /// let out = on_ranks(2, |comm| {
    ///     let dev = *comm.device();
    ///     let r = comm.rank() as f32;
    ///     let inputs = vec![Tensor::from_slice(&dev, &[1.0 + r, 2.0], &[2])?, Tensor::from_slice(&dev, &[3.0, 4.0 * r], &[2])?];
    ///     let mut y = Tensor::zeros(&dev, DType::F32, &[2])?;
    ///     comm.reduce_scatter(&mut y, &inputs, ReduceOp::Sum)?;
    ///     y.to_vec::<f32>()
    /// })?;
    /// assert_eq!(out, vec![vec![3.0, 4.0], vec![6.0, 4.0]]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn reduce_scatter(&self, output: &mut Tensor<D>, inputs: &[Tensor<D>], op: ReduceOp) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call { sole, ..Call::reduce_scatter(output, inputs, op) })
    }

    /// Sends `inputs[k]` to rank `k` and receives rank `k`'s into `outputs[k]`
    /// (`torch.distributed.all_to_all`): both lists have one tensor per rank, all of one
    /// element count. The same op as [`all_to_all_single`](Self::all_to_all_single), with
    /// the blocks as separate tensors. In place when every `outputs[k]` is `inputs[k]` (the
    /// same memory: [`Tensor::from_buffer`], or one list passed twice to
    /// [`all_to_all_async`](Self::all_to_all_async)).
    ///
    /// Blocks of different sizes per peer (which torch allows here) are
    /// [`all_to_all_single_with_splits`](Self::all_to_all_single_with_splits)'s: whether a
    /// call is even cannot be told from one rank's lists (a rank may exchange blocks of one
    /// size while its peers do not), and the two ops run different plans.
    ///
    /// # Errors
    /// `InvalidArgument` for a list of the wrong length, tensors of different element
    /// counts or dtypes, two outputs on the same memory, or an output that is an input
    /// other than as above.
    ///
    /// ```
    /// # use ruccl::{Communicator, DType, HostDevice, ReduceOp, Tensor, UniqueId};
    /// # fn on_ranks<T: Send>(n: usize, f: impl Fn(Communicator<HostDevice>) -> ruccl::Result<T> + Sync) -> ruccl::Result<Vec<T>> {
    /// #     let (id, f) = (UniqueId::new()?, &f);
    /// #     std::thread::scope(|s| {
    /// #         let ranks: Vec<_> = (0..n).map(|r| { let id = id.clone(); s.spawn(move || f(Communicator::new(HostDevice::default(), n, id, r)?)) }).collect();
    /// #         ranks.into_iter().map(|r| r.join().expect("a rank panicked")).collect()
    /// #     })
    /// # }
    /// let out = on_ranks(2, |comm| {
    ///     let dev = *comm.device();
    ///     let r = comm.rank() as i8;
    ///     // inputs[k] goes to rank k
    ///     let inputs = vec![Tensor::from_slice(&dev, &[10 * r], &[1])?, Tensor::from_slice(&dev, &[10 * r + 1], &[1])?];
    ///     let mut outputs = vec![Tensor::zeros(&dev, DType::I8, &[1])?, Tensor::zeros(&dev, DType::I8, &[1])?];
    ///     comm.all_to_all(&mut outputs, &inputs)?;
    ///     outputs.iter().map(|t| t.to_vec::<i8>()).collect::<ruccl::Result<Vec<_>>>()
    /// })?;
    /// assert_eq!(out, vec![vec![vec![0], vec![10]], vec![vec![1], vec![11]]]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_to_all(&self, outputs: &mut [Tensor<D>], inputs: &[Tensor<D>]) -> Result<()> {
        self.submit(Call::all_to_all(outputs, inputs))
    }
}
