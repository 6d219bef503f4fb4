//! Forced algorithms (`CommConfig::with_algorithm`) and tiny pipelining chunks
//! (`with_chunk_bytes`), so ring, chain, tree and recursive doubling, and chunked pipelines,
//! all run with small counts; and determinism with inexact float inputs: every rank gets the
//! same bits, and the same inputs give the same bits again.

use ruccl::{Algorithm, CommConfig, DType, ReduceOp};

use crate::harness::{Ctx, Opts, TEST_TIMEOUT, TestDevice, run};
use crate::reference::counts;
use crate::vals::{self, Vals, assert_vals};

/// A few dtypes of every size and kind.
const DTYPES: [DType; 6] = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::U64];

fn forced<D: TestDevice>(world: usize, algorithm: Algorithm, chunk_bytes: usize, sizes: &[usize]) {
    let config =
        CommConfig::default().with_timeout(TEST_TIMEOUT).with_algorithm(algorithm).with_chunk_bytes(chunk_bytes);
    run::<D, _>(world, &Opts::with_config(config), |ctx| {
        assert_eq!(ctx.comm.config().algorithm(), algorithm);
        for dt in DTYPES {
            forced_as::<D>(ctx, dt, algorithm, sizes);
        }
    });
}

fn forced_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType, alg: Algorithm, sizes: &[usize]) {
    let (w, r) = (ctx.world, ctx.rank);
    let mut call = 0;
    for (salt, &n) in sizes.iter().enumerate() {
        for op in ReduceOp::ALL {
            let root = call % w;
            call += 1;
            let tag = format!("{op}, {n} x {}, algorithm {alg}", dt);
            let mine = vals::reduce_input(dt, op, r, n, salt);
            let want = vals::reduced(dt, op, w, n, salt);

            let x = ctx.tensor_of(&mine);
            let mut y = ctx.tensor_of(&vals::sentinel(dt, n));
            ctx.arrive();
            ctx.ok(ctx.comm.all_reduce_into(&mut y, &x, op), format!("all_reduce({tag})"));
            ctx.check_vals(&y, &want, format!("all_reduce({tag})"));
            let mut t = ctx.tensor_of(&mine);
            ctx.arrive();
            ctx.ok(ctx.comm.all_reduce(&mut t, op), format!("all_reduce({tag}) in place"));
            ctx.check_vals(&t, &want, format!("all_reduce({tag}) in place"));

            let mut t = ctx.tensor_of(&mine);
            ctx.arrive();
            ctx.ok(ctx.comm.reduce(&mut t, op, root), format!("reduce({tag}, root {root})"));
            let expect = if r == root { &want } else { &mine };
            ctx.check_vals(&t, expect, format!("reduce({tag}, root {root}) in place"));
        }
        let tag = format!("{n} x {}, algorithm {alg}", dt);
        let root = (salt + 1) % w;
        let mut t = ctx.tensor_of(&vals::data(dt, r, n, salt));
        ctx.arrive();
        ctx.ok(ctx.comm.broadcast(&mut t, root), format!("broadcast({tag})"));
        ctx.check_vals(&t, &vals::data(dt, root, n, salt), format!("broadcast({tag}, root {root})"));

        let op = ReduceOp::Sum;
        let x = ctx.tensor_of(&vals::reduce_input(dt, op, r, w * n, salt));
        let mut y = ctx.tensor_of(&vals::sentinel(dt, n));
        ctx.arrive();
        ctx.ok(ctx.comm.reduce_scatter_tensor(&mut y, &x, op), format!("reduce_scatter({tag})"));
        let all = vals::reduced(dt, op, w, w * n, salt);
        ctx.check_vals(&y, &all.slice(r * n..(r + 1) * n), format!("reduce_scatter({tag})"));

        let x = ctx.tensor_of(&vals::data(dt, r, n, salt));
        let mut y = ctx.tensor_of(&vals::sentinel(dt, w * n));
        ctx.arrive();
        ctx.ok(ctx.comm.all_gather_into_tensor(&mut y, &x), format!("all_gather({tag})"));
        let want = Vals::concat(dt, (0..w).map(|k| vals::data(dt, k, n, salt)));
        ctx.check_vals(&y, &want, format!("all_gather({tag})"));
    }
}

