//! Every call of the blocking API has its group form: the rooted ops with separate buffers
//! (`broadcast_into`, `reduce_into`, `gather`, `scatter`), `all_gather` into a list of
//! tensors, and the in-place forms of all_gather, reduce_scatter and all_to_all — each issued
//! for every rank from one thread, on the direct path where it qualifies and on the general
//! path (a chosen algorithm), with the blocking calls' results.

use ruccl::{Algorithm, CommConfig, Communicator, ErrorKind, Group, ReduceOp, Tensor};

use crate::harness::{TEST_TIMEOUT, TestDevice, assert_bits};
use crate::reference::{data, reduce_input, reduced};

fn t<D: TestDevice>(c: &Communicator<D>, v: &[i32]) -> Tensor<D> {
    Tensor::from_slice(c.device(), v, &[v.len()]).unwrap()
}

fn zeros<D: TestDevice>(c: &Communicator<D>, n: usize) -> Tensor<D> {
    Tensor::zeros(c.device(), ruccl::DType::I32, &[n]).unwrap()
}

/// Each rank's block `q` of `n` elements, as `data` makes it.
fn blocks(world: usize, n: usize, round: usize) -> Vec<i32> {
    (0..world).flat_map(|q| data::<i32>(q, n, round)).collect()
}

pub fn group_has_every_blocking_call<D: TestDevice>(world: usize) {
    for algorithm in [Algorithm::Auto, Algorithm::Ring] {
        let devices = (0..world).map(D::for_rank).collect();
        let config = CommConfig::default().with_timeout(TEST_TIMEOUT).with_algorithm(algorithm);
        let comms = Communicator::init_all(devices, D::configure(config)).unwrap();
        for round in 0..2 {
            every_call(&comms, round, &format!("{algorithm}, round {round}"));
            // The rooted ops run without messages where the fixture's groups do (the last
            // op, all_to_all in place, never does: look further back).
            let history = comms[0].flight_recorder();
            let gather = &history[history.len() - 8];
            assert_eq!(gather.op.kind, ruccl::op::OpKind::Gather, "{history:?}");
            let direct = algorithm == Algorithm::Auto && D::direct_groups();
            assert_eq!(gather.algorithm == Algorithm::Direct, direct, "{history:?}");
        }
    }
}

