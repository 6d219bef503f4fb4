//! Building a mesh: the higher rank of each pair connects to the lower one and introduces
//! itself with a `Hello` frame, which the lower one checks (magic, version, communicator,
//! rank, world size) before the connection carries anything else.
//! - [`loopback`]: every rank of one process its own listener on 127.0.0.1;
//! - [`process_mesh`]: the ranks of several processes, each process's ranks reached at its
//!   rendezvous listener, which hands their hellos to the [`inbox`].

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::inbox;
use super::io::{runtime, spawn};
use super::shm_io::ShmPeer;
use super::{Endpoint, Mesh, Peer, io_error};
#[cfg(all(target_os = "linux", not(miri)))]
use crate::transport::shm::Pair;
/// Without shared memory there are no segments.
#[cfg(not(all(target_os = "linux", not(miri))))]
type Pair = std::convert::Infallible;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::transport::wait::Event;
use crate::transport::wire::{self, FrameHeader, FrameKind, HEADER_LEN, Limits};
use crate::types::Rank;

/// A hello from `from` to `to` for communicator `comm` of `world` ranks.
pub(crate) fn hello(comm: [u8; 16], from: Rank, to: Rank, world: usize) -> [u8; HEADER_LEN] {
    let mut h = FrameHeader::control(FrameKind::Hello, comm, from as u32, 0);
    (h.index, h.seq) = (world as u32, to as u64);
    wire::encode_header(&h)
}

/// Reads and checks the hello on a fresh connection: `Protocol` naming what is wrong.
fn check_hello(s: &mut TcpStream, comm: [u8; 16], world: usize, want: Rank) -> Result<()> {
    let mut b = [0u8; HEADER_LEN];
    s.read_exact(&mut b).map_err(|e| io_error("reading a peer's hello", e))?;
    let h = wire::decode_header(&b, Limits { max_data: 0 })?;
    let bad = |what: String| Err(CollectiveError::protocol(format!("bad hello from 127.0.0.1: {what}")));
    if h.kind != FrameKind::Hello {
        return bad(format!("a {:?} frame before the hello", h.kind));
    }
    if h.comm != comm {
        return bad("it is for another communicator".to_string());
    }
    if h.from as usize != want || h.index as usize != world {
        return bad(format!("rank {} of {} where rank {want} of {world} was expected", h.from, h.index));
    }
    Ok(())
}

/// A mesh of `world` ranks of this process, every pair connected over loopback TCP.
///
/// # Errors
/// `Io` when a socket cannot be bound, connected or configured; `Protocol` for a bad hello;
/// `Timeout` when the handshake does not finish by `deadline`.
pub(crate) fn loopback(comm: [u8; 16], world: usize, silence: Duration, deadline: Instant) -> Result<Mesh> {
    let listeners: Vec<TcpListener> = (0..world)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| io_error("binding 127.0.0.1:0", e)))
        .collect::<Result<_>>()?;
    let mut streams: Vec<Vec<Option<TcpStream>>> = (0..world).map(|_| (0..world).map(|_| None).collect()).collect();
    let left = || {
        let d = deadline.saturating_duration_since(Instant::now());
        if d.is_zero() {
            Err(CollectiveError::new(ErrorKind::Timeout, "the loopback TCP handshake did not finish in time"))
        } else {
            Ok(d.min(Duration::from_secs(30)))
        }
    };
    #[allow(clippy::needless_range_loop)] // each pair fills two rows
    for lo in 0..world {
        let addr = listeners[lo].local_addr().map_err(|e| io_error("a listener's address", e))?;
        for hi in lo + 1..world {
            let mut c = TcpStream::connect_timeout(&addr, left()?).map_err(|e| io_error("connecting", e))?;
            c.write_all(&hello(comm, hi, lo, world)).map_err(|e| io_error("sending a hello", e))?;
            // The connection is in the listener's backlog: accept returns at once.
            let (mut a, _) = listeners[lo].accept().map_err(|e| io_error("accepting", e))?;
            a.set_read_timeout(Some(left()?)).map_err(|e| io_error("configuring a socket", e))?;
            check_hello(&mut a, comm, world, hi)?;
            a.set_read_timeout(None).map_err(|e| io_error("configuring a socket", e))?;
            streams[lo][hi] = Some(a);
            streams[hi][lo] = Some(c);
        }
    }
    endpoints(comm, silence, streams.into_iter().map(Some).collect(), Vec::new())
}

