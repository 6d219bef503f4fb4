//! The core suite stamped on the GPU device of a `test-*` feature (`test-wgpu`, `test-vulkan`,
//! `test-metal`, `test-cuda`; one at a time), and the tests only a GPU device needs:
//! `XDG_RUNTIME_DIR=/tmp cargo test --features test-wgpu --test gpu_core` (on Mesa's lavapipe
//! where there is no GPU: `.ci/install-lavapipe`).
//!
//! Every rank shares one device (`on_gpu::*`, the same test bodies `tests/core.rs` stamps per
//! host test device); `gpu::*` checks the kernels against the host's bit for bit, the host
//! bytes of ranks sharing a device and ranks on distinct devices; `gpu_peer::*` runs the peer
//! API on the device. A binary of its own: building it compiles the suite for this one device,
//! not again for the host test devices. Without a `test-*` feature it is empty.
#![cfg(any(feature = "test-wgpu", feature = "test-vulkan", feature = "test-metal", feature = "test-cuda"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
// The suite's helpers that only the host test devices' tests use.
#![allow(dead_code)]

include!("core/suite.rs");

#[path = "core/gpu.rs"]
mod gpu;
#[path = "core/gpu_peer.rs"]
mod gpu_peer;

core_suite!(on_gpu, crate::gpu::GpuDevice);
