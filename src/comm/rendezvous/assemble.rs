//! The ranks of one process that joined a group spanning processes meet here with the
//! table, and the last to arrive builds the process's side of the TCP mesh and the group's
//! shared state for all of them.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::proto::Table;
use super::{Instance, Shared, listener, registry};
use crate::config::{CommConfig, deadline_after};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::transport::{Link, tcp};
use crate::types::Rank;
use crate::unique_id::UniqueId;

struct Assembly {
    /// Ranks of this process in the table.
    expected: usize,
    arrived: Members,
    /// Whether every arrival's device keeps its memory on the host.
    host_memory: bool,
    /// Arrivals that have not taken the result yet.
    left: usize,
    result: Option<Result<Arc<Shared>>>,
}

type Key = ([u8; 16], u128);

/// The ranks of this process, each with its device (type-erased).
type Members = Vec<(Rank, Arc<dyn Any + Send + Sync>)>;

static ASSEMBLIES: LazyLock<(Mutex<HashMap<Key, Assembly>>, Condvar)> = LazyLock::new(Default::default);

fn assemblies() -> MutexGuard<'static, HashMap<Key, Assembly>> {
    ASSEMBLIES.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// The advice for a group that met but could not connect its ranks: nothing was created.
const CONNECT_FAILED: &str = "check that every process can reach the others' addresses (RUCCL_SOCKET_IFNAME, \
     firewalls) and is running (the peer named above may have stopped or failed: see its output); nothing was \
     created: start every rank again";

/// The least time a join whose rendezvous completed near its deadline keeps for connecting
/// (which takes milliseconds when every rank is alive): the whole join takes its timeout and
/// at most this much more.
pub(super) const SETUP_MIN: Duration = Duration::from_secs(2);

/// Waits for the other ranks of this process in `table`, then returns the group they share.
/// `host_memory`: every device of `members` keeps its memory on the host (see
/// [`tcp::setup::process_mesh`]). `deadline`: the join's, which setting up the connections
/// keeps too, with at least [`SETUP_MIN`] (or the timeout, if less) left for them.
///
/// # Errors
/// As [`tcp::setup::process_mesh`]; `Timeout` when the process's other ranks do not arrive.
pub(super) fn assemble(
    id: &UniqueId,
    world: usize,
    table: &Table,
    members: &[(Rank, Arc<dyn Any + Send + Sync>)],
    host_memory: bool,
    config: &CommConfig,
    deadline: Instant,
) -> Result<Arc<Shared>> {
    let me = listener::process_token();
    let local: Vec<bool> = table.procs.iter().map(|p| p.token == me).collect();
    let key = (id.comm_bytes(), table.nonce);
    let deadline = deadline.max(deadline_after(SETUP_MIN.min(config.timeout())));
    let mut g = assemblies();
    let a = g.entry(key).or_insert_with(|| {
        let expected = local.iter().filter(|&&l| l).count();
        Assembly { expected, arrived: Vec::new(), host_memory: true, left: expected, result: None }
    });
    a.arrived.extend(members.iter().cloned());
    a.host_memory &= host_memory;
    if a.arrived.len() >= a.expected {
        let arrived = std::mem::take(&mut a.arrived);
        let host_memory = a.host_memory;
        drop(g);
        let built = build(id, world, table, &local, (arrived, host_memory), config, deadline)
            .map_err(|e| e.with_op("Communicator::new").or_hint(CONNECT_FAILED));
        if built.is_err() {
            Instance::unmark(&mut registry(), id, table.nonce);
        }
        g = assemblies();
        if let Some(a) = g.get_mut(&key) {
            a.result = Some(built);
        }
        ASSEMBLIES.1.notify_all();
    }
    loop {
        if let Some(a) = g.get_mut(&key)
            && let Some(r) = a.result.clone()
        {
            a.left = a.left.saturating_sub(members.len());
            if a.left == 0 {
                // Not the last reference: `r` holds one.
                g.remove(&key);
            }
            return r;
        }
        let now = Instant::now();
        if now >= deadline {
            let ranks: Vec<String> = (0..world).filter(|&r| local[r]).map(|r| r.to_string()).collect();
            return Err(CollectiveError::new(
                ErrorKind::Timeout,
                format!(
                    "the ranks of this process ({}) did not all finish joining communicator {}",
                    ranks.join(", "),
                    id.short()
                ),
            )
            .with_op("Communicator::new")
            .with_hint(CONNECT_FAILED));
        }
        g = ASSEMBLIES.1.wait_timeout(g, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
    }
}

/// The process's side of the group: its ranks' TCP endpoints and the shared state.
fn build(
    id: &UniqueId,
    world: usize,
    table: &Table,
    local: &[bool],
    (arrived, host_memory): (Members, bool),
    config: &CommConfig,
    deadline: Instant,
) -> Result<Arc<Shared>> {
    // Frames name this instance of the id: a later group reusing the id never reads them.
    let mut comm = id.comm_bytes();
    comm.iter_mut().zip(table.nonce.to_le_bytes()).for_each(|(c, n)| *c ^= n);
    let addrs: Vec<_> = table.procs.iter().map(|p| p.addr).collect();
    let mesh = tcp::setup::process_mesh(comm, world, &addrs, local, config.peer_silence(), host_memory, deadline)?;
    let mut devices: Vec<Arc<dyn Any + Send + Sync>> = (0..world).map(|_| Arc::new(()) as _).collect();
    for (r, d) in arrived {
        devices[r] = d;
    }
    let procs = table.procs.iter().map(|p| p.token).collect();
    let instance = Instance::claim(&mut registry(), id, table.nonce, procs);
    let mut shared = Shared::new(id.clone(), world, config.clone(), instance, devices, Link::Tcp(Arc::new(mesh)));
    shared.board = super::super::flight::Board::with_local(local, config.warn_after());
    // A peer's timeout asks this process's ranks what they are doing (over the connection).
    let answers = shared.board.view();
    shared.link.set_flight(&tcp::FlightSource(Arc::new(move |r| answers.answer(r))));
    Ok(Arc::new(shared))
}
