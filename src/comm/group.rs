//! Group calls (NCCL's `ncclGroupStart/End`, torch's `batch_isend_irecv`): one thread issues
//! ops for several local ranks — one collective on every rank of a communicator made with
//! [`Communicator::init_all`], or a batch of sends and receives — and drives them together,
//! polling each until all are done. No OS thread per rank is needed, and a ring of sends and
//! receives in one group never deadlocks.

use std::sync::MutexGuard;

use super::validate::{Call, Io};
use super::work::Current;
use super::{Communicator, Local, Prepared};
use crate::device::Device;
use crate::error::Result;
use crate::op::OpDesc;
use crate::sched::{self, OpRun};
use crate::tensor::Tensor;
use crate::types::{Rank, ReduceOp};

/// A batch of calls on several communicators (typically every local rank of one
/// communicator), run together from one thread by [`run`](Self::run).
///
/// Each call takes the communicator it runs on; the same checks apply as for the blocking
/// methods, and a call that fails them fails the whole group before anything is sent.
///
/// ```
/// use ruccl::{CommConfig, Communicator, Group, HostDevice, Tensor};
/// let dev = HostDevice::default();
/// let comms = Communicator::init_all(vec![dev; 3], CommConfig::default())?;
/// // A ring of sends and receives, all issued from this thread.
/// let sends: Vec<_> = (0..3).map(|r| Tensor::from_slice(&dev, &[r as u32], &[1])).collect::<Result<_, _>>()?;
/// let mut recvs: Vec<_> = (0..3).map(|_| Tensor::zeros(&dev, ruccl::DType::U32, &[1])).collect::<Result<_, _>>()?;
/// let mut group = Group::new();
/// for (r, (s, t)) in sends.iter().zip(recvs.iter_mut()).enumerate() {
///     group.send(&comms[r], s, (r + 1) % 3).recv(&comms[r], t, (r + 2) % 3);
/// }
/// group.run()?;
/// assert_eq!(recvs[0].to_vec::<u32>()?, vec![2]);
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub struct Group<'a, D: Device> {
    calls: Vec<(&'a Communicator<D>, Call<'a, D>)>,
}

impl<D: Device> Default for Group<'_, D> {
    fn default() -> Self {
        Group { calls: Vec::new() }
    }
}

impl<D: Device> std::fmt::Debug for Group<'_, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Group({} calls)", self.calls.len())
    }
}