/// A mesh of `world` ranks spread over processes: `addrs[r]` is where rank `r`'s process
/// listens, `local[r]` whether rank `r` lives in this one. This process's ranks call every
/// lower rank (at its process's listener, this one's included) and take the calls of every
/// higher rank from the [`inbox`] (knocking at a caller's listener while it waits: a caller
/// whose process is gone is `PeerLost` at once). Pairs on one host (Linux) then agree over their
/// connection to move data through shared memory (unless `RUCCL_SHM_DISABLE=1`), and, when
/// every rank is a process of one host that allows it, to exchange
/// small ops through one segment of slots (`shm::slot_agree`). A peer
/// whose connection stays silent for `silence` counts as lost. `host_memory`: every device of
/// this process's ranks keeps its memory on the host (slots hold host bytes; a process whose
/// devices do not says no, and every rank keeps messages).
///
/// # Errors
/// `Io` when a socket cannot be configured; `Timeout` naming the ranks that could not be
/// reached or did not call by `deadline`; `PeerLost` naming a rank whose process no longer
/// listens.
pub(crate) fn process_mesh(
    comm: [u8; 16],
    world: usize,
    addrs: &[std::net::SocketAddr],
    local: &[bool],
    silence: Duration,
    host_memory: bool,
    deadline: Instant,
) -> Result<Mesh> {
    let mut rows: Vec<Option<Vec<Option<TcpStream>>>> =
        (0..world).map(|r| local[r].then(|| (0..world).map(|_| None).collect())).collect();
    for (hi, row) in rows.iter_mut().enumerate() {
        let Some(row) = row else { continue };
        for (lo, slot) in row.iter_mut().enumerate().take(hi) {
            let mut c = connect_member(addrs[lo], lo, deadline).map_err(|e| e.with_rank(hi).with_peer(lo))?;
            c.write_all(&hello(comm, hi, lo, world)).map_err(|e| io_error("sending a hello", e))?;
            *slot = Some(c);
        }
    }
    for (lo, row) in rows.iter_mut().enumerate() {
        let Some(row) = row else { continue };
        for (hi, slot) in row.iter_mut().enumerate().skip(lo + 1) {
            *slot = Some(inbox::take(comm, (lo, hi), world, (!local[hi]).then_some(addrs[hi]), deadline)?);
        }
    }
    #[cfg(all(target_os = "linux", not(miri)))]
    let (shm, slots) = {
        let shm = crate::transport::shm::negotiate(&mut rows, deadline)?;
        let slots = crate::transport::shm::slot_agree::agree(&mut rows, &shm, host_memory, deadline)?;
        (shm, slots)
    };
    #[cfg(not(all(target_os = "linux", not(miri))))]
    let (shm, slots, _) = (Vec::new(), None, host_memory);
    let mut mesh = endpoints(comm, silence, rows, shm)?;
    mesh.slots = slots;
    mesh.together = super::Together::new(local);
    Ok(mesh)
}

/// Connects to rank `rank`'s process at `addr` once the group is formed: as [`connect`], but
/// a refused connection is `PeerLost` at once. That process registered from its listener,
/// which runs for as long as the process does: nothing listening there means it is gone (it
/// exited or was killed after the rendezvous), and retrying only waited out the deadline.
fn connect_member(addr: std::net::SocketAddr, rank: Rank, deadline: Instant) -> Result<TcpStream> {
    connect_until(addr, deadline, |e| {
        (e.kind() == std::io::ErrorKind::ConnectionRefused).then(|| {
            CollectiveError::new(
                ErrorKind::PeerLost,
                format!(
                    "rank {rank}'s process refused the connection at {addr} while the group connected: it exited or \
                     was killed after the rendezvous ({e})"
                ),
            )
        })
    })
}

/// Connects to `addr`, retrying (a listener not up yet) with backoff until `deadline`.
pub(crate) fn connect(addr: std::net::SocketAddr, deadline: Instant) -> Result<TcpStream> {
    connect_until(addr, deadline, |_| None)
}

