//! Every operation of the peer API, with 1–8 peers arriving in random order and many
//! consecutive operations per registration (burn's global barrier hung on the second one).

use half::{bf16, f16};
use ruccl::api::{ReduceOperation, Strategy, all_gather, all_reduce, barrier, broadcast, reduce, reduce_scatter};
use ruccl::{ReduceOp, Tensor};

use crate::{HostLike, Peer, Tb, config, elem, ids_for, input, reduced, session, tensor, values};

/// One round of every operation; returns how many ran.
fn round<B: HostLike>(p: &mut Peer, it: usize) -> usize {
    let n = p.n;
    let what = |op: &str| format!("{n} peers, round {it}, {op} on peer {}", p.id);
    let salt = it as u64;
    p.rng.pause();

    let shape = [3, 1 + it % 4];
    let len = shape[0] * shape[1];
    let got = all_reduce::<B>(p.id, tensor(&p.dev, &input(p.rank, len, salt), &shape), ReduceOp::Sum)
        .unwrap_or_else(|e| panic!("{}: {e}", what("all_reduce")));
    assert_eq!((got.shape(), values(&got)), (&shape[..], reduced(n, len, salt, false)), "{}", what("all_reduce"));

    p.rng.pause();
    let root = p.ids[it % n];
    let got = reduce::<B>(p.id, tensor(&p.dev, &input(p.rank, 5, salt), &[5]), ReduceOperation::Mean, root)
        .unwrap_or_else(|e| panic!("{}: {e}", what("reduce")));
    assert_eq!(got.map(|t| values(&t)), (p.id == root).then(|| reduced(n, 5, salt, true)), "{}", what("reduce"));

    p.rng.pause();
    let sender = (it * 3) % n;
    let mine = (p.rank == sender).then(|| tensor(&p.dev, &input(sender, 6, salt), &[2, 3]));
    let got = broadcast::<B>(p.id, mine).unwrap_or_else(|e| panic!("{}: {e}", what("broadcast")));
    assert_eq!((got.shape(), values(&got)), (&[2, 3][..], input(sender, 6, salt)), "{}", what("broadcast"));

    p.rng.pause();
    let got = all_gather::<B>(p.id, tensor(&p.dev, &input(p.rank, 4, salt), &[2, 2]))
        .unwrap_or_else(|e| panic!("{}: {e}", what("all_gather")));
    let want: Vec<f32> = (0..n).flat_map(|r| input(r, 4, salt)).collect();
    assert_eq!((got.shape(), values(&got)), (&[2 * n, 2][..], want), "{}", what("all_gather"));

    p.rng.pause();
    let got = reduce_scatter::<B>(p.id, tensor(&p.dev, &input(p.rank, 6 * n, salt), &[2 * n, 3]), ReduceOperation::Sum)
        .unwrap_or_else(|e| panic!("{}: {e}", what("reduce_scatter")));
    let want = reduced(n, 6 * n, salt, false)[6 * p.rank..6 * (p.rank + 1)].to_vec();
    assert_eq!((got.shape(), values(&got)), (&[2, 3][..], want), "{}", what("reduce_scatter"));

    p.rng.pause();
    barrier::<B>(p.id).unwrap_or_else(|e| panic!("{}: {e}", what("barrier")));
    6
}

#[test]
fn every_operation_many_times_with_1_to_8_peers_in_random_order() {
    for n in 1..=8 {
        let ids = ids_for(n, 70 + n as u64);
        let ran =
            session::<Tb<10>, usize>(&ids, &config(n), n as u64, |p| (0..40).map(|it| round::<Tb<10>>(p, it)).sum());
        assert_eq!(ran, vec![240usize; n], "{n} peers");
    }
}

#[test]
fn every_operation_with_every_strategy() {
    for (i, s) in [Strategy::Centralized, Strategy::Tree(2), Strategy::Tree(5), Strategy::Ring].into_iter().enumerate()
    {
        let n = 3 + i;
        let config = config(n)
            .with_local_all_reduce_strategy(s)
            .with_local_reduce_strategy(Strategy::Ring)
            .with_local_broadcast_strategy(s);
        let ran = session::<Tb<11>, _>(&ids_for(n, 90 + i as u64), &config, 9, |p| {
            (0..10).map(|it| round::<Tb<11>>(p, it)).sum::<usize>()
        });
        assert_eq!(ran, vec![60; n], "{s}");
    }
}

