// reduce_packed_f16_min_last: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_57: f32;
var l_mut_67: u32;
var l_mut_69: u32;
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
let l_215 = info.static_meta[u32(0)];
let l_216 = l_215 * u32(1);
let l_217 = l_5 < l_216;
let l_218 = l_216 - u32(1);
let l_219 = min(l_5, l_218);
let l_220 = buffer_0_global[l_219];
let l_221 = select(u32(0), l_220, l_217);
let l_6 = l_221;
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
let l_225 = info.static_meta[u32(2)];
let l_226 = l_225 * u32(1);
let l_227 = l_15 < l_226;
let l_228 = l_226 - u32(1);
let l_229 = min(l_15, l_228);
let l_230 = buffer_2_global[l_229];
let l_231 = select(u32(0), l_230, l_227);
let l_16 = l_231;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_232 = info.static_meta[u32(3)];
let l_233 = l_232 * u32(1);
let l_234 = l_13 < l_233;
let l_235 = l_233 - u32(1);
let l_236 = min(l_13, l_235);
let l_237 = buffer_3_global[l_236];
let l_238 = select(f32(0.0), l_237, l_234);
let l_22 = l_238;
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
let l_51 = l_mut_25 < l_mut_21;
if l_51 {
l_mut_43 = l_mut_25;
}
let l_52 = l_mut_21 < l_mut_25;
let l_53 = !l_52;
let l_54 = l_mut_25 < l_mut_21;
let l_55 = !l_54;
let l_56 = l_53 && l_55;
if l_56 {
l_mut_57 = l_mut_21;
let l_58 = bitcast<u32>(l_mut_21);
let l_59 = bitcast<u32>(l_mut_25);
let l_60 = l_58 | l_59;
let l_61 = bitcast<f32>(l_60);
l_mut_57 = l_61;
l_mut_43 = l_mut_57;
}
l_mut_36 = u32(0);
let l_62 = bitcast<u32>(l_mut_43);
let l_63 = l_62 & u32(2147483648);
let l_64 = l_63 >> u32(16);
let l_65 = l_62 & u32(2139095040);
let l_66 = l_62 & u32(8388607);
l_mut_67 = u32(0);
let l_68 = l_65 == u32(2139095040);
if l_68 {
l_mut_69 = u32(0);
let l_70 = l_66 != u32(0);
if l_70 {
l_mut_69 = u32(512);
}
let l_71 = l_64 | u32(31744);
let l_72 = l_71 | l_mut_69;
let l_73 = l_66 >> u32(13);
let l_74 = l_72 | l_73;
l_mut_67 = l_74;
} else {
let l_75 = l_65 >> u32(23);
let l_76 = i32(l_75);
let l_77 = l_76 - i32(127);
let l_78 = l_77 + i32(15);
let l_79 = l_78 >= i32(31);
if l_79 {
let l_80 = l_64 | u32(31744);
l_mut_67 = l_80;
} else {
let l_81 = l_78 <= i32(0);
if l_81 {
let l_82 = i32(14) - l_78;
let l_83 = l_82 > i32(24);
if l_83 {
l_mut_67 = l_64;
} else {
let l_84 = l_66 | u32(8388608);
let l_85 = i32(14) - l_78;
let l_86 = u32(l_85);
let l_87 = l_84 >> l_86;
l_mut_69 = l_87;
let l_88 = l_86 - u32(1);
let l_89 = u32(1) << l_88;
let l_90 = l_84 & l_89;
let l_91 = l_90 != u32(0);
let l_92 = u32(3) * l_89;
let l_93 = l_92 - u32(1);
let l_94 = l_84 & l_93;
let l_95 = l_94 != u32(0);
let l_96 = l_91 && l_95;
if l_96 {
l_mut_69 = l_mut_69 + u32(1);
}
let l_97 = l_64 | l_mut_69;
l_mut_67 = l_97;
}
} else {
let l_98 = u32(l_78);
let l_99 = l_98 << u32(10);
let l_100 = l_66 >> u32(13);
let l_101 = l_64 | l_99;
let l_102 = l_101 | l_100;
l_mut_67 = l_102;
let l_103 = l_66 & u32(4096);
let l_104 = l_103 != u32(0);
let l_105 = l_66 & u32(12287);
let l_106 = l_105 != u32(0);
let l_107 = l_104 && l_106;
if l_107 {
l_mut_67 = l_mut_67 + u32(1);
}
}
}
}
l_mut_36 = l_mut_67;
let l_108 = u32(0) * u32(16);
let l_109 = u32(65535) << l_108;
let l_110 = ~l_109;
let l_111 = l_mut_7 & l_110;
let l_112 = l_mut_36 & u32(65535);
let l_113 = l_112 << l_108;
let l_114 = l_111 | l_113;
l_mut_7 = l_114;
}
let l_115 = l_5 * u32(2);
let l_116 = l_115 + u32(1);
let l_117 = l_116 >= info.scalars_u32[0];
let l_118 = l_116 < l_1;
let l_119 = l_117 && l_118;
if l_119 {
let l_120 = l_116 - info.scalars_u32[0];
let l_121 = info.scalars_u32[2] + l_120;
let l_122 = l_121 / u32(2);
let l_239 = info.static_meta[u32(2)];
let l_240 = l_239 * u32(1);
let l_241 = l_122 < l_240;
let l_242 = l_240 - u32(1);
let l_243 = min(l_122, l_242);
let l_244 = buffer_2_global[l_243];
let l_245 = select(u32(0), l_244, l_241);
let l_123 = l_245;
let l_124 = l_121 % u32(2);
let l_125 = l_124 * u32(16);
let l_126 = l_123 >> l_125;
let l_127 = l_126 & u32(65535);
l_mut_57 = f32(0.0);
let l_246 = info.static_meta[u32(3)];
let l_247 = l_246 * u32(1);
let l_248 = l_120 < l_247;
let l_249 = l_247 - u32(1);
let l_250 = min(l_120, l_249);
let l_251 = buffer_3_global[l_250];
let l_252 = select(f32(0.0), l_251, l_248);
let l_128 = l_252;
l_mut_57 = l_128;
let l_129 = l_127 << u32(16);
let l_130 = bitcast<f32>(l_129);
l_mut_43 = l_130;
let l_131 = l_127 & u32(32768);
let l_132 = l_131 << u32(16);
let l_133 = l_127 >> u32(10);
let l_134 = l_133 & u32(31);
let l_135 = l_127 & u32(1023);
let l_136 = l_134 + u32(112);
let l_137 = l_136 << u32(23);
let l_138 = l_132 | l_137;
let l_139 = l_135 << u32(13);
let l_140 = l_138 | l_139;
l_mut_69 = l_140;
let l_141 = l_134 == u32(31);
if l_141 {
let l_142 = l_132 | u32(2139095040);
let l_143 = l_135 << u32(13);
let l_144 = l_142 | l_143;
l_mut_69 = l_144;
let l_145 = l_135 != u32(0);
if l_145 {
l_mut_69 = l_mut_69 | u32(4194304);
}
}
let l_146 = bitcast<f32>(l_mut_69);
l_mut_25 = l_146;
let l_147 = l_134 == u32(0);
if l_147 {
let l_148 = f32(l_135);
let l_149 = l_148 * f32(5.960464477539063e-8);
l_mut_25 = l_149;
let l_150 = l_132 != u32(0);
if l_150 {
let l_151 = -l_149;
l_mut_25 = l_151;
}
let l_152 = l_135 == u32(0);
if l_152 {
let l_153 = bitcast<f32>(l_132);
l_mut_25 = l_153;
}
}
l_mut_43 = l_mut_25;
l_mut_25 = l_mut_57;
let l_154 = l_mut_43 < l_mut_57;
if l_154 {
l_mut_25 = l_mut_43;
}
let l_155 = l_mut_57 < l_mut_43;
let l_156 = !l_155;
let l_157 = l_mut_43 < l_mut_57;
let l_158 = !l_157;
let l_159 = l_156 && l_158;
if l_159 {
l_mut_21 = l_mut_57;
let l_160 = bitcast<u32>(l_mut_57);
let l_161 = bitcast<u32>(l_mut_43);
let l_162 = l_160 | l_161;
let l_163 = bitcast<f32>(l_162);
l_mut_21 = l_163;
l_mut_25 = l_mut_21;
}
l_mut_69 = u32(0);
let l_164 = bitcast<u32>(l_mut_25);
let l_165 = l_164 & u32(2147483648);
let l_166 = l_165 >> u32(16);
let l_167 = l_164 & u32(2139095040);
let l_168 = l_164 & u32(8388607);
l_mut_67 = u32(0);
let l_169 = l_167 == u32(2139095040);
if l_169 {
l_mut_36 = u32(0);
let l_170 = l_168 != u32(0);
if l_170 {
l_mut_36 = u32(512);
}
let l_171 = l_166 | u32(31744);
let l_172 = l_171 | l_mut_36;
let l_173 = l_168 >> u32(13);
let l_174 = l_172 | l_173;
l_mut_67 = l_174;
} else {
let l_175 = l_167 >> u32(23);
let l_176 = i32(l_175);
let l_177 = l_176 - i32(127);
let l_178 = l_177 + i32(15);
let l_179 = l_178 >= i32(31);
if l_179 {
let l_180 = l_166 | u32(31744);
l_mut_67 = l_180;
} else {
let l_181 = l_178 <= i32(0);
if l_181 {
let l_182 = i32(14) - l_178;
let l_183 = l_182 > i32(24);
if l_183 {
l_mut_67 = l_166;
} else {
let l_184 = l_168 | u32(8388608);
let l_185 = i32(14) - l_178;
let l_186 = u32(l_185);
let l_187 = l_184 >> l_186;
l_mut_36 = l_187;
let l_188 = l_186 - u32(1);
let l_189 = u32(1) << l_188;
let l_190 = l_184 & l_189;
let l_191 = l_190 != u32(0);
let l_192 = u32(3) * l_189;
let l_193 = l_192 - u32(1);
let l_194 = l_184 & l_193;
let l_195 = l_194 != u32(0);
let l_196 = l_191 && l_195;
if l_196 {
l_mut_36 = l_mut_36 + u32(1);
}
let l_197 = l_166 | l_mut_36;
l_mut_67 = l_197;
}
} else {
let l_198 = u32(l_178);
let l_199 = l_198 << u32(10);
let l_200 = l_168 >> u32(13);
let l_201 = l_166 | l_199;
let l_202 = l_201 | l_200;
l_mut_67 = l_202;
let l_203 = l_168 & u32(4096);
let l_204 = l_203 != u32(0);
let l_205 = l_168 & u32(12287);
let l_206 = l_205 != u32(0);
let l_207 = l_204 && l_206;
if l_207 {
l_mut_67 = l_mut_67 + u32(1);
}
}
}
}
l_mut_69 = l_mut_67;
let l_208 = u32(1) * u32(16);
let l_209 = u32(65535) << l_208;
let l_210 = ~l_209;
let l_211 = l_mut_7 & l_210;
let l_212 = l_mut_69 & u32(65535);
let l_213 = l_212 << l_208;
let l_214 = l_211 | l_213;
l_mut_7 = l_214;
}
let l_222 = info.static_meta[u32(0)];
let l_223 = l_222 * u32(1);
let l_224 = l_5 < l_223;
if l_224 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
