//! Blocking on a runtime's completion without sleeping past it: poll with a waker that
//! unparks this thread, and park in between. What a GPU device's event wait
//! (`device::cubecl`) and a burn tensor's read (`burn::host`) both do.

use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

/// Wakes a parked thread.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Calls `ready` with a waker that unparks this thread until it returns `Ok(true)`; between
/// calls the thread parks until woken, `deadline` passes, or `look_every` elapsed (for a
/// runtime that might not wake it). `Ok(false)` when the deadline passed first.
///
/// # Errors
/// The first error `ready` returns.
pub(crate) fn until<E>(
    deadline: Option<Instant>,
    look_every: Duration,
    mut ready: impl FnMut(&Waker) -> Result<bool, E>,
) -> Result<bool, E> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    loop {
        if ready(&waker)? {
            return Ok(true);
        }
        let now = Instant::now();
        let pause = match deadline {
            Some(t) if now >= t => return Ok(false),
            Some(t) => (t - now).min(look_every),
            None => look_every,
        };
        std::thread::park_timeout(pause);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    /// A wake from another thread ends the park at once, long before `look_every`; a ready
    /// that never comes ends at the deadline with `false`.
    #[test]
    fn a_wake_ends_the_park_and_the_deadline_ends_the_wait() {
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let mut woken = false;
        let got = super::until::<()>(Some(start + Duration::from_secs(20)), Duration::from_secs(10), |w| {
            if !woken {
                woken = true;
                let (w, done) = (w.clone(), done.clone());
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(20));
                    done.store(true, Ordering::SeqCst);
                    w.wake();
                });
            }
            Ok(done.load(Ordering::SeqCst))
        });
        assert_eq!(got, Ok(true));
        assert!(start.elapsed() < Duration::from_secs(5), "parked {:?}: the wake did not end it", start.elapsed());
        let t = Instant::now() + Duration::from_millis(30);
        assert_eq!(super::until::<()>(Some(t), Duration::from_millis(10), |_| Ok(false)), Ok(false));
        assert!(Instant::now() >= t);
        assert_eq!(super::until(None, Duration::from_millis(1), |_| Err("failed")), Err("failed"));
    }
}
