//! Several nodes of the peer API: an orchestrator in the parent, each node a child process
//! with two in-process peers (`node` role); and a node whose partner never comes (`lonely`).
//! Each case that moves data runs whole and pipelined by chunk (`MP_CHUNK`), and `chunks`
//! sweeps lengths around the pipelining threshold.

use std::time::{Duration, Instant};

use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId, ReduceOperation, Strategy};
use ruccl::{ErrorKind, HostDevice, Tensor};

use super::{Kids, N, Transport, var};

/// The config every peer of every node passes (`MP_GLOBAL`, `MP_PORT`, `MP_TIMEOUT_MS`).
fn config() -> CollectiveConfig {
    let ms: u64 = var("MP_TIMEOUT_MS").parse().unwrap();
    let config = CollectiveConfig::default()
        .with_num_devices(2)
        .with_num_nodes(2)
        .with_global_address(var("MP_GLOBAL"))
        .with_node_address("127.0.0.1")
        .with_data_service_port(var("MP_PORT").parse().unwrap())
        .with_global_all_reduce_strategy(Strategy::Ring)
        .with_global_broadcast_strategy(Strategy::Tree(2))
        .with_timeout(Duration::from_millis(ms));
    // `MP_CHUNK` bytes pipelines all_reduce, reduce and broadcast from two chunks (unset: the
    // library's defaults, broadcast by 4 MiB chunks and the others whole).
    match var("MP_CHUNK").parse() {
        Ok(bytes) => config.with_pipeline_chunk_bytes(bytes),
        Err(_) => config,
    }
}

fn peers() -> Vec<u64> {
    var("MP_PEERS").split(',').map(|p| p.parse().unwrap()).collect()
}

fn vec_of(t: Tensor<HostDevice>) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

