//! The orchestrator (feature `orchestrator`): the small rendezvous server a multi-node job of
//! the [peer API](crate::api) needs. It listens on the `global_address` every node's
//! [`CollectiveConfig`](crate::api::CollectiveConfig) names, waits until `num_nodes` node
//! leaders have arrived, assigns node ids — **sorted by each node's data address**
//! (`node_address`'s host and `data_service_port`, as text), so ids do not depend on arrival
//! order — and answers every node with its id, every node's peers, and the id of the leaders'
//! communicator (rooted at node 0's data address). Then it serves the next job.
//!
//! A node whose config disagrees (another `num_nodes`, a data address another node already
//! has) is refused at once with an error naming the difference; one whose strategies or
//! timeout differ from the waiting nodes', or that announces a peer id another node has, fails
//! the round: it and they are all refused at once, each told what differs (neither side is
//! known to be the right one); a connection that sends garbage is dropped, and the server keeps serving. A
//! round whose nodes do not all arrive within the first node's timeout (less a tenth, so the
//! answer reaches the nodes before their own deadline) is answered with `Timeout` naming the
//! nodes that did arrive. A node whose connection closes while it waits (it crashed, or gave
//! up) leaves the round, so that it can be restarted and take its place.
//!
//! ```
//! use ruccl::orchestrator::Orchestrator;
//! let server = Orchestrator::start("127.0.0.1:0", 2)?;
//! assert_ne!(server.local_addr().port(), 0);
//! server.shutdown();
//! # Ok::<(), ruccl::CollectiveError>(())
//! ```

use std::io::ErrorKind as IoKind;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::api::node::wire::{self, Hello, Msg, Refused, Welcome};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::unique_id::UniqueId;

/// How long a connection may take to send its hello.
const HELLO_WAIT: Duration = Duration::from_secs(5);

/// A running orchestrator; dropping it (or [`shutdown`](Self::shutdown)) stops it.
pub struct Orchestrator {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

struct Waiting {
    hello: Hello,
    stream: TcpStream,
}

struct Round {
    num_nodes: usize,
    waiting: Vec<Waiting>,
    since: Option<Instant>,
    /// Nodes refused while this round waited (the latest few), and why: a round that then
    /// times out names them, rather than count them as nodes that never connected.
    refused: Vec<String>,
}

/// How many refusals a round remembers.
const REFUSALS_KEPT: usize = 4;

fn lock(m: &Mutex<Round>) -> MutexGuard<'_, Round> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Orchestrator {
    /// Starts an orchestrator on `addr` for jobs of `num_nodes` nodes; returns once it listens.
    ///
    /// # Errors
    /// `InvalidArgument` when `num_nodes` is 0 or `addr` does not resolve; `Io` when it cannot
    /// be bound.
    ///
    /// ```
    /// let server = ruccl::orchestrator::Orchestrator::start("127.0.0.1:0", 3)?;
    /// println!("nodes connect to {}", server.local_addr());
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn start(addr: impl ToSocketAddrs, num_nodes: u32) -> Result<Self> {
        if num_nodes == 0 {
            return Err(CollectiveError::invalid("an orchestrator waits for at least one node"));
        }
        // Resolved first, so that a name that does not resolve is the caller's mistake
        // (`InvalidArgument`), and only a failure to listen is `Io`.
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| {
                CollectiveError::invalid(format!("the orchestrator's address does not resolve: {e}"))
                    .with_hint("pass HOST:PORT with a host this machine can resolve (an IP address, or a name in DNS or /etc/hosts)")
            })?
            .collect();
        let listener = TcpListener::bind(&addrs[..]).map_err(|e| {
            CollectiveError::new(ErrorKind::Io, format!("the orchestrator cannot listen on {addrs:?}: {e}"))
                .with_source(e)
        })?;
        let io = |e: std::io::Error| CollectiveError::new(ErrorKind::Io, format!("orchestrator: {e}"));
        let local = listener.local_addr().map_err(io)?;
        listener.set_nonblocking(true).map_err(io)?;
        let stop = Arc::new(AtomicBool::new(false));
        let round = Arc::new(Mutex::new(Round {
            num_nodes: num_nodes as usize,
            waiting: Vec::new(),
            since: None,
            refused: Vec::new(),
        }));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ruccl-orchestrator".into())
            .spawn(move || accept_loop(listener, round, flag))
            .map_err(io)?;
        Ok(Orchestrator { addr: local, stop, thread: Some(thread) })
    }

    /// The address it listens on (the nodes' `global_address`).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops it; nodes still waiting see their connection close.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for Orchestrator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, round: Arc<Mutex<Round>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((s, peer)) => {
                let round = round.clone();
                let _ =
                    std::thread::Builder::new().name("ruccl-orch-conn".into()).spawn(move || arrive(s, peer, &round));
            }
            Err(e) if e.kind() == IoKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
        let mut r = lock(&round);
        prune(&mut r);
        expire(&mut r);
    }
}

