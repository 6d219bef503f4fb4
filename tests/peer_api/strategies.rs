//! Each strategy gives the exact result for every size below 64 and every peer count up to 8
//! (sizes smaller than, equal to and not divisible by the peer count) — the sweep burn's ring,
//! with its 35 wrong (size, peers) pairs, never had. One registration per peer count runs all
//! 192 operations back to back.

use ruccl::api::{ReduceOperation, Strategy, all_reduce, broadcast, reduce};

use crate::{HostLike, Tb, config, ids_for, input, reduced, session, tensor, values};

fn sweep<B: HostLike>(strategy: Strategy, seed: u64) {
    for n in 1..=8 {
        let ids = ids_for(n, seed * 31 + n as u64);
        let config = config(n)
            .with_local_all_reduce_strategy(strategy)
            .with_local_reduce_strategy(strategy)
            .with_local_broadcast_strategy(strategy);
        let ops = session::<B, _>(&ids, &config, seed, |p| {
            let mut ops = 0;
            for size in 0..64usize {
                let what = |op: &str| format!("{strategy}, {n} peers, {size} elements, {op} on peer {}", p.id);
                let mean = size % 2 == 1;
                let op = if mean { ReduceOperation::Mean } else { ReduceOperation::Sum };
                p.rng.pause();

                let salt = size as u64;
                let t = tensor(&p.dev, &input(p.rank, size, salt), &[size]);
                let got = all_reduce::<B>(p.id, t, op).unwrap_or_else(|e| panic!("{}: {e}", what("all_reduce")));
                assert_eq!(values(&got), reduced(n, size, salt, mean), "{}", what("all_reduce"));
                assert_eq!(got.device(), &p.dev, "{}", what("all_reduce"));

                let root = p.ids[(size * 5 + 1) % n];
                let salt = size as u64 + 100;
                let t = tensor(&p.dev, &input(p.rank, size, salt), &[size]);
                let got = reduce::<B>(p.id, t, op, root).unwrap_or_else(|e| panic!("{}: {e}", what("reduce")));
                match got {
                    Some(t) if p.id == root => {
                        assert_eq!(values(&t), reduced(n, size, salt, mean), "{}", what("reduce"))
                    }
                    None if p.id != root => {}
                    other => panic!("{}: root {root} got {:?}", what("reduce"), other.is_some()),
                }

                let sender = (size * 7 + 3) % n;
                let shape = if size > 0 && size % 4 == 0 { vec![size / 4, 4] } else { vec![size] };
                let data = input(sender, size, 200);
                let mine = (p.rank == sender).then(|| tensor(&p.dev, &data, &shape));
                let got = broadcast::<B>(p.id, mine).unwrap_or_else(|e| panic!("{}: {e}", what("broadcast")));
                assert_eq!(got.shape(), &shape[..], "{}", what("broadcast"));
                assert_eq!(values(&got), data, "{}", what("broadcast"));
                ops += 3;
            }
            ops
        });
        assert_eq!(ops, vec![192; n]);
    }
}

#[test]
fn centralized_every_size_below_64_and_peer_count_up_to_8() {
    sweep::<Tb<1>>(Strategy::Centralized, 1);
}

#[test]
fn binary_tree_every_size_below_64_and_peer_count_up_to_8() {
    sweep::<Tb<2>>(Strategy::Tree(2), 2);
}

#[test]
fn ternary_tree_every_size_below_64_and_peer_count_up_to_8() {
    sweep::<Tb<3>>(Strategy::Tree(3), 3);
}

#[test]
fn ring_every_size_below_64_and_peer_count_up_to_8() {
    sweep::<Tb<4>>(Strategy::Ring, 4);
}

#[test]
fn auto_every_size_below_64_and_peer_count_up_to_8() {
    sweep::<Tb<5>>(Strategy::Auto, 5);
}

/// The strategies are different plans, not aliases: the core's flight recorder is private to
/// the API, so this checks what each one is built from instead.
#[test]
fn strategies_map_to_distinct_algorithms() {
    use ruccl::Algorithm;
    let algos: Vec<Algorithm> =
        [Strategy::Centralized, Strategy::Tree(2), Strategy::Tree(3), Strategy::Ring, Strategy::Auto]
            .into_iter()
            .map(Strategy::algorithm)
            .collect();
    for (i, a) in algos.iter().enumerate() {
        assert!(!algos[i + 1..].contains(a), "{a} appears twice in {algos:?}");
    }
}