/// One peer of a node: every operation, values checked (peers 0..4 over two nodes).
fn node_peer(id: u64) -> Result<(), String> {
    let e = |e: ruccl::CollectiveError| e.to_string();
    let (peer, dev) = (PeerId::new(id), HostDevice::new(id as u32));
    api::register::<HostBackend>(peer, dev, config()).map_err(e)?;
    let ramp: Vec<f32> = (0..N).map(|i| ((id + 1) * (i as u64 + 1)) as f32).collect();
    let want_sum: Vec<f32> = (0..N).map(|i| (10 * (i + 1)) as f32).collect();
    let t = || Tensor::from_slice(&dev, &ramp, &[N]).unwrap();
    let sum = api::all_reduce::<HostBackend>(peer, t(), ReduceOperation::Sum).map_err(e)?;
    check("all_reduce sum", id, vec_of(sum), &want_sum)?;
    let four = Tensor::from_slice(&dev, &[4.0 * (id + 1) as f32; 3], &[3]).unwrap();
    let mean = api::all_reduce::<HostBackend>(peer, four, ReduceOperation::Mean).map_err(e)?;
    check("all_reduce mean", id, vec_of(mean), &[10.0; 3])?;
    // An f16 mean pre-multiplies its input: pipelined by chunk, several chunks are in flight
    // at once, each with an input of its own (they shared one: 3/4 of the elements wrong).
    let halves: Vec<half::f16> = ramp.iter().map(|&v| half::f16::from_f32(v)).collect();
    let h = Tensor::from_slice(&dev, &halves, &[N]).unwrap();
    let got = api::all_reduce::<HostBackend>(peer, h, ReduceOperation::Mean).map_err(e)?;
    let got: Vec<f32> = got.to_vec::<half::f16>().unwrap().iter().map(|v| v.to_f32()).collect();
    check("all_reduce f16 mean", id, got, &(0..N).map(|i| 2.5 * (i + 1) as f32).collect::<Vec<_>>())?;
    for root in [3u64, 0, 2, 1] {
        let got = api::reduce::<HostBackend>(peer, t(), ReduceOperation::Sum, PeerId::new(root)).map_err(e)?;
        match (got, id == root) {
            (Some(g), true) => check(&format!("reduce to {root}"), id, vec_of(g), &want_sum)?,
            (None, false) => {}
            (g, _) => return Err(format!("peer {id}: reduce to {root} returned {:?}", g.map(vec_of))),
        }
    }
    for sender in [1u64, 2, 0, 3] {
        let sent: Vec<f32> = (0..N).map(|i| sender as f32 + 0.5 + i as f32).collect();
        let mine = (id == sender).then(|| Tensor::from_slice(&dev, &sent, &[1, N]).unwrap());
        let got = api::broadcast::<HostBackend>(peer, mine).map_err(e)?;
        if got.shape() != [1, N] {
            return Err(format!("peer {id}: broadcast from {sender} has shape {:?}", got.shape()));
        }
        check(&format!("broadcast from {sender}"), id, vec_of(got), &sent)?;
    }
    // 10 MiB from node b: three chunks by default (4 MiB), whole with `MP_CHUNK` = 0.
    let big: Vec<f32> = (0..10 << 18).map(|i| (i % 1000) as f32).collect();
    let mine = (id == 2).then(|| Tensor::from_slice(&dev, &big, &[big.len()]).unwrap());
    check("broadcast of 10 MiB from 2", id, vec_of(api::broadcast::<HostBackend>(peer, mine).map_err(e)?), &big)?;
    api::barrier::<HostBackend>(peer).map_err(e)?;
    // Every peer's [2, 3] block, in peer-id order across both nodes.
    let mine: Vec<f32> = (0..6).map(|i| (10 * id + i) as f32).collect();
    let block = || Tensor::from_slice(&dev, &mine, &[2, 3]).unwrap();
    let all = api::all_gather::<HostBackend>(peer, block()).map_err(e)?;
    let want: Vec<f32> = (0..4u64).flat_map(|p| (0..6).map(move |i| (10 * p + i) as f32)).collect();
    if all.shape() != [8, 3] {
        return Err(format!("peer {id}: all_gather across nodes has shape {:?}", all.shape()));
    }
    check("all_gather", id, vec_of(all), &want)?;
    // Element j of every input is j + 100 * peer: block k (rows 2k, 2k + 1) goes to peer k.
    let input: Vec<f32> = (0..24).map(|j| (j + 100 * id) as f32).collect();
    let t24 = Tensor::from_slice(&dev, &input, &[8, 3]).unwrap();
    let got = api::reduce_scatter::<HostBackend>(peer, t24, ReduceOperation::Sum).map_err(e)?;
    let want: Vec<f32> = (6 * id..6 * id + 6).map(|j| (4 * j + 600) as f32).collect();
    if got.shape() != [2, 3] {
        return Err(format!("peer {id}: reduce_scatter across nodes has shape {:?}", got.shape()));
    }
    check("reduce_scatter sum", id, vec_of(got), &want)?;
    let t8 = Tensor::from_slice(&dev, &[2.0 * (id + 1) as f32; 8], &[8]).unwrap();
    let mean = api::reduce_scatter::<HostBackend>(peer, t8, ReduceOperation::Mean).map_err(e)?;
    check("reduce_scatter mean", id, vec_of(mean), &[5.0; 2])?;
    api::all_reduce::<HostBackend>(peer, t(), ReduceOperation::Sum).map_err(e)?;
    // 6 rows split among 2 peers of a node, but not among the 4 of the registration.
    let bad = Tensor::from_slice(&dev, &[1.0f32; 6], &[6]).unwrap();
    match api::reduce_scatter::<HostBackend>(peer, bad, ReduceOperation::Sum) {
        Err(err) if err.kind() == ErrorKind::InvalidArgument && err.to_string().contains("among 4 peers") => Ok(()),
        other => Err(format!("peer {id}: reduce_scatter of 6 rows among 4 peers gave {:?}", other.map(|_| ()))),
    }
}

