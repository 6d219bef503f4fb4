//! The resumable collective-training example (`--features burn`) on burn's CPU backend: `run`
//! trains two updates and saves the state after the first; `resume` restores it and must
//! reproduce the second update bit for bit. Both are called in this process, from the
//! example's own source. With `wgpu` the same checks run on burn's wgpu backend in
//! `tests/burn_wgpu.rs` (and with `burn-fusion` on its fused one), which instantiates that
//! backend already; the command line runs there too, since `wgpu` selects it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[allow(dead_code)]
#[path = "../examples/collective_training.rs"]
mod example;

#[allow(dead_code)]
#[path = "collective_training/cases.rs"]
mod cases;

/// The example's command line on the CPU backend (with `wgpu` it selects wgpu, and the test
/// runs in `tests/burn_wgpu.rs`).
#[cfg(not(feature = "wgpu"))]
#[test]
fn the_command_line_runs_then_resumes() {
    cases::command_line_runs_then_resumes();
}

#[test]
fn resume_reproduces_run_bit_for_bit() {
    cases::run_then_resume::<(burn::backend::NdArray, ruccl::HostDevice)>("cpu");
}
