//! Where an idle progress thread of a rank waits for the rank's next non-blocking op.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::lock;

/// How long a rank's idle progress thread waits for the next non-blocking op before it ends:
/// waking a parked thread costs a few microseconds, starting one several times that. Under
/// Miri none waits, so that a test's end finds no thread left.
pub(super) const LINGER: Duration = if cfg!(miri) { Duration::ZERO } else { Duration::from_millis(50) };

/// Where an idle progress thread of a rank waits for the rank's next op ([`LINGER`]). It
/// holds no reference to the engine meanwhile, so a communicator dropped meanwhile goes at
/// once; the call that wakes it hands it one.
pub(super) struct Park<T> {
    /// Threads waiting, and the engines handed to them and not yet taken.
    state: Mutex<(usize, Vec<Arc<T>>)>,
    cv: Condvar,
    /// Set when the engine is dropped: its waiting threads end at once.
    closed: AtomicBool,
}

impl<T> Park<T> {
    pub(super) fn new() -> Self {
        Park { state: Mutex::new((0, Vec::new())), cv: Condvar::new(), closed: AtomicBool::new(false) }
    }

    /// Ends the waits (the engine is gone: no op can come).
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        // Taken and let go, so that a thread about to wait either sees the flag or is
        // waiting already.
        drop(lock(&self.state));
        self.cv.notify_all();
    }

    /// Hands the rank's queue to a waiting thread; false when none waits.
    pub(super) fn wake(&self, engine: &Arc<T>) -> bool {
        let mut state = lock(&self.state);
        let (idle, handed) = &mut *state;
        if *idle == handed.len() {
            return false;
        }
        handed.push(engine.clone());
        drop(state);
        self.cv.notify_one();
        true
    }

    /// Waits up to `linger` for [`wake`](Self::wake); the engine it handed over (the thread
    /// then owns the queue: its waker set `worker`), or `None` after `linger`.
    pub(super) fn wait(&self, linger: Duration) -> Option<Arc<T>> {
        if linger.is_zero() {
            return None;
        }
        let deadline = crate::config::deadline_after(linger);
        let mut state = lock(&self.state);
        state.0 += 1;
        loop {
            if let Some(engine) = state.1.pop() {
                state.0 -= 1;
                return Some(engine);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() || self.closed.load(Ordering::SeqCst) {
                state.0 -= 1;
                return None;
            }
            state = self.cv.wait_timeout(state, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle thread's park: a wake reaches a waiting thread only, each waiter takes one
    /// wake, and a waiter no one wakes gives up after its linger.
    #[test]
    fn park_hands_work_to_waiting_threads_only() {
        let park = Arc::new(Park::<u32>::new());
        assert!(!park.wake(&Arc::new(1)), "no thread waits: the caller must start one");
        assert_eq!(park.wait(Duration::ZERO), None);
        assert_eq!(park.wait(Duration::from_millis(5)), None);
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let park = park.clone();
                std::thread::spawn(move || park.wait(Duration::from_secs(600)))
            })
            .collect();
        for v in [7, 8] {
            // Until a thread waits, a wake finds none.
            while !park.wake(&Arc::new(v)) {
                std::thread::yield_now();
            }
        }
        let mut got: Vec<u32> = waiters.into_iter().filter_map(|w| w.join().ok().flatten().map(|v| *v)).collect();
        got.sort_unstable();
        assert_eq!(got, vec![7, 8]);
        assert!(!park.wake(&Arc::new(9)), "both threads took their wake and left");
        assert_eq!(lock(&park.state).0, 0);
        // The engine dropped: a waiting thread ends at once, and so does a later wait.
        let waiter = {
            let park = park.clone();
            std::thread::spawn(move || park.wait(Duration::from_secs(600)))
        };
        while lock(&park.state).0 == 0 {
            std::thread::yield_now();
        }
        park.close();
        assert_eq!(waiter.join().ok().flatten(), None);
        assert_eq!(park.wait(Duration::from_secs(600)), None);
    }
}
