// reduce_native_u32x4_sum: generated from src/kernels/native.rs by the CubeCL 0.10 WGSL compiler.
// Do not edit; regenerate with `RUCCL_BLESS=1 cargo test -p ruCCL --features test-wgpu --test gpu_core -- shaders`.
@group(0)
@binding(0)
var<storage, read_write> buffer_0_global: array<vec4<u32>>;

@group(0)
@binding(1)
var<storage, read_write> buffer_1_global: array<vec4<u32>>;

@group(0)
@binding(2)
var<storage, read_write> buffer_2_global: array<vec4<u32>>;

struct info_st {
   scalars_u32: array<u32, 6>,
   static_meta: array<u32, 6>,
}

@group(0)
@binding(3)
var<storage, read> info: info_st;

const WORKGROUP_SIZE_X = 256u;
const WORKGROUP_SIZE_Y = 1u;
const WORKGROUP_SIZE_Z = 1u;

@compute
@workgroup_size(256, 1, 1)
fn reduce_native_t_u32_n_4(
    @builtin(global_invocation_id) global_id: vec3<u32>,
    @builtin(num_workgroups) num_workgroups: vec3<u32>,
) {
let id = (u32(global_id.z) * u32(num_workgroups.x) * u32(WORKGROUP_SIZE_X) * u32(num_workgroups.y) * u32(WORKGROUP_SIZE_Y)) + (u32(global_id.y) * u32(num_workgroups.x) * u32(WORKGROUP_SIZE_X)) + u32(global_id.x);

var l_mut_0: u32;
var l_mut_8: vec4<u32>;
l_mut_0 = id;
loop {
let l_1 = l_mut_0 < info.scalars_u32[3];
let l_2 = !l_1;
if l_2 {
break;
}
let l_3 = info.scalars_u32[1] + l_mut_0;
let l_4 = buffer_1_global[l_3];
let l_5 = info.scalars_u32[2] + l_mut_0;
let l_6 = buffer_2_global[l_5];
let l_7 = info.scalars_u32[0] + l_mut_0;
l_mut_8 = l_4;
let l_9 = l_4 + l_6;
l_mut_8 = l_9;
buffer_0_global[l_7] = l_mut_8;
l_mut_0 = l_mut_0 + info.scalars_u32[4];
}
}