fn refuse(mut s: TcpStream, kind: ErrorKind, message: String) {
    let _ = wire::write_msg(&mut s, &Msg::Refused(Refused { kind, message }));
}

/// One connection: read its hello, then refuse it or let it wait for the round.
fn arrive(mut s: TcpStream, from: SocketAddr, round: &Mutex<Round>) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(HELLO_WAIT));
    let hello = match wire::read_msg(&mut s) {
        Ok(Msg::Hello(h)) => h,
        Ok(_) => return refuse(s, ErrorKind::Protocol, format!("{from} sent something other than a hello")),
        Err(e) => return refuse(s, ErrorKind::Protocol, format!("{from} sent {}", e.message())),
    };
    let mut r = lock(round);
    prune(&mut r);
    if let Err(e) = admit(&r, &hello) {
        if r.since.is_some() && r.refused.len() < REFUSALS_KEPT {
            r.refused.push(format!("node {} ({})", hello.data_addr, e.message()));
        }
        drop(r);
        return refuse(s, e.kind(), e.message().to_string());
    }
    if let Some((kind, to_new, to_waiting)) = config_conflict(&r, &hello) {
        let waiting = std::mem::take(&mut r.waiting);
        r.since = None;
        r.refused.clear();
        drop(r);
        for w in waiting {
            refuse(w.stream, kind, to_waiting.clone());
        }
        return refuse(s, kind, to_new);
    }
    r.since.get_or_insert_with(Instant::now);
    r.waiting.push(Waiting { hello, stream: s });
    prune(&mut r);
    if r.waiting.len() == r.num_nodes {
        let waiting = std::mem::take(&mut r.waiting);
        r.since = None;
        r.refused.clear();
        drop(r);
        welcome(waiting);
    }
}

/// Drops waiting nodes whose connection closed (a node that crashed, or gave up, before its
/// round completed): its place goes to whoever comes next — the same node restarted, with the
/// same data address and peers, is then admitted instead of refused as a duplicate.
fn prune(r: &mut Round) {
    r.waiting.retain(|w| {
        let mut byte = [0u8; 1];
        let alive = match w.stream.set_nonblocking(true) {
            Ok(()) => match w.stream.peek(&mut byte) {
                Ok(0) => false,
                Ok(_) => true,
                Err(e) => e.kind() == IoKind::WouldBlock || e.kind() == IoKind::Interrupted,
            },
            Err(_) => false,
        };
        alive && w.stream.set_nonblocking(false).is_ok()
    });
    if r.waiting.is_empty() {
        r.since = None;
        r.refused.clear();
    }
}

