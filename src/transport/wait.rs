//! Waiting without burning a core forever and without a 40–80 µs wake-up on every message:
//! spin briefly — only while the live local ranks fit on the machine's cores, and only while
//! spinning pays (see [`Spin`]), since a spinning waiter on a shared core takes the time the
//! awaited peer needs — then yield, then park on a condition variable in short slices, each
//! ending with the caller's slow-path checks.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

mod spin;
use spin::{Cores, Spin};

/// Local ranks (communicators) alive in this process: the threads that may run ops at once.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Ranks of this host's other processes that a live mesh of this process reaches through
/// shared memory: they run on this host's cores too.
static HOST: AtomicUsize = AtomicUsize::new(0);

/// Counts a communicator as a live local rank while it lives. (Counted per rank rather than
/// per op so that no op writes a counter every rank shares.)
#[derive(Debug)]
pub(crate) struct LiveRank(&'static AtomicUsize);

impl LiveRank {
    pub(crate) fn enter() -> Self {
        // Registering for `membarrier` waits for the kernel's RCU grace period (~15 ms here):
        // done while a communicator is made, not in its first op.
        membarrier::available();
        Self::count(&LIVE)
    }

    /// Counts a rank of another process of this host (a shared-memory peer) while the mesh
    /// that reaches it lives.
    pub(crate) fn elsewhere_on_host() -> Self {
        Self::count(&HOST)
    }

    fn count(counter: &'static AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        LiveRank(counter)
    }
}

impl Drop for LiveRank {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether spinning is worth it: every live rank can have a core of its own. This process's
/// ranks must fit the cores it may run on, and with the other processes' ranks of this host,
/// the host's cores. A launcher that binds each process to a core of its own (`mpirun` binds
/// to cores by default) leaves each process one core: comparing every rank of the host with
/// that one core stopped all spinning there, and two processes' 16-byte all_reduce yielded
/// its core ~0.4 times an op (1.3-1.7 us a call, against 0.9-1.1 unbound).
pub(crate) fn may_spin() -> bool {
    static CORES: OnceLock<Cores> = OnceLock::new();
    CORES.get_or_init(Cores::find).fit(LIVE.load(Ordering::Relaxed), HOST.load(Ordering::Relaxed))
}

/// What a wait's stop check reports, from what the caller loaded (departure first, then the
/// poison: see the callers): the poison outranks the awaited peer's departure.
pub(crate) fn stopped(failed: bool, gone: bool) -> Option<WaitOutcome> {
    if failed {
        Some(WaitOutcome::Poisoned)
    } else if gone {
        Some(WaitOutcome::PeerGone)
    } else {
        None
    }
}

/// How a wait ended when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The condition holds.
    Ready,
    /// The deadline passed first.
    TimedOut,
    /// The awaited peer departed.
    PeerGone,
    /// The link was poisoned (aborted or failed elsewhere).
    Poisoned,
}

thread_local! {
    /// This thread's spin budget: whether its waits' peers ran beside it is a property of the
    /// waiting thread's recent past, whichever rank it waits for.
    static SPIN_STATE: Cell<Spin> = const { Cell::new(Spin::new()) };
}
/// Threads parked (or about to park) on any [`Event`] of this process: counted with each
/// event's own `parked`, so that a ringer of several doorbells
/// ([`anyone_parked`]) looks at one word while nobody sleeps (the usual case).
static PARKED: AtomicUsize = AtomicUsize::new(0);

/// Whether any thread of this process is parked or about to park on an [`Event`]. For a
/// caller that has just taken a [`ringer_fence`], as [`Event::ring_fenced`]'s callers do: a
/// parker counts itself here after its event's own count and before its [`parker_fence`] and
/// last look at what it waits for, so either this load sees it, or that look sees what the
/// caller changed before its fence; `false` means no doorbell needs ringing.
#[inline]
pub(crate) fn anyone_parked() -> bool {
    PARKED.load(Ordering::SeqCst) > 0
}

/// The ringer's half of the fence pair between a thread that changes what a waiter waits for
/// and then looks whether it parked (every exchanged op, twice) and a waiter that counts
/// itself parked and then looks at what it waits for once more (rarely: after
/// [`YIELD_FOR`] of yielding). Where the kernel offers `membarrier` (Linux), the parker's
/// half ([`parker_fence`]) makes every thread of the process run a full barrier, and this
/// half needs only keep the compiler from moving the look before the change — no `mfence`
/// on the path of every op (with 4 ranks on one core, the two fences of a 16-byte rooted op
/// were ~5% of it). Elsewhere both halves are `SeqCst` fences. Only for threads of this
/// process: a peer process's waiter is woken through its own protocol (`shm_io`).
#[inline]
pub(crate) fn ringer_fence() {
    if membarrier::available() {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    } else {
        std::sync::atomic::fence(Ordering::SeqCst);
    }
}

/// The parker's half of [`ringer_fence`]'s pair: after counting itself parked, before its
/// last look.
fn parker_fence() {
    if !membarrier::barrier() {
        std::sync::atomic::fence(Ordering::SeqCst);
    }
}

/// `membarrier(2)`: a barrier on every thread of this process, at the cost of a system call
/// (and an interrupt per core running one of them) on the side that asks for it.
mod membarrier {
    #[cfg(all(target_os = "linux", not(miri)))]
    mod imp {
        use std::sync::OnceLock;

        const PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
        const REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

        fn call(cmd: libc::c_long) -> bool {
            // SAFETY: `membarrier` reads no memory of ours; an unknown or refused command is
            // an error return.
            unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long, 0 as libc::c_long) == 0 }
        }

        /// Whether this process registered for expedited private barriers (once, at first
        /// use; every thread sees the same answer, so ringers and parkers agree).
        #[inline]
        pub(crate) fn available() -> bool {
            static REGISTERED: OnceLock<bool> = OnceLock::new();
            *REGISTERED.get_or_init(|| call(REGISTER_PRIVATE_EXPEDITED) && call(PRIVATE_EXPEDITED))
        }

        /// A barrier on every thread of this process; false when there is none to be had
        /// (the caller then fences itself, and ringers do too).
        pub(crate) fn barrier() -> bool {
            available() && call(PRIVATE_EXPEDITED)
        }
    }

    #[cfg(not(all(target_os = "linux", not(miri))))]
    mod imp {
        #[inline]
        pub(crate) fn available() -> bool {
            false
        }

        pub(crate) fn barrier() -> bool {
            false
        }
    }

    pub(super) use imp::{available, barrier};
}

