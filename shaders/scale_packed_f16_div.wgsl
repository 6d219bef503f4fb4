// scale_packed_f16_div: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
// Do not edit; regenerate with `RUCCL_BLESS=1 cargo test -p ruCCL --features test-wgpu --test gpu_core -- shaders`.
@group(0)
@binding(0)
var<storage, read_write> buffer_0_global: array<u32>;

@group(0)
@binding(1)
var<storage, read_write> buffer_1_global: array<u32>;

struct info_st {
   scalars_f32: array<f32, 2>,
   scalars_i32: array<i32, 2>,
   scalars_u32: array<u32, 6>,
   static_meta: array<u32, 4>,
}

@group(0)
@binding(2)
var<storage, read> info: info_st;

const WORKGROUP_SIZE_X = 256u;
const WORKGROUP_SIZE_Y = 1u;
const WORKGROUP_SIZE_Z = 1u;

@compute
@workgroup_size(256, 1, 1)
fn scale_packed(
    @builtin(global_invocation_id) global_id: vec3<u32>,
    @builtin(num_workgroups) num_workgroups: vec3<u32>,
) {
let id = (u32(global_id.z) * u32(num_workgroups.x) * u32(WORKGROUP_SIZE_X) * u32(num_workgroups.y) * u32(WORKGROUP_SIZE_Y)) + (u32(global_id.y) * u32(num_workgroups.x) * u32(WORKGROUP_SIZE_X)) + u32(global_id.x);

var l_mut_2: u32;
var l_mut_7: u32;
var l_mut_23: f32;
var l_mut_34: u32;
var l_mut_41: f32;
var l_mut_56: u32;
var l_mut_58: u32;
let l_0 = info.scalars_u32[0] / u32(2);
let l_1 = info.scalars_u32[0] + info.scalars_u32[2];
l_mut_2 = id;
loop {
let l_3 = l_mut_2 < info.scalars_u32[3];
let l_4 = !l_3;
if l_4 {
break;
}
let l_5 = l_0 + l_mut_2;
let l_195 = info.static_meta[u32(0)];
let l_196 = l_195 * u32(1);
let l_197 = l_5 < l_196;
let l_198 = l_196 - u32(1);
let l_199 = min(l_5, l_198);
let l_200 = buffer_0_global[l_199];
let l_201 = select(u32(0), l_200, l_197);
let l_6 = l_201;
l_mut_7 = l_6;
let l_8 = l_5 * u32(2);
let l_9 = l_8 + u32(0);
let l_10 = l_9 >= info.scalars_u32[0];
let l_11 = l_9 < l_1;
let l_12 = l_10 && l_11;
if l_12 {
let l_13 = info.scalars_u32[1] + l_9;
let l_14 = l_13 - info.scalars_u32[0];
let l_15 = l_14 / u32(2);
let l_205 = info.static_meta[u32(1)];
let l_206 = l_205 * u32(1);
let l_207 = l_15 < l_206;
let l_208 = l_206 - u32(1);
let l_209 = min(l_15, l_208);
let l_210 = buffer_1_global[l_209];
let l_211 = select(u32(0), l_210, l_207);
let l_16 = l_211;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
let l_21 = l_20 << u32(16);
let l_22 = bitcast<f32>(l_21);
l_mut_23 = l_22;
let l_24 = l_20 & u32(32768);
let l_25 = l_24 << u32(16);
let l_26 = l_20 >> u32(10);
let l_27 = l_26 & u32(31);
let l_28 = l_20 & u32(1023);
let l_29 = l_27 + u32(112);
let l_30 = l_29 << u32(23);
let l_31 = l_25 | l_30;
let l_32 = l_28 << u32(13);
let l_33 = l_31 | l_32;
l_mut_34 = l_33;
let l_35 = l_27 == u32(31);
if l_35 {
let l_36 = l_25 | u32(2139095040);
let l_37 = l_28 << u32(13);
let l_38 = l_36 | l_37;
l_mut_34 = l_38;
let l_39 = l_28 != u32(0);
if l_39 {
l_mut_34 = l_mut_34 | u32(4194304);
}
}
let l_40 = bitcast<f32>(l_mut_34);
l_mut_41 = l_40;
let l_42 = l_27 == u32(0);
if l_42 {
let l_43 = f32(l_28);
let l_44 = l_43 * f32(5.960464477539063e-8);
l_mut_41 = l_44;
let l_45 = l_25 != u32(0);
if l_45 {
let l_46 = -l_44;
l_mut_41 = l_46;
}
let l_47 = l_28 == u32(0);
if l_47 {
let l_48 = bitcast<f32>(l_25);
l_mut_41 = l_48;
}
}
l_mut_23 = l_mut_41;
let l_49 = l_mut_23 * info.scalars_f32[0];
l_mut_41 = l_49;
let l_50 = l_mut_23 / info.scalars_f32[0];
l_mut_41 = l_50;
l_mut_34 = u32(0);
let l_51 = bitcast<u32>(l_mut_41);
let l_52 = l_51 & u32(2147483648);
let l_53 = l_52 >> u32(16);
let l_54 = l_51 & u32(2139095040);
let l_55 = l_51 & u32(8388607);
l_mut_56 = u32(0);
let l_57 = l_54 == u32(2139095040);
if l_57 {
l_mut_58 = u32(0);
let l_59 = l_55 != u32(0);
if l_59 {
l_mut_58 = u32(512);
}
let l_60 = l_53 | u32(31744);
let l_61 = l_60 | l_mut_58;
let l_62 = l_55 >> u32(13);
let l_63 = l_61 | l_62;
l_mut_56 = l_63;
} else {
let l_64 = l_54 >> u32(23);
let l_65 = i32(l_64);
let l_66 = l_65 - i32(127);
let l_67 = l_66 + i32(15);
let l_68 = l_67 >= i32(31);
if l_68 {
let l_69 = l_53 | u32(31744);
l_mut_56 = l_69;
} else {
let l_70 = l_67 <= i32(0);
if l_70 {
let l_71 = i32(14) - l_67;
let l_72 = l_71 > i32(24);
if l_72 {
l_mut_56 = l_53;
} else {
let l_73 = l_55 | u32(8388608);
let l_74 = i32(14) - l_67;
let l_75 = u32(l_74);
let l_76 = l_73 >> l_75;
l_mut_58 = l_76;
let l_77 = l_75 - u32(1);
let l_78 = u32(1) << l_77;
let l_79 = l_73 & l_78;
let l_80 = l_79 != u32(0);
let l_81 = u32(3) * l_78;
let l_82 = l_81 - u32(1);
let l_83 = l_73 & l_82;
let l_84 = l_83 != u32(0);
let l_85 = l_80 && l_84;
if l_85 {
l_mut_58 = l_mut_58 + u32(1);
}
let l_86 = l_53 | l_mut_58;
l_mut_56 = l_86;
}
} else {
let l_87 = u32(l_67);
let l_88 = l_87 << u32(10);
let l_89 = l_55 >> u32(13);
let l_90 = l_53 | l_88;
let l_91 = l_90 | l_89;
l_mut_56 = l_91;
let l_92 = l_55 & u32(4096);
let l_93 = l_92 != u32(0);
let l_94 = l_55 & u32(12287);
let l_95 = l_94 != u32(0);
let l_96 = l_93 && l_95;
if l_96 {
l_mut_56 = l_mut_56 + u32(1);
}
}
}
}
l_mut_34 = l_mut_56;
let l_97 = u32(0) * u32(16);
let l_98 = u32(65535) << l_97;
let l_99 = ~l_98;
let l_100 = l_mut_7 & l_99;
let l_101 = l_mut_34 & u32(65535);
let l_102 = l_101 << l_97;
let l_103 = l_100 | l_102;
l_mut_7 = l_103;
}
let l_104 = l_5 * u32(2);
let l_105 = l_104 + u32(1);
let l_106 = l_105 >= info.scalars_u32[0];
let l_107 = l_105 < l_1;
let l_108 = l_106 && l_107;
if l_108 {
let l_109 = info.scalars_u32[1] + l_105;
let l_110 = l_109 - info.scalars_u32[0];
let l_111 = l_110 / u32(2);
let l_212 = info.static_meta[u32(1)];
let l_213 = l_212 * u32(1);
let l_214 = l_111 < l_213;
let l_215 = l_213 - u32(1);
let l_216 = min(l_111, l_215);
let l_217 = buffer_1_global[l_216];
let l_218 = select(u32(0), l_217, l_214);
let l_112 = l_218;
let l_113 = l_110 % u32(2);
let l_114 = l_113 * u32(16);
let l_115 = l_112 >> l_114;
let l_116 = l_115 & u32(65535);
let l_117 = l_116 << u32(16);
let l_118 = bitcast<f32>(l_117);
l_mut_41 = l_118;
let l_119 = l_116 & u32(32768);
let l_120 = l_119 << u32(16);
let l_121 = l_116 >> u32(10);
let l_122 = l_121 & u32(31);
let l_123 = l_116 & u32(1023);
let l_124 = l_122 + u32(112);
let l_125 = l_124 << u32(23);
let l_126 = l_120 | l_125;
let l_127 = l_123 << u32(13);
let l_128 = l_126 | l_127;
l_mut_58 = l_128;
let l_129 = l_122 == u32(31);
if l_129 {
let l_130 = l_120 | u32(2139095040);
let l_131 = l_123 << u32(13);
let l_132 = l_130 | l_131;
l_mut_58 = l_132;
let l_133 = l_123 != u32(0);
if l_133 {
l_mut_58 = l_mut_58 | u32(4194304);
}
}
let l_134 = bitcast<f32>(l_mut_58);
l_mut_23 = l_134;
let l_135 = l_122 == u32(0);
if l_135 {
let l_136 = f32(l_123);
let l_137 = l_136 * f32(5.960464477539063e-8);
l_mut_23 = l_137;
let l_138 = l_120 != u32(0);
if l_138 {
let l_139 = -l_137;
l_mut_23 = l_139;
}
let l_140 = l_123 == u32(0);
if l_140 {
let l_141 = bitcast<f32>(l_120);
l_mut_23 = l_141;
}
}
l_mut_41 = l_mut_23;
let l_142 = l_mut_41 * info.scalars_f32[0];
l_mut_23 = l_142;
let l_143 = l_mut_41 / info.scalars_f32[0];
l_mut_23 = l_143;
l_mut_58 = u32(0);
let l_144 = bitcast<u32>(l_mut_23);
let l_145 = l_144 & u32(2147483648);
let l_146 = l_145 >> u32(16);
let l_147 = l_144 & u32(2139095040);
let l_148 = l_144 & u32(8388607);
l_mut_56 = u32(0);
let l_149 = l_147 == u32(2139095040);
if l_149 {
l_mut_34 = u32(0);
let l_150 = l_148 != u32(0);
if l_150 {
l_mut_34 = u32(512);
}
let l_151 = l_146 | u32(31744);
let l_152 = l_151 | l_mut_34;
let l_153 = l_148 >> u32(13);
let l_154 = l_152 | l_153;
l_mut_56 = l_154;
} else {
let l_155 = l_147 >> u32(23);
let l_156 = i32(l_155);
let l_157 = l_156 - i32(127);
let l_158 = l_157 + i32(15);
let l_159 = l_158 >= i32(31);
if l_159 {
let l_160 = l_146 | u32(31744);
l_mut_56 = l_160;
} else {
let l_161 = l_158 <= i32(0);
if l_161 {
let l_162 = i32(14) - l_158;
let l_163 = l_162 > i32(24);
if l_163 {
l_mut_56 = l_146;
} else {
let l_164 = l_148 | u32(8388608);
let l_165 = i32(14) - l_158;
let l_166 = u32(l_165);
let l_167 = l_164 >> l_166;
l_mut_34 = l_167;
let l_168 = l_166 - u32(1);
let l_169 = u32(1) << l_168;
let l_170 = l_164 & l_169;
let l_171 = l_170 != u32(0);
let l_172 = u32(3) * l_169;
let l_173 = l_172 - u32(1);
let l_174 = l_164 & l_173;
let l_175 = l_174 != u32(0);
let l_176 = l_171 && l_175;
if l_176 {
l_mut_34 = l_mut_34 + u32(1);
}
let l_177 = l_146 | l_mut_34;
l_mut_56 = l_177;
}
} else {
let l_178 = u32(l_158);
let l_179 = l_178 << u32(10);
let l_180 = l_148 >> u32(13);
let l_181 = l_146 | l_179;
let l_182 = l_181 | l_180;
l_mut_56 = l_182;
let l_183 = l_148 & u32(4096);
let l_184 = l_183 != u32(0);
let l_185 = l_148 & u32(12287);
let l_186 = l_185 != u32(0);
let l_187 = l_184 && l_186;
if l_187 {
l_mut_56 = l_mut_56 + u32(1);
}
}
}
}
l_mut_58 = l_mut_56;
let l_188 = u32(1) * u32(16);
let l_189 = u32(65535) << l_188;
let l_190 = ~l_189;
let l_191 = l_mut_7 & l_190;
let l_192 = l_mut_58 & u32(65535);
let l_193 = l_192 << l_188;
let l_194 = l_191 | l_193;
l_mut_7 = l_194;
}
let l_202 = info.static_meta[u32(0)];
let l_203 = l_202 * u32(1);
let l_204 = l_5 < l_203;
if l_204 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[4];
}
}
