//! The collectives whose tensors hold one block per rank — all_gather, reduce_scatter,
//! all_to_all, gather, scatter: each method only describes its call. Output first, input
//! second; the examples use the hidden `on_ranks` helper of `collectives.rs`.

use super::Communicator;
use super::validate::Call;
use crate::device::Device;
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::{Rank, ReduceOp};

impl<D: Device> Communicator<D> {
    /// Gathers every rank's `input` into `outputs[rank]` on every rank
    /// (`torch.distributed.all_gather`). `outputs` has one tensor per rank, each with the
    /// input's element count.
    ///
    /// # Errors
    /// `InvalidArgument` for a wrong list length or element count.
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
    ///     let x = Tensor::from_slice(&dev, &[comm.rank() as f32; 2], &[2])?;
    ///     let mut outs = vec![Tensor::zeros(&dev, DType::F32, &[2])?, Tensor::zeros(&dev, DType::F32, &[2])?];
    ///     comm.all_gather(&mut outs, &x)?;
    ///     outs.iter().map(|t| t.to_vec::<f32>()).collect::<ruccl::Result<Vec<_>>>()
    /// })?;
    /// assert_eq!(out, vec![vec![vec![0.0, 0.0], vec![1.0, 1.0]]; 2]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_gather(&self, outputs: &mut [Tensor<D>], input: &Tensor<D>) -> Result<()> {
        self.submit(Call::all_gather(outputs, input))
    }

    /// Gathers every rank's `input` into block `rank` of `output`, which holds
    /// `world_size * input.numel()` elements (`torch.distributed.all_gather_into_tensor`).
    ///
    /// # Errors
    /// `InvalidArgument` when `output` has the wrong size.
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
    ///     let x = Tensor::from_slice(&dev, &[10 * comm.rank() as u32], &[1])?;
    ///     let mut y = Tensor::zeros(&dev, DType::U32, &[3])?;
    ///     comm.all_gather_into_tensor(&mut y, &x)?;
    ///     y.to_vec::<u32>()
    /// })?;
    /// assert_eq!(out, vec![vec![0, 10, 20]; 3]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_gather_into_tensor(&self, output: &mut Tensor<D>, input: &Tensor<D>) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call { sole, ..Call::all_gather_into_tensor(output, input) })
    }

    /// In-place all-gather: this rank's contribution is already in block `rank` of `output`
    /// (as NCCL's in-place `ncclAllGather`, `sendbuff == recvbuff + rank * count`).
    ///
    /// # Errors
    /// `InvalidArgument` when `output`'s element count is not divisible by the world size.
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
    ///     let mut mine = vec![0u32; 2];
    ///     mine[comm.rank()] = 7 + comm.rank() as u32; // this rank's block
    ///     let mut y = Tensor::from_slice(&dev, &mine, &[2])?;
    ///     comm.all_gather_into_tensor_in_place(&mut y)?;
    ///     y.to_vec::<u32>()
    /// })?;
    /// assert_eq!(out, vec![vec![7, 8]; 2]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_gather_into_tensor_in_place(&self, output: &mut Tensor<D>) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call { sole, ..Call::all_gather_into_tensor_in_place(output) })
    }

    /// Reduces `input` (`world_size * output.numel()` elements) across ranks and leaves block
    /// `rank` of the result in `output` (`torch.distributed.reduce_scatter_tensor`).
    ///
    /// # Errors
    /// `InvalidArgument` when the sizes do not match.
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
    ///     let x = Tensor::from_slice(&dev, &[1.0f32, 2.0, 3.0, 4.0], &[4])?;
    ///     let mut y = Tensor::zeros(&dev, DType::F32, &[2])?;
    ///     comm.reduce_scatter_tensor(&mut y, &x, ReduceOp::Sum)?;
    ///     y.to_vec::<f32>()
    /// })?;
    /// assert_eq!(out, vec![vec![2.0, 4.0], vec![6.0, 8.0]]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn reduce_scatter_tensor(&self, output: &mut Tensor<D>, input: &Tensor<D>, op: ReduceOp) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call { sole, ..Call::reduce_scatter_tensor(output, input, op) })
    }

    /// In-place reduce-scatter: `tensor` holds `world_size` blocks; afterwards block `rank`
    /// holds this rank's reduced block (the others are unspecified).
    ///
    /// # Errors
    /// `InvalidArgument` when the element count is not divisible by the world size.
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
    ///     let mut t = Tensor::from_slice(&dev, &[1.0f32, 2.0], &[2])?;
    ///     comm.reduce_scatter_tensor_in_place(&mut t, ReduceOp::Sum)?;
    ///     Ok(t.to_vec::<f32>()?[comm.rank()])
    /// })?;
    /// assert_eq!(out, vec![2.0, 4.0]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn reduce_scatter_tensor_in_place(&self, tensor: &mut Tensor<D>, op: ReduceOp) -> Result<()> {
        let (tensor, sole) = tensor.lend_sole();
        self.submit(Call { sole, ..Call::reduce_scatter_tensor_in_place(tensor, op) })
    }

    /// Splits `input` into `world_size` equal blocks, sends block `k` to rank `k`, and
    /// concatenates the received blocks (by source rank) into `output`
    /// (`torch.distributed.all_to_all_single` with equal splits).
    ///
    /// # Errors
    /// `InvalidArgument` when the element count is not divisible by the world size or the
    /// sizes differ.
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
    ///     let x = Tensor::from_slice(&dev, &[10 * r, 10 * r + 1], &[2])?; // block k goes to rank k
    ///     let mut y = Tensor::zeros(&dev, DType::I8, &[2])?;
    ///     comm.all_to_all_single(&mut y, &x)?;
    ///     y.to_vec::<i8>()
    /// })?;
    /// assert_eq!(out, vec![vec![0, 10], vec![1, 11]]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_to_all_single(&self, output: &mut Tensor<D>, input: &Tensor<D>) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call { sole, ..Call::all_to_all_single(output, input) })
    }

    /// In-place all_to_all (stages in scratch memory the blocks that would be overwritten
    /// before their peer has read them: about half of them).
    ///
    /// # Errors
    /// As [`all_to_all_single`](Self::all_to_all_single).
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
    ///     let mut t = Tensor::from_slice(&dev, &[10 * r, 10 * r + 1], &[2])?;
    ///     comm.all_to_all_single_in_place(&mut t)?;
    ///     t.to_vec::<i8>()
    /// })?;
    /// assert_eq!(out, vec![vec![0, 10], vec![1, 11]]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_to_all_single_in_place(&self, tensor: &mut Tensor<D>) -> Result<()> {
        let (tensor, sole) = tensor.lend_sole();
        self.submit(Call { sole, ..Call::all_to_all_single_in_place(tensor) })
    }

    /// all_to_all with blocks of different sizes (`torch.distributed.all_to_all_single` with
    /// `output_split_sizes` and `input_split_sizes`; MPI's `Alltoallv`): `input_splits[k]`
    /// rows of `input`'s dimension 0 go to rank `k`, in rank order, and `output_splits[k]`
    /// rows from rank `k` land in `output`, in rank order. Each rank's `input_splits[k]` must
    /// equal rank `k`'s `output_splits[rank]`; rows of the input and the output have the same
    /// size. Out of place only.
    ///
    /// # Errors
    /// `InvalidArgument` when a split list does not have one entry per rank or does not add
    /// up to its tensor's rows, when rows differ in size, or when the input and output share
    /// memory; `Mismatch` (on both ranks) when a peer sends a block of another length than
    /// this rank's split expects.
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
    ///     // Rank 0 keeps 1 row and sends 2 to rank 1; rank 1 sends 1 to rank 0 and keeps none.
    ///     let (input, input_splits, output_splits) = match comm.rank() {
    ///         0 => (vec![1u8, 2, 3], [1, 2], [1, 1]),
    ///         _ => (vec![9], [1, 0], [2, 0]),
    ///     };
    ///     let x = Tensor::from_slice(&dev, &input, &[input.len()])?;
    ///     let mut y = Tensor::zeros(&dev, DType::U8, &[output_splits.iter().sum()])?;
    ///     comm.all_to_all_single_with_splits(&mut y, &x, &output_splits, &input_splits)?;
    ///     y.to_vec::<u8>()
    /// })?;
    /// assert_eq!(out, vec![vec![1, 9], vec![2, 3]]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_to_all_single_with_splits(
        &self,
        output: &mut Tensor<D>,
        input: &Tensor<D>,
        output_splits: &[usize],
        input_splits: &[usize],
    ) -> Result<()> {
        self.submit(Call::all_to_all_single_with_splits(output, input, output_splits, input_splits))
    }

    /// Gathers every rank's `input` into block `rank` of `output` on `root`
    /// (`torch.distributed.gather`). Only the root needs an output: it must pass `Some`, and
    /// other ranks' outputs are ignored.
    ///
    /// # Errors
    /// `InvalidArgument` when the root passes no output or one of the wrong size.
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
    ///     let x = Tensor::from_slice(&dev, &[comm.rank() as u64], &[1])?;
    ///     let mut y = Tensor::zeros(&dev, DType::U64, &[3])?;
    ///     let output = (comm.rank() == 2).then_some(&mut y); // root 2
    ///     comm.gather(output, &x, 2)?;
    ///     y.to_vec::<u64>()
    /// })?;
    /// assert_eq!(out[2], vec![0, 1, 2]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn gather(&self, output: Option<&mut Tensor<D>>, input: &Tensor<D>, root: Rank) -> Result<()> {
        let (output, sole) = Tensor::lend_sole_opt(output);
        self.submit(Call { sole, ..Call::gather(self.rank, output, input, root) })
    }

    /// Sends block `k` of the root's `input` to rank `k`'s `output`
    /// (`torch.distributed.scatter`). Only the root needs an input: it must pass `Some`, and
    /// other ranks' inputs are ignored.
    ///
    /// # Errors
    /// `InvalidArgument` when the root passes no input or one of the wrong size.
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
    ///     let x = Tensor::from_slice(&dev, &[5u64, 6, 7], &[3])?;
    ///     let mut y = Tensor::zeros(&dev, DType::U64, &[1])?;
    ///     comm.scatter(&mut y, (comm.rank() == 0).then_some(&x), 0)?;
    ///     y.to_vec::<u64>()
    /// })?;
    /// assert_eq!(out, vec![vec![5], vec![6], vec![7]]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn scatter(&self, output: &mut Tensor<D>, input: Option<&Tensor<D>>, root: Rank) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call { sole, ..Call::scatter(self.rank, output, input, root) })
    }
}
