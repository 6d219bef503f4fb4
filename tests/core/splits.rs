//! Splitting: `split_all`, `split_from` with subsets, reordered lists, ranks left out (with an
//! empty list or with the members' list), disjoint groups, splits of splits, and children used
//! concurrently with their parent.

use ruccl::{Communicator, ErrorKind, Rank, ReduceOp};

use crate::harness::{Ctx, Opts, TestDevice, run};
use crate::reference::{data, reduce_input, reduced, sentinel};

/// Checks `c` with an all_reduce and a broadcast from its rank 0, whose parent rank is
/// `members[0]` (`members[i]` is the parent rank of child rank `i`).
fn exercise<D: TestDevice>(ctx: &Ctx<D>, c: &Communicator<D>, members: &[Rank], salt: usize) {
    let w = members.len();
    let me = c.rank();
    assert_eq!(members[me], ctx.rank, "child rank {me} should be parent rank {}", members[me]);
    let op = ReduceOp::Sum;
    let mut t = ctx.tensor(&reduce_input::<i64>(op, me, 11, salt));
    ctx.ok(c.all_reduce(&mut t, op), "all_reduce on a child");
    ctx.check(&t, &reduced::<i64>(op, w, 11, salt), "all_reduce on a child");
    // Data keyed by *parent* rank shows that child rank 0 really is members[0].
    let mut t = ctx.tensor(&data::<f32>(ctx.rank, 6, salt));
    ctx.ok(c.broadcast(&mut t, 0), "broadcast on a child");
    ctx.check(&t, &data::<f32>(members[0], 6, salt), "broadcast from child rank 0");
}

pub fn split_all_concurrent_with_parent<D: TestDevice>() {
    run::<D, _>(4, &Opts::default(), |ctx| {
        let (w, r) = (ctx.world, ctx.rank);
        let child = ctx.ok(ctx.comm.split_all(), "split_all");
        assert_eq!((child.rank(), child.world_size()), (r, w));
        assert_ne!(child.unique_id(), ctx.comm.unique_id());
        std::thread::scope(|s| {
            let c = &child;
            s.spawn(move || {
                for i in 0..D::rounds(100) {
                    let op = ReduceOp::ALL[i % ReduceOp::ALL.len()];
                    let mut t = ctx.tensor(&reduce_input::<f64>(op, r, 5, i));
                    ctx.ok(c.all_reduce(&mut t, op), format!("child all_reduce #{i}"));
                    ctx.check(&t, &reduced::<f64>(op, w, 5, i), format!("child all_reduce #{i}"));
                }
            });
            for i in 0..D::rounds(100) {
                let x = ctx.tensor(&data::<u32>(r, 3, i));
                let mut y = ctx.tensor(&sentinel::<u32>(3 * w));
                ctx.ok(ctx.comm.all_gather_into_tensor(&mut y, &x), format!("parent all_gather #{i}"));
                let want: Vec<u32> = (0..w).flat_map(|k| data::<u32>(k, 3, i)).collect();
                ctx.check(&y, &want, format!("parent all_gather #{i}"));
            }
        });
        let members: Vec<Rank> = (0..w).collect();
        exercise(ctx, &child, &members, 1);
        let second = ctx.ok(ctx.comm.split_all(), "second split_all");
        assert_ne!(second.unique_id(), child.unique_id());
        exercise(ctx, &second, &members, 2);
    });
}