/// all_reduce, reduce and broadcast of lengths below, at and above two chunks of 4 f32
/// (`MP_CHUNK` = 16), not divisible by the chunk, to and from every root: bit-exact sums of
/// small integers, the same as the whole op's.
fn chunks_peer(id: u64) -> Result<(), String> {
    let e = |e: ruccl::CollectiveError| e.to_string();
    let (peer, dev) = (PeerId::new(id), HostDevice::new(id as u32));
    api::register::<HostBackend>(peer, dev, config()).map_err(e)?;
    for n in [0usize, 1, 7, 8, 9, 12, 13, 37, 64] {
        let mine: Vec<f32> = (0..n).map(|i| ((id + 1) * (i as u64 % 7 + 1)) as f32).collect();
        let want: Vec<f32> = (0..n).map(|i| (10 * (i % 7 + 1)) as f32).collect();
        let t = || Tensor::from_slice(&dev, &mine, &[n]).unwrap();
        let sum = api::all_reduce::<HostBackend>(peer, t(), ReduceOperation::Sum).map_err(e)?;
        check(&format!("all_reduce of {n}"), id, vec_of(sum), &want)?;
        let mean = api::all_reduce::<HostBackend>(peer, t(), ReduceOperation::Mean).map_err(e)?;
        let want_mean: Vec<f32> = (0..n).map(|i| 2.5 * (i % 7 + 1) as f32).collect();
        check(&format!("all_reduce mean of {n}"), id, vec_of(mean), &want_mean)?;
        for root in [3u64, 0, 1, 2] {
            let got = api::reduce::<HostBackend>(peer, t(), ReduceOperation::Sum, PeerId::new(root)).map_err(e)?;
            match (got, id == root) {
                (Some(g), true) => check(&format!("reduce of {n} to {root}"), id, vec_of(g), &want)?,
                (None, false) => {}
                (g, _) => return Err(format!("peer {id}: reduce of {n} to {root} returned {:?}", g.map(vec_of))),
            }
        }
        for sender in [2u64, 0, 3, 1] {
            let sent: Vec<f32> = (0..n).map(|i| (100 * sender + i as u64) as f32).collect();
            let mine = (id == sender).then(|| Tensor::from_slice(&dev, &sent, &[n]).unwrap());
            let got = api::broadcast::<HostBackend>(peer, mine).map_err(e)?;
            check(&format!("broadcast of {n} from {sender}"), id, vec_of(got), &sent)?;
        }
    }
    api::finish_collective::<HostBackend>(peer).map_err(e)
}

pub(super) fn chunks_child() -> Result<(), String> {
    threads(chunks_peer)
}

fn check(what: &str, id: u64, got: Vec<f32>, want: &[f32]) -> Result<(), String> {
    if got == want { Ok(()) } else { Err(format!("peer {id}: {what}: got {got:?}, want {want:?}")) }
}

fn threads(body: fn(u64) -> Result<(), String>) -> Result<(), String> {
    let hs: Vec<_> = peers().into_iter().map(|p| std::thread::spawn(move || body(p))).collect();
    hs.into_iter().try_for_each(|h| h.join().map_err(|_| "a peer panicked".to_string())?)
}

pub(super) fn node_child() -> Result<(), String> {
    threads(node_peer)
}

/// Its partner node never comes: both peers fail with the orchestrator's `Timeout`, in time.
pub(super) fn lonely_child() -> Result<(), String> {
    threads(|id| {
        let start = Instant::now();
        let err = api::register::<HostBackend>(PeerId::new(id), HostDevice::new(id as u32), config())
            .err()
            .ok_or("register succeeded without the other node")?;
        let took = start.elapsed();
        let msg = err.to_string();
        if !msg.contains("only 1 of 2 nodes arrived") || took > Duration::from_millis(2500) {
            return Err(format!("peer {id} after {took:?}: {:?} {msg}", err.kind()));
        }
        if id == 0 && err.kind() != ErrorKind::Timeout {
            return Err(format!("the leader got {:?}: {msg}", err.kind()));
        }
        println!("peer {id}: {:?} after {took:?}: {msg}", err.kind());
        Ok(())
    })
}

