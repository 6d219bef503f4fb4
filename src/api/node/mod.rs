//! Several nodes: how the peers of one process (a *node*) join the peers of other nodes. The
//! lowest peer of each node is its *leader*; at registration it meets the other leaders
//! through the orchestrator ([`client`], framed by [`wire`]), which assigns node ids, and joins
//! the leaders' communicator (one rank per node, over the core's TCP / shared-memory path).
//! The leader then tells its node's peers the job's layout through the node's own
//! communicator, so a leader that fails fails its whole node at once.
//!
//! Node ids follow the nodes' data addresses (`node_address`'s host and `data_service_port`),
//! sorted as text; node 0's data address is the root of the leaders' communicator.

mod client;
pub(crate) mod wire;

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use super::{CollectiveConfig, PeerId};
use crate::comm::Communicator;
use crate::comm::rendezvous::listener;
use crate::config::CommConfig;
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::tensor::Tensor;
use crate::types::DType;
use crate::unique_id::UniqueId;

/// Where a registered peer stands among the nodes.
pub(crate) struct Hierarchy<D: Device> {
    /// This node's id.
    pub node: usize,
    /// Every node's peers (sorted), in node order; each node's first is its leader.
    pub nodes: Vec<Vec<PeerId>>,
    /// The leaders' communicator (rank = node id), on the leader only.
    pub global: Option<Communicator<D>>,
}

impl<D: Device> Hierarchy<D> {
    /// The node of `peer`, if any node has it.
    pub(crate) fn node_of(&self, peer: PeerId) -> Option<usize> {
        self.nodes.iter().position(|n| n.binary_search(&peer).is_ok())
    }

    /// The leaders, in node order.
    pub(crate) fn leaders(&self) -> Vec<PeerId> {
        self.nodes.iter().filter_map(|n| n.first().copied()).collect()
    }

    /// Every node's peers, for messages.
    pub(crate) fn describe(&self) -> String {
        let node = |(i, n): (usize, &Vec<PeerId>)| {
            format!("node {i}: {}", n.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", "))
        };
        self.nodes.iter().enumerate().map(node).collect::<Vec<_>>().join("; ")
    }
}

/// Joins this node's registration (its communicator `comm`, its members `peers`) to the
/// other nodes of `config`. Called by every member; rank 0 leads.
///
/// # Errors
/// On the leader, what meeting the other nodes or joining their communicator returned; on the
/// other peers, the same error relayed through `comm` (which is then failed).
pub(crate) fn join<D: Device>(
    comm: &Communicator<D>,
    peers: &[PeerId],
    config: &CollectiveConfig,
) -> Result<Hierarchy<D>> {
    let dev = comm.device();
    let led = if comm.rank() == 0 {
        // A reset (or any failure) of the node's communicator ends the leader's waits too.
        match lead(dev, peers, config, &|| !comm.is_usable()) {
            Ok(l) => Some(l),
            Err(e) => {
                let e = gave_up_first(e, comm.poison());
                comm.fail(e.clone());
                return Err(e);
            }
        }
    } else {
        None
    };
    let waiting = |e: CollectiveError| {
        let leader = peers.first().map_or_else(String::new, |p| format!(", peer {p},"));
        let out = CollectiveError::new(
            e.kind(),
            format!("this node's leader{leader} did not meet the other nodes: {}", e.message()),
        );
        // The leader's advice (where the orchestrator should be, say) holds here too.
        let out = match e.set_hint() {
            Some(h) => out.with_hint(h),
            None => out,
        };
        out.with_source(e)
    };
    let words = led.as_ref().map(|(node, nodes, _)| encode_layout(*node, nodes)).unwrap_or_default();
    let mut len = Tensor::from_slice(dev, &[words.len() as u32], &[1])?;
    comm.broadcast(&mut len, 0).map_err(waiting)?;
    let n = len.to_vec::<u32>()?.first().copied().unwrap_or(0) as usize;
    if n > 1 << 24 {
        return Err(CollectiveError::protocol(format!("the leader announced a layout of {n} words")));
    }
    let mut t = match led {
        Some(_) => Tensor::from_slice(dev, &words, &[n])?,
        None => Tensor::zeros(dev, DType::U32, &[n])?,
    };
    comm.broadcast(&mut t, 0).map_err(waiting)?;
    let (node, nodes) = decode_layout(&t.to_vec::<u32>()?)?;
    if nodes.get(node).map(Vec::as_slice) != Some(peers) {
        return Err(CollectiveError::protocol(format!("node {node}'s leader announced a layout without this node")));
    }
    Ok(Hierarchy { node, nodes, global: led.map(|(_, _, g)| g) })
}

