//! The `shaders/` snapshot: the WGSL every kernel variant the CubeCL device launches compiles
//! to, checked in, and each one run through naga (validation, then SPIR-V and MSL output), so
//! a kernel change that would not build for Vulkan or Metal fails here, on Linux.
//!
//! The check is [`check`], compiled with the `test-wgpu` feature and run by the GPU test binary
//! (`gpu::shaders_match_the_kernels_and_build_for_vulkan_and_metal` in `tests/gpu_core.rs`),
//! so the GPU step of CI builds no library unit-test binary of its own. With
//! `RUCCL_BLESS=1` it rewrites the snapshot (and removes files of variants that are gone);
//! without it a difference fails.
//!
//! CubeCL expands a kernel against a client's device properties, so this needs a wgpu
//! adapter (Mesa's lavapipe in CI); without one the check says so and is skipped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cubecl::Runtime;
use cubecl::client::ComputeClient;
use cubecl::prelude::*;
use cubecl::wgpu::{WgpuRuntime, WgslCompiler};

use super::{CUBE_DIM, MAX, MIN, PROD, SUM, copy, native, packed};

type R = WgpuRuntime;

/// Environment variable that rewrites the snapshot.
const BLESS: &str = "RUCCL_BLESS";

const OPS: [(u32, &str); 4] = [(SUM, "sum"), (PROD, "prod"), (MIN, "min"), (MAX, "max")];

fn settings() -> KernelSettings {
    KernelSettings::default().cube_dim(CubeDim::new_1d(CUBE_DIM))
}

fn arr() -> ArrayCompilationArg {
    ArrayCompilationArg { inplace: None }
}

/// WGSL of one kernel, compiled the way the wgpu runtime compiles a checked launch.
fn wgsl<K: CubeKernel>(kernel: K) -> String {
    compiled(kernel, ExecutionMode::Checked)
}

/// WGSL of one kernel launched unchecked (`launch_unchecked`).
fn unchecked<K: CubeKernel>(kernel: K) -> String {
    compiled(kernel, ExecutionMode::Unchecked)
}

fn compiled<K: CubeKernel>(kernel: K, mode: ExecutionMode) -> String {
    let address = kernel.address_type();
    let mut compiler = WgslCompiler::default();
    match cubecl::Compiler::compile(
        &mut compiler,
        kernel.define(),
        &cubecl::WgpuCompilationOptions::default(),
        mode,
        address,
    ) {
        Ok(shader) => canonical(&shader.to_string()),
        Err(e) => format!("// CubeCL could not compile this kernel: {e:?}\n"),
    }
}

