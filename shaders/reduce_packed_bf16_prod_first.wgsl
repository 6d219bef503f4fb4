// reduce_packed_bf16_prod_first: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_31: f32;
var l_mut_34: f32;
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
let l_61 = info.static_meta[u32(0)];
let l_62 = l_61 * u32(1);
let l_63 = l_5 < l_62;
let l_64 = l_62 - u32(1);
let l_65 = min(l_5, l_64);
let l_66 = buffer_0_global[l_65];
let l_67 = select(u32(0), l_66, l_63);
let l_6 = l_67;
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
let l_68 = info.static_meta[u32(2)];
let l_69 = l_68 * u32(1);
let l_70 = l_15 < l_69;
let l_71 = l_69 - u32(1);
let l_72 = min(l_15, l_71);
let l_73 = buffer_2_global[l_72];
let l_74 = select(u32(0), l_73, l_70);
let l_16 = l_74;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_22 = info.scalars_u32[1] + l_13;
let l_23 = l_22 / u32(2);
let l_75 = info.static_meta[u32(1)];
let l_76 = l_75 * u32(1);
let l_77 = l_23 < l_76;
let l_78 = l_76 - u32(1);
let l_79 = min(l_23, l_78);
let l_80 = buffer_1_global[l_79];
let l_81 = select(u32(0), l_80, l_77);
let l_24 = l_81;
let l_25 = l_22 % u32(2);
let l_26 = l_25 * u32(16);
let l_27 = l_24 >> l_26;
let l_28 = l_27 & u32(65535);
let l_29 = l_28 << u32(16);
let l_30 = bitcast<f32>(l_29);
l_mut_31 = l_30;
l_mut_21 = l_mut_31;
let l_32 = l_20 << u32(16);
let l_33 = bitcast<f32>(l_32);
l_mut_31 = l_33;
l_mut_34 = l_mut_21;
let l_35 = l_mut_21 * l_mut_31;
l_mut_34 = l_35;
let l_82 = info.static_meta[u32(3)];
let l_83 = l_82 * u32(1);
let l_84 = l_13 < l_83;
if l_84 {
buffer_3_global[l_13] = l_mut_34;
}
}
let l_36 = l_5 * u32(2);
let l_37 = l_36 + u32(1);
let l_38 = l_37 >= info.scalars_u32[0];
let l_39 = l_37 < l_1;
let l_40 = l_38 && l_39;
if l_40 {
let l_41 = l_37 - info.scalars_u32[0];
let l_42 = info.scalars_u32[2] + l_41;
let l_43 = l_42 / u32(2);
let l_85 = info.static_meta[u32(2)];
let l_86 = l_85 * u32(1);
let l_87 = l_43 < l_86;
let l_88 = l_86 - u32(1);
let l_89 = min(l_43, l_88);
let l_90 = buffer_2_global[l_89];
let l_91 = select(u32(0), l_90, l_87);
let l_44 = l_91;
let l_45 = l_42 % u32(2);
let l_46 = l_45 * u32(16);
let l_47 = l_44 >> l_46;
let l_48 = l_47 & u32(65535);
l_mut_34 = f32(0.0);
let l_49 = info.scalars_u32[1] + l_41;
let l_50 = l_49 / u32(2);
let l_92 = info.static_meta[u32(1)];
let l_93 = l_92 * u32(1);
let l_94 = l_50 < l_93;
let l_95 = l_93 - u32(1);
let l_96 = min(l_50, l_95);
let l_97 = buffer_1_global[l_96];
let l_98 = select(u32(0), l_97, l_94);
let l_51 = l_98;
let l_52 = l_49 % u32(2);
let l_53 = l_52 * u32(16);
let l_54 = l_51 >> l_53;
let l_55 = l_54 & u32(65535);
let l_56 = l_55 << u32(16);
let l_57 = bitcast<f32>(l_56);
l_mut_31 = l_57;
l_mut_34 = l_mut_31;
let l_58 = l_48 << u32(16);
let l_59 = bitcast<f32>(l_58);
l_mut_31 = l_59;
l_mut_21 = l_mut_34;
let l_60 = l_mut_34 * l_mut_31;
l_mut_21 = l_60;
let l_99 = info.static_meta[u32(3)];
let l_100 = l_99 * u32(1);
let l_101 = l_41 < l_100;
if l_101 {
buffer_3_global[l_41] = l_mut_21;
}
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
