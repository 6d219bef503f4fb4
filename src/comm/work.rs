//! Non-blocking calls and their [`Work`] handles (torch.distributed's `async_op=True`).
//!
//! Each communicator (rank) has an [`Engine`]: a queue of prepared ops, in issue order, and a
//! progress thread that drives them while the caller computes. Ops of one communicator run
//! one at a time in the order they were issued — blocking calls included: a blocking call
//! first drives whatever non-blocking ops are still queued ahead of it — except that
//! consecutive sends and receives move together, as in a [`Group`](crate::Group) (see
//! `stage.rs`), so that torch's `isend` then `irecv` around a ring completes. The progress
//! thread starts when a non-blocking op is issued; when the queue is empty it waits
//! [`LINGER`] for the next one (a training step issues its ops in bursts), then ends.

mod park;
mod stage;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::{Local, Prepared, Shared, complete};
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::sched;
use crate::types::Rank;
use park::{LINGER, Park};

/// How long a dropped communicator looks again at a progress thread that holds its driver
/// (`Engine::leave`): its last look at an empty queue takes microseconds.
const SETTLE: Duration = Duration::from_millis(200);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The note of a send's or receive's `Timeout` about a later send or receive (`call`) of its
/// rank that waits for it because the two share memory.
pub(super) fn clash_note(call: &str) -> String {
    format!(
        "This rank's {call} is held back: it uses memory that a send or receive issued before it writes (or writes \
         memory one reads), so it runs after them, in issue order; if its peer does the same, neither finishes: \
         send from and receive into separate tensors"
    )
}

/// Where a non-blocking op's result lands.
#[derive(Debug, Default)]
struct Slot {
    result: Mutex<Option<Result<()>>>,
    cv: Condvar,
    /// The tasks awaiting it (a [`Work`] as a future), woken once it lands: the latest
    /// waker of each handle that was polled, by the handle's number.
    wakers: Mutex<Vec<(u64, Waker)>>,
}

impl Slot {
    fn finish(&self, r: Result<()>) {
        *lock(&self.result) = Some(r);
        self.cv.notify_all();
        // After the result: a task that registers later sees it (`Work::poll`). Woken with
        // the list's lock let go.
        let wakers = std::mem::take(&mut *lock(&self.wakers));
        for (_, w) in wakers {
            w.wake();
        }
    }
}

struct Queued<D: Device> {
    op: Prepared<D>,
    slot: Arc<Slot>,
    /// The tensors' ranges it reads and writes, held until it completes.
    hold: crate::pins::Hold,
    /// Those ranges, for a send or receive: it moves together with the sends and receives
    /// before it unless they clash (`stage.rs`).
    ranges: crate::pins::Ranges,
    /// Its state while the shared progress thread drives it alongside other ranks' ops.
    turn: sched::Turn,
    /// The issuing thread's `tracing` subscriber: what the op logs while another thread
    /// drives it goes where the caller's own logs go.
    #[cfg(feature = "tracing")]
    dispatch: tracing::Dispatch,
}

impl<D: Device> Queued<D> {
    /// Runs `f` with the issuing thread's subscriber in force.
    fn traced<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        #[cfg(feature = "tracing")]
        {
            let dispatch = self.dispatch.clone();
            tracing::dispatcher::with_default(&dispatch, || f(self))
        }
        #[cfg(not(feature = "tracing"))]
        f(self)
    }
}

/// The ops a rank's driver is in the middle of (the shared progress thread leaves them here
/// between turns), locked by whoever drives the rank: one op, or a run of consecutive sends
/// and receives moving together (`stage.rs`). Its capacity is kept from op to op.
pub(crate) struct Current<D: Device>(stage::Stage<D>);

/// One rank's queue of issued ops and what drives it.
pub(crate) struct Engine<D: Device> {
    queue: Mutex<VecDeque<Queued<D>>>,
    /// How many ops `queue` holds, changed under its lock: a blocking call or a group asks
    /// whether anything is queued at every op, without taking the lock.
    queued: AtomicUsize,
    /// Held by whoever drives ops of this rank: a progress thread, a blocking call, a group.
    pub(crate) driving: Mutex<Current<D>>,
    /// Whether a progress thread (this rank's own, or the shared one) is on the queue.
    worker: AtomicBool,
    /// Where this rank's idle progress thread waits for more ops.
    park: Arc<Park<Engine<D>>>,
    /// Whether the process-wide progress thread drives this rank (see
    /// [`CommConfig::with_shared_progress`](crate::CommConfig::with_shared_progress)).
    pub(crate) shared_progress: bool,
    shared: Arc<Shared>,
    rank: Rank,
    local: Arc<Mutex<Local<D>>>,
    /// Set when the communicator was dropped: its rank departs once no op of it is queued or
    /// driven (at once when none is), so that non-blocking ops issued before the drop finish
    /// (or fail at their own deadline) as they would had it lived, on every transport.
    leaving: AtomicBool,
    /// Whether this rank has departed (once).
    departed: AtomicBool,
}