/// How long to keep yielding before parking. A parked waiter costs whoever ends its wait a
/// futex wake-up, on that rank's own time: a gather root that releases three lent 1 MiB
/// blocks spent ~17% of its op waking the non-roots that had parked (4 processes on 2
/// cores). At 300 µs, 4-process gather at 4 MiB took 494-582 µs and broadcast at 1 MiB
/// 322-541; at 1 ms, 418-437 and 201-362 (5 rounds alternated; PERFORMANCE.md, session 37).
/// A yielding waiter gives its core to any runnable thread, so the longer phase mostly
/// costs cores that were idle; of the rows measured only 4-process scatter at 16 MiB got
/// slower (778-911 -> 813-1196 µs; OpenMPI 1.6 ms).
const YIELD_FOR: Duration = Duration::from_millis(1);
/// Longest single sleep; the slow-path checks run at least this often.
const PARK_SLICE: Duration = Duration::from_millis(20);
/// A park that ends this much later than asked means the process was stopped (`SIGSTOP`,
/// a debugger) or starved: what peers sent meanwhile is still unread on its connections.
const STALL: Duration = Duration::from_secs(1);
/// How long a wait that woke from a [`STALL`] lets the reader threads catch up before it
/// trusts what it sees: a peer that failed the op at its deadline and left must be heard as
/// that failure, not blamed for the deadline this process slept through.
const SETTLE: Duration = Duration::from_millis(200);

thread_local! {
    /// The longest [`STALL`] of this thread's latest wait, if it had one.
    static STALLED: std::cell::Cell<Option<Duration>> = const { std::cell::Cell::new(None) };
}

/// How long this thread's latest wait went without running, if it stalled (the process was
/// stopped, or starved of CPU): an error that wait ends in says so, since a peer may then have
/// given up on this rank first.
pub(crate) fn last_stall() -> Option<Duration> {
    STALLED.get()
}

