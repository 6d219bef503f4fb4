//! `CollectiveConfig`: what every peer of one registration must agree on — the number of
//! peers, the plan each operation runs ([`Strategy`]), the deadline, and the multi-node
//! settings (see `super::node`).

use std::fmt;
use std::time::Duration;

use crate::config::{Algorithm, DEFAULT_TIMEOUT};

/// The default of [`CollectiveConfig::with_pipeline_chunk_bytes`]: 0, the stages whole, one
/// after the other. Measured on two processes x two peers of one 2-core host (PERFORMANCE.md,
/// session 17): 1 MiB chunks took 5-9% off a 64 MiB all_reduce but added ~30% at 256 MiB,
/// 4 MiB ones were even at 64 MiB and even to +30% at 256 MiB — the cores were already busy
/// with every stage. Pipelining is for hosts whose stages leave cores or a network idle: set
/// it per job, measured (`benches/hier.rs`, `RUCCL_HIER_BENCH_CHUNK`).
pub const DEFAULT_PIPELINE_CHUNK_BYTES: usize = 0;

/// The default of [`CollectiveConfig::with_broadcast_pipeline_chunk_bytes`]: 4 MiB. A
/// broadcast's stages only copy, so they leave cores idle that the next chunk's stage uses:
/// measured on two processes x two peers of one 2-core host (PERFORMANCE.md, session 21),
/// 4 MiB chunks took a 256 MiB broadcast from 245-301 ms to 132-136 ms and a 64 MiB one from
/// 60-72 ms to 38-47 ms (1, 2, 8 and 16 MiB chunks: less, or less steadily).
pub const DEFAULT_BROADCAST_PIPELINE_CHUNK_BYTES: usize = 4 << 20;
use crate::error::{CollectiveError, Result};

/// The plan an operation runs. Each one is a distinct plan of the core scheduler (see
/// [`crate::algo`]), checked by its simulator for every world size.
///
/// ```
/// use ruccl::api::Strategy;
/// use ruccl::Algorithm;
/// assert_eq!(Strategy::Tree(3).algorithm(), Algorithm::KaryTree(3));
/// assert_eq!(Strategy::Ring.to_string(), "ring");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum Strategy {
    /// Let the core choose by message size (latency-optimal plans for small messages,
    /// bandwidth-optimal ones for large). Not in burn; the default here.
    #[default]
    Auto,
    /// Every peer sends to the root, which reduces and sends the result back.
    Centralized,
    /// A pipelined tree in which every peer has at most `arity` children (at least 2).
    Tree(u32),
    /// Ring all_reduce (reduce-scatter + all-gather); pipelined chain for reduce and broadcast.
    Ring,
}

impl Strategy {
    /// The core algorithm this strategy runs.
    ///
    /// ```
    /// use ruccl::{Algorithm, api::Strategy};
    /// assert_eq!(Strategy::Centralized.algorithm(), Algorithm::Centralized);
    /// ```
    pub fn algorithm(self) -> Algorithm {
        match self {
            Strategy::Auto => Algorithm::Auto,
            Strategy::Centralized => Algorithm::Centralized,
            Strategy::Tree(k) => Algorithm::KaryTree(k),
            Strategy::Ring => Algorithm::Ring,
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Strategy::Auto => f.write_str("auto"),
            Strategy::Centralized => f.write_str("centralized"),
            Strategy::Tree(k) => write!(f, "tree({k})"),
            Strategy::Ring => f.write_str("ring"),
        }
    }
}

/// The strategies of one level (the peers of a node, or the nodes of a job).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
struct Strategies {
    all_reduce: Strategy,
    reduce: Strategy,
    broadcast: Strategy,
}