/// Whether `h` may join the round (pure).
fn admit(r: &Round, h: &Hello) -> Result<()> {
    let node = &h.data_addr;
    if h.num_nodes as usize != r.num_nodes {
        return Err(CollectiveError::new(
            ErrorKind::Mismatch,
            format!(
                "node {node} announced num_nodes = {}, but this orchestrator gathers {} nodes",
                h.num_nodes, r.num_nodes
            ),
        ));
    }
    if node.parse::<SocketAddr>().is_err() {
        return Err(CollectiveError::invalid(format!("node data address {node:?} is not ip:port")));
    }
    if h.peers.is_empty() || h.peers.windows(2).any(|w| w[0] >= w[1]) {
        return Err(CollectiveError::invalid(format!(
            "node {node} announced peers {:?} (not sorted and distinct)",
            h.peers
        )));
    }
    for w in &r.waiting {
        let other = &w.hello;
        if other.data_addr == *node {
            return Err(CollectiveError::invalid(format!("two nodes announced the data address {node}")));
        }
    }
    Ok(())
}

/// When `h` and the waiting nodes cannot form one job: a peer id on two nodes, or a config
/// that differs from the waiting nodes' (which agree with each other); what `h` is told, and
/// what they are told (pure). Neither side is known to be the right one, so the round fails on
/// every node at once: the nodes that came first used to wait out their whole timeout for a
/// node that had been refused.
fn config_conflict(r: &Round, h: &Hello) -> Option<(ErrorKind, String, String)> {
    let node = &h.data_addr;
    let shared = r.waiting.iter().find_map(|w| h.peers.iter().find(|p| w.hello.peers.contains(p)).map(|p| (p, w)));
    if let Some((p, w)) = shared {
        let other = &w.hello.data_addr;
        return Some((
            ErrorKind::InvalidArgument,
            format!(
                "peer {p} is on node {node} and on node {other}: peer ids are unique across the nodes (node {other}, \
                 which came first, was refused too)"
            ),
            format!(
                "node {node} registered peer {p}, which is on node {other} too: peer ids are unique across the nodes, \
                 so the round was abandoned on every node"
            ),
        ));
    }
    let other = &r.waiting.iter().find(|w| w.hello.settings != h.settings || w.hello.timeout_ms != h.timeout_ms)?.hello;
    let differ = |a: &Hello, b: &Hello| {
        let mut d = settings_diff(&a.settings, &b.settings);
        if a.timeout_ms != b.timeout_ms {
            d.push(format!("timeout {} ms where it has {} ms", a.timeout_ms, b.timeout_ms));
        }
        d.join("; ")
    };
    let waiting: Vec<&str> = r.waiting.iter().map(|w| w.hello.data_addr.as_str()).collect();
    let node = &h.data_addr;
    let to_new = format!(
        "node {node} registered a CollectiveConfig that differs from node {}'s: {}; every node must pass the same \
         config (the nodes that came first, {}, were refused too)",
        other.data_addr,
        differ(h, other),
        waiting.join(", ")
    );
    let to_waiting = format!(
        "node {node} registered a CollectiveConfig that differs from this round's (nodes {}): this round's has {}; \
         every node must pass the same config, so the round was abandoned on every node",
        waiting.join(", "),
        differ(other, h)
    );
    Some((ErrorKind::Mismatch, to_new, to_waiting))
}

