//! A deterministic simulator that runs every rank's plan against every other's, modelling
//! the scheduler's rules (sends lend, a receive consumes in order, a write waits for the
//! lends it would clobber, an op ends when its lends are released). It checks results,
//! message lengths and freedom from deadlock for every op, world size and size we sweep.
//!
//! Two transports are modelled ([`Flow`]): in-process lends (the receiver reads the sender's
//! memory in place, mailboxes unbounded) and socket credits (a message waits in the sender's
//! unbounded queue until it fits the receiver's bounded buffers, and its lend is released once
//! it has left; the receiver frees the buffers when it consumes it).

use std::collections::VecDeque;

use super::*;
use crate::types::DType;

const IN: usize = 0;
const OUT: usize = 1;
const SCRATCH: usize = 2;

struct Msg {
    from_buf: usize,
    off: usize,
    len: usize,
    lend: usize,
    /// The bytes, once they left the sender (socket transports); `None`: read in place.
    data: Option<Vec<i64>>,
}

mod plans;
mod uneven;

/// How messages travel.
#[derive(Clone, Copy, Debug)]
enum Flow {
    /// In-process: unbounded mailboxes; a lend is released when the receiver consumes it.
    Lend,
    /// A socket with credits: at most this many elements sit in a receiver's buffers per
    /// sender (a larger message goes when they are empty); a lend is released when its
    /// message enters them.
    Credits(usize),
}

#[derive(Clone)]
struct RankSim {
    bufs: [Vec<i64>; 3],
    bind: [(usize, usize); 3],
    plan: Plan,
    pc: usize,
    lends: Vec<(usize, usize, usize, bool)>, // buf, off, len, released
    held: Option<Vec<i64>>,
    /// Receives that found their destination still lent (the scheduler stages those).
    parked: usize,
}

impl RankSim {
    fn resolve(&self, s: Span) -> (usize, usize, usize) {
        let (b, base) = self.bind[s.slot as usize];
        (b, base + s.off, s.len)
    }
    fn lent(&self, (b, o, l): (usize, usize, usize)) -> bool {
        l > 0 && self.lends.iter().any(|&(lb, lo, ll, rel)| !rel && lb == b && lo < o + l && o < lo + ll)
    }
}

/// A rank's input, output and scratch at the end.
type Bufs = [Vec<i64>; 3];

/// Runs all plans; returns each rank's buffers and how many receives found their destination
/// still lent, or a description of what went wrong.
#[allow(clippy::too_many_arguments)] // a test helper: every argument is one axis of the sweep
fn run(
    desc: &OpDesc,
    world: usize,
    algo: Algorithm,
    chunk: usize,
    inputs: Vec<Vec<i64>>,
    out_len: usize,
    seed: u64,
    flow: Flow,
) -> Result<(Vec<Bufs>, usize), String> {
    let ranks: Vec<RankSim> = inputs
        .into_iter()
        .enumerate()
        .map(|(r, input)| {
            // A socket's plans are a network's (messages of at most a chunk).
            let plan = build(desc, r, world, algo, chunk, matches!(flow, Flow::Credits(_)));
            let mut bind = [(IN, 0), (OUT, 0), (SCRATCH, 0)];
            let c = desc.count;
            if desc.in_place {
                match desc.kind {
                    OpKind::AllGather => bind[IN] = (OUT, r * c),
                    OpKind::ReduceScatter => bind[OUT] = (IN, r * c),
                    _ => bind[IN] = (OUT, 0),
                }
            }
            let mut bufs = [input, vec![-1; out_len], vec![-7; plan.scratch_elems]];
            if desc.in_place {
                match desc.kind {
                    OpKind::AllGather => {
                        let mut o = vec![-1; out_len];
                        o[r * c..(r + 1) * c].copy_from_slice(&bufs[IN]);
                        bufs[OUT] = o;
                    }
                    OpKind::ReduceScatter => {}
                    _ => bufs[OUT] = bufs[IN].clone(),
                }
            }
            RankSim { bufs, bind, plan, pc: 0, lends: Vec::new(), held: None, parked: 0 }
        })
        .collect();
    run_ranks(ranks, world, seed, flow)
}

