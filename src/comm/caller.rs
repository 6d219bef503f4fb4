//! One thread at a time in a communicator's calls. Calls on one communicator must come in the
//! same order on every rank; two threads calling at once are ordered differently in each
//! process (or each rank's thread), so op #N on one rank can be one thread's call and on
//! another rank the other thread's — with the same shape, the ranks then combine data of
//! two different calls and every call returns `Ok`. A call made while another thread's call
//! is in flight therefore fails, and aborts the communicator: the call in flight may already
//! be paired with the wrong call elsewhere, and its peers must not go on with it either.
//! NCCL leaves this undefined ("a communicator is used by one thread at a time").

use std::sync::atomic::{AtomicU64, Ordering};

/// The thread inside a communicator's call, if any (its [`token`]; 0: none).
#[derive(Debug, Default)]
pub(crate) struct CallerSlot(AtomicU64);

/// This thread's hold on a [`CallerSlot`], until dropped; `None` inside a call the same
/// thread already holds it for (a blocking call that issues and waits, a split's all-gather).
#[must_use]
pub(crate) struct Entered<'a>(Option<&'a AtomicU64>);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.0 {
            slot.store(0, Ordering::Relaxed);
        }
    }
}

impl CallerSlot {
    /// Enters a call from this thread; `Err` when another thread is inside one.
    ///
    /// A detector, not a lock (the rank's own locks order its ops): a load and a store, no
    /// locked instruction (a compare-exchange cost a 2-process 16-byte all_reduce ~10%). Two
    /// threads that enter within the same few nanoseconds may both pass; threads that call at
    /// once in earnest overlap for whole ops, and one of them is refused.
    #[inline]
    pub(crate) fn enter(&self) -> Result<Entered<'_>, ()> {
        let me = token();
        match self.0.load(Ordering::Relaxed) {
            0 => {
                self.0.store(me, Ordering::Relaxed);
                Ok(Entered(Some(&self.0)))
            }
            held if held == me => Ok(Entered(None)),
            _ => Err(()),
        }
    }
}

/// A number of this thread's own, never 0: the address of a thread-local (unique among the
/// live threads; no lazy initialisation).
#[inline]
fn token() -> u64 {
    thread_local! {
        static TOKEN: u8 = const { 0 };
    }
    TOKEN.with(|t| std::ptr::from_ref(t) as usize as u64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn one_thread_at_a_time_and_reentrant() {
        let slot = CallerSlot::default();
        let outer = slot.enter().unwrap();
        // The same thread again (a call inside a call) holds nothing of its own.
        let inner = slot.enter().unwrap();
        assert!(inner.0.is_none());
        drop(inner);
        std::thread::scope(|s| {
            assert!(s.spawn(|| slot.enter().is_err()).join().unwrap(), "another thread entered");
        });
        drop(outer);
        std::thread::scope(|s| {
            assert!(s.spawn(|| slot.enter().is_ok()).join().unwrap(), "free once left");
        });
        assert!(slot.enter().is_ok());
    }
}
