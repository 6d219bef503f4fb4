//! Elements of a dtype chosen at run time, kept as their bytes ([`Vals`]), and the reference
//! data of `reference.rs` in that form.
//!
//! The sweeps run every dtype on every device. Written over `Vals`, a sweep's body is
//! compiled once per device instead of once per device and element type: only the
//! reference's arithmetic (`reference.rs`) is compiled per element type, and once, not per
//! device. The comparisons are bit for bit either way.

use std::ops::Range;

use half::{bf16, f16};
use ruccl::{DType, ReduceOp};

use crate::reference::{self, Elem};

/// Runs `$body` with `$t` the Rust element type of the runtime dtype `$dt`.
macro_rules! with_elem {
    ($dt:expr, $t:ident => $body:expr) => {
        match $dt {
            DType::F32 => {
                type $t = f32;
                $body
            }
            DType::F64 => {
                type $t = f64;
                $body
            }
            DType::F16 => {
                type $t = f16;
                $body
            }
            DType::BF16 => {
                type $t = bf16;
                $body
            }
            DType::I8 => {
                type $t = i8;
                $body
            }
            DType::U8 => {
                type $t = u8;
                $body
            }
            DType::I32 => {
                type $t = i32;
                $body
            }
            DType::U32 => {
                type $t = u32;
                $body
            }
            DType::I64 => {
                type $t = i64;
                $body
            }
            DType::U64 => {
                type $t = u64;
                $body
            }
            other => panic!("the test suite has no element type for {other}"),
        }
    };
}

/// Elements of one dtype, as the bytes a tensor of that dtype holds.
#[derive(Clone, PartialEq, Eq)]
pub struct Vals {
    dtype: DType,
    bytes: Vec<u8>,
}

impl Vals {
    /// The elements of `v`.
    pub fn of<T: Elem>(v: &[T]) -> Self {
        Vals { dtype: T::DTYPE, bytes: bytemuck::cast_slice(v).to_vec() }
    }

    /// Elements of `dtype` from their bytes (a whole number of elements).
    pub fn from_bytes(dtype: DType, bytes: Vec<u8>) -> Self {
        assert_eq!(bytes.len() % dtype.size(), 0, "{} bytes are not a whole number of {dtype}", bytes.len());
        Vals { dtype, bytes }
    }

    /// No elements of `dtype`.
    pub fn empty(dtype: DType) -> Self {
        Vals { dtype, bytes: Vec::new() }
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The element count.
    pub fn len(&self) -> usize {
        self.bytes.len() / self.dtype.size()
    }

    /// Elements `r`.
    pub fn slice(&self, r: Range<usize>) -> Vals {
        let s = self.dtype.size();
        Vals { dtype: self.dtype, bytes: self.bytes[r.start * s..r.end * s].to_vec() }
    }

    /// Overwrites elements `at..` with `src`.
    pub fn put(&mut self, at: usize, src: &Vals) {
        assert_eq!(self.dtype, src.dtype);
        let s = self.dtype.size();
        self.bytes[at * s..at * s + src.bytes.len()].copy_from_slice(&src.bytes);
    }

    /// Appends `more`'s elements.
    pub fn extend(&mut self, more: &Vals) {
        assert_eq!(self.dtype, more.dtype);
        self.bytes.extend_from_slice(&more.bytes);
    }

    /// The concatenation of `parts`, all of `dtype`.
    pub fn concat(dtype: DType, parts: impl IntoIterator<Item = Vals>) -> Vals {
        let mut all = Vals::empty(dtype);
        for p in parts {
            all.extend(&p);
        }
        all
    }

    /// Elements `r` as text, for failure messages.
    pub fn show(&self, r: Range<usize>) -> String {
        let r = r.start.min(self.len())..r.end.min(self.len());
        with_elem!(self.dtype, T => {
            let v: &[T] = bytemuck::cast_slice(&self.bytes);
            format!("{:?}", &v[r])
        })
    }
}

impl std::fmt::Debug for Vals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} x {}: {}", self.len(), self.dtype, self.show(0..8))
    }
}

/// Asserts two runs of elements are equal bit for bit, reporting the first difference.
pub fn assert_vals(got: &Vals, want: &Vals, what: impl std::fmt::Display) {
    assert_eq!(got.dtype, want.dtype, "{what}: dtype {}, expected {}", got.dtype, want.dtype);
    assert_eq!(got.len(), want.len(), "{what}: {} elements, expected {}", got.len(), want.len());
    let s = got.dtype.size();
    let differs = |i: usize| got.bytes[i * s..(i + 1) * s] != want.bytes[i * s..(i + 1) * s];
    if let Some(i) = (0..got.len()).find(|&i| differs(i)) {
        let wrong = (0..got.len()).filter(|&i| differs(i)).count();
        panic!(
            "{what}: element {i} is {}, expected {} ({wrong} of {} elements differ; first ones got {}, expected {})",
            got.show(i..i + 1),
            want.show(i..i + 1),
            got.len(),
            got.show(i..i + 8),
            want.show(i..i + 8),
        );
    }
}

/// [`reference::data`] of `dtype`.
pub fn data(dtype: DType, rank: usize, n: usize, salt: usize) -> Vals {
    with_elem!(dtype, T => Vals::of(&reference::data::<T>(rank, n, salt)))
}

/// [`reference::sentinel`] of `dtype`.
pub fn sentinel(dtype: DType, n: usize) -> Vals {
    with_elem!(dtype, T => Vals::of(&reference::sentinel::<T>(n)))
}

/// [`reference::reduce_input`] of `dtype`.
pub fn reduce_input(dtype: DType, op: ReduceOp, rank: usize, n: usize, salt: usize) -> Vals {
    with_elem!(dtype, T => Vals::of(&reference::reduce_input::<T>(op, rank, n, salt)))
}

/// [`reference::reduced`] of `dtype`.
pub fn reduced(dtype: DType, op: ReduceOp, world: usize, n: usize, salt: usize) -> Vals {
    with_elem!(dtype, T => Vals::of(&reference::reduced::<T>(op, world, n, salt)))
}

/// `n` floats of `dtype` (a float type) from `f`'s values (rounded once).
pub fn floats(dtype: DType, n: usize, mut f: impl FnMut() -> f64) -> Vals {
    with_elem!(dtype, T => {
        let v: Vec<T> = (0..n).map(|_| <T as ruccl::Element>::from_f64(f())).collect();
        Vals::of(&v)
    })
}
