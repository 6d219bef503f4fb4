// The core suite's modules and the macros that stamp it out per device, included (`include!`)
// by the two test binaries that run it: `tests/core.rs` (the host device and the test devices
// built on it) and `tests/gpu_core.rs` (the GPU device of a `test-*` feature). Each binary
// compiles every test body only for the devices it stamps. Paths are relative to this file.

#[path = "harness.rs"]
mod harness;
#[path = "reference.rs"]
mod reference;
#[path = "staged_device.rs"]
mod staged_device;
#[path = "vals.rs"]
mod vals;

#[path = "algorithms.rs"]
mod algorithms;
#[cfg(feature = "tracing")]
#[path = "capture.rs"]
mod capture;
#[path = "concurrency.rs"]
mod concurrency;
#[path = "errors.rs"]
mod errors;
#[path = "execution.rs"]
mod execution;
#[path = "failures.rs"]
mod failures;
#[path = "grouped.rs"]
mod grouped;
#[path = "joining.rs"]
mod joining;
#[path = "lists.rs"]
mod lists;
#[path = "large.rs"]
mod large;
#[path = "messages.rs"]
mod messages;
#[path = "mismatch.rs"]
mod mismatch;
#[path = "movement.rs"]
mod movement;
#[path = "objects.rs"]
mod objects;
#[path = "p2p.rs"]
mod p2p;
#[path = "reductions.rs"]
mod reductions;
#[path = "soundness.rs"]
mod soundness;
#[path = "splits.rs"]
mod splits;
#[path = "truth.rs"]
mod truth;
#[path = "warnings.rs"]
mod warnings;


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
                movement::all_to_all_v,
                movement::all_to_all_v_in_pieces,
                movement::gather,
                movement::scatter,
                lists::lists_gather,
                lists::lists_scatter,
                lists::lists_reduce_scatter,
                lists::lists_all_to_all,
                lists::lists_grouped,
                objects::byte_collectives,
                p2p::send_recv,
                p2p::async_ring,
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
                grouped::group_has_every_blocking_call,
                grouped::group_with_several_calls_per_communicator,
                grouped::group_sends_and_receives_to_self,
                grouped::group_all_to_all_v,
                soundness::aliased_outputs_of_every_collective,
            );
            single!($dev;
                reductions::f16_avg_does_not_overflow,
                movement::broadcast_into_ignores_non_root_input,
                movement::shapes_are_free,
                p2p::p2p_interleaved_with_collectives,
                p2p::held_back_calls_are_named,
                large::large_frames_between_small,
                concurrency::thousand_small_all_reduces,
                concurrency::one_communicator_from_two_threads,
                concurrency::is_usable_never_waits_for_a_running_op,
                grouped::group_beside_a_thread_issuing_works,
                grouped::group_refuses_unmatched_sends_to_self,
                grouped::group_self_copy_after_earlier_works,
                grouped::group_held_up_by_an_earlier_op_says_so,
                concurrency::thousand_mixed_ops,
                concurrency::communicators_interleaved,
                concurrency::communicators_on_separate_threads,
                concurrency::a_second_thread_in_a_call_is_refused_and_aborts,
                splits::split_all_concurrent_with_parent,
                splits::split_from_subset_reordered,
                splits::split_from_disjoint_groups,
                splits::split_nested_and_repeated,
                splits::split_from_invalid_lists,
                errors::all_gather_wrong_sizes,
                errors::reduce_scatter_wrong_sizes,
                errors::all_to_all_not_divisible,
                errors::all_to_all_v_bad_splits,
                lists::lists_errors,
                objects::byte_collectives_bad_calls,
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
                failures::drop_with_work_pending_finishes_it,
                failures::a_slow_moving_op_ends_at_its_deadline,
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
                mismatch::composite_vs_plain,
                mismatch::different_root_no_messages,
                mismatch::different_op_world4,
                mismatch::send_recv_mismatch,
                mismatch::send_recv_mismatch_in_chunks,
                mismatch::all_to_all_v_splits_disagree,
                mismatch::all_to_all_v_mismatch_in_pieces,
                mismatch::send_vs_collective,
                mismatch::recv_vs_collective,
                mismatch::exchange_vs_messages,
                execution::small_ops_exchange,
                mismatch::split_lists_differ,
                soundness::tensor_is_free_after_a_failed_op,
                execution::group_ring_of_sends_never_deadlocks,
                execution::group_with_a_bad_call_runs_nothing,
                execution::work_overlaps_computation,
                execution::work_is_a_future,
                execution::work_holds_its_tensors,
                execution::repeated_calls_are_checked_each_time,
                execution::work_issue_order_and_dropped_handles,
                execution::work_in_place_block_forms,
                execution::work_abort_and_errors,
                execution::nothing_runs_after_a_failure,
                execution::p2p_cycle_timeout_says_use_a_group,
                execution::one_thread_blocking_each_rank_says_so,
                execution::group_after_isend_joins_it,
                execution::premultiplied_ops_in_flight_keep_their_inputs,
                soundness::buffer_clones_on_two_threads,
                soundness::two_ranks_given_one_buffer_fail,
                soundness::impossible_allocations_are_errors,
                truth::root_mismatch_reaches_every_rank,
                truth::root_mismatch_then_a_rank_leaves,
                truth::quiet_root_mismatch_reaches_every_rank,
                truth::cyclic_roots_mismatch_on_every_rank,
                truth::cut_short_by_a_later_failure_is_aborted,
                truth::timeout_names_the_rank_furthest_behind,
                truth::departure_never_overtakes_a_delivery,
            );
    };
}
