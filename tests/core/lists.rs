//! The list forms of gather, scatter, reduce_scatter and all_to_all (`gather_into_list`,
//! `scatter_from_list`, `reduce_scatter`, `all_to_all`): every dtype × the counts of
//! [`counts`] × every root (every reduce op), compared bit for bit with the reference, inputs
//! unchanged, non-root lists untouched. Each case runs in one of four forms, in turn, so every
//! form meets every count and dtype: blocking, non-blocking (`Work`), mixed (odd ranks call
//! the tensor form of the same op: the two forms must agree), and in place (the output is the
//! list entry where the in-place form keeps the data). The `Group` forms run from one thread
//! for every rank ([`lists_grouped`]). Then the invalid calls.

use ruccl::{CommConfig, Communicator, DType, ErrorKind, Group, ReduceOp, Tensor};

use crate::harness::{Ctx, Opts, TEST_TIMEOUT, TestDevice, run};
use crate::reference::{counts, reduce_input, reduced};
use crate::vals::{self, Vals};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    Blocking,
    NonBlocking,
    /// Odd ranks call the tensor form.
    Mixed,
    InPlace,
}

const FORMS: [Form; 4] = [Form::Blocking, Form::NonBlocking, Form::Mixed, Form::InPlace];

/// The form of case number `case` (cycling, so that every form meets every count).
fn form(case: usize) -> Form {
    FORMS[case % FORMS.len()]
}

fn sweep<D: TestDevice>(world: usize, each: fn(&Ctx<D>, DType, &mut usize)) {
    run::<D, _>(world, &Opts::default(), |ctx| {
        let mut case = 0;
        for dt in DType::ALL {
            each(ctx, dt, &mut case);
        }
    });
}

/// A second tensor on `t`'s memory: what an in-place list call passes.
fn alias<D: TestDevice>(ctx: &Ctx<D>, t: &Tensor<D>) -> Tensor<D> {
    Tensor::from_buffer(&ctx.dev, t.buffer().clone(), t.dtype(), t.shape()).unwrap()
}

/// `v` cut into `w` tensors of `n` elements.
fn list_of<D: TestDevice>(ctx: &Ctx<D>, v: &Vals, w: usize, n: usize) -> Vec<Tensor<D>> {
    (0..w).map(|k| ctx.tensor_of(&v.slice(k * n..(k + 1) * n))).collect()
}

/// Asserts entry `k` of `list` holds block `k` of `want`.
fn check_list<D: TestDevice>(ctx: &Ctx<D>, list: &[Tensor<D>], want: &Vals, n: usize, what: &str) {
    for (k, t) in list.iter().enumerate() {
        ctx.check_vals(t, &want.slice(k * n..(k + 1) * n), format!("{what}: [{k}]"));
    }
}

pub fn lists_gather<D: TestDevice>(world: usize) {
    sweep::<D>(world, gather_as::<D>);
}

fn gather_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType, case: &mut usize) {
    let (w, r) = (ctx.world, ctx.rank);
    for (salt, n) in counts(w).into_iter().enumerate() {
        for root in 0..w {
            let form = form(*case);
            *case += 1;
            let what = format!("gather_into_list({n} x {dt}, root {root}, {form:?})");
            let mine = vals::data(dt, r, n, salt);
            let want = Vals::concat(dt, (0..w).map(|k| vals::data(dt, k, n, salt)));
            let mut outs: Vec<Tensor<D>> = (0..w).map(|_| ctx.tensor_of(&vals::sentinel(dt, n))).collect();
            let x = if form == Form::InPlace && r == root {
                ctx.dev.write(outs[root].buffer(), 0, mine.bytes()).unwrap();
                alias(ctx, &outs[root])
            } else {
                ctx.tensor_of(&mine)
            };
            // Non-roots pass no list half the time and an ignored one otherwise.
            let pass = r == root || (salt + root) % 2 == 0;
            ctx.arrive();
            match form {
                Form::Blocking | Form::InPlace => {
                    ctx.ok(ctx.comm.gather_into_list(pass.then_some(&mut outs[..]), &x, root), &what)
                }
                Form::NonBlocking => {
                    let work = ctx.ok(ctx.comm.gather_into_list_async(pass.then_some(&outs[..]), &x, root), &what);
                    ctx.ok(work.wait(), &what);
                }
                Form::Mixed if r % 2 == 1 => {
                    let mut y = ctx.tensor_of(&vals::sentinel(dt, w * n));
                    ctx.ok(ctx.comm.gather((r == root).then_some(&mut y), &x, root), &what);
                    if r == root {
                        ctx.check_vals(&y, &want, format!("{what}: the tensor form on the root"));
                    }
                    continue;
                }
                Form::Mixed => ctx.ok(ctx.comm.gather_into_list(pass.then_some(&mut outs[..]), &x, root), &what),
            }
            if r == root {
                check_list(ctx, &outs, &want, n, &what);
            } else {
                check_list(ctx, &outs, &vals::sentinel(dt, w * n), n, &format!("{what}: a non-root list"));
            }
            ctx.check_vals(&x, &mine, format!("{what}: input must be unchanged"));
        }
    }
}

