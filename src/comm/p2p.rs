//! Point-to-point `send` and `recv`: each method only describes its call. The examples use
//! the hidden `on_ranks` helper of `collectives.rs`.

use super::Communicator;
use super::validate::Call;
use crate::device::Device;
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::Rank;

impl<D: Device> Communicator<D> {
    /// Sends `tensor` to `peer`, which must call [`recv`](Self::recv) with the same count and
    /// dtype. Returns once the peer has received the data, whatever its size (a send always
    /// waits for its matching receive: there is no eager send of small messages, as MPI's,
    /// so that a mismatch fails both calls). So a ring in which every rank makes a blocking
    /// send before it receives waits in a cycle and ends in `Timeout`. Make the send
    /// non-blocking ([`send_async`](Self::send_async), torch's `isend`), then receive: a rank's
    /// consecutive sends and receives move together; or put them in one
    /// [`Group`](crate::Group) (`batch_isend_irecv`); or let one rank receive first.
    ///
    /// # Errors
    /// `InvalidArgument` for a bad peer (out of range, or this rank: a send to self needs its
    /// receive from self in the same [`Group`](crate::Group), where the two are a copy);
    /// `Mismatch` when the peer's receive disagrees.
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
        self.submit(Call::send(tensor, peer))
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
        self.submit(Call::recv(tensor, peer))
    }
}
