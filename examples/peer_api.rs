//! A framework-style caller of the peer API.
//!
//! Run it with:
//!
//! ```sh
//! cargo run -p ruCCL --example peer_api
//! ```
//!
//! Four peers (threads, each with its own logical host device, registered in a shuffled
//! order) register with one `CollectiveConfig`, then:
//! 1. `all_reduce` with `ReduceOperation::Mean` over 257 f32 "gradients" — checks the exact
//!    mean on every peer;
//! 2. `broadcast` of peer 2's 3 x 5 "weights" (the others pass `None`) — checks that every
//!    peer receives them, with their shape, on its own device;
//! 3. `reduce` with `Sum` to peer 1 — checks that peer 1 gets the exact sum and the others get
//!    `None`;
//! 4. `finish_collective` on every peer.
//!
//! It prints what it checked and exits non-zero if anything differs.

use std::process::ExitCode;
use std::time::Duration;

use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId, ReduceOperation, Strategy};
use ruccl::{HostDevice, Tensor};

const PEERS: u32 = 4;
const GRADS: usize = 257;

/// Peer `p`'s gradient: small integers, so sums and means are exact.
fn grad(p: u32, i: usize) -> f32 {
    ((i * 3 + p as usize * 11) % 13) as f32
}

fn weights() -> Vec<f32> {
    (0..15).map(|i| i as f32 * 0.5).collect()
}

/// One peer's whole session; returns what it checked.
fn peer(p: u32, config: CollectiveConfig) -> ruccl::Result<Vec<String>> {
    let (id, dev) = (PeerId::from(p), HostDevice::new(p));
    // Arrive in a shuffled order: registration waits for everyone.
    std::thread::sleep(Duration::from_millis(u64::from((p * 7) % 4) * 5));
    api::register::<HostBackend>(id, dev, config)?;
    let mut checked = Vec::new();

    let mine: Vec<f32> = (0..GRADS).map(|i| grad(p, i)).collect();
    let t = api::all_reduce::<HostBackend>(id, Tensor::from_slice(&dev, &mine, &[GRADS])?, ReduceOperation::Mean)?;
    let want: Vec<f32> = (0..GRADS).map(|i| (0..PEERS).map(|q| grad(q, i)).sum::<f32>() / PEERS as f32).collect();
    check(t.to_vec::<f32>()? == want && t.device() == &dev, "all_reduce Mean of 257 f32", &mut checked)?;

    let sent = (p == 2).then(|| Tensor::from_slice(&dev, &weights(), &[3, 5])).transpose()?;
    let t = api::broadcast::<HostBackend>(id, sent)?;
    let ok = t.to_vec::<f32>()? == weights() && t.shape() == [3, 5] && t.device() == &dev;
    check(ok, "broadcast of peer 2's 3 x 5 weights", &mut checked)?;

    let t =
        api::reduce::<HostBackend>(id, Tensor::from_slice(&dev, &mine, &[GRADS])?, ReduceOperation::Sum, 1u32.into())?;
    let ok = match t {
        Some(t) => {
            p == 1
                && t.to_vec::<f32>()? == (0..GRADS).map(|i| (0..PEERS).map(|q| grad(q, i)).sum()).collect::<Vec<f32>>()
        }
        None => p != 1,
    };
    check(
        ok,
        if p == 1 { "reduce Sum to peer 1: got the sum" } else { "reduce Sum to peer 1: got None" },
        &mut checked,
    )?;

    api::finish_collective::<HostBackend>(id)?;
    checked.push("finish_collective".into());
    Ok(checked)
}

fn check(ok: bool, what: &str, checked: &mut Vec<String>) -> ruccl::Result<()> {
    if !ok {
        return Err(ruccl::CollectiveError::new(ruccl::ErrorKind::Protocol, format!("wrong result: {what}")));
    }
    checked.push(what.to_string());
    Ok(())
}

fn main() -> ExitCode {
    let config = CollectiveConfig::default()
        .with_num_devices(PEERS as usize)
        .with_local_all_reduce_strategy(Strategy::Ring)
        .with_local_broadcast_strategy(Strategy::Tree(2))
        .with_local_reduce_strategy(Strategy::Centralized)
        .with_timeout(Duration::from_secs(30));
    let peers: Vec<_> = (0..PEERS)
        .map(|p| {
            let config = config.clone();
            std::thread::spawn(move || (p, peer(p, config)))
        })
        .collect();
    let mut failed = false;
    for h in peers {
        match h.join() {
            Ok((p, Ok(checked))) => println!("peer {p}: ok: {}", checked.join("; ")),
            Ok((p, Err(e))) => {
                failed = true;
                eprintln!("peer {p}: FAILED: {e}");
            }
            Err(_) => {
                failed = true;
                eprintln!("a peer thread panicked");
            }
        }
    }
    if failed {
        return ExitCode::FAILURE;
    }
    println!(
        "all {PEERS} peers: exact results (all_reduce Ring, broadcast Tree(2), reduce Centralized) and a clean finish"
    );
    ExitCode::SUCCESS
}