impl<'a, D: Device> Group<'a, D> {
    /// An empty group.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many calls the group holds.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Whether the group holds no call.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    fn push(&mut self, comm: &'a Communicator<D>, call: Call<'a, D>) -> &mut Self {
        self.calls.push((comm, call));
        self
    }

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

    /// Runs every call, from this thread, until all are done; the first error (in call
    /// order) if any failed.
    ///
    /// # Errors
    /// `InvalidArgument` when a call fails its checks (then nothing was run); otherwise the
    /// first failed call's error, as the blocking method would have returned it.
    pub fn run(self) -> Result<()> {
        // The first error in call order, without a list of every result.
        let mut first = Ok(());
        self.run_into(&mut |r| {
            if first.is_ok() {
                first = r;
            }
        })?;
        first
    }

    /// Runs every call like [`run`](Self::run), returning each call's own result.
    ///
    /// # Errors
    /// `InvalidArgument` when a call fails its checks (then nothing was run).
    pub fn run_each(self) -> Result<Vec<Result<()>>> {
        let mut results = Vec::with_capacity(self.calls.len());
        self.run_into(&mut |r| results.push(r))?;
        Ok(results)
    }

    /// Runs every call, handing each call's result to `each` in call order; `Err` (and no
    /// result handed) when a call fails its checks.
    fn run_into(self, each: &mut impl FnMut(Result<()>)) -> Result<()> {
        // Check every call first, so that an invalid one fails the group before anything is
        // sent (and before any sequence number is taken).
        type Few<T> = smallvec::SmallVec<[T; 8]>;
        // A Vec, not inline: each checked call is a few hundred bytes, and moving eight of
        // them inline through `collect` cost more than the allocation.
        let mut checked = self.calls.iter().map(|(comm, call)| comm.check(call)).collect::<Result<Vec<_>>>()?;
        // Each communicator's state stays locked while the group runs, as for a blocking
        // call; locks are taken in address order so that groups sharing communicators cannot
        // deadlock each other.
        let mut comms: Few<&'a Communicator<D>> = self.calls.iter().map(|(c, _)| *c).collect();
        comms.sort_by_key(|c| *c as *const Communicator<D> as usize);
        comms.dedup_by_key(|c| *c as *const Communicator<D> as usize);
        // Each communicator's driver is held while the group runs (so no progress thread
        // interleaves), after the non-blocking ops issued before the group have run.
        let _drivers: Few<MutexGuard<'a, Current<D>>> = comms
            .iter()
            .map(|c| {
                let mut d = c.engine.driving.lock().unwrap_or_else(|e| e.into_inner());
                if c.engine.has_queued(&d) {
                    c.engine.drain(&mut d);
                }
                d
            })
            .collect();
        let mut guards: Few<(usize, MutexGuard<'a, Local<D>>)> =
            comms.iter().map(|c| (*c as *const Communicator<D> as usize, c.lock())).collect();
        let local = |guards: &mut Few<(usize, MutexGuard<'a, Local<D>>)>, c: &Communicator<D>| {
            let key = c as *const Communicator<D> as usize;
            guards.iter_mut().position(|(k, _)| *k == key)
        };
        if run_direct(&self.calls, &mut checked, &mut guards, each).is_some() {
            return Ok(());
        }
        let mut ops: Vec<(&'a Communicator<D>, Result<Prepared<D>>)> = Vec::with_capacity(self.calls.len());
        for ((comm, _), checked) in self.calls.into_iter().zip(checked) {
            let prepared = match local(&mut guards, comm) {
                Some(i) => comm.prepare_checked(&mut guards[i].1, checked),
                None => Err(crate::error::CollectiveError::protocol("a group's communicator was not locked")),
            };
            ops.push((comm, prepared));
        }
        let mut runs: Vec<&mut OpRun<D>> =
            ops.iter_mut().filter_map(|(_, p)| p.as_mut().ok().map(|p| &mut p.run)).collect();
        let mut driven = sched::drive_all(&mut runs).into_iter();
        drop(runs);
        for (comm, prepared) in ops {
            each(match prepared {
                Err(e) => Err(e),
                Ok(mut p) => {
                    let r = driven.next().unwrap_or(Ok(()));
                    match local(&mut guards, comm) {
                        Some(i) => super::complete(&comm.shared, comm.rank, &mut guards[i].1, &mut p, r),
                        None => r,
                    }
                }
            });
        }
        Ok(())
    }
}

/// The group run without messages when it qualifies ([`local`](super::local)): one call per
/// communicator, each with its locked state, each result handed to `each`. `None` (and
/// `checked` left as it was, nothing handed) when it does not.
fn run_direct<'a, D: Device>(
    calls: &[(&'a Communicator<D>, Call<'a, D>)],
    checked: &mut [(OpDesc, Io<D::Buffer>)],
    guards: &mut [(usize, MutexGuard<'a, Local<D>>)],
    each: &mut impl FnMut(Result<()>),
) -> Option<()> {
    if guards.len() != calls.len() {
        return None;
    }
    type Few<T> = smallvec::SmallVec<[T; 8]>;
    // Pushed one by one: an `Option` collect's adapter cost more than these few words.
    let keys: Few<usize> = guards.iter().map(|(k, _)| *k).collect();
    let mut slots: Few<Option<&mut Local<D>>> = guards.iter_mut().map(|(_, g)| Some(&mut **g)).collect();
    let mut locals: Few<&mut Local<D>> = Few::new();
    let mut comms: Few<&Communicator<D>> = Few::new();
    for (c, _) in calls {
        let key = *c as *const Communicator<D> as usize;
        let i = keys.iter().position(|k| *k == key)?;
        locals.push(slots[i].take()?);
        comms.push(*c);
    }
    super::local::try_run(&comms, checked, &mut locals, each)
}