type Led<D> = (usize, Vec<Vec<PeerId>>, Communicator<D>);

/// The leader's part: listen on the data address, meet the other leaders, join their
/// communicator.
fn lead<D: Device>(
    device: &D,
    peers: &[PeerId],
    config: &CollectiveConfig,
    cancelled: &dyn Fn() -> bool,
) -> Result<Led<D>> {
    let missing = |what: &str| CollectiveError::invalid(format!("a multi-node CollectiveConfig needs {what}"));
    let num_nodes = config.num_nodes().ok_or_else(|| missing("num_nodes"))?;
    let global = config.global_address().ok_or_else(|| missing("global_address"))?;
    let node_address = config.node_address().ok_or_else(|| missing("node_address"))?;
    let port = config.data_service_port().ok_or_else(|| missing("data_service_port"))?;
    let data = SocketAddr::new(host_ip(node_address)?, port);
    check_data_ip(node_address, data.ip())?;
    listener::serve_at_for_mesh(data).map_err(|e| {
        // The listener's own words are a launcher's (MASTER_ADDR:MASTER_PORT, RANK 0); the
        // system's reason is what a node needs, with where its port comes from.
        let why = std::error::Error::source(&e).map_or_else(|| e.message().to_string(), ToString::to_string);
        CollectiveError::new(
            e.kind(),
            format!("this node's leader cannot listen at node_address:data_service_port {data}: {why}"),
        )
        .with_hint(
            "give each node of one host its own data_service_port, one nothing else listens on (another node of \
             this host, another job, or a port of the system's ephemeral range may hold it), and a node_address \
             of this host; then register every peer again",
        )
    })?;
    let settings: Vec<String> = config
        .settings()
        .into_iter()
        .filter(|(k, _)| k != "node_address" && k != "data_service_port")
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    let hello = wire::Hello {
        num_nodes,
        data_addr: data.to_string(),
        peers: peers.iter().map(|p| p.get()).collect(),
        settings: settings.join(", "),
        timeout_ms: u64::try_from(config.timeout().as_millis()).unwrap_or(u64::MAX),
    };
    let welcome = client::rendezvous(global, &hello, config.timeout(), cancelled).map_err(|e| {
        // The peer API's advice, not a communicator's: nothing was created yet.
        let hint = match e.kind() {
            ErrorKind::Timeout => ORCHESTRATOR_TIMEOUT,
            ErrorKind::Mismatch | ErrorKind::InvalidArgument => {
                "give every node the same CollectiveConfig (only node_address and data_service_port differ, and \
                 each peer id is on one node), then register every peer again"
            }
            _ => "check the network between the nodes and the orchestrator, then register every peer again",
        };
        // A hint of its own (a global_address that is not one) says more.
        if e.set_hint().is_some() { e } else { e.with_hint(hint) }
    })?;
    let nodes: Vec<Vec<PeerId>> = welcome.nodes.iter().map(|n| n.iter().copied().map(PeerId::new).collect()).collect();
    let node = welcome.node as usize;
    if nodes.len() != num_nodes as usize || nodes.get(node).map(Vec::as_slice) != Some(peers) {
        return Err(CollectiveError::protocol(format!(
            "the orchestrator at {global} answered node {data} with a layout of {} nodes that does not hold it as \
             node {node}",
            nodes.len()
        )));
    }
    let id: UniqueId = welcome.id.parse()?;
    let cfg = CommConfig::default().with_timeout(config.timeout());
    let comm = Communicator::with_config(device.clone(), nodes.len(), id, node, cfg).map_err(|e| {
        // The core's advice names launchers' variables (MASTER_ADDR:MASTER_PORT, RANK) and
        // Communicator::new; here they are node 0's node_address and data_service_port.
        let hint = match e.kind() {
            ErrorKind::Io => Some(
                "node 0's leader listens at its node_address:data_service_port for the other nodes' leaders: give \
                 each node of one host its own data_service_port (one nothing else listens on), then register every \
                 peer again",
            ),
            ErrorKind::Timeout => Some(
                "every node's leader must reach node 0's node_address:data_service_port (the orchestrator hands it \
                 out): set node_address to an address of each node's host that the other nodes reach (not \
                 127.0.0.1 across hosts), let data_service_port through the firewall, or raise \
                 CollectiveConfig::with_timeout if a node starts late; then register every peer again",
            ),
            _ => None,
        };
        let out = CollectiveError::new(
            e.kind(),
            format!("node {node} ({data}) joining the leaders' communicator of {} nodes: {}", nodes.len(), e.message()),
        );
        match hint {
            Some(h) => out.with_hint(h),
            None => out,
        }
        .with_source(e)
    })?;
    Ok((node, nodes, comm))
}