fn every_call<D: TestDevice>(comms: &[Communicator<D>], round: usize, what: &str) {
    let (world, n) = (comms.len(), 5);
    let root = round % world;
    let all = blocks(world, n, round);
    // gather: the root's output holds every rank's input, in rank order.
    let ins: Vec<_> = comms.iter().map(|c| t(c, &data::<i32>(c.rank(), n, round))).collect();
    let mut out = zeros(&comms[root], n * world);
    let mut g = Group::new();
    let mut out_slot = Some(&mut out);
    for (c, x) in comms.iter().zip(&ins) {
        g.gather(c, if c.rank() == root { out_slot.take() } else { None }, x, root);
    }
    g.run().unwrap();
    assert_bits(&out.to_vec::<i32>().unwrap(), &all, format!("group gather ({what})"));
    // scatter: rank r gets block r of the root's input.
    let input = t(&comms[root], &all);
    let mut outs: Vec<_> = comms.iter().map(|c| zeros(c, n)).collect();
    let mut g = Group::new();
    for (c, y) in comms.iter().zip(outs.iter_mut()) {
        g.scatter(c, y, (c.rank() == root).then_some(&input), root);
    }
    g.run().unwrap();
    for (r, y) in outs.iter().enumerate() {
        assert_bits(&y.to_vec::<i32>().unwrap(), &all[r * n..(r + 1) * n], format!("group scatter ({what})"));
    }
    // broadcast_into: every rank's output is the root's input; other ranks' inputs are ignored.
    let ins: Vec<_> = comms.iter().map(|c| t(c, &data::<i32>(c.rank(), n, round))).collect();
    let mut outs: Vec<_> = comms.iter().map(|c| zeros(c, n)).collect();
    let mut g = Group::new();
    for ((c, x), y) in comms.iter().zip(&ins).zip(outs.iter_mut()) {
        g.broadcast_into(c, y, Some(x), root);
    }
    g.run().unwrap();
    for y in &outs {
        assert_bits(&y.to_vec::<i32>().unwrap(), &data::<i32>(root, n, round), format!("group broadcast_into ({what})"));
    }
    // reduce_into: the root's output is the reduction; the inputs are untouched.
    let op = ReduceOp::Max;
    let ins: Vec<_> = comms.iter().map(|c| t(c, &reduce_input::<i32>(op, c.rank(), n, round))).collect();
    let mut outs: Vec<_> = comms.iter().map(|c| zeros(c, n)).collect();
    let mut g = Group::new();
    for ((c, x), y) in comms.iter().zip(&ins).zip(outs.iter_mut()) {
        g.reduce_into(c, y, x, op, root);
    }
    g.run().unwrap();
    assert_bits(&outs[root].to_vec::<i32>().unwrap(), &reduced::<i32>(op, world, n, round), format!("group reduce_into ({what})"));
    for (c, x) in comms.iter().zip(&ins) {
        assert_bits(&x.to_vec::<i32>().unwrap(), &reduce_input::<i32>(op, c.rank(), n, round), "reduce_into's input");
    }
    // all_gather into a list of tensors, one per rank.
    let ins: Vec<_> = comms.iter().map(|c| t(c, &data::<i32>(c.rank(), n, round))).collect();
    let mut lists: Vec<Vec<_>> = comms.iter().map(|c| (0..world).map(|_| zeros(c, n)).collect()).collect();
    let mut g = Group::new();
    for ((c, x), list) in comms.iter().zip(&ins).zip(lists.iter_mut()) {
        g.all_gather(c, list, x);
    }
    g.run().unwrap();
    for list in &lists {
        for (q, y) in list.iter().enumerate() {
            assert_bits(&y.to_vec::<i32>().unwrap(), &all[q * n..(q + 1) * n], format!("group all_gather list ({what})"));
        }
    }
    // all_gather in place: rank r's block r is its input.
    let mut ts: Vec<_> = comms
        .iter()
        .map(|c| {
            let mut v = vec![0i32; n * world];
            v[c.rank() * n..(c.rank() + 1) * n].copy_from_slice(&data::<i32>(c.rank(), n, round));
            t(c, &v)
        })
        .collect();
    let mut g = Group::new();
    for (c, x) in comms.iter().zip(ts.iter_mut()) {
        g.all_gather_into_tensor_in_place(c, x);
    }
    g.run().unwrap();
    for x in &ts {
        assert_bits(&x.to_vec::<i32>().unwrap(), &all, format!("group all_gather in place ({what})"));
    }
    // reduce_scatter in place: rank r's block r holds the reduction of every rank's block r.
    let op = ReduceOp::Sum;
    let want = reduced::<i32>(op, world, n * world, round);
    let mut ts: Vec<_> = comms.iter().map(|c| t(c, &reduce_input::<i32>(op, c.rank(), n * world, round))).collect();
    let mut g = Group::new();
    for (c, x) in comms.iter().zip(ts.iter_mut()) {
        g.reduce_scatter_tensor_in_place(c, x, op);
    }
    g.run().unwrap();
    for (r, x) in ts.iter().enumerate() {
        let got = x.to_vec::<i32>().unwrap();
        assert_bits(&got[r * n..(r + 1) * n], &want[r * n..(r + 1) * n], format!("group reduce_scatter in place ({what})"));
    }
    // all_to_all in place: rank r's block q goes to rank q's block r.
    let mut ts: Vec<_> = comms.iter().map(|c| t(c, &data::<i32>(c.rank(), n * world, round))).collect();
    let mut g = Group::new();
    for (c, x) in comms.iter().zip(ts.iter_mut()) {
        g.all_to_all_single_in_place(c, x);
    }
    g.run().unwrap();
    for (r, x) in ts.iter().enumerate() {
        let want: Vec<i32> = (0..world).flat_map(|q| data::<i32>(q, n * world, round)[r * n..(r + 1) * n].to_vec()).collect();
        assert_bits(&x.to_vec::<i32>().unwrap(), &want, format!("group all_to_all in place ({what})"));
    }
}