/// The settings of `mine` that differ from `theirs` ("k = v" entries joined by ", "), as
/// "k = v where it has k = w" (pure). Both whole when they do not parse as entries.
fn settings_diff(mine: &str, theirs: &str) -> Vec<String> {
    let entries = |s: &str| -> Vec<(String, String)> {
        s.split(", ").filter_map(|e| e.split_once(" = ")).map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let (a, b) = (entries(mine), entries(theirs));
    let mut out: Vec<String> = a
        .iter()
        .filter_map(|(k, v)| match b.iter().find(|(l, _)| l == k) {
            Some((_, w)) if w == v => None,
            Some((_, w)) => Some(format!("{k} = {v} where it has {k} = {w}")),
            None => Some(format!("{k} = {v}, a setting it does not have")),
        })
        .collect();
    out.extend(
        b.iter()
            .filter(|(k, _)| !a.iter().any(|(l, _)| l == k))
            .map(|(k, w)| format!("no {k}, where it has {k} = {w}")),
    );
    if out.is_empty() && mine != theirs {
        out.push(format!("settings [{mine}] where it has [{theirs}]"));
    }
    out
}

/// Every node arrived: ids by data address, one id for the leaders' communicator.
fn welcome(mut waiting: Vec<Waiting>) {
    waiting.sort_by(|a, b| a.hello.data_addr.cmp(&b.hello.data_addr));
    let root = waiting.first().and_then(|w| w.hello.data_addr.parse::<SocketAddr>().ok());
    let mut token = [0u8; 16];
    let id = match getrandom::fill(&mut token) {
        Ok(()) => UniqueId::from_parts(token, root).to_string(),
        Err(e) => {
            for w in waiting {
                refuse(w.stream, ErrorKind::Io, format!("the orchestrator has no randomness: {e}"));
            }
            return;
        }
    };
    let nodes: Vec<Vec<u64>> = waiting.iter().map(|w| w.hello.peers.clone()).collect();
    for (i, mut w) in waiting.into_iter().enumerate() {
        let msg = Msg::Welcome(Welcome { node: i as u32, id: id.clone(), nodes: nodes.clone() });
        let _ = wire::write_msg(&mut w.stream, &msg);
    }
}

/// Answers a round that waited past its first node's timeout (less a tenth) with `Timeout`.
fn expire(r: &mut Round) {
    let Some(since) = r.since else { return };
    let Some(first) = r.waiting.first() else { return };
    let timeout = Duration::from_millis(first.hello.timeout_ms);
    if since.elapsed() < timeout - timeout / 10 {
        return;
    }
    let arrived: Vec<String> = r.waiting.iter().map(|w| w.hello.data_addr.clone()).collect();
    let refused = if r.refused.is_empty() {
        "none was refused meanwhile".to_string()
    } else {
        format!("refused meanwhile: {}", r.refused.join("; "))
    };
    let message = format!(
        "only {} of {} nodes arrived within {:?} ({}); {refused}",
        arrived.len(),
        r.num_nodes,
        timeout - timeout / 10,
        arrived.join(", "),
    );
    r.since = None;
    r.refused.clear();
    for w in std::mem::take(&mut r.waiting) {
        refuse(w.stream, ErrorKind::Timeout, message.clone());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Write;

    #[test]
    fn a_bad_address_is_the_callers_mistake() {
        // A port that is no number fails to resolve without asking DNS.
        let e = Orchestrator::start("127.0.0.1:notaport", 2).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("does not resolve"), "{e}");
        assert_eq!(Orchestrator::start("127.0.0.1:0", 0).err().unwrap().kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn a_config_mismatch_names_the_settings_that_differ() {
        let a = "num_devices = 1, local all_reduce strategy = Ring, timeout = 10s";
        let b = "num_devices = 2, local all_reduce strategy = Ring, pipeline = 4";
        assert_eq!(
            settings_diff(a, b),
            [
                "num_devices = 1 where it has num_devices = 2",
                "timeout = 10s, a setting it does not have",
                "no pipeline, where it has pipeline = 4"
            ]
        );
        assert!(settings_diff(a, a).is_empty());
        assert_eq!(settings_diff("x", "y"), ["settings [x] where it has [y]"]);
    }

    fn hello(addr: &str, peers: Vec<u64>) -> Hello {
        Hello { num_nodes: 2, data_addr: addr.into(), peers, settings: "s".into(), timeout_ms: 3000 }
    }

    fn ask(server: SocketAddr, h: &Hello) -> std::thread::JoinHandle<Msg> {
        let h = h.clone();
        std::thread::spawn(move || {
            let mut s = TcpStream::connect(server).unwrap();
            wire::write_msg(&mut s, &Msg::Hello(h)).unwrap();
            wire::read_msg(&mut s).unwrap()
        })
    }

    #[test]
    fn assigns_ids_by_address_and_survives_garbage() {
        let server = Orchestrator::start("127.0.0.1:0", 2).unwrap();
        let at = server.local_addr();
        // Garbage, a wrong version and a truncated frame: each refused or dropped.
        let mut g = TcpStream::connect(at).unwrap();
        g.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        assert!(matches!(wire::read_msg(&mut g), Ok(Msg::Refused(r)) if r.kind == ErrorKind::Protocol));
        let mut v = wire::encode(&Msg::Hello(hello("127.0.0.1:1", vec![0])));
        v[4] = 9;
        let mut g = TcpStream::connect(at).unwrap();
        g.write_all(&v).unwrap();
        assert!(matches!(wire::read_msg(&mut g), Ok(Msg::Refused(r)) if r.message.contains("version 9")));
        let mut g = TcpStream::connect(at).unwrap();
        g.write_all(&v[..5]).unwrap();
        drop(g);
        // A node with another num_nodes is refused, naming it.
        let other = ask(at, &Hello { num_nodes: 3, ..hello("127.0.0.1:7", vec![9]) }).join().unwrap();
        assert!(
            matches!(&other, Msg::Refused(r) if r.kind == ErrorKind::Mismatch && r.message.contains("127.0.0.1:7 announced num_nodes = 3")),
            "{other:?}"
        );
        // The real nodes, arriving in the reverse order of their addresses.
        let b = ask(at, &hello("127.0.0.1:5002", vec![2, 3]));
        std::thread::sleep(Duration::from_millis(50));
        let a = ask(at, &hello("127.0.0.1:5001", vec![0, 1]));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        let (Msg::Welcome(a), Msg::Welcome(b)) = (a, b) else { panic!("not welcomed") };
        assert_eq!((a.node, b.node), (0, 1));
        assert_eq!(a.nodes, vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(a.id, b.id);
        assert!(a.id.ends_with("@127.0.0.1:5001"), "{}", a.id);
        server.shutdown();
    }

    /// A node whose config differs from the waiting one's fails the round at once on both:
    /// the node that came first used to wait out its whole timeout, told only at the end.
    #[test]
    fn a_config_mismatch_fails_every_node_of_the_round_at_once() {
        let server = Orchestrator::start("127.0.0.1:0", 2).unwrap();
        let at = server.local_addr();
        for (settings, timeout_ms, says) in
            [("t", 60_000, "[s] where it has [t]"), ("s", 50_000, "60000 ms where it has 50000 ms")]
        {
            let t0 = Instant::now();
            let first = ask(at, &Hello { timeout_ms: 60_000, ..hello("127.0.0.1:6201", vec![0]) });
            std::thread::sleep(Duration::from_millis(50));
            let differ = ask(at, &Hello { settings: settings.into(), timeout_ms, ..hello("127.0.0.1:6202", vec![1]) });
            let (first, differ) = (first.join().unwrap(), differ.join().unwrap());
            assert!(t0.elapsed() < Duration::from_secs(10), "waited {:?}", t0.elapsed());
            assert!(
                matches!(&differ, Msg::Refused(r) if r.kind == ErrorKind::Mismatch && r.message.contains("differs from node 127.0.0.1:6201's") && r.message.contains("were refused too")),
                "{differ:?}"
            );
            assert!(
                matches!(&first, Msg::Refused(r) if r.kind == ErrorKind::Mismatch && r.message.contains("node 127.0.0.1:6202 registered") && r.message.contains(says) && r.message.contains("abandoned on every node")),
                "{first:?}"
            );
        }
        // A peer id on two nodes: both refused at once too.
        let t0 = Instant::now();
        let first = ask(at, &Hello { timeout_ms: 60_000, ..hello("127.0.0.1:6203", vec![0, 1]) });
        std::thread::sleep(Duration::from_millis(50));
        let dup = ask(at, &Hello { timeout_ms: 60_000, ..hello("127.0.0.1:6204", vec![1, 2]) });
        let (first, dup) = (first.join().unwrap(), dup.join().unwrap());
        assert!(t0.elapsed() < Duration::from_secs(10), "waited {:?}", t0.elapsed());
        assert!(
            matches!(&dup, Msg::Refused(r) if r.kind == ErrorKind::InvalidArgument && r.message.contains("peer 1 is on node 127.0.0.1:6204 and on node 127.0.0.1:6203")),
            "{dup:?}"
        );
        assert!(
            matches!(&first, Msg::Refused(r) if r.kind == ErrorKind::InvalidArgument && r.message.contains("registered peer 1, which is on node 127.0.0.1:6203 too")),
            "{first:?}"
        );
        // The round is empty again: two agreeing nodes complete it.
        let (a, b) = (ask(at, &hello("127.0.0.1:6211", vec![0])), ask(at, &hello("127.0.0.1:6212", vec![1])));
        assert!(matches!(a.join().unwrap(), Msg::Welcome(_)) && matches!(b.join().unwrap(), Msg::Welcome(_)));
    }

    #[test]
    fn disagreeing_and_late_nodes() {
        let server = Orchestrator::start("127.0.0.1:0", 2).unwrap();
        let at = server.local_addr();
        let first = ask(at, &Hello { timeout_ms: 400, ..hello("127.0.0.1:6001", vec![0]) });
        std::thread::sleep(Duration::from_millis(50));
        let other = ask(at, &Hello { num_nodes: 3, timeout_ms: 400, ..hello("127.0.0.1:6002", vec![1]) });
        let dup = ask(at, &Hello { timeout_ms: 400, ..hello("127.0.0.1:6001", vec![3]) });
        assert!(matches!(other.join().unwrap(), Msg::Refused(r) if r.kind == ErrorKind::Mismatch));
        assert!(
            matches!(dup.join().unwrap(), Msg::Refused(r) if r.message.contains("two nodes announced the data address"))
        );
        let t0 = Instant::now();
        let late = first.join().unwrap();
        assert!(
            matches!(&late, Msg::Refused(r) if r.kind == ErrorKind::Timeout && r.message.contains("only 1 of 2 nodes arrived") && r.message.contains("127.0.0.1:6001")),
            "{late:?}"
        );
        // The nodes refused meanwhile are named, with why: not "never connected".
        assert!(
            matches!(&late, Msg::Refused(r) if r.message.contains("refused meanwhile: node 127.0.0.1:600") && r.message.contains("node 127.0.0.1:6002 (") && r.message.contains("node 127.0.0.1:6001 (two nodes")),
            "{late:?}"
        );
        assert!(t0.elapsed() < Duration::from_millis(400));
        // A node that gave up (its connection closed) leaves the round: restarted with the
        // same address and peers, it is admitted, and the round completes.
        let mut gone = TcpStream::connect(at).unwrap();
        wire::write_msg(&mut gone, &Msg::Hello(hello("127.0.0.1:6101", vec![0]))).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        drop(gone);
        std::thread::sleep(Duration::from_millis(50));
        let again = ask(at, &hello("127.0.0.1:6101", vec![0]));
        let other = ask(at, &hello("127.0.0.1:6102", vec![1]));
        let (again, other) = (again.join().unwrap(), other.join().unwrap());
        assert!(matches!(&again, Msg::Welcome(w) if w.node == 0 && w.nodes == vec![vec![0], vec![1]]), "{again:?}");
        assert!(matches!(&other, Msg::Welcome(w) if w.node == 1), "{other:?}");
        assert_eq!(Orchestrator::start("127.0.0.1:0", 0).err().map(|e| e.kind()), Some(ErrorKind::InvalidArgument));
    }
}