/// Runs every rank's plan, over its buffers, to the end; each rank's buffers and how many
/// receives found their destination still lent. `Err` on a deadlock or a message left over.
fn run_ranks(mut ranks: Vec<RankSim>, world: usize, seed: u64, flow: Flow) -> Result<(Vec<Bufs>, usize), String> {
    let mut queues: Vec<VecDeque<Msg>> = (0..world * world).map(|_| VecDeque::new()).collect();
    // Socket flow: messages still in the sender's queue, per ordered pair.
    let mut outgoing: Vec<VecDeque<Msg>> = (0..world * world).map(|_| VecDeque::new()).collect();
    let mut rng = seed | 1;
    loop {
        let live: Vec<usize> = (0..world)
            .filter(|&r| ranks[r].pc < ranks[r].plan.steps.len() || ranks[r].lends.iter().any(|l| !l.3))
            .collect();
        if live.is_empty() {
            break;
        }
        // Try ranks (and then the wires) in a pseudo-random order; one step for the first
        // that can move.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let movers = live.len() + world * world;
        let start = (rng as usize) % movers;
        let mut moved = false;
        for i in 0..movers {
            let m = (start + i) % movers;
            let went = match live.get(m) {
                Some(&r) => step(r, &mut ranks, &mut queues, &mut outgoing, world, flow)?,
                None => transfer(m - live.len(), &mut ranks, &mut queues, &mut outgoing, flow),
            };
            if went {
                moved = true;
                break;
            }
        }
        if !moved {
            let where_: Vec<String> = live
                .iter()
                .map(|&r| format!("rank {r} at step {} {:?}", ranks[r].pc, ranks[r].plan.steps.get(ranks[r].pc)))
                .collect();
            return Err(format!("deadlock: {}", where_.join("; ")));
        }
    }
    if let Some(q) = queues.iter().chain(&outgoing).position(|q| !q.is_empty()) {
        let q = q % (world * world);
        return Err(format!("unconsumed message from {} to {}", q / world, q % world));
    }
    let parked = ranks.iter().map(|r| r.parked).sum();
    Ok((ranks.into_iter().map(|r| r.bufs).collect(), parked))
}

fn write(rs: &mut RankSim, dst: (usize, usize, usize), vals: &[i64]) {
    rs.bufs[dst.0][dst.1..dst.1 + dst.2].copy_from_slice(vals);
}

/// Moves the oldest message of pair `q` from its sender's queue into its receiver's buffers,
/// if they have room; true if it moved.
fn transfer(
    q: usize,
    ranks: &mut [RankSim],
    queues: &mut [VecDeque<Msg>],
    outgoing: &mut [VecDeque<Msg>],
    flow: Flow,
) -> bool {
    let Flow::Credits(window) = flow else { return false };
    let Some(m) = outgoing[q].front() else { return false };
    let buffered: usize = queues[q].iter().map(|m| m.len).sum();
    if !queues[q].is_empty() && buffered + m.len > window {
        return false;
    }
    let Some(mut m) = outgoing[q].pop_front() else { return false };
    let world = ranks.len();
    let from = &mut ranks[q / world];
    m.data = Some(from.bufs[m.from_buf][m.off..m.off + m.len].to_vec());
    from.lends[m.lend].3 = true;
    queues[q].push_back(m);
    true
}