#[test]
fn a_thousand_consecutive_small_all_reduces() {
    let n = 4;
    let ids = ids_for(n, 5);
    let sums = session::<Tb<12>, _>(&ids, &config(n), 12, |p| {
        let mut last = 0.0;
        for it in 0..1000 {
            let t = all_reduce::<Tb<12>>(p.id, tensor(&p.dev, &[(p.rank + it) as f32], &[1]), ReduceOp::Sum).unwrap();
            last = values(&t)[0];
            assert_eq!(last, (6 + 4 * it) as f32, "round {it} on peer {}", p.id);
        }
        last
    });
    assert_eq!(sums, vec![(6 + 4 * 999) as f32; n]);
}

#[test]
fn every_float_dtype() {
    let n = 3;
    session::<Tb<13>, _>(&ids_for(n, 6), &config(n), 13, |p| {
        let len = 9;
        let want = reduced(n, len, 1, false);
        let mine = input(p.rank, len, 1);
        let t = Tensor::from_vec(&p.dev, mine.iter().map(|&x| f64::from(x)).collect::<Vec<_>>(), &[len]).unwrap();
        let got = all_reduce::<Tb<13>>(p.id, t, ReduceOp::Max).unwrap().to_vec::<f64>().unwrap();
        let max: Vec<f64> =
            (0..len).map(|i| (0..n).map(|r| f64::from(elem(r, i, 1))).fold(f64::MIN, f64::max)).collect();
        assert_eq!(got, max);
        let t = Tensor::from_vec(&p.dev, mine.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>(), &[len]).unwrap();
        let got = all_reduce::<Tb<13>>(p.id, t, ReduceOperation::Sum).unwrap().to_vec::<f16>().unwrap();
        assert_eq!(got, want.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>());
        let t = Tensor::from_vec(&p.dev, mine.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>(), &[len]).unwrap();
        let sender = (p.rank == 2).then_some(t);
        let got = broadcast::<Tb<13>>(p.id, sender).unwrap().to_vec::<bf16>().unwrap();
        assert_eq!(got, input(2, len, 1).iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>());
    });
}

#[test]
fn scalars_and_tensors_of_many_dimensions() {
    let n = 3;
    session::<Tb<14>, _>(&ids_for(n, 7), &config(n), 14, |p| {
        let got = all_gather::<Tb<14>>(p.id, tensor(&p.dev, &[p.rank as f32], &[])).unwrap();
        assert_eq!((got.shape(), values(&got)), (&[3][..], vec![0.0, 1.0, 2.0]));
        // Eight dimensions: more than an agreement record carries, so broadcast sends the
        // shape in a second step.
        let shape = [2, 1, 3, 1, 1, 2, 1, 2];
        let data = input(1, 24, 3);
        let mine = (p.rank == 1).then(|| tensor(&p.dev, &data, &shape));
        let got = broadcast::<Tb<14>>(p.id, mine).unwrap();
        assert_eq!((got.shape(), values(&got)), (&shape[..], data));
        let got = all_reduce::<Tb<14>>(p.id, tensor(&p.dev, &input(p.rank, 24, 4), &shape), ReduceOp::Sum).unwrap();
        assert_eq!((got.shape(), values(&got)), (&shape[..], reduced(n, 24, 4, false)));
        let got = all_reduce::<Tb<14>>(p.id, tensor(&p.dev, &[2.0], &[]), ReduceOperation::Mean).unwrap();
        assert_eq!((got.shape(), values(&got)), (&[][..], vec![2.0]));
    });
}

