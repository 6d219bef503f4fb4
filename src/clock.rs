//! A clock for times that need no precision: the flight recorder's entries, a wait's
//! deadline and its warning timer — milliseconds matter there, not nanoseconds.
//!
//! [`Instant::now`] reads the CPU's time-stamp counter in an ordered way, which waits for the
//! loads before it — on the small-op path, the cache lines just written by other cores. One
//! such read per 16-byte gather took the slots protocol alone from 0.25 to 0.40 us per op with
//! 4 ranks on 2 cores (`benches/study/slots.rs`, PERFORMANCE.md session 23). On Linux,
//! [`coarse_now`] reads `CLOCK_MONOTONIC_COARSE` instead (the kernel's last tick: no counter
//! read) and places it on the [`Instant`] line.

use std::time::Instant;

/// Now, to within the kernel's tick (1-4 ms) either way, as an [`Instant`]: comparable with
/// and subtractable from any other `Instant` (a difference below a tick may come out as zero:
/// [`Instant::duration_since`] saturates).
#[inline]
pub(crate) fn coarse_now() -> Instant {
    imp::now()
}

/// [`coarse_now`] as a number: nanoseconds on the clock's own line, which [`at_raw`] turns
/// back into an `Instant`. Cheaper to keep than an `Instant` (the flight recorder's lock-free
/// entries store it as a word; an `Instant` subtraction per op cost ~100 instructions).
#[inline]
pub(crate) fn coarse_raw() -> u64 {
    imp::raw()
}

/// The `Instant` of a [`coarse_raw`] reading.
pub(crate) fn at_raw(raw: u64) -> Instant {
    imp::at_raw(raw)
}

#[cfg(all(target_os = "linux", not(miri)))]
mod imp {
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    /// `CLOCK_MONOTONIC_COARSE` (the same clock as `Instant`'s, at the tick's resolution):
    /// seconds and nanoseconds.
    #[inline]
    fn coarse_ts() -> Option<(u64, u32)> {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec; the call writes nothing else.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
        let (s, ns) = (u64::try_from(ts.tv_sec).ok()?, u32::try_from(ts.tv_nsec).ok()?);
        (rc == 0).then_some((s, ns))
    }

    /// [`coarse_ts`] as a `Duration`.
    fn coarse() -> Option<Duration> {
        coarse_ts().map(|(s, ns)| Duration::new(s, ns))
    }

    /// An `Instant` and the coarse clock read together: the line one maps onto the other.
    fn base() -> Option<&'static (Instant, Duration)> {
        static BASE: OnceLock<Option<(Instant, Duration)>> = OnceLock::new();
        BASE.get_or_init(|| {
            let c = coarse()?;
            Some((Instant::now(), c))
        })
        .as_ref()
    }

    #[inline]
    pub(super) fn now() -> Instant {
        match (base(), coarse()) {
            (Some((at, c0)), Some(c)) => *at + c.saturating_sub(*c0),
            _ => Instant::now(),
        }
    }

    /// The coarse clock in nanoseconds (0 if it cannot be read: such readings map to the
    /// start of the line, never to a panic). The same reading as `coarse`'s, without building
    /// a `Duration`.
    #[inline]
    pub(super) fn raw() -> u64 {
        coarse_ts().map_or(0, |(s, ns)| s.wrapping_mul(1_000_000_000).wrapping_add(u64::from(ns)))
    }

    pub(super) fn at_raw(raw: u64) -> Instant {
        match base() {
            Some((at, c0)) => *at + Duration::from_nanos(raw).saturating_sub(*c0),
            None => Instant::now(),
        }
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
mod imp {
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    #[inline]
    pub(super) fn now() -> Instant {
        Instant::now()
    }

    /// What raw readings count from.
    fn anchor() -> Instant {
        static ANCHOR: OnceLock<Instant> = OnceLock::new();
        *ANCHOR.get_or_init(Instant::now)
    }

    pub(super) fn raw() -> u64 {
        u64::try_from(Instant::now().saturating_duration_since(anchor()).as_nanos()).unwrap_or(u64::MAX)
    }

    pub(super) fn at_raw(raw: u64) -> Instant {
        anchor() + Duration::from_nanos(raw)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    /// Read between two precise reads, it lies between them, give or take a few ticks
    /// (however long the thread was preempted in between), and it moves forward with them.
    #[test]
    fn coarse_now_follows_the_clock() {
        let slack = Duration::from_millis(20);
        let within = |t: Instant, before: Instant, after: Instant| t + slack >= before && t <= after + slack;
        let before = Instant::now();
        let a = super::coarse_now();
        let after = Instant::now();
        assert!(within(a, before, after), "{a:?} not in {before:?}..{after:?}");
        std::thread::sleep(Duration::from_millis(100));
        let before = Instant::now();
        let b = super::coarse_now();
        let after = Instant::now();
        assert!(within(b, before, after), "{b:?} not in {before:?}..{after:?}");
        assert!(b.duration_since(a) >= Duration::from_millis(100) - slack, "{:?}", b.duration_since(a));
    }

    /// A raw reading maps back onto the `Instant` line where `coarse_now` would have put it.
    #[test]
    fn raw_readings_map_back() {
        let slack = Duration::from_millis(20);
        let before = Instant::now();
        let t = super::at_raw(super::coarse_raw());
        let after = Instant::now();
        assert!(t + slack >= before && t <= after + slack, "{t:?} not in {before:?}..{after:?}");
    }
}
