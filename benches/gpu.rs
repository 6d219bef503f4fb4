//! GPU device bandwidth: on the default wgpu adapter with `--features wgpu` (Mesa's lavapipe
//! on CI machines, where the figures are a CPU emulation's and judge nothing absolute), or on
//! CUDA GPU 0 with `--features cuda` (without either feature it prints one line and exits).
//!
//! Run: `XDG_RUNTIME_DIR=/tmp cargo bench -p ruccl-bench --features wgpu --bench gpu`, or
//! `cargo bench -p ruccl-bench --features cuda --bench gpu` (add a filter, e.g. `-- gpu_device`).
//! On wgpu `RUCCL_GPU_BENCH_BIG=1` adds the 256 MiB all_reduce (above the 128 MiB one binding
//! holds on lavapipe: its buffers are held in parts there); on CUDA it is always run.
//!
//! Groups:
//! - `gpu_device/64MiB`: the reduce kernel (f32 sum, one device source) against a plain
//!   device copy of the same bytes on the same device, and host→device upload and
//!   device→host download through the `Device` contract (staged transfers).
//! - `gpu_calls/{4KiB,1MiB,16MiB}`: upload, download, copy and reduce at smaller sizes, so a
//!   fixed cost per call (launch, sync, allocation) shows apart from a per-byte one.
//! - `cuda_upload/64MiB` (CUDA only): a 64 MiB upload's steps alone against a raw
//!   `cuMemcpyHtoD` from pageable and page-locked memory (a diagnosis; see `cuda_upload`).
//! - `gpu_all_reduce/{1MiB,64MiB,256MiB}`: all_reduce (f32 sum) across 4 ranks sharing one
//!   device (rank threads; device payloads, no host bytes), and across 2 ranks on distinct
//!   devices (wgpu: two devices opened on the one adapter; CUDA: GPUs 0 and 1, or GPU 0 twice
//!   as two devices where there is one), staged through host memory.
//!
//! Criterion reports `Throughput::Bytes` of the buffer (algbw); a copy or a reduce reads and
//! writes more than that (copy: 2×, reduce: 3×). `RUCCL_GPU_REQUIRED=1` makes a missing device
//! a failure instead of a skip.

#![allow(missing_docs, clippy::expect_used, clippy::unwrap_used, clippy::panic)] // a benchmark harness: failing loudly is right

#[cfg(any(feature = "wgpu", feature = "cuda"))]
#[path = "common/rank_threads.rs"]
mod rank_threads;

#[cfg(any(feature = "wgpu", feature = "cuda"))]
#[path = "gpu/body.rs"]
mod body;

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn main() {
    body::benches();
    criterion::Criterion::default().configure_from_args().final_summary();
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn main() {
    eprintln!("SKIPPED the GPU benches: build with --features wgpu or --features cuda");
}
