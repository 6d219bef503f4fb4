//! The GPU device the suite is stamped on (`--features test-wgpu`, `test-vulkan`,
//! `test-metal` or `test-cuda`), and the tests only a GPU device needs:
//! - its kernels against the host kernels, bit for bit, for every dtype, combine and scale,
//!   at unaligned offsets, on random bit patterns (NaNs, signed zeros, subnormals), with
//!   outputs pre-filled with a sentinel so a dropped launch fails;
//! - ranks sharing the device move zero bytes through host memory;
//! - ranks on distinct devices (opened on one adapter) stage through the host.
//!
//! Ranks of the suite share one device (`for_rank`); `foreign` is a second, distinct device.

use std::sync::OnceLock;

use ruccl::device::{Range, Source};
use ruccl::mem::{HostMem, HostRegion};
use ruccl::types::{Combine, Scale};
use ruccl::{Communicator, DType, Device, HostDevice, Rank, ReduceOp, Tensor, UniqueId};

use crate::harness::TestDevice;

#[cfg(any(feature = "test-wgpu", feature = "test-vulkan", feature = "test-metal"))]
pub type GpuDevice = ruccl::device::cubecl::WgpuCubeDevice;
#[cfg(all(feature = "test-cuda", not(any(feature = "test-wgpu", feature = "test-vulkan", feature = "test-metal"))))]
pub type GpuDevice = ruccl::device::cubecl::CudaCubeDevice;

/// The shared device, and a distinct one (or why there is none).
fn devices() -> &'static Result<(GpuDevice, GpuDevice), String> {
    static DEVICES: OnceLock<Result<(GpuDevice, GpuDevice), String>> = OnceLock::new();
    DEVICES.get_or_init(|| open().map_err(|e| e.to_string()))
}

#[cfg(any(feature = "test-wgpu", feature = "test-vulkan", feature = "test-metal"))]
fn open() -> ruccl::Result<(GpuDevice, GpuDevice)> {
    let shared = GpuDevice::wgpu_default()?;
    let mut other = GpuDevice::wgpu_distinct(1)?;
    Ok((shared, other.remove(0)))
}

#[cfg(all(feature = "test-cuda", not(any(feature = "test-wgpu", feature = "test-vulkan", feature = "test-metal"))))]
fn open() -> ruccl::Result<(GpuDevice, GpuDevice)> {
    let shared = GpuDevice::cuda(0)?;
    // On a machine with one GPU, a handle ruCCL treats as another device (same GPU, staged
    // through the host as two GPUs are).
    let other = GpuDevice::cuda(1).unwrap_or_else(|_| shared.as_distinct(1));
    Ok((shared, other))
}

fn pair() -> &'static (GpuDevice, GpuDevice) {
    match devices() {
        Ok(p) => p,
        Err(e) => panic!("the GPU device is unavailable: {e}"),
    }
}

impl TestDevice for GpuDevice {
    fn for_rank(_rank: Rank) -> Self {
        pair().0.clone()
    }
    fn foreign(_rank: Rank) -> Self {
        pair().1.clone()
    }
    /// With `RUCCL_GPU_REQUIRED=1` (`.ci/gpu-run` on a GPU machine) a device that does not
    /// open fails every test instead of skipping it.
    fn unavailable() -> Option<String> {
        let why = devices().as_ref().err()?;
        if std::env::var("RUCCL_GPU_REQUIRED").is_ok_and(|v| v == "1") {
            panic!("RUCCL_GPU_REQUIRED=1, but the GPU device is unavailable: {why}");
        }
        Some(why.clone())
    }
    /// Mesa's software Vulkan runs every launch on the CPU: worlds of 4, 5 and 8 ranks (tens of
    /// seconds per test there) are left to real GPUs (`RUCCL_GPU_MAX_WORLD` raises the cap).
    fn max_world() -> usize {
        std::env::var("RUCCL_GPU_MAX_WORLD").ok().and_then(|v| v.parse().ok()).unwrap_or(3)
    }
    /// The short form of the suite (fewer rounds of repeated scenarios, no long passes that
    /// repeat a shorter pass's device paths); `RUCCL_GPU_FULL=1` runs the full form, as a
    /// real GPU can.
    fn short() -> bool {
        !std::env::var("RUCCL_GPU_FULL").is_ok_and(|v| v == "1")
    }
}

