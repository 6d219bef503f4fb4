//! The process's rendezvous listeners: TCP listeners started on demand (the first by
//! [`UniqueId::new`](crate::UniqueId::new), one on `MASTER_PORT` for rank 0 of
//! [`Communicator::from_env`](crate::Communicator::from_env)), each on its own accept
//! thread. A connection says what it is with its first frame:
//! - `Register`: a rank of another process joins a communicator rooted here
//!   ([`super::remote::serve`]);
//! - `Hello`: a peer's mesh connection, kept for the rank it calls
//!   ([`inbox`](crate::transport::tcp::inbox)).
//!
//! Anything else (garbage, another protocol version, a frame of the wrong kind, silence for
//! [`FIRST_FRAME`]) closes that connection with a `Protocol` error, logged; the listener
//! keeps serving. A connection closed before its first byte is dropped without a word: a
//! rank knocking to learn whether this process still runs (`inbox::take`), or a port check. The first listener's address is where this process's ranks take mesh
//! connections.

use crate::types::Rank;
use crate::unique_id::UniqueId;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{CollectiveError, ErrorKind, Result};
use crate::transport::tcp::inbox;
use crate::transport::wire::{self, FrameKind, HEADER_LEN, Limits, MAX_CONTROL};

/// How long a new connection may take to send its first frame.
const FIRST_FRAME: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Listeners {
    /// Addresses this process serves, the first one where its ranks take mesh connections.
    serving: Vec<SocketAddr>,
    /// The launch ids (`UniqueId::for_launch`) rooted here, by the address they are rooted at.
    launches: Vec<UniqueId>,
    /// Ranks of other launches refused at a launch's address, and when (the latest
    /// [`STRANGERS`]): the launch's own timeout names them.
    strangers: Vec<(SocketAddr, Rank, std::time::Instant)>,
}

/// How many refused ranks of other launches are remembered.
const STRANGERS: usize = 64;

/// Remembers that `rank` of another launch was refused at `addr`.
pub(crate) fn note_stranger(addr: SocketAddr, rank: Rank) {
    let mut l = listeners();
    if l.strangers.len() >= STRANGERS {
        l.strangers.remove(0);
    }
    l.strangers.push((addr, rank, std::time::Instant::now()));
}

/// The ranks of other launches refused at `addr` since `since`, in order, each once.
pub(crate) fn strangers_since(addr: SocketAddr, since: Option<std::time::Instant>) -> Vec<Rank> {
    let l = listeners();
    let mut ranks: Vec<Rank> = l
        .strangers
        .iter()
        .filter(|(a, _, t)| *a == addr && since.is_none_or(|s| *t >= s))
        .map(|(_, r, _)| *r)
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    ranks
}

static LISTENERS: LazyLock<Mutex<Listeners>> = LazyLock::new(Default::default);

fn listeners() -> MutexGuard<'static, Listeners> {
    LISTENERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A random token naming this process in rendezvous tables.
pub(crate) fn process_token() -> [u8; 16] {
    static TOKEN: LazyLock<[u8; 16]> = LazyLock::new(|| super::fresh_nonce().to_le_bytes());
    *TOKEN
}

/// Whether this process serves `addr` (made the ids rooted there).
pub(crate) fn serves(addr: SocketAddr) -> bool {
    listeners().serving.contains(&addr)
}

/// Records that this process roots launch `id` (rank 0 of a launch, at the address `id`
/// names).
pub(crate) fn root_launch(id: &UniqueId) {
    let mut l = listeners();
    if !l.launches.contains(id) {
        l.launches.push(id.clone());
    }
}

/// Whether `id`, a launch's id, is of another launch than the ones this process roots at
/// the same address (a rank of another job on the same `MASTER_ADDR:MASTER_PORT`).
pub(crate) fn another_launch(id: &UniqueId) -> bool {
    let l = listeners();
    let here: Vec<_> = l.launches.iter().filter(|m| m.root_address() == id.root_address()).collect();
    id.is_launch() && !here.is_empty() && !here.contains(&id)
}

/// The address of this process's first listener, started (see [`bind_ip`]) if there is none
/// yet; `None` when none can be started (no network, Miri), and the ids this process makes
/// then serve its own threads only.
///
/// # Errors
/// `InvalidArgument` when `RUCCL_SOCKET_IFNAME` names no interface or address of this host.
pub(crate) fn default_address() -> Result<Option<SocketAddr>> {
    let ifname = std::env::var("RUCCL_SOCKET_IFNAME").ok();
    let master = std::env::var("MASTER_ADDR").ok();
    address_for(ifname.as_deref(), master.as_deref())
}

/// [`default_address`], the IP chosen from `ifname` and `master` (as [`bind_ip`]) when a
/// listener must be started.
///
/// # Errors
/// As [`default_address`].
pub(crate) fn address_for(ifname: Option<&str>, master: Option<&str>) -> Result<Option<SocketAddr>> {
    if cfg!(miri) {
        return Ok(None);
    }
    let mut l = listeners();
    if let Some(a) = l.serving.first() {
        return Ok(Some(*a));
    }
    let first = first_listener(ifname, master)?;
    l.serving.extend(first);
    Ok(first)
}

