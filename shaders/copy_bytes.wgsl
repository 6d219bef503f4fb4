// copy_bytes: generated from src/kernels/copy.rs by the CubeCL 0.10 WGSL compiler.
// Do not edit; regenerate with `RUCCL_BLESS=1 cargo test -p ruCCL --features test-wgpu --test gpu_core -- shaders`.
@group(0)
@binding(0)
var<storage, read_write> buffer_0_global: array<u32>;

@group(0)
@binding(1)
var<storage, read_write> buffer_1_global: array<u32>;

struct info_st {
   scalars_u32: array<u32, 6>,
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
fn copy_bytes(
    @builtin(global_invocation_id) global_id: vec3<u32>,
    @builtin(num_workgroups) num_workgroups: vec3<u32>,
) {
let id = (u32(global_id.z) * u32(num_workgroups.x) * u32(WORKGROUP_SIZE_X) * u32(num_workgroups.y) * u32(WORKGROUP_SIZE_Y)) + (u32(global_id.y) * u32(num_workgroups.x) * u32(WORKGROUP_SIZE_X)) + u32(global_id.x);

var l_mut_2: u32;
var l_mut_20: u32;
let l_0 = info.scalars_u32[0] / u32(4);
let l_1 = info.scalars_u32[0] + info.scalars_u32[2];
l_mut_2 = id;
loop {
let l_3 = l_mut_2 < info.scalars_u32[3];
let l_4 = !l_3;
if l_4 {
break;
}
let l_5 = l_0 + l_mut_2;
let l_6 = l_5 * u32(4);
let l_7 = l_6 >= info.scalars_u32[0];
let l_8 = l_6 + u32(4);
let l_9 = l_8 <= l_1;
let l_10 = l_7 && l_9;
let l_11 = info.scalars_u32[1] % u32(4);
let l_12 = info.scalars_u32[0] % u32(4);
let l_13 = l_11 == l_12;
let l_14 = l_10 && l_13;
if l_14 {
let l_15 = l_6 - info.scalars_u32[0];
let l_16 = l_15 + info.scalars_u32[1];
let l_17 = l_16 / u32(4);
let l_40 = info.static_meta[u32(1)];
let l_41 = l_40 * u32(1);
let l_42 = l_17 < l_41;
let l_43 = l_41 - u32(1);
let l_44 = min(l_17, l_43);
let l_45 = buffer_1_global[l_44];
let l_46 = select(u32(0), l_45, l_42);
let l_18 = l_46;
let l_47 = info.static_meta[u32(0)];
let l_48 = l_47 * u32(1);
let l_49 = l_5 < l_48;
if l_49 {
buffer_0_global[l_5] = l_18;
}
} else {
let l_50 = info.static_meta[u32(0)];
let l_51 = l_50 * u32(1);
let l_52 = l_5 < l_51;
let l_53 = l_51 - u32(1);
let l_54 = min(l_5, l_53);
let l_55 = buffer_0_global[l_54];
let l_56 = select(u32(0), l_55, l_52);
let l_19 = l_56;
l_mut_20 = l_19;

for (var l_mut_21: u32 = u32(0); l_mut_21 < u32(4); l_mut_21++) {
let l_22 = l_6 + l_mut_21;
let l_23 = l_22 >= info.scalars_u32[0];
let l_24 = l_22 < l_1;
let l_25 = l_23 && l_24;
if l_25 {
let l_26 = l_22 - info.scalars_u32[0];
let l_27 = l_26 + info.scalars_u32[1];
let l_28 = l_27 / u32(4);
let l_60 = info.static_meta[u32(1)];
let l_61 = l_60 * u32(1);
let l_62 = l_28 < l_61;
let l_63 = l_61 - u32(1);
let l_64 = min(l_28, l_63);
let l_65 = buffer_1_global[l_64];
let l_66 = select(u32(0), l_65, l_62);
let l_29 = l_66;
let l_30 = l_27 % u32(4);
let l_31 = l_30 * u32(8);
let l_32 = l_29 >> l_31;
let l_33 = l_32 & u32(255);
let l_34 = l_mut_21 * u32(8);
let l_35 = u32(255) << l_34;
let l_36 = ~l_35;
let l_37 = l_mut_20 & l_36;
let l_38 = l_33 << l_34;
let l_39 = l_37 | l_38;
l_mut_20 = l_39;
}
}
let l_57 = info.static_meta[u32(0)];
let l_58 = l_57 * u32(1);
let l_59 = l_5 < l_58;
if l_59 {
buffer_0_global[l_5] = l_mut_20;
}
}
l_mut_2 = l_mut_2 + info.scalars_u32[4];
}
}