fn step(
    r: usize,
    ranks: &mut [RankSim],
    queues: &mut [VecDeque<Msg>],
    outgoing: &mut [VecDeque<Msg>],
    world: usize,
    flow: Flow,
) -> Result<bool, String> {
    let Some(&st) = ranks[r].plan.steps.get(ranks[r].pc) else {
        return Ok(false); // waiting for lends to be released
    };
    let n = world as i64;
    match st {
        Step::Send { peer, src } => {
            if peer == r || peer >= world {
                return Err(format!("rank {r} sends to bad peer {peer}"));
            }
            let (b, o, l) = ranks[r].resolve(src);
            if o + l > ranks[r].bufs[b].len() {
                return Err(format!("rank {r} sends out of range {src:?}"));
            }
            ranks[r].lends.push((b, o, l, false));
            let lend = ranks[r].lends.len() - 1;
            let msg = Msg { from_buf: b, off: o, len: l, lend, data: None };
            match flow {
                Flow::Lend => queues[r * world + peer].push_back(msg),
                Flow::Credits(_) => outgoing[r * world + peer].push_back(msg),
            }
        }
        Step::Recv { peer, dst } | Step::RecvReduce { peer, dst, .. } => {
            let d = ranks[r].resolve(dst);
            if d.1 + d.2 > ranks[r].bufs[d.0].len() {
                return Err(format!("rank {r} receives out of range {dst:?}"));
            }
            let mut popped = false;
            if ranks[r].held.is_none() {
                popped = true;
                let Some(m) = queues[peer * world + r].pop_front() else {
                    return Ok(false);
                };
                if m.len != dst.len {
                    return Err(format!("rank {r} expected {} elements from {peer}, got {}", dst.len, m.len));
                }
                let data = match m.data {
                    Some(d) => d,
                    None => {
                        ranks[peer].lends[m.lend].3 = true;
                        ranks[peer].bufs[m.from_buf][m.off..m.off + m.len].to_vec()
                    }
                };
                let data = match st {
                    Step::RecvReduce { acc, .. } => {
                        let a = ranks[r].resolve(acc);
                        let av = &ranks[r].bufs[a.0][a.1..a.1 + a.2];
                        av.iter().zip(&data).map(|(x, y)| x + y).collect()
                    }
                    _ => data,
                };
                ranks[r].held = Some(data);
            }
            if ranks[r].lent(d) {
                ranks[r].parked += usize::from(popped);
                return Ok(popped); // staged: the message is consumed, the write waits
            }
            let vals = ranks[r].held.take().unwrap_or_default();
            write(&mut ranks[r], d, &vals);
        }
        Step::Copy { src, dst } => {
            let (s, d) = (ranks[r].resolve(src), ranks[r].resolve(dst));
            if ranks[r].lent(d) {
                return Ok(false);
            }
            let vals = ranks[r].bufs[s.0][s.1..s.1 + s.2].to_vec();
            write(&mut ranks[r], d, &vals);
        }
        Step::Average { span } => {
            let d = ranks[r].resolve(span);
            if ranks[r].lent(d) {
                return Ok(false);
            }
            let vals: Vec<i64> = ranks[r].bufs[d.0][d.1..d.1 + d.2].iter().map(|x| x / n).collect();
            write(&mut ranks[r], d, &vals);
        }
        Step::Exchange | Step::Rescale { .. } => {
            return Err(format!("rank {r}: `build` never makes exchange or rescale steps (the communicator does)"));
        }
    }
    ranks[r].pc += 1;
    Ok(true)
}

fn input(kind: OpKind, r: usize, n: usize, c: usize) -> Vec<i64> {
    let len = match kind {
        OpKind::ReduceScatter | OpKind::AllToAll | OpKind::Scatter => n * c,
        _ => c,
    };
    (0..len).map(|i| ((r + 1) * 1000 + i) as i64 * if i % 3 == 0 { -1 } else { 1 }).collect()
}

fn out_len(kind: OpKind, n: usize, c: usize) -> usize {
    match kind {
        OpKind::AllGather | OpKind::AllToAll | OpKind::Gather => n * c,
        OpKind::Barrier => 0,
        _ => c,
    }
}

fn check(desc: &OpDesc, n: usize, algo: Algorithm, chunk: usize, seed: u64) -> Result<(), String> {
    check_flow(desc, n, algo, chunk, seed, Flow::Lend).map(|_| ())
}

