//! The collective_training example's checks, written once: `tests/collective_training.rs` runs
//! them on burn's CPU backend, `tests/burn_wgpu.rs` on burn's wgpu backend. The wgpu half
//! lives in burn_wgpu's binary, which instantiates that backend already: compiled into a binary
//! of its own, burn's wgpu training code was the GPU step's largest build unit (PERFORMANCE.md,
//! session 16). Both binaries declare the example as `crate::example`.

use crate::example::{self, Choice};
use ruccl::burn::Handover;

/// A directory that does not exist yet, unique to this call.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "ruccl-collective-training-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    ))
}

/// `run` trains two updates and saves the state after the first; `run` again refuses the
/// directory; `resume` restores it and must reproduce the second update bit for bit.
pub fn run_then_resume<C: Choice>(name: &str) {
    let dir = temp_dir(name);
    let ran = example::run_on::<C>(&dir).unwrap();
    assert!(example::run_on::<C>(&dir).is_err(), "run must refuse an existing directory");
    let resumed = example::resume_on::<C>(&dir).unwrap();
    assert_eq!(ran, resumed);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The example's command line, as `cargo run --example collective_training -- run DIR` then
/// `-- resume DIR` would call it, on the backend the features select (the CPU backend, or wgpu
/// with `wgpu`); and its refusals: a bad usage, a resume with nothing to resume.
pub fn command_line_runs_then_resumes() {
    type I = <example::Selected as Choice>::I;
    type D = <example::Selected as Choice>::D;
    if let Err(e) = <I as Handover<D>>::comm_device(&Default::default()) {
        eprintln!("SKIPPED: the selected backend has no device: {e}");
        return;
    }
    let dir = temp_dir("cli");
    let cli = |args: &[&str]| example::cli(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
    let path = dir.to_str().unwrap();
    let nothing = cli(&["resume", path]).unwrap_err().to_string();
    assert!(nothing.contains("holds no run to resume"), "{nothing}");
    cli(&["run", path]).unwrap();
    cli(&["resume", path]).unwrap();
    let usage = cli(&["walk", path]).unwrap_err().to_string();
    assert!(usage.starts_with("usage:"), "{usage}");
    std::fs::remove_dir_all(&dir).unwrap();
}
