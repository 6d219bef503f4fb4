// reduce_packed_bf16_prod_middle: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
// Do not edit; regenerate with `RUCCL_BLESS=1 cargo test -p ruCCL --features test-wgpu --test gpu_core -- shaders`.
@group(0)
@binding(0)
var<storage, read_write> buffer_0_global: array<u32>;

@group(0)
@binding(1)
var<storage, read_write> buffer_1_global: array<u32>;

@group(0)
@binding(2)
var<storage, read_write> buffer_2_global: array<u32>;

@group(0)
@binding(3)
var<storage, read_write> buffer_3_global: array<f32>;

struct info_st {
   scalars_u32: array<u32, 6>,
   static_meta: array<u32, 8>,
}

@group(0)
@binding(4)
var<storage, read> info: info_st;

const WORKGROUP_SIZE_X = 256u;
const WORKGROUP_SIZE_Y = 1u;
const WORKGROUP_SIZE_Z = 1u;

@compute
@workgroup_size(256, 1, 1)
fn reduce_packed(
    @builtin(global_invocation_id) global_id: vec3<u32>,
    @builtin(num_workgroups) num_workgroups: vec3<u32>,
) {
let id = (u32(global_id.z) * u32(num_workgroups.x) * u32(WORKGROUP_SIZE_X) * u32(num_workgroups.y) * u32(WORKGROUP_SIZE_Y)) + (u32(global_id.y) * u32(num_workgroups.x) * u32(WORKGROUP_SIZE_X)) + u32(global_id.x);

var l_mut_2: u32;
var l_mut_7: u32;
var l_mut_21: f32;
var l_mut_25: f32;
var l_mut_26: f32;
let l_0 = info.scalars_u32[0] / u32(2);
let l_1 = info.scalars_u32[0] + info.scalars_u32[3];
l_mut_2 = id;
loop {
let l_3 = l_mut_2 < info.scalars_u32[4];
let l_4 = !l_3;
if l_4 {
break;
}
let l_5 = l_0 + l_mut_2;
let l_45 = info.static_meta[u32(0)];
let l_46 = l_45 * u32(1);
let l_47 = l_5 < l_46;
let l_48 = l_46 - u32(1);
let l_49 = min(l_5, l_48);
let l_50 = buffer_0_global[l_49];
let l_51 = select(u32(0), l_50, l_47);
let l_6 = l_51;
l_mut_7 = l_6;
let l_8 = l_5 * u32(2);
let l_9 = l_8 + u32(0);
let l_10 = l_9 >= info.scalars_u32[0];
let l_11 = l_9 < l_1;
let l_12 = l_10 && l_11;
if l_12 {
let l_13 = l_9 - info.scalars_u32[0];
let l_14 = info.scalars_u32[2] + l_13;
let l_15 = l_14 / u32(2);
let l_52 = info.static_meta[u32(2)];
let l_53 = l_52 * u32(1);
let l_54 = l_15 < l_53;
let l_55 = l_53 - u32(1);
let l_56 = min(l_15, l_55);
let l_57 = buffer_2_global[l_56];
let l_58 = select(u32(0), l_57, l_54);
let l_16 = l_58;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_59 = info.static_meta[u32(3)];
let l_60 = l_59 * u32(1);
let l_61 = l_13 < l_60;
let l_62 = l_60 - u32(1);
let l_63 = min(l_13, l_62);
let l_64 = buffer_3_global[l_63];
let l_65 = select(f32(0.0), l_64, l_61);
let l_22 = l_65;
l_mut_21 = l_22;
let l_23 = l_20 << u32(16);
let l_24 = bitcast<f32>(l_23);
l_mut_25 = l_24;
l_mut_26 = l_mut_21;
let l_27 = l_mut_21 * l_mut_25;
l_mut_26 = l_27;
let l_66 = info.static_meta[u32(3)];
let l_67 = l_66 * u32(1);
let l_68 = l_13 < l_67;
if l_68 {
buffer_3_global[l_13] = l_mut_26;
}
}
let l_28 = l_5 * u32(2);
let l_29 = l_28 + u32(1);
let l_30 = l_29 >= info.scalars_u32[0];
let l_31 = l_29 < l_1;
let l_32 = l_30 && l_31;
if l_32 {
let l_33 = l_29 - info.scalars_u32[0];
let l_34 = info.scalars_u32[2] + l_33;
let l_35 = l_34 / u32(2);
let l_69 = info.static_meta[u32(2)];
let l_70 = l_69 * u32(1);
let l_71 = l_35 < l_70;
let l_72 = l_70 - u32(1);
let l_73 = min(l_35, l_72);
let l_74 = buffer_2_global[l_73];
let l_75 = select(u32(0), l_74, l_71);
let l_36 = l_75;
let l_37 = l_34 % u32(2);
let l_38 = l_37 * u32(16);
let l_39 = l_36 >> l_38;
let l_40 = l_39 & u32(65535);
l_mut_26 = f32(0.0);
let l_76 = info.static_meta[u32(3)];
let l_77 = l_76 * u32(1);
let l_78 = l_33 < l_77;
let l_79 = l_77 - u32(1);
let l_80 = min(l_33, l_79);
let l_81 = buffer_3_global[l_80];
let l_82 = select(f32(0.0), l_81, l_78);
let l_41 = l_82;
l_mut_26 = l_41;
let l_42 = l_40 << u32(16);
let l_43 = bitcast<f32>(l_42);
l_mut_25 = l_43;
l_mut_21 = l_mut_26;
let l_44 = l_mut_26 * l_mut_25;
l_mut_21 = l_44;
let l_83 = info.static_meta[u32(3)];
let l_84 = l_83 * u32(1);
let l_85 = l_33 < l_84;
if l_85 {
buffer_3_global[l_33] = l_mut_21;
}
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