/// CubeCL declares a kernel's mutable locals (`var l_mut_N: T;`) in hash-map order, which
/// changes from run to run; each run of such declarations is sorted by `N` (the order of
/// declarations means nothing in WGSL), so the snapshot is stable.
fn canonical(wgsl: &str) -> String {
    let key = |line: &str| -> Option<u64> {
        let rest = line.strip_prefix("var l_mut_")?;
        let (n, ty) = rest.split_once(':')?;
        ty.trim_end().ends_with(';').then_some(())?;
        n.parse().ok()
    };
    let mut out = String::with_capacity(wgsl.len());
    let mut block: Vec<(u64, &str)> = Vec::new();
    let flush = |block: &mut Vec<(u64, &str)>, out: &mut String| {
        block.sort_unstable();
        for (_, l) in block.drain(..) {
            out.push_str(l);
            out.push('\n');
        }
    };
    for line in wgsl.lines() {
        match key(line) {
            Some(n) => block.push((n, line)),
            None => {
                flush(&mut block, &mut out);
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    flush(&mut block, &mut out);
    out
}

/// Every kernel variant `device/cubecl/launch.rs` can launch, by file stem: (source, WGSL).
fn variants(client: &ComputeClient<R>) -> BTreeMap<String, (&'static str, String)> {
    let mut out = BTreeMap::new();
    let c = || client.clone();
    out.insert(
        "copy_bytes".into(),
        ("copy.rs", wgsl(copy::copy_bytes::CopyBytes::<R>::new(settings(), c(), arr(), (), arr(), (), (), (), ()))),
    );
    out.insert(
        "fill_words".into(),
        ("copy.rs", wgsl(copy::fill_words::FillWords::<R>::new(settings(), c(), arr(), (), (), (), ()))),
    );
    // The native kernels run unchecked, on one element or on the widest vector the launcher
    // picks (4 lanes of 32 bits, 2 of 64: wgpu's 128-bit loads).
    macro_rules! native {
        ($t:ty, $name:literal, $bits:expr, $wide:expr) => {
            for v in [1usize, $wide] {
                for (op, op_name) in OPS {
                    let k = native::reduce_native::ReduceNative::<$t, R>::new(
                        settings(),
                        c(),
                        arr(),
                        (),
                        arr(),
                        (),
                        arr(),
                        (),
                        (),
                        (),
                        v,
                        op,
                        $bits,
                    );
                    out.insert(format!("reduce_native_{}x{v}_{op_name}", $name), ("native.rs", unchecked(k)));
                }
                for (divide, how) in [(true, "div"), (false, "mul")] {
                    let k = native::scale_native::ScaleNative::<$t, R>::new(
                        settings(),
                        c(),
                        arr(),
                        (),
                        arr(),
                        (),
                        (),
                        (),
                        (),
                        v,
                        divide,
                    );
                    out.insert(format!("scale_native_{}x{v}_{how}", $name), ("native.rs", unchecked(k)));
                }
            }
        };
    }
    native!(f32, "f32", 32, 4);
    native!(f64, "f64", 64, 2);
    native!(i32, "i32", 0, 4);
    native!(u32, "u32", 0, 4);
    native!(i64, "i64", 0, 2);
    native!(u64, "u64", 0, 2);
    let kinds = [(packed::F16, "f16"), (packed::BF16, "bf16"), (packed::I8, "i8"), (packed::U8, "u8")];
    for (kind, kind_name) in kinds {
        let float = kind == packed::F16 || kind == packed::BF16;
        // Integers reduce one source at a time; 16-bit floats over several sources go
        // through the f32 scratch (first, middle, last).
        let modes: &[(u32, &str)] = if float {
            &[(packed::DIRECT, "direct"), (packed::FIRST, "first"), (packed::MIDDLE, "middle"), (packed::LAST, "last")]
        } else {
            &[(packed::DIRECT, "direct")]
        };
        for (op, op_name) in OPS {
            for &(mode, mode_name) in modes {
                let k = packed::reduce_packed::ReducePacked::<R>::new(
                    settings(),
                    c(),
                    arr(),
                    (),
                    arr(),
                    (),
                    arr(),
                    (),
                    arr(),
                    (),
                    (),
                    (),
                    kind,
                    op,
                    mode,
                );
                out.insert(format!("reduce_packed_{kind_name}_{op_name}_{mode_name}"), ("packed.rs", wgsl(k)));
            }
        }
        for (divide, how) in [(true, "div"), (false, "mul")] {
            let k = packed::scale_packed::ScalePacked::<R>::new(
                settings(),
                c(),
                arr(),
                (),
                arr(),
                (),
                (),
                (),
                (),
                (),
                (),
                kind,
                divide,
            );
            out.insert(format!("scale_packed_{kind_name}_{how}"), ("packed.rs", wgsl(k)));
        }
    }
    out
}

/// The checked-in text of a variant: a header naming its source, then the WGSL.
fn snapshot_text(stem: &str, source: &str, wgsl: &str) -> String {
    format!(
        "// {stem}: generated from src/kernels/{source} by the CubeCL 0.10 WGSL compiler.\n\
         // Do not edit; regenerate with `{BLESS}=1 cargo test -p ruCCL --features test-wgpu --test gpu_core -- shaders`.\n\
         {wgsl}"
    )
}

fn shader_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders")
}

/// naga: parse and validate the WGSL, then write SPIR-V and MSL. `Ok(Some(why))` when MSL
/// cannot express the kernel (Metal has no 64-bit floats).
fn through_naga(stem: &str, wgsl: &str) -> Result<Option<String>, String> {
    use naga::back::{msl, spv};
    use naga::valid::{Capabilities, ValidationFlags, Validator};
    let module = naga::front::wgsl::parse_str(wgsl).map_err(|e| format!("WGSL: {}", e.emit_to_string(wgsl)))?;
    // Only what the kernels need: 64-bit floats and integers (for the f64/i64/u64 variants,
    // launched only where the adapter has them). A kernel that starts to need more
    // (subgroups, f16 storage, atomics on 64 bits) fails here until this is a decision.
    let info = Validator::new(ValidationFlags::all(), Capabilities::FLOAT64 | Capabilities::SHADER_INT64)
        .validate(&module)
        .map_err(|e| format!("validation: {}", e.emit_to_string(wgsl)))?;
    spv::write_vec(&module, &info, &spv::Options::default(), None).map_err(|e| format!("SPIR-V: {e}"))?;
    if stem.contains("f64") {
        return Ok(Some("MSL skipped: Metal has no 64-bit floats".into()));
    }
    let options = msl::Options { lang_version: (2, 4), ..msl::Options::default() };
    let written =
        std::panic::catch_unwind(|| msl::write_string(&module, &info, &options, &msl::PipelineOptions::default()));
    match written {
        Ok(Ok(_)) => Ok(None),
        Ok(Err(e)) => Err(format!("MSL: {e}")),
        Err(_) => Err("MSL: naga's writer panicked".into()),
    }
}

/// Checks the `shaders/` snapshot: every kernel variant's WGSL against its file (or, with
/// `RUCCL_BLESS=1`, rewrites the files), and every one through naga to SPIR-V and MSL.
/// `Ok` says what it checked (or that it was skipped: no wgpu adapter); `Err` lists what
/// failed.
pub(crate) fn check() -> Result<String, String> {
    let device = cubecl::wgpu::WgpuDevice::DefaultDevice;
    let Ok(client) = std::panic::catch_unwind(|| R::client(&device)) else {
        return Ok("SKIPPED: no wgpu adapter here; CubeCL needs one to expand the kernels".into());
    };
    let bless = std::env::var_os(BLESS).is_some_and(|v| v != "0");
    let dir = shader_dir();
    let variants = variants(&client);
    let mut failures = Vec::new();
    if bless {
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    // Files of variants that no longer exist.
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        if path.extension().is_some_and(|e| e == "wgsl") && !variants.contains_key(&stem) {
            if bless {
                if let Err(e) = std::fs::remove_file(&path) {
                    failures.push(format!("{stem}.wgsl: cannot remove: {e}"));
                }
            } else {
                failures.push(format!("{stem}.wgsl: no kernel variant produces it any more"));
            }
        }
    }
    let mut skipped = Vec::new();
    for (stem, (source, wgsl)) in &variants {
        let path = dir.join(format!("{stem}.wgsl"));
        let want = snapshot_text(stem, source, wgsl);
        let have = std::fs::read_to_string(&path).ok();
        if have.as_deref() != Some(want.as_str()) {
            if bless {
                if let Err(e) = std::fs::write(&path, &want) {
                    failures.push(format!("{stem}.wgsl: cannot write: {e}"));
                }
            } else {
                let why = if have.is_some() { "differs from" } else { "is missing from" };
                failures.push(format!("{stem}.wgsl: the kernel's WGSL {why} the snapshot"));
            }
        }
        match through_naga(stem, wgsl) {
            Ok(None) => {}
            Ok(Some(why)) => skipped.push(format!("{stem}: {why}")),
            Err(e) => failures.push(format!("{stem}: naga: {e}")),
        }
    }
    if variants.len() < 80 {
        failures.push(format!("only {} kernel variants", variants.len()));
    }
    if !failures.is_empty() {
        return Err(format!(
            "{} of {} shaders fail (after a deliberate kernel change, rerun with {BLESS}=1 and commit shaders/):\n{}",
            failures.len(),
            variants.len(),
            failures.join("\n")
        ));
    }
    Ok(format!(
        "{} shaders match the snapshot and pass naga ({} MSL skips)\n{}",
        variants.len(),
        skipped.len(),
        skipped.join("\n")
    ))
}