/// Settings every peer of one registration passes to [`register`](crate::api::register); the
/// peers must pass identical configs.
///
/// The *local* strategies choose the plans among this process's peers (a *node*). With
/// `num_nodes` > 1 the job spans several nodes (processes or hosts), each with `num_devices`
/// peers: peers inside a node reduce in-process, the lowest peer of each node (its leader)
/// runs the *global* strategy with the other leaders, and results are broadcast back inside
/// the node (every operation; see [`crate::api`], "Several nodes").
/// The leaders meet through an orchestrator listening on `global_address` (feature
/// `orchestrator`, `examples/orchestrator.rs`), which numbers the nodes by their data
/// address: `node_address`'s host with `data_service_port`, where the node's leader listens
/// and the other leaders connect to it (node 0's is the root of the leaders' communicator);
/// that one port per node is what a firewall between the hosts must let through, besides the
/// orchestrator's. Peer ids are unique across nodes.
///
/// With the `serde` feature it is serialisable, so a launcher can ship it to every process.
///
/// ```
/// use std::time::Duration;
/// use ruccl::api::{CollectiveConfig, Strategy};
/// let config = CollectiveConfig::default()
///     .with_num_devices(4)
///     .with_local_all_reduce_strategy(Strategy::Ring)
///     .with_local_broadcast_strategy(Strategy::Tree(2))
///     .with_timeout(Duration::from_secs(30));
/// config.validate()?;
/// assert_eq!(config.num_devices(), 4);
/// # #[cfg(feature = "serde")] {
/// let json = serde_json::to_string(&config).unwrap();
/// assert_eq!(serde_json::from_str::<CollectiveConfig>(&json).unwrap(), config);
/// # }
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
pub struct CollectiveConfig {
    num_devices: usize,
    local: Strategies,
    global: Strategies,
    num_nodes: Option<u32>,
    global_address: Option<String>,
    node_address: Option<String>,
    data_service_port: Option<u16>,
    timeout: Duration,
    pipeline_chunk_bytes: usize,
    broadcast_pipeline_chunk_bytes: usize,
}

impl Default for CollectiveConfig {
    /// One device, [`Strategy::Auto`] everywhere, no multi-node settings, and the core's
    /// default deadline (10 minutes).
    fn default() -> Self {
        CollectiveConfig {
            num_devices: 1,
            local: Strategies::default(),
            global: Strategies::default(),
            num_nodes: None,
            global_address: None,
            node_address: None,
            data_service_port: None,
            timeout: DEFAULT_TIMEOUT,
            pipeline_chunk_bytes: DEFAULT_PIPELINE_CHUNK_BYTES,
            broadcast_pipeline_chunk_bytes: DEFAULT_BROADCAST_PIPELINE_CHUNK_BYTES,
        }
    }
}