/// The leader's wait for the other nodes, cut short because this node's other peers timed out
/// waiting for it (their timeout is the leader's; whoever looks first wins): a `Timeout` of
/// the wait, as the leader would have reported a moment later, not a cancelled registration.
fn gave_up_first(e: CollectiveError, poison: Option<CollectiveError>) -> CollectiveError {
    match poison {
        Some(p) if e.kind() == ErrorKind::Aborted && p.kind() == ErrorKind::Timeout => CollectiveError::new(
            ErrorKind::Timeout,
            format!(
                "{}: this node's other peers gave up waiting for their leader first (their timeout is the same), the \
                 orchestrator not having answered: the other nodes did not all arrive in time, or the orchestrator \
                 does not answer",
                e.message().trim_end_matches(client::CANCELLED)
            ),
        )
        .with_hint(ORCHESTRATOR_TIMEOUT),
        _ => e,
    }
}

/// The advice for a node that timed out waiting for the orchestrator's answer.
const ORCHESTRATOR_TIMEOUT: &str = "start the orchestrator at global_address (ruccl::orchestrator, \
     examples/orchestrator.rs) and every node of the job, or raise CollectiveConfig::with_timeout if some start late; \
     nothing was created: register every peer again";

/// Refuses a node address the other nodes cannot connect to: one that resolves to the
/// unspecified address (`0`, `0.0`, `0x0` and `::ffff:0.0.0.0` are 0.0.0.0 too; the config's
/// own check sees literal addresses only), or one that is not an address of this host (the
/// leader then listened on every interface and advertised an address that leads elsewhere, and
/// the other nodes waited out their timeout).
fn check_data_ip(node_address: &str, ip: IpAddr) -> Result<()> {
    let unspecified = ip.is_unspecified() || ip.to_canonical().is_unspecified();
    let problem = if unspecified {
        "is the unspecified address (0.0.0.0): nothing can connect to it"
    } else if std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_err() {
        "is not an address of this host, where this node's leader listens"
    } else {
        return Ok(());
    };
    Err(CollectiveError::invalid(format!("node_address {node_address:?} ({ip}) {problem}")).with_hint(
        "set node_address to an address of this node's host that the other nodes reach (its IP on the nodes' \
         network; 127.0.0.1 when every node runs on this host), then register every peer again",
    ))
}

