//! Completion of CubeCL work: the client's `sync` future (resolved when the queue finished
//! everything submitted before it) or a read future, polled with a no-op waker. CubeCL's
//! runtimes complete these futures from their own threads (wgpu's poll thread, CUDA's
//! stream callbacks), so polling never has to drive anything.

use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use cubecl::server::ServerError;

use crate::device::completion::{Completer, Completion, Job, Wakers, panic_message};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::mem::HostRegion;

type Fut<T> = Pin<Box<dyn Future<Output = std::result::Result<T, ServerError>> + Send>>;

/// Bytes that land in host memory once a read completes.
pub(super) struct Landing {
    /// Where the bytes go.
    pub dst: HostRegion,
    /// How many leading bytes of the read to skip (reads start on a word boundary).
    pub skip: usize,
}

enum State {
    Sync(Fut<()>),
    Read(Fut<Vec<cubecl::bytes::Bytes>>, Landing),
    /// Waited for on the device's completion thread (`device::completion`), because the
    /// runtime's future blocks the thread that polls it (CUDA's).
    Handed(Arc<Completion>),
    /// What would have been handed, where no completion thread could be started: the poll
    /// that comes first blocks on it.
    Blocking(Job),
    Done(std::result::Result<(), String>),
}

/// The completion of work enqueued on a [`CubeDevice`](super::CubeDevice).
pub struct CubeEvent {
    state: Mutex<State>,
    /// Whoever polled with a waker: the runtime's future is always polled with theirs
    /// combined, so a later poll (with the no-op waker, or another party's) drops none.
    wakers: Arc<Wakers>,
    what: &'static str,
}

impl fmt::Debug for CubeEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CubeEvent({})", self.what)
    }
}

impl CubeEvent {
    fn new(state: State, what: &'static str) -> Self {
        CubeEvent { state: Mutex::new(state), wakers: Arc::default(), what }
    }

    /// Already complete.
    pub(super) fn done() -> Self {
        Self::new(State::Done(Ok(())), "done")
    }

    /// Complete when `fut` resolves.
    pub(super) fn sync(fut: Fut<()>) -> Self {
        Self::new(State::Sync(fut), "sync")
    }

    /// Complete when the read resolved and its bytes were copied to `landing`.
    pub(super) fn read(fut: Fut<Vec<cubecl::bytes::Bytes>>, landing: Landing) -> Self {
        Self::new(State::Read(fut, landing), "read")
    }

    /// This event, waited for on `completer`'s thread: polls never block, even where the
    /// runtime's future would. Where no thread could be started, the first poll blocks, as
    /// the runtime's future would.
    pub(super) fn on_thread(self, completer: &Completer, device: &str) -> Self {
        let what = self.what;
        let device = device.to_string();
        let job = Box::new(move || self.wait(&device, None).map_err(|e| e.message().to_string()));
        match completer.hand(job) {
            Ok(done) => Self::new(State::Handed(done), what),
            Err(job) => Self::new(State::Blocking(job), what),
        }
    }

    /// Whether the work completed; an error when it failed. Never blocks, but where the
    /// runtime's future does (see [`on_thread`](Self::on_thread)).
    pub(super) fn poll(&self, device: &str) -> Result<bool> {
        self.look(device, None)
    }

    /// [`poll`](Self::poll), with `waker` woken when the work completes (wgpu's completion
    /// callback sends on a channel that wakes; a completion thread wakes too). Every waker a
    /// party polled with stays armed until the work completes, whoever polls after it.
    pub(super) fn poll_waking(&self, device: &str, waker: &Waker) -> Result<bool> {
        self.look(device, Some(waker))
    }

    /// [`poll`](Self::poll), arming `waker` where there is one.
    fn look(&self, device: &str, waker: Option<&Waker>) -> Result<bool> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = waker
            && matches!(*st, State::Sync(_) | State::Read(..))
        {
            self.wakers.add(w);
        }
        // The futures are polled with every party's waker combined (built only for them).
        let all = || Waker::from(self.wakers.clone());
        let next = match &mut *st {
            State::Done(r) => return r.clone().map(|()| true).map_err(CollectiveError::device),
            State::Handed(done) => match done.poll(waker) {
                None => return Ok(false),
                Some(r) => r,
            },
            State::Blocking(_) => match std::mem::replace(&mut *st, State::Done(Ok(()))) {
                State::Blocking(job) => job(),
                _ => Ok(()),
            },
            // CubeCL's futures panic on some failures (a read whose mapping failed): that ends
            // this event with a `Device` error, never the caller's thread.
            State::Sync(f) => {
                match catch_unwind(AssertUnwindSafe(|| f.as_mut().poll(&mut Context::from_waker(&all())))) {
                    Ok(Poll::Pending) => return Ok(false),
                    Ok(Poll::Ready(r)) => r.map_err(|e| format!("{device}: device work failed: {e}")),
                    Err(p) => Err(format!("{device}: device work failed inside CubeCL: {}", panic_message(&*p))),
                }
            }
            State::Read(f, landing) => {
                match catch_unwind(AssertUnwindSafe(|| f.as_mut().poll(&mut Context::from_waker(&all())))) {
                    Ok(Poll::Pending) => return Ok(false),
                    Ok(Poll::Ready(r)) => match r {
                        Err(e) => Err(format!("{device}: read from the device failed: {e}")),
                        Ok(bytes) => land(&bytes, landing).map_err(|e| e.to_string()),
                    },
                    Err(p) => Err(format!("{device}: a read failed inside CubeCL: {}", panic_message(&*p))),
                }
            }
        };
        *st = State::Done(next.clone());
        next.map(|()| true).map_err(CollectiveError::device)
    }

    /// Blocks until the work completed, or `deadline` passed: parked until the runtime wakes
    /// this thread (no sleep to round a short wait up to the timer's granularity), and looking
    /// again at least every [`LOOK_EVERY`] in case a runtime's future never wakes.
    pub(super) fn wait(&self, device: &str, deadline: Option<Instant>) -> Result<()> {
        if crate::park::until(deadline, LOOK_EVERY, |w| self.poll_waking(device, w))? {
            return Ok(());
        }
        Err(CollectiveError::new(
            ErrorKind::Timeout,
            format!("{device}: device work did not finish before the deadline"),
        ))
    }
}

/// The longest a waiting thread stays parked before it looks at its event again.
const LOOK_EVERY: Duration = Duration::from_micros(200);

/// Copies the wanted bytes of a completed read into host memory: the reads of a buffer's
/// parts, one after another, less `skip` leading bytes.
fn land(bytes: &[cubecl::bytes::Bytes], landing: &Landing) -> Result<()> {
    let (skip, len) = (landing.skip, landing.dst.len);
    let got: usize = bytes.iter().map(|b| b.len()).sum();
    if got < skip + len {
        return Err(CollectiveError::device(format!("the device returned {got} bytes, {} expected", skip + len)));
    }
    let mut out = landing.dst.mem.write(landing.dst.off, len)?;
    let (mut at, mut skip) = (0, skip);
    for b in bytes {
        let b: &[u8] = &b[..];
        let from = skip.min(b.len());
        skip -= from;
        let take = (b.len() - from).min(len - at);
        out[at..at + take].copy_from_slice(&b[from..from + take]);
        at += take;
    }
    Ok(())
}
