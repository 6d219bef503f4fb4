//! Byte-string collectives (torch's object collectives, for bytes): every rank's string of
//! another length (empty ones included), every root, and what a bad call gets.

use ruccl::ErrorKind;

use crate::harness::{Ctx, Opts, TestDevice, run};

/// Rank `r`'s byte string in round `salt`: lengths 0 to 12 that differ between ranks (some
/// rounds give every rank an empty one), bytes that name the rank and the position.
fn bytes_of(r: usize, salt: usize) -> Vec<u8> {
    let len = if salt == 0 { 0 } else { (r * 5 + salt * 3) % 13 };
    (0..len).map(|i| (r * 31 + i * 7 + salt) as u8).collect()
}

pub fn byte_collectives<D: TestDevice>(world: usize) {
    run::<D, _>(world, &Opts::default(), |ctx: &Ctx<D>| {
        let (w, r) = (ctx.world, ctx.rank);
        for salt in 0..4 {
            let every: Vec<Vec<u8>> = (0..w).map(|q| bytes_of(q, salt)).collect();
            let got = ctx.ok(ctx.comm.all_gather_bytes(&every[r]), "all_gather_bytes");
            assert_eq!(got, every, "rank {r}: all_gather_bytes, round {salt}");
            for root in 0..w {
                let what = format!("rank {r}, root {root}, round {salt}");
                // A non-root's own bytes (of another length) are replaced.
                let mut b = if r == root { every[root].clone() } else { vec![0xAB; r + 20] };
                ctx.ok(ctx.comm.broadcast_bytes(&mut b, root), "broadcast_bytes");
                assert_eq!(b, every[root], "{what}: broadcast_bytes");
                let got = ctx.ok(ctx.comm.gather_bytes(&every[r], root), "gather_bytes");
                let want = if r == root { every.clone() } else { Vec::new() };
                assert_eq!(got, want, "{what}: gather_bytes");
                // Only the root's parts count: the others pass a list of the wrong length.
                let parts = if r == root { every.clone() } else { vec![vec![1, 2, 3]] };
                let got = ctx.ok(ctx.comm.scatter_bytes(&parts, root), "scatter_bytes");
                assert_eq!(got, every[r], "{what}: scatter_bytes");
            }
        }
    });
}

/// A root whose parts are not one per rank fails, and so does every other rank, at once
/// (the root says so instead of scattering: its peers do not wait out their timeout), and
/// all call again; a root out of range fails on every rank; the communicator stays usable.
pub fn byte_collectives_bad_calls<D: TestDevice>() {
    run::<D, _>(3, &Opts::timed(std::time::Duration::from_secs(20)), |ctx: &Ctx<D>| {
        let r = ctx.rank;
        let short = if r == 1 { vec![vec![1]] } else { Vec::new() };
        let e = ctx.comm.scatter_bytes(&short, 1).expect_err("two parts short");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("passed 1 parts to scatter_bytes, where one per rank (3)"), "{e}");
        let whose = if r == 1 { "this rank, the root," } else { "the root, rank 1," };
        assert!(e.to_string().contains(whose), "{e}");
        assert_eq!(e.context().op.as_deref(), Some("scatter_bytes"), "{e}");
        let parts = vec![vec![9; 4], vec![], vec![7]];
        let got = ctx.ok(ctx.comm.scatter_bytes(&parts, 1), "scatter_bytes after the root's bad call");
        assert_eq!(got, parts[r]);
        let e = ctx.comm.broadcast_bytes(&mut vec![1], 3).expect_err("root 3 of 3");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("root 3"), "{e}");
        // Named as the call made, not its inner broadcast of the length.
        assert_eq!(e.context().op.as_deref(), Some("broadcast_bytes"), "{e}");
        let e = ctx.comm.gather_bytes(b"x", 5).expect_err("root 5 of 3");
        assert!(e.to_string().contains("root 5"), "{e}");
        assert!(ctx.comm.is_usable());
        assert_eq!(ctx.ok(ctx.comm.all_gather_bytes(&[r as u8]), "after"), vec![vec![0], vec![1], vec![2]]);
    });
}
