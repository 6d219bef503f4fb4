//! Communicators from a launcher's environment: torchrun, `srun`, `mpirun` ([`LaunchEnv`]).

use std::net::{SocketAddr, ToSocketAddrs};

use super::Communicator;
use super::rendezvous::listener;
use crate::config::CommConfig;
use crate::device::Device;
use crate::error::{CollectiveError, Result};
use crate::launch::LaunchEnv;
use crate::unique_id::UniqueId;

impl<D: Device> Communicator<D> {
    /// Joins the communicator the launcher describes (torchrun, `srun` or `mpirun`
    /// variables: the [`launch`](crate::launch) module lists which, and in what order), with the default config and
    /// `RUCCL_*` overrides ([`CommConfig::from_env`]). See
    /// [`from_launch`](Self::from_launch).
    ///
    /// # Errors
    /// `InvalidArgument` listing every missing or bad variable; as
    /// [`from_launch`](Self::from_launch).
    pub fn from_env(device: D) -> Result<Self> {
        let config = CommConfig::from_env().map_err(|e| {
            // Named by rank when the launcher says which (N processes print N lines).
            let rank = LaunchEnv::from_map(&std::env::vars().collect()).ok().map(|l| l.rank);
            let e = e.with_op("Communicator::from_env");
            match rank {
                Some(r) => e.with_rank(r),
                None => e,
            }
        })?;
        Self::from_env_with_config(device, config)
    }

    /// Like [`from_env`](Self::from_env) with an explicit config.
    ///
    /// # Errors
    /// As [`from_env`](Self::from_env).
    pub fn from_env_with_config(device: D, config: CommConfig) -> Result<Self> {
        let vars = std::env::vars().collect();
        let env = LaunchEnv::from_map(&vars)?;
        let shadow = env.shadows(&vars);
        if let Some(why) = env.alone_by_mistake(shadow.as_deref()) {
            return Err(CollectiveError::invalid(why).with_rank(env.rank).with_op("Communicator::from_env").with_hint(
                "unset RANK and WORLD_SIZE in the environment that starts the launcher (or set them to agree with \
                 it), then start every process again",
            ));
        }
        #[cfg(feature = "tracing")]
        if let Some(why) = &shadow {
            tracing::warn!(rank = env.rank, "Communicator::from_env: {why}");
        }
        // Without a subscriber the warning is lost, and a join that fails is where stale
        // variables show (every process took the same rank): the error says it too.
        // Stale variables are then the likely cause of any failure (every process took the
        // same rank: rank 0's port "in use"), and their advice comes first.
        Self::from_launch(device, &env, config).map_err(|e| match &shadow {
            Some(why) => e.appended(&format!("Note: {why}")).with_hint(
                "if RANK and WORLD_SIZE are left over in the environment that starts the launcher, unset them \
                 (the launcher's own variables then count), and start every process again",
            ),
            None => e,
        })
    }

