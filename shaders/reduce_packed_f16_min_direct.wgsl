// reduce_packed_f16_min_direct: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_98: u32;
var l_mut_100: u32;
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
let l_277 = info.static_meta[u32(0)];
let l_278 = l_277 * u32(1);
let l_279 = l_5 < l_278;
let l_280 = l_278 - u32(1);
let l_281 = min(l_5, l_280);
let l_282 = buffer_0_global[l_281];
let l_283 = select(u32(0), l_282, l_279);
let l_6 = l_283;
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
let l_287 = info.static_meta[u32(2)];
let l_288 = l_287 * u32(1);
let l_289 = l_15 < l_288;
let l_290 = l_288 - u32(1);
let l_291 = min(l_15, l_290);
let l_292 = buffer_2_global[l_291];
let l_293 = select(u32(0), l_292, l_289);
let l_16 = l_293;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_22 = info.scalars_u32[1] + l_13;
let l_23 = l_22 / u32(2);
let l_294 = info.static_meta[u32(1)];
let l_295 = l_294 * u32(1);
let l_296 = l_23 < l_295;
let l_297 = l_295 - u32(1);
let l_298 = min(l_23, l_297);
let l_299 = buffer_1_global[l_298];
let l_300 = select(u32(0), l_299, l_296);
let l_24 = l_300;
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
l_mut_42 = u32(0);
let l_93 = bitcast<u32>(l_mut_31);
let l_94 = l_93 & u32(2147483648);
let l_95 = l_94 >> u32(16);
let l_96 = l_93 & u32(2139095040);
let l_97 = l_93 & u32(8388607);
l_mut_98 = u32(0);
let l_99 = l_96 == u32(2139095040);
if l_99 {
l_mut_100 = u32(0);
let l_101 = l_97 != u32(0);
if l_101 {
l_mut_100 = u32(512);
}
let l_102 = l_95 | u32(31744);
let l_103 = l_102 | l_mut_100;
let l_104 = l_97 >> u32(13);
let l_105 = l_103 | l_104;
l_mut_98 = l_105;
} else {
let l_106 = l_96 >> u32(23);
let l_107 = i32(l_106);
let l_108 = l_107 - i32(127);
let l_109 = l_108 + i32(15);
let l_110 = l_109 >= i32(31);
if l_110 {
let l_111 = l_95 | u32(31744);
l_mut_98 = l_111;
} else {
let l_112 = l_109 <= i32(0);
if l_112 {
let l_113 = i32(14) - l_109;
let l_114 = l_113 > i32(24);
if l_114 {
l_mut_98 = l_95;
} else {
let l_115 = l_97 | u32(8388608);
let l_116 = i32(14) - l_109;
let l_117 = u32(l_116);
let l_118 = l_115 >> l_117;
l_mut_100 = l_118;
let l_119 = l_117 - u32(1);
let l_120 = u32(1) << l_119;
let l_121 = l_115 & l_120;
let l_122 = l_121 != u32(0);
let l_123 = u32(3) * l_120;
let l_124 = l_123 - u32(1);
let l_125 = l_115 & l_124;
let l_126 = l_125 != u32(0);
let l_127 = l_122 && l_126;
if l_127 {
l_mut_100 = l_mut_100 + u32(1);
}
let l_128 = l_95 | l_mut_100;
l_mut_98 = l_128;
}
} else {
let l_129 = u32(l_109);
let l_130 = l_129 << u32(10);
let l_131 = l_97 >> u32(13);
let l_132 = l_95 | l_130;
let l_133 = l_132 | l_131;
l_mut_98 = l_133;
let l_134 = l_97 & u32(4096);
let l_135 = l_134 != u32(0);
let l_136 = l_97 & u32(12287);
let l_137 = l_136 != u32(0);
let l_138 = l_135 && l_137;
if l_138 {
l_mut_98 = l_mut_98 + u32(1);
}
}
}
}
l_mut_42 = l_mut_98;
let l_139 = u32(0) * u32(16);
let l_140 = u32(65535) << l_139;
let l_141 = ~l_140;
let l_142 = l_mut_7 & l_141;
let l_143 = l_mut_42 & u32(65535);
let l_144 = l_143 << l_139;
let l_145 = l_142 | l_144;
l_mut_7 = l_145;
}
let l_146 = l_5 * u32(2);
let l_147 = l_146 + u32(1);
let l_148 = l_147 >= info.scalars_u32[0];
let l_149 = l_147 < l_1;
let l_150 = l_148 && l_149;
if l_150 {
let l_151 = l_147 - info.scalars_u32[0];
let l_152 = info.scalars_u32[2] + l_151;
let l_153 = l_152 / u32(2);
let l_301 = info.static_meta[u32(2)];
let l_302 = l_301 * u32(1);
let l_303 = l_153 < l_302;
let l_304 = l_302 - u32(1);
let l_305 = min(l_153, l_304);
let l_306 = buffer_2_global[l_305];
let l_307 = select(u32(0), l_306, l_303);
let l_154 = l_307;
let l_155 = l_152 % u32(2);
let l_156 = l_155 * u32(16);
let l_157 = l_154 >> l_156;
let l_158 = l_157 & u32(65535);
l_mut_88 = f32(0.0);
let l_159 = info.scalars_u32[1] + l_151;
let l_160 = l_159 / u32(2);
let l_308 = info.static_meta[u32(1)];
let l_309 = l_308 * u32(1);
let l_310 = l_160 < l_309;
let l_311 = l_309 - u32(1);
let l_312 = min(l_160, l_311);
let l_313 = buffer_1_global[l_312];
let l_314 = select(u32(0), l_313, l_310);
let l_161 = l_314;
let l_162 = l_159 % u32(2);
let l_163 = l_162 * u32(16);
let l_164 = l_161 >> l_163;
let l_165 = l_164 & u32(65535);
let l_166 = l_165 << u32(16);
let l_167 = bitcast<f32>(l_166);
l_mut_49 = l_167;
let l_168 = l_165 & u32(32768);
let l_169 = l_168 << u32(16);
let l_170 = l_165 >> u32(10);
let l_171 = l_170 & u32(31);
let l_172 = l_165 & u32(1023);
let l_173 = l_171 + u32(112);
let l_174 = l_173 << u32(23);
let l_175 = l_169 | l_174;
let l_176 = l_172 << u32(13);
let l_177 = l_175 | l_176;
l_mut_100 = l_177;
let l_178 = l_171 == u32(31);
if l_178 {
let l_179 = l_169 | u32(2139095040);
let l_180 = l_172 << u32(13);
let l_181 = l_179 | l_180;
l_mut_100 = l_181;
let l_182 = l_172 != u32(0);
if l_182 {
l_mut_100 = l_mut_100 | u32(4194304);
}
}
let l_183 = bitcast<f32>(l_mut_100);
l_mut_31 = l_183;
let l_184 = l_171 == u32(0);
if l_184 {
let l_185 = f32(l_172);
let l_186 = l_185 * f32(5.960464477539063e-8);
l_mut_31 = l_186;
let l_187 = l_169 != u32(0);
if l_187 {
let l_188 = -l_186;
l_mut_31 = l_188;
}
let l_189 = l_172 == u32(0);
if l_189 {
let l_190 = bitcast<f32>(l_169);
l_mut_31 = l_190;
}
}
l_mut_49 = l_mut_31;
l_mut_88 = l_mut_49;
let l_191 = l_158 << u32(16);
let l_192 = bitcast<f32>(l_191);
l_mut_49 = l_192;
let l_193 = l_158 & u32(32768);
let l_194 = l_193 << u32(16);
let l_195 = l_158 >> u32(10);
let l_196 = l_195 & u32(31);
let l_197 = l_158 & u32(1023);
let l_198 = l_196 + u32(112);
let l_199 = l_198 << u32(23);
let l_200 = l_194 | l_199;
let l_201 = l_197 << u32(13);
let l_202 = l_200 | l_201;
l_mut_100 = l_202;
let l_203 = l_196 == u32(31);
if l_203 {
let l_204 = l_194 | u32(2139095040);
let l_205 = l_197 << u32(13);
let l_206 = l_204 | l_205;
l_mut_100 = l_206;
let l_207 = l_197 != u32(0);
if l_207 {
l_mut_100 = l_mut_100 | u32(4194304);
}
}
let l_208 = bitcast<f32>(l_mut_100);
l_mut_31 = l_208;
let l_209 = l_196 == u32(0);
if l_209 {
let l_210 = f32(l_197);
let l_211 = l_210 * f32(5.960464477539063e-8);
l_mut_31 = l_211;
let l_212 = l_194 != u32(0);
if l_212 {
let l_213 = -l_211;
l_mut_31 = l_213;
}
let l_214 = l_197 == u32(0);
if l_214 {
let l_215 = bitcast<f32>(l_194);
l_mut_31 = l_215;
}
}
l_mut_49 = l_mut_31;
l_mut_31 = l_mut_88;
let l_216 = l_mut_49 < l_mut_88;
if l_216 {
l_mut_31 = l_mut_49;
}
let l_217 = l_mut_88 < l_mut_49;
let l_218 = !l_217;
let l_219 = l_mut_49 < l_mut_88;
let l_220 = !l_219;
let l_221 = l_218 && l_220;
if l_221 {
l_mut_21 = l_mut_88;
let l_222 = bitcast<u32>(l_mut_88);
let l_223 = bitcast<u32>(l_mut_49);
let l_224 = l_222 | l_223;
let l_225 = bitcast<f32>(l_224);
l_mut_21 = l_225;
l_mut_31 = l_mut_21;
}
l_mut_100 = u32(0);
let l_226 = bitcast<u32>(l_mut_31);
let l_227 = l_226 & u32(2147483648);
let l_228 = l_227 >> u32(16);
let l_229 = l_226 & u32(2139095040);
let l_230 = l_226 & u32(8388607);
l_mut_98 = u32(0);
let l_231 = l_229 == u32(2139095040);
if l_231 {
l_mut_42 = u32(0);
let l_232 = l_230 != u32(0);
if l_232 {
l_mut_42 = u32(512);
}
let l_233 = l_228 | u32(31744);
let l_234 = l_233 | l_mut_42;
let l_235 = l_230 >> u32(13);
let l_236 = l_234 | l_235;
l_mut_98 = l_236;
} else {
let l_237 = l_229 >> u32(23);
let l_238 = i32(l_237);
let l_239 = l_238 - i32(127);
let l_240 = l_239 + i32(15);
let l_241 = l_240 >= i32(31);
if l_241 {
let l_242 = l_228 | u32(31744);
l_mut_98 = l_242;
} else {
let l_243 = l_240 <= i32(0);
if l_243 {
let l_244 = i32(14) - l_240;
let l_245 = l_244 > i32(24);
if l_245 {
l_mut_98 = l_228;
} else {
let l_246 = l_230 | u32(8388608);
let l_247 = i32(14) - l_240;
let l_248 = u32(l_247);
let l_249 = l_246 >> l_248;
l_mut_42 = l_249;
let l_250 = l_248 - u32(1);
let l_251 = u32(1) << l_250;
let l_252 = l_246 & l_251;
let l_253 = l_252 != u32(0);
let l_254 = u32(3) * l_251;
let l_255 = l_254 - u32(1);
let l_256 = l_246 & l_255;
let l_257 = l_256 != u32(0);
let l_258 = l_253 && l_257;
if l_258 {
l_mut_42 = l_mut_42 + u32(1);
}
let l_259 = l_228 | l_mut_42;
l_mut_98 = l_259;
}
} else {
let l_260 = u32(l_240);
let l_261 = l_260 << u32(10);
let l_262 = l_230 >> u32(13);
let l_263 = l_228 | l_261;
let l_264 = l_263 | l_262;
l_mut_98 = l_264;
let l_265 = l_230 & u32(4096);
let l_266 = l_265 != u32(0);
let l_267 = l_230 & u32(12287);
let l_268 = l_267 != u32(0);
let l_269 = l_266 && l_268;
if l_269 {
l_mut_98 = l_mut_98 + u32(1);
}
}
}
}
l_mut_100 = l_mut_98;
let l_270 = u32(1) * u32(16);
let l_271 = u32(65535) << l_270;
let l_272 = ~l_271;
let l_273 = l_mut_7 & l_272;
let l_274 = l_mut_100 & u32(65535);
let l_275 = l_274 << l_270;
let l_276 = l_273 | l_275;
l_mut_7 = l_276;
}
let l_284 = info.static_meta[u32(0)];
let l_285 = l_284 * u32(1);
let l_286 = l_5 < l_285;
if l_286 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
