// reduce_packed_f16_sum_last: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_57: u32;
var l_mut_59: u32;
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
let l_196 = info.static_meta[u32(0)];
let l_197 = l_196 * u32(1);
let l_198 = l_5 < l_197;
let l_199 = l_197 - u32(1);
let l_200 = min(l_5, l_199);
let l_201 = buffer_0_global[l_200];
let l_202 = select(u32(0), l_201, l_198);
let l_6 = l_202;
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
let l_206 = info.static_meta[u32(2)];
let l_207 = l_206 * u32(1);
let l_208 = l_15 < l_207;
let l_209 = l_207 - u32(1);
let l_210 = min(l_15, l_209);
let l_211 = buffer_2_global[l_210];
let l_212 = select(u32(0), l_211, l_208);
let l_16 = l_212;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_213 = info.static_meta[u32(3)];
let l_214 = l_213 * u32(1);
let l_215 = l_13 < l_214;
let l_216 = l_214 - u32(1);
let l_217 = min(l_13, l_216);
let l_218 = buffer_3_global[l_217];
let l_219 = select(f32(0.0), l_218, l_215);
let l_22 = l_219;
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
let l_51 = l_mut_21 + l_mut_25;
l_mut_43 = l_51;
l_mut_36 = u32(0);
let l_52 = bitcast<u32>(l_mut_43);
let l_53 = l_52 & u32(2147483648);
let l_54 = l_53 >> u32(16);
let l_55 = l_52 & u32(2139095040);
let l_56 = l_52 & u32(8388607);
l_mut_57 = u32(0);
let l_58 = l_55 == u32(2139095040);
if l_58 {
l_mut_59 = u32(0);
let l_60 = l_56 != u32(0);
if l_60 {
l_mut_59 = u32(512);
}
let l_61 = l_54 | u32(31744);
let l_62 = l_61 | l_mut_59;
let l_63 = l_56 >> u32(13);
let l_64 = l_62 | l_63;
l_mut_57 = l_64;
} else {
let l_65 = l_55 >> u32(23);
let l_66 = i32(l_65);
let l_67 = l_66 - i32(127);
let l_68 = l_67 + i32(15);
let l_69 = l_68 >= i32(31);
if l_69 {
let l_70 = l_54 | u32(31744);
l_mut_57 = l_70;
} else {
let l_71 = l_68 <= i32(0);
if l_71 {
let l_72 = i32(14) - l_68;
let l_73 = l_72 > i32(24);
if l_73 {
l_mut_57 = l_54;
} else {
let l_74 = l_56 | u32(8388608);
let l_75 = i32(14) - l_68;
let l_76 = u32(l_75);
let l_77 = l_74 >> l_76;
l_mut_59 = l_77;
let l_78 = l_76 - u32(1);
let l_79 = u32(1) << l_78;
let l_80 = l_74 & l_79;
let l_81 = l_80 != u32(0);
let l_82 = u32(3) * l_79;
let l_83 = l_82 - u32(1);
let l_84 = l_74 & l_83;
let l_85 = l_84 != u32(0);
let l_86 = l_81 && l_85;
if l_86 {
l_mut_59 = l_mut_59 + u32(1);
}
let l_87 = l_54 | l_mut_59;
l_mut_57 = l_87;
}
} else {
let l_88 = u32(l_68);
let l_89 = l_88 << u32(10);
let l_90 = l_56 >> u32(13);
let l_91 = l_54 | l_89;
let l_92 = l_91 | l_90;
l_mut_57 = l_92;
let l_93 = l_56 & u32(4096);
let l_94 = l_93 != u32(0);
let l_95 = l_56 & u32(12287);
let l_96 = l_95 != u32(0);
let l_97 = l_94 && l_96;
if l_97 {
l_mut_57 = l_mut_57 + u32(1);
}
}
}
}
l_mut_36 = l_mut_57;
let l_98 = u32(0) * u32(16);
let l_99 = u32(65535) << l_98;
let l_100 = ~l_99;
let l_101 = l_mut_7 & l_100;
let l_102 = l_mut_36 & u32(65535);
let l_103 = l_102 << l_98;
let l_104 = l_101 | l_103;
l_mut_7 = l_104;
}
let l_105 = l_5 * u32(2);
let l_106 = l_105 + u32(1);
let l_107 = l_106 >= info.scalars_u32[0];
let l_108 = l_106 < l_1;
let l_109 = l_107 && l_108;
if l_109 {
let l_110 = l_106 - info.scalars_u32[0];
let l_111 = info.scalars_u32[2] + l_110;
let l_112 = l_111 / u32(2);
let l_220 = info.static_meta[u32(2)];
let l_221 = l_220 * u32(1);
let l_222 = l_112 < l_221;
let l_223 = l_221 - u32(1);
let l_224 = min(l_112, l_223);
let l_225 = buffer_2_global[l_224];
let l_226 = select(u32(0), l_225, l_222);
let l_113 = l_226;
let l_114 = l_111 % u32(2);
let l_115 = l_114 * u32(16);
let l_116 = l_113 >> l_115;
let l_117 = l_116 & u32(65535);
l_mut_43 = f32(0.0);
let l_227 = info.static_meta[u32(3)];
let l_228 = l_227 * u32(1);
let l_229 = l_110 < l_228;
let l_230 = l_228 - u32(1);
let l_231 = min(l_110, l_230);
let l_232 = buffer_3_global[l_231];
let l_233 = select(f32(0.0), l_232, l_229);
let l_118 = l_233;
l_mut_43 = l_118;
let l_119 = l_117 << u32(16);
let l_120 = bitcast<f32>(l_119);
l_mut_25 = l_120;
let l_121 = l_117 & u32(32768);
let l_122 = l_121 << u32(16);
let l_123 = l_117 >> u32(10);
let l_124 = l_123 & u32(31);
let l_125 = l_117 & u32(1023);
let l_126 = l_124 + u32(112);
let l_127 = l_126 << u32(23);
let l_128 = l_122 | l_127;
let l_129 = l_125 << u32(13);
let l_130 = l_128 | l_129;
l_mut_59 = l_130;
let l_131 = l_124 == u32(31);
if l_131 {
let l_132 = l_122 | u32(2139095040);
let l_133 = l_125 << u32(13);
let l_134 = l_132 | l_133;
l_mut_59 = l_134;
let l_135 = l_125 != u32(0);
if l_135 {
l_mut_59 = l_mut_59 | u32(4194304);
}
}
let l_136 = bitcast<f32>(l_mut_59);
l_mut_21 = l_136;
let l_137 = l_124 == u32(0);
if l_137 {
let l_138 = f32(l_125);
let l_139 = l_138 * f32(5.960464477539063e-8);
l_mut_21 = l_139;
let l_140 = l_122 != u32(0);
if l_140 {
let l_141 = -l_139;
l_mut_21 = l_141;
}
let l_142 = l_125 == u32(0);
if l_142 {
let l_143 = bitcast<f32>(l_122);
l_mut_21 = l_143;
}
}
l_mut_25 = l_mut_21;
l_mut_21 = l_mut_43;
let l_144 = l_mut_43 + l_mut_25;
l_mut_21 = l_144;
l_mut_59 = u32(0);
let l_145 = bitcast<u32>(l_mut_21);
let l_146 = l_145 & u32(2147483648);
let l_147 = l_146 >> u32(16);
let l_148 = l_145 & u32(2139095040);
let l_149 = l_145 & u32(8388607);
l_mut_57 = u32(0);
let l_150 = l_148 == u32(2139095040);
if l_150 {
l_mut_36 = u32(0);
let l_151 = l_149 != u32(0);
if l_151 {
l_mut_36 = u32(512);
}
let l_152 = l_147 | u32(31744);
let l_153 = l_152 | l_mut_36;
let l_154 = l_149 >> u32(13);
let l_155 = l_153 | l_154;
l_mut_57 = l_155;
} else {
let l_156 = l_148 >> u32(23);
let l_157 = i32(l_156);
let l_158 = l_157 - i32(127);
let l_159 = l_158 + i32(15);
let l_160 = l_159 >= i32(31);
if l_160 {
let l_161 = l_147 | u32(31744);
l_mut_57 = l_161;
} else {
let l_162 = l_159 <= i32(0);
if l_162 {
let l_163 = i32(14) - l_159;
let l_164 = l_163 > i32(24);
if l_164 {
l_mut_57 = l_147;
} else {
let l_165 = l_149 | u32(8388608);
let l_166 = i32(14) - l_159;
let l_167 = u32(l_166);
let l_168 = l_165 >> l_167;
l_mut_36 = l_168;
let l_169 = l_167 - u32(1);
let l_170 = u32(1) << l_169;
let l_171 = l_165 & l_170;
let l_172 = l_171 != u32(0);
let l_173 = u32(3) * l_170;
let l_174 = l_173 - u32(1);
let l_175 = l_165 & l_174;
let l_176 = l_175 != u32(0);
let l_177 = l_172 && l_176;
if l_177 {
l_mut_36 = l_mut_36 + u32(1);
}
let l_178 = l_147 | l_mut_36;
l_mut_57 = l_178;
}
} else {
let l_179 = u32(l_159);
let l_180 = l_179 << u32(10);
let l_181 = l_149 >> u32(13);
let l_182 = l_147 | l_180;
let l_183 = l_182 | l_181;
l_mut_57 = l_183;
let l_184 = l_149 & u32(4096);
let l_185 = l_184 != u32(0);
let l_186 = l_149 & u32(12287);
let l_187 = l_186 != u32(0);
let l_188 = l_185 && l_187;
if l_188 {
l_mut_57 = l_mut_57 + u32(1);
}
}
}
}
l_mut_59 = l_mut_57;
let l_189 = u32(1) * u32(16);
let l_190 = u32(65535) << l_189;
let l_191 = ~l_190;
let l_192 = l_mut_7 & l_191;
let l_193 = l_mut_59 & u32(65535);
let l_194 = l_193 << l_189;
let l_195 = l_192 | l_194;
l_mut_7 = l_195;
}
let l_203 = info.static_meta[u32(0)];
let l_204 = l_203 * u32(1);
let l_205 = l_5 < l_204;
if l_205 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
