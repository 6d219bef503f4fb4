//! Mesh connections that arrived at this process's rendezvous listener, waiting for the
//! rank they call to take them ([`take`]). A peer may call before this process has learned
//! the table (it got its own answer first), so calls are kept until taken, for at most
//! [`KEEP`], and at most [`MAX_WAITING`] at once (the oldest go first): a stranger that
//! sends well-formed hellos cannot fill memory.
//!
//! A rank that waits long for a caller knocks at the caller's listener now and then
//! ([`PROBE_AFTER`]): nothing listening there means the caller's process is gone (a process
//! listens for as long as it runs), and the wait ends at once with `PeerLost` instead of at
//! the deadline.

use std::net::{SocketAddr, TcpStream};
use std::sync::{Condvar, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{CollectiveError, ErrorKind, Result};
use crate::transport::wire::{FrameHeader, FrameKind};
use crate::types::Rank;

/// How long an untaken call is kept.
const KEEP: Duration = Duration::from_secs(600);
/// The most calls kept at once.
const MAX_WAITING: usize = 4096;
/// How long a [`take`] waits before it first knocks at the caller's listener, and then
/// between knocks: calls from live processes come well within it, and a knock costs the
/// caller's listener a connection that closes at once.
const PROBE_AFTER: Duration = Duration::from_millis(500);
/// How long a knock waits for the caller's host to answer (a host that does not answer at
/// all is left to the deadline).
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// A call: (communicator, rank called, caller, world size) and its connection.
struct Call {
    key: ([u8; 16], Rank, Rank),
    world: usize,
    at: Instant,
    stream: TcpStream,
}

#[derive(Default)]
struct Inbox {
    calls: Vec<Call>,
}

static INBOX: LazyLock<(Mutex<Inbox>, Condvar)> = LazyLock::new(Default::default);

fn inbox() -> MutexGuard<'static, Inbox> {
    INBOX.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps a connection whose (already decoded) first frame is the hello `h`.
///
/// # Errors
/// `Protocol` when the hello cannot be a mesh call (a rank calling itself or a higher rank,
/// a rank outside its world).
pub(crate) fn arrive(h: &FrameHeader, stream: TcpStream) -> Result<()> {
    let (from, to, world) = (h.from as usize, h.seq, h.index as usize);
    if h.kind != FrameKind::Hello || to >= from as u64 || from >= world {
        return Err(CollectiveError::protocol(format!(
            "a hello from rank {from} to rank {to} of {world}: ranks call lower ranks of their world"
        )));
    }
    let now = Instant::now();
    let mut ib = inbox();
    ib.calls.retain(|c| now.duration_since(c.at) < KEEP);
    if ib.calls.len() >= MAX_WAITING {
        ib.calls.remove(0);
    }
    ib.calls.push(Call { key: (h.comm, to as Rank, from), world, at: now, stream });
    drop(ib);
    INBOX.1.notify_all();
    Ok(())
}

/// Waits until `hi` called `lo` in communicator `comm` of `world` ranks, and takes the call.
/// `caller` is where `hi`'s process listens: knocked at while the wait lasts (see
/// [`PROBE_AFTER`]).
///
/// # Errors
/// `Timeout` naming `hi` at `deadline`; `PeerLost` naming it when nothing listens at
/// `caller` any more; `Protocol` when the call names another world size.
pub(crate) fn take(
    comm: [u8; 16],
    (lo, hi): (Rank, Rank),
    world: usize,
    caller: Option<SocketAddr>,
    deadline: Instant,
) -> Result<TcpStream> {
    let mut knock = Instant::now() + PROBE_AFTER;
    let mut ib = inbox();
    loop {
        if let Some(i) = ib.calls.iter().position(|c| c.key == (comm, lo, hi)) {
            let c = ib.calls.remove(i);
            if c.world != world {
                return Err(CollectiveError::protocol(format!(
                    "rank {hi} called rank {lo} for a world of {} ranks, not {world}",
                    c.world
                ))
                .with_rank(lo)
                .with_peer(hi));
            }
            return Ok(c.stream);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(CollectiveError::new(
                ErrorKind::Timeout,
                format!("rank {hi} did not connect to rank {lo} in time (its process may have died or cannot reach this one)"),
            )
            .with_rank(lo)
            .with_peer(hi));
        }
        if let Some(addr) = caller.filter(|_| now >= knock) {
            drop(ib);
            if let Err(e) = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT.min(deadline - now))
                && e.kind() == std::io::ErrorKind::ConnectionRefused
            {
                return Err(CollectiveError::new(
                    ErrorKind::PeerLost,
                    format!(
                        "rank {hi} did not connect to rank {lo}, and its process no longer listens at {addr}: it \
                         exited or was killed after the rendezvous ({e})"
                    ),
                )
                .with_rank(lo)
                .with_peer(hi));
            }
            knock = Instant::now() + PROBE_AFTER;
            ib = inbox();
            continue;
        }
        let until = if caller.is_some() { deadline.min(knock) } else { deadline };
        ib = INBOX.1.wait_timeout(ib, until.saturating_duration_since(now)).unwrap_or_else(|e| e.into_inner()).0;
    }
}