/// Ring all_reduce, chain broadcast/reduce and ring reduce_scatter/all_gather with chunks
/// of 12 bytes, and of one byte (at least one element: one message per element), so every
/// op is many messages. The short form (`TestDevice::short`) runs only the one-byte pass:
/// its counts (0, 1, not divisible by the world) and chunking take the same paths.
pub fn ring_small_chunks<D: TestDevice>(world: usize) {
    if !D::short() {
        forced::<D>(world, Algorithm::Ring, 12, &counts(world));
    }
    forced::<D>(world, Algorithm::Ring, 1, &[0, 1, world + 1, 37]);
}

/// Counts of the sweep plus 1,000 elements, all with the latency algorithms (the short form
/// leaves out the 1,000: 257 elements in 12-byte chunks already pipeline many chunks).
fn with_thousand<D: TestDevice>(world: usize) -> Vec<usize> {
    let mut v = counts(world);
    if !D::short() {
        v.push(1000);
    }
    v
}

pub fn tree<D: TestDevice>(world: usize) {
    forced::<D>(world, Algorithm::Tree, 12, &with_thousand::<D>(world));
}

pub fn recursive_doubling<D: TestDevice>(world: usize) {
    forced::<D>(world, Algorithm::RecursiveDoubling, 12, &with_thousand::<D>(world));
}

/// Inexact float sums: all ranks must get identical bits, and repeating the op on the same
/// inputs must reproduce them, for every algorithm (ring past the small threshold).
pub fn identical_bits<D: TestDevice>(world: usize) {
    for alg in [Algorithm::Auto, Algorithm::Ring, Algorithm::Tree, Algorithm::RecursiveDoubling] {
        let config = CommConfig::default().with_timeout(TEST_TIMEOUT).with_algorithm(alg).with_chunk_bytes(4096);
        run::<D, _>(world, &Opts::with_config(config), |ctx| {
            for dt in [DType::F32, DType::F64, DType::F16, DType::BF16] {
                identical_bits_as::<D>(ctx, dt, alg);
            }
        });
    }
}

fn identical_bits_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType, alg: Algorithm) {
    let (w, r) = (ctx.world, ctx.rank);
    // 40_000 elements is past the small-message threshold for every float type but f16/bf16
    // (80 KB), so `Auto` runs the ring on f32/f64.
    for n in [1000, 40_000] {
        for op in [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::PreMulSum(0.3)] {
            let what = format!("all_reduce({op}, {n} x {dt}, algorithm {alg}, random inputs)");
            let mine = vals::floats(dt, n, || {
                let u = (ctx.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                (u - 0.5) * 20.0
            });
            let mut first = ctx.tensor_of(&mine);
            ctx.arrive();
            ctx.ok(ctx.comm.all_reduce(&mut first, op), &what);
            let first = ctx.read(&first, &what);

            let mut again = ctx.tensor_of(&mine);
            ctx.arrive();
            ctx.ok(ctx.comm.all_reduce(&mut again, op), &what);
            ctx.check_vals(&again, &first, format!("{what}: repeated"));

            // Compare with every other rank's result by gathering them all.
            let x = ctx.tensor_of(&first);
            let mut all = ctx.tensor_of(&vals::sentinel(dt, w * n));
            ctx.ok(ctx.comm.all_gather_into_tensor(&mut all, &x), "all_gather of results");
            let all = ctx.read(&all, "all_gather of results");
            for k in 0..w {
                assert_vals(
                    &all.slice(k * n..(k + 1) * n),
                    &first,
                    format!("{what}: rank {k}'s result differs from rank {r}'s"),
                );
            }
        }
    }
}
