//! The peer API over two nodes against the same four peers in one node: all_reduce (f32 sum)
//! of 4 KiB and 64 MiB per peer, 2 processes x 2 peers (`with_num_nodes(2)`: each node
//! reduces in-process, its leader runs the global step with the other node's leader, over
//! shared memory or TCP, then broadcasts back inside the node) against 4 peers as threads of
//! one process (`with_num_devices(4)`, no nodes). On one host both are the same machine's
//! memory: the figure is the hierarchy's cost, not a network's.
//!
//! Run: `cargo bench -p ruccl-bench --features orchestrator --bench hier` (the orchestrator
//! runs in this process; the nodes are this program again, `RUCCL_HIER_BENCH_ROLE=node`).
//! `RUCCL_SHM_DISABLE=1` puts the leaders' step on TCP; `RUCCL_HIER_BENCH_CHUNK=<bytes>` sets
//! the nodes' pipelining chunk (`with_pipeline_chunk_bytes`; 0: the stages whole, one after
//! the other); `RUCCL_HIER_BENCH_LARGE=1` adds 256 MiB per peer; `RUCCL_HIER_BENCH_OP=broadcast`
//! times broadcast from peer 0 instead. Times are each node's slowest peer's mean per op, the
//! slower node's; algbw = bytes / time, busbw = algbw x 2(n-1)/n (n = 4) for all_reduce and
//! algbw for broadcast, decimal GB/s, as nccl-tests reports them.

#![allow(missing_docs, clippy::expect_used, clippy::unwrap_used, clippy::panic)] // a benchmark harness: failing loudly is right

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId, ReduceOperation};
use ruccl::{DType, HostDevice, Tensor};

const ROLE: &str = "RUCCL_HIER_BENCH_ROLE";
const PEERS: usize = 4;
const TIMEOUT: Duration = Duration::from_secs(120);

/// (bytes per peer, warm-up ops, timed ops).
const SIZES: [(usize, u32, u32); 3] = [(4096, 200, 2000), (64 << 20, 2, 10), (256 << 20, 1, 4)];

fn main() {
    if std::env::var(ROLE).is_ok() {
        return node();
    }
    let what = if broadcast() { "broadcast f32 from peer 0" } else { "all_reduce f32 sum" };
    println!("# {what}, {PEERS} peers; us per op, algbw / busbw GB/s");
    println!("{:>10}  {:>26}  {:>26}", "bytes", "flat (4 threads, 1 node)", "2 processes x 2 peers");
    let large = std::env::var("RUCCL_HIER_BENCH_LARGE").is_ok_and(|v| v == "1");
    for (bytes, warm, iters) in SIZES.into_iter().filter(|&(b, ..)| large || b < 256 << 20) {
        let config = CollectiveConfig::default().with_num_devices(PEERS).with_timeout(TIMEOUT);
        let flat = peers(&[0, 1, 2, 3], config, bytes, warm, iters);
        let hier = two_nodes(bytes, warm, iters);
        println!("{bytes:>10}  {}  {}", cell(bytes, flat), cell(bytes, hier));
    }
}

fn cell(bytes: usize, secs: f64) -> String {
    let algbw = bytes as f64 / secs / 1e9;
    let busbw = if broadcast() { algbw } else { algbw * 2.0 * (PEERS - 1) as f64 / PEERS as f64 };
    format!("{:>10.2} {:>7.2} {:>7.2}", secs * 1e6, algbw, busbw)
}

/// Whether broadcast is timed (`RUCCL_HIER_BENCH_OP=broadcast`) rather than all_reduce.
fn broadcast() -> bool {
    std::env::var("RUCCL_HIER_BENCH_OP").is_ok_and(|v| v == "broadcast")
}

/// Peers `ids` as threads of this process: each registers, warms up, then times `iters`
/// all_reduces (or broadcasts from peer 0); the slowest peer's mean seconds per op.
fn peers(ids: &[u64], config: CollectiveConfig, bytes: usize, warm: u32, iters: u32) -> f64 {
    let elems = bytes / 4;
    let threads: Vec<_> = ids
        .iter()
        .map(|&id| {
            let config = config.clone();
            std::thread::spawn(move || {
                let (peer, dev) = (PeerId::new(id), HostDevice::new(id as u32));
                api::register::<HostBackend>(peer, dev, config).expect("register");
                let x = Tensor::from_slice(&dev, &vec![1.0f32; elems], &[elems]).expect("input");
                let op = || {
                    let t = Tensor::from_buffer(&dev, x.buffer().clone(), DType::F32, &[elems]).expect("handle");
                    std::hint::black_box(if broadcast() {
                        api::broadcast::<HostBackend>(peer, (id == 0).then_some(t)).expect("broadcast")
                    } else {
                        api::all_reduce::<HostBackend>(peer, t, ReduceOperation::Sum).expect("all_reduce")
                    });
                };
                (0..warm).for_each(|_| op());
                api::barrier::<HostBackend>(peer).expect("barrier");
                let start = Instant::now();
                (0..iters).for_each(|_| op());
                let secs = start.elapsed().as_secs_f64() / f64::from(iters);
                api::finish_collective::<HostBackend>(peer).expect("finish");
                secs
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().expect("a peer panicked")).fold(0.0, f64::max)
}

/// Two node processes of two peers each, an orchestrator in this one; the slower node's time.
fn two_nodes(bytes: usize, warm: u32, iters: u32) -> f64 {
    let orch = ruccl::orchestrator::Orchestrator::start("127.0.0.1:0", 2).expect("orchestrator");
    let exe = std::env::current_exe().expect("this program");
    let kids: Vec<_> = ["0,1", "2,3"]
        .iter()
        .map(|ids| {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            Command::new(&exe)
                .env(ROLE, "node")
                .env("HIER_GLOBAL", orch.local_addr().to_string())
                .env("HIER_PORT", port.to_string())
                .env("HIER_PEERS", ids)
                .env("HIER_SIZE", format!("{bytes} {warm} {iters}"))
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn a node")
        })
        .collect();
    let secs = kids
        .into_iter()
        .map(|k| {
            let out = k.wait_with_output().expect("a node");
            assert!(out.status.success(), "a node failed: {}", out.status);
            String::from_utf8_lossy(&out.stdout).trim().parse::<f64>().expect("a node's time")
        })
        .fold(0.0, f64::max);
    orch.shutdown();
    secs
}

/// A node process: its peers as threads; prints its slowest peer's seconds per op.
fn node() {
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} unset"));
    let ids: Vec<u64> = var("HIER_PEERS").split(',').map(|p| p.parse().unwrap()).collect();
    let size: Vec<usize> = var("HIER_SIZE").split(' ').map(|p| p.parse().unwrap()).collect();
    let config = CollectiveConfig::default()
        .with_num_devices(ids.len())
        .with_num_nodes(2)
        .with_global_address(var("HIER_GLOBAL"))
        .with_node_address("127.0.0.1")
        .with_data_service_port(var("HIER_PORT").parse().unwrap())
        .with_timeout(TIMEOUT);
    let config = match std::env::var("RUCCL_HIER_BENCH_CHUNK") {
        Ok(c) => config.with_pipeline_chunk_bytes(c.parse().expect("RUCCL_HIER_BENCH_CHUNK: bytes")),
        Err(_) => config,
    };
    println!("{}", peers(&ids, config, size[0], size[1] as u32, size[2] as u32));
}