/// A rank's doorbell: anyone who changes what the rank may be waiting for rings it.
#[derive(Debug, Default)]
pub(crate) struct Event {
    parked: AtomicUsize,
    /// Rings heard while someone was parked or about to park: a parker that sees it move
    /// between its last look and its sleep does not sleep.
    rings: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

/// Rings `events` and the process-wide [`bell`], for a caller that has just taken a
/// [`ringer_fence`] and seen [`anyone_parked`]: every doorbell of this process's ranks that
/// an op may have made ready, then the one a thread driving several ranks waits on.
pub(crate) fn ring_all<'a>(events: impl Iterator<Item = &'a Event>) {
    for e in events {
        e.ring_fenced();
    }
    bell().ring_fenced();
}

/// The process-wide doorbell, rung with every rank's: what a thread driving several ranks
/// waits on (a group call, the shared progress thread), whichever communicators and
/// transports those ranks use. Ringing it costs one load while nobody sleeps on it.
pub(crate) fn bell() -> &'static Event {
    static BELL: Event = Event::new();
    &BELL
}

impl Event {
    pub(crate) const fn new() -> Self {
        Event { parked: AtomicUsize::new(0), rings: AtomicUsize::new(0), lock: Mutex::new(()), cv: Condvar::new() }
    }

    /// Wakes the owner if it sleeps. Cheap when it does not: the look is inlined into the
    /// caller (every exchanged op rings each peer), the wake-up is not.
    #[inline]
    pub(crate) fn ring(&self) {
        ringer_fence();
        self.ring_fenced();
    }

    /// [`ring`](Self::ring) for a caller that has just taken a [`ringer_fence`] (one fence for
    /// several doorbells). The fence pairs with the one a parker takes after counting itself
    /// parked: either this load sees the parker, or the parker's last look at `ready` sees what
    /// the caller changed before ringing. Without the pair (a release store, then a load: the
    /// load may be ordered first) a ring could miss a rank about to sleep, which then slept
    /// out its whole [`PARK_SLICE`] unless something else rang.
    #[inline]
    pub(crate) fn ring_fenced(&self) {
        if self.parked.load(Ordering::SeqCst) > 0 {
            self.wake();
        }
    }

    /// Counts this thread no longer parked (after a park, or a look that found it need not).
    fn unpark(&self) {
        PARKED.fetch_sub(1, Ordering::SeqCst);
        self.parked.fetch_sub(1, Ordering::SeqCst);
    }

    #[cold]
    #[inline(never)]
    fn wake(&self) {
        self.rings.fetch_add(1, Ordering::SeqCst);
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.cv.notify_all();
    }