/// Two nodes whose configs differ (`MP_TREE` set on one: its global all_reduce strategy is a
/// tree, the other's a ring): every peer of both fails to register at once with `Mismatch`
/// naming the difference. The node that reached the orchestrator first used to wait out its
/// whole timeout, told only then that the other had been refused.
pub(super) fn config_differs_child() -> Result<(), String> {
    threads(|id| {
        let config = match var("MP_TREE").as_str() {
            "" => config(),
            _ => config().with_global_all_reduce_strategy(Strategy::Tree(2)),
        };
        let start = Instant::now();
        let err = api::register::<HostBackend>(PeerId::new(id), HostDevice::new(id as u32), config)
            .err()
            .ok_or("register succeeded with configs that differ between the nodes")?;
        let (took, msg) = (start.elapsed(), err.to_string());
        if !msg.contains("differs from")
            || !msg.contains("global all_reduce strategy")
            || took > Duration::from_secs(10)
        {
            return Err(format!("peer {id} after {took:?}: {:?} {msg}", err.kind()));
        }
        if id % 2 == 0 && err.kind() != ErrorKind::Mismatch {
            return Err(format!("leader {id} got {:?}: {msg}", err.kind()));
        }
        println!("peer {id}: {:?} after {took:?}: {msg}", err.kind());
        Ok(())
    })
}

/// Peer 3 (node of peers 2, 3) stalls past the timeout before an all_reduce: every peer of
/// the other node is told about that node (or peer 3), never blamed on its own healthy
/// leader. The non-leader's wait for its leader and the leader's wait among the leaders
/// ended at one deadline, and the non-leader's often came first (a stranger's review: 8 runs
/// in 14).
pub(super) fn stall_child() -> Result<(), String> {
    threads(|id| {
        let (peer, dev) = (PeerId::new(id), HostDevice::new(id as u32));
        api::register::<HostBackend>(peer, dev, config()).map_err(|e| e.to_string())?;
        api::barrier::<HostBackend>(peer).map_err(|e| e.to_string())?;
        if id == 3 {
            std::thread::sleep(Duration::from_millis(2_500));
        }
        let t = Tensor::from_slice(&dev, &[1.0f32; 4], &[4]).unwrap();
        let err = api::all_reduce::<HostBackend>(peer, t, ReduceOperation::Sum)
            .err()
            .ok_or(format!("peer {id}: all_reduce succeeded with peer 3 stalled"))?;
        let msg = err.to_string();
        if id < 2 && !(msg.contains("peers 2, 3") || msg.contains("peer 3")) {
            return Err(format!("peer {id} was not told about the stalled node: {:?} {msg}", err.kind()));
        }
        Ok(())
    })
}

/// Two nodes of one host given one data_service_port: the node that cannot listen says so, at
/// once, with where the port comes from (it named MASTER_ADDR:MASTER_PORT and a second RANK 0,
/// launchers' variables a peer-API user never set); the other node's peers time out waiting
/// for it at the orchestrator.
pub(super) fn same_port_child() -> Result<(), String> {
    threads(|id| {
        let start = Instant::now();
        let err = api::register::<HostBackend>(PeerId::new(id), HostDevice::new(id as u32), config())
            .err()
            .ok_or("register succeeded with the other node on the same data_service_port")?;
        let (took, msg) = (start.elapsed(), err.to_string());
        println!("peer {id}: {:?} after {took:?}: {msg}", err.kind());
        let said = match err.kind() {
            ErrorKind::Io => {
                msg.contains("cannot listen at node_address:data_service_port")
                    && msg.contains("its own data_service_port")
                    && !msg.contains("MASTER_PORT")
            }
            ErrorKind::Timeout => msg.contains("only 1 of 2 nodes arrived"),
            _ => false,
        };
        if !said || took > Duration::from_secs(8) {
            return Err(format!("peer {id} after {took:?}: {:?} {msg}", err.kind()));
        }
        Ok(())
    })
}

