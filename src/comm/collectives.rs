//! The public collective and point-to-point methods: each one only describes its call.

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
    /// # use ruccl::{Communicator, HostDevice, ReduceOp, Tensor, UniqueId};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let mut t = Tensor::from_slice(&dev, &[1i32, 2], &[2])?;
    /// comm.all_reduce(&mut t, ReduceOp::Max)?;
    /// assert_eq!(t.to_vec::<i32>()?, vec![1, 2]);
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

    /// Out-of-place all_reduce (`ncclAllReduce` with distinct buffers): `input` is left
    /// untouched and `output` (same element count and dtype) receives the result.
    ///
    /// # Errors
    /// As [`all_reduce`](Self::all_reduce); `InvalidArgument` when the sizes or dtypes differ.
    ///
    /// ```
    /// # use ruccl::{Communicator, HostDevice, ReduceOp, Tensor, UniqueId, DType};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let x = Tensor::from_slice(&dev, &[1.5f64], &[1])?;
    /// let mut y = Tensor::zeros(&dev, DType::F64, &[1])?;
    /// comm.all_reduce_into(&x, &mut y, ReduceOp::Avg)?;
    /// assert_eq!(y.to_vec::<f64>()?, vec![1.5]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_reduce_into(&self, input: &Tensor<D>, output: &mut Tensor<D>, op: ReduceOp) -> Result<()> {
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
    /// # use ruccl::{Communicator, HostDevice, Tensor, UniqueId};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let mut t = Tensor::from_slice(&dev, &[4u8], &[1])?;
    /// comm.broadcast(&mut t, 0)?;
    /// assert!(comm.broadcast(&mut t, 1).is_err());
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
    /// `output`; `input` is only read on the root.
    ///
    /// # Errors
    /// As [`broadcast`](Self::broadcast); `InvalidArgument` when the root's sizes differ.
    ///
    /// ```
    /// # use ruccl::{Communicator, HostDevice, Tensor, UniqueId, DType};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let x = Tensor::from_slice(&dev, &[4u8, 5], &[2])?;
    /// let mut y = Tensor::zeros(&dev, DType::U8, &[2])?;
    /// comm.broadcast_into(&x, &mut y, 0)?;
    /// assert_eq!(y.to_vec::<u8>()?, vec![4, 5]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn broadcast_into(&self, input: &Tensor<D>, output: &mut Tensor<D>, root: Rank) -> Result<()> {
        self.submit(Call {
            input: Some(input),
            output: Output::One(output),
            root: Some(root),
            ..Call::new(OpKind::Broadcast)
        })
    }

    /// Reduces `tensor` across ranks into `tensor` on `root` (`torch.distributed.reduce`);
    /// other ranks' tensors are left unchanged.
    ///
    /// # Errors
    /// As [`broadcast`](Self::broadcast).
    ///
    /// ```
    /// # use ruccl::{Communicator, HostDevice, ReduceOp, Tensor, UniqueId};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let mut t = Tensor::from_slice(&dev, &[3i64], &[1])?;
    /// comm.reduce(&mut t, ReduceOp::Prod, 0)?;
    /// assert_eq!(t.to_vec::<i64>()?, vec![3]);
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
    /// # use ruccl::{Communicator, HostDevice, ReduceOp, Tensor, UniqueId, DType};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let x = Tensor::from_slice(&dev, &[3i64], &[1])?;
    /// let mut y = Tensor::zeros(&dev, DType::I64, &[1])?;
    /// comm.reduce_into(&x, &mut y, ReduceOp::Sum, 0)?;
    /// assert_eq!(y.to_vec::<i64>()?, vec![3]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn reduce_into(&self, input: &Tensor<D>, output: &mut Tensor<D>, op: ReduceOp, root: Rank) -> Result<()> {
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
    /// # use ruccl::{Communicator, HostDevice, Tensor, UniqueId, DType};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let x = Tensor::from_slice(&dev, &[1.0f32, 2.0], &[2])?;
    /// let mut outs = vec![Tensor::zeros(&dev, DType::F32, &[2])?];
    /// comm.all_gather(&mut outs, &x)?;
    /// assert_eq!(outs[0].to_vec::<f32>()?, vec![1.0, 2.0]);
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
    /// # use ruccl::{Communicator, HostDevice, Tensor, UniqueId, DType};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let x = Tensor::from_slice(&dev, &[7u32], &[1])?;
    /// let mut y = Tensor::zeros(&dev, DType::U32, &[1])?;
    /// comm.all_gather_into_tensor(&mut y, &x)?;
    /// assert_eq!(y.to_vec::<u32>()?, vec![7]);
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
    /// # use ruccl::{Communicator, HostDevice, Tensor, UniqueId};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let mut y = Tensor::from_slice(&dev, &[7u32], &[1])?;
    /// comm.all_gather_into_tensor_in_place(&mut y)?;
    /// assert_eq!(y.to_vec::<u32>()?, vec![7]);
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
    /// # use ruccl::{Communicator, HostDevice, ReduceOp, Tensor, UniqueId, DType};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let x = Tensor::from_slice(&dev, &[2.0f32, 3.0], &[2])?;
    /// let mut y = Tensor::zeros(&dev, DType::F32, &[2])?;
    /// comm.reduce_scatter_tensor(&mut y, &x, ReduceOp::Sum)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![2.0, 3.0]);
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
    /// # use ruccl::{Communicator, HostDevice, ReduceOp, Tensor, UniqueId};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let mut t = Tensor::from_slice(&dev, &[2.0f32, 3.0], &[2])?;
    /// comm.reduce_scatter_tensor_in_place(&mut t, ReduceOp::Sum)?;
    /// assert_eq!(t.to_vec::<f32>()?, vec![2.0, 3.0]);
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
    /// # use ruccl::{Communicator, HostDevice, Tensor, UniqueId, DType};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let x = Tensor::from_slice(&dev, &[1i8, 2], &[2])?;
    /// let mut y = Tensor::zeros(&dev, DType::I8, &[2])?;
    /// comm.all_to_all_single(&mut y, &x)?;
    /// assert_eq!(y.to_vec::<i8>()?, vec![1, 2]);
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
    /// # use ruccl::{Communicator, HostDevice, Tensor, UniqueId};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let mut t = Tensor::from_slice(&dev, &[1i8, 2], &[2])?;
    /// comm.all_to_all_single_in_place(&mut t)?;
    /// assert_eq!(t.to_vec::<i8>()?, vec![1, 2]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_to_all_single_in_place(&self, tensor: &mut Tensor<D>) -> Result<()> {
        let t: &Tensor<D> = tensor;
        self.submit(Call { input: Some(t), output: Output::One(t), in_place: true, ..Call::new(OpKind::AllToAll) })
    }

    /// Gathers every rank's `input` into block `rank` of `output` on `root`
    /// (`torch.distributed.gather`). Only the root passes `Some(output)`; elsewhere it is
    /// ignored.
    ///
    /// # Errors
    /// `InvalidArgument` when the root passes no output or one of the wrong size.
    ///
    /// ```
    /// # use ruccl::{Communicator, HostDevice, Tensor, UniqueId, DType};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let x = Tensor::from_slice(&dev, &[5u64], &[1])?;
    /// let mut y = Tensor::zeros(&dev, DType::U64, &[1])?;
    /// comm.gather(&x, Some(&mut y), 0)?;
    /// assert_eq!(y.to_vec::<u64>()?, vec![5]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn gather(&self, input: &Tensor<D>, output: Option<&mut Tensor<D>>, root: Rank) -> Result<()> {
        let output = match output {
            Some(o) if self.rank == root => Output::One(o),
            _ => Output::None,
        };
        self.submit(Call { input: Some(input), output, root: Some(root), ..Call::new(OpKind::Gather) })
    }

    /// Sends block `k` of the root's `input` to rank `k`'s `output`
    /// (`torch.distributed.scatter`). Only the root passes `Some(input)`.
    ///
    /// # Errors
    /// `InvalidArgument` when the root passes no input or one of the wrong size.
    ///
    /// ```
    /// # use ruccl::{Communicator, HostDevice, Tensor, UniqueId, DType};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let x = Tensor::from_slice(&dev, &[5u64], &[1])?;
    /// let mut y = Tensor::zeros(&dev, DType::U64, &[1])?;
    /// comm.scatter(&mut y, Some(&x), 0)?;
    /// assert_eq!(y.to_vec::<u64>()?, vec![5]);
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
    /// `InvalidArgument` for a bad peer; `Mismatch` when the peer's receive disagrees.
    ///
    /// ```
    /// # use ruccl::{Communicator, HostDevice, Tensor, UniqueId};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let t = Tensor::from_slice(&dev, &[1u8], &[1])?;
    /// assert!(comm.send(&t, 0).is_err()); // cannot send to itself
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
    /// # use ruccl::{Communicator, HostDevice, Tensor, UniqueId, DType};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let mut t = Tensor::zeros(&dev, DType::U8, &[1])?;
    /// assert!(comm.recv(&mut t, 3).is_err()); // no rank 3
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
    /// # use ruccl::{Communicator, HostDevice, UniqueId};
    /// let comm = Communicator::new(HostDevice::default(), 1, UniqueId::new()?, 0)?;
    /// comm.barrier()?;
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn barrier(&self) -> Result<()> {
        self.submit(Call::new(OpKind::Barrier))
    }
}
