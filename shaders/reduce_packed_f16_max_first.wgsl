// reduce_packed_f16_max_first: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_89: f32;
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
let l_183 = info.static_meta[u32(0)];
let l_184 = l_183 * u32(1);
let l_185 = l_5 < l_184;
let l_186 = l_184 - u32(1);
let l_187 = min(l_5, l_186);
let l_188 = buffer_0_global[l_187];
let l_189 = select(u32(0), l_188, l_185);
let l_6 = l_189;
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
let l_190 = info.static_meta[u32(2)];
let l_191 = l_190 * u32(1);
let l_192 = l_15 < l_191;
let l_193 = l_191 - u32(1);
let l_194 = min(l_15, l_193);
let l_195 = buffer_2_global[l_194];
let l_196 = select(u32(0), l_195, l_192);
let l_16 = l_196;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_22 = info.scalars_u32[1] + l_13;
let l_23 = l_22 / u32(2);
let l_197 = info.static_meta[u32(1)];
let l_198 = l_197 * u32(1);
let l_199 = l_23 < l_198;
let l_200 = l_198 - u32(1);
let l_201 = min(l_23, l_200);
let l_202 = buffer_1_global[l_201];
let l_203 = select(u32(0), l_202, l_199);
let l_24 = l_203;
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
let l_82 = l_mut_49 > l_mut_21;
if l_82 {
l_mut_31 = l_mut_49;
}
let l_83 = l_mut_21 > l_mut_49;
let l_84 = !l_83;
let l_85 = l_mut_49 > l_mut_21;
let l_86 = !l_85;
let l_87 = l_84 && l_86;
if l_87 {
let l_88 = l_mut_21 == l_mut_49;
if l_88 {
l_mut_89 = l_mut_21;
let l_90 = bitcast<u32>(l_mut_21);
let l_91 = bitcast<u32>(l_mut_49);
let l_92 = l_90 & l_91;
let l_93 = bitcast<f32>(l_92);
l_mut_89 = l_93;
l_mut_31 = l_mut_89;
} else {
l_mut_89 = l_mut_21;
let l_94 = bitcast<u32>(l_mut_21);
let l_95 = bitcast<u32>(l_mut_49);
let l_96 = l_94 | l_95;
let l_97 = bitcast<f32>(l_96);
l_mut_89 = l_97;
l_mut_31 = l_mut_89;
}
}
let l_204 = info.static_meta[u32(3)];
let l_205 = l_204 * u32(1);
let l_206 = l_13 < l_205;
if l_206 {
buffer_3_global[l_13] = l_mut_31;
}
}
let l_98 = l_5 * u32(2);
let l_99 = l_98 + u32(1);
let l_100 = l_99 >= info.scalars_u32[0];
let l_101 = l_99 < l_1;
let l_102 = l_100 && l_101;
if l_102 {
let l_103 = l_99 - info.scalars_u32[0];
let l_104 = info.scalars_u32[2] + l_103;
let l_105 = l_104 / u32(2);
let l_207 = info.static_meta[u32(2)];
let l_208 = l_207 * u32(1);
let l_209 = l_105 < l_208;
let l_210 = l_208 - u32(1);
let l_211 = min(l_105, l_210);
let l_212 = buffer_2_global[l_211];
let l_213 = select(u32(0), l_212, l_209);
let l_106 = l_213;
let l_107 = l_104 % u32(2);
let l_108 = l_107 * u32(16);
let l_109 = l_106 >> l_108;
let l_110 = l_109 & u32(65535);
l_mut_89 = f32(0.0);
let l_111 = info.scalars_u32[1] + l_103;
let l_112 = l_111 / u32(2);
let l_214 = info.static_meta[u32(1)];
let l_215 = l_214 * u32(1);
let l_216 = l_112 < l_215;
let l_217 = l_215 - u32(1);
let l_218 = min(l_112, l_217);
let l_219 = buffer_1_global[l_218];
let l_220 = select(u32(0), l_219, l_216);
let l_113 = l_220;
let l_114 = l_111 % u32(2);
let l_115 = l_114 * u32(16);
let l_116 = l_113 >> l_115;
let l_117 = l_116 & u32(65535);
let l_118 = l_117 << u32(16);
let l_119 = bitcast<f32>(l_118);
l_mut_49 = l_119;
let l_120 = l_117 & u32(32768);
let l_121 = l_120 << u32(16);
let l_122 = l_117 >> u32(10);
let l_123 = l_122 & u32(31);
let l_124 = l_117 & u32(1023);
let l_125 = l_123 + u32(112);
let l_126 = l_125 << u32(23);
let l_127 = l_121 | l_126;
let l_128 = l_124 << u32(13);
let l_129 = l_127 | l_128;
l_mut_42 = l_129;
let l_130 = l_123 == u32(31);
if l_130 {
let l_131 = l_121 | u32(2139095040);
let l_132 = l_124 << u32(13);
let l_133 = l_131 | l_132;
l_mut_42 = l_133;
let l_134 = l_124 != u32(0);
if l_134 {
l_mut_42 = l_mut_42 | u32(4194304);
}
}
let l_135 = bitcast<f32>(l_mut_42);
l_mut_31 = l_135;
let l_136 = l_123 == u32(0);
if l_136 {
let l_137 = f32(l_124);
let l_138 = l_137 * f32(5.960464477539063e-8);
l_mut_31 = l_138;
let l_139 = l_121 != u32(0);
if l_139 {
let l_140 = -l_138;
l_mut_31 = l_140;
}
let l_141 = l_124 == u32(0);
if l_141 {
let l_142 = bitcast<f32>(l_121);
l_mut_31 = l_142;
}
}
l_mut_49 = l_mut_31;
l_mut_89 = l_mut_49;
let l_143 = l_110 << u32(16);
let l_144 = bitcast<f32>(l_143);
l_mut_49 = l_144;
let l_145 = l_110 & u32(32768);
let l_146 = l_145 << u32(16);
let l_147 = l_110 >> u32(10);
let l_148 = l_147 & u32(31);
let l_149 = l_110 & u32(1023);
let l_150 = l_148 + u32(112);
let l_151 = l_150 << u32(23);
let l_152 = l_146 | l_151;
let l_153 = l_149 << u32(13);
let l_154 = l_152 | l_153;
l_mut_42 = l_154;
let l_155 = l_148 == u32(31);
if l_155 {
let l_156 = l_146 | u32(2139095040);
let l_157 = l_149 << u32(13);
let l_158 = l_156 | l_157;
l_mut_42 = l_158;
let l_159 = l_149 != u32(0);
if l_159 {
l_mut_42 = l_mut_42 | u32(4194304);
}
}
let l_160 = bitcast<f32>(l_mut_42);
l_mut_31 = l_160;
let l_161 = l_148 == u32(0);
if l_161 {
let l_162 = f32(l_149);
let l_163 = l_162 * f32(5.960464477539063e-8);
l_mut_31 = l_163;
let l_164 = l_146 != u32(0);
if l_164 {
let l_165 = -l_163;
l_mut_31 = l_165;
}
let l_166 = l_149 == u32(0);
if l_166 {
let l_167 = bitcast<f32>(l_146);
l_mut_31 = l_167;
}
}
l_mut_49 = l_mut_31;
l_mut_31 = l_mut_89;
let l_168 = l_mut_49 > l_mut_89;
if l_168 {
l_mut_31 = l_mut_49;
}
let l_169 = l_mut_89 > l_mut_49;
let l_170 = !l_169;
let l_171 = l_mut_49 > l_mut_89;
let l_172 = !l_171;
let l_173 = l_170 && l_172;
if l_173 {
let l_174 = l_mut_89 == l_mut_49;
if l_174 {
l_mut_21 = l_mut_89;
let l_175 = bitcast<u32>(l_mut_89);
let l_176 = bitcast<u32>(l_mut_49);
let l_177 = l_175 & l_176;
let l_178 = bitcast<f32>(l_177);
l_mut_21 = l_178;
l_mut_31 = l_mut_21;
} else {
l_mut_21 = l_mut_89;
let l_179 = bitcast<u32>(l_mut_89);
let l_180 = bitcast<u32>(l_mut_49);
let l_181 = l_179 | l_180;
let l_182 = bitcast<f32>(l_181);
l_mut_21 = l_182;
l_mut_31 = l_mut_21;
}
}
let l_221 = info.static_meta[u32(3)];
let l_222 = l_221 * u32(1);
let l_223 = l_103 < l_222;
if l_223 {
buffer_3_global[l_103] = l_mut_31;
}
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