/// A group beside a thread that issues non-blocking ops on the same communicators: the
/// thread issues an all_reduce on rank 1, the group starts (rank 1's queued op runs first,
/// and waits for rank 0's), then the thread issues the same all_reduce on rank 0 while the
/// group runs it. Two threads in calls on one communicator at once: the thread's call is
/// refused with `InvalidArgument`, rank 0's communicator is aborted, and every op ends at
/// once with an error — none waits out its timeout (the group holding rank 0 while rank
/// 1's op waits for rank 0 would otherwise hang until then).
pub fn group_beside_a_thread_issuing_works<D: TestDevice>() {
    let timeout = std::time::Duration::from_secs(5);
    let devices = (0..2).map(D::for_rank).collect();
    let comms = Communicator::init_all(devices, D::configure(CommConfig::default().with_timeout(timeout))).unwrap();
    let xs: Vec<_> = comms.iter().map(|c| t(c, &reduce_input::<i32>(ReduceOp::Sum, c.rank(), 6, 0))).collect();
    let mut ys: Vec<_> = comms.iter().map(|c| t(c, &reduce_input::<i32>(ReduceOp::Max, c.rank(), 6, 0))).collect();
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let (comms, xs) = (&comms, &xs);
        let thread = s.spawn(move || -> (ruccl::Result<()>, ruccl::Result<()>) {
            let second = comms[1].all_reduce_async(&xs[1], ReduceOp::Sum);
            tx.send(()).unwrap();
            // The group is under way (running rank 1's queued op) by now.
            std::thread::sleep(std::time::Duration::from_millis(100));
            let first = comms[0].all_reduce_async(&xs[0], ReduceOp::Sum).map(|_| ());
            (first, second.and_then(|w| w.wait()))
        });
        rx.recv().unwrap();
        let mut g = Group::new();
        for (c, y) in comms.iter().zip(ys.iter_mut()) {
            g.all_reduce(c, y, ReduceOp::Max);
        }
        let group = g.run();
        let (first, second) = thread.join().unwrap();
        let e = first.expect_err("the thread's call on a communicator the group runs");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("another thread's call on it was in flight"), "{e}");
        assert!(group.is_err() && second.is_err(), "group: {group:?}, thread's first op: {second:?}");
    });
    assert!(started.elapsed() < timeout, "took {:?}: an op waited out its timeout", started.elapsed());
}

/// Several calls per communicator in one group (NCCL allows any number of collectives per
/// communicator between `ncclGroupStart` and `ncclGroupEnd`): each rank's calls run in the
/// order they were added, whether the group lists them rank by rank or call by call, and
/// small ops (run without messages) mixed with large ones (planned) each get their own
/// result.
pub fn group_with_several_calls_per_communicator<D: TestDevice>(world: usize) {
    let devices = (0..world).map(D::for_rank).collect();
    let config = CommConfig::default().with_timeout(TEST_TIMEOUT);
    let comms = Communicator::init_all(devices, D::configure(config)).unwrap();
    for (round, rank_by_rank) in [(0, true), (1, false), (2, true)] {
        let root = round % world;
        let what = format!("round {round}, {}", if rank_by_rank { "rank by rank" } else { "call by call" });
        let (small, large) = (5, 70_000);
        let input = |c: &Communicator<D>, op, n| t(c, &reduce_input::<i32>(op, c.rank(), n, round));
        let mut sums: Vec<_> = comms.iter().map(|c| input(c, ReduceOp::Sum, large)).collect();
        let mut casts: Vec<_> = comms.iter().map(|c| t(c, &data::<i32>(c.rank(), small, round))).collect();
        let mut maxes: Vec<_> = comms.iter().map(|c| input(c, ReduceOp::Max, small)).collect();
        // Rank by rank, a ring of sends and receives comes first (they run together).
        let sends: Vec<_> = comms.iter().map(|c| t(c, &data::<i32>(c.rank(), small, round))).collect();
        let mut recvs: Vec<_> = comms.iter().map(|c| zeros(c, small)).collect();
        let mut g = Group::new();
        let mut calls: Vec<_> = comms.iter().zip(sums.iter_mut().zip(casts.iter_mut().zip(maxes.iter_mut()))).collect();
        if rank_by_rank {
            for ((c, (s, (b, m))), (x, y)) in calls.iter_mut().zip(sends.iter().zip(recvs.iter_mut())) {
                let r = c.rank();
                if world > 1 {
                    g.send(c, x, (r + 1) % world).recv(c, y, (r + world - 1) % world);
                }
                g.all_reduce(c, s, ReduceOp::Sum).broadcast(c, b, root).all_reduce(c, m, ReduceOp::Max);
            }
        } else {
            let mut rest = Vec::new();
            for (c, (s, (b, m))) in calls.iter_mut() {
                g.all_reduce(c, s, ReduceOp::Sum);
                rest.push((*c, b, m));
            }
            let mut last = Vec::new();
            for (c, b, m) in rest {
                g.broadcast(c, b, root);
                last.push((c, m));
            }
            for (c, m) in last {
                g.all_reduce(c, m, ReduceOp::Max);
            }
        }
        g.run().unwrap_or_else(|e| panic!("{what}: {e}"));
        for r in 0..world {
            assert_bits(&sums[r].to_vec::<i32>().unwrap(), &reduced::<i32>(ReduceOp::Sum, world, large, round), format!("sum ({what})"));
            assert_bits(&casts[r].to_vec::<i32>().unwrap(), &data::<i32>(root, small, round), format!("broadcast ({what})"));
            assert_bits(&maxes[r].to_vec::<i32>().unwrap(), &reduced::<i32>(ReduceOp::Max, world, small, round), format!("max ({what})"));
            if rank_by_rank && world > 1 {
                let from = (r + world - 1) % world;
                assert_bits(&recvs[r].to_vec::<i32>().unwrap(), &data::<i32>(from, small, round), format!("recv ({what})"));
            }
        }
    }
}

