//! Counters for performance investigations (`ruccl-perf` prints them when
//! `RUCCL_PARK_STATS` is set). Not a stable interface: what is counted may change.

/// How the parks of this process's waiting threads ended (a park is a sleep on a rank's
/// doorbell after spinning and yielding did not see what the thread waits for).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Parks {
    /// Woken by a ring (someone changed what the thread waits for).
    pub rung: u64,
    /// Slept out the whole slice with no ring: a lost wake-up if the awaited change happened
    /// meanwhile.
    pub timed_out: u64,
    /// Woken with neither (spurious).
    pub spurious: u64,
    /// Nanoseconds slept by the parks woken by a ring.
    pub rung_nanos: u64,
    /// Nanoseconds slept by the parks that timed out.
    pub timed_out_nanos: u64,
}

/// The park counters since the process started.
///
/// ```
/// let p = ruccl::diag::parks();
/// assert!(p.rung_nanos >= p.rung / 1_000_000_000);
/// ```
pub fn parks() -> Parks {
    use std::sync::atomic::Ordering;
    let c = |i: usize| crate::transport::wait::parks::COUNTS[i].load(Ordering::Relaxed);
    Parks { rung: c(0), timed_out: c(1), spurious: c(2), rung_nanos: c(3), timed_out_nanos: c(4) }
}