    /// Joins the communicator of a launch: rank `env.rank` of `env.world_size`. Rank 0 listens
    /// on `MASTER_ADDR:MASTER_PORT` for the rendezvous (on every interface when that address is
    /// not one of its host's); the other ranks connect there, retrying until the config's
    /// timeout. The id is derived from the address alone, so no id needs to be passed around
    /// (two launches at once need two ports; ranks launched with different world sizes meet
    /// and are all told that the sizes differ). This process listens for its
    /// peers on `RUCCL_SOCKET_IFNAME` (an address, or interfaces selected as by
    /// `NCCL_SOCKET_IFNAME`: `eth`, `=eth0`, `^docker,lo`), else on the address that reaches
    /// `MASTER_ADDR`.
    ///
    /// # Errors
    /// `InvalidArgument` when `MASTER_ADDR` does not resolve or `RUCCL_SOCKET_IFNAME` selects
    /// nothing on this host; `Io` when rank 0 cannot listen on `MASTER_PORT`; as
    /// [`new`](Self::new).
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use ruccl::{CommConfig, Communicator, HostDevice, launch::LaunchEnv};
    /// let port = ruccl::launch::free_port().ok_or("no free port")?;
    /// let vars: HashMap<String, String> = [
    ///     ("RANK", "0".to_string()),
    ///     ("WORLD_SIZE", "1".to_string()),
    ///     ("MASTER_ADDR", "127.0.0.1".to_string()),
    ///     ("MASTER_PORT", port.to_string()),
    /// ]
    /// .into_iter()
    /// .map(|(k, v)| (k.to_string(), v))
    /// .collect();
    /// let env = LaunchEnv::from_map(&vars)?;
    /// let comm = Communicator::from_launch(HostDevice::default(), &env, CommConfig::default())?;
    /// assert_eq!((comm.rank(), comm.world_size()), (0, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_launch(device: D, env: &LaunchEnv, config: CommConfig) -> Result<Self> {
        // The port when it is not MASTER_PORT itself, said in every error.
        let port_note = (env.port_from != "MASTER_PORT").then(|| {
            format!(
                "Note: ruCCL's rendezvous port here is {} = {}{}",
                env.port_from,
                env.port,
                if env.port_from == "MASTER_PORT + 1" {
                    " (torchrun's agent listens on MASTER_PORT itself: TORCHELASTIC_USE_AGENT_STORE is set); set \
                     RUCCL_MASTER_PORT to a free port of rank 0's host, the same for every rank, to choose another"
                } else {
                    ""
                }
            )
        });
        let fail = |e: CollectiveError| {
            // The rendezvous names the call it serves, `Communicator::new`: the user called this one.
            let e = e.called_as("Communicator::new", "Communicator::from_env");
            let e = e.with_rank(env.rank).with_op("Communicator::from_env");
            match &port_note {
                Some(note) => e.appended(note),
                None => e,
            }
        };
        let root = resolve(&env.master_addr, env.port).map_err(fail)?;
        if let Some(e) = loopback_across_hosts(env, root) {
            return Err(fail(e));
        }
        listener::address_for(env.socket_ifname.as_deref(), Some(&env.master_addr)).map_err(fail)?;
        let id = UniqueId::for_launch(root, env.job.as_deref());
        if env.rank == 0 {
            listener::serve_at(root).map_err(fail)?;
            listener::root_launch(&id);
        }
        // Rank 0 listens on every interface when MASTER_ADDR is not one of its host's (a
        // service address may forward there); if the others never come, that is the first
        // suspect, which only rank 0 can see (it said only "rank(s) 1 never called").
        let elsewhere = (env.rank == 0).then(|| not_here(&env.master_addr, root)).flatten();
        Self::with_config(device, env.world_size, id, env.rank, config).map_err(|e| match &elsewhere {
            Some(note) if e.kind() == crate::ErrorKind::Timeout => fail(e).appended(note),
            _ => fail(e),
        })
    }
}

/// The note for rank 0 whose `MASTER_ADDR` (resolved to `root`) is no address of this host.
fn not_here(master: &str, root: SocketAddr) -> Option<String> {
    let local = std::net::UdpSocket::bind(SocketAddr::new(root.ip(), 0)).is_ok();
    (!local).then(|| {
        format!(
            "Note: MASTER_ADDR={master} ({}) is not an address of this host, rank 0's, which listens on every \
             interface on port {} instead: the other ranks connect to {root}, and unless that address forwards here \
             (a service address) they never reach this rendezvous; set MASTER_ADDR to rank 0's host",
            root.ip(),
            root.port()
        )
    })
}

/// `host:port` as one address (IPv4 preferred).
fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    let bad = |why: String| {
        CollectiveError::invalid(format!("MASTER_ADDR={host} does not resolve: {why}")).with_hint(
            "set MASTER_ADDR to the host name or IP address of rank 0's machine, as this machine resolves it \
             (the same in every process)",
        )
    };
    let all: Vec<SocketAddr> = (host, port).to_socket_addrs().map_err(|e| bad(e.to_string()))?.collect();
    let addr = all.iter().find(|a| a.is_ipv4()).or(all.first()).copied().ok_or_else(|| bad("no address".into()))?;
    // A link-local IPv6 address names no interface without its zone: every connection to it
    // failed with the OS's bare "Invalid argument" (or timed out), naming neither cause.
    if let SocketAddr::V6(a) = addr
        && (a.ip().segments()[0] & 0xffc0) == 0xfe80
        && a.scope_id() == 0
    {
        return Err(CollectiveError::invalid(format!(
            "MASTER_ADDR={host} is a link-local IPv6 address without a zone, which names no interface: add the \
             interface as its zone (as {}%eth0), or use an address that is not link-local",
            a.ip()
        ))
        .with_hint("set MASTER_ADDR to rank 0's address with its zone, or to a global address or host name"));
    }
    Ok(addr)
}