pub fn lists_scatter<D: TestDevice>(world: usize) {
    sweep::<D>(world, scatter_as::<D>);
}

fn scatter_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType, case: &mut usize) {
    let (w, r) = (ctx.world, ctx.rank);
    for (salt, n) in counts(w).into_iter().enumerate() {
        for root in 0..w {
            let form = form(*case);
            *case += 1;
            let what = format!("scatter_from_list({n} x {dt}, root {root}, {form:?})");
            let mine = vals::data(dt, r, w * n, salt);
            let want = vals::data(dt, root, w * n, salt).slice(r * n..(r + 1) * n);
            let ins = list_of(ctx, &mine, w, n);
            let pass = r == root || (salt + root) % 2 == 1;
            let mut y =
                if form == Form::InPlace && r == root { alias(ctx, &ins[root]) } else { ctx.tensor_of(&vals::sentinel(dt, n)) };
            ctx.arrive();
            match form {
                Form::Blocking | Form::InPlace => {
                    ctx.ok(ctx.comm.scatter_from_list(&mut y, pass.then_some(&ins[..]), root), &what)
                }
                Form::NonBlocking => {
                    let work = ctx.ok(ctx.comm.scatter_from_list_async(&y, pass.then_some(&ins[..]), root), &what);
                    ctx.ok(work.wait(), &what);
                }
                Form::Mixed if r % 2 == 1 => {
                    let x = ctx.tensor_of(&mine);
                    ctx.ok(ctx.comm.scatter(&mut y, (r == root).then_some(&x), root), &what);
                }
                Form::Mixed => ctx.ok(ctx.comm.scatter_from_list(&mut y, pass.then_some(&ins[..]), root), &what),
            }
            ctx.check_vals(&y, &want, &what);
            check_list(ctx, &ins, &mine, n, &format!("{what}: inputs must be unchanged"));
        }
    }
}

pub fn lists_reduce_scatter<D: TestDevice>(world: usize) {
    sweep::<D>(world, reduce_scatter_as::<D>);
}

fn reduce_scatter_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType, case: &mut usize) {
    let (w, r) = (ctx.world, ctx.rank);
    for (salt, n) in counts(w).into_iter().enumerate() {
        for op in ReduceOp::ALL {
            let form = form(*case);
            *case += 1;
            let what = format!("reduce_scatter({op}, {n} x {dt} per rank, {form:?})");
            let mine = vals::reduce_input(dt, op, r, w * n, salt);
            let want = vals::reduced(dt, op, w, w * n, salt).slice(r * n..(r + 1) * n);
            let ins = list_of(ctx, &mine, w, n);
            let mut y =
                if form == Form::InPlace { alias(ctx, &ins[r]) } else { ctx.tensor_of(&vals::sentinel(dt, n)) };
            ctx.arrive();
            match form {
                Form::Blocking | Form::InPlace => ctx.ok(ctx.comm.reduce_scatter(&mut y, &ins, op), &what),
                Form::NonBlocking => ctx.ok(ctx.ok(ctx.comm.reduce_scatter_async(&y, &ins, op), &what).wait(), &what),
                Form::Mixed if r % 2 == 1 => {
                    let x = ctx.tensor_of(&mine);
                    ctx.ok(ctx.comm.reduce_scatter_tensor(&mut y, &x, op), &what);
                }
                Form::Mixed => ctx.ok(ctx.comm.reduce_scatter(&mut y, &ins, op), &what),
            }
            ctx.check_vals(&y, &want, &what);
            for (k, t) in ins.iter().enumerate().filter(|&(k, _)| form != Form::InPlace || k != r) {
                ctx.check_vals(t, &mine.slice(k * n..(k + 1) * n), format!("{what}: input[{k}] must be unchanged"));
            }
        }
    }
}