impl<D: Device> Engine<D> {
    pub(crate) fn new(shared: Arc<Shared>, rank: Rank, local: Arc<Mutex<Local<D>>>, shared_progress: bool) -> Self {
        Engine {
            queue: Mutex::new(VecDeque::new()),
            queued: AtomicUsize::new(0),
            driving: Mutex::new(Current(stage::Stage::default())),
            worker: AtomicBool::new(false),
            park: Arc::new(Park::new()),
            shared_progress,
            shared,
            rank,
            local,
            leaving: AtomicBool::new(false),
            departed: AtomicBool::new(false),
        }
    }

    /// The communicator was dropped: this rank departs now, or, with non-blocking ops still
    /// queued or driven, once the last driver lets go of the queue ([`retire`](Self::retire)).
    /// Waits for nothing but, under shared progress, the shared thread's turn on the driver (a
    /// poll: see [`idle`](Self::idle)), and otherwise at most [`SETTLE`] for a progress
    /// thread that holds the driver; never for an op's end. Either side may see the other's store
    /// first: the departure happens once.
    pub(crate) fn leave(&self) {
        self.leaving.store(true, Ordering::SeqCst);
        if !self.may_be_busy() || self.idle() {
            self.depart();
            return;
        }
        // A progress thread is on the queue. With nothing queued it is about to let go (and
        // depart, `retire`), or drives an op issued before the drop: looked at again for a
        // moment, so that a process exiting right after the drop does not leave without its
        // goodbye while the thread had the driver for its last look (the peers failed with
        // `PeerLost` "without a goodbye": a stranger's review, 5 runs in 6 of a 64 MiB
        // send/recv over shared memory whose receiver dropped its communicator and exited).
        let until = Instant::now() + SETTLE;
        while !self.departed.load(Ordering::SeqCst) && Instant::now() < until {
            if !lock(&self.queue).is_empty() {
                return;
            }
            if let Ok(current) = self.driving.try_lock() {
                // Free: nothing is being driven, and nothing queued (above) — unless an op
                // is in flight, whose end departs (`retire`).
                if current.0.is_empty() {
                    drop(current);
                    self.depart();
                }
                return;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Whether nothing of this rank is queued or being driven, though a progress thread may
    /// still hold the queue (it lets go once it next looks): a blocking call handed to the
    /// shared progress thread returns once its op is done, and a process that exits right
    /// after dropping its communicator must not leave without its goodbye (its peers failed
    /// with `PeerLost`, and the id stayed taken for a launch forming its group again). The
    /// communicator is gone, so no op can be issued after this look. With shared progress the
    /// driver's lock is waited for: only the shared thread's turn holds it then (a poll, never
    /// a wait), and it polls without pause, so a `try_lock` often found it taken. A rank's own
    /// progress thread holds it while it drives an op (up to its deadline): never waited for.
    fn idle(&self) -> bool {
        if !lock(&self.queue).is_empty() {
            return false;
        }
        if self.shared_progress {
            lock(&self.driving).0.is_empty()
        } else {
            self.driving.try_lock().is_ok_and(|c| c.0.is_empty())
        }
    }

    /// Lets the id go and tells the peers this rank left (once).
    fn depart(&self) {
        if self.departed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.shared.instance.let_go();
        self.shared.board.depart(self.rank);
        self.shared.link.depart(self.rank);
    }

    /// Whether non-blocking ops may be outstanding: some are queued, or a progress thread is
    /// on the queue (two atomic loads, no lock: a group asks at every run).
    pub(crate) fn may_be_busy(&self) -> bool {
        self.queued.load(Ordering::Acquire) > 0 || self.worker.load(Ordering::Acquire)
    }

    /// Whether ops are queued (issued, not yet finished by a driver).
    pub(crate) fn has_queued(&self, current: &Current<D>) -> bool {
        !current.0.is_empty() || self.queued.load(Ordering::Acquire) > 0
    }

    /// The oldest queued op if `take` says so. An op issued before an earlier op of its rank
    /// failed does not start: it ends at once with `Aborted`, as a call issued after the
    /// failure does (`admit`), and its peers learn of the failure from the op that failed.
    /// Run, it could succeed on this rank (its peers' parts already published) while they
    /// report it failed.
    fn pop_if(&self, take: impl Fn(&Queued<D>) -> bool) -> Option<Queued<D>> {
        loop {
            let q = {
                let mut queue = lock(&self.queue);
                let q = if queue.front().is_some_and(&take) { queue.pop_front() } else { None };
                self.queued.store(queue.len(), Ordering::Release);
                q
            }?;
            let failed = lock(&self.local).failed.clone();
            let Some(first) = failed else { return Some(q) };
            let mut q = q;
            q.op.run.start_at(std::time::Instant::now());
            self.finish(q, Err(CollectiveError::failed_earlier(&first)));
        }
    }

    /// Drives every queued op to completion, in order (the ones a driver left half done
    /// first). The caller holds `driving`.
    pub(crate) fn drain(&self, current: &mut Current<D>) {
        loop {
            self.admit(&mut current.0);
            // A lone collective blocks on its own waits (a peer's doorbell, its device event).
            if let Some(mut q) = current.0.take_solo() {
                let r = sched::drive(&mut q.op.run);
                self.finish(q, r);
                continue;
            }
            match self.step(&mut current.0) {
                stage::Stepped::Idle => return,
                stage::Stepped::Moved => {}
                stage::Stepped::Blocked { deadline, slices } => self.wait(&mut current.0, deadline, slices),
            }
        }
    }

    fn finish(&self, mut q: Queued<D>, r: Result<()>) {
        let r = match r {
            Err(e) if q.op.run.ctx.p2p && e.kind() == ErrorKind::Timeout => Err(self.held_back(e, &q.ranges)),
            r => r,
        };
        let r = complete(&self.shared, self.rank, &mut lock(&self.local), &mut q.op, r);
        // Free before the waiters wake, so that they find their tensors free.
        q.hold.release();
        q.slot.finish(r);
    }

    /// A send's or receive's `Timeout` (its op used `ranges`), with what this rank holds back
    /// in its queue that the peer may be waiting for (the cycle the peer's side of it closes).
    #[cold]
    #[inline(never)]
    fn held_back(&self, e: CollectiveError, ranges: &crate::pins::Ranges) -> CollectiveError {
        let queue = lock(&self.queue);
        let called = |q: &Queued<D>| {
            let c = &q.op.run.ctx;
            sched::called(&c.fp.desc.to_string(), c.p2p, c.seq)
        };
        match queue.front() {
            // Held back by the clash with this very op (not one issued just now, say).
            Some(front) if front.op.run.ctx.p2p => match crate::pins::clash(&front.ranges, ranges) {
                true => e.appended(&clash_note(&called(front))),
                false => e,
            },
            Some(front) => match queue.iter().find(|q| q.op.run.ctx.p2p) {
                Some(p2p) => e.appended(&format!(
                    "This rank's {} is held back in its queue behind {}, which starts only once this rank's earlier \
                     sends and receives are done: a collective issued between a send and its receive holds the \
                     receive back (issue the receive before the collective, or wait for the send first)",
                    called(p2p),
                    called(front)
                )),
                None => e,
            },
            None => e,
        }
    }

    /// Queues a prepared op (the caller holds the rank's state lock, so queue order is issue
    /// order) and returns its handle; `ranges`: what it reads and writes.
    pub(crate) fn push(
        self: &Arc<Self>,
        op: Prepared<D>,
        hold: crate::pins::Hold,
        ranges: &[crate::pins::Held],
    ) -> Work {
        let (desc, seq) = (op.run.ctx.fp.desc, op.run.ctx.seq);
        let slot = Arc::new(Slot::default());
        let mut queue = lock(&self.queue);
        let ranges = if op.run.ctx.p2p { ranges.iter().copied().collect() } else { crate::pins::Ranges::new() };
        queue.push_back(Queued {
            op,
            slot: slot.clone(),
            hold,
            ranges,
            turn: sched::Turn::default(),
            #[cfg(feature = "tracing")]
            dispatch: tracing::dispatcher::get_default(Clone::clone),
        });
        self.queued.store(queue.len(), Ordering::Release);
        drop(queue);
        Work { slot, rank: self.rank, op: (desc, seq), id: Work::next_id() }
    }

    /// Makes sure a progress thread drives the queue: the shared one, or this rank's own.
    pub(crate) fn kick(self: &Arc<Self>) {
        if self.worker.swap(true, Ordering::SeqCst) {
            // A driver waiting on running sends and receives may take this op in with them.
            crate::transport::ring_any();
            return;
        }
        if self.shared_progress {
            super::progress::enlist(self.clone());
            return;
        }
        if self.park.wake(self) {
            return;
        }
        let (mut engine, park) = (self.clone(), self.park.clone());
        let spawned = std::thread::Builder::new().name(format!("ruccl progress rank {}", self.rank)).spawn(move || {
            loop {
                loop {
                    let mut current = lock(&engine.driving);
                    engine.drain(&mut current);
                    drop(current);
                    if !engine.retire() {
                        break;
                    }
                }
                drop(engine);
                match park.wait(LINGER) {
                    Some(next) => engine = next,
                    None => return,
                }
            }
        });
        if spawned.is_err() {
            // No thread to be had: drive here, so the op still runs (the call then blocks).
            self.worker.store(false, Ordering::SeqCst);
            let mut current = lock(&self.driving);
            self.drain(&mut current);
        }
    }

    /// A progress thread found the queue empty and lets go of it. True when it must carry
    /// on after all: an op was queued after it looked, before anyone else took over.
    fn retire(&self) -> bool {
        self.worker.store(false, Ordering::SeqCst);
        // A driver busy elsewhere (a blocking call, a group) may leave ops behind: look again.
        let current = self.driving.try_lock().map_or(true, |c| !c.0.is_empty());
        let more = current || !lock(&self.queue).is_empty();
        if more && !self.worker.swap(true, Ordering::SeqCst) {
            return true;
        }
        // The communicator was dropped with ops queued: the last of them is done.
        if self.leaving.load(Ordering::SeqCst) && !self.may_be_busy() {
            self.depart();
        }
        false
    }
}

impl<D: Device> Drop for Engine<D> {
    fn drop(&mut self) {
        self.park.close();
    }
}

impl<D: Device> super::progress::Drivable for Engine<D> {
    fn turn(&self) -> super::progress::Pass {
        use super::progress::Pass;
        let Ok(mut current) = self.driving.try_lock() else { return Pass::Busy };
        loop {
            self.admit(&mut current.0);
            match self.step(&mut current.0) {
                stage::Stepped::Idle => return Pass::Idle,
                stage::Stepped::Moved => {}
                stage::Stepped::Blocked { deadline, slices } => return Pass::Blocked { deadline, slices },
            }
        }
    }

    fn is_ready(&self) -> bool {
        match self.driving.try_lock() {
            Ok(current) => self.stage_ready(&current.0),
            Err(_) => false,
        }
    }

    fn check_waiting(&self) -> bool {
        let Ok(mut current) = self.driving.try_lock() else { return false };
        self.check_stage(&mut current.0)
    }

    fn retire(&self) -> bool {
        Engine::retire(self)
    }
}

/// The handle of a non-blocking call (torch.distributed's `Work`): poll it, wait for it, or
/// `.await` it (it is a [`Future`] of the op's result, torch's `get_future()`; any executor,
/// and every clone of the handle, may await it). The op runs whether or not anyone waits;
/// dropping the handle neither cancels nor blocks.
/// Until it is done, the op's tensors refuse to be written, and its outputs to be read,
/// through their own methods ([`Tensor::to_vec`](crate::Tensor::to_vec),
/// [`copy_from_slice`](crate::Tensor::copy_from_slice), [`try_clone`](crate::Tensor::try_clone)),
/// with an `InvalidArgument` naming the op.
///
/// ```
/// use ruccl::{CommConfig, Communicator, HostDevice, ReduceOp, Tensor};
/// let dev = HostDevice::default();
/// let comms = Communicator::init_all(vec![dev; 2], CommConfig::default())?;
/// let ts: Vec<_> = (0..2).map(|r| Tensor::from_slice(&dev, &[r as f32 + 1.0], &[1])).collect::<Result<_, _>>()?;
/// // Issue on both ranks, compute meanwhile, then wait.
/// let works: Vec<_> = comms.iter().zip(&ts).map(|(c, t)| c.all_reduce_async(t, ReduceOp::Sum)).collect::<Result<_, _>>()?;
/// for w in &works {
///     w.wait()?;
///     assert!(w.is_completed());
/// }
/// assert_eq!(ts[1].to_vec::<f32>()?, vec![3.0]);
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
///
/// Awaited in async code (here on a tokio runtime; the op runs on ruCCL's own threads, so
/// the task only sleeps until it is done):
///
/// ```
/// use ruccl::{CommConfig, Communicator, HostDevice, ReduceOp, Tensor};
/// let dev = HostDevice::default();
/// let comms = Communicator::init_all(vec![dev; 2], CommConfig::default())?;
/// let ts: Vec<_> = (0..2).map(|r| Tensor::from_slice(&dev, &[r as f32 + 1.0], &[1])).collect::<Result<_, _>>()?;
/// let works: Vec<_> = comms.iter().zip(&ts).map(|(c, t)| c.all_reduce_async(t, ReduceOp::Sum)).collect::<Result<_, _>>()?;
/// let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
/// runtime.block_on(async {
///     for w in works {
///         w.await?;
///     }
///     Ok::<(), ruccl::CollectiveError>(())
/// })?;
/// assert_eq!(ts[0].to_vec::<f32>()?, vec![3.0]);
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
#[derive(Debug)]
pub struct Work {
    slot: Arc<Slot>,
    rank: Rank,
    /// The op and its number, for the errors of waits that give up.
    op: (crate::op::OpDesc, u64),
    /// This handle's number (each clone has its own), under which its task's waker is kept.
    id: u64,
}

/// A clone is a handle of its own: it waits and awaits the same op.
impl Clone for Work {
    fn clone(&self) -> Self {
        Work { slot: self.slot.clone(), rank: self.rank, op: self.op, id: Work::next_id() }
    }
}

/// The op's result once it finished, exactly as [`Work::wait`] returns it. Awaiting adds no
/// deadline of its own: the op gives up at the communicator's timeout.
///
/// The task's waker is woken on the thread that finished the op: ruCCL's progress thread, or
/// a thread in a blocking call of the same communicator. An executor whose `wake` runs the
/// task right there must not call the communicator from it (the op's driver is still busy);
/// executors that queue the task (tokio, async-std, `futures`' executors) are fine.
impl Future for Work {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        if let Some(r) = &*lock(&self.slot.result) {
            return Poll::Ready(r.clone());
        }
        {
            // One waker per handle, its latest: polls with ever new wakers hold one.
            let mut wakers = lock(&self.slot.wakers);
            match wakers.iter_mut().find(|(id, _)| *id == self.id) {
                Some((_, w)) => w.clone_from(cx.waker()),
                None => wakers.push((self.id, cx.waker().clone())),
            }
        }
        // Looked at again after registering: a result that landed meanwhile woke no one.
        match &*lock(&self.slot.result) {
            Some(r) => Poll::Ready(r.clone()),
            None => Poll::Pending,
        }
    }
}

impl Work {
    fn next_id() -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether the op has finished (successfully or not). Never blocks.
    pub fn is_completed(&self) -> bool {
        lock(&self.slot.result).is_some()
    }

    /// Blocks until the op has finished; its error, if it failed. The op's own deadline
    /// bounds the wait.
    ///
    /// # Errors
    /// The op's error, exactly as the blocking call would have returned it.
    pub fn wait(&self) -> Result<()> {
        let mut r = lock(&self.slot.result);
        loop {
            if let Some(r) = &*r {
                return r.clone();
            }
            r = self.slot.cv.wait(r).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Like [`wait`](Self::wait), giving up after `timeout` (the op goes on).
    ///
    /// # Errors
    /// `Timeout` when the op has not finished within `timeout`; otherwise as
    /// [`wait`](Self::wait).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<()> {
        let deadline = crate::config::deadline_after(timeout);
        let mut r = lock(&self.slot.result);
        loop {
            if let Some(r) = &*r {
                return r.clone();
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(CollectiveError::new(
                    ErrorKind::Timeout,
                    format!("the op was not finished after {timeout:?}; it goes on, and the communicator stays usable"),
                )
                .with_rank(self.rank)
                .with_op(self.op.0.to_string())
                .with_seq(self.op.1)
                .with_hint(
                    "wait again (`wait`, `wait_timeout`) or poll `is_completed`; the op itself gives up at the \
                     communicator's timeout, naming the rank it waits for; `abort()` stops it now",
                ));
            }
            r = self.slot.cv.wait_timeout(r, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}
