//! A remembered call binds exactly what validating it afresh binds, and never hides an
//! error: long random runs of calls, most of them repeats (of the call before, or of one a
//! few calls back) or one-field changes of the call before, each compared with
//! [`validate::validate`].

use std::sync::atomic::Ordering;

use super::{HITS, Memos, validate};
use crate::comm::validate::{self as fresh, Call, Io, Tags, Tensors};
use crate::config::Algorithm;
use crate::device::{Device, HostDevice};
use crate::op::{Composite, OpKind};
use crate::sched::Binding;
use crate::tensor::Tensor;
use crate::types::{DType, ReduceOp};

/// A small generator (xorshift): the runs are the same every time.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }
}

/// A binding as plain numbers: (buffer's memory id, base, id), or `None` when unbound.
fn plain(b: &Binding<usize>) -> Option<(usize, usize, usize)> {
    match b {
        Binding::Unbound => None,
        Binding::Contig { buf, base, id } => Some((*buf, *base, *id)),
        Binding::Blocks { .. } => Some((usize::MAX, 0, 0)),
    }
}

/// What a check of a call came to, comparable: the op and its bindings, or the error.
fn outcome(r: crate::error::Result<(crate::op::OpDesc, Io<usize>)>) -> String {
    match r {
        Ok((desc, io)) => format!(
            "{desc:?} in {:?} out {:?} elems {} blocks {:?}",
            plain(&io.input),
            plain(&io.output),
            io.input_elems,
            io.blocks
        ),
        Err(e) => format!("error {e}"),
    }
}

/// The same call again, as far as the generator below sets it (`Call` is not `Clone`).
fn copy<'a>(c: &Call<'a, HostDevice>) -> Call<'a, HostDevice> {
    Call {
        input: c.input,
        output: c.output,
        op: c.op,
        root: c.root,
        peer: c.peer,
        in_place: c.in_place,
        tags: c.tags,
        ..Call::new(c.kind)
    }
}

#[test]
fn a_remembered_call_binds_what_validating_it_binds() {
    let (d0, d1) = (HostDevice::new(0), HostDevice::new(1));
    let zeros = |d: &HostDevice, dtype, n| Tensor::zeros(d, dtype, &[n]).unwrap();
    let big = zeros(&d0, DType::F32, 18);
    let pool: Vec<Tensor<HostDevice>> = vec![
        zeros(&d0, DType::F32, 6),
        zeros(&d0, DType::F32, 6),
        zeros(&d0, DType::F32, 2),
        zeros(&d0, DType::I32, 6),
        zeros(&d0, DType::F32, 0),
        big.narrow(0, 6).unwrap(),
        big.narrow(6, 6).unwrap(),
        big.narrow(3, 6).unwrap(),
        big.narrow(0, 18).unwrap(),
        zeros(&d1, DType::F32, 6),
        // Device 0's memory in a tensor of device 1: a remembered call must look at devices.
        Tensor::from_buffer(&d1, big.buffer().clone(), DType::F32, &[6]).unwrap(),
        // The same memory as `big.narrow(0, 6)`, read as another dtype.
        Tensor::from_buffer(&d0, big.buffer().clone(), DType::I32, &[6]).unwrap(),
    ];
    let kinds = OpKind::ALL;
    let ops = [
        None,
        Some(ReduceOp::Sum),
        Some(ReduceOp::Max),
        Some(ReduceOp::Avg),
        Some(ReduceOp::PreMulSum(0.5)),
        Some(ReduceOp::PreMulSum(2.0)),
        Some(ReduceOp::PreMulSum(-0.0)),
        Some(ReduceOp::PreMulSum(0.0)),
        Some(ReduceOp::PreMulSum(f64::NAN)),
    ];
    let ranks = [None, Some(0), Some(1), Some(2), Some(7)];
    let tags = [
        Tags::default(),
        Tags { algorithm: Some(Algorithm::Ring), ..Tags::default() },
        Tags { algorithm: Some(Algorithm::KaryTree(2)), ..Tags::default() },
        Tags { algorithm: Some(Algorithm::KaryTree(3)), ..Tags::default() },
        Tags { shape: Some(7), ..Tags::default() },
        Tags { part_of: Some(Composite::BroadcastBytes), ..Tags::default() },
    ];
    let (world, hits_before) = (3, HITS.load(Ordering::Relaxed));
    for rank in 0..world {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ rank as u64);
        let mut memo = Memos::default();
        let tensor = |rng: &mut Rng| match rng.below(4) {
            0 => Tensors::None,
            _ => Tensors::One(&pool[rng.below(pool.len())]),
        };
        let fresh_call = |rng: &mut Rng| {
            let (input, output) = (tensor(rng), tensor(rng));
            let in_place = rng.below(3) == 0;
            Call {
                input,
                output: if in_place { input } else { output },
                op: rng.pick(&ops),
                root: rng.pick(&ranks),
                peer: rng.pick(&ranks),
                in_place,
                tags: rng.pick(&tags),
                ..Call::new(rng.pick(&kinds))
            }
        };
        let mut call = fresh_call(&mut rng);
        let (mut accepted, mut repeats) = (0, 0);
        // The last calls made, of which the memo holds some (the newest first).
        let mut history = vec![copy(&call)];
        for step in 0..40_000 {
            // Most calls repeat the one before or one made a few calls ago (a training step's
            // few calls in turn); of the rest, most change one field of the call before.
            match rng.below(10) {
                0..4 => repeats += 1,
                4 => call = copy(&history[rng.below(history.len())]),
                5..9 => match rng.below(8) {
                    0 => call.kind = rng.pick(&kinds),
                    1 => call.input = tensor(&mut rng),
                    2 => call.output = tensor(&mut rng),
                    3 => call.op = rng.pick(&ops),
                    4 => call.root = rng.pick(&ranks),
                    5 => call.peer = rng.pick(&ranks),
                    6 => call.in_place = !call.in_place,
                    _ => call.tags = rng.pick(&tags),
                },
                _ => call = fresh_call(&mut rng),
            }
            let id = |b: &crate::mem::HostMem| d0.mem_id(b);
            let want = outcome(fresh::validate(&call, rank, world, &d0, id));
            let got = outcome(validate(Some(&mut memo), &call, rank, world, &d0, id));
            assert_eq!(got, want, "rank {rank}, call #{step}");
            history.insert(0, copy(&call));
            history.truncate(6);
            accepted += usize::from(!want.starts_with("error"));
        }
        assert!(accepted > 4_000 && repeats > 15_000, "rank {rank}: {accepted} accepted, {repeats} repeats");
    }
    // Other tests of this binary may match memos meanwhile: at least this test's own.
    assert!(HITS.load(Ordering::Relaxed) - hits_before > 6_000, "the memo was hardly used");
}
