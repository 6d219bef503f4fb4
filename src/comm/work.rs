//! Non-blocking calls and their [`Work`] handles (torch.distributed's `async_op=True`).
//!
//! Each communicator (rank) has an [`Engine`]: a queue of prepared ops, in issue order, and a
//! progress thread that drives them while the caller computes. Ops of one communicator run
//! one at a time in the order they were issued — blocking calls included: a blocking call
//! first drives whatever non-blocking ops are still queued ahead of it. The progress thread
//! starts when a non-blocking op is issued and ends when the queue is empty.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::{Local, Prepared, Shared, complete};
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::sched;
use crate::types::Rank;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where a non-blocking op's result lands.
#[derive(Debug, Default)]
struct Slot {
    result: Mutex<Option<Result<()>>>,
    cv: Condvar,
}

impl Slot {
    fn finish(&self, r: Result<()>) {
        *lock(&self.result) = Some(r);
        self.cv.notify_all();
    }
}

struct Queued<D: Device> {
    op: Prepared<D>,
    slot: Arc<Slot>,
}

/// One rank's queue of issued ops and what drives it.
pub(crate) struct Engine<D: Device> {
    queue: Mutex<VecDeque<Queued<D>>>,
    /// Held by whoever drives ops of this rank: the progress thread, or a blocking call.
    pub(crate) driving: Mutex<()>,
    worker: AtomicBool,
    shared: Arc<Shared>,
    rank: Rank,
    local: Arc<Mutex<Local<D>>>,
}

impl<D: Device> Engine<D> {
    pub(crate) fn new(shared: Arc<Shared>, rank: Rank, local: Arc<Mutex<Local<D>>>) -> Self {
        Engine {
            queue: Mutex::new(VecDeque::new()),
            driving: Mutex::new(()),
            worker: AtomicBool::new(false),
            shared,
            rank,
            local,
        }
    }

    /// Whether ops are queued (issued, not yet driven).
    pub(crate) fn has_queued(&self) -> bool {
        !lock(&self.queue).is_empty()
    }

    /// Drives every queued op, in order. The caller holds `driving`.
    pub(crate) fn drain(&self) {
        loop {
            let Some(mut q) = lock(&self.queue).pop_front() else { return };
            let r = sched::drive(&mut q.op.run);
            let r = complete(&self.shared, self.rank, &mut lock(&self.local), q.op, r);
            q.slot.finish(r);
        }
    }

    /// Queues a prepared op (the caller holds the rank's state lock, so queue order is issue
    /// order) and returns its handle.
    pub(crate) fn push(self: &Arc<Self>, op: Prepared<D>) -> Work {
        let slot = Arc::new(Slot::default());
        lock(&self.queue).push_back(Queued { op, slot: slot.clone() });
        Work { slot, rank: self.rank }
    }

    /// Makes sure a progress thread drives the queue.
    pub(crate) fn kick(self: &Arc<Self>) {
        if self.worker.swap(true, Ordering::SeqCst) {
            return;
        }
        let engine = self.clone();
        let spawned = std::thread::Builder::new().name(format!("ruccl progress rank {}", self.rank)).spawn(move || {
            loop {
                {
                    let _drive = lock(&engine.driving);
                    engine.drain();
                }
                engine.worker.store(false, Ordering::SeqCst);
                // An op queued after the drain but before the flag dropped needs a driver.
                if !engine.has_queued() || engine.worker.swap(true, Ordering::SeqCst) {
                    return;
                }
            }
        });
        if spawned.is_err() {
            // No thread to be had: drive here, so the op still runs (the call then blocks).
            self.worker.store(false, Ordering::SeqCst);
            let _drive = lock(&self.driving);
            self.drain();
        }
    }
}

/// The handle of a non-blocking call (torch.distributed's `Work`): poll it, or wait for it.
/// The op runs whether or not anyone waits; dropping the handle neither cancels nor blocks.
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
#[derive(Debug, Clone)]
pub struct Work {
    slot: Arc<Slot>,
    rank: Rank,
}

impl Work {
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
                    format!(
                        "the op was not finished after {timeout:?}; it goes on (wait again, or abort the communicator)"
                    ),
                )
                .with_rank(self.rank));
            }
            r = self.slot.cv.wait_timeout(r, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}
