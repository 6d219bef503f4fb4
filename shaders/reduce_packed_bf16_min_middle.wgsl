// reduce_packed_bf16_min_middle: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_33: f32;
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
let l_64 = info.static_meta[u32(0)];
let l_65 = l_64 * u32(1);
let l_66 = l_5 < l_65;
let l_67 = l_65 - u32(1);
let l_68 = min(l_5, l_67);
let l_69 = buffer_0_global[l_68];
let l_70 = select(u32(0), l_69, l_66);
let l_6 = l_70;
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
let l_71 = info.static_meta[u32(2)];
let l_72 = l_71 * u32(1);
let l_73 = l_15 < l_72;
let l_74 = l_72 - u32(1);
let l_75 = min(l_15, l_74);
let l_76 = buffer_2_global[l_75];
let l_77 = select(u32(0), l_76, l_73);
let l_16 = l_77;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_78 = info.static_meta[u32(3)];
let l_79 = l_78 * u32(1);
let l_80 = l_13 < l_79;
let l_81 = l_79 - u32(1);
let l_82 = min(l_13, l_81);
let l_83 = buffer_3_global[l_82];
let l_84 = select(f32(0.0), l_83, l_80);
let l_22 = l_84;
l_mut_21 = l_22;
let l_23 = l_20 << u32(16);
let l_24 = bitcast<f32>(l_23);
l_mut_25 = l_24;
l_mut_26 = l_mut_21;
let l_27 = l_mut_25 < l_mut_21;
if l_27 {
l_mut_26 = l_mut_25;
}
let l_28 = l_mut_21 < l_mut_25;
let l_29 = !l_28;
let l_30 = l_mut_25 < l_mut_21;
let l_31 = !l_30;
let l_32 = l_29 && l_31;
if l_32 {
l_mut_33 = l_mut_21;
let l_34 = bitcast<u32>(l_mut_21);
let l_35 = bitcast<u32>(l_mut_25);
let l_36 = l_34 | l_35;
let l_37 = bitcast<f32>(l_36);
l_mut_33 = l_37;
l_mut_26 = l_mut_33;
}
let l_85 = info.static_meta[u32(3)];
let l_86 = l_85 * u32(1);
let l_87 = l_13 < l_86;
if l_87 {
buffer_3_global[l_13] = l_mut_26;
}
}
let l_38 = l_5 * u32(2);
let l_39 = l_38 + u32(1);
let l_40 = l_39 >= info.scalars_u32[0];
let l_41 = l_39 < l_1;
let l_42 = l_40 && l_41;
if l_42 {
let l_43 = l_39 - info.scalars_u32[0];
let l_44 = info.scalars_u32[2] + l_43;
let l_45 = l_44 / u32(2);
let l_88 = info.static_meta[u32(2)];
let l_89 = l_88 * u32(1);
let l_90 = l_45 < l_89;
let l_91 = l_89 - u32(1);
let l_92 = min(l_45, l_91);
let l_93 = buffer_2_global[l_92];
let l_94 = select(u32(0), l_93, l_90);
let l_46 = l_94;
let l_47 = l_44 % u32(2);
let l_48 = l_47 * u32(16);
let l_49 = l_46 >> l_48;
let l_50 = l_49 & u32(65535);
l_mut_33 = f32(0.0);
let l_95 = info.static_meta[u32(3)];
let l_96 = l_95 * u32(1);
let l_97 = l_43 < l_96;
let l_98 = l_96 - u32(1);
let l_99 = min(l_43, l_98);
let l_100 = buffer_3_global[l_99];
let l_101 = select(f32(0.0), l_100, l_97);
let l_51 = l_101;
l_mut_33 = l_51;
let l_52 = l_50 << u32(16);
let l_53 = bitcast<f32>(l_52);
l_mut_26 = l_53;
l_mut_25 = l_mut_33;
let l_54 = l_mut_26 < l_mut_33;
if l_54 {
l_mut_25 = l_mut_26;
}
let l_55 = l_mut_33 < l_mut_26;
let l_56 = !l_55;
let l_57 = l_mut_26 < l_mut_33;
let l_58 = !l_57;
let l_59 = l_56 && l_58;
if l_59 {
l_mut_21 = l_mut_33;
let l_60 = bitcast<u32>(l_mut_33);
let l_61 = bitcast<u32>(l_mut_26);
let l_62 = l_60 | l_61;
let l_63 = bitcast<f32>(l_62);
l_mut_21 = l_63;
l_mut_25 = l_mut_21;
}
let l_102 = info.static_meta[u32(3)];
let l_103 = l_102 * u32(1);
let l_104 = l_43 < l_103;
if l_104 {
buffer_3_global[l_43] = l_mut_25;
}
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
