//! The exchange's mismatch rule ([`Looks`]) against every order in which ranks publish: for
//! every combination of calls of 3 ranks (every rooted kind, every root, two counts, a
//! shape-digest op) and of 4 ranks (one count), ranks that disagree are always caught by at
//! least one rank.
//!
//! The model: ranks reach the op in some order. A quiet rank ([`Reads::quiet`]: the hub as the
//! root of reduce or gather) publishes nothing and looks at nothing (it waits for every part).
//! A lazy rank ([`Reads::lazy`]) whose root published before it publishes nothing and
//! compares its root's part; every other rank publishes, then looks at the slots its rule
//! names, and a look at `p` sees `p`'s part only if `p` published first. A rank compares
//! every part it waits for that is ever published (a part never published leaves it waiting:
//! only a peer that sees a disagreement ends that wait, so such a wait counts for nothing).
//! Looks change nothing another rank does, and looking as early as possible, right after
//! one's own publish, sees the least, so the orders that matter are the `n!` orders in which
//! ranks reach the op.

use super::{HUB, Looks, Reads};
use crate::op::{OpDesc, OpKind};
use crate::types::{DType, Rank, ReduceOp};

/// The calls a rank may make: all_reduce (a rank that waits for every part, like every
/// unrooted kind), each rooted kind at each root, in `counts` counts, and a broadcast with a
/// shape digest (the peer API's: everyone waits for every part).
fn calls(n: usize, counts: &[usize]) -> Vec<OpDesc> {
    let mut v = Vec::new();
    for &count in counts {
        let mut all_reduce = OpDesc::new(OpKind::AllReduce, DType::F32, count);
        all_reduce.op = Some(ReduceOp::Sum);
        v.push(all_reduce);
        for kind in [OpKind::Reduce, OpKind::Gather, OpKind::Broadcast, OpKind::Scatter] {
            for root in 0..n {
                let mut d = OpDesc::new(kind, DType::F32, count);
                d.root = Some(root);
                d.op = (kind == OpKind::Reduce).then_some(ReduceOp::Sum);
                v.push(d);
            }
        }
    }
    let mut shaped = OpDesc::new(OpKind::Broadcast, DType::F32, counts[0]);
    shaped.root = Some(0);
    shaped.shape = Some(1);
    v.push(shaped);
    v
}

/// The peers `me` compares its call with, whatever the order: those it waits for.
fn waits(d: &OpDesc, me: Rank, n: usize) -> Vec<Rank> {
    match Reads::of(d, me) {
        Reads::Every => (0..n).filter(|&p| p != me).collect(),
        Reads::Root(r) => vec![r],
        Reads::Own => vec![],
    }
}

fn same(a: &OpDesc, b: &OpDesc) -> bool {
    a.fingerprint().words() == b.fingerprint().words()
}

/// Every order of `0..n`.
fn orders(n: usize) -> Vec<Vec<Rank>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for o in orders(n - 1) {
        for at in 0..=o.len() {
            let mut o = o.clone();
            o.insert(at, n - 1);
            out.push(o);
        }
    }
    out
}

/// Whether some rank sees a disagreement when the ranks reach the op in `order` and look at
/// the slots `rule` names ([`Reads::looks`], or a rule the tests break on purpose).
fn caught(called: &[&OpDesc], order: &[Rank], rule: fn(Reads, Rank) -> Looks) -> bool {
    caught_with(called, order, rule, Reads::quiet)
}

/// [`caught`], with `quiet` saying which ranks publish nothing ([`Reads::quiet`], or a rule
/// the tests break on purpose).
fn caught_with(
    called: &[&OpDesc],
    order: &[Rank],
    rule: fn(Reads, Rank) -> Looks,
    quiet: fn(&OpDesc, Rank) -> bool,
) -> bool {
    let n = called.len();
    let mut published = vec![None; n];
    let mut looked = vec![vec![]; n];
    for (at, &me) in order.iter().enumerate() {
        let reads = Reads::of(called[me], me);
        if quiet(called[me], me) || reads.lazy(me).is_some_and(|r| published[r].is_some()) {
            continue;
        }
        published[me] = Some(at);
        looked[me] = match rule(reads, me) {
            Looks::None => vec![],
            Looks::Hub => vec![HUB],
            Looks::All => (0..n).filter(|&p| p != me).collect(),
        };
    }
    (0..n).any(|me| {
        let waited = waits(called[me], me, n).into_iter().filter(|&p| published[p].is_some());
        let seen = looked[me].iter().copied().filter(|&p| published[p].is_some_and(|t| Some(t) < published[me]));
        waited.chain(seen).any(|p| !same(called[me], called[p]))
    })
}

