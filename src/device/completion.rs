//! Completion on a thread of the device's own, for a runtime whose completion blocks the
//! thread that asks: CubeCL's CUDA runtime synchronises on its fence inside the first poll of
//! the future it hands out, so polling one from a thread that drives ranks (a group call, the
//! progress thread) would stall every other rank it drives until the GPU is done — and
//! [`Device::poll`](super::Device::poll) must never block. The device hands each such wait to
//! its [`Completer`], a thread that blocks on the waits one after another (in the order they
//! were enqueued, which is the order one stream completes them) and records each result in a
//! [`Completion`] that anyone may poll, with a waker woken once it is there.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Wake, Waker};

/// A wait that blocks until the work behind it completed: `Err` with what failed.
pub(crate) type Job = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// Where a [`Completer`] leaves the result of a job.
#[derive(Default)]
pub(crate) struct Completion {
    result: Mutex<Option<Result<(), String>>>,
    /// Woken once the result is there: added under `result`'s lock while it is `None`, so
    /// none is added after [`finish`](Self::finish) took them.
    wakers: Wakers,
}

impl Completion {
    fn lock(&self) -> MutexGuard<'_, Option<Result<(), String>>> {
        self.result.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The result once the job ran; until then `waker` (if any) is kept, unless one that
    /// wakes the same task is, and woken when the result comes. Never blocks but for the
    /// locks, which are held only to look or to store.
    pub(crate) fn poll(&self, waker: Option<&Waker>) -> Option<Result<(), String>> {
        let result = self.lock();
        if result.is_none()
            && let Some(waker) = waker
        {
            self.wakers.add(waker);
        }
        result.clone()
    }

    /// Stores the result and wakes whoever polled before it came.
    fn finish(&self, r: Result<(), String>) {
        *self.lock() = Some(r);
        self.wakers.wake_all();
    }
}

/// Wakers woken together, behind one waker that stands for them all ([`Wake`]): a future
/// keeps only the waker of its latest poll, so one polled by several parties (a driver's
/// doorbell, a blocking wait, a plain look without a waker) is always polled with this one,
/// and no later poll drops a waker armed before.
#[derive(Default)]
pub(crate) struct Wakers(Mutex<Vec<Waker>>);

impl Wakers {
    /// Adds `w`, unless it wakes the same task as one already there.
    pub(crate) fn add(&self, w: &Waker) {
        let mut ws = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !ws.iter().any(|x| x.will_wake(w)) {
            ws.push(w.clone());
        }
    }

    /// Wakes every waker added, and forgets them (a party still waiting adds its own again
    /// when it polls again).
    fn wake_all(&self) {
        let ws = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        ws.into_iter().for_each(Waker::wake);
    }
}

impl Wake for Wakers {
    fn wake(self: Arc<Self>) {
        self.wake_all();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_all();
    }
}

/// A thread that runs [`Job`]s one after another, started at the first one and ended when
/// the completer is dropped (after the jobs handed to it ran).
pub(crate) struct Completer {
    /// What the thread is called (`ruccl-done <device>`).
    name: String,
    /// `None` inside when the thread could not be started.
    tx: OnceLock<Option<Queue>>,
}

/// The jobs handed to a [`Completer`]'s thread, with where each one's result goes.
type Queue = Sender<(Job, Arc<Completion>)>;

impl Completer {
    /// A completer for the device named `device`; its thread starts with the first job.
    pub(crate) fn new(device: &str) -> Self {
        Completer { name: format!("ruccl-done {device}"), tx: OnceLock::new() }
    }

    /// Hands `job` to the thread and returns where its result will be; the job back when no
    /// thread could be started (the caller then blocks on it itself).
    pub(crate) fn hand(&self, job: Job) -> Result<Arc<Completion>, Job> {
        let Some(tx) = self.tx.get_or_init(|| self.start()) else { return Err(job) };
        let done = Arc::new(Completion::default());
        match tx.send((job, done.clone())) {
            Ok(()) => Ok(done),
            // The thread has gone (it never exits while the sender lives, but be safe).
            Err(e) => Err(e.0.0),
        }
    }

    fn start(&self) -> Option<Queue> {
        let (tx, rx) = channel::<(Job, Arc<Completion>)>();
        let spawned = std::thread::Builder::new().name(self.name.clone()).spawn(move || {
            for (job, done) in rx {
                // A panic inside the runtime fails this wait, not the thread (whose later
                // jobs would otherwise never complete).
                let r = catch_unwind(AssertUnwindSafe(job))
                    .unwrap_or_else(|p| Err(format!("waiting for device work panicked: {}", panic_message(&*p))));
                done.finish(r);
            }
        });
        spawned.is_ok().then_some(tx)
    }
}

/// What a caught panic says (its message, or "a panic").
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Wake, Waker};
    use std::time::Duration;

    use super::Completer;

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// The combined waker wakes every party that added its own, once each, however many
    /// times they were added; a party must add its waker again after.
    #[test]
    fn wakers_wake_every_party_once() {
        let (a, b) = (Arc::new(Flag(AtomicBool::new(false))), Arc::new(Flag(AtomicBool::new(false))));
        let (wa, wb) = (Waker::from(a.clone()), Waker::from(b.clone()));
        let all = Arc::new(super::Wakers::default());
        for w in [&wa, &wb, &wa, &wb.clone()] {
            all.add(w);
        }
        assert_eq!(all.0.lock().unwrap().len(), 2, "a duplicate was kept");
        let combined = Waker::from(all.clone());
        combined.wake_by_ref();
        assert!(a.0.load(Ordering::SeqCst) && b.0.load(Ordering::SeqCst), "a party was not woken");
        assert!(all.0.lock().unwrap().is_empty(), "woken wakers are forgotten");
    }

    /// A job that blocks (as CUDA's fence wait does) blocks the completer's thread, not the
    /// poller: polls return at once until it is done, then the waker has been woken and the
    /// result is there; later jobs complete in order; a panicking job fails alone.
    #[test]
    fn a_blocking_wait_runs_on_the_thread_and_wakes_the_poller() {
        let c = Completer::new("test:0");
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let first = c
            .hand(Box::new(move || {
                go_rx.recv().map_err(|e| e.to_string())?;
                Ok(())
            }))
            .map_err(drop)
            .unwrap();
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        assert_eq!(first.poll(Some(&waker)), None, "polled before the job ran");
        assert_eq!(first.poll(Some(&waker)), None, "a second poll keeps one waker");
        let second = c.hand(Box::new(|| Err("the device failed".into()))).map_err(drop).unwrap();
        let third = c.hand(Box::new(|| panic!("inside the runtime"))).map_err(drop).unwrap();
        let fourth = c.hand(Box::new(|| Ok(()))).map_err(drop).unwrap();
        assert_eq!(second.poll(None), None, "a later job ran before an earlier one");
        go_tx.send(()).unwrap();
        let got = crate::park::until::<()>(None, Duration::from_millis(5), |_| Ok(fourth.poll(None).is_some()));
        assert_eq!(got, Ok(true));
        assert!(flag.0.load(Ordering::SeqCst), "the waker was not woken");
        assert_eq!(first.poll(None), Some(Ok(())));
        assert_eq!(second.poll(None), Some(Err("the device failed".into())));
        let third = third.poll(None).unwrap().unwrap_err();
        assert!(third.contains("panicked") && third.contains("inside the runtime"), "{third}");
        assert_eq!(fourth.poll(None), Some(Ok(())));
    }
}