/// Connects to `addr`, retrying with backoff until `deadline`, except after a failure that
/// `fatal` turns into an error.
fn connect_until(
    addr: std::net::SocketAddr,
    deadline: Instant,
    fatal: impl Fn(&std::io::Error) -> Option<CollectiveError>,
) -> Result<TcpStream> {
    let mut pause = Duration::from_millis(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(CollectiveError::new(ErrorKind::Timeout, format!("could not connect to {addr} in time")));
        }
        match TcpStream::connect_timeout(&addr, left.min(Duration::from_secs(5))) {
            Ok(s) => return Ok(s),
            Err(e) => {
                if let Some(err) = fatal(&e) {
                    return Err(err);
                }
                std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
            }
        }
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// The endpoints of the ranks whose rows are given (`rows[me][peer]`: their connections),
/// their reader and writer tasks started; `shm[me][peer]`, where given, the pair's shared
/// segment (its data goes there).
fn endpoints(
    comm: [u8; 16],
    silence: Duration,
    rows: Vec<Option<Vec<Option<TcpStream>>>>,
    mut shm: Vec<Vec<Option<Pair>>>,
) -> Result<Mesh> {
    let rt = runtime()?;
    let world = rows.len();
    let mut endpoints = Vec::with_capacity(world);
    let _enter = rt.enter();
    for (me, row) in rows.into_iter().enumerate() {
        let Some(row) = row else {
            endpoints.push(None);
            continue;
        };
        let mut peers = Vec::with_capacity(world);
        let mut conns = Vec::new();
        // Peers on this host, through shared memory (their single-copy threshold).
        let local = shm.get(me).map_or(0, |r| r.iter().flatten().count());
        for (p, s) in row.into_iter().enumerate() {
            match s {
                None => peers.push(None),
                Some(s) => {
                    s.set_nodelay(true).map_err(|e| io_error("setting TCP_NODELAY", e))?;
                    s.set_nonblocking(true).map_err(|e| io_error("configuring a socket", e))?;
                    // A second handle on the socket: small frames are written straight from
                    // the rank's thread when the writer task is idle (see `Peer::direct`).
                    let direct = s.try_clone().map_err(|e| io_error("configuring a socket", e))?;
                    // And a third: a waiting rank reads small frames itself (`Peer::poll_inline`).
                    let inline = s.try_clone().map_err(|e| io_error("configuring a socket", e))?;
                    // And one each for the writer and reader tasks (registered with the runtime
                    // by the tasks themselves, each for what it waits for).
                    let task_w = s.try_clone().map_err(|e| io_error("configuring a socket", e))?;
                    let s = (s, task_w);
                    let seg = shm.get_mut(me).and_then(|r| r.get_mut(p)).and_then(Option::take);
                    let peer = Arc::new(Peer::new(p, seg.map(|s| Arc::new(ShmPeer::new(s, local))), direct, inline));
                    conns.push((peer.clone(), s));
                    peers.push(Some(peer));
                }
            }
        }
        let shm_peers = peers.iter().flatten().filter_map(|p| p.shm.clone()).collect();
        let e = Arc::new(Endpoint {
            rank: me,
            comm,
            peers,
            event: Event::default(),
            failed: AtomicBool::new(false),
            poison: Mutex::new(None),
            told: Mutex::new(false),
            silence,
            shm: shm_peers,
            polls_at: AtomicU64::new(u64::MAX),
            lost_any: std::sync::atomic::AtomicBool::new(false),
            flight: std::sync::OnceLock::new(),
        });
        for (peer, s) in conns {
            let (r, w) = s;
            spawn(&rt, e.clone(), peer.clone(), r, w);
            #[cfg(all(target_os = "linux", not(miri)))]
            super::shm_io::spawn(&e, &peer)?;
        }
        endpoints.push(Some(e));
    }
    // The ranks of this host's other processes (a shared-memory pair with one of ours) take
    // cores here too: counted as live ranks, so that no rank of this process spins on a core
    // they need (`transport::wait`; 4 processes on 2 cores each spun out their budget).
    let host_ranks = (0..endpoints.len())
        .filter(|&p| endpoints.get(p).is_some_and(Option::is_none))
        .filter(|&p| endpoints.iter().flatten().any(|e| e.peer(p).is_some_and(|q| q.shm.is_some())))
        .map(|_| crate::transport::LiveRank::elsewhere_on_host())
        .collect();
    Ok(Mesh { endpoints, slots: None, _host_ranks: host_ranks, together: None })
}

#[cfg(test)]
#[path = "setup_tests.rs"]
mod tests;
