//! Group calls (NCCL's `ncclGroupStart/End`, torch's `batch_isend_irecv`): one thread issues
//! ops for several local ranks — one collective on every rank of a communicator made with
//! [`Communicator::init_all`], or a batch of sends and receives — and drives them together,
//! polling each until all are done. No OS thread per rank is needed, and a ring of sends and
//! receives in one group never deadlocks.

mod ahead;
mod build;
mod selfpair;

use std::sync::MutexGuard;

use super::validate::{Call, Io};
use super::work::Current;
use super::{Communicator, Local, Prepared};
use crate::device::Device;
use crate::error::Result;
use crate::op::{OpDesc, OpKind};
use crate::sched::{self, OpRun};

/// A batch of calls on several communicators (typically every local rank of one
/// communicator), run together from one thread by [`run`](Self::run).
///
/// Each call takes the communicator it runs on; the same checks apply as for the blocking
/// methods, and a call that fails them fails the whole group before anything is sent. A
/// communicator may take several calls: they run in the order they were added (as its
/// blocking calls would), except that consecutive sends and receives run together, so a ring
/// of them never deadlocks — those to one peer (or from one peer) in order, and one that uses
/// memory an earlier one writes (or writes memory one reads) after it: a relay works, a swap
/// in place (a send of a tensor and a receive into it, on both ranks) never finishes. Every
/// rank must add its calls in the same order. A group first waits for its communicators'
/// pending non-blocking ops, except a group of only sends and receives, which joins them
/// instead, as a blocking send or receive does (an `isend`, then a group with its matching
/// receive, completes). A send to the communicator's own rank and a receive from it pair up, in the order they are added, and
/// are a local copy (NCCL allows them in a group; torch's all_to_all over NCCL sends every
/// rank its own block so); a pair whose tensors another call of the group also uses is
/// refused, as its place in that order would not be defined.
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

    /// Adds a call (the builder methods of `build.rs` name them).
    fn push(&mut self, comm: &'a Communicator<D>, call: Call<'a, D>) -> &mut Self {
        self.calls.push((comm, call));
        self
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
        // Sends to and receives from self become copies (`selfpair`), run once every other
        // call passed its checks.
        let selfpair::Split { calls, places, pairs } = selfpair::split(self.calls)?;
        // Check every call first, so that an invalid one fails the group before anything is
        // sent (and before any sequence number is taken). The checked calls lend the calls'
        // own buffers (they live as long as the group): the direct path borrows them, the
        // general path clones its handles below. Pushed one by one into inline storage: no
        // allocation, no reference count touched.
        let mut checked: Few<(OpDesc, Io<&'a D::Buffer>)> = Few::new();
        // Held while the group runs: no other thread's call on these communicators meanwhile.
        let mut entered: Few<super::caller::Entered<'a>> = Few::new();
        for (comm, call) in &calls {
            entered.push(comm.enter(|| format!("Group::run ({})", call.kind.name()))?);
            checked.push(comm.check_lent(call)?);
        }
        let ahead = ahead::suspect(&calls);
        #[cfg(feature = "tracing")]
        if let Some(why) = &ahead {
            tracing::warn!("Group::run: {why}");
        }
        let each = &mut |r: Result<()>| {
            each(match r {
                Err(e) if ahead.is_some() && e.kind() == crate::error::ErrorKind::Timeout => {
                    Err(e.with_hint(ahead::HINT))
                }
                r => r,
            })
        };
        if pairs.is_empty() && joins_pending(&calls) {
            // Sends and receives behind non-blocking ops join them, as a blocking one does
            // (`submit`): waiting for the pending ops first deadlocked an `isend` followed by a
            // group holding its matching receive on both ranks.
            drop(checked);
            let works: Vec<Result<super::Work>> = calls.into_iter().map(|(comm, call)| comm.issue(call)).collect();
            works.into_iter().for_each(|w| each(w.and_then(|w| w.wait())));
            return Ok(());
        }
        if pairs.is_empty() {
            Self::run_checked(calls, checked, each);
            return Ok(());
        }
        // The pairs' results, for both of their calls, in call order among the others'.
        let mut copied: Vec<(usize, Result<()>)> =
            pairs.iter().zip(selfpair::copy_all(&pairs)).flat_map(|(p, r)| p.at.map(|i| (i, r.clone()))).collect();
        copied.sort_unstable_by_key(|c| c.0);
        let mut copied = copied.into_iter().peekable();
        let mut next = 0;
        Self::run_checked(calls, checked, &mut |r| {
            let place = places.get(next).copied().unwrap_or(usize::MAX);
            while let Some((_, c)) = copied.next_if(|c| c.0 < place) {
                each(c);
            }
            each(r);
            next += 1;
        });
        copied.for_each(|(_, c)| each(c));
        Ok(())
    }

    /// Runs checked calls, handing each call's result to `each` in call order.
    fn run_checked(
        calls: Vec<(&'a Communicator<D>, Call<'a, D>)>,
        checked: Few<(OpDesc, Io<&'a D::Buffer>)>,
        each: &mut impl FnMut(Result<()>),
    ) {
        if calls.is_empty() {
            return;
        }
        let descs: Few<OpDesc> = checked.iter().map(|(d, _)| *d).collect();
        // Each communicator's state stays locked while the group runs, as for a blocking
        // call; locks are taken in address order so that groups sharing communicators cannot
        // deadlock each other. Each communicator's driver is held too (so no progress thread
        // interleaves), after the non-blocking ops issued before the group have run.
        let mut held = lock_all(&calls);
        if super::local::try_run(&calls, &checked, &mut held, each).is_some() {
            return;
        }
        // What each send and receive reads and writes: those that clash run one after the other.
        let ranges: Few<crate::pins::Ranges> = calls
            .iter()
            .map(|(c, call)| if call.kind.is_collective() { crate::pins::Ranges::new() } else { c.held(call) })
            .collect();
        // What each call uses, on a device without memory guards (a GPU): held while the
        // group runs, as a blocking call's is (`hold_unguarded`).
        let unguarded: Few<Option<crate::pins::Ranges>> =
            calls.iter().map(|(c, call)| (!c.device.host_memory()).then(|| c.held(call))).collect();
        let mut ops: Vec<(&'a Communicator<D>, Result<Prepared<D>>)> = Vec::with_capacity(calls.len());
        for ((comm, _), (desc, io)) in calls.into_iter().zip(checked) {
            let io = Io {
                input: io.input.cloned(),
                output: io.output.cloned(),
                input_elems: io.input_elems,
                blocks: io.blocks,
            };
            let prepared = match held.local(comm) {
                Some(local) => comm.prepare_checked(local, (desc, io)),
                None => Err(crate::error::CollectiveError::protocol("a group's communicator was not locked")),
            };
            ops.push((comm, prepared));
        }
        let order = stages(&ops, &descs, &ranges);
        // An op that finds another rank's op on its memory does not run: it fails, and the
        // communicator is aborted (two ranks given one GPU buffer raced silently).
        let mut holds = Vec::new();
        let mut raced: Few<Option<crate::error::CollectiveError>> = Few::new();
        for ((comm, prepared), used) in ops.iter().zip(&unguarded) {
            if let (Ok(p), Some(used)) = (prepared, used) {
                let (hold, r) = comm.hold_blocking(used, p.run.ctx.fp.desc, p.run.ctx.seq);
                holds.push(hold);
                raced.push(r);
            } else if prepared.is_ok() {
                raced.push(None);
            }
        }
        let mut runs: Vec<&mut OpRun<D>> = Vec::with_capacity(ops.len());
        let mut run_order = Vec::with_capacity(order.len());
        let ok = ops.iter_mut().filter_map(|(_, p)| p.as_mut().ok());
        for ((p, place), r) in ok.zip(&order).zip(&raced) {
            if r.is_none() {
                runs.push(&mut p.run);
                run_order.push(*place);
            }
        }
        let mut ran = sched::drive_all(&mut runs, &run_order).into_iter();
        drop(runs);
        let mut driven: Vec<Result<()>> =
            raced.into_iter().map(|r| r.map_or_else(|| ran.next().unwrap_or(Ok(())), Err)).collect();
        drop(holds);
        if driven.iter().any(|r| r.as_ref().is_err_and(|e| e.kind() == crate::error::ErrorKind::Timeout)) {
            let started: Vec<OpDesc> =
                ops.iter().zip(&descs).filter(|((_, p), _)| p.is_ok()).map(|(_, d)| *d).collect();
            held_back(&mut driven, &order, &started);
        }
        let mut driven = driven.into_iter();
        for (comm, prepared) in ops {
            each(match prepared {
                Err(e) => Err(e),
                Ok(mut p) => {
                    let r = driven.next().unwrap_or(Ok(()));
                    match held.local(comm) {
                        Some(local) => super::complete(&comm.shared, comm.rank, local, &mut p, r),
                        None => r,
                    }
                }
            });
        }
    }
}

/// Each prepared op's place in its communicator's order, for [`sched::drive_all`]. A
/// communicator's ops run in the order they were added, one stage after another; consecutive
/// sends and receives share a stage (they run together, so that a ring of them cannot
/// deadlock) unless one uses memory another writes (a receive into a tensor, then a send of
/// it), and every other op has a stage of its own.
fn stages<D: Device>(
    ops: &[(&Communicator<D>, Result<Prepared<D>>)],
    descs: &[OpDesc],
    ranges: &[crate::pins::Ranges],
) -> Vec<sched::Place> {
    // Per communicator: its key, its last stage, and that stage's sends' and receives'
    // memory (`None` when it is another op).
    let mut last: Few<(usize, u32, Option<crate::pins::ByMem>)> = Few::new();
    let mut order = Vec::with_capacity(ops.len());
    for (((comm, prepared), desc), mine) in ops.iter().zip(descs).zip(ranges) {
        if prepared.is_err() {
            continue;
        }
        let (key, lane) = (addr(comm), desc.lane());
        let mut clashed = false;
        let stage = match last.iter_mut().find(|l| l.0 == key) {
            Some(l) => {
                match (&mut l.2, lane) {
                    (Some(held), Some(_)) if !held.clashes(mine) => held.add(mine),
                    (held, _) => {
                        clashed = held.is_some() && lane.is_some();
                        l.1 += 1;
                        l.2 = lane.map(|_| crate::pins::ByMem::of(mine));
                    }
                }
                l.1
            }
            None => {
                last.push((key, 0, lane.map(|_| crate::pins::ByMem::of(mine))));
                0
            }
        };
        order.push(sched::Place { key, stage, lane, clashed });
    }
    order
}

/// Notes, in a send's or receive's `Timeout`, a send or receive of its communicator that a
/// later stage holds back — put there by a memory clash, or by a collective added between
/// them: if the peer's side does the same, neither finishes.
#[cold]
#[inline(never)]
fn held_back(results: &mut [Result<()>], order: &[sched::Place], descs: &[OpDesc]) {
    for (i, r) in results.iter_mut().enumerate() {
        let Err(e) = r else { continue };
        if e.kind() != crate::error::ErrorKind::Timeout || order[i].lane.is_none() {
            continue;
        }
        let (key, stage) = (order[i].key, order[i].stage);
        let later = (0..order.len()).find(|&j| order[j].key == key && order[j].clashed && order[j].stage > stage);
        if let Some(desc) = later.and_then(|j| descs.get(j)) {
            *r = Err(e.clone().appended(&super::work::clash_note(&desc.to_string())));
            continue;
        }
        // A collective of the communicator in a later stage, and a send or receive after it.
        let mine = |j: &usize| order[*j].key == key && order[*j].stage > stage;
        let between = (i + 1..order.len()).filter(mine).find(|&k| order[k].lane.is_none());
        let after = between.and_then(|k| (k + 1..order.len()).filter(mine).find(|&j| order[j].lane.is_some()));
        if let (Some(c), Some(p)) = (between.and_then(|k| descs.get(k)), after.and_then(|j| descs.get(j))) {
            *r = Err(e.clone().appended(&format!(
                "This group's {p} runs only once its {c} is done: sends and receives run together only with the \
                 sends and receives next to them in a group, and a collective added between them is a stage of its \
                 own; if the peer's group does the same, neither finishes: add the sends and receives together, \
                 before or after the collective"
            )));
        }
    }
}

/// A few of something, inline (one per call or rank of a group: no allocation for the usual
/// sizes).
type Few<T> = smallvec::SmallVec<[T; 4]>;

/// One communicator's locks while a group runs: its driver (no progress thread interleaves)
/// and its state, with the communicator's address (the lock order).
pub(super) struct Held<'a, D: Device> {
    key: usize,
    // Declared first: dropped (unlocked) before the driver.
    local: MutexGuard<'a, Local<D>>,
    _driver: MutexGuard<'a, Current<D>>,
}

/// The locks of every communicator a group's calls run on, one entry per communicator, in
/// address order.
pub(super) struct Locks<'a, D: Device>(Few<Held<'a, D>>);