/// Sends to and receives from self in a group (NCCL allows them between `ncclGroupStart` and
/// `ncclGroupEnd`): an all_to_all written as every rank sending its block `q` to rank `q` and
/// receiving block `q` from it, self included, as torch's all_to_all over NCCL does; with a
/// collective before and after it on every rank, each run in its order.
pub fn group_sends_and_receives_to_self<D: TestDevice>(world: usize) {
    let devices = (0..world).map(D::for_rank).collect();
    let config = CommConfig::default().with_timeout(TEST_TIMEOUT);
    let comms = Communicator::init_all(devices, D::configure(config)).unwrap();
    let n = 7;
    for round in 0..2 {
        // Rank r's block for q: data(r * world + q).
        let block = |r: usize, q: usize| data::<i32>(r * world + q, n, round);
        let sends: Vec<Vec<Tensor<D>>> = comms.iter().map(|c| (0..world).map(|q| t(c, &block(c.rank(), q))).collect()).collect();
        let mut recvs: Vec<Vec<Tensor<D>>> = comms.iter().map(|c| (0..world).map(|_| zeros(c, n)).collect()).collect();
        let mut before: Vec<_> = comms.iter().map(|c| t(c, &reduce_input::<i32>(ReduceOp::Sum, c.rank(), n, round))).collect();
        let mut after: Vec<_> = comms.iter().map(|c| t(c, &reduce_input::<i32>(ReduceOp::Max, c.rank(), n, round))).collect();
        let mut g = Group::new();
        for (((c, s), r), (b, a)) in comms.iter().zip(&sends).zip(recvs.iter_mut()).zip(before.iter_mut().zip(after.iter_mut())) {
            g.all_reduce(c, b, ReduceOp::Sum);
            for (q, (x, y)) in s.iter().zip(r.iter_mut()).enumerate() {
                g.send(c, x, q).recv(c, y, q);
            }
            g.all_reduce(c, a, ReduceOp::Max);
        }
        let results = g.run_each().unwrap();
        assert!(results.iter().all(Result::is_ok), "round {round}: {results:?}");
        assert_eq!(results.len(), world * (2 + 2 * world));
        for (me, got) in recvs.iter().enumerate() {
            for (q, y) in got.iter().enumerate() {
                assert_bits(&y.to_vec::<i32>().unwrap(), &block(q, me), format!("round {round}: rank {me}'s block from {q}"));
            }
            assert_bits(&before[me].to_vec::<i32>().unwrap(), &reduced::<i32>(ReduceOp::Sum, world, n, round), "sum");
            assert_bits(&after[me].to_vec::<i32>().unwrap(), &reduced::<i32>(ReduceOp::Max, world, n, round), "max");
        }
    }
}

