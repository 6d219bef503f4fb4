//! What users read: `Debug` of an error (what `fn main() -> ruccl::Result<()>` prints) is
//! readable, hints fit the situation and appear once, and one call carries one op label in
//! every message about it. Host device only: messages do not depend on the device.

use std::time::Duration;

use ruccl::{Algorithm, CollectiveError, Communicator, DType, ErrorKind, HostDevice, ReduceOp, Tensor, UniqueId};

use crate::harness::{Opts, run};

const USABLE: &str = "the communicator is still usable";

fn hints(e: &CollectiveError) -> usize {
    e.to_string().matches("What to do").count()
}

fn solo() -> Communicator<HostDevice> {
    Communicator::new(HostDevice::default(), 1, UniqueId::new().unwrap(), 0).unwrap()
}

/// What `main` prints (`Error: {e:?}`): the message first, then one section per part.
#[test]
fn debug_reads_like_a_report() {
    let comm = solo();
    let mut t = Tensor::zeros(&HostDevice::default(), DType::F32, &[4]).unwrap();
    let e = comm.broadcast(&mut t, 9).unwrap_err();
    let d = format!("{e:?}");
    assert!(d.starts_with("invalid argument: root 9 is out of range"), "{d}");
    assert!(d.contains("\n\nContext:\n    rank  0\n    op    broadcast(4 x f32, root 9)\n"), "{d}");
    assert!(
        d.contains(&format!("\n\nWhat to do: fix the arguments on this rank; nothing was sent and {USABLE}.")),
        "{d}"
    );
    assert!(!d.contains("Inner") && !d.contains("ErrorContext"), "a struct dump: {d}");
}

/// Errors that arise where no communicator exists do not speak of one.
#[test]
fn no_communicator_no_usable_hint() {
    let dev = HostDevice::default();
    let errors = [
        ("tensor", Tensor::from_slice(&dev, &[1.0f32, 2.0], &[3]).unwrap_err()),
        ("UniqueId", UniqueId::from_bytes(&[0; 3]).unwrap_err()),
        ("environment", "bogus".parse::<Algorithm>().unwrap_err()),
    ];
    for (what, e) in errors {
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{what}: {e}");
        for text in [e.to_string(), format!("{e:?}")] {
            assert!(!text.contains("communicator"), "{what}: {text}");
            assert!(text.contains("What to do: fix the arguments"), "{what}: {text}");
        }
    }
}

/// After `abort()`, every later call says so with one hint, and a barrier is `barrier`.
#[test]
fn aborted_hint_once_and_barrier_label() {
    let comm = solo();
    comm.abort();
    for attempt in 0..3 {
        let e = comm.barrier().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Aborted);
        assert_eq!(hints(&e), 1, "attempt {attempt}: {e}");
        assert_eq!(e.context().op.as_deref(), Some("barrier"), "attempt {attempt}: {e}");
        assert!(e.to_string().contains("rank 0 called abort()"), "attempt {attempt}: {e}");
        assert!(!e.to_string().contains("0 x u8"), "{e}");
    }
}

/// One label for one call: the validation error, the collective's own failure and the
/// sticky error of the next call all print `all_reduce(sum, 16 x f32)`.
#[test]
fn one_label_per_call() {
    const LABEL: &str = "all_reduce(sum, 16 x f32)";
    run::<HostDevice, _>(2, &Opts::timed(Duration::from_secs(5)), |ctx| {
        let x = ctx.tensor(&[1.0f32; 16]);
        // In place and out of place, rejected by validation: the same label.
        let mut y = Tensor::zeros(&ctx.dev, DType::F64, &[16]).unwrap();
        let e = ctx.comm.all_reduce_into(&mut y, &x, ReduceOp::Sum).unwrap_err();
        assert_eq!(e.context().op.as_deref(), Some(LABEL), "{e}");
        assert!(e.to_string().contains(USABLE), "{e}");
        // A mismatch (rank 1 calls max): the failing collective carries the same label.
        let mut t = ctx.tensor(&[1.0f32; 16]);
        let op = if ctx.rank == 0 { ReduceOp::Sum } else { ReduceOp::Max };
        let e = ctx.comm.all_reduce(&mut t, op).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Mismatch, "{e}");
        if ctx.rank == 0 {
            assert_eq!(e.context().op.as_deref(), Some(LABEL), "{e}");
        }
        assert_eq!(hints(&e), 1, "{e}");
        // The next call quotes it without its hint.
        let e = ctx.comm.all_reduce(&mut t, ReduceOp::Sum).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Aborted, "{e}");
        assert_eq!(e.context().op.as_deref(), Some(LABEL), "{e}");
        assert_eq!(hints(&e), 1, "{e}");
        assert!(!e.to_string().contains(USABLE), "{e}");
    });
}