/// Runs `f` when the device opened, says why not otherwise.
fn with_gpu(f: impl FnOnce(&GpuDevice)) {
    match GpuDevice::unavailable() {
        None => f(&pair().0),
        Some(why) => eprintln!("SKIPPED on {}: {why}", std::any::type_name::<GpuDevice>()),
    }
}

/// Random bytes (xorshift), with every element of 16- and 32-bit floats drawn from a mix
/// of special values and random patterns.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn specials(dtype: DType, seed: u64, n: usize) -> Vec<u8> {
    let mut b = bytes(n * dtype.size(), seed);
    // Sprinkle signed zeros, ones, infinities and NaNs where the type has them.
    let special16: [u16; 6] = match dtype {
        DType::F16 => [0x0000, 0x8000, 0x3c00, 0x7c00, 0x7e01, 0x0001],
        _ => [0x0000, 0x8000, 0x3f80, 0x7f80, 0x7fc1, 0x0001],
    };
    if matches!(dtype, DType::F16 | DType::BF16) {
        for i in (0..n).step_by(3) {
            let v = special16[(i / 3) % special16.len()];
            b[2 * i..2 * i + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    if dtype == DType::F32 {
        let s: [f32; 4] = [0.0, -0.0, f32::NAN, 1.0];
        for i in (0..n).step_by(4) {
            b[4 * i..4 * i + 4].copy_from_slice(&s[(i / 4) % 4].to_le_bytes());
        }
    }
    b
}

/// Whether element bytes `a` and `b` of `dtype` are NaNs (which NaN an operation returns
/// differs between processors and is not promised).
fn both_nan(dtype: DType, a: &[u8], b: &[u8]) -> bool {
    let nan = |x: &[u8]| match dtype {
        DType::F32 => f32::from_le_bytes(x.try_into().unwrap()).is_nan(),
        DType::F64 => f64::from_le_bytes(x.try_into().unwrap()).is_nan(),
        DType::F16 => half::f16::from_le_bytes(x.try_into().unwrap()).is_nan(),
        DType::BF16 => half::bf16::from_le_bytes(x.try_into().unwrap()).is_nan(),
        _ => false,
    };
    nan(a) && nan(b)
}

/// Asserts equal bytes, element by element; NaNs match any NaN.
fn assert_same(dtype: DType, got: &[u8], want: &[u8], what: std::fmt::Arguments<'_>) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let es = dtype.size();
    for (i, (g, w)) in got.chunks(es).zip(want.chunks(es)).enumerate() {
        assert!(g == w || both_nan(dtype, g, w), "{what}: element {i} is {g:02x?}, expected {w:02x?}");
    }
}

fn host_mem(b: &[u8]) -> HostMem {
    let m = HostMem::zeroed(b.len()).unwrap();
    m.write(0, b.len()).unwrap().copy_from_slice(b);
    m
}

/// Runs the same reduce on the host device and on `gpu`, compares every byte of the output
/// buffers (outside the range too: a kernel must not touch its neighbours).
fn compare_reduce(gpu: &GpuDevice, dtype: DType, combine: Combine, sources: usize, offs: [usize; 3], n: usize) {
    let es = dtype.size();
    let total = (n + 9) * es;
    let dst0 = vec![0xA5u8; total]; // the sentinel
    let acc0 = specials(dtype, 11 + offs[0] as u64, total / es);
    let srcs0: Vec<Vec<u8>> = (0..sources).map(|k| specials(dtype, 101 + k as u64, total / es)).collect();
    let (d_off, a_off, s_off) = (offs[0] * es, offs[1] * es, offs[2] * es);
    let len = n * es;
    // Host reference.
    let h = HostDevice::default();
    let hd = host_mem(&dst0);
    let ha = host_mem(&acc0);
    let hs: Vec<Source<HostMem>> = srcs0.iter().map(|s| Source::Device(Range::new(host_mem(s), s_off, len))).collect();
    h.reduce(&Range::new(hd.clone(), d_off, len), &Range::new(ha, a_off, len), &hs, dtype, combine).unwrap();
    let want = hd.read(0, total).unwrap().to_vec();
    // The GPU, every other source from host memory.
    let up = |b: &[u8]| {
        let buf = gpu.alloc(b.len()).unwrap();
        gpu.write(&buf, 0, b).unwrap();
        buf
    };
    let gd = up(&dst0);
    let ga = up(&acc0);
    let gs: Vec<Source<_>> = srcs0
        .iter()
        .enumerate()
        .map(|(k, s)| {
            if k % 2 == 1 {
                Source::Host(HostRegion { mem: host_mem(&s[s_off..s_off + len]), off: 0, len })
            } else {
                Source::Device(Range::new(up(s), s_off, len))
            }
        })
        .collect();
    let ev = gpu.reduce(&Range::new(gd.clone(), d_off, len), &Range::new(ga, a_off, len), &gs, dtype, combine).unwrap();
    gpu.wait(&ev, None).unwrap();
    let mut got = vec![0u8; total];
    gpu.read(&gd, 0, &mut got).unwrap();
    assert_same(dtype, &got, &want, format_args!("{dtype} {combine:?} x{sources} offsets {offs:?} n {n}"));
}

/// The `shaders/` snapshot: every kernel variant's WGSL unchanged, and each through naga to
/// SPIR-V and MSL (`src/kernels/shaders.rs`; `RUCCL_BLESS=1` rewrites it, see
/// `shaders/README.md`). WGSL is what the `test-wgpu` build compiles; with another `test-*`
/// feature there is nothing to compare.
#[cfg(feature = "test-wgpu")]
#[test]
fn shaders_match_the_kernels_and_build_for_vulkan_and_metal() {
    match ruccl::test_support::check_shaders() {
        Ok(what) => eprintln!("{what}"),
        Err(failures) => panic!("{failures}"),
    }
}

/// The shader path the build's features select is the one the kernels went through: a
/// `test-vulkan` run that silently compiled WGSL would test the wrong compiler.
#[test]
fn gpu_kernels_compile_through_the_features_shader_path() {
    with_gpu(|gpu| {
        let want = if cfg!(feature = "vulkan") {
            "wgpu<spirv>"
        } else if cfg!(feature = "metal") {
            "wgpu<msl>"
        } else if cfg!(any(feature = "test-wgpu", feature = "wgpu")) {
            "wgpu<wgsl>"
        } else {
            "cuda"
        };
        let got = gpu.describe();
        assert!(got.contains(want), "{got} does not compile through {want}");
    });
}

#[test]
fn gpu_kernels_match_the_host_bit_for_bit() {
    with_gpu(|gpu| {
        for dtype in DType::ALL {
            if !gpu.supports(dtype) {
                eprintln!("SKIPPED {dtype} on {}: the runtime has no such type", gpu.describe());
                continue;
            }
            for combine in [Combine::Sum, Combine::Prod, Combine::Min, Combine::Max] {
                for (sources, offs, n) in [
                    (1, [0, 0, 0], 1),
                    (1, [1, 3, 2], 7),
                    (2, [3, 0, 1], 33),
                    (3, [2, 5, 7], 517),
                    // Aligned offsets: vectors of 4 (then 2) elements and a ragged tail.
                    (1, [4, 8, 0], 37),
                    (2, [2, 6, 4], 66),
                ] {
                    compare_reduce(gpu, dtype, combine, sources, offs, n);
                }
                // In place: the accumulator is the destination.
                let es = dtype.size();
                let n = 45;
                let a0 = specials(dtype, 7, n + 3);
                let s0 = specials(dtype, 8, n);
                let h = HostDevice::default();
                let ha = host_mem(&a0);
                h.reduce(
                    &Range::new(ha.clone(), es, n * es),
                    &Range::new(ha.clone(), es, n * es),
                    &[Source::Device(Range::new(host_mem(&s0), 0, n * es))],
                    dtype,
                    combine,
                )
                .unwrap();
                let ga = gpu.alloc(a0.len()).unwrap();
                gpu.write(&ga, 0, &a0).unwrap();
                let gs = gpu.alloc(s0.len()).unwrap();
                gpu.write(&gs, 0, &s0).unwrap();
                let r = Range::new(ga.clone(), es, n * es);
                let ev = gpu.reduce(&r, &r, &[Source::Device(Range::new(gs, 0, n * es))], dtype, combine).unwrap();
                gpu.wait(&ev, None).unwrap();
                let mut got = vec![0u8; a0.len()];
                gpu.read(&ga, 0, &mut got).unwrap();
                let want = ha.read(0, a0.len()).unwrap().to_vec();
                assert_same(dtype, &got, &want, format_args!("{dtype} {combine:?} in place"));
            }
            // Unaligned (one element at a time) and aligned (vectors, then a tail) offsets.
            for (scale, s_at, d_at) in [
                (Scale::DivBy(3), 1, 3),
                (Scale::DivBy(8), 1, 3),
                (Scale::MulBy(2.0), 1, 3),
                (Scale::MulBy(0.37), 1, 3),
                (Scale::DivBy(3), 0, 4),
                (Scale::MulBy(0.37), 2, 2),
            ] {
                let es = dtype.size();
                let n = 67;
                let s0 = specials(dtype, 21, n + 2);
                let d0 = vec![0x5Au8; (n + 4) * es];
                let h = HostDevice::default();
                let hd = host_mem(&d0);
                h.scale(
                    &Range::new(host_mem(&s0), s_at * es, n * es),
                    &Range::new(hd.clone(), d_at * es, n * es),
                    dtype,
                    scale,
                )
                .unwrap();
                let gs = gpu.alloc(s0.len()).unwrap();
                gpu.write(&gs, 0, &s0).unwrap();
                let gd = gpu.alloc(d0.len()).unwrap();
                gpu.write(&gd, 0, &d0).unwrap();
                let ev = gpu
                    .scale(&Range::new(gs, s_at * es, n * es), &Range::new(gd.clone(), d_at * es, n * es), dtype, scale)
                    .unwrap();
                gpu.wait(&ev, None).unwrap();
                let mut got = vec![0u8; d0.len()];
                gpu.read(&gd, 0, &mut got).unwrap();
                let want = hd.read(0, d0.len()).unwrap().to_vec();
                assert_same(dtype, &got, &want, format_args!("{dtype} {scale:?} at {s_at}, {d_at}"));
            }
        }
    });
}

#[test]
fn gpu_copies_at_any_byte_offset() {
    with_gpu(|gpu| {
        let src = bytes(300, 5);
        let s = gpu.alloc(src.len()).unwrap();
        gpu.write(&s, 0, &src).unwrap();
        for (so, d_off, len) in [(0, 0, 300), (1, 2, 17), (3, 0, 64), (0, 5, 250), (7, 7, 1), (2, 1, 0)] {
            let d = gpu.alloc(320).unwrap();
            gpu.write(&d, 0, &[0xEE; 320]).unwrap();
            let ev = gpu.copy(&Range::new(s.clone(), so, len), &Range::new(d.clone(), d_off, len)).unwrap();
            gpu.wait(&ev, None).unwrap();
            let mut got = vec![0u8; 320];
            gpu.read(&d, 0, &mut got).unwrap();
            let mut want = vec![0xEEu8; 320];
            want[d_off..d_off + len].copy_from_slice(&src[so..so + len]);
            assert_eq!(got, want, "copy {so} -> {d_off}, {len} bytes");
            // Partial reads at odd offsets.
            let mut part = vec![0u8; len];
            gpu.read(&d, d_off, &mut part).unwrap();
            assert_eq!(part, &src[so..so + len]);
        }
    });
}

/// Host bytes written into device buffers at any size and byte offset — across the 4 MiB
/// chunks CUDA's direct writes go in, and their two alternating bounce buffers — land exactly
/// there; and a write waits for the device work enqueued before it: copies out of a buffer,
/// enqueued and not waited for, still read the bytes written before it, not the ones after.
#[test]
fn gpu_uploads_of_any_size_at_any_offset_keep_the_device_order() {
    with_gpu(|gpu| {
        const MIB: usize = 1 << 20;
        let sizes: &[usize] = if GpuDevice::short() {
            &[0, 1, 3, 4 * MIB + 5, 9 * MIB + 3]
        } else {
            &[0, 1, 3, 4096, 4 * MIB - 1, 4 * MIB, 4 * MIB + 5, 8 * MIB, 9 * MIB + 3, 13 * MIB + 1]
        };
        for (i, &len) in sizes.iter().enumerate() {
            for off in [0, 1, 6] {
                let total = len + off + 9;
                let buf = gpu.alloc(total).unwrap();
                gpu.write(&buf, 0, &vec![0xEE; total]).unwrap();
                let src = bytes(len, 40 + i as u64 + off as u64);
                gpu.write(&buf, off, &src).unwrap();
                let mut got = vec![0u8; total];
                gpu.read(&buf, 0, &mut got).unwrap();
                assert!(got[..off].iter().all(|&b| b == 0xEE), "{len} bytes at {off}: the bytes before");
                assert!(got[off..off + len] == src[..], "{len} bytes at {off}: the bytes written");
                assert!(got[off + len..].iter().all(|&b| b == 0xEE), "{len} bytes at {off}: the bytes after");
            }
        }
        // Order: first bytes in, a copy out enqueued, second bytes in, then the copy's result.
        let len = if GpuDevice::short() { 5 * MIB + 7 } else { 17 * MIB + 7 };
        let (first, second) = (bytes(len, 77), bytes(len, 78));
        let src = gpu.alloc(len).unwrap();
        let dst = gpu.alloc(len).unwrap();
        gpu.write(&src, 0, &first).unwrap();
        // Copied many times over, so the device is still busy reading `src` when the write
        // comes: a write that does not wait overtakes some of the copies.
        let mut copied = None;
        for _ in 0..32 {
            copied = Some(gpu.copy(&Range::new(src.clone(), 0, len), &Range::new(dst.clone(), 0, len)).unwrap());
        }
        let second_in =
            gpu.upload(&Range::new(src.clone(), 0, len), &HostRegion { mem: host_mem(&second), off: 0, len }).unwrap();
        gpu.wait(&second_in, None).unwrap();
        gpu.wait(&copied.unwrap(), None).unwrap();
        let mut got = vec![0u8; len];
        gpu.read(&dst, 0, &mut got).unwrap();
        assert!(got == first, "the copy enqueued before the second write read the second write's bytes");
        gpu.read(&src, 0, &mut got).unwrap();
        assert!(got == second, "the second write did not land");
    });
}

/// Ranks that share the device exchange device ranges and reduce on it: the collectives
/// move no byte through host memory (building and reading tensors does, outside the count).
/// The ranks use their own handle on the device, so other tests running at the same time
/// do not add to its count.
#[test]
fn gpu_shared_device_moves_no_host_bytes() {
    if let Some(why) = GpuDevice::unavailable() {
        eprintln!("SKIPPED on {}: {why}", std::any::type_name::<GpuDevice>());
        return;
    }
    let dev = own_handle();
    assert!(dev.same_device(&GpuDevice::for_rank(0)));
    let (world, n) = (4, 6);
    let id = UniqueId::new().unwrap();
    let ready = std::sync::Barrier::new(world);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..world)
            .map(|r| {
                let (id, dev, ready) = (id.clone(), dev.clone(), &ready);
                s.spawn(move || {
                    let comm = Communicator::new(dev.clone(), world, id, r).unwrap();
                    let mut t = Tensor::from_slice(&dev, &[r as f32 + 1.0; 6], &[6]).unwrap();
                    let x = Tensor::from_slice(&dev, &vec![r as f32; n * world], &[n * world]).unwrap();
                    let mut y = Tensor::zeros(&dev, DType::F32, &[n]).unwrap();
                    let mut yw = Tensor::zeros(&dev, DType::F32, &[n * world]).unwrap();
                    ready.wait();
                    let before = dev.host_bytes();
                    ready.wait();
                    comm.all_reduce(&mut t, ReduceOp::Sum).unwrap();
                    comm.all_reduce(&mut t, ReduceOp::Avg).unwrap();
                    comm.broadcast(&mut t, 1).unwrap();
                    comm.all_gather_into_tensor(&mut yw, &t).unwrap();
                    comm.reduce_scatter_tensor(&mut y, &x, ReduceOp::Sum).unwrap();
                    comm.all_to_all_single(&mut yw, &x).unwrap();
                    comm.barrier().unwrap();
                    ready.wait();
                    let after = dev.host_bytes();
                    ready.wait();
                    assert_eq!(after - before, 0, "rank {r}: bytes crossed host memory");
                    assert_eq!(t.to_vec::<f32>().unwrap(), vec![10.0; 6], "all_reduce sum then avg");
                    assert_eq!(y.to_vec::<f32>().unwrap(), vec![6.0; 6], "reduce_scatter");
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
}

#[cfg(any(feature = "test-wgpu", feature = "test-vulkan", feature = "test-metal"))]
pub fn own_handle() -> GpuDevice {
    GpuDevice::wgpu_default().unwrap()
}

#[cfg(all(feature = "test-cuda", not(any(feature = "test-wgpu", feature = "test-vulkan", feature = "test-metal"))))]
pub fn own_handle() -> GpuDevice {
    GpuDevice::cuda(0).unwrap()
}

/// Ranks on distinct devices (opened on one adapter) reach each other through the host.
#[test]
fn gpu_distinct_devices_stage_through_the_host() {
    if let Some(why) = GpuDevice::unavailable() {
        eprintln!("SKIPPED on {}: {why}", std::any::type_name::<GpuDevice>());
        return;
    }
    let world = 3;
    let devs = distinct(world);
    let id = UniqueId::new().unwrap();
    std::thread::scope(|s| {
        let hs: Vec<_> = devs
            .iter()
            .enumerate()
            .map(|(rank, dev)| {
                let (id, dev) = (id.clone(), dev.clone());
                s.spawn(move || {
                    let comm = Communicator::new(dev.clone(), world, id, rank).unwrap();
                    let mut t = Tensor::from_slice(&dev, &[rank as f32 + 1.0; 5], &[5]).unwrap();
                    let mut b = Tensor::from_slice(&dev, &[half::bf16::from_f32(rank as f32); 3], &[3]).unwrap();
                    let before = dev.host_bytes();
                    comm.all_reduce(&mut t, ReduceOp::Sum).unwrap();
                    comm.all_reduce(&mut b, ReduceOp::Max).unwrap();
                    assert!(dev.host_bytes() > before, "rank {rank}: nothing was staged through the host");
                    assert_eq!(t.to_vec::<f32>().unwrap(), vec![6.0; 5]);
                    assert_eq!(b.to_vec::<half::bf16>().unwrap(), vec![half::bf16::from_f32(2.0); 3]);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
}

#[cfg(any(feature = "test-wgpu", feature = "test-vulkan", feature = "test-metal"))]
fn distinct(n: usize) -> Vec<GpuDevice> {
    GpuDevice::wgpu_distinct(n).unwrap()
}

#[cfg(all(feature = "test-cuda", not(any(feature = "test-wgpu", feature = "test-vulkan", feature = "test-metal"))))]
fn distinct(n: usize) -> Vec<GpuDevice> {
    // GPUs 0..n, or where there are fewer, handles on GPU 0 that ruCCL treats as distinct.
    let first = GpuDevice::cuda(0).unwrap();
    (0..n)
        .map(|i| match i {
            0 => first.clone(),
            _ => GpuDevice::cuda(i).unwrap_or_else(|_| first.as_distinct(u16::try_from(i).unwrap())),
        })
        .collect()
}

const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Communicator<GpuDevice>>();
    send_sync::<Tensor<GpuDevice>>();
};

/// Environment variable that makes [`gpu_no_adapter_child`] the child of
/// [`gpu_missing_adapter_is_a_device_error`].
#[cfg(feature = "test-wgpu")]
const NO_ADAPTER_CHILD: &str = "RUCCL_TEST_NO_ADAPTER_CHILD";

/// Without a driver (the Vulkan loader pointed at none, in a child process of this test
/// binary), opening the default wgpu adapter is a `Device` error that says what is missing,
/// not a panic and not CubeCL's bare `RecvError`.
#[cfg(feature = "test-wgpu")]
#[test]
fn gpu_missing_adapter_is_a_device_error() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "gpu::gpu_no_adapter_child", "--nocapture", "--test-threads=1"])
        .env(NO_ADAPTER_CHILD, "1")
        .env("VK_ICD_FILENAMES", "/nonexistent/ruccl-no-driver.json")
        .env("VK_DRIVER_FILES", "/nonexistent/ruccl-no-driver.json")
        .env_remove("CUBECL_WGPU_DEFAULT_DEVICE")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the child failed:\n{text}");
    assert!(text.contains("1 passed"), "the child test did not run:\n{text}");
}

/// The child of [`gpu_missing_adapter_is_a_device_error`]; passes trivially when run alone.
#[cfg(feature = "test-wgpu")]
#[test]
fn gpu_no_adapter_child() {
    if std::env::var_os(NO_ADAPTER_CHILD).is_none() {
        return;
    }
    for opened in [GpuDevice::wgpu_default().map(|_| ()), GpuDevice::wgpu_distinct(1).map(|_| ())] {
        let e = opened.expect_err("a wgpu device opened without a driver");
        assert_eq!(e.kind(), ruccl::ErrorKind::Device, "{e}");
        let msg = e.to_string();
        assert!(msg.contains("no wgpu adapter") && msg.contains("mesa-vulkan-drivers"), "{msg}");
        assert!(!msg.contains("RecvError"), "{msg}");
    }
}

/// Buffers larger than the runtime binds at once are split into parts. With the part size
/// lowered to 1 KiB (a test hook), buffers of several parts go through every kind of device
/// work — reductions (device and host sources, at offsets that put part boundaries of the
/// operands in different places), scaling, copies, uploads and downloads at odd offsets —
/// and collectives on ranks that share the device and on distinct devices, against the host.
#[test]
fn gpu_buffers_above_the_binding_limit_are_split() {
    with_gpu(|gpu| {
        let small = gpu.with_part_limit(1024);
        for dtype in DType::ALL {
            if !small.supports(dtype) {
                continue;
            }
            for combine in [Combine::Sum, Combine::Max] {
                compare_reduce(&small, dtype, combine, 1, [4, 8, 0], 700);
                compare_reduce(&small, dtype, combine, 3, [2, 5, 7], 611);
            }
        }
        // Copies and transfers across part boundaries at any byte offset.
        let src = bytes(3000, 9);
        let s = small.alloc(src.len()).unwrap();
        small.write(&s, 0, &src).unwrap();
        for (so, d_off, len) in [(0, 0, 3000), (1, 2, 2900), (1020, 1030, 1500), (3, 1021, 5)] {
            let d = small.alloc(3100).unwrap();
            small.write(&d, 0, &[0xEE; 3100]).unwrap();
            let ev = small.copy(&Range::new(s.clone(), so, len), &Range::new(d.clone(), d_off, len)).unwrap();
            small.wait(&ev, None).unwrap();
            let mut got = vec![0u8; 3100];
            small.read(&d, 0, &mut got).unwrap();
            let mut want = vec![0xEEu8; 3100];
            want[d_off..d_off + len].copy_from_slice(&src[so..so + len]);
            assert_eq!(got, want, "copy {so} -> {d_off}, {len} bytes");
            let mut part = vec![0u8; len];
            small.read(&d, d_off, &mut part).unwrap();
            assert_eq!(part, &src[so..so + len], "read at {d_off}");
        }
        // Collectives: 2 ranks sharing the device, then 2 on distinct devices.
        let shared = vec![small.clone(); 2];
        let apart: Vec<GpuDevice> = distinct(2).iter().map(|d| d.with_part_limit(1024)).collect();
        for devs in [shared, apart] {
            let world = devs.len();
            let id = UniqueId::new().unwrap();
            std::thread::scope(|sc| {
                let hs: Vec<_> = devs
                    .iter()
                    .enumerate()
                    .map(|(rank, dev)| {
                        let (id, dev) = (id.clone(), dev.clone());
                        sc.spawn(move || {
                            let comm = Communicator::new(dev.clone(), world, id, rank).unwrap();
                            let n = 1001;
                            let mut t = Tensor::from_slice(&dev, &vec![rank as f32 + 1.0; n], &[n]).unwrap();
                            comm.all_reduce(&mut t, ReduceOp::Sum).unwrap();
                            assert_eq!(t.to_vec::<f32>().unwrap(), vec![3.0; n], "rank {rank}: f32 sum");
                            comm.all_reduce(&mut t, ReduceOp::Avg).unwrap();
                            assert_eq!(t.to_vec::<f32>().unwrap(), vec![3.0; n], "rank {rank}: f32 avg");
                            let mut u = Tensor::from_slice(&dev, &vec![rank as u8 + 1; 2999], &[2999]).unwrap();
                            comm.all_reduce(&mut u, ReduceOp::Sum).unwrap();
                            assert_eq!(u.to_vec::<u8>().unwrap(), vec![3u8; 2999], "rank {rank}: u8 sum");
                            let x = Tensor::from_slice(&dev, &vec![rank as u32; n], &[n]).unwrap();
                            let mut y = Tensor::zeros(&dev, DType::U32, &[n * world]).unwrap();
                            comm.all_gather_into_tensor(&mut y, &x).unwrap();
                            let want: Vec<u32> = (0..world as u32).flat_map(|r| vec![r; n]).collect();
                            assert_eq!(y.to_vec::<u32>().unwrap(), want, "rank {rank}: all_gather");
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
            });
        }
    });
}

/// One real buffer above lavapipe's 128 MiB binding limit (130 MiB of `u8`): an all_reduce
/// across 2 ranks sharing the device. Where the runtime binds more, nothing is split and the
/// test still checks the result.
#[test]
fn gpu_all_reduce_of_130_mib() {
    if let Some(why) = GpuDevice::unavailable() {
        eprintln!("SKIPPED on {}: {why}", std::any::type_name::<GpuDevice>());
        return;
    }
    let dev = own_handle();
    let (world, n) = (2, 130 << 20);
    let id = UniqueId::new().unwrap();
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..world)
            .map(|rank| {
                let (id, dev) = (id.clone(), dev.clone());
                sc.spawn(move || {
                    let comm = Communicator::new(dev.clone(), world, id, rank).unwrap();
                    let mut data = vec![rank as u8 + 1; n];
                    data[n - 1] = 10 * (rank as u8 + 1);
                    let mut t = Tensor::from_slice(&dev, &data, &[n]).unwrap();
                    comm.all_reduce(&mut t, ReduceOp::Sum).unwrap();
                    let got = t.to_vec::<u8>().unwrap();
                    assert!(got[..n - 1].iter().all(|&b| b == 3), "rank {rank}: sum below the last byte");
                    assert_eq!(got[n - 1], 30, "rank {rank}: the last byte");
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
}

/// Events waited for on the device's completion thread (what CUDA's always are: CubeCL's
/// CUDA futures block in their first poll) give the same results, whether one thread per
/// rank blocks on them, one thread drives every rank (a group call), or progress threads do
/// (non-blocking calls); and the device wakes the threads that sleep on them.
#[test]
fn gpu_events_completed_on_a_thread() {
    use ruccl::{CommConfig, Group};
    if let Some(why) = GpuDevice::unavailable() {
        eprintln!("SKIPPED on {}: {why}", std::any::type_name::<GpuDevice>());
        return;
    }
    let dev = GpuDevice::for_rank(0).with_completion_thread();
    assert!(dev.wakes() && dev.same_device(&GpuDevice::for_rank(0)));
    let world = 3;
    let comms = Communicator::init_all(vec![dev.clone(); world], CommConfig::default()).unwrap();
    let mut ts: Vec<_> =
        comms.iter().map(|c| Tensor::from_slice(&dev, &[c.rank() as f32 + 1.0; 33], &[33]).unwrap()).collect();
    // One thread drives every rank.
    let mut g = Group::new();
    for (c, t) in comms.iter().zip(ts.iter_mut()) {
        g.all_reduce(c, t, ReduceOp::Sum);
    }
    g.run().unwrap();
    for t in &ts {
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![6.0; 33], "group all_reduce");
    }
    // Progress threads drive them.
    let works: Vec<_> = comms.iter().zip(&ts).map(|(c, t)| c.all_reduce_async(t, ReduceOp::Avg).unwrap()).collect();
    for w in works {
        w.wait().unwrap();
    }
    // A thread per rank blocks.
    std::thread::scope(|s| {
        for (c, t) in comms.iter().zip(ts.iter_mut()) {
            s.spawn(move || c.broadcast(t, 2).unwrap());
        }
    });
    for t in &ts {
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![6.0; 33], "avg, then broadcast");
    }
    // A wait with a deadline, parked on the completion.
    dev.synchronize(Some(std::time::Instant::now() + std::time::Duration::from_secs(60))).unwrap();
}