#[test]
fn ranks_follow_peer_id_order_not_arrival() {
    // Ids 40, 7, 1000 register in shuffled order; ranks are 7 -> 0, 40 -> 1, 1000 -> 2.
    let ids = [40u64, 7, 1000];
    let ranks = session::<Tb<15>, _>(&ids, &config(3), 15, |p| {
        let got = all_gather::<Tb<15>>(p.id, tensor(&p.dev, &[p.id.get() as f32], &[1])).unwrap();
        assert_eq!(values(&got), vec![7.0, 40.0, 1000.0]);
        let got = reduce_scatter::<Tb<15>>(p.id, tensor(&p.dev, &[1.0, 2.0, 3.0], &[3]), ReduceOp::Sum).unwrap();
        assert_eq!(values(&got), vec![3.0 * (p.rank + 1) as f32]);
        p.id.get()
    });
    assert_eq!(ranks, vec![7, 40, 1000]);
}

/// A framework tensor and its clone share storage: the input a peer passes must read the same
/// after the call, through a second handle on its buffer.
#[test]
fn inputs_are_left_unchanged_and_results_are_fresh_tensors() {
    let n = 3;
    session::<Tb<16>, _>(&ids_for(n, 16), &config(n), 16, |p| {
        let mine = input(p.rank, 6, 9);
        let fresh = || tensor(&p.dev, &mine, &[3, 2]);
        let alias = |t: &Tensor<ruccl::HostDevice>| {
            Tensor::from_buffer(&p.dev, t.buffer().clone(), t.dtype(), t.shape()).unwrap()
        };

        let t = fresh();
        let kept = alias(&t);
        let got = all_reduce::<Tb<16>>(p.id, t, ReduceOp::Sum).unwrap();
        assert_eq!(values(&got), reduced(n, 6, 9, false));
        assert!(!got.buffer().same(kept.buffer()), "all_reduce returned the input's memory");
        assert_eq!(values(&kept), mine, "all_reduce wrote into its input");

        let t = fresh();
        let kept = alias(&t);
        let got = reduce::<Tb<16>>(p.id, t, ReduceOperation::Mean, p.ids[1]).unwrap();
        assert_eq!(got.map(|t| values(&t)), (p.rank == 1).then(|| reduced(n, 6, 9, true)));
        assert_eq!(values(&kept), mine, "reduce wrote into its input");

        let t = tensor(&p.dev, &input(p.rank, 3 * n, 9), &[n, 3]);
        let kept = alias(&t);
        let got = reduce_scatter::<Tb<16>>(p.id, t, ReduceOp::Sum).unwrap();
        assert_eq!(values(&got), reduced(n, 3 * n, 9, false)[3 * p.rank..3 * p.rank + 3].to_vec());
        assert_eq!(values(&kept), input(p.rank, 3 * n, 9), "reduce_scatter wrote into its input");

        let t = fresh();
        let kept = alias(&t);
        let got = all_gather::<Tb<16>>(p.id, t).unwrap();
        assert_eq!(values(&got), (0..n).flat_map(|r| input(r, 6, 9)).collect::<Vec<_>>());
        assert_eq!(values(&kept), mine, "all_gather wrote into its input");
    });
}

/// A tensor whose only handle the caller hands over takes all_reduce's and reduce's result in
/// its own memory: nothing else can see the input change, and nothing is allocated.
#[test]
fn an_input_nothing_else_shares_takes_the_result() {
    let n = 3;
    session::<Tb<18>, _>(&ids_for(n, 18), &config(n), 17, |p| {
        for it in 0..3u64 {
            let t = tensor(&p.dev, &input(p.rank, 6, it), &[3, 2]);
            // The input lives until the call returns, so a new output would have another id.
            let id = t.buffer().id();
            let got = all_reduce::<Tb<18>>(p.id, t, ReduceOp::Sum).unwrap();
            assert_eq!((got.shape(), values(&got)), (&[3, 2][..], reduced(n, 6, it, false)));
            assert_eq!(got.buffer().id(), id, "all_reduce allocated a new tensor for an input only it held");

            let root = p.ids[it as usize % n];
            let t = tensor(&p.dev, &input(p.rank, 5, it), &[5]);
            let id = t.buffer().id();
            let got = reduce::<Tb<18>>(p.id, t, ReduceOperation::Mean, root).unwrap();
            assert_eq!(got.as_ref().map(values), (p.id == root).then(|| reduced(n, 5, it, true)));
            if let Some(got) = got {
                assert_eq!(got.buffer().id(), id, "reduce allocated a new tensor for an input only it held");
            }
        }
    });
}

