// reduce_packed_f16_min_first: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_42: u32;
var l_mut_49: f32;
var l_mut_88: f32;
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
let l_173 = info.static_meta[u32(0)];
let l_174 = l_173 * u32(1);
let l_175 = l_5 < l_174;
let l_176 = l_174 - u32(1);
let l_177 = min(l_5, l_176);
let l_178 = buffer_0_global[l_177];
let l_179 = select(u32(0), l_178, l_175);
let l_6 = l_179;
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
let l_180 = info.static_meta[u32(2)];
let l_181 = l_180 * u32(1);
let l_182 = l_15 < l_181;
let l_183 = l_181 - u32(1);
let l_184 = min(l_15, l_183);
let l_185 = buffer_2_global[l_184];
let l_186 = select(u32(0), l_185, l_182);
let l_16 = l_186;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_22 = info.scalars_u32[1] + l_13;
let l_23 = l_22 / u32(2);
let l_187 = info.static_meta[u32(1)];
let l_188 = l_187 * u32(1);
let l_189 = l_23 < l_188;
let l_190 = l_188 - u32(1);
let l_191 = min(l_23, l_190);
let l_192 = buffer_1_global[l_191];
let l_193 = select(u32(0), l_192, l_189);
let l_24 = l_193;
let l_25 = l_22 % u32(2);
let l_26 = l_25 * u32(16);
let l_27 = l_24 >> l_26;
let l_28 = l_27 & u32(65535);
let l_29 = l_28 << u32(16);
let l_30 = bitcast<f32>(l_29);
l_mut_31 = l_30;
let l_32 = l_28 & u32(32768);
let l_33 = l_32 << u32(16);
let l_34 = l_28 >> u32(10);
let l_35 = l_34 & u32(31);
let l_36 = l_28 & u32(1023);
let l_37 = l_35 + u32(112);
let l_38 = l_37 << u32(23);
let l_39 = l_33 | l_38;
let l_40 = l_36 << u32(13);
let l_41 = l_39 | l_40;
l_mut_42 = l_41;
let l_43 = l_35 == u32(31);
if l_43 {
let l_44 = l_33 | u32(2139095040);
let l_45 = l_36 << u32(13);
let l_46 = l_44 | l_45;
l_mut_42 = l_46;
let l_47 = l_36 != u32(0);
if l_47 {
l_mut_42 = l_mut_42 | u32(4194304);
}
}
let l_48 = bitcast<f32>(l_mut_42);
l_mut_49 = l_48;
let l_50 = l_35 == u32(0);
if l_50 {
let l_51 = f32(l_36);
let l_52 = l_51 * f32(5.960464477539063e-8);
l_mut_49 = l_52;
let l_53 = l_33 != u32(0);
if l_53 {
let l_54 = -l_52;
l_mut_49 = l_54;
}
let l_55 = l_36 == u32(0);
if l_55 {
let l_56 = bitcast<f32>(l_33);
l_mut_49 = l_56;
}
}
l_mut_31 = l_mut_49;
l_mut_21 = l_mut_31;
let l_57 = l_20 << u32(16);
let l_58 = bitcast<f32>(l_57);
l_mut_49 = l_58;
let l_59 = l_20 & u32(32768);
let l_60 = l_59 << u32(16);
let l_61 = l_20 >> u32(10);
let l_62 = l_61 & u32(31);
let l_63 = l_20 & u32(1023);
let l_64 = l_62 + u32(112);
let l_65 = l_64 << u32(23);
let l_66 = l_60 | l_65;
let l_67 = l_63 << u32(13);
let l_68 = l_66 | l_67;
l_mut_42 = l_68;
let l_69 = l_62 == u32(31);
if l_69 {
let l_70 = l_60 | u32(2139095040);
let l_71 = l_63 << u32(13);
let l_72 = l_70 | l_71;
l_mut_42 = l_72;
let l_73 = l_63 != u32(0);
if l_73 {
l_mut_42 = l_mut_42 | u32(4194304);
}
}
let l_74 = bitcast<f32>(l_mut_42);
l_mut_31 = l_74;
let l_75 = l_62 == u32(0);
if l_75 {
let l_76 = f32(l_63);
let l_77 = l_76 * f32(5.960464477539063e-8);
l_mut_31 = l_77;
let l_78 = l_60 != u32(0);
if l_78 {
let l_79 = -l_77;
l_mut_31 = l_79;
}
let l_80 = l_63 == u32(0);
if l_80 {
let l_81 = bitcast<f32>(l_60);
l_mut_31 = l_81;
}
}
l_mut_49 = l_mut_31;
l_mut_31 = l_mut_21;
let l_82 = l_mut_49 < l_mut_21;
if l_82 {
l_mut_31 = l_mut_49;
}
let l_83 = l_mut_21 < l_mut_49;
let l_84 = !l_83;
let l_85 = l_mut_49 < l_mut_21;
let l_86 = !l_85;
let l_87 = l_84 && l_86;
if l_87 {
l_mut_88 = l_mut_21;
let l_89 = bitcast<u32>(l_mut_21);
let l_90 = bitcast<u32>(l_mut_49);
let l_91 = l_89 | l_90;
let l_92 = bitcast<f32>(l_91);
l_mut_88 = l_92;
l_mut_31 = l_mut_88;
}
let l_194 = info.static_meta[u32(3)];
let l_195 = l_194 * u32(1);
let l_196 = l_13 < l_195;
if l_196 {
buffer_3_global[l_13] = l_mut_31;
}
}
let l_93 = l_5 * u32(2);
let l_94 = l_93 + u32(1);
let l_95 = l_94 >= info.scalars_u32[0];
let l_96 = l_94 < l_1;
let l_97 = l_95 && l_96;
if l_97 {
let l_98 = l_94 - info.scalars_u32[0];
let l_99 = info.scalars_u32[2] + l_98;
let l_100 = l_99 / u32(2);
let l_197 = info.static_meta[u32(2)];
let l_198 = l_197 * u32(1);
let l_199 = l_100 < l_198;
let l_200 = l_198 - u32(1);
let l_201 = min(l_100, l_200);
let l_202 = buffer_2_global[l_201];
let l_203 = select(u32(0), l_202, l_199);
let l_101 = l_203;
let l_102 = l_99 % u32(2);
let l_103 = l_102 * u32(16);
let l_104 = l_101 >> l_103;
let l_105 = l_104 & u32(65535);
l_mut_88 = f32(0.0);
let l_106 = info.scalars_u32[1] + l_98;
let l_107 = l_106 / u32(2);
let l_204 = info.static_meta[u32(1)];
let l_205 = l_204 * u32(1);
let l_206 = l_107 < l_205;
let l_207 = l_205 - u32(1);
let l_208 = min(l_107, l_207);
let l_209 = buffer_1_global[l_208];
let l_210 = select(u32(0), l_209, l_206);
let l_108 = l_210;
let l_109 = l_106 % u32(2);
let l_110 = l_109 * u32(16);
let l_111 = l_108 >> l_110;
let l_112 = l_111 & u32(65535);
let l_113 = l_112 << u32(16);
let l_114 = bitcast<f32>(l_113);
l_mut_49 = l_114;
let l_115 = l_112 & u32(32768);
let l_116 = l_115 << u32(16);
let l_117 = l_112 >> u32(10);
let l_118 = l_117 & u32(31);
let l_119 = l_112 & u32(1023);
let l_120 = l_118 + u32(112);
let l_121 = l_120 << u32(23);
let l_122 = l_116 | l_121;
let l_123 = l_119 << u32(13);
let l_124 = l_122 | l_123;
l_mut_42 = l_124;
let l_125 = l_118 == u32(31);
if l_125 {
let l_126 = l_116 | u32(2139095040);
let l_127 = l_119 << u32(13);
let l_128 = l_126 | l_127;
l_mut_42 = l_128;
let l_129 = l_119 != u32(0);
if l_129 {
l_mut_42 = l_mut_42 | u32(4194304);
}
}
let l_130 = bitcast<f32>(l_mut_42);
l_mut_31 = l_130;
let l_131 = l_118 == u32(0);
if l_131 {
let l_132 = f32(l_119);
let l_133 = l_132 * f32(5.960464477539063e-8);
l_mut_31 = l_133;
let l_134 = l_116 != u32(0);
if l_134 {
let l_135 = -l_133;
l_mut_31 = l_135;
}
let l_136 = l_119 == u32(0);
if l_136 {
let l_137 = bitcast<f32>(l_116);
l_mut_31 = l_137;
}
}
l_mut_49 = l_mut_31;
l_mut_88 = l_mut_49;
let l_138 = l_105 << u32(16);
let l_139 = bitcast<f32>(l_138);
l_mut_49 = l_139;
let l_140 = l_105 & u32(32768);
let l_141 = l_140 << u32(16);
let l_142 = l_105 >> u32(10);
let l_143 = l_142 & u32(31);
let l_144 = l_105 & u32(1023);
let l_145 = l_143 + u32(112);
let l_146 = l_145 << u32(23);
let l_147 = l_141 | l_146;
let l_148 = l_144 << u32(13);
let l_149 = l_147 | l_148;
l_mut_42 = l_149;
let l_150 = l_143 == u32(31);
if l_150 {
let l_151 = l_141 | u32(2139095040);
let l_152 = l_144 << u32(13);
let l_153 = l_151 | l_152;
l_mut_42 = l_153;
let l_154 = l_144 != u32(0);
if l_154 {
l_mut_42 = l_mut_42 | u32(4194304);
}
}
let l_155 = bitcast<f32>(l_mut_42);
l_mut_31 = l_155;
let l_156 = l_143 == u32(0);
if l_156 {
let l_157 = f32(l_144);
let l_158 = l_157 * f32(5.960464477539063e-8);
l_mut_31 = l_158;
let l_159 = l_141 != u32(0);
if l_159 {
let l_160 = -l_158;
l_mut_31 = l_160;
}
let l_161 = l_144 == u32(0);
if l_161 {
let l_162 = bitcast<f32>(l_141);
l_mut_31 = l_162;
}
}
l_mut_49 = l_mut_31;
l_mut_31 = l_mut_88;
let l_163 = l_mut_49 < l_mut_88;
if l_163 {
l_mut_31 = l_mut_49;
}
let l_164 = l_mut_88 < l_mut_49;
let l_165 = !l_164;
let l_166 = l_mut_49 < l_mut_88;
let l_167 = !l_166;
let l_168 = l_165 && l_167;
if l_168 {
l_mut_21 = l_mut_88;
let l_169 = bitcast<u32>(l_mut_88);
let l_170 = bitcast<u32>(l_mut_49);
let l_171 = l_169 | l_170;
let l_172 = bitcast<f32>(l_171);
l_mut_21 = l_172;
l_mut_31 = l_mut_21;
}
let l_211 = info.static_meta[u32(3)];
let l_212 = l_211 * u32(1);
let l_213 = l_98 < l_212;
if l_213 {
buffer_3_global[l_98] = l_mut_31;
}
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
