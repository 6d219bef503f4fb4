//! Integration tests of the core: every collective, every error path, on every device.
//!
//! Run with `cargo test --test core`. All core tests compile into this one binary. Each test
//! body is written once, generic over a [`harness::TestDevice`], and the [`core_suite!`]
//! macro at the bottom stamps the whole suite out per device:
//! - `host`: the [`ruccl::HostDevice`], where peers read each other's memory in place;
//! - `staged`: [`staged_device::StagedDevice`], the host device pretending the host cannot
//!   touch its buffers, which forces the scheduler's host-staging path that GPUs take;
//! - `shared` / `asynchronous`: ranks sharing one device (device payloads, zero host bytes),
//!   and a device whose every operation completes later on another thread;
//! - `one_thread`: the host device with every rank driven by the one process-wide progress
//!   thread (`CommConfig::with_shared_progress`).
//! - `tcp`, `tcp_host`: the shared test device and the host device with every rank its own
//!   TCP endpoint on loopback ([`ruccl::config::Transport::Tcp`]), so every collective and
//!   error case also runs over sockets.
//!
//! A GPU device joins by implementing `TestDevice` and adding one `core_suite!` line.
//! Test names read `<device>::<test>` or `<device>::<test>::w<world size>`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

/// Calls `$f::<$d, T>(args)` with `T` the Rust element type of the runtime dtype `$dt`.
macro_rules! per_dtype {
    ($dt:expr, $f:ident::<$d:ty>($($arg:expr),* $(,)?)) => {
        match $dt {
            ::ruccl::DType::F32 => $f::<$d, f32>($($arg),*),
            ::ruccl::DType::F64 => $f::<$d, f64>($($arg),*),
            ::ruccl::DType::F16 => $f::<$d, ::half::f16>($($arg),*),
            ::ruccl::DType::BF16 => $f::<$d, ::half::bf16>($($arg),*),
            ::ruccl::DType::I8 => $f::<$d, i8>($($arg),*),
            ::ruccl::DType::U8 => $f::<$d, u8>($($arg),*),
            ::ruccl::DType::I32 => $f::<$d, i32>($($arg),*),
            ::ruccl::DType::U32 => $f::<$d, u32>($($arg),*),
            ::ruccl::DType::I64 => $f::<$d, i64>($($arg),*),
            ::ruccl::DType::U64 => $f::<$d, u64>($($arg),*),
            other => panic!("the test suite has no element type for {other}"),
        }
    };
}

#[cfg(any(feature = "test-wgpu", feature = "test-vulkan", feature = "test-metal", feature = "test-cuda"))]
#[path = "core/gpu.rs"]
mod gpu;
#[cfg(any(feature = "test-wgpu", feature = "test-vulkan", feature = "test-metal", feature = "test-cuda"))]
#[path = "core/gpu_peer.rs"]
mod gpu_peer;
#[path = "core/harness.rs"]
mod harness;
#[path = "core/reference.rs"]
mod reference;
#[path = "core/staged_device.rs"]
mod staged_device;

#[path = "core/algorithms.rs"]
mod algorithms;
#[path = "core/concurrency.rs"]
mod concurrency;
#[path = "core/errors.rs"]
mod errors;
#[path = "core/execution.rs"]
mod execution;
#[path = "core/failures.rs"]
mod failures;
#[path = "core/joining.rs"]
mod joining;
#[path = "core/large.rs"]
mod large;
#[path = "core/messages.rs"]
mod messages;
#[path = "core/mismatch.rs"]
mod mismatch;
#[path = "core/movement.rs"]
mod movement;
#[path = "core/p2p.rs"]
mod p2p;
#[path = "core/reductions.rs"]
mod reductions;
#[path = "core/soundness.rs"]
mod soundness;
#[path = "core/splits.rs"]
mod splits;
#[path = "core/truth.rs"]
mod truth;
#[path = "core/warnings.rs"]
mod warnings;

/// `Communicator` must be `Send + Sync` (checked at compile time, for every device).
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<ruccl::Communicator<ruccl::HostDevice>>();
    send_sync::<ruccl::Communicator<staged_device::StagedDevice>>();
    send_sync::<ruccl::Tensor<ruccl::HostDevice>>();
};

/// One `#[test]` per world size — 1, 2, 3, 4, 5 and 8: one, powers of two and not — in a
/// module named after the test.
macro_rules! per_world {
    ($dev:ty; $($module:ident :: $test:ident),* $(,)?) => {$(
        mod $test {
            fn at(world: usize) {
                use crate::harness::TestDevice;
                if world > <$dev>::max_world() {
                    eprintln!("SKIPPED on {}: world {world} is above this device's test cap of {}", stringify!($dev), <$dev>::max_world());
                    return;
                }
                crate::harness::guard::<$dev>(|| crate::$module::$test::<$dev>(world));
            }
            #[test]
            fn w1() {
                at(1)
            }
            #[test]
            fn w2() {
                at(2)
            }
            #[test]
            fn w3() {
                at(3)
            }
            #[test]
            fn w4() {
                at(4)
            }
            #[test]
            fn w5() {
                at(5)
            }
            #[test]
            fn w8() {
                at(8)
            }
        }
    )*};
}

/// One `#[test]` per listed test function.
macro_rules! single {
    ($dev:ty; $($module:ident :: $test:ident),* $(,)?) => {$(
        #[test]
        fn $test() {
            crate::harness::guard::<$dev>(crate::$module::$test::<$dev>);
        }
    )*};
}