/// Starts a listener on the IP chosen from `ifname` and `master` ([`bind_ip`]); `None` when
/// none can be started on a chosen default.
///
/// # Errors
/// `InvalidArgument` when `RUCCL_SOCKET_IFNAME` names nothing of this host, or an address
/// where this process cannot listen.
fn first_listener(ifname: Option<&str>, master: Option<&str>) -> Result<Option<SocketAddr>> {
    let ip = bind_ip(ifname, master)?;
    match start(SocketAddr::new(ip, 0)) {
        Ok(a) => Ok(Some(a)),
        // An address the user named: its failure is theirs to fix, said now (it showed later
        // as "this process cannot listen", naming neither the variable nor the cause).
        Err(e) if ifname.is_some_and(|n| !n.trim().is_empty()) => Err(CollectiveError::invalid(format!(
            "RUCCL_SOCKET_IFNAME={} selects {ip}, where this process cannot listen: {e} (is {ip} an address of this \
             host?); this host's interfaces: {}",
            ifname.unwrap_or_default().trim(),
            super::ifaddr::describe(&super::ifaddr::interfaces())
        ))
        .with_source(e)),
        Err(e) => {
            #[cfg(feature = "tracing")]
            tracing::warn!("no rendezvous listener on {ip}: {e}; ids made here serve this process's threads only");
            let _ = e;
            Ok(None)
        }
    }
}

/// The address where this process's ranks take mesh connections.
///
/// # Errors
/// `Io` when no listener runs and none can be started.
pub(crate) fn mesh_address() -> Result<SocketAddr> {
    default_address()?.ok_or_else(|| {
        CollectiveError::new(ErrorKind::Io, "this process cannot listen for connections (no rendezvous listener)")
    })
}

/// Serves `addr` (rank 0 of a launch binding `MASTER_ADDR:MASTER_PORT`); nothing to do if it
/// already does. When `addr`'s IP is not one of this host's, binds all interfaces on its port.
///
/// # Errors
/// `Io` naming the address when the port cannot be bound (in use).
pub(crate) fn serve_at(addr: SocketAddr) -> Result<()> {
    let mut l = listeners();
    if l.serving.contains(&addr) {
        return Ok(());
    }
    let bound = match start(addr) {
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {
            let any: IpAddr =
                if addr.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { std::net::Ipv6Addr::UNSPECIFIED.into() };
            start(SocketAddr::new(any, addr.port()))
        }
        r => r,
    };
    bound.map_err(|e| {
        // A port in use is the usual cause, and one with its own remedy.
        let why = if e.kind() == std::io::ErrorKind::AddrInUse {
            "; another process holds this port: another job's rank 0, a second process of this launch \
             that also has RANK 0 (each process needs a RANK of its own), or any other listener or \
             connection (ports in the system's ephemeral range, /proc/sys/net/ipv4/ip_local_port_range on \
             Linux, are handed to outgoing connections), so check the RANKs and pick another MASTER_PORT, \
             outside that range"
        } else {
            ""
        };
        let in_use = e.kind() == std::io::ErrorKind::AddrInUse;
        let err = CollectiveError::new(
            ErrorKind::Io,
            format!("rank 0 cannot listen on the rendezvous address {addr} (MASTER_ADDR:MASTER_PORT): {e}{why}"),
        )
        .with_source(e);
        if in_use {
            err.with_hint(
                "set another MASTER_PORT, the same on every rank, and start them all again (the other ranks, \
                 which found no rendezvous there, fail too)",
            )
        } else {
            err
        }
    })?;
    l.serving.push(addr);
    Ok(())
}

/// [`serve_at`], and from now on the address where this process's ranks take mesh
/// connections: a node leader's data address (`node_address`, `data_service_port`), the one
/// port of the node its configuration names, so the other leaders connect there rather than
/// to the listener the process started first on a port of the system's choosing.
///
/// # Errors
/// As [`serve_at`].
pub(crate) fn serve_at_for_mesh(addr: SocketAddr) -> Result<()> {
    serve_at(addr)?;
    let mut l = listeners();
    if let Some(i) = l.serving.iter().position(|a| *a == addr) {
        let a = l.serving.remove(i);
        l.serving.insert(0, a);
    }
    Ok(())
}

/// Binds `addr` and starts its accept thread; returns the bound address.
fn start(addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    std::thread::Builder::new().name("ruccl-rendezvous".into()).spawn(move || accept_loop(listener))?;
    Ok(local)
}

fn accept_loop(listener: TcpListener) {
    loop {
        let Ok((stream, from)) = listener.accept() else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        // A thread per connection: a silent stranger holds only its own thread, for at most
        // FIRST_FRAME. If no thread can be made, the connection is dropped (the peer retries
        // or times out).
        let _ = std::thread::Builder::new().name("ruccl-rendezvous-conn".into()).spawn(move || {
            if let Err(e) = handle(stream) {
                #[cfg(feature = "tracing")]
                tracing::warn!(%from, "rendezvous listener refused a connection: {e}");
                let _ = (e, from);
            }
        });
    }
}

