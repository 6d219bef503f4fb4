// reduce_packed_f16_max_middle: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_36: u32;
var l_mut_43: f32;
var l_mut_58: f32;
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
let l_121 = info.static_meta[u32(0)];
let l_122 = l_121 * u32(1);
let l_123 = l_5 < l_122;
let l_124 = l_122 - u32(1);
let l_125 = min(l_5, l_124);
let l_126 = buffer_0_global[l_125];
let l_127 = select(u32(0), l_126, l_123);
let l_6 = l_127;
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
let l_128 = info.static_meta[u32(2)];
let l_129 = l_128 * u32(1);
let l_130 = l_15 < l_129;
let l_131 = l_129 - u32(1);
let l_132 = min(l_15, l_131);
let l_133 = buffer_2_global[l_132];
let l_134 = select(u32(0), l_133, l_130);
let l_16 = l_134;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_135 = info.static_meta[u32(3)];
let l_136 = l_135 * u32(1);
let l_137 = l_13 < l_136;
let l_138 = l_136 - u32(1);
let l_139 = min(l_13, l_138);
let l_140 = buffer_3_global[l_139];
let l_141 = select(f32(0.0), l_140, l_137);
let l_22 = l_141;
l_mut_21 = l_22;
let l_23 = l_20 << u32(16);
let l_24 = bitcast<f32>(l_23);
l_mut_25 = l_24;
let l_26 = l_20 & u32(32768);
let l_27 = l_26 << u32(16);
let l_28 = l_20 >> u32(10);
let l_29 = l_28 & u32(31);
let l_30 = l_20 & u32(1023);
let l_31 = l_29 + u32(112);
let l_32 = l_31 << u32(23);
let l_33 = l_27 | l_32;
let l_34 = l_30 << u32(13);
let l_35 = l_33 | l_34;
l_mut_36 = l_35;
let l_37 = l_29 == u32(31);
if l_37 {
let l_38 = l_27 | u32(2139095040);
let l_39 = l_30 << u32(13);
let l_40 = l_38 | l_39;
l_mut_36 = l_40;
let l_41 = l_30 != u32(0);
if l_41 {
l_mut_36 = l_mut_36 | u32(4194304);
}
}
let l_42 = bitcast<f32>(l_mut_36);
l_mut_43 = l_42;
let l_44 = l_29 == u32(0);
if l_44 {
let l_45 = f32(l_30);
let l_46 = l_45 * f32(5.960464477539063e-8);
l_mut_43 = l_46;
let l_47 = l_27 != u32(0);
if l_47 {
let l_48 = -l_46;
l_mut_43 = l_48;
}
let l_49 = l_30 == u32(0);
if l_49 {
let l_50 = bitcast<f32>(l_27);
l_mut_43 = l_50;
}
}
l_mut_25 = l_mut_43;
l_mut_43 = l_mut_21;
let l_51 = l_mut_25 > l_mut_21;
if l_51 {
l_mut_43 = l_mut_25;
}
let l_52 = l_mut_21 > l_mut_25;
let l_53 = !l_52;
let l_54 = l_mut_25 > l_mut_21;
let l_55 = !l_54;
let l_56 = l_53 && l_55;
if l_56 {
let l_57 = l_mut_21 == l_mut_25;
if l_57 {
l_mut_58 = l_mut_21;
let l_59 = bitcast<u32>(l_mut_21);
let l_60 = bitcast<u32>(l_mut_25);
let l_61 = l_59 & l_60;
let l_62 = bitcast<f32>(l_61);
l_mut_58 = l_62;
l_mut_43 = l_mut_58;
} else {
l_mut_58 = l_mut_21;
let l_63 = bitcast<u32>(l_mut_21);
let l_64 = bitcast<u32>(l_mut_25);
let l_65 = l_63 | l_64;
let l_66 = bitcast<f32>(l_65);
l_mut_58 = l_66;
l_mut_43 = l_mut_58;
}
}
let l_142 = info.static_meta[u32(3)];
let l_143 = l_142 * u32(1);
let l_144 = l_13 < l_143;
if l_144 {
buffer_3_global[l_13] = l_mut_43;
}
}
let l_67 = l_5 * u32(2);
let l_68 = l_67 + u32(1);
let l_69 = l_68 >= info.scalars_u32[0];
let l_70 = l_68 < l_1;
let l_71 = l_69 && l_70;
if l_71 {
let l_72 = l_68 - info.scalars_u32[0];
let l_73 = info.scalars_u32[2] + l_72;
let l_74 = l_73 / u32(2);
let l_145 = info.static_meta[u32(2)];
let l_146 = l_145 * u32(1);
let l_147 = l_74 < l_146;
let l_148 = l_146 - u32(1);
let l_149 = min(l_74, l_148);
let l_150 = buffer_2_global[l_149];
let l_151 = select(u32(0), l_150, l_147);
let l_75 = l_151;
let l_76 = l_73 % u32(2);
let l_77 = l_76 * u32(16);
let l_78 = l_75 >> l_77;
let l_79 = l_78 & u32(65535);
l_mut_58 = f32(0.0);
let l_152 = info.static_meta[u32(3)];
let l_153 = l_152 * u32(1);
let l_154 = l_72 < l_153;
let l_155 = l_153 - u32(1);
let l_156 = min(l_72, l_155);
let l_157 = buffer_3_global[l_156];
let l_158 = select(f32(0.0), l_157, l_154);
let l_80 = l_158;
l_mut_58 = l_80;
let l_81 = l_79 << u32(16);
let l_82 = bitcast<f32>(l_81);
l_mut_43 = l_82;
let l_83 = l_79 & u32(32768);
let l_84 = l_83 << u32(16);
let l_85 = l_79 >> u32(10);
let l_86 = l_85 & u32(31);
let l_87 = l_79 & u32(1023);
let l_88 = l_86 + u32(112);
let l_89 = l_88 << u32(23);
let l_90 = l_84 | l_89;
let l_91 = l_87 << u32(13);
let l_92 = l_90 | l_91;
l_mut_36 = l_92;
let l_93 = l_86 == u32(31);
if l_93 {
let l_94 = l_84 | u32(2139095040);
let l_95 = l_87 << u32(13);
let l_96 = l_94 | l_95;
l_mut_36 = l_96;
let l_97 = l_87 != u32(0);
if l_97 {
l_mut_36 = l_mut_36 | u32(4194304);
}
}
let l_98 = bitcast<f32>(l_mut_36);
l_mut_25 = l_98;
let l_99 = l_86 == u32(0);
if l_99 {
let l_100 = f32(l_87);
let l_101 = l_100 * f32(5.960464477539063e-8);
l_mut_25 = l_101;
let l_102 = l_84 != u32(0);
if l_102 {
let l_103 = -l_101;
l_mut_25 = l_103;
}
let l_104 = l_87 == u32(0);
if l_104 {
let l_105 = bitcast<f32>(l_84);
l_mut_25 = l_105;
}
}
l_mut_43 = l_mut_25;
l_mut_25 = l_mut_58;
let l_106 = l_mut_43 > l_mut_58;
if l_106 {
l_mut_25 = l_mut_43;
}
let l_107 = l_mut_58 > l_mut_43;
let l_108 = !l_107;
let l_109 = l_mut_43 > l_mut_58;
let l_110 = !l_109;
let l_111 = l_108 && l_110;
if l_111 {
let l_112 = l_mut_58 == l_mut_43;
if l_112 {
l_mut_21 = l_mut_58;
let l_113 = bitcast<u32>(l_mut_58);
let l_114 = bitcast<u32>(l_mut_43);
let l_115 = l_113 & l_114;
let l_116 = bitcast<f32>(l_115);
l_mut_21 = l_116;
l_mut_25 = l_mut_21;
} else {
l_mut_21 = l_mut_58;
let l_117 = bitcast<u32>(l_mut_58);
let l_118 = bitcast<u32>(l_mut_43);
let l_119 = l_117 | l_118;
let l_120 = bitcast<f32>(l_119);
l_mut_21 = l_120;
l_mut_25 = l_mut_21;
}
}
let l_159 = info.static_meta[u32(3)];
let l_160 = l_159 * u32(1);
let l_161 = l_72 < l_160;
if l_161 {
buffer_3_global[l_72] = l_mut_25;
}
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