/// The error for a launch that spans hosts whose `MASTER_ADDR` is a name this host resolves
/// to a loopback address (Debian and Ubuntu map the host's own name to 127.0.1.1 in
/// /etc/hosts): rank 0 would listen where no other host reaches it, and the other hosts'
/// ranks wait out their timeout. A loopback address given as such (`127.0.0.1`, `localhost`)
/// is the user's to mean.
fn loopback_across_hosts(env: &LaunchEnv, root: SocketAddr) -> Option<CollectiveError> {
    let host = env.master_addr.as_str();
    let literal = host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok();
    (env.spans_hosts == Some(true) && root.ip().is_loopback() && !literal).then(|| {
        CollectiveError::invalid(format!(
            "MASTER_ADDR={host} resolves to {} on this host, a loopback address (a host name mapped to 127.0.1.1 in \
             /etc/hosts, as Debian and Ubuntu do), while the launch spans hosts: no other host could reach rank 0 \
             there",
            root.ip()
        ))
        .with_hint(
            "set MASTER_ADDR to an address of rank 0's host that the other hosts reach (its IP address), the same \
             in every process, and RUCCL_SOCKET_IFNAME to the interface the hosts share",
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A host name that resolves to loopback, in a launch across hosts: refused at once.
    #[test]
    fn a_master_name_on_loopback_across_hosts_is_refused() {
        let env = |addr: &str, local: &str| {
            let vars: std::collections::HashMap<String, String> = [
                ("RANK", "0"),
                ("WORLD_SIZE", "4"),
                ("LOCAL_WORLD_SIZE", local),
                ("MASTER_ADDR", addr),
                ("MASTER_PORT", "29500"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            LaunchEnv::from_map(&vars).unwrap()
        };
        let lo: SocketAddr = "127.0.1.1:29500".parse().unwrap();
        let e = loopback_across_hosts(&env("vm", "2"), lo).unwrap();
        assert!(e.to_string().contains("MASTER_ADDR=vm resolves to 127.0.1.1 on this host"), "{e}");
        // One host, or loopback given as such: the user's to mean.
        assert!(loopback_across_hosts(&env("vm", "4"), lo).is_none());
        assert!(loopback_across_hosts(&env("localhost", "2"), lo).is_none());
        assert!(loopback_across_hosts(&env("127.0.0.1", "2"), lo).is_none());
        assert!(loopback_across_hosts(&env("vm", "2"), "10.0.0.1:29500".parse().unwrap()).is_none());
    }

    /// Rank 0 of a launch whose MASTER_ADDR is no address of its host: when the others never
    /// come, its timeout says so (a stranger's review: it said only "rank(s) 1 never called").
    #[test]
    fn rank_0_names_a_master_addr_that_is_not_its_own() {
        assert!(not_here("127.0.0.1", "127.0.0.1:29500".parse().unwrap()).is_none());
        let far: SocketAddr = "192.0.2.99:29500".parse().unwrap();
        if std::net::UdpSocket::bind(SocketAddr::new(far.ip(), 0)).is_ok() {
            return; // a host that owns TEST-NET-1: nothing to show
        }
        let port = crate::launch::free_port().unwrap();
        let vars: std::collections::HashMap<String, String> = [
            ("RANK", "0".to_string()),
            ("WORLD_SIZE", "2".to_string()),
            ("MASTER_ADDR", "192.0.2.99".to_string()),
            ("MASTER_PORT", port.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let env = LaunchEnv::from_map(&vars).unwrap();
        let config = CommConfig::default().with_timeout(std::time::Duration::from_millis(300));
        let e = Communicator::from_launch(crate::HostDevice::default(), &env, config).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Timeout, "{e}");
        assert!(e.to_string().contains("MASTER_ADDR=192.0.2.99 (192.0.2.99) is not an address of this host"), "{e}");
    }

    #[test]
    fn a_link_local_master_without_a_zone_is_refused_naming_it() {
        let e = resolve("fe80::1", 29500).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("MASTER_ADDR=fe80::1 is a link-local IPv6 address without a zone"), "{e}");
        assert_eq!(resolve("127.0.0.1", 29500).unwrap(), "127.0.0.1:29500".parse().unwrap());
        assert_eq!(resolve("::1", 29500).unwrap(), "[::1]:29500".parse().unwrap());
        assert!(resolve("fe80::1%1", 29500).is_ok_and(|a| matches!(a, SocketAddr::V6(v) if v.scope_id() == 1)));
    }
}
