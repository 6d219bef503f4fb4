// reduce_packed_f16_sum_direct: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_88: u32;
var l_mut_90: u32;
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
let l_258 = info.static_meta[u32(0)];
let l_259 = l_258 * u32(1);
let l_260 = l_5 < l_259;
let l_261 = l_259 - u32(1);
let l_262 = min(l_5, l_261);
let l_263 = buffer_0_global[l_262];
let l_264 = select(u32(0), l_263, l_260);
let l_6 = l_264;
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
let l_268 = info.static_meta[u32(2)];
let l_269 = l_268 * u32(1);
let l_270 = l_15 < l_269;
let l_271 = l_269 - u32(1);
let l_272 = min(l_15, l_271);
let l_273 = buffer_2_global[l_272];
let l_274 = select(u32(0), l_273, l_270);
let l_16 = l_274;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_22 = info.scalars_u32[1] + l_13;
let l_23 = l_22 / u32(2);
let l_275 = info.static_meta[u32(1)];
let l_276 = l_275 * u32(1);
let l_277 = l_23 < l_276;
let l_278 = l_276 - u32(1);
let l_279 = min(l_23, l_278);
let l_280 = buffer_1_global[l_279];
let l_281 = select(u32(0), l_280, l_277);
let l_24 = l_281;
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
let l_82 = l_mut_21 + l_mut_49;
l_mut_31 = l_82;
l_mut_42 = u32(0);
let l_83 = bitcast<u32>(l_mut_31);
let l_84 = l_83 & u32(2147483648);
let l_85 = l_84 >> u32(16);
let l_86 = l_83 & u32(2139095040);
let l_87 = l_83 & u32(8388607);
l_mut_88 = u32(0);
let l_89 = l_86 == u32(2139095040);
if l_89 {
l_mut_90 = u32(0);
let l_91 = l_87 != u32(0);
if l_91 {
l_mut_90 = u32(512);
}
let l_92 = l_85 | u32(31744);
let l_93 = l_92 | l_mut_90;
let l_94 = l_87 >> u32(13);
let l_95 = l_93 | l_94;
l_mut_88 = l_95;
} else {
let l_96 = l_86 >> u32(23);
let l_97 = i32(l_96);
let l_98 = l_97 - i32(127);
let l_99 = l_98 + i32(15);
let l_100 = l_99 >= i32(31);
if l_100 {
let l_101 = l_85 | u32(31744);
l_mut_88 = l_101;
} else {
let l_102 = l_99 <= i32(0);
if l_102 {
let l_103 = i32(14) - l_99;
let l_104 = l_103 > i32(24);
if l_104 {
l_mut_88 = l_85;
} else {
let l_105 = l_87 | u32(8388608);
let l_106 = i32(14) - l_99;
let l_107 = u32(l_106);
let l_108 = l_105 >> l_107;
l_mut_90 = l_108;
let l_109 = l_107 - u32(1);
let l_110 = u32(1) << l_109;
let l_111 = l_105 & l_110;
let l_112 = l_111 != u32(0);
let l_113 = u32(3) * l_110;
let l_114 = l_113 - u32(1);
let l_115 = l_105 & l_114;
let l_116 = l_115 != u32(0);
let l_117 = l_112 && l_116;
if l_117 {
l_mut_90 = l_mut_90 + u32(1);
}
let l_118 = l_85 | l_mut_90;
l_mut_88 = l_118;
}
} else {
let l_119 = u32(l_99);
let l_120 = l_119 << u32(10);
let l_121 = l_87 >> u32(13);
let l_122 = l_85 | l_120;
let l_123 = l_122 | l_121;
l_mut_88 = l_123;
let l_124 = l_87 & u32(4096);
let l_125 = l_124 != u32(0);
let l_126 = l_87 & u32(12287);
let l_127 = l_126 != u32(0);
let l_128 = l_125 && l_127;
if l_128 {
l_mut_88 = l_mut_88 + u32(1);
}
}
}
}
l_mut_42 = l_mut_88;
let l_129 = u32(0) * u32(16);
let l_130 = u32(65535) << l_129;
let l_131 = ~l_130;
let l_132 = l_mut_7 & l_131;
let l_133 = l_mut_42 & u32(65535);
let l_134 = l_133 << l_129;
let l_135 = l_132 | l_134;
l_mut_7 = l_135;
}
let l_136 = l_5 * u32(2);
let l_137 = l_136 + u32(1);
let l_138 = l_137 >= info.scalars_u32[0];
let l_139 = l_137 < l_1;
let l_140 = l_138 && l_139;
if l_140 {
let l_141 = l_137 - info.scalars_u32[0];
let l_142 = info.scalars_u32[2] + l_141;
let l_143 = l_142 / u32(2);
let l_282 = info.static_meta[u32(2)];
let l_283 = l_282 * u32(1);
let l_284 = l_143 < l_283;
let l_285 = l_283 - u32(1);
let l_286 = min(l_143, l_285);
let l_287 = buffer_2_global[l_286];
let l_288 = select(u32(0), l_287, l_284);
let l_144 = l_288;
let l_145 = l_142 % u32(2);
let l_146 = l_145 * u32(16);
let l_147 = l_144 >> l_146;
let l_148 = l_147 & u32(65535);
l_mut_49 = f32(0.0);
let l_149 = info.scalars_u32[1] + l_141;
let l_150 = l_149 / u32(2);
let l_289 = info.static_meta[u32(1)];
let l_290 = l_289 * u32(1);
let l_291 = l_150 < l_290;
let l_292 = l_290 - u32(1);
let l_293 = min(l_150, l_292);
let l_294 = buffer_1_global[l_293];
let l_295 = select(u32(0), l_294, l_291);
let l_151 = l_295;
let l_152 = l_149 % u32(2);
let l_153 = l_152 * u32(16);
let l_154 = l_151 >> l_153;
let l_155 = l_154 & u32(65535);
let l_156 = l_155 << u32(16);
let l_157 = bitcast<f32>(l_156);
l_mut_31 = l_157;
let l_158 = l_155 & u32(32768);
let l_159 = l_158 << u32(16);
let l_160 = l_155 >> u32(10);
let l_161 = l_160 & u32(31);
let l_162 = l_155 & u32(1023);
let l_163 = l_161 + u32(112);
let l_164 = l_163 << u32(23);
let l_165 = l_159 | l_164;
let l_166 = l_162 << u32(13);
let l_167 = l_165 | l_166;
l_mut_90 = l_167;
let l_168 = l_161 == u32(31);
if l_168 {
let l_169 = l_159 | u32(2139095040);
let l_170 = l_162 << u32(13);
let l_171 = l_169 | l_170;
l_mut_90 = l_171;
let l_172 = l_162 != u32(0);
if l_172 {
l_mut_90 = l_mut_90 | u32(4194304);
}
}
let l_173 = bitcast<f32>(l_mut_90);
l_mut_21 = l_173;
let l_174 = l_161 == u32(0);
if l_174 {
let l_175 = f32(l_162);
let l_176 = l_175 * f32(5.960464477539063e-8);
l_mut_21 = l_176;
let l_177 = l_159 != u32(0);
if l_177 {
let l_178 = -l_176;
l_mut_21 = l_178;
}
let l_179 = l_162 == u32(0);
if l_179 {
let l_180 = bitcast<f32>(l_159);
l_mut_21 = l_180;
}
}
l_mut_31 = l_mut_21;
l_mut_49 = l_mut_31;
let l_181 = l_148 << u32(16);
let l_182 = bitcast<f32>(l_181);
l_mut_31 = l_182;
let l_183 = l_148 & u32(32768);
let l_184 = l_183 << u32(16);
let l_185 = l_148 >> u32(10);
let l_186 = l_185 & u32(31);
let l_187 = l_148 & u32(1023);
let l_188 = l_186 + u32(112);
let l_189 = l_188 << u32(23);
let l_190 = l_184 | l_189;
let l_191 = l_187 << u32(13);
let l_192 = l_190 | l_191;
l_mut_90 = l_192;
let l_193 = l_186 == u32(31);
if l_193 {
let l_194 = l_184 | u32(2139095040);
let l_195 = l_187 << u32(13);
let l_196 = l_194 | l_195;
l_mut_90 = l_196;
let l_197 = l_187 != u32(0);
if l_197 {
l_mut_90 = l_mut_90 | u32(4194304);
}
}
let l_198 = bitcast<f32>(l_mut_90);
l_mut_21 = l_198;
let l_199 = l_186 == u32(0);
if l_199 {
let l_200 = f32(l_187);
let l_201 = l_200 * f32(5.960464477539063e-8);
l_mut_21 = l_201;
let l_202 = l_184 != u32(0);
if l_202 {
let l_203 = -l_201;
l_mut_21 = l_203;
}
let l_204 = l_187 == u32(0);
if l_204 {
let l_205 = bitcast<f32>(l_184);
l_mut_21 = l_205;
}
}
l_mut_31 = l_mut_21;
l_mut_21 = l_mut_49;
let l_206 = l_mut_49 + l_mut_31;
l_mut_21 = l_206;
l_mut_90 = u32(0);
let l_207 = bitcast<u32>(l_mut_21);
let l_208 = l_207 & u32(2147483648);
let l_209 = l_208 >> u32(16);
let l_210 = l_207 & u32(2139095040);
let l_211 = l_207 & u32(8388607);
l_mut_88 = u32(0);
let l_212 = l_210 == u32(2139095040);
if l_212 {
l_mut_42 = u32(0);
let l_213 = l_211 != u32(0);
if l_213 {
l_mut_42 = u32(512);
}
let l_214 = l_209 | u32(31744);
let l_215 = l_214 | l_mut_42;
let l_216 = l_211 >> u32(13);
let l_217 = l_215 | l_216;
l_mut_88 = l_217;
} else {
let l_218 = l_210 >> u32(23);
let l_219 = i32(l_218);
let l_220 = l_219 - i32(127);
let l_221 = l_220 + i32(15);
let l_222 = l_221 >= i32(31);
if l_222 {
let l_223 = l_209 | u32(31744);
l_mut_88 = l_223;
} else {
let l_224 = l_221 <= i32(0);
if l_224 {
let l_225 = i32(14) - l_221;
let l_226 = l_225 > i32(24);
if l_226 {
l_mut_88 = l_209;
} else {
let l_227 = l_211 | u32(8388608);
let l_228 = i32(14) - l_221;
let l_229 = u32(l_228);
let l_230 = l_227 >> l_229;
l_mut_42 = l_230;
let l_231 = l_229 - u32(1);
let l_232 = u32(1) << l_231;
let l_233 = l_227 & l_232;
let l_234 = l_233 != u32(0);
let l_235 = u32(3) * l_232;
let l_236 = l_235 - u32(1);
let l_237 = l_227 & l_236;
let l_238 = l_237 != u32(0);
let l_239 = l_234 && l_238;
if l_239 {
l_mut_42 = l_mut_42 + u32(1);
}
let l_240 = l_209 | l_mut_42;
l_mut_88 = l_240;
}
} else {
let l_241 = u32(l_221);
let l_242 = l_241 << u32(10);
let l_243 = l_211 >> u32(13);
let l_244 = l_209 | l_242;
let l_245 = l_244 | l_243;
l_mut_88 = l_245;
let l_246 = l_211 & u32(4096);
let l_247 = l_246 != u32(0);
let l_248 = l_211 & u32(12287);
let l_249 = l_248 != u32(0);
let l_250 = l_247 && l_249;
if l_250 {
l_mut_88 = l_mut_88 + u32(1);
}
}
}
}
l_mut_90 = l_mut_88;
let l_251 = u32(1) * u32(16);
let l_252 = u32(65535) << l_251;
let l_253 = ~l_252;
let l_254 = l_mut_7 & l_253;
let l_255 = l_mut_90 & u32(65535);
let l_256 = l_255 << l_251;
let l_257 = l_254 | l_256;
l_mut_7 = l_257;
}
let l_265 = info.static_meta[u32(0)];
let l_266 = l_265 * u32(1);
let l_267 = l_5 < l_266;
if l_267 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
