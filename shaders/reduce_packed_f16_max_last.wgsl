// reduce_packed_f16_max_last: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_72: u32;
var l_mut_74: u32;
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
let l_225 = info.static_meta[u32(0)];
let l_226 = l_225 * u32(1);
let l_227 = l_5 < l_226;
let l_228 = l_226 - u32(1);
let l_229 = min(l_5, l_228);
let l_230 = buffer_0_global[l_229];
let l_231 = select(u32(0), l_230, l_227);
let l_6 = l_231;
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
let l_235 = info.static_meta[u32(2)];
let l_236 = l_235 * u32(1);
let l_237 = l_15 < l_236;
let l_238 = l_236 - u32(1);
let l_239 = min(l_15, l_238);
let l_240 = buffer_2_global[l_239];
let l_241 = select(u32(0), l_240, l_237);
let l_16 = l_241;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_242 = info.static_meta[u32(3)];
let l_243 = l_242 * u32(1);
let l_244 = l_13 < l_243;
let l_245 = l_243 - u32(1);
let l_246 = min(l_13, l_245);
let l_247 = buffer_3_global[l_246];
let l_248 = select(f32(0.0), l_247, l_244);
let l_22 = l_248;
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
l_mut_36 = u32(0);
let l_67 = bitcast<u32>(l_mut_43);
let l_68 = l_67 & u32(2147483648);
let l_69 = l_68 >> u32(16);
let l_70 = l_67 & u32(2139095040);
let l_71 = l_67 & u32(8388607);
l_mut_72 = u32(0);
let l_73 = l_70 == u32(2139095040);
if l_73 {
l_mut_74 = u32(0);
let l_75 = l_71 != u32(0);
if l_75 {
l_mut_74 = u32(512);
}
let l_76 = l_69 | u32(31744);
let l_77 = l_76 | l_mut_74;
let l_78 = l_71 >> u32(13);
let l_79 = l_77 | l_78;
l_mut_72 = l_79;
} else {
let l_80 = l_70 >> u32(23);
let l_81 = i32(l_80);
let l_82 = l_81 - i32(127);
let l_83 = l_82 + i32(15);
let l_84 = l_83 >= i32(31);
if l_84 {
let l_85 = l_69 | u32(31744);
l_mut_72 = l_85;
} else {
let l_86 = l_83 <= i32(0);
if l_86 {
let l_87 = i32(14) - l_83;
let l_88 = l_87 > i32(24);
if l_88 {
l_mut_72 = l_69;
} else {
let l_89 = l_71 | u32(8388608);
let l_90 = i32(14) - l_83;
let l_91 = u32(l_90);
let l_92 = l_89 >> l_91;
l_mut_74 = l_92;
let l_93 = l_91 - u32(1);
let l_94 = u32(1) << l_93;
let l_95 = l_89 & l_94;
let l_96 = l_95 != u32(0);
let l_97 = u32(3) * l_94;
let l_98 = l_97 - u32(1);
let l_99 = l_89 & l_98;
let l_100 = l_99 != u32(0);
let l_101 = l_96 && l_100;
if l_101 {
l_mut_74 = l_mut_74 + u32(1);
}
let l_102 = l_69 | l_mut_74;
l_mut_72 = l_102;
}
} else {
let l_103 = u32(l_83);
let l_104 = l_103 << u32(10);
let l_105 = l_71 >> u32(13);
let l_106 = l_69 | l_104;
let l_107 = l_106 | l_105;
l_mut_72 = l_107;
let l_108 = l_71 & u32(4096);
let l_109 = l_108 != u32(0);
let l_110 = l_71 & u32(12287);
let l_111 = l_110 != u32(0);
let l_112 = l_109 && l_111;
if l_112 {
l_mut_72 = l_mut_72 + u32(1);
}
}
}
}
l_mut_36 = l_mut_72;
let l_113 = u32(0) * u32(16);
let l_114 = u32(65535) << l_113;
let l_115 = ~l_114;
let l_116 = l_mut_7 & l_115;
let l_117 = l_mut_36 & u32(65535);
let l_118 = l_117 << l_113;
let l_119 = l_116 | l_118;
l_mut_7 = l_119;
}
let l_120 = l_5 * u32(2);
let l_121 = l_120 + u32(1);
let l_122 = l_121 >= info.scalars_u32[0];
let l_123 = l_121 < l_1;
let l_124 = l_122 && l_123;
if l_124 {
let l_125 = l_121 - info.scalars_u32[0];
let l_126 = info.scalars_u32[2] + l_125;
let l_127 = l_126 / u32(2);
let l_249 = info.static_meta[u32(2)];
let l_250 = l_249 * u32(1);
let l_251 = l_127 < l_250;
let l_252 = l_250 - u32(1);
let l_253 = min(l_127, l_252);
let l_254 = buffer_2_global[l_253];
let l_255 = select(u32(0), l_254, l_251);
let l_128 = l_255;
let l_129 = l_126 % u32(2);
let l_130 = l_129 * u32(16);
let l_131 = l_128 >> l_130;
let l_132 = l_131 & u32(65535);
l_mut_58 = f32(0.0);
let l_256 = info.static_meta[u32(3)];
let l_257 = l_256 * u32(1);
let l_258 = l_125 < l_257;
let l_259 = l_257 - u32(1);
let l_260 = min(l_125, l_259);
let l_261 = buffer_3_global[l_260];
let l_262 = select(f32(0.0), l_261, l_258);
let l_133 = l_262;
l_mut_58 = l_133;
let l_134 = l_132 << u32(16);
let l_135 = bitcast<f32>(l_134);
l_mut_43 = l_135;
let l_136 = l_132 & u32(32768);
let l_137 = l_136 << u32(16);
let l_138 = l_132 >> u32(10);
let l_139 = l_138 & u32(31);
let l_140 = l_132 & u32(1023);
let l_141 = l_139 + u32(112);
let l_142 = l_141 << u32(23);
let l_143 = l_137 | l_142;
let l_144 = l_140 << u32(13);
let l_145 = l_143 | l_144;
l_mut_74 = l_145;
let l_146 = l_139 == u32(31);
if l_146 {
let l_147 = l_137 | u32(2139095040);
let l_148 = l_140 << u32(13);
let l_149 = l_147 | l_148;
l_mut_74 = l_149;
let l_150 = l_140 != u32(0);
if l_150 {
l_mut_74 = l_mut_74 | u32(4194304);
}
}
let l_151 = bitcast<f32>(l_mut_74);
l_mut_25 = l_151;
let l_152 = l_139 == u32(0);
if l_152 {
let l_153 = f32(l_140);
let l_154 = l_153 * f32(5.960464477539063e-8);
l_mut_25 = l_154;
let l_155 = l_137 != u32(0);
if l_155 {
let l_156 = -l_154;
l_mut_25 = l_156;
}
let l_157 = l_140 == u32(0);
if l_157 {
let l_158 = bitcast<f32>(l_137);
l_mut_25 = l_158;
}
}
l_mut_43 = l_mut_25;
l_mut_25 = l_mut_58;
let l_159 = l_mut_43 > l_mut_58;
if l_159 {
l_mut_25 = l_mut_43;
}
let l_160 = l_mut_58 > l_mut_43;
let l_161 = !l_160;
let l_162 = l_mut_43 > l_mut_58;
let l_163 = !l_162;
let l_164 = l_161 && l_163;
if l_164 {
let l_165 = l_mut_58 == l_mut_43;
if l_165 {
l_mut_21 = l_mut_58;
let l_166 = bitcast<u32>(l_mut_58);
let l_167 = bitcast<u32>(l_mut_43);
let l_168 = l_166 & l_167;
let l_169 = bitcast<f32>(l_168);
l_mut_21 = l_169;
l_mut_25 = l_mut_21;
} else {
l_mut_21 = l_mut_58;
let l_170 = bitcast<u32>(l_mut_58);
let l_171 = bitcast<u32>(l_mut_43);
let l_172 = l_170 | l_171;
let l_173 = bitcast<f32>(l_172);
l_mut_21 = l_173;
l_mut_25 = l_mut_21;
}
}
l_mut_74 = u32(0);
let l_174 = bitcast<u32>(l_mut_25);
let l_175 = l_174 & u32(2147483648);
let l_176 = l_175 >> u32(16);
let l_177 = l_174 & u32(2139095040);
let l_178 = l_174 & u32(8388607);
l_mut_72 = u32(0);
let l_179 = l_177 == u32(2139095040);
if l_179 {
l_mut_36 = u32(0);
let l_180 = l_178 != u32(0);
if l_180 {
l_mut_36 = u32(512);
}
let l_181 = l_176 | u32(31744);
let l_182 = l_181 | l_mut_36;
let l_183 = l_178 >> u32(13);
let l_184 = l_182 | l_183;
l_mut_72 = l_184;
} else {
let l_185 = l_177 >> u32(23);
let l_186 = i32(l_185);
let l_187 = l_186 - i32(127);
let l_188 = l_187 + i32(15);
let l_189 = l_188 >= i32(31);
if l_189 {
let l_190 = l_176 | u32(31744);
l_mut_72 = l_190;
} else {
let l_191 = l_188 <= i32(0);
if l_191 {
let l_192 = i32(14) - l_188;
let l_193 = l_192 > i32(24);
if l_193 {
l_mut_72 = l_176;
} else {
let l_194 = l_178 | u32(8388608);
let l_195 = i32(14) - l_188;
let l_196 = u32(l_195);
let l_197 = l_194 >> l_196;
l_mut_36 = l_197;
let l_198 = l_196 - u32(1);
let l_199 = u32(1) << l_198;
let l_200 = l_194 & l_199;
let l_201 = l_200 != u32(0);
let l_202 = u32(3) * l_199;
let l_203 = l_202 - u32(1);
let l_204 = l_194 & l_203;
let l_205 = l_204 != u32(0);
let l_206 = l_201 && l_205;
if l_206 {
l_mut_36 = l_mut_36 + u32(1);
}
let l_207 = l_176 | l_mut_36;
l_mut_72 = l_207;
}
} else {
let l_208 = u32(l_188);
let l_209 = l_208 << u32(10);
let l_210 = l_178 >> u32(13);
let l_211 = l_176 | l_209;
let l_212 = l_211 | l_210;
l_mut_72 = l_212;
let l_213 = l_178 & u32(4096);
let l_214 = l_213 != u32(0);
let l_215 = l_178 & u32(12287);
let l_216 = l_215 != u32(0);
let l_217 = l_214 && l_216;
if l_217 {
l_mut_72 = l_mut_72 + u32(1);
}
}
}
}
l_mut_74 = l_mut_72;
let l_218 = u32(1) * u32(16);
let l_219 = u32(65535) << l_218;
let l_220 = ~l_219;
let l_221 = l_mut_7 & l_220;
let l_222 = l_mut_74 & u32(65535);
let l_223 = l_222 << l_218;
let l_224 = l_221 | l_223;
l_mut_7 = l_224;
}
let l_232 = info.static_meta[u32(0)];
let l_233 = l_232 * u32(1);
let l_234 = l_5 < l_233;
if l_234 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