pub fn lists_all_to_all<D: TestDevice>(world: usize) {
    sweep::<D>(world, all_to_all_as::<D>);
}

fn all_to_all_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType, case: &mut usize) {
    let (w, r) = (ctx.world, ctx.rank);
    for (salt, n) in counts(w).into_iter().enumerate() {
        let form = form(*case);
        *case += 1;
        let what = format!("all_to_all({n} x {dt} per peer, {form:?})");
        let mine = vals::data(dt, r, w * n, salt);
        // Entry k of the result is entry r of rank k's inputs.
        let want = Vals::concat(dt, (0..w).map(|k| vals::data(dt, k, w * n, salt).slice(r * n..(r + 1) * n)));
        let ins = list_of(ctx, &mine, w, n);
        let mut outs: Vec<Tensor<D>> = (0..w).map(|_| ctx.tensor_of(&vals::sentinel(dt, n))).collect();
        ctx.arrive();
        match form {
            Form::Blocking => ctx.ok(ctx.comm.all_to_all(&mut outs, &ins), &what),
            Form::NonBlocking => ctx.ok(ctx.ok(ctx.comm.all_to_all_async(&outs, &ins), &what).wait(), &what),
            Form::Mixed if r % 2 == 1 => {
                let (x, mut y) = (ctx.tensor_of(&mine), ctx.tensor_of(&vals::sentinel(dt, w * n)));
                ctx.ok(ctx.comm.all_to_all_single(&mut y, &x), &what);
                ctx.check_vals(&y, &want, format!("{what}: the tensor form"));
                continue;
            }
            Form::Mixed => ctx.ok(ctx.comm.all_to_all(&mut outs, &ins), &what),
            Form::InPlace => {
                // One list as both: every output is its input.
                ctx.ok(ctx.ok(ctx.comm.all_to_all_async(&ins, &ins), &what).wait(), &what);
                check_list(ctx, &ins, &want, n, &what);
                continue;
            }
        }
        check_list(ctx, &outs, &want, n, &what);
        check_list(ctx, &ins, &mine, n, &format!("{what}: inputs must be unchanged"));
    }
}