/// Runs and checks the plans; returns how many receives found their destination still lent.
fn check_flow(desc: &OpDesc, n: usize, algo: Algorithm, chunk: usize, seed: u64, flow: Flow) -> Result<usize, String> {
    let c = desc.count;
    let ins: Vec<Vec<i64>> = (0..n).map(|r| input(desc.kind, r, n, c)).collect();
    let (res, parked) = run(desc, n, algo, chunk, ins.clone(), out_len(desc.kind, n, c), seed, flow)?;
    let avg = desc.op == Some(ReduceOp::Avg);
    let fin = |s: i64| if avg { s / n as i64 } else { s };
    let root = desc.root.unwrap_or(0);
    for r in 0..n {
        let out: Vec<i64> = match (desc.kind, desc.in_place) {
            (OpKind::ReduceScatter, true) => res[r][IN][r * c..(r + 1) * c].to_vec(),
            _ => res[r][OUT].clone(),
        };
        let expect: Vec<i64> = match desc.kind {
            OpKind::AllReduce => (0..c).map(|i| fin(ins.iter().map(|v| v[i]).sum())).collect(),
            OpKind::Broadcast => ins[root].clone(),
            OpKind::Reduce if r == root => (0..c).map(|i| fin(ins.iter().map(|v| v[i]).sum())).collect(),
            OpKind::AllGather => ins.concat(),
            OpKind::ReduceScatter => (0..c).map(|i| fin(ins.iter().map(|v| v[r * c + i]).sum())).collect(),
            OpKind::AllToAll => (0..n).flat_map(|k| ins[k][r * c..(r + 1) * c].to_vec()).collect(),
            OpKind::Gather if r == root => ins.concat(),
            OpKind::Scatter => ins[root][r * c..(r + 1) * c].to_vec(),
            _ => out.clone(),
        };
        if out != expect {
            return Err(format!("rank {r}: got {out:?}, want {expect:?}"));
        }
        if !desc.in_place && res[r][IN] != ins[r] {
            return Err(format!("rank {r}: input modified"));
        }
    }
    Ok(parked)
}

/// An in-place all_to_all lends in place only blocks that the peer reads before it sends
/// what lands there, so no receive ever finds its destination still lent (which the
/// scheduler would route through staging), under any interleaving tried and either flow.
#[test]
fn in_place_all_to_all_never_receives_into_a_lent_block() {
    for n in 1..=9 {
        for count in [0, 1, 5, 17] {
            let mut d = OpDesc::new(OpKind::AllToAll, DType::I64, count);
            d.in_place = true;
            for seed in 0..40u64 {
                for flow in [Flow::Lend, Flow::Credits(0), Flow::Credits(100)] {
                    for chunk in [64, 3] {
                        let parked = check_flow(&d, n, Algorithm::Auto, chunk, seed * 7919 + n as u64, flow)
                            .unwrap_or_else(|e| panic!("{n} ranks, count {count}, chunk {chunk}, {flow:?}: {e}"));
                        assert_eq!(parked, 0, "{n} ranks, count {count}, chunk {chunk}, seed {seed}, {flow:?}");
                    }
                }
            }
        }
    }
}

/// Every collective the simulator runs plans of.
const COLLECTIVES: [OpKind; 9] = [
    OpKind::AllReduce,
    OpKind::Broadcast,
    OpKind::Reduce,
    OpKind::AllGather,
    OpKind::ReduceScatter,
    OpKind::AllToAll,
    OpKind::Gather,
    OpKind::Scatter,
    OpKind::Barrier,
];

