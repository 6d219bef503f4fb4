//! A port to launch on: what a launch script or a test that must pick `MASTER_PORT` itself
//! can use.

use std::net::TcpListener;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// Where [`free_port`] looks: 20000–31999, below Linux's ephemeral range (32768–60999 by
/// default, `/proc/sys/net/ipv4/ip_local_port_range`).
const LOW: u32 = 20000;
const SPAN: u32 = 12000;

/// A TCP port of `127.0.0.1` that nothing holds at the time of the call, below Linux's
/// ephemeral range; `None` when none of the ports tried was free.
///
/// Free now is not free later: the port is only promised to be no port the kernel hands to
/// outgoing connections. Binding to port 0 and passing the port on gives one of those, and
/// any process's next connection may take it before the rendezvous listens there ("Address
/// already in use"). Successive calls in one process try different ports, so threads that
/// each pick one do not collide.
///
/// ```
/// let port = ruccl::launch::free_port().expect("a free port");
/// assert!((20000..32000).contains(&port));
/// // e.g. MASTER_ADDR=127.0.0.1 MASTER_PORT=<port> for every rank of a launch on this host
/// ```
pub fn free_port() -> Option<u16> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // Where this process starts in the span, chosen once: a seed per call (it once took the
    // clock's nanoseconds at every call) let two threads' calls land on one port now and then,
    // and two tests of one binary then launched on the same port ("Address already in use").
    static SEED: OnceLock<u32> = OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        std::process::id().wrapping_mul(2_654_435_761) ^ nanos
    });
    (0..256).find_map(|_| {
        // A stride prime to SPAN: every port of the span before any twice.
        let k = (u64::from(seed % SPAN) + u64::from(NEXT.fetch_add(1, Ordering::Relaxed)) * 7919) % u64::from(SPAN);
        let port = u16::try_from(u64::from(LOW) + k).ok()?;
        TcpListener::bind(("127.0.0.1", port)).ok().map(|_| port)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn threads_of_one_process_get_different_ports() {
        let picks: Vec<u16> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..25).map(|_| super::free_port().expect("a free port")).collect::<Vec<_>>()))
                .collect();
            threads.into_iter().flat_map(|t| t.join().expect("a picking thread")).collect()
        });
        let mut sorted = picks.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), picks.len(), "a port picked twice: {picks:?}");
        assert!(picks.iter().all(|p| (20000..32000).contains(p)));
    }
}
