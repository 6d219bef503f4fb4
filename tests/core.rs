//! Integration tests of the core: every collective, every error path, on every device.
//!
//! Run with `cargo test --test core`. Each test body is written once, generic over a
//! [`harness::TestDevice`] (the modules and macros are in `core/suite.rs`), and the
//! [`core_suite!`] macro at the bottom stamps the whole suite out per device:
//! - `host`: the [`ruccl::HostDevice`], where peers read each other's memory in place;
//! - `staged`: [`staged_device::StagedDevice`], the host device pretending the host cannot
//!   touch its buffers, which forces the scheduler's host-staging path that GPUs take;
//! - `shared` / `asynchronous`: ranks sharing one device (device payloads, zero host bytes),
//!   and a device whose every operation completes later on another thread;
//! - `one_thread`: the host device with every rank driven by the one process-wide progress
//!   thread (`CommConfig::with_shared_progress`).
//!
//! Over loopback TCP the suite is its own binary, `tests/core_tcp.rs` (`cargo test --test
//! core_tcp`), and stamped on a GPU device another, `tests/gpu_core.rs` (`--features
//! test-wgpu` and the like), so building each compiles the test bodies and the library for its
//! devices only, and a cold `cargo test` builds the two host binaries side by side. Another
//! device joins by implementing `TestDevice` and one `core_suite!` line.
//! Test names read `<device>::<test>` or `<device>::<test>::w<world size>`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

include!("core/suite.rs");

/// `Communicator` must be `Send + Sync` (checked at compile time, for every device).
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<ruccl::Communicator<ruccl::HostDevice>>();
    send_sync::<ruccl::Communicator<staged_device::StagedDevice>>();
    send_sync::<ruccl::Tensor<ruccl::HostDevice>>();
};

core_suite!(host, ruccl::HostDevice);
core_suite!(staged, crate::staged_device::StagedDevice);
core_suite!(shared, crate::staged_device::SharedDevice);
core_suite!(asynchronous, crate::staged_device::AsyncDevice);
core_suite!(one_thread, crate::staged_device::OneThreadDevice);

/// The test devices' own tests (here only, not in every binary that stamps the suite).
#[path = "core/staged_device_tests.rs"]
mod staged_device_tests;

/// Host device only: the reductions past the streaming size (32 MiB buffers); the other
/// devices of the suite stage through it or reduce the same way, and twice the memory per
/// stamp is not worth their time.
#[test]
fn streamed_reductions() {
    harness::guard::<ruccl::HostDevice>(large::streamed_reductions::<ruccl::HostDevice>);
}

#[test]
fn local_failure_stops_peers_at_once() {
    truth::local_failure_stops_peers_at_once();
}

#[test]
fn a_dtype_the_device_cannot_reduce_still_moves() {
    for world in [1, 2, 3] {
        movement::on_a_dtype_the_device_cannot_reduce::<staged_device::NoF64Device>(world);
    }
}

#[test]
fn communicator_is_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<ruccl::Communicator<ruccl::HostDevice>>();
}
