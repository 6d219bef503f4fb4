//! The simulator on `all_to_all_single_with_splits`' plans, which `build` does not make (the
//! communicator builds them from each rank's blocks).

use super::{Flow, IN, OUT, RankSim, SCRATCH, run_ranks};

/// `all_to_all_single_with_splits` ([`crate::algo::all_to_all_v`]): blocks of every length, zero
/// included, per ordered pair, rows of one or three elements, land where they belong on
/// every rank, without deadlock, under every interleaving tried and either flow, whole or cut
/// into pieces as over a network.
#[test]
fn uneven_all_to_all_delivers_every_block() {
    for n in 1..=6 {
        for row in [1usize, 3] {
            for (seed, max) in (0..30u64).flat_map(|s| [None, Some(2), Some(5)].map(|m| (s, m))) {
                // rows[r][q]: rows rank r sends rank q.
                let rows: Vec<Vec<usize>> =
                    (0..n).map(|r| (0..n).map(|q| (seed as usize + 3 * r + 7 * q * q) % 5).collect()).collect();
                let mut ranks = Vec::new();
                let mut ins = Vec::new();
                for (r, sends) in rows.iter().enumerate() {
                    let blocks_of = |splits: Vec<usize>| {
                        let mut first = 0;
                        splits.into_iter().map(move |s| {
                            first += s;
                            ((first - s) * row, s * row)
                        })
                    };
                    let sends: Vec<usize> = sends.clone();
                    let recvs: Vec<usize> = (0..n).map(|q| rows[q][r]).collect();
                    let (in_len, out_len) = (sends.iter().sum::<usize>() * row, recvs.iter().sum::<usize>() * row);
                    let blocks: Vec<(usize, usize)> = blocks_of(sends).chain(blocks_of(recvs)).collect();
                    let input: Vec<i64> = (0..in_len).map(|i| (1000 * r + i) as i64).collect();
                    ins.push(input.clone());
                    let plan = crate::algo::all_to_all_v(r, n, &blocks, max);
                    let bufs = [input, vec![-1; out_len], Vec::new()];
                    let bind = [(IN, 0), (OUT, 0), (SCRATCH, 0)];
                    ranks.push(RankSim { bufs, bind, plan, pc: 0, lends: Vec::new(), held: None, parked: 0 });
                }
                for flow in [Flow::Lend, Flow::Credits(0), Flow::Credits(4)] {
                    let (res, _) = run_ranks(ranks.clone(), n, seed * 31 + n as u64, flow).unwrap_or_else(|e| {
                        panic!("{n} ranks, rows of {row}, seed {seed}, cut {max:?}, {flow:?}: {e}")
                    });
                    for (r, bufs) in res.iter().enumerate() {
                        // From each rank q, in rank order: q's block for r.
                        let want: Vec<i64> = (0..n)
                            .flat_map(|q| {
                                let first: usize = rows[q][..r].iter().sum::<usize>() * row;
                                ins[q][first..first + rows[q][r] * row].to_vec()
                            })
                            .collect();
                        assert_eq!(
                            bufs[OUT], want,
                            "{n} ranks, rows of {row}, seed {seed}, cut {max:?}, {flow:?}: rank {r}"
                        );
                    }
                }
            }
        }
    }
}
