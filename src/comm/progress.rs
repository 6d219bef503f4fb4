//! The process-wide progress thread: one thread drives the ops of every rank whose config
//! asks for it ([`CommConfig::with_shared_progress`](crate::CommConfig::with_shared_progress)),
//! of any communicators, stepping each rank's oldest op in turn and sleeping on the
//! process-wide doorbell only when none can move. Blocking calls of those ranks hand their
//! op over and wait; so a process runs any number of local ranks on one driving thread, as a
//! group call does for one op, without a thread per rank to wake for every message.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::CollectiveError;
use crate::transport;

/// How long the thread sleeps between looks when an op waits on its device or a rank is
/// driven by another thread for the moment (neither rings the doorbell).
const SLICE: Duration = Duration::from_micros(200);
/// How often waiting ops get their long-wait checks while other ranks keep the thread busy
/// (when it sleeps, they run each time it goes to sleep).
const CHECK_EVERY: Duration = Duration::from_millis(10);

/// Where one rank's turn left it.
pub(crate) enum Pass {
    /// No op left.
    Idle,
    /// Another thread drives this rank right now (a group call).
    Busy,
    /// The oldest op waits; `slices`: on device work that rings no doorbell (see
    /// `OpRun::needs_slices`), so the thread looks again every [`SLICE`].
    Blocked { deadline: Instant, slices: bool },
}

/// A rank the thread drives (an engine, type-erased over its device).
pub(crate) trait Drivable: Send + Sync {
    /// Steps the rank's ops, oldest first, as far as they go without blocking.
    fn turn(&self) -> Pass;
    /// Whether a turn may move it now (cheap; called while the thread spins).
    fn is_ready(&self) -> bool;
    /// The long-wait checks of its waiting op; true when they ended the op.
    fn check_waiting(&self) -> bool;
    /// Lets go of an idle rank; true when it must be kept after all (new work came).
    fn retire(&self) -> bool;
}

/// Ranks handed to the thread since it last looked.
static INBOX: Mutex<Vec<Arc<dyn Drivable>>> = Mutex::new(Vec::new());
/// Counts hand-overs, so the spinning thread notices one without taking the lock.
static ENLISTED: AtomicU64 = AtomicU64::new(0);
/// Whether the thread runs.
static RUNNING: AtomicBool = AtomicBool::new(false);

fn inbox() -> MutexGuard<'static, Vec<Arc<dyn Drivable>>> {
    INBOX.lock().unwrap_or_else(|e| e.into_inner())
}

/// Hands a rank with queued ops to the thread, starting it if it is not running.
pub(crate) fn enlist(rank: Arc<dyn Drivable>) {
    inbox().push(rank);
    ENLISTED.fetch_add(1, Ordering::SeqCst);
    transport::ring_any();
    if RUNNING.swap(true, Ordering::SeqCst) {
        return;
    }
    if std::thread::Builder::new().name("ruccl progress".into()).spawn(run).is_err() {
        // No thread to be had: drive here until the ranks are idle (the caller then blocks).
        run();
    }
}

/// The thread's loop; returns once no rank has work left.
fn run() {
    let mut ranks: Vec<Arc<dyn Drivable>> = Vec::new();
    let mut seen = u64::MAX;
    let mut checked = Instant::now();
    loop {
        let enlisted = ENLISTED.load(Ordering::SeqCst);
        if enlisted != seen {
            seen = enlisted;
            ranks.append(&mut inbox());
        }
        let now = Instant::now();
        let mut wake: Option<Instant> = None;
        let mut slices = false;
        ranks.retain(|r| match r.turn() {
            Pass::Idle => r.retire(),
            Pass::Busy => {
                slices = true;
                true
            }
            Pass::Blocked { deadline, slices: s } => {
                slices |= s;
                wake = Some(wake.map_or(deadline, |w| w.min(deadline)));
                true
            }
        });
        if ranks.is_empty() {
            RUNNING.store(false, Ordering::SeqCst);
            // A rank handed over after the last look needs a driver: this one, unless a new
            // thread already took over.
            if inbox().is_empty() || RUNNING.swap(true, Ordering::SeqCst) {
                return;
            }
            continue;
        }
        if now.duration_since(checked) >= CHECK_EVERY {
            checked = now;
            if ranks.iter().fold(false, |ended, r| r.check_waiting() | ended) {
                continue;
            }
        }
        let wake = wake.unwrap_or(now + SLICE);
        let wake = if slices { wake.min(now + SLICE) } else { wake };
        let mut ready = || ENLISTED.load(Ordering::SeqCst) != seen || ranks.iter().any(|r| r.is_ready());
        let mut slow = || {
            checked = Instant::now();
            // An op the checks ended is finished: look at the ranks again.
            let ended = ranks.iter().fold(false, |ended, r| r.check_waiting() | ended);
            if ended { Err(CollectiveError::protocol("an op ended during the wait")) } else { Ok(()) }
        };
        // Deadlines and failed links are seen by the next turn.
        let _ = transport::wait_any(wake, &mut ready, &|| None, &mut slow);
    }
}