/// The whole suite for one device (and transport). `sockets` leaves out the tests that rely
/// on a failure being seen by every rank the instant it happens (a shared flag in-process):
/// over sockets the news travels as a frame, and a rank that acts within those microseconds
/// reports what it saw itself (its own timeout, a mismatched message) instead.
macro_rules! core_suite {
    ($suite:ident, $dev:ty) => {
        mod $suite {
            core_suite!(@body $dev);
            single!($dev;
                failures::missing_rank_times_out,
                failures::missing_rank_on_first_op,
                failures::abort_wakes_blocked_rank,
                truth::recv_recv_deadlock_is_named,
            );
        }
    };
    ($suite:ident, $dev:ty, sockets) => {
        mod $suite {
            core_suite!(@body $dev);
        }
    };
    (@body $dev:ty) => {
            per_world!($dev;
                reductions::all_reduce,
                reductions::reduce,
                reductions::reduce_scatter,
                movement::broadcast,
                movement::all_gather,
                movement::all_to_all,
                movement::gather,
                movement::scatter,
                p2p::send_recv,
                p2p::barrier,
                large::all_reduce_large,
                large::rooted_large,
                algorithms::ring_small_chunks,
                algorithms::tree,
                algorithms::recursive_doubling,
                algorithms::identical_bits,
                soundness::aliased_all_reduce_runs_in_place,
                execution::group_drives_every_rank,
                execution::group_direct_path_every_op,
                soundness::aliased_outputs_of_every_collective,
            );
            single!($dev;
                movement::broadcast_into_ignores_non_root_input,
                movement::shapes_are_free,
                p2p::p2p_interleaved_with_collectives,
                concurrency::thousand_small_all_reduces,
                concurrency::thousand_mixed_ops,
                concurrency::communicators_interleaved,
                concurrency::communicators_on_separate_threads,
                splits::split_all_concurrent_with_parent,
                splits::split_from_subset_reordered,
                splits::split_from_disjoint_groups,
                splits::split_nested_and_repeated,
                splits::split_from_invalid_lists,
                errors::all_gather_wrong_sizes,
                errors::reduce_scatter_wrong_sizes,
                errors::all_to_all_not_divisible,
                errors::dtype_mismatch,
                errors::root_out_of_range,
                errors::peer_out_of_range_and_self,
                errors::tensor_on_another_device,
                errors::missing_root_buffers,
                errors::non_finite_premulsum,
                errors::one_rank_invalid_then_retries,
                failures::abort_from_peer_rank,
                failures::abort_idle_communicator,
                failures::quiet_gap_longer_than_silence,
                failures::peer_drops_mid_way,
                failures::drop_wakes_blocked_peer,
                failures::drop_never_hangs,
                joining::new_missing_rank_times_out,
                joining::new_duplicate_rank,
                joining::new_world_mismatch,
                joining::new_rank_out_of_range,
                joining::new_config_mismatch,
                joining::new_live_id_refused,
                joining::new_same_id_concurrently,
                joining::split_children_of_reused_id_differ,
                joining::new_timeout_max,
                warnings::join_warns_missing_rank,
                warnings::collective_warns_missing_rank,
                mismatch::different_op,
                mismatch::different_count,
                mismatch::different_dtype,
                mismatch::different_reduce_op,
                mismatch::different_root,
                mismatch::different_root_no_messages,
                mismatch::different_op_world4,
                mismatch::send_recv_mismatch,
                mismatch::send_vs_collective,
                mismatch::recv_vs_collective,
                mismatch::exchange_vs_messages,
                execution::small_ops_exchange,
                mismatch::split_lists_differ,
                soundness::tensor_is_free_after_a_failed_op,
                execution::group_ring_of_sends_never_deadlocks,
                execution::group_with_a_bad_call_runs_nothing,
                execution::work_overlaps_computation,
                execution::work_issue_order_and_dropped_handles,
                execution::work_abort_and_errors,
                soundness::buffer_clones_on_two_threads,
                soundness::impossible_allocations_are_errors,
                truth::root_mismatch_reaches_every_rank,
                truth::cut_short_by_a_later_failure_is_aborted,
                truth::timeout_names_the_rank_furthest_behind,
                truth::departure_never_overtakes_a_delivery,
            );
    };
}

core_suite!(host, ruccl::HostDevice);
core_suite!(staged, crate::staged_device::StagedDevice);
core_suite!(shared, crate::staged_device::SharedDevice);
core_suite!(asynchronous, crate::staged_device::AsyncDevice);
core_suite!(one_thread, crate::staged_device::OneThreadDevice);
core_suite!(tcp, crate::staged_device::TcpDevice, sockets);
core_suite!(tcp_host, crate::staged_device::TcpHostDevice, sockets);
// The GPU device of the `test-*` feature (one at a time): every rank on one shared device.
#[cfg(any(feature = "test-wgpu", feature = "test-vulkan", feature = "test-metal", feature = "test-cuda"))]
core_suite!(on_gpu, crate::gpu::GpuDevice);

#[test]
fn local_failure_stops_peers_at_once() {
    truth::local_failure_stops_peers_at_once();
}

#[test]
fn communicator_is_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<ruccl::Communicator<ruccl::HostDevice>>();
}
