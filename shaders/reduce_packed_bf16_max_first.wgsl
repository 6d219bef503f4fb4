// reduce_packed_bf16_max_first: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_42: f32;
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
let l_90 = info.static_meta[u32(0)];
let l_91 = l_90 * u32(1);
let l_92 = l_5 < l_91;
let l_93 = l_91 - u32(1);
let l_94 = min(l_5, l_93);
let l_95 = buffer_0_global[l_94];
let l_96 = select(u32(0), l_95, l_92);
let l_6 = l_96;
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
let l_97 = info.static_meta[u32(2)];
let l_98 = l_97 * u32(1);
let l_99 = l_15 < l_98;
let l_100 = l_98 - u32(1);
let l_101 = min(l_15, l_100);
let l_102 = buffer_2_global[l_101];
let l_103 = select(u32(0), l_102, l_99);
let l_16 = l_103;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_22 = info.scalars_u32[1] + l_13;
let l_23 = l_22 / u32(2);
let l_104 = info.static_meta[u32(1)];
let l_105 = l_104 * u32(1);
let l_106 = l_23 < l_105;
let l_107 = l_105 - u32(1);
let l_108 = min(l_23, l_107);
let l_109 = buffer_1_global[l_108];
let l_110 = select(u32(0), l_109, l_106);
let l_24 = l_110;
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
let l_35 = l_mut_31 > l_mut_21;
if l_35 {
l_mut_34 = l_mut_31;
}
let l_36 = l_mut_21 > l_mut_31;
let l_37 = !l_36;
let l_38 = l_mut_31 > l_mut_21;
let l_39 = !l_38;
let l_40 = l_37 && l_39;
if l_40 {
let l_41 = l_mut_21 == l_mut_31;
if l_41 {
l_mut_42 = l_mut_21;
let l_43 = bitcast<u32>(l_mut_21);
let l_44 = bitcast<u32>(l_mut_31);
let l_45 = l_43 & l_44;
let l_46 = bitcast<f32>(l_45);
l_mut_42 = l_46;
l_mut_34 = l_mut_42;
} else {
l_mut_42 = l_mut_21;
let l_47 = bitcast<u32>(l_mut_21);
let l_48 = bitcast<u32>(l_mut_31);
let l_49 = l_47 | l_48;
let l_50 = bitcast<f32>(l_49);
l_mut_42 = l_50;
l_mut_34 = l_mut_42;
}
}
let l_111 = info.static_meta[u32(3)];
let l_112 = l_111 * u32(1);
let l_113 = l_13 < l_112;
if l_113 {
buffer_3_global[l_13] = l_mut_34;
}
}
let l_51 = l_5 * u32(2);
let l_52 = l_51 + u32(1);
let l_53 = l_52 >= info.scalars_u32[0];
let l_54 = l_52 < l_1;
let l_55 = l_53 && l_54;
if l_55 {
let l_56 = l_52 - info.scalars_u32[0];
let l_57 = info.scalars_u32[2] + l_56;
let l_58 = l_57 / u32(2);
let l_114 = info.static_meta[u32(2)];
let l_115 = l_114 * u32(1);
let l_116 = l_58 < l_115;
let l_117 = l_115 - u32(1);
let l_118 = min(l_58, l_117);
let l_119 = buffer_2_global[l_118];
let l_120 = select(u32(0), l_119, l_116);
let l_59 = l_120;
let l_60 = l_57 % u32(2);
let l_61 = l_60 * u32(16);
let l_62 = l_59 >> l_61;
let l_63 = l_62 & u32(65535);
l_mut_42 = f32(0.0);
let l_64 = info.scalars_u32[1] + l_56;
let l_65 = l_64 / u32(2);
let l_121 = info.static_meta[u32(1)];
let l_122 = l_121 * u32(1);
let l_123 = l_65 < l_122;
let l_124 = l_122 - u32(1);
let l_125 = min(l_65, l_124);
let l_126 = buffer_1_global[l_125];
let l_127 = select(u32(0), l_126, l_123);
let l_66 = l_127;
let l_67 = l_64 % u32(2);
let l_68 = l_67 * u32(16);
let l_69 = l_66 >> l_68;
let l_70 = l_69 & u32(65535);
let l_71 = l_70 << u32(16);
let l_72 = bitcast<f32>(l_71);
l_mut_34 = l_72;
l_mut_42 = l_mut_34;
let l_73 = l_63 << u32(16);
let l_74 = bitcast<f32>(l_73);
l_mut_34 = l_74;
l_mut_31 = l_mut_42;
let l_75 = l_mut_34 > l_mut_42;
if l_75 {
l_mut_31 = l_mut_34;
}
let l_76 = l_mut_42 > l_mut_34;
let l_77 = !l_76;
let l_78 = l_mut_34 > l_mut_42;
let l_79 = !l_78;
let l_80 = l_77 && l_79;
if l_80 {
let l_81 = l_mut_42 == l_mut_34;
if l_81 {
l_mut_21 = l_mut_42;
let l_82 = bitcast<u32>(l_mut_42);
let l_83 = bitcast<u32>(l_mut_34);
let l_84 = l_82 & l_83;
let l_85 = bitcast<f32>(l_84);
l_mut_21 = l_85;
l_mut_31 = l_mut_21;
} else {
l_mut_21 = l_mut_42;
let l_86 = bitcast<u32>(l_mut_42);
let l_87 = bitcast<u32>(l_mut_34);
let l_88 = l_86 | l_87;
let l_89 = bitcast<f32>(l_88);
l_mut_21 = l_89;
l_mut_31 = l_mut_21;
}
}
let l_128 = info.static_meta[u32(3)];
let l_129 = l_128 * u32(1);
let l_130 = l_56 < l_129;
if l_130 {
buffer_3_global[l_56] = l_mut_31;
}
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