/// What a group refuses of sends and receives to self, before anything runs (the
/// communicators stay usable): a send without its receive, a pair that differs in length or
/// dtype, and a pair whose tensor another call of the group writes; and outside a group, a
/// send to self at all.
pub fn group_refuses_unmatched_sends_to_self<D: TestDevice>() {
    let devices = (0..2).map(D::for_rank).collect();
    let config = CommConfig::default().with_timeout(TEST_TIMEOUT);
    let comms = Communicator::init_all(devices, D::configure(config)).unwrap();
    let c = &comms[0];
    let x = t(c, &[1, 2, 3]);
    let mut y = zeros(c, 3);
    let mut short = zeros(c, 2);
    let refused = |e: ruccl::CollectiveError, words: &[&str]| {
        assert_eq!(e.kind(), ruccl::ErrorKind::InvalidArgument, "{e}");
        assert!(words.iter().all(|w| e.to_string().contains(w)), "{words:?} not in: {e}");
    };
    let mut g = Group::new();
    g.send(c, &x, 0);
    let e = g.run().unwrap_err();
    assert_eq!(e.context().op.as_deref(), Some("send to itself (group call #0)"), "{e}");
    refused(e, &["rank 0 sends to itself", "without a matching receive from itself"]);
    let mut g = Group::new();
    g.send(c, &x, 0).recv(c, &mut short, 0);
    let e = g.run().unwrap_err();
    assert_eq!(e.context().op.as_deref(), Some("send/recv to itself (group calls #0 and #1)"), "{e}");
    refused(e, &["3 x i32 sent, 2 x i32 received"]);
    // Another call on the received tensor's memory (a second handle of its buffer): refused,
    // whether it reads it or writes it, and so is one that writes the sent tensor.
    let alias = |t: &Tensor<D>| Tensor::from_buffer(c.device(), t.buffer().clone(), ruccl::DType::I32, &[3]).unwrap();
    let (mut z, mut w) = (t(c, &[1, 2, 3]), alias(&y));
    let (z2, mut x2) = (alias(&z), alias(&x));
    let mut g = Group::new();
    g.send(c, &x, 0).recv(c, &mut z, 0).send(c, &z2, 1);
    refused(g.run().unwrap_err(), &["call #2 (send) reads the same memory"]);
    let mut g = Group::new();
    g.all_reduce(c, &mut w, ReduceOp::Sum).send(c, &x, 0).recv(c, &mut y, 0);
    refused(g.run().unwrap_err(), &["call #0 (all_reduce) writes the same memory"]);
    let mut g = Group::new();
    g.send(c, &x, 0).recv(c, &mut y, 0).recv(c, &mut x2, 1);
    refused(g.run().unwrap_err(), &["call #2 (recv) writes the same memory"]);
    refused(c.send(&x, 0).unwrap_err(), &["cannot send to itself outside a group", "`Group`"]);
    // Nothing ran: the receive's tensor is untouched and both communicators still work.
    assert_eq!(y.to_vec::<i32>().unwrap(), vec![0; 3]);
    let mut g = Group::new();
    g.send(c, &x, 0).recv(c, &mut y, 0);
    g.run().unwrap();
    assert_eq!(y.to_vec::<i32>().unwrap(), vec![1, 2, 3]);
    let mut a: Vec<_> = comms.iter().map(|c| t(c, &[1])).collect();
    let mut g = Group::new();
    for (c, a) in comms.iter().zip(a.iter_mut()) {
        g.all_reduce(c, a, ReduceOp::Sum);
    }
    g.run().unwrap();
    assert_eq!(a[1].to_vec::<i32>().unwrap(), vec![2]);
}

/// `all_to_all_single_with_splits` for every rank from one thread, twice in one group (rows
/// of two elements; blocks of zero to two rows per ordered pair), with a ring of sends and
/// receives between the two: each call gets its own blocks.
pub fn group_all_to_all_v<D: TestDevice>(world: usize) {
    let devices = (0..world).map(D::for_rank).collect();
    let config = CommConfig::default().with_timeout(TEST_TIMEOUT);
    let comms = Communicator::init_all(devices, D::configure(config)).unwrap();
    let rows = |salt: usize, q: usize, k: usize| (salt + q + 2 * k) % 3;
    let splits = |salt: usize, r: usize| -> (Vec<usize>, Vec<usize>) {
        ((0..world).map(|q| rows(salt, q, r)).collect(), (0..world).map(|k| rows(salt, r, k)).collect())
    };
    let len = |salt: usize, q: usize| (0..world).map(|k| rows(salt, q, k)).sum::<usize>() * 2;
    let all: Vec<[(Vec<usize>, Vec<usize>); 2]> = (0..world).map(|r| [splits(0, r), splits(1, r)]).collect();
    let xs: Vec<[Tensor<D>; 2]> = comms
        .iter()
        .map(|c| {
            let r = c.rank();
            [0, 1].map(|s| Tensor::from_slice(c.device(), &data::<i32>(r, len(s, r), s), &[len(s, r) / 2, 2]).unwrap())
        })
        .collect();
    let mut ys: Vec<[Tensor<D>; 2]> = comms
        .iter()
        .map(|c| [0, 1].map(|s| Tensor::zeros(c.device(), ruccl::DType::I32, &[all[c.rank()][s].0.iter().sum(), 2]).unwrap()))
        .collect();
    let sends: Vec<_> = comms.iter().map(|c| t(c, &data::<i32>(c.rank(), 5, 9))).collect();
    let mut recvs: Vec<_> = comms.iter().map(|c| zeros(c, 5)).collect();
    let mut g = Group::new();
    for ((c, (x, y)), (s, v)) in comms.iter().zip(xs.iter().zip(ys.iter_mut())).zip(sends.iter().zip(recvs.iter_mut())) {
        let r = c.rank();
        let [y0, y1] = y;
        g.all_to_all_single_with_splits(c, y0, &x[0], &all[r][0].0, &all[r][0].1);
        if world > 1 {
            g.send(c, s, (r + 1) % world).recv(c, v, (r + world - 1) % world);
        }
        g.all_to_all_single_with_splits(c, y1, &x[1], &all[r][1].0, &all[r][1].1);
    }
    g.run().unwrap();
    for (r, y) in ys.iter().enumerate() {
        for (s, got) in y.iter().enumerate() {
            let want: Vec<i32> = (0..world)
                .flat_map(|q| {
                    let first = (0..r).map(|k| rows(s, q, k)).sum::<usize>() * 2;
                    data::<i32>(q, len(s, q), s)[first..first + rows(s, q, r) * 2].to_vec()
                })
                .collect();
            assert_bits(&got.to_vec::<i32>().unwrap(), &want, format!("rank {r}, call {s}"));
        }
        if world > 1 {
            assert_bits(&recvs[r].to_vec::<i32>().unwrap(), &data::<i32>((r + world - 1) % world, 5, 9), "ring");
        }
    }
}

