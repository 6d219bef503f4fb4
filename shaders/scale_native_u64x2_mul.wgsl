// scale_native_u64x2_mul: generated from src/kernels/native.rs by the CubeCL 0.10 WGSL compiler.
// Do not edit; regenerate with `RUCCL_BLESS=1 cargo test -p ruCCL --features test-wgpu --test gpu_core -- shaders`.
@group(0)
@binding(0)
var<storage, read_write> buffer_0_global: array<vec2<u64>>;

@group(0)
@binding(1)
var<storage, read_write> buffer_1_global: array<vec2<u64>>;

struct info_st {
   scalars_u32: array<u32, 4>,
   scalars_u64: array<u64, 1>,
   static_meta: array<u32, 4>,
}

@group(0)
@binding(2)
var<storage, read> info: info_st;

const WORKGROUP_SIZE_X = 256u;
const WORKGROUP_SIZE_Y = 1u;
const WORKGROUP_SIZE_Z = 1u;

@compute
@workgroup_size(256, 1, 1)
fn scale_native_t_u64_n_2(
    @builtin(global_invocation_id) global_id: vec3<u32>,
    @builtin(num_workgroups) num_workgroups: vec3<u32>,
) {
let id = (u32(global_id.z) * u32(num_workgroups.x) * u32(WORKGROUP_SIZE_X) * u32(num_workgroups.y) * u32(WORKGROUP_SIZE_Y)) + (u32(global_id.y) * u32(num_workgroups.x) * u32(WORKGROUP_SIZE_X)) + u32(global_id.x);

var l_mut_1: u32;
let l_0 = vec2<u64>(info.scalars_u64[0]);
l_mut_1 = id;
loop {
let l_2 = l_mut_1 < info.scalars_u32[2];
let l_3 = !l_2;
if l_3 {
break;
}
let l_4 = info.scalars_u32[1] + l_mut_1;
let l_5 = buffer_1_global[l_4];
let l_6 = info.scalars_u32[0] + l_mut_1;
let l_7 = l_5 * l_0;
buffer_0_global[l_6] = l_7;
l_mut_1 = l_mut_1 + info.scalars_u32[3];
}
}