impl<'a, D: Device> Locks<'a, D> {
    /// `comm`'s locked state, if the group holds it.
    pub(super) fn local(&mut self, comm: &Communicator<D>) -> Option<&mut Local<D>> {
        let key = addr(comm);
        self.0.iter_mut().find(|h| h.key == key).map(|h| &mut *h.local)
    }

    /// How many communicators are held.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

fn addr<D: Device>(c: &Communicator<D>) -> usize {
    c as *const Communicator<D> as usize
}

/// Whether the group is only sends and receives, and a communicator of it may have
/// non-blocking ops outstanding: then its calls join those (issued, then waited for).
fn joins_pending<D: Device>(calls: &[(&Communicator<D>, Call<'_, D>)]) -> bool {
    calls.iter().all(|(_, c)| matches!(c.kind, OpKind::Send | OpKind::Recv))
        && calls.iter().any(|(comm, _)| comm.engine.may_be_busy())
}

/// Locks every communicator of `calls` once, in address order (so that groups sharing
/// communicators cannot deadlock each other): its driver, then its state, with no op
/// queued on any of them (the non-blocking ops issued before the group have run).
///
/// Queued ops are run first, one communicator at a time, holding only that communicator's
/// driver: a queued op waits for its peers' matching ops, which another thread may issue on
/// the group's other communicators only while the group holds none of their locks (holding
/// rank 0's state while draining rank 1's queue would leave that thread blocked and rank 1's
/// op waiting out its timeout). Then every lock is *tried*, in address order; a lock another
/// thread holds (a progress thread in the middle of an op, an op being issued) or an op
/// queued meanwhile lets go of everything and starts over, so the group never waits on a
/// lock while holding another.
fn lock_all<'a, D: Device>(calls: &[(&'a Communicator<D>, Call<'a, D>)]) -> Locks<'a, D> {
    let mut comms: Few<&'a Communicator<D>> = Few::new();
    for (c, _) in calls {
        comms.push(*c);
    }
    // Usually sorted already (`init_all`'s communicators, called in rank order).
    if !comms.windows(2).all(|w| addr(w[0]) < addr(w[1])) {
        comms.sort_unstable_by_key(|c| addr(c));
        comms.dedup_by_key(|c| addr(c));
    }
    // Usually nothing is queued and nobody else holds a lock: the first try takes them all.
    loop {
        if let Some(held) = try_lock_all(&comms) {
            return Locks(held);
        }
        comms.iter().for_each(|c| drain_queued(c));
        std::thread::yield_now();
    }
}

/// Runs `comm`'s queued non-blocking ops to completion, holding only its driver.
fn drain_queued<D: Device>(comm: &Communicator<D>) {
    let mut driver = comm.engine.driving.lock().unwrap_or_else(|e| e.into_inner());
    if comm.engine.has_queued(&driver) {
        comm.engine.drain(&mut driver);
    }
}

/// Every communicator's driver and state, tried in address order; `None` (nothing held)
/// when one is held elsewhere or has ops queued. An op is numbered and queued under its
/// rank's state lock (see `submit`), so a queue found empty under it stays empty: the
/// group's ops are numbered after every op issued before them.
fn try_lock_all<'a, D: Device>(comms: &[&'a Communicator<D>]) -> Option<Few<Held<'a, D>>> {
    fn take<T>(r: std::sync::TryLockResult<MutexGuard<'_, T>>) -> Option<MutexGuard<'_, T>> {
        match r {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
    let mut held = Few::new();
    for c in comms {
        let driver = take(c.engine.driving.try_lock())?;
        let local = take(c.local.try_lock())?;
        if c.engine.has_queued(&driver) {
            return None;
        }
        held.push(Held { key: addr(c), local, _driver: driver });
    }
    Some(held)
}
