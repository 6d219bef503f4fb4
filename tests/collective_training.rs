//! The resumable collective-training example (`--features burn`): `run` trains two updates and
//! saves the state after the first; `resume` restores it and must reproduce the second update
//! bit for bit. Both are called in this process, from the example's own source, on burn's CPU
//! backend. The same on burn's wgpu backend, and the example's command line, are in
//! `tests/collective_training_wgpu.rs` (`--features burn,wgpu`): two binaries that compile
//! side by side, since burn's training loop is the largest thing the GPU step compiles.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[allow(dead_code)]
#[path = "../examples/collective_training.rs"]
mod example;

/// A directory that does not exist yet, unique to this call.
fn temp_dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "ruccl-collective-training-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    ))
}

fn run_then_resume<C: example::Choice>(name: &str) {
    let dir = temp_dir(name);
    let ran = example::run_on::<C>(&dir).unwrap();
    assert!(example::run_on::<C>(&dir).is_err(), "run must refuse an existing directory");
    let resumed = example::resume_on::<C>(&dir).unwrap();
    assert_eq!(ran, resumed);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn resume_reproduces_run_bit_for_bit() {
    run_then_resume::<(burn::backend::NdArray, ruccl::HostDevice)>("cpu");
}
