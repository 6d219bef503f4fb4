//! The collectives over one whole tensor per rank — all_reduce, broadcast, reduce — and
//! barrier: each method only describes its call.
//!
//! Every method takes its output first and its input second, as NCCL and `torch.distributed`
//! do. The examples run each rank on its own thread through a hidden helper,
//! `on_ranks(world, |comm| ...)`, which does what the [`Communicator`] example shows: one
//! thread per rank, each joining with the same `UniqueId`, each rank's result returned in
//! rank order.

use super::Communicator;
use super::validate::Call;
use crate::device::Device;
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::{Rank, ReduceOp};

impl<D: Device> Communicator<D> {
    /// Reduces `tensor` across all ranks; every rank receives the result in place
    /// (`torch.distributed.all_reduce`).
    ///
    /// # Errors
    /// `InvalidArgument` for a tensor on another device; `Mismatch`, `Timeout`, `PeerLost`,
    /// `Aborted` as described in the crate docs.
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
    /// let out = on_ranks(4, |comm| {
    ///     let dev = *comm.device();
    ///     let mut t = Tensor::from_slice(&dev, &[comm.rank() as i32, 1], &[2])?;
    ///     comm.all_reduce(&mut t, ReduceOp::Sum)?;
    ///     t.to_vec::<i32>()
    /// })?;
    /// assert_eq!(out, vec![vec![6, 4]; 4]); // 0 + 1 + 2 + 3, and 4 x 1, on every rank
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_reduce(&self, tensor: &mut Tensor<D>, op: ReduceOp) -> Result<()> {
        let (tensor, sole) = tensor.lend_sole();
        self.submit(Call { sole, ..Call::all_reduce(tensor, op) })
    }

    /// Out-of-place all_reduce (`ncclAllReduce` with distinct buffers): `output` (same element
    /// count and dtype as `input`) receives the result and `input` is left untouched.
    ///
    /// # Errors
    /// As [`all_reduce`](Self::all_reduce); `InvalidArgument` when the sizes or dtypes differ.
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
    ///     let x = Tensor::from_slice(&dev, &[comm.rank() as f64], &[1])?;
    ///     let mut y = Tensor::zeros(&dev, DType::F64, &[1])?;
    ///     comm.all_reduce_into(&mut y, &x, ReduceOp::Avg)?;
    ///     y.to_vec::<f64>()
    /// })?;
    /// assert_eq!(out, vec![vec![0.5]; 2]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_reduce_into(&self, output: &mut Tensor<D>, input: &Tensor<D>, op: ReduceOp) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call { sole, ..Call::all_reduce_into(output, input, op) })
    }

    /// Copies `tensor` of rank `root` into `tensor` on every rank (`torch.distributed.broadcast`).
    ///
    /// # Errors
    /// `InvalidArgument` for a root out of range; collective errors as for
    /// [`all_reduce`](Self::all_reduce).
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
    ///     let mut t = Tensor::from_slice(&dev, &[comm.rank() as u8; 2], &[2])?;
    ///     comm.broadcast(&mut t, 1)?;
    ///     t.to_vec::<u8>()
    /// })?;
    /// assert_eq!(out, vec![vec![1, 1]; 3]); // rank 1's data everywhere
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn broadcast(&self, tensor: &mut Tensor<D>, root: Rank) -> Result<()> {
        let (tensor, sole) = tensor.lend_sole();
        self.submit(Call { sole, ..Call::broadcast(tensor, root) })
    }

    /// Out-of-place broadcast (`ncclBroadcast`): the root's `input` lands in every rank's
    /// `output`. Only the root needs an input: it must pass `Some`, and other ranks' inputs
    /// are ignored.
    ///
    /// # Errors
    /// As [`broadcast`](Self::broadcast); `InvalidArgument` when the root passes no input or
    /// one whose size or dtype differs from its output.
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
    ///     let mut y = Tensor::zeros(&dev, DType::U8, &[2])?;
    ///     if comm.rank() == 0 {
    ///         let x = Tensor::from_slice(&dev, &[4u8, 5], &[2])?;
    ///         comm.broadcast_into(&mut y, Some(&x), 0)?;
    ///     } else {
    ///         comm.broadcast_into(&mut y, None, 0)?;
    ///     }
    ///     y.to_vec::<u8>()
    /// })?;
    /// assert_eq!(out, vec![vec![4, 5]; 3]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn broadcast_into(&self, output: &mut Tensor<D>, input: Option<&Tensor<D>>, root: Rank) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call { sole, ..Call::broadcast_into(self.rank, output, input, root) })
    }

    /// Reduces `tensor` across ranks into `tensor` on `root` (`torch.distributed.reduce`);
    /// other ranks' tensors are left unchanged.
    ///
    /// # Errors
    /// As [`broadcast`](Self::broadcast).
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
    ///     let mut t = Tensor::from_slice(&dev, &[comm.rank() as i64 + 2], &[1])?;
    ///     comm.reduce(&mut t, ReduceOp::Prod, 0)?;
    ///     t.to_vec::<i64>()
    /// })?;
    /// assert_eq!(out, vec![vec![24], vec![3], vec![4]]); // 2 * 3 * 4 on the root only
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn reduce(&self, tensor: &mut Tensor<D>, op: ReduceOp, root: Rank) -> Result<()> {
        let (tensor, sole) = tensor.lend_sole();
        self.submit(Call { sole, ..Call::reduce(tensor, op, root) })
    }

    /// Out-of-place reduce (`ncclReduce`): `output` is written on `root` only.
    ///
    /// # Errors
    /// As [`reduce`](Self::reduce).
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
    ///     let x = Tensor::from_slice(&dev, &[3i64], &[1])?;
    ///     let mut y = Tensor::zeros(&dev, DType::I64, &[1])?;
    ///     comm.reduce_into(&mut y, &x, ReduceOp::Sum, 1)?;
    ///     y.to_vec::<i64>()
    /// })?;
    /// assert_eq!(out, vec![vec![0], vec![6]]); // written on root 1 only
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn reduce_into(&self, output: &mut Tensor<D>, input: &Tensor<D>, op: ReduceOp, root: Rank) -> Result<()> {
        let (output, sole) = output.lend_sole();
        self.submit(Call { sole, ..Call::reduce_into(output, input, op, root) })
    }

    /// Returns once every rank has called `barrier` (`torch.distributed.barrier`).
    ///
    /// # Errors
    /// `Timeout` naming the ranks that never arrived; `Mismatch` when a rank called something
    /// else.
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
    /// let out = on_ranks(3, |comm| comm.barrier())?;
    /// assert_eq!(out.len(), 3);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn barrier(&self) -> Result<()> {
        self.submit(Call::barrier())
    }
}
