// reduce_packed_f16_max_direct: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_103: u32;
var l_mut_105: u32;
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
let l_287 = info.static_meta[u32(0)];
let l_288 = l_287 * u32(1);
let l_289 = l_5 < l_288;
let l_290 = l_288 - u32(1);
let l_291 = min(l_5, l_290);
let l_292 = buffer_0_global[l_291];
let l_293 = select(u32(0), l_292, l_289);
let l_6 = l_293;
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
let l_297 = info.static_meta[u32(2)];
let l_298 = l_297 * u32(1);
let l_299 = l_15 < l_298;
let l_300 = l_298 - u32(1);
let l_301 = min(l_15, l_300);
let l_302 = buffer_2_global[l_301];
let l_303 = select(u32(0), l_302, l_299);
let l_16 = l_303;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_22 = info.scalars_u32[1] + l_13;
let l_23 = l_22 / u32(2);
let l_304 = info.static_meta[u32(1)];
let l_305 = l_304 * u32(1);
let l_306 = l_23 < l_305;
let l_307 = l_305 - u32(1);
let l_308 = min(l_23, l_307);
let l_309 = buffer_1_global[l_308];
let l_310 = select(u32(0), l_309, l_306);
let l_24 = l_310;
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
l_mut_42 = u32(0);
let l_98 = bitcast<u32>(l_mut_31);
let l_99 = l_98 & u32(2147483648);
let l_100 = l_99 >> u32(16);
let l_101 = l_98 & u32(2139095040);
let l_102 = l_98 & u32(8388607);
l_mut_103 = u32(0);
let l_104 = l_101 == u32(2139095040);
if l_104 {
l_mut_105 = u32(0);
let l_106 = l_102 != u32(0);
if l_106 {
l_mut_105 = u32(512);
}
let l_107 = l_100 | u32(31744);
let l_108 = l_107 | l_mut_105;
let l_109 = l_102 >> u32(13);
let l_110 = l_108 | l_109;
l_mut_103 = l_110;
} else {
let l_111 = l_101 >> u32(23);
let l_112 = i32(l_111);
let l_113 = l_112 - i32(127);
let l_114 = l_113 + i32(15);
let l_115 = l_114 >= i32(31);
if l_115 {
let l_116 = l_100 | u32(31744);
l_mut_103 = l_116;
} else {
let l_117 = l_114 <= i32(0);
if l_117 {
let l_118 = i32(14) - l_114;
let l_119 = l_118 > i32(24);
if l_119 {
l_mut_103 = l_100;
} else {
let l_120 = l_102 | u32(8388608);
let l_121 = i32(14) - l_114;
let l_122 = u32(l_121);
let l_123 = l_120 >> l_122;
l_mut_105 = l_123;
let l_124 = l_122 - u32(1);
let l_125 = u32(1) << l_124;
let l_126 = l_120 & l_125;
let l_127 = l_126 != u32(0);
let l_128 = u32(3) * l_125;
let l_129 = l_128 - u32(1);
let l_130 = l_120 & l_129;
let l_131 = l_130 != u32(0);
let l_132 = l_127 && l_131;
if l_132 {
l_mut_105 = l_mut_105 + u32(1);
}
let l_133 = l_100 | l_mut_105;
l_mut_103 = l_133;
}
} else {
let l_134 = u32(l_114);
let l_135 = l_134 << u32(10);
let l_136 = l_102 >> u32(13);
let l_137 = l_100 | l_135;
let l_138 = l_137 | l_136;
l_mut_103 = l_138;
let l_139 = l_102 & u32(4096);
let l_140 = l_139 != u32(0);
let l_141 = l_102 & u32(12287);
let l_142 = l_141 != u32(0);
let l_143 = l_140 && l_142;
if l_143 {
l_mut_103 = l_mut_103 + u32(1);
}
}
}
}
l_mut_42 = l_mut_103;
let l_144 = u32(0) * u32(16);
let l_145 = u32(65535) << l_144;
let l_146 = ~l_145;
let l_147 = l_mut_7 & l_146;
let l_148 = l_mut_42 & u32(65535);
let l_149 = l_148 << l_144;
let l_150 = l_147 | l_149;
l_mut_7 = l_150;
}
let l_151 = l_5 * u32(2);
let l_152 = l_151 + u32(1);
let l_153 = l_152 >= info.scalars_u32[0];
let l_154 = l_152 < l_1;
let l_155 = l_153 && l_154;
if l_155 {
let l_156 = l_152 - info.scalars_u32[0];
let l_157 = info.scalars_u32[2] + l_156;
let l_158 = l_157 / u32(2);
let l_311 = info.static_meta[u32(2)];
let l_312 = l_311 * u32(1);
let l_313 = l_158 < l_312;
let l_314 = l_312 - u32(1);
let l_315 = min(l_158, l_314);
let l_316 = buffer_2_global[l_315];
let l_317 = select(u32(0), l_316, l_313);
let l_159 = l_317;
let l_160 = l_157 % u32(2);
let l_161 = l_160 * u32(16);
let l_162 = l_159 >> l_161;
let l_163 = l_162 & u32(65535);
l_mut_89 = f32(0.0);
let l_164 = info.scalars_u32[1] + l_156;
let l_165 = l_164 / u32(2);
let l_318 = info.static_meta[u32(1)];
let l_319 = l_318 * u32(1);
let l_320 = l_165 < l_319;
let l_321 = l_319 - u32(1);
let l_322 = min(l_165, l_321);
let l_323 = buffer_1_global[l_322];
let l_324 = select(u32(0), l_323, l_320);
let l_166 = l_324;
let l_167 = l_164 % u32(2);
let l_168 = l_167 * u32(16);
let l_169 = l_166 >> l_168;
let l_170 = l_169 & u32(65535);
let l_171 = l_170 << u32(16);
let l_172 = bitcast<f32>(l_171);
l_mut_49 = l_172;
let l_173 = l_170 & u32(32768);
let l_174 = l_173 << u32(16);
let l_175 = l_170 >> u32(10);
let l_176 = l_175 & u32(31);
let l_177 = l_170 & u32(1023);
let l_178 = l_176 + u32(112);
let l_179 = l_178 << u32(23);
let l_180 = l_174 | l_179;
let l_181 = l_177 << u32(13);
let l_182 = l_180 | l_181;
l_mut_105 = l_182;
let l_183 = l_176 == u32(31);
if l_183 {
let l_184 = l_174 | u32(2139095040);
let l_185 = l_177 << u32(13);
let l_186 = l_184 | l_185;
l_mut_105 = l_186;
let l_187 = l_177 != u32(0);
if l_187 {
l_mut_105 = l_mut_105 | u32(4194304);
}
}
let l_188 = bitcast<f32>(l_mut_105);
l_mut_31 = l_188;
let l_189 = l_176 == u32(0);
if l_189 {
let l_190 = f32(l_177);
let l_191 = l_190 * f32(5.960464477539063e-8);
l_mut_31 = l_191;
let l_192 = l_174 != u32(0);
if l_192 {
let l_193 = -l_191;
l_mut_31 = l_193;
}
let l_194 = l_177 == u32(0);
if l_194 {
let l_195 = bitcast<f32>(l_174);
l_mut_31 = l_195;
}
}
l_mut_49 = l_mut_31;
l_mut_89 = l_mut_49;
let l_196 = l_163 << u32(16);
let l_197 = bitcast<f32>(l_196);
l_mut_49 = l_197;
let l_198 = l_163 & u32(32768);
let l_199 = l_198 << u32(16);
let l_200 = l_163 >> u32(10);
let l_201 = l_200 & u32(31);
let l_202 = l_163 & u32(1023);
let l_203 = l_201 + u32(112);
let l_204 = l_203 << u32(23);
let l_205 = l_199 | l_204;
let l_206 = l_202 << u32(13);
let l_207 = l_205 | l_206;
l_mut_105 = l_207;
let l_208 = l_201 == u32(31);
if l_208 {
let l_209 = l_199 | u32(2139095040);
let l_210 = l_202 << u32(13);
let l_211 = l_209 | l_210;
l_mut_105 = l_211;
let l_212 = l_202 != u32(0);
if l_212 {
l_mut_105 = l_mut_105 | u32(4194304);
}
}
let l_213 = bitcast<f32>(l_mut_105);
l_mut_31 = l_213;
let l_214 = l_201 == u32(0);
if l_214 {
let l_215 = f32(l_202);
let l_216 = l_215 * f32(5.960464477539063e-8);
l_mut_31 = l_216;
let l_217 = l_199 != u32(0);
if l_217 {
let l_218 = -l_216;
l_mut_31 = l_218;
}
let l_219 = l_202 == u32(0);
if l_219 {
let l_220 = bitcast<f32>(l_199);
l_mut_31 = l_220;
}
}
l_mut_49 = l_mut_31;
l_mut_31 = l_mut_89;
let l_221 = l_mut_49 > l_mut_89;
if l_221 {
l_mut_31 = l_mut_49;
}
let l_222 = l_mut_89 > l_mut_49;
let l_223 = !l_222;
let l_224 = l_mut_49 > l_mut_89;
let l_225 = !l_224;
let l_226 = l_223 && l_225;
if l_226 {
let l_227 = l_mut_89 == l_mut_49;
if l_227 {
l_mut_21 = l_mut_89;
let l_228 = bitcast<u32>(l_mut_89);
let l_229 = bitcast<u32>(l_mut_49);
let l_230 = l_228 & l_229;
let l_231 = bitcast<f32>(l_230);
l_mut_21 = l_231;
l_mut_31 = l_mut_21;
} else {
l_mut_21 = l_mut_89;
let l_232 = bitcast<u32>(l_mut_89);
let l_233 = bitcast<u32>(l_mut_49);
let l_234 = l_232 | l_233;
let l_235 = bitcast<f32>(l_234);
l_mut_21 = l_235;
l_mut_31 = l_mut_21;
}
}
l_mut_105 = u32(0);
let l_236 = bitcast<u32>(l_mut_31);
let l_237 = l_236 & u32(2147483648);
let l_238 = l_237 >> u32(16);
let l_239 = l_236 & u32(2139095040);
let l_240 = l_236 & u32(8388607);
l_mut_103 = u32(0);
let l_241 = l_239 == u32(2139095040);
if l_241 {
l_mut_42 = u32(0);
let l_242 = l_240 != u32(0);
if l_242 {
l_mut_42 = u32(512);
}
let l_243 = l_238 | u32(31744);
let l_244 = l_243 | l_mut_42;
let l_245 = l_240 >> u32(13);
let l_246 = l_244 | l_245;
l_mut_103 = l_246;
} else {
let l_247 = l_239 >> u32(23);
let l_248 = i32(l_247);
let l_249 = l_248 - i32(127);
let l_250 = l_249 + i32(15);
let l_251 = l_250 >= i32(31);
if l_251 {
let l_252 = l_238 | u32(31744);
l_mut_103 = l_252;
} else {
let l_253 = l_250 <= i32(0);
if l_253 {
let l_254 = i32(14) - l_250;
let l_255 = l_254 > i32(24);
if l_255 {
l_mut_103 = l_238;
} else {
let l_256 = l_240 | u32(8388608);
let l_257 = i32(14) - l_250;
let l_258 = u32(l_257);
let l_259 = l_256 >> l_258;
l_mut_42 = l_259;
let l_260 = l_258 - u32(1);
let l_261 = u32(1) << l_260;
let l_262 = l_256 & l_261;
let l_263 = l_262 != u32(0);
let l_264 = u32(3) * l_261;
let l_265 = l_264 - u32(1);
let l_266 = l_256 & l_265;
let l_267 = l_266 != u32(0);
let l_268 = l_263 && l_267;
if l_268 {
l_mut_42 = l_mut_42 + u32(1);
}
let l_269 = l_238 | l_mut_42;
l_mut_103 = l_269;
}
} else {
let l_270 = u32(l_250);
let l_271 = l_270 << u32(10);
let l_272 = l_240 >> u32(13);
let l_273 = l_238 | l_271;
let l_274 = l_273 | l_272;
l_mut_103 = l_274;
let l_275 = l_240 & u32(4096);
let l_276 = l_275 != u32(0);
let l_277 = l_240 & u32(12287);
let l_278 = l_277 != u32(0);
let l_279 = l_276 && l_278;
if l_279 {
l_mut_103 = l_mut_103 + u32(1);
}
}
}
}
l_mut_105 = l_mut_103;
let l_280 = u32(1) * u32(16);
let l_281 = u32(65535) << l_280;
let l_282 = ~l_281;
let l_283 = l_mut_7 & l_282;
let l_284 = l_mut_105 & u32(65535);
let l_285 = l_284 << l_280;
let l_286 = l_283 | l_285;
l_mut_7 = l_286;
}
let l_294 = info.static_meta[u32(0)];
let l_295 = l_294 * u32(1);
let l_296 = l_5 < l_295;
if l_296 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
