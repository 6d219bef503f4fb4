// reduce_native_f32_max: generated from src/kernels/native.rs by the CubeCL 0.10 WGSL compiler.
// Do not edit; regenerate with `RUCCL_BLESS=1 cargo test -p ruCCL --features test-wgpu --lib kernels::shaders`.
@group(0)
@binding(0)
var<storage, read_write> buffer_0_global: array<f32>;

@group(0)
@binding(1)
var<storage, read_write> buffer_1_global: array<f32>;

@group(0)
@binding(2)
var<storage, read_write> buffer_2_global: array<f32>;

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
fn reduce_native_t_f32(
    @builtin(global_invocation_id) global_id: vec3<u32>,
    @builtin(num_workgroups) num_workgroups: vec3<u32>,
) {
let id = (u32(global_id.z) * u32(num_workgroups.x) * u32(WORKGROUP_SIZE_X) * u32(num_workgroups.y) * u32(WORKGROUP_SIZE_Y)) + (u32(global_id.y) * u32(num_workgroups.x) * u32(WORKGROUP_SIZE_X)) + u32(global_id.x);

var l_mut_0: u32;
var l_mut_8: f32;
var l_mut_16: f32;
l_mut_0 = id;
loop {
let l_1 = l_mut_0 < info.scalars_u32[3];
let l_2 = !l_1;
if l_2 {
break;
}
let l_3 = info.scalars_u32[1] + l_mut_0;
let l_25 = info.static_meta[u32(1)];
let l_26 = l_25 * u32(1);
let l_27 = l_3 < l_26;
let l_28 = l_26 - u32(1);
let l_29 = min(l_3, l_28);
let l_30 = buffer_1_global[l_29];
let l_31 = select(f32(0.0), l_30, l_27);
let l_4 = l_31;
let l_5 = info.scalars_u32[2] + l_mut_0;
let l_32 = info.static_meta[u32(2)];
let l_33 = l_32 * u32(1);
let l_34 = l_5 < l_33;
let l_35 = l_33 - u32(1);
let l_36 = min(l_5, l_35);
let l_37 = buffer_2_global[l_36];
let l_38 = select(f32(0.0), l_37, l_34);
let l_6 = l_38;
let l_7 = info.scalars_u32[0] + l_mut_0;
l_mut_8 = l_4;
let l_9 = l_6 > l_4;
if l_9 {
l_mut_8 = l_6;
}
let l_10 = l_4 > l_6;
let l_11 = !l_10;
let l_12 = l_6 > l_4;
let l_13 = !l_12;
let l_14 = l_11 && l_13;
if l_14 {
let l_15 = l_4 == l_6;
if l_15 {
l_mut_16 = l_4;
let l_17 = bitcast<u32>(l_4);
let l_18 = bitcast<u32>(l_6);
let l_19 = l_17 & l_18;
let l_20 = bitcast<f32>(l_19);
l_mut_16 = l_20;
l_mut_8 = l_mut_16;
} else {
l_mut_16 = l_4;
let l_21 = bitcast<u32>(l_4);
let l_22 = bitcast<u32>(l_6);
let l_23 = l_21 | l_22;
let l_24 = bitcast<f32>(l_23);
l_mut_16 = l_24;
l_mut_8 = l_mut_16;
}
}
let l_39 = info.static_meta[u32(0)];
let l_40 = l_39 * u32(1);
let l_41 = l_7 < l_40;
if l_41 {
buffer_0_global[l_7] = l_mut_8;
}
l_mut_0 = l_mut_0 + info.scalars_u32[4];
}
}