macro_rules! strategy_setters {
    ($($(#[$doc:meta])* $set:ident, $get:ident, $level:ident . $op:ident;)*) => {$(
        $(#[$doc])*
        pub fn $set(mut self, strategy: Strategy) -> Self {
            self.$level.$op = strategy;
            self
        }

        #[doc = concat!("The strategy set by [`", stringify!($set), "`](Self::", stringify!($set), ").")]
        pub fn $get(&self) -> Strategy {
            self.$level.$op
        }
    )*};
}

impl CollectiveConfig {
    /// Sets how many peers of this process take part (each calls `register` once).
    ///
    /// ```
    /// use ruccl::api::CollectiveConfig;
    /// assert_eq!(CollectiveConfig::default().with_num_devices(8).num_devices(), 8);
    /// ```
    pub fn with_num_devices(mut self, num_devices: usize) -> Self {
        self.num_devices = num_devices;
        self
    }

    /// The number of peers of this process.
    pub fn num_devices(&self) -> usize {
        self.num_devices
    }

    strategy_setters! {
        /// Sets the plan of `all_reduce` among this process's peers.
        ///
        /// ```
        /// use ruccl::api::{CollectiveConfig, Strategy};
        /// let c = CollectiveConfig::default().with_local_all_reduce_strategy(Strategy::Centralized);
        /// assert_eq!(c.local_all_reduce_strategy(), Strategy::Centralized);
        /// ```
        with_local_all_reduce_strategy, local_all_reduce_strategy, local.all_reduce;
        /// Sets the plan of `reduce` among this process's peers.
        ///
        /// ```
        /// use ruccl::api::{CollectiveConfig, Strategy};
        /// let c = CollectiveConfig::default().with_local_reduce_strategy(Strategy::Tree(3));
        /// assert_eq!(c.local_reduce_strategy(), Strategy::Tree(3));
        /// ```
        with_local_reduce_strategy, local_reduce_strategy, local.reduce;
        /// Sets the plan of `broadcast` among this process's peers.
        ///
        /// ```
        /// use ruccl::api::{CollectiveConfig, Strategy};
        /// let c = CollectiveConfig::default().with_local_broadcast_strategy(Strategy::Ring);
        /// assert_eq!(c.local_broadcast_strategy(), Strategy::Ring);
        /// ```
        with_local_broadcast_strategy, local_broadcast_strategy, local.broadcast;
        /// Sets the plan of `all_reduce` between nodes (run by the nodes' leaders).
        ///
        /// ```
        /// use ruccl::api::{CollectiveConfig, Strategy};
        /// let c = CollectiveConfig::default().with_global_all_reduce_strategy(Strategy::Ring);
        /// assert_eq!(c.global_all_reduce_strategy(), Strategy::Ring);
        /// ```
        with_global_all_reduce_strategy, global_all_reduce_strategy, global.all_reduce;
        /// Sets the plan of `reduce` between nodes (run by the nodes' leaders).
        ///
        /// ```
        /// use ruccl::api::{CollectiveConfig, Strategy};
        /// let c = CollectiveConfig::default().with_global_reduce_strategy(Strategy::Tree(2));
        /// assert_eq!(c.global_reduce_strategy(), Strategy::Tree(2));
        /// ```
        with_global_reduce_strategy, global_reduce_strategy, global.reduce;
        /// Sets the plan of `broadcast` between nodes (run by the nodes' leaders).
        ///
        /// ```
        /// use ruccl::api::{CollectiveConfig, Strategy};
        /// let c = CollectiveConfig::default().with_global_broadcast_strategy(Strategy::Centralized);
        /// assert_eq!(c.global_broadcast_strategy(), Strategy::Centralized);
        /// ```
        with_global_broadcast_strategy, global_broadcast_strategy, global.broadcast;
    }

    /// Sets the number of nodes (processes or hosts, each with `num_devices` peers) of the job.
    /// More than one needs an orchestrator on `global_address` (see the type's docs).
    ///
    /// ```
    /// use ruccl::api::CollectiveConfig;
    /// assert_eq!(CollectiveConfig::default().with_num_nodes(2).num_nodes(), Some(2));
    /// ```
    pub fn with_num_nodes(mut self, num_nodes: u32) -> Self {
        self.num_nodes = Some(num_nodes);
        self
    }

    /// The number of nodes, when set.
    pub fn num_nodes(&self) -> Option<u32> {
        self.num_nodes
    }

    /// Sets the address of the orchestrator every node's leader connects to (`host:port`).
    ///
    /// ```
    /// use ruccl::api::CollectiveConfig;
    /// let c = CollectiveConfig::default().with_global_address("10.0.0.1:3000");
    /// assert_eq!(c.global_address(), Some("10.0.0.1:3000"));
    /// ```
    pub fn with_global_address(mut self, address: impl Into<String>) -> Self {
        self.global_address = Some(address.into());
        self
    }

    /// The global coordinator's address, when set.
    pub fn global_address(&self) -> Option<&str> {
        self.global_address.as_deref()
    }

    /// Sets this node's address as other nodes reach it (`host` or `host:port`: its host is
    /// used, with [`data_service_port`](Self::with_data_service_port)).
    ///
    /// ```
    /// use ruccl::api::CollectiveConfig;
    /// let c = CollectiveConfig::default().with_node_address("10.0.0.2:3001");
    /// assert_eq!(c.node_address(), Some("10.0.0.2:3001"));
    /// ```
    pub fn with_node_address(mut self, address: impl Into<String>) -> Self {
        self.node_address = Some(address.into());
        self
    }

    /// This node's address, when set.
    pub fn node_address(&self) -> Option<&str> {
        self.node_address.as_deref()
    }

    /// Sets the port this node's leader listens on for the other nodes: the leaders' connections
    /// to this node arrive there (node 0's is also the root of the leaders' communicator).
    ///
    /// ```
    /// use ruccl::api::CollectiveConfig;
    /// assert_eq!(CollectiveConfig::default().with_data_service_port(3002).data_service_port(), Some(3002));
    /// ```
    pub fn with_data_service_port(mut self, port: u16) -> Self {
        self.data_service_port = Some(port);
        self
    }

    /// The data service port, when set.
    pub fn data_service_port(&self) -> Option<u16> {
        self.data_service_port
    }

    /// Sets the deadline of every wait: registering, and each operation. With several nodes,
    /// the waits among the nodes' leaders take this timeout and the waits inside a node a
    /// grace more (a tenth, from 200 ms to 5 s), so that a leader's error about another node
    /// reaches its node's peers before their own wait for it ends.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruccl::api::CollectiveConfig;
    /// let c = CollectiveConfig::default().with_timeout(Duration::from_secs(5));
    /// assert_eq!(c.timeout(), Duration::from_secs(5));
    /// ```
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The deadline of every wait.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sets the chunk size, in bytes, of the multi-node all_reduce, reduce and broadcast of
    /// large tensors (broadcast's alone:
    /// [`with_broadcast_pipeline_chunk_bytes`](Self::with_broadcast_pipeline_chunk_bytes)):
    /// a tensor of at least two chunks runs chunk by chunk, the node's reduce of one chunk,
    /// the leaders' step on the one before and the node's broadcast of earlier ones at once.
    /// 0 runs every op whole, stage after stage. Every node must set the same. Default
    /// [`DEFAULT_PIPELINE_CHUNK_BYTES`] for all_reduce and reduce (off; 1 MiB was the best
    /// chunk measured, see there) and [`DEFAULT_BROADCAST_PIPELINE_CHUNK_BYTES`] for broadcast.
    ///
    /// A pipelined op issues its chunks' steps up front, so the [`timeout`](Self::timeout)
    /// bounds the whole op (a staged one gives each of its three stages the timeout), and
    /// an op is cut into at most 256 chunks (larger ones for larger tensors).
    ///
    /// ```
    /// use ruccl::api::CollectiveConfig;
    /// let c = CollectiveConfig::default().with_pipeline_chunk_bytes(1 << 20);
    /// assert_eq!(c.pipeline_chunk_bytes(), 1 << 20);
    /// ```
    pub fn with_pipeline_chunk_bytes(mut self, bytes: usize) -> Self {
        self.pipeline_chunk_bytes = bytes;
        self.broadcast_pipeline_chunk_bytes = bytes;
        self
    }

    /// The chunk size of the multi-node all_reduce's and reduce's pipelining (0: off).
    pub fn pipeline_chunk_bytes(&self) -> usize {
        self.pipeline_chunk_bytes
    }

    /// Sets the chunk size, in bytes, of the multi-node broadcast of large tensors alone: a
    /// tensor of at least two chunks runs chunk by chunk, the sender's node on one chunk, the
    /// leaders on the one before and the other nodes on earlier ones at once. 0 runs it
    /// whole, stage after stage. Every node must set the same. Default
    /// [`DEFAULT_BROADCAST_PIPELINE_CHUNK_BYTES`].
    ///
    /// ```
    /// use ruccl::api::{CollectiveConfig, DEFAULT_BROADCAST_PIPELINE_CHUNK_BYTES as BCAST};
    /// let c = CollectiveConfig::default();
    /// assert_eq!((c.pipeline_chunk_bytes(), c.broadcast_pipeline_chunk_bytes()), (0, BCAST));
    /// let c = c.with_pipeline_chunk_bytes(1 << 20).with_broadcast_pipeline_chunk_bytes(0);
    /// assert_eq!((c.pipeline_chunk_bytes(), c.broadcast_pipeline_chunk_bytes()), (1 << 20, 0));
    /// ```
    pub fn with_broadcast_pipeline_chunk_bytes(mut self, bytes: usize) -> Self {
        self.broadcast_pipeline_chunk_bytes = bytes;
        self
    }

    /// The chunk size of the multi-node broadcast's pipelining (0: off).
    pub fn broadcast_pipeline_chunk_bytes(&self) -> usize {
        self.broadcast_pipeline_chunk_bytes
    }

    /// Checks the config on its own and says precisely what is inconsistent: every problem,
    /// by setting name, in one message.
    ///
    /// # Errors
    /// `InvalidArgument` when `num_devices` is 0, a tree arity is below 2, the timeout is zero,
    /// the multi-node settings are set only in part (they go together: all four or none),
    /// `num_nodes` is 0, an address is empty, `node_address` is `0.0.0.0` or `::` (other
    /// nodes connect to it), or the data service port is 0.
    ///
    /// ```
    /// use ruccl::api::{CollectiveConfig, Strategy};
    /// let bad = CollectiveConfig::default()
    ///     .with_num_devices(0)
    ///     .with_local_reduce_strategy(Strategy::Tree(1))
    ///     .with_num_nodes(2);
    /// let msg = bad.validate().unwrap_err().to_string();
    /// assert!(msg.contains("num_devices is 0"), "{msg}");
    /// assert!(msg.contains("local reduce strategy tree(1)"), "{msg}");
    /// assert!(msg.contains("global_address, node_address, data_service_port"), "{msg}");
    /// ```
    pub fn validate(&self) -> Result<()> {
        let mut problems = Vec::new();
        if self.num_devices == 0 {
            problems.push("num_devices is 0: at least one peer must take part".to_string());
        }
        if self.timeout.is_zero() {
            problems.push("the timeout is zero: every wait would fail at once".to_string());
        }
        for (level, s) in [("local", &self.local), ("global", &self.global)] {
            for (op, strategy) in [("all_reduce", s.all_reduce), ("reduce", s.reduce), ("broadcast", s.broadcast)] {
                if let Strategy::Tree(k) = strategy
                    && k < 2
                {
                    problems.push(format!("{level} {op} strategy {strategy} has arity {k}: a tree needs at least 2"));
                }
            }
        }
        let multi = [
            ("num_nodes", self.num_nodes.is_some()),
            ("global_address", self.global_address.is_some()),
            ("node_address", self.node_address.is_some()),
            ("data_service_port", self.data_service_port.is_some()),
        ];
        let (set, unset): (Vec<_>, Vec<_>) = multi.iter().partition(|(_, is_set)| *is_set);
        if !set.is_empty() && !unset.is_empty() {
            let names = |v: &[&(&str, bool)]| v.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
            problems.push(format!(
                "the multi-node settings go together, but {} {} set and {} {} not",
                names(&set),
                if set.len() == 1 { "is" } else { "are" },
                names(&unset),
                if unset.len() == 1 { "is" } else { "are" },
            ));
        }
        if self.num_nodes == Some(0) {
            problems.push("num_nodes is 0: a job has at least one node".to_string());
        }
        for (name, addr) in [("global_address", &self.global_address), ("node_address", &self.node_address)] {
            if addr.as_deref().is_some_and(|a| a.trim().is_empty()) {
                problems.push(format!("{name} is empty"));
            }
        }
        if let Some(a) = self.node_address.as_deref()
            && unspecified(a)
        {
            problems.push(format!(
                "node_address {a:?} is the unspecified address (a socket listens there on every interface, but \
                 nothing can connect to it): the other nodes connect to node_address, so give an address of this \
                 node's host that they reach (its IP on the nodes' network; 127.0.0.1 when every node runs on this \
                 host)"
            ));
        }
        if self.data_service_port == Some(0) {
            problems.push("data_service_port is 0: other nodes need a fixed port to connect to".to_string());
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(CollectiveError::invalid(format!("inconsistent CollectiveConfig: {}", problems.join("; ")))
                .with_op("CollectiveConfig::validate"))
        }
    }
}

/// Whether `address` (`ip`, `ip:port`, `[ipv6]:port`) is `0.0.0.0` or `::`; a host name is
/// not resolved here.
fn unspecified(address: &str) -> bool {
    let ip = address.parse::<std::net::SocketAddr>().map(|a| a.ip());
    let ip = ip.or_else(|_| address.trim().trim_matches(['[', ']']).parse::<std::net::IpAddr>());
    ip.is_ok_and(|ip| ip.is_unspecified() || ip.to_canonical().is_unspecified())
}

impl CollectiveConfig {
    /// Every setting by name, as peers compare them when they register.
    pub(crate) fn settings(&self) -> Vec<(String, String)> {
        let mut out = vec![("num_devices".to_string(), self.num_devices.to_string())];
        for (level, s) in [("local", &self.local), ("global", &self.global)] {
            for (op, strategy) in [("all_reduce", s.all_reduce), ("reduce", s.reduce), ("broadcast", s.broadcast)] {
                out.push((format!("{level} {op} strategy"), strategy.to_string()));
            }
        }
        out.push(("num_nodes".to_string(), format!("{:?}", self.num_nodes)));
        out.push(("global_address".to_string(), format!("{:?}", self.global_address)));
        out.push(("node_address".to_string(), format!("{:?}", self.node_address)));
        out.push(("data_service_port".to_string(), format!("{:?}", self.data_service_port)));
        out.push(("timeout".to_string(), format!("{:?}", self.timeout)));
        out.push(("pipeline_chunk_bytes".to_string(), self.pipeline_chunk_bytes.to_string()));
        out.push(("broadcast_pipeline_chunk_bytes".to_string(), self.broadcast_pipeline_chunk_bytes.to_string()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_node_settings_go_together() {
        let all = CollectiveConfig::default()
            .with_num_nodes(2)
            .with_global_address("a:1")
            .with_node_address("b:2")
            .with_data_service_port(3);
        assert!(all.validate().is_ok());
        let partial = CollectiveConfig::default().with_global_address("a:1").with_data_service_port(3);
        let msg = partial.validate().map_err(|e| e.to_string()).err().unwrap_or_default();
        assert!(msg.contains("global_address, data_service_port are set and num_nodes, node_address are not"), "{msg}");
        assert!(CollectiveConfig::default().validate().is_ok());
    }

    /// A node_address of `0.0.0.0` (a bind address, a common slip) was accepted: the node's
    /// leader listened on every interface and advertised 0.0.0.0, which other hosts' leaders
    /// cannot connect to; they waited out the whole timeout.
    #[test]
    fn an_unspecified_node_address_is_refused() {
        let with = |node: &str| {
            CollectiveConfig::default()
                .with_num_nodes(2)
                .with_global_address("10.0.0.1:3000")
                .with_node_address(node)
                .with_data_service_port(3001)
                .validate()
        };
        for bad in ["0.0.0.0", "0.0.0.0:3001", "::", "[::]:3001", "[::]", "::ffff:0.0.0.0"] {
            let msg = with(bad).map_err(|e| e.to_string()).err().unwrap_or_default();
            assert!(
                msg.contains("is the unspecified address") && msg.contains("an address of this node's host"),
                "{bad}: {msg}"
            );
        }
        for good in ["127.0.0.1", "10.0.0.2:3001", "node-2", "node-2:3001", "[::1]:3001", "fe80::1"] {
            assert!(with(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn differences() {
        let a = CollectiveConfig::default().with_num_devices(4);
        let b = a.clone().with_local_all_reduce_strategy(Strategy::Ring).with_num_devices(3);
        let differ = |a: &CollectiveConfig, b: &CollectiveConfig| -> Vec<String> {
            a.settings()
                .into_iter()
                .zip(b.settings())
                .filter(|(x, y)| x != y)
                .map(|(x, y)| format!("{}: {} vs {}", x.0, x.1, y.1))
                .collect()
        };
        assert_eq!(differ(&a, &b), vec!["num_devices: 4 vs 3", "local all_reduce strategy: auto vs ring"]);
        assert!(differ(&a, &a).is_empty());
    }
}
