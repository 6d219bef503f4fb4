//! The orchestrator of a multi-node peer-API job: every node's `CollectiveConfig` names this
//! address as its `global_address`.
//!
//! Run: `cargo run --features orchestrator --example orchestrator -- ADDR NUM_NODES`
//! (e.g. `0.0.0.0:29400 2`). It serves job after job until stopped (Ctrl-C).

use ruccl::orchestrator::Orchestrator;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: orchestrator ADDR NUM_NODES (e.g. 0.0.0.0:29400 2)";
    let addr = args.next().ok_or(usage)?;
    let num_nodes: u32 = args.next().ok_or(usage)?.parse().map_err(|_| usage)?;
    let server = Orchestrator::start(addr.as_str(), num_nodes)?;
    println!("orchestrator on {} for jobs of {num_nodes} nodes", server.local_addr());
    loop {
        std::thread::park();
    }
}
