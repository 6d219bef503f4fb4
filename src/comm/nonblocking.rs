//! The non-blocking form of every collective and point-to-point call: it checks its
//! arguments and takes its place in the rank's order at once, then runs on the rank's
//! progress thread while the caller goes on; the returned [`Work`] says when it is done.
//!
//! The op holds the tensors until it finishes, as with `torch.distributed`'s `async_op=True`
//! — but here the rule is checked: until [`Work::wait`] returns (or [`Work::is_completed`]
//! is true), the tensor's own methods ([`Tensor::to_vec`], [`Tensor::copy_from_slice`],
//! [`Tensor::try_clone`]) refuse to read an output or write an input with `InvalidArgument`
//! naming the op (reading an input is fine), whether the op is queued, waiting for its peers
//! or running. Another `Tensor` on the same memory ([`Tensor::from_buffer`]) is refused
//! alike, and so is a call of another communicator (another rank, a split) that would write
//! what the op uses or read what it writes: nothing orders the two (this communicator's own
//! later calls run after the op). So is [`Device::write`](crate::Device::write) or
//! [`Device::read`](crate::Device::read) of ruCCL's own devices on the tensor's buffer. Raw
//! access to the memory itself is not (there, [`mem::HostMem`](crate::mem::HostMem)'s own
//! guards refuse only an access that overlaps one of the op's reads or writes while that
//! runs).

use super::validate::Call;
use super::{Communicator, Work};
use crate::device::Device;
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::{Rank, ReduceOp};