/// A send to self in a group runs after the non-blocking ops its communicator issued before
/// the group (as every call does): it sends what they left, not what was there at issue.
/// A group whose first call on rank 1 is what rank 0's earlier non-blocking op needs: the
/// group starts only once that op is done, so with no other thread to issue rank 1's call
/// both time out. The group's error says why (its advice names the earlier op and the
/// group), where it blamed rank 1 for "not issuing" the call the group held.
pub fn group_held_up_by_an_earlier_op_says_so<D: TestDevice>() {
    let timeout = std::time::Duration::from_millis(500);
    let devices = (0..2).map(D::for_rank).collect();
    let comms = Communicator::init_all(devices, D::configure(CommConfig::default().with_timeout(timeout))).unwrap();
    let x = t(&comms[0], &[1, 2, 3]);
    let mut ys: Vec<_> = comms.iter().map(|c| t(c, &[4, 5, 6])).collect();
    let work = comms[0].all_reduce_async(&x, ReduceOp::Sum).unwrap();
    let (y0, y1) = ys.split_at_mut(1);
    let mut g = Group::new();
    g.all_reduce(&comms[1], &mut y1[0], ReduceOp::Sum).all_reduce(&comms[0], &mut y0[0], ReduceOp::Sum);
    let e = g.run().unwrap_err();
    let text = format!("{e:?}");
    assert_eq!(e.kind(), ruccl::ErrorKind::Timeout, "{e}");
    assert!(text.contains("a non-blocking op issued before this group needs a call that is in the group"), "{text}");
    assert!(work.wait().is_err(), "the earlier op cannot have finished");
}

pub fn group_self_copy_after_earlier_works<D: TestDevice>() {
    let devices = (0..2).map(D::for_rank).collect();
    let config = CommConfig::default().with_timeout(TEST_TIMEOUT);
    let comms = Communicator::init_all(devices, D::configure(config)).unwrap();
    for round in 0..3 {
        let xs: Vec<_> = comms.iter().map(|c| t(c, &vec![c.rank() as i32 + 1; 5000])).collect();
        let mut ys: Vec<_> = comms.iter().map(|c| zeros(c, 5000)).collect();
        let works: Vec<_> = comms.iter().zip(&xs).map(|(c, x)| c.all_reduce_async(x, ReduceOp::Sum).unwrap()).collect();
        let mut g = Group::new();
        for ((c, x), y) in comms.iter().zip(&xs).zip(ys.iter_mut()) {
            g.send(c, x, c.rank()).recv(c, y, c.rank());
        }
        g.run().unwrap();
        works.iter().for_each(|w| w.wait().unwrap());
        for y in &ys {
            assert_bits(&y.to_vec::<i32>().unwrap(), &[3; 5000], format!("round {round}: the copy of the reduced tensor"));
        }
    }
}
