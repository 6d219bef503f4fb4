//! One thread at a time in a communicator's calls. Calls on one communicator must come in the
//! same order on every rank; two threads calling at once are ordered differently in each
//! process (or each rank's thread), so op #N on one rank can be one thread's call and on
//! another rank the other thread's — with the same shape, the ranks then combine data of
//! two different calls and every call returns `Ok`. A call made while another thread's call
//! is in flight therefore fails, and aborts the communicator: the call in flight may already
//! be paired with the wrong call elsewhere, and its peers must not go on with it either.
//! NCCL leaves this undefined ("a communicator is used by one thread at a time").

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use crate::op::Composite;

/// What a refused second thread is told to do, and the call in flight when it learns of it.
pub(crate) const ONE_THREAD_HINT: &str = "make every call on a communicator from one thread (or hand it between \
                                          threads one call at a time); for streams of ops that must run at once, \
                                          give each its own communicator (split_all), then create the \
                                          communicators again";

/// The thread inside a communicator's call, if any (its [`token`]; 0: none), whether a call
/// of another thread was refused meanwhile, and the composite call it is making, if any
/// ([`Composite::code`]): its steps' ops carry it, for the ranks to agree on.
#[derive(Debug, Default)]
pub(crate) struct CallerSlot {
    owner: AtomicU64,
    refused: AtomicBool,
    part_of: AtomicU8,
}

/// This thread's hold on a [`CallerSlot`], until dropped; `None` inside a call the same
/// thread already holds it for (a blocking call that issues and waits, a split's all-gather).
#[must_use]
pub(crate) struct Entered<'a>(Option<(&'a CallerSlot, u64)>);

impl Entered<'_> {
    /// The thread that entered ([`token`]); `None` inside a call it already held.
    #[inline]
    pub(crate) fn thread(&self) -> Option<u64> {
        self.0.map(|(_, me)| me)
    }

    /// Whether another thread's call was refused while this one was in flight: the ranks may
    /// have paired this call with that thread's, so its result cannot be trusted. Always
    /// false inside a call the thread already held.
    pub(crate) fn overlapped(&self) -> bool {
        self.0.is_some_and(|(slot, _)| slot.refused.load(Ordering::Relaxed))
    }

    /// Marks the call this thread entered as `c`, until it is left: the ops it makes are
    /// steps of `c` ([`CallerSlot::part_of`]). Nothing inside a call already held.
    pub(crate) fn as_part_of(&self, c: Composite) {
        if let Some((slot, _)) = self.0 {
            slot.part_of.store(Composite::code(Some(c)), Ordering::Relaxed);
        }
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        // Only the owner clears it: two threads that entered within the same instant (each
        // storing its token) must not leave the slot empty while one of them is still inside.
        if let Some((slot, me)) = self.0
            && slot.owner.load(Ordering::Relaxed) == me
        {
            slot.part_of.store(0, Ordering::Relaxed);
            slot.owner.store(0, Ordering::Relaxed);
        }
    }
}

impl CallerSlot {
    /// Enters a call from this thread; `Err` when another thread is inside one.
    ///
    /// A detector, not a lock (the rank's own locks order its ops): loads and stores, no
    /// locked instruction (per op +18 instructions, PERFORMANCE.md session 46). Two threads
    /// that enter within the same few nanoseconds may both pass; threads that call at once in
    /// earnest overlap for whole ops, and one of them is refused.
    #[inline]
    pub(crate) fn enter(&self) -> Result<Entered<'_>, ()> {
        let me = token();
        match self.owner.load(Ordering::Relaxed) {
            0 => {
                self.owner.store(me, Ordering::Relaxed);
                self.refused.store(false, Ordering::Relaxed);
                Ok(Entered(Some((self, me))))
            }
            held if held == me => Ok(Entered(None)),
            _ => {
                self.refused.store(true, Ordering::Relaxed);
                Err(())
            }
        }
    }
}

impl CallerSlot {
    /// The composite call the thread inside is making ([`Entered::as_part_of`]), if any.
    /// Read by that thread, inside its call.
    #[inline]
    pub(crate) fn part_of(&self) -> Option<Composite> {
        match self.part_of.load(Ordering::Relaxed) {
            0 => None,
            c => Composite::from_code(c).flatten(),
        }
    }
}

/// A number of this thread's own, never 0: the address of a thread-local (unique among the
/// live threads; no lazy initialisation).
#[inline]
pub(crate) fn token() -> u64 {
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
        assert!(!outer.overlapped());
        std::thread::scope(|s| {
            assert!(s.spawn(|| slot.enter().is_err()).join().unwrap(), "another thread entered");
        });
        // The call in flight learns of the refusal: its result cannot be trusted.
        assert!(outer.overlapped());
        drop(outer);
        std::thread::scope(|s| {
            assert!(s.spawn(|| slot.enter().is_ok_and(|e| !e.overlapped())).join().unwrap(), "free once left");
        });
        assert!(slot.enter().is_ok());
        // A composite call's mark lasts while it is held, inner calls included.
        let outer = slot.enter().unwrap();
        outer.as_part_of(Composite::GatherBytes);
        let inner = slot.enter().unwrap();
        inner.as_part_of(Composite::BroadcastBytes);
        assert_eq!(slot.part_of(), Some(Composite::GatherBytes), "an inner call re-marked it");
        drop((inner, outer));
        assert_eq!(slot.part_of(), None);
        // Two threads that both passed the load (each stored its token, the other's last):
        // the one whose token is not there leaves the slot to the other, still inside.
        let first = slot.enter().unwrap();
        let other = slot.owner.load(Ordering::Relaxed) ^ 1;
        slot.owner.store(other, Ordering::Relaxed);
        drop(first);
        assert_eq!(slot.owner.load(Ordering::Relaxed), other, "cleared another thread's hold");
    }
}