/// Receivers pass `None` and learn the sender's dtype and shape, whatever they are: every
/// float dtype, scalars, empty tensors, and more dimensions than the metadata record holds.
#[test]
fn broadcast_receivers_learn_dtype_and_shape_from_the_sender() {
    let n = 4;
    session::<Tb<17>, _>(&ids_for(n, 17), &config(n), 17, |p| {
        let shapes: [&[usize]; 5] = [&[], &[0, 3], &[5], &[2, 1, 3], &[1, 2, 1, 2, 1, 1, 2, 1]];
        for (k, shape) in shapes.into_iter().enumerate() {
            let len: usize = shape.iter().product();
            let data = input(k, len, 4);
            let sender = k % n;
            let as_f64 = |d: &[f32]| d.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
            let as_bf16 = |d: &[f32]| d.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
            let mine = (p.rank == sender).then(|| match k % 3 {
                0 => Tensor::from_vec(&p.dev, as_f64(&data), shape).unwrap(),
                1 => Tensor::from_vec(&p.dev, as_bf16(&data), shape).unwrap(),
                _ => tensor(&p.dev, &data, shape),
            });
            let got = broadcast::<Tb<17>>(p.id, mine).unwrap();
            assert_eq!(got.shape(), shape, "shape {k}");
            assert_eq!(got.device(), &p.dev);
            match k % 3 {
                0 => assert_eq!(got.to_vec::<f64>().unwrap(), as_f64(&data)),
                1 => assert_eq!(got.to_vec::<bf16>().unwrap(), as_bf16(&data)),
                _ => assert_eq!(values(&got), data),
            }
        }
    });
}

/// The promise of the seed, on every strategy and peer count (1 included, where a reduction
/// has nobody to wait for): the input of `all_reduce`, `reduce` and `broadcast` reads the
/// same afterwards through another handle on its memory — a framework's clone — and the
/// result of `all_reduce` never is that memory.
#[test]
fn inputs_are_left_unchanged_on_every_strategy_and_peer_count() {
    let strategies = [Strategy::Centralized, Strategy::Tree(2), Strategy::Ring, Strategy::Auto];
    for (k, strategy) in strategies.into_iter().enumerate() {
        for n in [1, 2, 4] {
            let config = config(n)
                .with_local_all_reduce_strategy(strategy)
                .with_local_reduce_strategy(strategy)
                .with_local_broadcast_strategy(strategy);
            session::<Tb<46>, _>(&ids_for(n, 46 + k as u64), &config, 46, |p| {
                let what = format!("{strategy:?}, {n} peers, peer {}", p.id);
                let mine = input(p.rank, 7, 3);
                let alias = |t: &Tensor<ruccl::HostDevice>| {
                    Tensor::from_buffer(&p.dev, t.buffer().clone(), t.dtype(), t.shape()).unwrap()
                };
                for op in [ReduceOp::Sum, ReduceOp::Avg] {
                    let t = tensor(&p.dev, &mine, &[7]);
                    let kept = alias(&t);
                    let got = all_reduce::<Tb<46>>(p.id, t, op).unwrap();
                    assert_eq!(values(&got), reduced(n, 7, 3, op == ReduceOp::Avg), "{what}");
                    assert!(!got.buffer().same(kept.buffer()), "{what}: all_reduce returned its input's memory");
                    assert_eq!(values(&kept), mine, "{what}: all_reduce({op}) wrote into its input");
                }
                let t = tensor(&p.dev, &mine, &[7]);
                let kept = alias(&t);
                reduce::<Tb<46>>(p.id, t, ReduceOp::Sum, p.ids[n - 1]).unwrap();
                assert_eq!(values(&kept), mine, "{what}: reduce wrote into its input");
                let sending = p.rank == 0;
                let t = tensor(&p.dev, &mine, &[7]);
                let kept = alias(&t);
                let got = broadcast::<Tb<46>>(p.id, sending.then_some(t)).unwrap();
                assert_eq!(values(&got), input(0, 7, 3), "{what}");
                assert_eq!(values(&kept), mine, "{what}: broadcast wrote into its input");
            });
        }
    }
}