/// The nodes call all_reduce with different lengths (`MP_LEN`): the leaders' all_reduce
/// fails, and every peer of both nodes gets the `Mismatch`, relayed by its leader.
pub(super) fn mismatch_child() -> Result<(), String> {
    threads(|id| {
        let (peer, dev) = (PeerId::new(id), HostDevice::new(id as u32));
        api::register::<HostBackend>(peer, dev, config()).map_err(|e| e.to_string())?;
        let n: usize = var("MP_LEN").parse().unwrap();
        let t = Tensor::from_slice(&dev, &vec![1.0f32; n], &[n]).unwrap();
        let start = Instant::now();
        let err = api::all_reduce::<HostBackend>(peer, t, ReduceOperation::Sum)
            .err()
            .ok_or("all_reduce of different lengths across nodes succeeded")?;
        let (took, msg) = (start.elapsed(), err.to_string());
        if err.kind() != ErrorKind::Mismatch || took > Duration::from_secs(5) {
            return Err(format!("peer {id} after {took:?}: {:?} {msg}", err.kind()));
        }
        let again = api::barrier::<HostBackend>(peer).map_err(|e| e.kind());
        if again.is_ok() {
            return Err(format!("peer {id}: the registration still works after a failed all_reduce"));
        }
        println!("peer {id}: {msg}");
        Ok(())
    })
}

/// A node that registers, passes a barrier, says so in `MP_MARK`, and waits to be killed.
pub(super) fn hier_victim_child() -> Result<(), String> {
    threads(|id| {
        let peer = PeerId::new(id);
        api::register::<HostBackend>(peer, HostDevice::new(id as u32), config()).map_err(|e| e.to_string())?;
        api::barrier::<HostBackend>(peer).map_err(|e| e.to_string())?;
        if id == 2 {
            std::fs::File::create(var("MP_MARK")).map_err(|e| e.to_string())?;
        }
        std::thread::sleep(super::CHILD_DEADLINE);
        Ok(())
    })
}

/// The surviving node all-reduces until the other node's process is killed: both of its
/// peers (the leader, which meets the dead node, and the other peer, which hears it from its
/// leader) fail with `PeerLost` naming the lost node and its peers, well before the timeout
/// (20 s), and the
/// registration stays failed.
pub(super) fn hier_survivor_child() -> Result<(), String> {
    threads(|id| {
        let (peer, dev) = (PeerId::new(id), HostDevice::new(id as u32));
        api::register::<HostBackend>(peer, dev, config()).map_err(|e| e.to_string())?;
        api::barrier::<HostBackend>(peer).map_err(|e| e.to_string())?;
        let started = Instant::now();
        let t = || Tensor::from_slice(&dev, &[1.0f32; 1 << 12], &[1 << 12]).unwrap();
        let mut result = Ok(());
        for _ in 0..100_000 {
            if let Err(e) = api::all_reduce::<HostBackend>(peer, t(), ReduceOperation::Sum) {
                result = Err(e);
                break;
            }
        }
        let Err(e) = result else { return Err(format!("peer {id}: every all_reduce succeeded")) };
        let (took, msg) = (started.elapsed(), e.to_string());
        println!("peer {id} after {took:?}: {:?} {msg}", e.kind());
        // Node ids follow the data addresses (random ports here): name the lost node by peers.
        if e.kind() != ErrorKind::PeerLost
            || !msg.contains("is node 0: peers 2, 3") && !msg.contains("is node 1: peers 2, 3")
        {
            return Err(format!(
                "peer {id}: expected PeerLost naming the node of peers 2, 3, got {:?}: {msg}",
                e.kind()
            ));
        }
        if took > Duration::from_secs(12) {
            return Err(format!("peer {id}: PeerLost came only after {took:?}"));
        }
        if api::barrier::<HostBackend>(peer).is_ok() {
            return Err(format!("peer {id}: the registration still works after losing a node"));
        }
        Ok(())
    })
}

fn free_port() -> u16 {
    ruccl::launch::free_port().expect("a free port")
}

