//! The resumable collective-training example (`--features burn`): `run` trains two updates and
//! saves the state after the first; `resume` restores it and must reproduce the second update
//! bit for bit. Both are called in this process, from the example's own source, on burn's CPU
//! backend and — with `wgpu` too — on burn's wgpu backend (and with `burn-fusion` on its
//! default, fused one).
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

/// The example's command line, as `cargo run --example collective_training -- run DIR` then
/// `-- resume DIR` would call it, on the backend the features select (the CPU backend, or wgpu
/// with `wgpu`); and its refusals: a bad usage, a resume with nothing to resume.
#[test]
fn the_command_line_runs_then_resumes() {
    use example::Choice;
    use ruccl::burn::Handover;
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

#[test]
fn resume_reproduces_run_bit_for_bit() {
    run_then_resume::<(burn::backend::NdArray, ruccl::HostDevice)>("cpu");
}

/// The same on burn's wgpu backend, the gradients reduced on the device.
#[cfg(feature = "wgpu")]
#[test]
fn resume_reproduces_run_bit_for_bit_on_wgpu() {
    use ruccl::burn::{Handover, WgpuBackend};
    use ruccl::device::cubecl::WgpuCubeDevice;
    let device = burn::backend::wgpu::WgpuDevice::DefaultDevice;
    if let Err(e) = <WgpuBackend as Handover<WgpuCubeDevice>>::comm_device(&device) {
        eprintln!("SKIPPED: no wgpu device: {e}");
        return;
    }
    run_then_resume::<(WgpuBackend, WgpuCubeDevice)>("wgpu");
}

/// The same on burn's default wgpu backend, `Fusion<CubeBackend<WgpuRuntime>>`: fused
/// gradients resolved and reduced on the device, registered back for the optimizer.
#[cfg(feature = "burn-fusion")]
#[test]
fn resume_reproduces_run_bit_for_bit_on_fused_wgpu() {
    use ruccl::burn::{FusedWgpuBackend, Handover};
    use ruccl::device::cubecl::WgpuCubeDevice;
    let device = burn::backend::wgpu::WgpuDevice::DefaultDevice;
    if let Err(e) = <FusedWgpuBackend as Handover<WgpuCubeDevice>>::comm_device(&device) {
        eprintln!("SKIPPED: no wgpu device: {e}");
        return;
    }
    run_then_resume::<(FusedWgpuBackend, WgpuCubeDevice)>("fused-wgpu");
}