/// Reads a connection's first frame and hands it on.
fn handle(mut s: TcpStream) -> Result<()> {
    let io = |what: &str, e: std::io::Error| CollectiveError::new(ErrorKind::Io, format!("{what}: {e}"));
    s.set_read_timeout(Some(FIRST_FRAME)).map_err(|e| io("configuring a socket", e))?;
    s.set_nodelay(true).map_err(|e| io("configuring a socket", e))?;
    let mut hb = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match s.read(&mut hb[got..]) {
            // A knock (see the module's doc): nothing to refuse.
            Ok(0) if got == 0 => return Ok(()),
            Ok(0) => {
                return Err(CollectiveError::protocol(format!(
                    "no complete first frame: the connection closed after {got} bytes"
                )));
            }
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(CollectiveError::protocol(format!("no complete first frame: {e}"))),
        }
    }
    let h = wire::decode_header(&hb, Limits { max_data: 0 })?;
    match h.kind {
        FrameKind::Hello => {
            s.set_read_timeout(None).map_err(|e| io("configuring a socket", e))?;
            inbox::arrive(&h, s)
        }
        FrameKind::Register => {
            let len = h.len.min(MAX_CONTROL) as usize;
            let mut body = vec![0u8; len];
            s.read_exact(&mut body).map_err(|e| CollectiveError::protocol(format!("a truncated registration: {e}")))?;
            super::remote::serve(&h, &body, s)
        }
        k => Err(CollectiveError::protocol(format!("a {k:?} frame as the first frame at a rendezvous listener"))),
    }
}

/// The IP this process's listener binds and advertises:
/// 1. `RUCCL_SOCKET_IFNAME` (`ifname`): an IP address, or interfaces selected as
///    `NCCL_SOCKET_IFNAME` selects them (the first selected IPv4 address, else IPv6:
///    [`ifaddr::pick`](super::ifaddr::pick));
/// 2. else, when `MASTER_ADDR` (`master`) is set, the local address that routes to it;
/// 3. else `127.0.0.1` (one host only).
///
/// # Errors
/// `InvalidArgument` when `RUCCL_SOCKET_IFNAME` names nothing on this host.
fn bind_ip(ifname: Option<&str>, master: Option<&str>) -> Result<IpAddr> {
    if let Some(name) = ifname.map(str::trim).filter(|s| !s.is_empty()) {
        if let Ok(ip) = name.parse::<IpAddr>() {
            return Ok(ip);
        }
        let here = super::ifaddr::interfaces();
        return super::ifaddr::pick(name, &here).ok_or_else(|| {
            CollectiveError::invalid(format!(
                "RUCCL_SOCKET_IFNAME={name} is not an IP address and selects no interface of this host with an \
                 address (read as NCCL_SOCKET_IFNAME: name prefixes separated by commas, =NAME for one name \
                 exactly, ^ before the list to exclude them; IPv6 link-local addresses are not used); this host's \
                 interfaces: {}",
                super::ifaddr::describe(&here)
            ))
        });
    }
    let master = master.map(str::trim).filter(|s| !s.is_empty());
    Ok(master.and_then(route_to).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)))
}

/// The local address the host would use to reach `host` (no packet is sent).
fn route_to(host: &str) -> Option<IpAddr> {
    let target = (host, 9).to_socket_addrs().ok()?.next()?;
    let any: SocketAddr = if target.is_ipv4() { (Ipv4Addr::UNSPECIFIED, 0).into() } else { "[::]:0".parse().ok()? };
    let u = UdpSocket::bind(any).ok()?;
    u.connect(target).ok()?;
    let ip = u.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore)]
    fn a_data_address_becomes_the_mesh_address() {
        let first = default_address().unwrap().unwrap();
        let port = crate::launch::free_port().unwrap();
        let data = SocketAddr::from(([127, 0, 0, 1], port));
        serve_at_for_mesh(data).unwrap();
        assert_eq!(mesh_address().unwrap(), data);
        assert!(serves(first) && serves(data), "the first listener still serves");
        assert!(TcpStream::connect(data).is_ok());
    }

    /// An address named by RUCCL_SOCKET_IFNAME that is not this host's is refused, naming
    /// the variable (it was a later `Io` "cannot listen" naming neither).
    #[test]
    #[cfg_attr(miri, ignore)]
    fn a_socket_ifname_address_not_of_this_host_is_refused() {
        let e = first_listener(Some(" 192.0.2.77"), None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("RUCCL_SOCKET_IFNAME=192.0.2.77 selects 192.0.2.77"), "{e}");
        assert!(first_listener(Some("127.0.0.1"), None).unwrap().is_some());
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn a_port_in_use_says_to_pick_another() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let e = serve_at(held.local_addr().unwrap()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io, "{e}");
        assert!(e.to_string().contains("pick another MASTER_PORT"), "{e}");
    }
}