impl<D: Device> Communicator<D> {
    /// Non-blocking [`all_reduce`](Self::all_reduce) (in place).
    ///
    /// # Errors
    /// `InvalidArgument` (and the sticky errors) at once; the op's own errors from
    /// [`Work::wait`].
    ///
    /// ```
    /// use ruccl::{Communicator, HostDevice, ReduceOp, Tensor, UniqueId};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let t = Tensor::from_slice(&dev, &[2.0f32], &[1])?;
    /// let work = comm.all_reduce_async(&t, ReduceOp::Sum)?;
    /// // ... compute something else ...
    /// work.wait()?;
    /// assert_eq!(t.to_vec::<f32>()?, vec![2.0]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_reduce_async(&self, tensor: &Tensor<D>, op: ReduceOp) -> Result<Work> {
        self.issue(Call::all_reduce(tensor, op))
    }

    /// Non-blocking [`all_reduce_into`](Self::all_reduce_into).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn all_reduce_into_async(&self, output: &Tensor<D>, input: &Tensor<D>, op: ReduceOp) -> Result<Work> {
        self.issue(Call::all_reduce_into(output, input, op))
    }

    /// Non-blocking [`broadcast`](Self::broadcast).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn broadcast_async(&self, tensor: &Tensor<D>, root: Rank) -> Result<Work> {
        self.issue(Call::broadcast(tensor, root))
    }

    /// Non-blocking [`broadcast_into`](Self::broadcast_into).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn broadcast_into_async(&self, output: &Tensor<D>, input: Option<&Tensor<D>>, root: Rank) -> Result<Work> {
        self.issue(Call::broadcast_into(self.rank, output, input, root))
    }

    /// Non-blocking [`reduce`](Self::reduce).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn reduce_async(&self, tensor: &Tensor<D>, op: ReduceOp, root: Rank) -> Result<Work> {
        self.issue(Call::reduce(tensor, op, root))
    }

    /// Non-blocking [`reduce_into`](Self::reduce_into).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn reduce_into_async(&self, output: &Tensor<D>, input: &Tensor<D>, op: ReduceOp, root: Rank) -> Result<Work> {
        self.issue(Call::reduce_into(output, input, op, root))
    }

    /// Non-blocking [`all_gather`](Self::all_gather).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn all_gather_async(&self, outputs: &[Tensor<D>], input: &Tensor<D>) -> Result<Work> {
        self.issue(Call::all_gather(outputs, input))
    }

    /// Non-blocking [`all_gather_into_tensor`](Self::all_gather_into_tensor).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn all_gather_into_tensor_async(&self, output: &Tensor<D>, input: &Tensor<D>) -> Result<Work> {
        self.issue(Call::all_gather_into_tensor(output, input))
    }

    /// Non-blocking [`reduce_scatter_tensor`](Self::reduce_scatter_tensor).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn reduce_scatter_tensor_async(&self, output: &Tensor<D>, input: &Tensor<D>, op: ReduceOp) -> Result<Work> {
        self.issue(Call::reduce_scatter_tensor(output, input, op))
    }

    /// Non-blocking [`all_to_all_single`](Self::all_to_all_single).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn all_to_all_single_async(&self, output: &Tensor<D>, input: &Tensor<D>) -> Result<Work> {
        self.issue(Call::all_to_all_single(output, input))
    }

    /// Non-blocking [`all_gather_into_tensor_in_place`](Self::all_gather_into_tensor_in_place)
    /// (this rank's block of `output` is its input).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    ///
    /// ```
    /// use ruccl::{Communicator, HostDevice, Tensor, UniqueId};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let t = Tensor::from_slice(&dev, &[5i32, 6], &[2])?;
    /// comm.all_gather_into_tensor_in_place_async(&t)?.wait()?;
    /// assert_eq!(t.to_vec::<i32>()?, vec![5, 6]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_gather_into_tensor_in_place_async(&self, output: &Tensor<D>) -> Result<Work> {
        self.issue(Call::all_gather_into_tensor_in_place(output))
    }

    /// Non-blocking [`reduce_scatter_tensor_in_place`](Self::reduce_scatter_tensor_in_place)
    /// (this rank's block of `tensor` gets the result).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn reduce_scatter_tensor_in_place_async(&self, tensor: &Tensor<D>, op: ReduceOp) -> Result<Work> {
        self.issue(Call::reduce_scatter_tensor_in_place(tensor, op))
    }

    /// Non-blocking [`all_to_all_single_in_place`](Self::all_to_all_single_in_place).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn all_to_all_single_in_place_async(&self, tensor: &Tensor<D>) -> Result<Work> {
        self.issue(Call::all_to_all_single_in_place(tensor))
    }

    /// Non-blocking [`all_to_all_single_with_splits`](Self::all_to_all_single_with_splits)
    /// (the splits are read at once).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn all_to_all_single_with_splits_async(
        &self,
        output: &Tensor<D>,
        input: &Tensor<D>,
        output_splits: &[usize],
        input_splits: &[usize],
    ) -> Result<Work> {
        self.issue(Call::all_to_all_single_with_splits(output, input, output_splits, input_splits))
    }

    /// Non-blocking [`gather`](Self::gather).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn gather_async(&self, output: Option<&Tensor<D>>, input: &Tensor<D>, root: Rank) -> Result<Work> {
        self.issue(Call::gather(self.rank, output, input, root))
    }

    /// Non-blocking [`scatter`](Self::scatter).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn scatter_async(&self, output: &Tensor<D>, input: Option<&Tensor<D>>, root: Rank) -> Result<Work> {
        self.issue(Call::scatter(self.rank, output, input, root))
    }

    /// Non-blocking [`gather_into_list`](Self::gather_into_list) (`outputs` are written on
    /// the root only).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn gather_into_list_async(&self, outputs: Option<&[Tensor<D>]>, input: &Tensor<D>, root: Rank) -> Result<Work> {
        self.issue(Call::gather_into_list(self.rank, outputs, input, root))
    }

    /// Non-blocking [`scatter_from_list`](Self::scatter_from_list) (`inputs` are read on the
    /// root only).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn scatter_from_list_async(
        &self,
        output: &Tensor<D>,
        inputs: Option<&[Tensor<D>]>,
        root: Rank,
    ) -> Result<Work> {
        self.issue(Call::scatter_from_list(self.rank, output, inputs, root))
    }

    /// Non-blocking [`reduce_scatter`](Self::reduce_scatter).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn reduce_scatter_async(&self, output: &Tensor<D>, inputs: &[Tensor<D>], op: ReduceOp) -> Result<Work> {
        self.issue(Call::reduce_scatter(output, inputs, op))
    }

    /// Non-blocking [`all_to_all`](Self::all_to_all) (in place when `outputs` and `inputs` are
    /// one list).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    ///
    /// ```
    /// use ruccl::{Communicator, HostDevice, Tensor, UniqueId};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let blocks = vec![Tensor::from_slice(&dev, &[5u8, 6], &[2])?];
    /// comm.all_to_all_async(&blocks, &blocks)?.wait()?; // in place
    /// assert_eq!(blocks[0].to_vec::<u8>()?, vec![5, 6]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_to_all_async(&self, outputs: &[Tensor<D>], inputs: &[Tensor<D>]) -> Result<Work> {
        self.issue(Call::all_to_all(outputs, inputs))
    }

    /// Non-blocking [`barrier`](Self::barrier).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn barrier_async(&self) -> Result<Work> {
        self.issue(Call::barrier())
    }

    /// Non-blocking [`send`](Self::send) (`torch.distributed.isend`); it finishes once the
    /// peer received it. A rank's consecutive sends and receives — non-blocking ones, and a
    /// blocking one issued behind them — move together, as in a [`Group`](crate::Group), so
    /// torch's ring of `isend` to the next rank then `irecv` (or `recv`) from the previous
    /// completes. Any other op waits until they are done, and they wait for the ops issued
    /// before them; sends to one peer (and receives from one peer) keep their order.
    ///
    /// Where this differs from torch over NCCL (which runs them on streams of their own):
    /// - a collective issued between a send and its receive waits for the send, and so holds
    ///   the receive back: issue the receive before the collective, or wait for the send;
    /// - a send or receive that uses memory one issued before it writes (or writes memory one
    ///   reads) waits for it, in issue order: a relay (receive into a tensor, then send it on)
    ///   works, but a swap in place (both ranks send a tensor and receive into it) never
    ///   finishes: use separate tensors;
    /// - a [`Group`](crate::Group) waits for the rank's pending ops first; and a blocking
    ///   call that finds nothing pending runs alone, so a send or receive issued from another
    ///   thread meanwhile waits for it: from several threads, make them all non-blocking.
    ///
    /// A `Timeout` says when this rank held a call back for one of these reasons.
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    ///
    /// ```
    /// # use ruccl::{Communicator, DType, HostDevice, Tensor, UniqueId};
    /// # fn on_ranks<T: Send>(n: usize, f: impl Fn(Communicator<HostDevice>) -> ruccl::Result<T> + Sync) -> ruccl::Result<Vec<T>> {
    /// #     let (id, f) = (UniqueId::new()?, &f);
    /// #     std::thread::scope(|s| {
    /// #         let ranks: Vec<_> = (0..n).map(|r| { let id = id.clone(); s.spawn(move || f(Communicator::new(HostDevice::default(), n, id, r)?)) }).collect();
    /// #         ranks.into_iter().map(|r| r.join().expect("a rank panicked")).collect()
    /// #     })
    /// # }
    /// // Every rank sends to the next before it receives from the previous.
    /// let out = on_ranks(3, |comm| {
    ///     let (dev, rank, world) = (*comm.device(), comm.rank(), comm.world_size());
    ///     let mine = Tensor::from_slice(&dev, &[rank as u32], &[1])?;
    ///     let got = Tensor::zeros(&dev, DType::U32, &[1])?;
    ///     let send = comm.send_async(&mine, (rank + 1) % world)?;
    ///     comm.recv_async(&got, (rank + world - 1) % world)?.wait()?;
    ///     send.wait()?;
    ///     got.to_vec::<u32>()
    /// })?;
    /// assert_eq!(out, vec![vec![2], vec![0], vec![1]]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn send_async(&self, tensor: &Tensor<D>, peer: Rank) -> Result<Work> {
        self.issue(Call::send(tensor, peer))
    }

    /// Non-blocking [`recv`](Self::recv) (`torch.distributed.irecv`).
    ///
    /// # Errors
    /// As [`all_reduce_async`](Self::all_reduce_async).
    pub fn recv_async(&self, tensor: &Tensor<D>, peer: Rank) -> Result<Work> {
        self.issue(Call::recv(tensor, peer))
    }
}
