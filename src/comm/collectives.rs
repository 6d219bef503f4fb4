//! The public collective and point-to-point methods: each one only describes its call.
//!
//! Every method takes its output first and its input second, as NCCL and `torch.distributed`
//! do. The examples run each rank on its own thread through a hidden helper,
//! `on_ranks(world, |comm| ...)`, which does what the [`Communicator`] example shows: one
//! thread per rank, each joining with the same `UniqueId`, each rank's result returned in
//! rank order.

use super::Communicator;
use super::validate::{Call, Output};
use crate::device::Device;
use crate::error::Result;
use crate::op::OpKind;
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
        let t: &Tensor<D> = tensor;
        self.submit(Call {
            input: Some(t),
            output: Output::One(t),
            op: Some(op),
            in_place: true,
            ..Call::new(OpKind::AllReduce)
        })
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
        self.submit(Call {
            input: Some(input),
            output: Output::One(output),
            op: Some(op),
            ..Call::new(OpKind::AllReduce)
        })
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
        let t: &Tensor<D> = tensor;
        self.submit(Call {
            input: Some(t),
            output: Output::One(t),
            root: Some(root),
            in_place: true,
            ..Call::new(OpKind::Broadcast)
        })
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
        let input = input.filter(|_| self.rank == root);
        self.submit(Call { input, output: Output::One(output), root: Some(root), ..Call::new(OpKind::Broadcast) })
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
        let t: &Tensor<D> = tensor;
        self.submit(Call {
            input: Some(t),
            output: Output::One(t),
            op: Some(op),
            root: Some(root),
            in_place: true,
            ..Call::new(OpKind::Reduce)
        })
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
        self.submit(Call {
            input: Some(input),
            output: Output::One(output),
            op: Some(op),
            root: Some(root),
            ..Call::new(OpKind::Reduce)
        })
    }

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
        self.submit(Call { input: Some(input), output: Output::List(outputs), ..Call::new(OpKind::AllGather) })
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
        self.submit(Call { input: Some(input), output: Output::One(output), ..Call::new(OpKind::AllGather) })
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
        let t: &Tensor<D> = output;
        self.submit(Call { input: Some(t), output: Output::One(t), in_place: true, ..Call::new(OpKind::AllGather) })
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
        self.submit(Call {
            input: Some(input),
            output: Output::One(output),
            op: Some(op),
            ..Call::new(OpKind::ReduceScatter)
        })
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
        let t: &Tensor<D> = tensor;
        self.submit(Call {
            input: Some(t),
            output: Output::One(t),
            op: Some(op),
            in_place: true,
            ..Call::new(OpKind::ReduceScatter)
        })
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
        self.submit(Call { input: Some(input), output: Output::One(output), ..Call::new(OpKind::AllToAll) })
    }

    /// In-place all_to_all (stages the input in scratch memory first).
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
        let t: &Tensor<D> = tensor;
        self.submit(Call { input: Some(t), output: Output::One(t), in_place: true, ..Call::new(OpKind::AllToAll) })
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
        let output = match output {
            Some(o) if self.rank == root => Output::One(o),
            _ => Output::None,
        };
        self.submit(Call { input: Some(input), output, root: Some(root), ..Call::new(OpKind::Gather) })
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
        let input = input.filter(|_| self.rank == root);
        self.submit(Call { input, output: Output::One(output), root: Some(root), ..Call::new(OpKind::Scatter) })
    }

    /// Sends `tensor` to `peer`, which must call [`recv`](Self::recv) with the same count and
    /// dtype. Returns once the peer has received the data (like NCCL, a send may wait for its
    /// matching receive).
    ///
    /// # Errors
    /// `InvalidArgument` for a bad peer (out of range, or this rank); `Mismatch` when the
    /// peer's receive disagrees.
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
    ///     let mut t = Tensor::from_slice(&dev, &[comm.rank() as u8 + 1; 3], &[3])?;
    ///     if comm.rank() == 0 {
    ///         comm.send(&t, 1)?;
    ///     } else {
    ///         comm.recv(&mut t, 0)?;
    ///     }
    ///     t.to_vec::<u8>()
    /// })?;
    /// assert_eq!(out, vec![vec![1; 3]; 2]); // rank 0's data on rank 1
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn send(&self, tensor: &Tensor<D>, peer: Rank) -> Result<()> {
        self.submit(Call { input: Some(tensor), peer: Some(peer), ..Call::new(OpKind::Send) })
    }

    /// Receives into `tensor` what `peer` sends with [`send`](Self::send).
    ///
    /// # Errors
    /// As [`send`](Self::send).
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
    /// // A ring: each rank sends to the next and receives from the previous (even ranks send
    /// // first, so that every send finds its receive).
    /// let out = on_ranks(4, |comm| {
    ///     let (dev, rank, world) = (*comm.device(), comm.rank(), comm.world_size());
    ///     let mine = Tensor::from_slice(&dev, &[rank as u32], &[1])?;
    ///     let mut got = Tensor::zeros(&dev, DType::U32, &[1])?;
    ///     let (next, prev) = ((rank + 1) % world, (rank + world - 1) % world);
    ///     if rank % 2 == 0 {
    ///         comm.send(&mine, next)?;
    ///         comm.recv(&mut got, prev)?;
    ///     } else {
    ///         comm.recv(&mut got, prev)?;
    ///         comm.send(&mine, next)?;
    ///     }
    ///     got.to_vec::<u32>()
    /// })?;
    /// assert_eq!(out, vec![vec![3], vec![0], vec![1], vec![2]]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn recv(&self, tensor: &mut Tensor<D>, peer: Rank) -> Result<()> {
        self.submit(Call { output: Output::One(tensor), peer: Some(peer), ..Call::new(OpKind::Recv) })
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
        self.submit(Call::new(OpKind::Barrier))
    }
}