/// Checks every combination of `calls` over `n` ranks in every order; returns how many
/// disagreeing combinations it checked.
fn check(n: usize, calls: &[OpDesc]) -> usize {
    let orders = orders(n);
    let mut pick = vec![0usize; n];
    let mut checked = 0;
    loop {
        let called: Vec<&OpDesc> = pick.iter().map(|&i| &calls[i]).collect();
        if called.iter().any(|c| !same(c, called[0])) {
            for order in &orders {
                assert!(
                    caught(&called, order, Reads::looks),
                    "{n} ranks calling {called:?}, reaching it in order {order:?}: nobody sees the disagreement"
                );
            }
            checked += 1;
        }
        // Next combination.
        let mut r = 0;
        loop {
            if r == n {
                return checked;
            }
            pick[r] += 1;
            if pick[r] < calls.len() {
                break;
            }
            pick[r] = 0;
            r += 1;
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "pure logic, no unsafe: the normal suite runs it")]
fn every_disagreement_of_3_ranks_is_seen_in_every_order() {
    let calls = calls(3, &[1, 2]);
    assert_eq!(check(3, &calls), calls.len().pow(3) - calls.len());
}

#[test]
#[cfg_attr(miri, ignore = "pure logic, no unsafe: the normal suite runs it")]
fn every_disagreement_of_4_ranks_is_seen_in_every_order() {
    let calls = calls(4, &[1]);
    assert_eq!(check(4, &calls), calls.len().pow(4) - calls.len());
}

/// The model is not vacuous: rank 0 broadcasts from 0 and reaches the op first (its look at
/// every slot sees nothing), rank 1 agrees with it, rank 2 gathers to rank 1 and comes last:
/// only rank 2's look at the hub sees the disagreement, and a rule without that look (or
/// with the hub looking at nothing) misses it.
#[test]
fn the_model_catches_a_rule_that_looks_at_too_little() {
    let mut gather = OpDesc::new(OpKind::Gather, DType::F32, 1);
    gather.root = Some(1);
    let mut bcast = OpDesc::new(OpKind::Broadcast, DType::F32, 1);
    bcast.root = Some(0);
    let called = [&bcast, &bcast, &gather];
    assert!(caught(&called, &[0, 1, 2], Reads::looks));
    let blind_non_roots = |r: Reads, me| if r == Reads::Own && me != HUB { Looks::None } else { r.looks(me) };
    assert!(!caught(&called, &[0, 1, 2], blind_non_roots));
    let blind_hub = |r: Reads, me| if me == HUB { Looks::None } else { r.looks(me) };
    assert!(!caught(&called, &[2, 1, 0], blind_hub));
}

/// The quiet rule is the hub's alone: were every root of reduce or gather quiet, three ranks
/// that each reduce to themselves would all wait for parts nobody publishes, and nobody would
/// compare anything.
#[test]
fn only_the_hub_may_be_a_quiet_root() {
    let reduce_to = |root| {
        let mut d = OpDesc::new(OpKind::Reduce, DType::F32, 1);
        d.root = Some(root);
        d.op = Some(ReduceOp::Sum);
        d
    };
    let (a, b, c) = (reduce_to(0), reduce_to(1), reduce_to(2));
    let called = [&a, &b, &c];
    assert!(caught(&called, &[2, 1, 0], Reads::looks));
    let every_root_quiet =
        |d: &OpDesc, me| matches!(d.kind, OpKind::Reduce | OpKind::Gather) && d.root == Some(me) && d.shape.is_none();
    assert!(!caught_with(&called, &[2, 1, 0], Reads::looks, every_root_quiet));
}
