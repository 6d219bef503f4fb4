//! CubeCL kernels, written once for every runtime: byte copies between offset ranges, the
//! element-wise reduction of one source into a destination range, and scaling (`Avg`,
//! `PreMulSum`). The host kernels in `device/kernels.rs` define the semantics; these match
//! them bit for bit.
//!
//! Two families:
//! - [`native`]: 32- and 64-bit elements as themselves (`f32`, `i32`, `u32`, and `f64`,
//!   `i64`, `u64` where the runtime has them);
//! - [`packed`]: 8- and 16-bit elements (`f16`, `bf16`, `i8`, `u8`) packed into `u32` words,
//!   widened to `f32` or `i32`, combined, and narrowed (round to nearest even), because
//!   CubeCL's WGSL path has none of these types. Each thread owns whole destination words,
//!   so neighbouring elements never race.
//!
//! Every kernel walks its range with a grid-stride loop, so any length runs within the
//! 65,535-workgroups-per-dimension limit. Offsets and lengths are in elements (words for the
//! byte copy) and fit in `u32`.

pub(crate) mod copy;
pub(crate) mod native;
pub(crate) mod packed;
// The `shaders/` snapshot check, run by the GPU test binary (`tests/gpu_core.rs`).
#[cfg(feature = "test-wgpu")]
pub(crate) mod shaders;

/// Units per cube (workgroup).
pub(crate) const CUBE_DIM: u32 = 256;
/// Most cubes one launch uses; larger ranges loop.
pub(crate) const MAX_CUBES: u32 = 4096;

/// Combine codes (comptime parameters of the kernels).
pub(crate) const SUM: u32 = 0;
pub(crate) const PROD: u32 = 1;
pub(crate) const MIN: u32 = 2;
pub(crate) const MAX: u32 = 3;

/// Cubes for `units` units of work, and the grid stride that goes with them.
pub(crate) fn grid(units: u32) -> (u32, u32) {
    let cubes = units.div_ceil(CUBE_DIM).clamp(1, MAX_CUBES);
    (cubes, cubes * CUBE_DIM)
}

/// The combine code of a [`Combine`](crate::types::Combine).
pub(crate) fn combine_code(c: crate::types::Combine) -> u32 {
    use crate::types::Combine;
    match c {
        Combine::Sum => SUM,
        Combine::Prod => PROD,
        Combine::Min => MIN,
        Combine::Max => MAX,
    }
}