/// The IP of `node_address` (`ip`, `ip:port`, `host` or `host:port`).
fn host_ip(node_address: &str) -> Result<IpAddr> {
    if let Ok(a) = node_address.parse::<SocketAddr>() {
        return Ok(a.ip());
    }
    if let Ok(ip) = node_address.trim_matches(['[', ']']).parse::<IpAddr>() {
        return Ok(ip);
    }
    let host = node_address.rsplit_once(':').map_or(node_address, |(h, _)| h);
    (host, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
        .ok_or_else(|| CollectiveError::invalid(format!("node_address {node_address:?} does not resolve")))
}

/// `node, number of nodes, then per node: count, then each peer id as two words`.
fn encode_layout(node: usize, nodes: &[Vec<PeerId>]) -> Vec<u32> {
    let mut w = vec![node as u32, nodes.len() as u32];
    for n in nodes {
        w.push(n.len() as u32);
        n.iter().for_each(|p| w.extend([p.get() as u32, (p.get() >> 32) as u32]));
    }
    w
}

fn decode_layout(w: &[u32]) -> Result<(usize, Vec<Vec<PeerId>>)> {
    let bad = || CollectiveError::protocol("the node's leader sent a corrupt layout of the nodes");
    let mut it = w.iter().copied();
    let node = it.next().ok_or_else(bad)? as usize;
    let count = it.next().ok_or_else(bad)? as usize;
    let mut nodes = Vec::new();
    for _ in 0..count.min(w.len()) {
        let n = it.next().ok_or_else(bad)? as usize;
        let mut peers = Vec::new();
        for _ in 0..n.min(w.len()) {
            let (lo, hi) = (it.next().ok_or_else(bad)?, it.next().ok_or_else(bad)?);
            peers.push(PeerId::new(u64::from(lo) | u64::from(hi) << 32));
        }
        nodes.push(peers);
    }
    if nodes.len() != count || node >= count || it.next().is_some() {
        return Err(bad());
    }
    Ok((node, nodes))
}

/// A leader's error on the leaders' communicator, restated for the peers: the leaders' ranks
/// are node ids, so the peer it names (when it names one) is given as its node and peers.
pub(crate) fn global_error(node: usize, nodes: &[Vec<PeerId>], call: &str, e: CollectiveError) -> CollectiveError {
    let who = |k: usize| match nodes.get(k) {
        Some(ps) => format!("node {k}: peers {}", ps.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")),
        None => format!("node {k}"),
    };
    let named = match e.context().peer {
        Some(k) if k != node => format!("; rank {k} there is {}", who(k)),
        _ => String::new(),
    };
    let kind = e.kind();
    let out = CollectiveError::new(
        kind,
        format!(
            "{} (in the {call} among the nodes' leaders; this is {}, rank {node} there{named})",
            e.message(),
            who(node)
        ),
    );
    // The core's advice names the leaders' communicator and `CommConfig`, which a peer-API
    // user never made; its report (the leaders' flight recorders) is kept.
    let out = match e.report() {
        Some(r) => out.with_report(r.to_string()),
        None => out,
    };
    super::call::with_peer_hint(out).with_source(e)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn layout_round_trip() {
        let nodes = vec![vec![PeerId::new(0), PeerId::new(1 << 40)], vec![PeerId::new(7)]];
        assert_eq!(decode_layout(&encode_layout(1, &nodes)).unwrap(), (1, nodes.clone()));
        let w = encode_layout(1, &nodes);
        for cut in 0..w.len() {
            assert!(decode_layout(&w[..cut]).is_err());
        }
        assert!(decode_layout(&[5, 1, 0]).is_err());
        assert_eq!(host_ip("127.0.0.1:9").unwrap(), IpAddr::from([127, 0, 0, 1]));
        assert_eq!(host_ip("127.0.0.1").unwrap(), IpAddr::from([127, 0, 0, 1]));
        assert!(host_ip("localhost:1").is_ok());
        let two = vec![vec![PeerId::new(0), PeerId::new(1)], vec![PeerId::new(2), PeerId::new(3)]];
        let e = global_error(0, &two, "x", CollectiveError::new(ErrorKind::PeerLost, "gone").with_peer(1));
        assert_eq!(e.kind(), ErrorKind::PeerLost);
        assert!(e.to_string().contains("this is node 0: peers 0, 1, rank 0 there; rank 1 there is node 1: peers 2, 3"));
        // The peer API's advice, not the core's (which named CommConfig and a communicator
        // to create again; a stranger's review).
        let e = global_error(0, &two, "x", CollectiveError::new(ErrorKind::Timeout, "late").with_peer(1));
        assert!(e.to_string().contains("CollectiveConfig::with_timeout"), "{e}");
        assert!(e.to_string().contains("finish_collective") && !e.to_string().contains("CommConfig"), "{e}");
    }
}

#[cfg(test)]
mod data_ip_tests {
    use super::*;

    /// Spellings of 0.0.0.0 that only resolve to it, and an address of no interface here,
    /// are refused before the leader listens (the config's check sees literal addresses
    /// only; a stranger's review).
    #[test]
    fn node_addresses_other_nodes_cannot_reach_are_refused() {
        for bad in ["0", "0.0", "0x0", "::ffff:0.0.0.0", "0.0.0.0:1"] {
            let Ok(ip) = host_ip(bad) else { continue };
            let e = check_data_ip(bad, ip).unwrap_err();
            assert!(e.to_string().contains("is the unspecified address"), "{bad}: {e}");
        }
        let e = check_data_ip("192.0.2.1", "192.0.2.1".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("is not an address of this host"), "{e}");
        if std::net::UdpSocket::bind("127.0.0.1:0").is_ok() {
            assert!(check_data_ip("127.0.0.1", host_ip("127.0.0.1").unwrap()).is_ok());
            assert!(check_data_ip("localhost:5", host_ip("localhost:5").unwrap()).is_ok());
        }
    }
}