    /// The wait loop. `stop` reports abort / departure; it is checked alongside `ready`, and
    /// `ready` is looked at once more after `stop` fires, so that whatever a peer did before
    /// it left or failed (sent its last message, released a lend) is never overtaken by the
    /// news of its departure.
    pub(crate) fn wait(
        &self,
        deadline: Instant,
        ready: &mut dyn FnMut() -> bool,
        stop: &dyn Fn() -> Option<WaitOutcome>,
        slow: &mut dyn FnMut() -> crate::error::Result<()>,
    ) -> crate::error::Result<WaitOutcome> {
        if may_spin() {
            let mut spin = SPIN_STATE.get();
            let spins = spin.spins();
            let paid = (0..spins).any(|_| {
                let r = ready();
                if !r {
                    std::hint::spin_loop();
                }
                r
            });
            spin.record(spins, paid);
            SPIN_STATE.set(spin);
            if paid {
                return Ok(WaitOutcome::Ready);
            }
        }
        let start = Instant::now();
        while start.elapsed() < YIELD_FOR {
            if ready() {
                return Ok(WaitOutcome::Ready);
            }
            if let Some(s) = stop() {
                return Ok(if ready() { WaitOutcome::Ready } else { s });
            }
            std::thread::yield_now();
        }
        let mut stalled = false;
        let mut settled = false;
        STALLED.set(None);
        loop {
            if std::mem::take(&mut stalled) {
                super::tcp::arm_readers();
                std::thread::sleep(SETTLE);
                settled = true;
            }
            if ready() {
                return Ok(WaitOutcome::Ready);
            }
            if let Some(s) = stop() {
                return Ok(if ready() { WaitOutcome::Ready } else { s });
            }
            let now = Instant::now();
            if now >= deadline {
                // A deadline that passed long before this look passed while this thread did
                // not look: stopped before the wait began (in the op's copies, its writes),
                // not only in a park. The peers' news gets the same chance as after a stalled
                // park (a large all_reduce over TCP, stopped and resumed: "rank 0 never
                // answered" instead of rank 0's own failure, which waited unread).
                if !settled && now.saturating_duration_since(deadline) > STALL {
                    stalled = true;
                    continue;
                }
                return Ok(WaitOutcome::TimedOut);
            }
            slow()?;
            // Whatever shared-memory peers would leave to this thread must wake it now.
            super::tcp::shm_io::before_park();
            // `ready` is looked at without the lock: it may ring this very doorbell (a rank
            // that reads its own socket or ring hands itself a message). A ring after that look
            // either moved `rings` before the lock is taken here, or waits for the lock until
            // this thread sleeps.
            self.parked.fetch_add(1, Ordering::SeqCst);
            PARKED.fetch_add(1, Ordering::SeqCst);
            // Pairs with the ringer's fence (see `ringer_fence`).
            parker_fence();
            let seen = self.rings.load(Ordering::SeqCst);
            if ready() || stop().is_some() {
                self.unpark();
                continue;
            }
            // Sockets the ranks read themselves (the look above may take one over) go back to
            // their reader tasks, which read what is there already and ring.
            super::tcp::arm_readers();
            let g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            if self.rings.load(Ordering::SeqCst) != seen {
                drop(g);
                self.unpark();
                continue;
            }
            let slice = PARK_SLICE.min(deadline.saturating_duration_since(now));
            let (g, res) = self.cv.wait_timeout(g, slice).unwrap_or_else(|e| e.into_inner());
            let slept = now.elapsed();
            stalled = slept > slice + STALL;
            if stalled {
                STALLED.set(STALLED.get().max(Some(slept - slice)));
            }
            self.unpark();
            let rung = self.rings.load(Ordering::Relaxed) != seen;
            drop(g);
            parks::record(rung, res.timed_out(), now);
        }
    }
}

/// How parks ended, counted process-wide: the bimodal mode of ranks on too few cores (runs
/// that park at all are 10-50x slower) is a lost wake-up if its parks end by timeout, a
/// late one if they end by a ring. Counted only after a thread slept (a futex wait already
/// paid), so the hot path pays nothing; read with [`crate::diag::parks`].
pub(crate) mod parks {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    /// Parks woken by a ring; by the slice's timeout with no ring; neither (spurious); and the
    /// nanoseconds slept by the first two kinds.
    pub(crate) static COUNTS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

    pub(super) fn record(rung: bool, timed_out: bool, since: Instant) {
        let slept = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let (kind, nanos) = match (rung, timed_out) {
            (true, _) => (0, Some(3)),
            (false, true) => (1, Some(4)),
            (false, false) => (2, None),
        };
        COUNTS[kind].fetch_add(1, Ordering::Relaxed);
        if let Some(n) = nanos {
            COUNTS[n].fetch_add(slept, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wait whose deadline passed long before its first look (the thread was stopped in the
    /// op's copies) gives what is on its way a moment before it times out: here a poison
    /// that lands 50 ms in, as a peer's abort read off its socket would.
    #[test]
    fn a_deadline_passed_long_before_the_first_look_settles_first() {
        let poisoned = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let p = poisoned.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            p.store(true, Ordering::SeqCst);
        });
        let long_ago = Instant::now().checked_sub(STALL * 2).unwrap_or_else(Instant::now);
        let stop = || poisoned.load(Ordering::SeqCst).then_some(WaitOutcome::Poisoned);
        let out = Event::new().wait(long_ago, &mut || false, &stop, &mut || Ok(()));
        assert!(t.join().is_ok());
        assert_eq!(out.ok(), Some(WaitOutcome::Poisoned));
        // A deadline that has only just passed times out at once.
        let just = Instant::now();
        let out = Event::new().wait(just, &mut || false, &|| None, &mut || Ok(()));
        assert_eq!(out.ok(), Some(WaitOutcome::TimedOut));
        assert!(just.elapsed() < SETTLE, "{:?}", just.elapsed());
    }
}