/// `e` with all_reduce, reduce and broadcast pipelined by chunks of `bytes` (0: never).
fn chunked(mut e: Vec<(&'static str, String)>, bytes: usize) -> Vec<(&'static str, String)> {
    e.push(("MP_CHUNK", bytes.to_string()));
    e
}

fn env(global: std::net::SocketAddr, peers: &str, ms: u64) -> Vec<(&'static str, String)> {
    vec![
        ("MP_GLOBAL", global.to_string()),
        ("MP_PORT", free_port().to_string()),
        ("MP_PEERS", peers.to_string()),
        ("MP_TIMEOUT_MS", ms.to_string()),
    ]
}

#[test]
fn two_nodes_of_two_peers_all_reduce_reduce_broadcast() {
    let orch = ruccl::orchestrator::Orchestrator::start("127.0.0.1:0", 2).unwrap();
    let mut kids = Kids::new(Transport::Shm);
    kids.spawn("node-a", "node", &env(orch.local_addr(), "0,1", 15_000));
    kids.spawn("node-b", "node", &env(orch.local_addr(), "2,3", 15_000));
    kids.wait(&[]);
}

#[test]
fn two_nodes_over_tcp() {
    let orch = ruccl::orchestrator::Orchestrator::start("127.0.0.1:0", 2).unwrap();
    let mut kids = Kids::new(Transport::Tcp);
    kids.spawn("node-a", "node", &env(orch.local_addr(), "0,1", 15_000));
    kids.spawn("node-b", "node", &env(orch.local_addr(), "2,3", 15_000));
    kids.wait(&[]);
}

/// Every operation with all_reduce, reduce and broadcast pipelined by chunks of 4 f32 (`N` = 37: ten
/// chunks, the last of one element).
#[test]
fn two_nodes_pipelined_by_chunk() {
    let orch = ruccl::orchestrator::Orchestrator::start("127.0.0.1:0", 2).unwrap();
    let mut kids = Kids::new(Transport::Shm);
    kids.spawn("node-a", "node", &chunked(env(orch.local_addr(), "0,1", 15_000), 16));
    kids.spawn("node-b", "node", &chunked(env(orch.local_addr(), "2,3", 15_000), 16));
    kids.wait(&[]);
}

/// Lengths around the pipelining threshold, over shared memory and TCP (interleaved ids).
#[test]
fn two_nodes_lengths_around_the_chunk() {
    for (transport, a, b) in [(Transport::Shm, "0,1", "2,3"), (Transport::Tcp, "0,2", "1,3")] {
        let orch = ruccl::orchestrator::Orchestrator::start("127.0.0.1:0", 2).unwrap();
        let mut kids = Kids::new(transport);
        kids.spawn("node-a", "chunks", &chunked(env(orch.local_addr(), a, 15_000), 16));
        kids.spawn("node-b", "chunks", &chunked(env(orch.local_addr(), b, 15_000), 16));
        kids.wait(&[]);
    }
}

/// Whole (5 vs 6 elements) and pipelined (37 vs 38 by chunks of 4: the leaders' step on
/// the first chunk disagrees, as the shape digest every chunk carries is the whole tensor's,
/// while the node's other chunks are queued on both communicators).
#[test]
fn a_mismatch_between_nodes_fails_every_peer() {
    for (a, b, chunk) in [("5", "6", 0), ("37", "38", 16)] {
        let orch = ruccl::orchestrator::Orchestrator::start("127.0.0.1:0", 2).unwrap();
        let mut kids = Kids::new(Transport::Shm);
        for (name, peers, len) in [("node-a", "0,1", a), ("node-b", "2,3", b)] {
            let mut e = chunked(env(orch.local_addr(), peers, 10_000), chunk);
            e.push(("MP_LEN", len.to_string()));
            kids.spawn(name, "mismatch", &e);
        }
        kids.wait(&[]);
    }
}

#[test]
fn a_config_mismatch_between_nodes_fails_both_at_once() {
    let orch = ruccl::orchestrator::Orchestrator::start("127.0.0.1:0", 2).unwrap();
    let mut kids = Kids::new(Transport::Shm);
    kids.spawn("node-a", "config_differs", &env(orch.local_addr(), "0,1", 60_000));
    std::thread::sleep(Duration::from_millis(300));
    let mut b = env(orch.local_addr(), "2,3", 60_000);
    b.push(("MP_TREE", "1".to_string()));
    kids.spawn("node-b", "config_differs", &b);
    kids.wait(&[]);
}

#[test]
fn a_stalled_peer_is_named_on_the_other_node() {
    for _ in 0..3 {
        let orch = ruccl::orchestrator::Orchestrator::start("127.0.0.1:0", 2).unwrap();
        let mut kids = Kids::new(Transport::Shm);
        kids.spawn("node-a", "stall", &env(orch.local_addr(), "0,1", 1_000));
        kids.spawn("node-b", "stall", &env(orch.local_addr(), "2,3", 1_000));
        kids.wait(&[]);
    }
}

#[test]
fn two_nodes_on_one_data_port_say_so() {
    let orch = ruccl::orchestrator::Orchestrator::start("127.0.0.1:0", 2).unwrap();
    let mut kids = Kids::new(Transport::Shm);
    let a = env(orch.local_addr(), "0,1", 3_000);
    let mut b = env(orch.local_addr(), "2,3", 3_000);
    b.iter_mut().filter(|(k, _)| *k == "MP_PORT").for_each(|e| e.1 = a[1].1.clone());
    kids.spawn("node-a", "same_port", &a);
    kids.spawn("node-b", "same_port", &b);
    kids.wait(&[]);
}

#[test]
fn a_node_that_never_comes_is_a_timeout() {
    let orch = ruccl::orchestrator::Orchestrator::start("127.0.0.1:0", 2).unwrap();
    let mut kids = Kids::new(Transport::Shm);
    kids.spawn("node-a", "lonely", &env(orch.local_addr(), "0,1", 2_000));
    kids.wait(&[]);
}

#[test]
fn a_killed_node_is_named_on_every_peer_of_the_others() {
    killed_node("hier-mark", None);
}

/// The same with the survivor's all_reduces pipelined (16 KiB by chunks of 1 KiB): the lost
/// node ends every chunk's ops on both peers, with the same error.
#[test]
fn a_killed_node_ends_a_pipelined_all_reduce() {
    killed_node("hier-mark-chunks", Some(1024));
}

/// Node b is killed once it passed its barrier; node a's peers must name it (`chunk`: the
/// nodes' pipelining chunk in bytes, if any).
fn killed_node(mark: &str, chunk: Option<usize>) {
    let orch = ruccl::orchestrator::Orchestrator::start("127.0.0.1:0", 2).unwrap();
    let mark = super::kids::Mark::new(mark);
    let mut kids = Kids::new(Transport::Shm);
    let with_mark = |peers: &str| {
        let e = env(orch.local_addr(), peers, 20_000);
        let mut e = match chunk {
            Some(c) => chunked(e, c),
            None => e,
        };
        e.push(mark.env());
        e
    };
    kids.spawn("node-a", "hier_survivor", &with_mark("0,1"));
    kids.spawn("node-b", "hier_victim", &with_mark("2,3"));
    mark.wait(Duration::from_secs(60), "the victim node never passed its barrier");
    std::thread::sleep(Duration::from_millis(200));
    kids.kill("node-b");
    kids.wait(&["node-b"]);
}

/// Nodes whose peer ids interleave (0, 2 and 1, 3): all_gather's and reduce_scatter's blocks
/// follow peer ids, so the leaders reorder them around their step.
#[test]
fn nodes_with_interleaved_peer_ids() {
    let orch = ruccl::orchestrator::Orchestrator::start("127.0.0.1:0", 2).unwrap();
    let mut kids = Kids::new(Transport::Shm);
    kids.spawn("node-a", "node", &env(orch.local_addr(), "0,2", 15_000));
    kids.spawn("node-b", "node", &env(orch.local_addr(), "1,3", 15_000));
    kids.wait(&[]);
}