pub fn split_from_subset_reordered<D: TestDevice>() {
    let members = [4, 1, 3];
    run::<D, _>(5, &Opts::default(), |ctx| {
        // Rank 0 passes the members' list, rank 2 an empty one: both are left out.
        let list: &[Rank] = if ctx.rank == 2 { &[] } else { &members };
        ctx.arrive();
        let child = ctx.ok(ctx.comm.split_from(list), "split_from([4, 1, 3])");
        match members.iter().position(|&m| m == ctx.rank) {
            Some(pos) => {
                let c = child.unwrap_or_else(|| panic!("member {} got None", ctx.rank));
                assert_eq!((c.rank(), c.world_size()), (pos, 3));
                exercise(ctx, &c, &members, 3);
                // Rooted ops on the child use child ranks: child rank 2 is parent rank 3.
                let x = ctx.tensor(&data::<i8>(ctx.rank, 4, 0));
                let mut y = ctx.tensor(&sentinel::<i8>(12));
                ctx.ok(c.gather(Some(&mut y), &x, 2), "gather to child rank 2");
                if ctx.rank == 3 {
                    let want: Vec<i8> = members.iter().flat_map(|&m| data::<i8>(m, 4, 0)).collect();
                    ctx.check(&y, &want, "gather to child rank 2");
                }
            }
            None => assert!(child.is_none(), "rank {} is not a member", ctx.rank),
        }
        // The parent still works for everyone.
        let mut t = ctx.tensor(&reduce_input::<i32>(ReduceOp::Max, ctx.rank, 7, 0));
        ctx.ok(ctx.comm.all_reduce(&mut t, ReduceOp::Max), "parent all_reduce");
        ctx.check(&t, &reduced::<i32>(ReduceOp::Max, 5, 7, 0), "parent all_reduce");
    });
}

/// Like `ncclCommSplit` with two colors: each rank passes its own group's list.
pub fn split_from_disjoint_groups<D: TestDevice>() {
    let evens = [0, 2, 4];
    let odds = [5, 3, 1];
    run::<D, _>(6, &Opts::default(), |ctx| {
        let (w, r) = (ctx.world, ctx.rank);
        let mine: &[Rank] = if r % 2 == 0 { &evens } else { &odds };
        ctx.arrive();
        let child = ctx
            .ok(ctx.comm.split_from(mine), "split_from(own group)")
            .unwrap_or_else(|| panic!("rank {r} is in its own group"));
        assert_eq!(child.world_size(), 3);
        std::thread::scope(|s| {
            let c = &child;
            s.spawn(move || {
                for i in 0..D::rounds(30) {
                    exercise(ctx, c, mine, i);
                }
            });
            for i in 0..D::rounds(30) {
                let mut t = ctx.tensor(&reduce_input::<u8>(ReduceOp::Sum, r, 13, i));
                ctx.ok(ctx.comm.all_reduce(&mut t, ReduceOp::Sum), "parent all_reduce");
                ctx.check(&t, &reduced::<u8>(ReduceOp::Sum, w, 13, i), "parent all_reduce");
            }
        });
    });
}

pub fn split_nested_and_repeated<D: TestDevice>() {
    run::<D, _>(4, &Opts::default(), |ctx| {
        let reversed = [3, 2, 1, 0];
        let child = ctx.ok(ctx.comm.split_from(&reversed), "split_from(reversed)").unwrap();
        assert_eq!(child.rank(), 3 - ctx.rank);
        exercise(ctx, &child, &reversed, 0);
        // Child ranks 0 and 1 are parent ranks 3 and 2.
        let grand = ctx.ok(child.split_from(&[0, 1]), "split of a split");
        match grand {
            Some(g) => {
                assert!(ctx.rank >= 2);
                exercise(ctx, &g, &[3, 2], 1);
            }
            None => assert!(ctx.rank < 2),
        }
        for i in 0..8 {
            let c = ctx.ok(ctx.comm.split_all(), format!("split_all #{i}"));
            exercise(ctx, &c, &[0, 1, 2, 3], i);
        }
        exercise(ctx, &child, &reversed, 9);
    });
}

pub fn split_from_invalid_lists<D: TestDevice>() {
    run::<D, _>(3, &Opts::default(), |ctx| {
        for (list, needle) in [(&[0, 0][..], "twice"), (&[0, 3][..], "out of range")] {
            let r = ctx.comm.split_from(list).map(|_| ());
            ctx.expect_err(r, ErrorKind::InvalidArgument, &[needle, "split"], format!("split_from({list:?})"));
            assert!(ctx.comm.is_usable());
        }
        let c = ctx.ok(ctx.comm.split_from(&[2, 0]), "split_from([2, 0])");
        assert_eq!(c.is_some(), ctx.rank != 1);
        if let Some(c) = c {
            exercise(ctx, &c, &[2, 0], 0);
        }
    });
}