/// The `Group` forms, every rank's calls added from one thread: each list op on every dtype
/// and count, in one group per op, with even ranks calling the list form and odd ranks the
/// tensor form (the same op), compared bit for bit.
pub fn lists_grouped<D: TestDevice>(world: usize) {
    let devices = (0..world).map(D::for_rank).collect();
    let config = CommConfig::default().with_timeout(TEST_TIMEOUT);
    let comms = Communicator::init_all(devices, D::configure(config)).unwrap();
    let w = world;
    let on = |c: &Communicator<D>, v: &Vals| {
        let t = Tensor::zeros(c.device(), v.dtype(), &[v.len()]).unwrap();
        c.device().write(t.buffer(), 0, v.bytes()).unwrap();
        t
    };
    let read = |t: &Tensor<D>| {
        let mut bytes = vec![0; t.byte_len()];
        t.device().read(t.buffer(), 0, &mut bytes).unwrap();
        Vals::from_bytes(t.dtype(), bytes)
    };
    let lists = |v: &dyn Fn(usize) -> Vals, n: usize| -> Vec<Vec<Tensor<D>>> {
        comms.iter().map(|c| (0..w).map(|k| on(c, &v(c.rank()).slice(k * n..(k + 1) * n))).collect()).collect()
    };
    let list_form = |r: usize| r.is_multiple_of(2);
    for (case, dt) in DType::ALL.into_iter().enumerate() {
        for (salt, n) in counts(w).into_iter().enumerate() {
            let root = (case + salt) % w;
            let what = format!("{n} x {dt}, root {root}");
            // gather
            let xs: Vec<_> = comms.iter().map(|c| on(c, &vals::data(dt, c.rank(), n, salt))).collect();
            let want = Vals::concat(dt, (0..w).map(|k| vals::data(dt, k, n, salt)));
            let mut outs = lists(&|_| vals::sentinel(dt, w * n), n);
            let mut ys: Vec<_> = comms.iter().map(|c| on(c, &vals::sentinel(dt, w * n))).collect();
            let mut g = Group::new();
            for (((c, x), l), y) in comms.iter().zip(&xs).zip(outs.iter_mut()).zip(ys.iter_mut()) {
                let mine = c.rank() == root;
                if list_form(c.rank()) {
                    g.gather_into_list(c, mine.then_some(&mut l[..]), x, root);
                } else {
                    g.gather(c, mine.then_some(y), x, root);
                }
            }
            g.run().unwrap();
            let got = if list_form(root) { Vals::concat(dt, outs[root].iter().map(read)) } else { read(&ys[root]) };
            vals::assert_vals(&got, &want, format!("group gather_into_list ({what})"));
            // scatter
            let ins = lists(&|r| vals::data(dt, r, w * n, salt), n);
            let xs: Vec<_> = comms.iter().map(|c| on(c, &vals::data(dt, c.rank(), w * n, salt))).collect();
            let mut ys: Vec<_> = comms.iter().map(|c| on(c, &vals::sentinel(dt, n))).collect();
            let mut g = Group::new();
            for (((c, l), x), y) in comms.iter().zip(&ins).zip(&xs).zip(ys.iter_mut()) {
                let mine = c.rank() == root;
                if list_form(c.rank()) {
                    g.scatter_from_list(c, y, mine.then_some(&l[..]), root);
                } else {
                    g.scatter(c, y, mine.then_some(x), root);
                }
            }
            g.run().unwrap();
            for (r, y) in ys.iter().enumerate() {
                let want = vals::data(dt, root, w * n, salt).slice(r * n..(r + 1) * n);
                vals::assert_vals(&read(y), &want, format!("group scatter_from_list ({what}), rank {r}"));
            }
            // reduce_scatter
            let op = ReduceOp::ALL[(case + salt) % ReduceOp::ALL.len()];
            let ins = lists(&|r| vals::reduce_input(dt, op, r, w * n, salt), n);
            let xs: Vec<_> = comms.iter().map(|c| on(c, &vals::reduce_input(dt, op, c.rank(), w * n, salt))).collect();
            let mut ys: Vec<_> = comms.iter().map(|c| on(c, &vals::sentinel(dt, n))).collect();
            let mut g = Group::new();
            for (((c, l), x), y) in comms.iter().zip(&ins).zip(&xs).zip(ys.iter_mut()) {
                if list_form(c.rank()) {
                    g.reduce_scatter(c, y, l, op);
                } else {
                    g.reduce_scatter_tensor(c, y, x, op);
                }
            }
            g.run().unwrap();
            let all = vals::reduced(dt, op, w, w * n, salt);
            for (r, y) in ys.iter().enumerate() {
                let want = all.slice(r * n..(r + 1) * n);
                vals::assert_vals(&read(y), &want, format!("group reduce_scatter({op}) ({what}), rank {r}"));
            }
            // all_to_all
            let ins = lists(&|r| vals::data(dt, r, w * n, salt), n);
            let xs: Vec<_> = comms.iter().map(|c| on(c, &vals::data(dt, c.rank(), w * n, salt))).collect();
            let mut outs = lists(&|_| vals::sentinel(dt, w * n), n);
            let mut ys: Vec<_> = comms.iter().map(|c| on(c, &vals::sentinel(dt, w * n))).collect();
            let mut g = Group::new();
            for ((((c, l), x), o), y) in comms.iter().zip(&ins).zip(&xs).zip(outs.iter_mut()).zip(ys.iter_mut()) {
                if list_form(c.rank()) {
                    g.all_to_all(c, o, l);
                } else {
                    g.all_to_all_single(c, y, x);
                }
            }
            g.run().unwrap();
            for r in 0..w {
                let want = Vals::concat(dt, (0..w).map(|k| vals::data(dt, k, w * n, salt).slice(r * n..(r + 1) * n)));
                let got = if list_form(r) { Vals::concat(dt, outs[r].iter().map(read)) } else { read(&ys[r]) };
                vals::assert_vals(&got, &want, format!("group all_to_all ({what}), rank {r}"));
            }
        }
    }
}

const BAD: ErrorKind = ErrorKind::InvalidArgument;

fn zeros<D: TestDevice>(ctx: &Ctx<D>, dtype: DType, n: usize) -> Tensor<D> {
    Tensor::zeros(&ctx.dev, dtype, &[n]).unwrap()
}

fn zeros_list<D: TestDevice>(ctx: &Ctx<D>, dtype: DType, sizes: &[usize]) -> Vec<Tensor<D>> {
    sizes.iter().map(|&n| zeros(ctx, dtype, n)).collect()
}