#[test]
fn every_plan_is_correct_and_deadlock_free() {
    let kinds = COLLECTIVES;
    let mut cases = 0;
    for kind in kinds {
        for n in 1..=9 {
            for count in [0, 1, 2, 3, 5, 7, 8, 13, 17, 33] {
                for algo in
                    [Algorithm::Auto, Algorithm::Ring, Algorithm::Tree, Algorithm::RecursiveDoubling, Algorithm::Direct]
                {
                    for in_place in [false, true] {
                        if in_place && matches!(kind, OpKind::Gather | OpKind::Scatter | OpKind::Barrier) {
                            continue;
                        }
                        for op in [ReduceOp::Sum, ReduceOp::Avg] {
                            let mut d = OpDesc::new(kind, DType::I64, if kind == OpKind::Barrier { 0 } else { count });
                            d.op = Some(op);
                            d.in_place = in_place;
                            d.root = Some((count + 1) % n);
                            for chunk in [1, 3, 64] {
                                check(&d, n, algo, chunk, (n * 131 + count * 7 + chunk) as u64)
                                    .unwrap_or_else(|e| panic!("{d} on {n} ranks, {algo}, chunk {chunk}: {e}"));
                                cases += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(cases > 10_000, "{cases}");
}

#[test]
fn many_interleavings() {
    for seed in 0..200u64 {
        for n in [3, 4, 5, 8] {
            let mut d = OpDesc::new(OpKind::AllReduce, DType::I64, 29);
            d.op = Some(ReduceOp::Sum);
            d.in_place = seed % 2 == 0;
            for algo in [Algorithm::Ring, Algorithm::RecursiveDoubling, Algorithm::Tree, Algorithm::Direct] {
                check(&d, n, algo, 2, seed * 7919 + 1).unwrap_or_else(|e| panic!("{n} ranks {algo} seed {seed}: {e}"));
            }
        }
    }
}

#[test]
fn auto_thresholds() {
    let mut d = OpDesc::new(OpKind::AllReduce, DType::F32, SMALL_BYTES / 4);
    assert_eq!(choose(&d, 4, Algorithm::Auto, false), Algorithm::RecursiveDoubling);
    assert_eq!(choose(&d, 4, Algorithm::Auto, true), Algorithm::RecursiveDoubling);
    d.count += 1;
    assert_eq!(choose(&d, 4, Algorithm::Auto, false), Algorithm::Direct);
    assert_eq!(choose(&d, 4, Algorithm::Auto, true), Algorithm::Ring);
    assert_eq!(choose(&d, 4, Algorithm::Tree, true), Algorithm::Tree);
    assert_eq!(choose(&d, 4, Algorithm::Direct, true), Algorithm::Direct);
    d.kind = OpKind::Reduce;
    assert_eq!(choose(&d, 4, Algorithm::Auto, false), Algorithm::Direct);
    assert_eq!(choose(&d, 4, Algorithm::Auto, true), Algorithm::Ring);
    d.kind = OpKind::Broadcast;
    assert_eq!(choose(&d, 4, Algorithm::Auto, false), Algorithm::Ring);
    assert_eq!(choose(&d, 4, Algorithm::Direct, false), Algorithm::Ring);
    d.count = 1;
    assert_eq!(choose(&d, 4, Algorithm::Auto, false), Algorithm::Tree);
}

/// Over a network `Auto` never picks a direct plan (n - 1 times a ring's bytes per link),
/// and what it picks instead runs deadlock-free and exact like every forced plan.
#[test]
fn network_auto_prefers_rings() {
    for kind in [OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter] {
        for count in [1, SMALL_BYTES / 8 + 1, SMALL_BYTES] {
            for n in 1..=5 {
                let d = OpDesc::new(kind, DType::I64, count);
                let a = choose(&d, n, Algorithm::Auto, true);
                assert_ne!(a, Algorithm::Direct, "{d} on {n} ranks");
                let mut small = OpDesc::new(kind, DType::I64, 11);
                small.op = (kind != OpKind::AllGather).then_some(ReduceOp::Sum);
                check(&small, n, a, 4, n as u64).unwrap_or_else(|e| panic!("{small} on {n} ranks, {a}: {e}"));
            }
        }
    }
}

/// The k-ary and centralized plans (the peer API's `Tree(k)` and `Centralized` strategies):
/// every world size 1..=9, every count below 64, several roots, both reduce ops, in and out of
/// place, and chunkings that split and do not split the message.
#[test]
fn kary_and_centralized_plans_for_every_world_and_count() {
    let algos = [
        Algorithm::KaryTree(1),
        Algorithm::KaryTree(2),
        Algorithm::KaryTree(3),
        Algorithm::KaryTree(4),
        Algorithm::KaryTree(8),
        Algorithm::Centralized,
    ];
    let mut cases = 0;
    for n in 1..=9 {
        for count in 0..64 {
            for algo in algos {
                for kind in [OpKind::AllReduce, OpKind::Broadcast, OpKind::Reduce] {
                    let mut roots = vec![0, n - 1, (count + 1) % n];
                    roots.dedup();
                    if kind == OpKind::AllReduce {
                        roots.truncate(1);
                    }
                    for root in roots {
                        for (op, in_place) in [(ReduceOp::Sum, false), (ReduceOp::Avg, true), (ReduceOp::Sum, true)] {
                            let mut d = OpDesc::new(kind, DType::I64, count);
                            d.op = Some(op);
                            d.in_place = in_place;
                            d.root = (kind != OpKind::AllReduce).then_some(root);
                            let chunks: &[usize] = if count < 8 { &[1, 64] } else { &[5, 64] };
                            for &chunk in chunks {
                                assert_eq!(choose(&d, n, algo, false), algo);
                                check(&d, n, algo, chunk, (n * 977 + count * 13 + chunk + root) as u64)
                                    .unwrap_or_else(|e| panic!("{d} on {n} ranks, {algo}, chunk {chunk}: {e}"));
                                cases += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(cases > 20_000, "{cases}");
}

/// Every plan over a socket transport with credits: a window of 0 elements (one message at a
/// time per pair), a few elements (less than one chunk), and more than a chunk. Sends never
/// block (the sender's queue is unbounded), so a plan that is deadlock-free with lends is
/// deadlock-free here too — this test checks that claim, and the results, for every plan.
#[test]
fn every_plan_is_deadlock_free_under_credits() {
    let kinds = COLLECTIVES;
    let algos = [
        Algorithm::Auto,
        Algorithm::Ring,
        Algorithm::Tree,
        Algorithm::RecursiveDoubling,
        Algorithm::Direct,
        Algorithm::KaryTree(2),
        Algorithm::KaryTree(3),
        Algorithm::Centralized,
    ];
    let mut cases = 0;
    for kind in kinds {
        for n in 1..=9 {
            for count in [0, 1, 3, 7, 17, 33] {
                for algo in algos {
                    for in_place in [false, true] {
                        if in_place && matches!(kind, OpKind::Gather | OpKind::Scatter | OpKind::Barrier) {
                            continue;
                        }
                        let mut d = OpDesc::new(kind, DType::I64, if kind == OpKind::Barrier { 0 } else { count });
                        d.op = Some(if in_place { ReduceOp::Avg } else { ReduceOp::Sum });
                        d.in_place = in_place;
                        d.root = Some((count + 1) % n);
                        let kary = matches!(algo, Algorithm::KaryTree(_) | Algorithm::Centralized);
                        if kary && !matches!(kind, OpKind::AllReduce | OpKind::Broadcast | OpKind::Reduce) {
                            continue;
                        }
                        if kary && kind == OpKind::AllReduce {
                            d.root = None;
                        }
                        for chunk in [1, 4, 64] {
                            for window in [0, 3, 100] {
                                let seed = (n * 131 + count * 7 + chunk + window) as u64;
                                check_flow(&d, n, algo, chunk, seed, Flow::Credits(window)).unwrap_or_else(|e| {
                                    panic!("{d} on {n} ranks, {algo}, chunk {chunk}, window {window}: {e}")
                                });
                                cases += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(cases > 10_000, "{cases}");
}
