//! Building a mesh: every rank its own listener on 127.0.0.1 (an ephemeral port), the
//! higher rank of each pair connecting to the lower one and introducing itself with a
//! `Hello` frame, which the lower one checks (magic, version, communicator, rank, world
//! size) before the connection carries anything else.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::io::{runtime, spawn};
use super::{Endpoint, Mesh, Peer, io_error};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::transport::wait::Event;
use crate::transport::wire::{self, FrameHeader, FrameKind, HEADER_LEN, Limits};
use crate::types::Rank;

/// A hello from `from` for communicator `comm` of `world` ranks.
fn hello(comm: [u8; 16], from: Rank, world: usize) -> [u8; HEADER_LEN] {
    let mut h = FrameHeader::control(FrameKind::Hello, comm, from as u32, 0);
    h.index = world as u32;
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
pub(crate) fn loopback(comm: [u8; 16], world: usize, deadline: Instant) -> Result<Mesh> {
    let rt = runtime()?;
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
            c.write_all(&hello(comm, hi, world)).map_err(|e| io_error("sending a hello", e))?;
            // The connection is in the listener's backlog: accept returns at once.
            let (mut a, _) = listeners[lo].accept().map_err(|e| io_error("accepting", e))?;
            a.set_read_timeout(Some(left()?)).map_err(|e| io_error("configuring a socket", e))?;
            check_hello(&mut a, comm, world, hi)?;
            a.set_read_timeout(None).map_err(|e| io_error("configuring a socket", e))?;
            streams[lo][hi] = Some(a);
            streams[hi][lo] = Some(c);
        }
    }
    let mut endpoints = Vec::with_capacity(world);
    let _enter = rt.enter();
    for (me, row) in streams.into_iter().enumerate() {
        let mut peers = Vec::with_capacity(world);
        let mut conns = Vec::new();
        for (p, s) in row.into_iter().enumerate() {
            match s {
                None => peers.push(None),
                Some(s) => {
                    s.set_nodelay(true).map_err(|e| io_error("setting TCP_NODELAY", e))?;
                    s.set_nonblocking(true).map_err(|e| io_error("configuring a socket", e))?;
                    let s = tokio::net::TcpStream::from_std(s).map_err(|e| io_error("registering a socket", e))?;
                    let peer = Arc::new(Peer::new(p));
                    conns.push((peer.clone(), s));
                    peers.push(Some(peer));
                }
            }
        }
        let e = Arc::new(Endpoint {
            rank: me,
            comm,
            peers,
            event: Event::default(),
            failed: AtomicBool::new(false),
            poison: Mutex::new(None),
            told: AtomicBool::new(false),
        });
        for (peer, s) in conns {
            let (r, w) = s.into_split();
            spawn(&rt, e.clone(), peer, r, w);
        }
        endpoints.push(Some(e));
    }
    Ok(Mesh { endpoints })
}

#[cfg(test)]
#[path = "setup_tests.rs"]
mod tests;