/// Every invalid list call fails at once on its rank with `InvalidArgument` naming the op,
/// the rank and what is wrong (the non-blocking forms too); afterwards each list form runs
/// correctly on the same communicator.
pub fn lists_errors<D: TestDevice>() {
    run::<D, _>(3, &Opts::default(), |ctx| {
        let r = ctx.rank;
        let x = zeros(ctx, DType::F32, 4);
        let mut y = zeros(ctx, DType::F32, 4);
        let e = |res, needles: &[&str], what: &str| {
            ctx.expect_err(res, BAD, needles, what);
        };

        // gather_into_list, as the root.
        let mut l = zeros_list(ctx, DType::F32, &[4, 4]);
        e(ctx.comm.gather_into_list(Some(&mut l), &x, r), &["gather", "2 tensors", "(3)"], "gather into 2 of 3");
        let mut l = zeros_list(ctx, DType::F32, &[4, 3, 4]);
        e(ctx.comm.gather_into_list(Some(&mut l), &x, r), &["gather", "output[1]", "3 elements"], "gather, [1] short");
        let mut l = vec![zeros(ctx, DType::F32, 4), zeros(ctx, DType::F32, 4), zeros(ctx, DType::BF16, 4)];
        e(ctx.comm.gather_into_list(Some(&mut l), &x, r), &["gather", "output[2]", "bf16", "f32"], "gather, bf16 [2]");
        let first = zeros(ctx, DType::F32, 4);
        let mut l = vec![alias(ctx, &first), zeros(ctx, DType::F32, 4), first];
        e(ctx.comm.gather_into_list(Some(&mut l), &x, r), &["gather", "output[0]", "output[2]", "same memory"], "gather, [0] is [2]");
        let mut l = zeros_list(ctx, DType::F32, &[4, 4, 4]);
        let inside = alias(ctx, &l[(r + 1) % 3]);
        e(ctx.comm.gather_into_list(Some(&mut l), &inside, r), &["gather", "input", "share memory"], "gather, input is another's block");
        e(ctx.comm.gather_into_list(Some(&mut l), &x, 3), &["gather", "root 3", "out of range"], "gather, root 3 of 3");
        e(ctx.comm.gather_into_list(None, &x, r), &["gather", "output", "root"], "gather without a list on the root");
        let l = zeros_list(ctx, DType::F32, &[4, 4]);
        e(ctx.comm.gather_into_list_async(Some(&l), &x, r).map(drop), &["gather", "2 tensors"], "gather_async into 2 of 3");

        // scatter_from_list, as the root.
        let l = zeros_list(ctx, DType::F32, &[4, 4, 4, 4]);
        e(ctx.comm.scatter_from_list(&mut y, Some(&l), r), &["scatter", "4 tensors", "(3)"], "scatter from 4 of 3");
        let l = zeros_list(ctx, DType::F32, &[4, 4, 5]);
        e(ctx.comm.scatter_from_list(&mut y, Some(&l), r), &["scatter", "input[2]", "5 elements"], "scatter, [2] long");
        let l = vec![zeros(ctx, DType::I32, 4), zeros(ctx, DType::F32, 4), zeros(ctx, DType::F32, 4)];
        e(ctx.comm.scatter_from_list(&mut y, Some(&l), r), &["scatter", "input[0]", "i32", "f32"], "scatter, i32 [0]");
        let l = zeros_list(ctx, DType::F32, &[4, 4, 4]);
        let mut inside = alias(ctx, &l[(r + 2) % 3]);
        e(ctx.comm.scatter_from_list(&mut inside, Some(&l), r), &["scatter", "share memory"], "scatter into another's block");
        e(ctx.comm.scatter_from_list(&mut y, Some(&l), 5), &["scatter", "root 5", "out of range"], "scatter, root 5 of 3");
        e(ctx.comm.scatter_from_list(&mut y, None, r), &["scatter", "input", "root"], "scatter without a list on the root");

        // reduce_scatter.
        let op = ReduceOp::Sum;
        let l = zeros_list(ctx, DType::F32, &[4, 4]);
        e(ctx.comm.reduce_scatter(&mut y, &l, op), &["reduce_scatter", "2 tensors"], "reduce_scatter from 2 of 3");
        let l = zeros_list(ctx, DType::F32, &[4, 4, 0]);
        e(ctx.comm.reduce_scatter(&mut y, &l, op), &["reduce_scatter", "input[2]", "0 elements"], "reduce_scatter, [2] empty");
        let l = vec![zeros(ctx, DType::F32, 4), zeros(ctx, DType::F64, 4), zeros(ctx, DType::F32, 4)];
        e(ctx.comm.reduce_scatter(&mut y, &l, op), &["reduce_scatter", "input[1]", "f64"], "reduce_scatter, f64 [1]");
        let l = zeros_list(ctx, DType::F32, &[4, 4, 4]);
        let mut inside = alias(ctx, &l[(r + 1) % 3]);
        let need = ["reduce_scatter", "share memory", "must be input["];
        e(ctx.comm.reduce_scatter(&mut inside, &l, op), &need, "reduce_scatter into another's block");
        e(ctx.comm.reduce_scatter_async(&inside, &l, op).map(drop), &need, "reduce_scatter_async into another's block");

        // all_to_all.
        let ins = zeros_list(ctx, DType::U8, &[2, 2, 2]);
        let mut outs = zeros_list(ctx, DType::U8, &[2, 2]);
        e(ctx.comm.all_to_all(&mut outs, &ins), &["all_to_all", "output list", "2 tensors"], "all_to_all into 2 of 3");
        let mut outs = zeros_list(ctx, DType::U8, &[2, 2, 2]);
        let uneven = zeros_list(ctx, DType::U8, &[2, 3, 2]);
        let need = ["all_to_all", "input[1]", "all_to_all_single_with_splits"];
        e(ctx.comm.all_to_all(&mut outs, &uneven), &need, "all_to_all of uneven blocks");
        let mut bad = zeros_list(ctx, DType::U8, &[2, 2, 1]);
        e(ctx.comm.all_to_all(&mut bad, &ins), &["all_to_all", "output[2]"], "all_to_all into a short [2]");
        let mut mixed = vec![zeros(ctx, DType::U8, 2), zeros(ctx, DType::I8, 2), zeros(ctx, DType::U8, 2)];
        e(ctx.comm.all_to_all(&mut mixed, &ins), &["all_to_all", "output[1]", "i8"], "all_to_all, i8 [1]");
        let first = zeros(ctx, DType::U8, 2);
        let mut twice = vec![first, zeros(ctx, DType::U8, 2), zeros(ctx, DType::U8, 2)];
        twice[2] = alias(ctx, &twice[0]);
        e(ctx.comm.all_to_all(&mut twice, &ins), &["all_to_all", "same memory"], "all_to_all, [0] is [2]");
        // Only one output is its input: neither out of place nor in place.
        let mut partly = vec![alias(ctx, &ins[0]), zeros(ctx, DType::U8, 2), zeros(ctx, DType::U8, 2)];
        e(ctx.comm.all_to_all(&mut partly, &ins), &["all_to_all", "input[0]", "output[0]", "every k"], "all_to_all partly in place");
        let crossed: Vec<_> = (0..3).map(|k| alias(ctx, &ins[(k + 1) % 3])).collect();
        e(ctx.comm.all_to_all_async(&crossed, &ins).map(drop), &["all_to_all", "share memory"], "all_to_all_async crossed");

        // Still usable: each list form, checked.
        assert!(ctx.comm.is_usable(), "rank {r}: unusable after invalid arguments");
        let op = ReduceOp::Max;
        let ins: Vec<_> = (0..3).map(|k| ctx.tensor(&reduce_input::<i32>(op, r, 6, 0)[2 * k..2 * k + 2])).collect();
        let mut y = zeros(ctx, DType::I32, 2);
        ctx.arrive();
        ctx.ok(ctx.comm.reduce_scatter(&mut y, &ins, op), "reduce_scatter after invalid arguments");
        ctx.check(&y, &reduced::<i32>(op, 3, 6, 0)[2 * r..2 * r + 2], "reduce_scatter after invalid arguments");
        let mut outs = zeros_list(ctx, DType::I32, &[2, 2, 2]);
        ctx.ok(ctx.comm.all_to_all(&mut outs, &ins), "all_to_all after invalid arguments");
        let x = ctx.tensor(&[r as i32]);
        let mut outs = zeros_list(ctx, DType::I32, &[1, 1, 1]);
        ctx.ok(ctx.comm.gather_into_list((r == 2).then_some(&mut outs[..]), &x, 2), "gather after invalid arguments");
        let mut y = zeros(ctx, DType::I32, 1);
        ctx.ok(ctx.comm.scatter_from_list(&mut y, (r == 2).then_some(&outs[..]), 2), "scatter after invalid arguments");
        ctx.check(&y, &[r as i32], "gather then scatter back, after invalid arguments");
    });
}
