// scale_packed_f16_mul: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_55: u32;
var l_mut_57: u32;
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
let l_193 = info.static_meta[u32(0)];
let l_194 = l_193 * u32(1);
let l_195 = l_5 < l_194;
let l_196 = l_194 - u32(1);
let l_197 = min(l_5, l_196);
let l_198 = buffer_0_global[l_197];
let l_199 = select(u32(0), l_198, l_195);
let l_6 = l_199;
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
let l_203 = info.static_meta[u32(1)];
let l_204 = l_203 * u32(1);
let l_205 = l_15 < l_204;
let l_206 = l_204 - u32(1);
let l_207 = min(l_15, l_206);
let l_208 = buffer_1_global[l_207];
let l_209 = select(u32(0), l_208, l_205);
let l_16 = l_209;
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
l_mut_34 = u32(0);
let l_50 = bitcast<u32>(l_mut_41);
let l_51 = l_50 & u32(2147483648);
let l_52 = l_51 >> u32(16);
let l_53 = l_50 & u32(2139095040);
let l_54 = l_50 & u32(8388607);
l_mut_55 = u32(0);
let l_56 = l_53 == u32(2139095040);
if l_56 {
l_mut_57 = u32(0);
let l_58 = l_54 != u32(0);
if l_58 {
l_mut_57 = u32(512);
}
let l_59 = l_52 | u32(31744);
let l_60 = l_59 | l_mut_57;
let l_61 = l_54 >> u32(13);
let l_62 = l_60 | l_61;
l_mut_55 = l_62;
} else {
let l_63 = l_53 >> u32(23);
let l_64 = i32(l_63);
let l_65 = l_64 - i32(127);
let l_66 = l_65 + i32(15);
let l_67 = l_66 >= i32(31);
if l_67 {
let l_68 = l_52 | u32(31744);
l_mut_55 = l_68;
} else {
let l_69 = l_66 <= i32(0);
if l_69 {
let l_70 = i32(14) - l_66;
let l_71 = l_70 > i32(24);
if l_71 {
l_mut_55 = l_52;
} else {
let l_72 = l_54 | u32(8388608);
let l_73 = i32(14) - l_66;
let l_74 = u32(l_73);
let l_75 = l_72 >> l_74;
l_mut_57 = l_75;
let l_76 = l_74 - u32(1);
let l_77 = u32(1) << l_76;
let l_78 = l_72 & l_77;
let l_79 = l_78 != u32(0);
let l_80 = u32(3) * l_77;
let l_81 = l_80 - u32(1);
let l_82 = l_72 & l_81;
let l_83 = l_82 != u32(0);
let l_84 = l_79 && l_83;
if l_84 {
l_mut_57 = l_mut_57 + u32(1);
}
let l_85 = l_52 | l_mut_57;
l_mut_55 = l_85;
}
} else {
let l_86 = u32(l_66);
let l_87 = l_86 << u32(10);
let l_88 = l_54 >> u32(13);
let l_89 = l_52 | l_87;
let l_90 = l_89 | l_88;
l_mut_55 = l_90;
let l_91 = l_54 & u32(4096);
let l_92 = l_91 != u32(0);
let l_93 = l_54 & u32(12287);
let l_94 = l_93 != u32(0);
let l_95 = l_92 && l_94;
if l_95 {
l_mut_55 = l_mut_55 + u32(1);
}
}
}
}
l_mut_34 = l_mut_55;
let l_96 = u32(0) * u32(16);
let l_97 = u32(65535) << l_96;
let l_98 = ~l_97;
let l_99 = l_mut_7 & l_98;
let l_100 = l_mut_34 & u32(65535);
let l_101 = l_100 << l_96;
let l_102 = l_99 | l_101;
l_mut_7 = l_102;
}
let l_103 = l_5 * u32(2);
let l_104 = l_103 + u32(1);
let l_105 = l_104 >= info.scalars_u32[0];
let l_106 = l_104 < l_1;
let l_107 = l_105 && l_106;
if l_107 {
let l_108 = info.scalars_u32[1] + l_104;
let l_109 = l_108 - info.scalars_u32[0];
let l_110 = l_109 / u32(2);
let l_210 = info.static_meta[u32(1)];
let l_211 = l_210 * u32(1);
let l_212 = l_110 < l_211;
let l_213 = l_211 - u32(1);
let l_214 = min(l_110, l_213);
let l_215 = buffer_1_global[l_214];
let l_216 = select(u32(0), l_215, l_212);
let l_111 = l_216;
let l_112 = l_109 % u32(2);
let l_113 = l_112 * u32(16);
let l_114 = l_111 >> l_113;
let l_115 = l_114 & u32(65535);
let l_116 = l_115 << u32(16);
let l_117 = bitcast<f32>(l_116);
l_mut_41 = l_117;
let l_118 = l_115 & u32(32768);
let l_119 = l_118 << u32(16);
let l_120 = l_115 >> u32(10);
let l_121 = l_120 & u32(31);
let l_122 = l_115 & u32(1023);
let l_123 = l_121 + u32(112);
let l_124 = l_123 << u32(23);
let l_125 = l_119 | l_124;
let l_126 = l_122 << u32(13);
let l_127 = l_125 | l_126;
l_mut_57 = l_127;
let l_128 = l_121 == u32(31);
if l_128 {
let l_129 = l_119 | u32(2139095040);
let l_130 = l_122 << u32(13);
let l_131 = l_129 | l_130;
l_mut_57 = l_131;
let l_132 = l_122 != u32(0);
if l_132 {
l_mut_57 = l_mut_57 | u32(4194304);
}
}
let l_133 = bitcast<f32>(l_mut_57);
l_mut_23 = l_133;
let l_134 = l_121 == u32(0);
if l_134 {
let l_135 = f32(l_122);
let l_136 = l_135 * f32(5.960464477539063e-8);
l_mut_23 = l_136;
let l_137 = l_119 != u32(0);
if l_137 {
let l_138 = -l_136;
l_mut_23 = l_138;
}
let l_139 = l_122 == u32(0);
if l_139 {
let l_140 = bitcast<f32>(l_119);
l_mut_23 = l_140;
}
}
l_mut_41 = l_mut_23;
let l_141 = l_mut_41 * info.scalars_f32[0];
l_mut_23 = l_141;
l_mut_57 = u32(0);
let l_142 = bitcast<u32>(l_mut_23);
let l_143 = l_142 & u32(2147483648);
let l_144 = l_143 >> u32(16);
let l_145 = l_142 & u32(2139095040);
let l_146 = l_142 & u32(8388607);
l_mut_55 = u32(0);
let l_147 = l_145 == u32(2139095040);
if l_147 {
l_mut_34 = u32(0);
let l_148 = l_146 != u32(0);
if l_148 {
l_mut_34 = u32(512);
}
let l_149 = l_144 | u32(31744);
let l_150 = l_149 | l_mut_34;
let l_151 = l_146 >> u32(13);
let l_152 = l_150 | l_151;
l_mut_55 = l_152;
} else {
let l_153 = l_145 >> u32(23);
let l_154 = i32(l_153);
let l_155 = l_154 - i32(127);
let l_156 = l_155 + i32(15);
let l_157 = l_156 >= i32(31);
if l_157 {
let l_158 = l_144 | u32(31744);
l_mut_55 = l_158;
} else {
let l_159 = l_156 <= i32(0);
if l_159 {
let l_160 = i32(14) - l_156;
let l_161 = l_160 > i32(24);
if l_161 {
l_mut_55 = l_144;
} else {
let l_162 = l_146 | u32(8388608);
let l_163 = i32(14) - l_156;
let l_164 = u32(l_163);
let l_165 = l_162 >> l_164;
l_mut_34 = l_165;
let l_166 = l_164 - u32(1);
let l_167 = u32(1) << l_166;
let l_168 = l_162 & l_167;
let l_169 = l_168 != u32(0);
let l_170 = u32(3) * l_167;
let l_171 = l_170 - u32(1);
let l_172 = l_162 & l_171;
let l_173 = l_172 != u32(0);
let l_174 = l_169 && l_173;
if l_174 {
l_mut_34 = l_mut_34 + u32(1);
}
let l_175 = l_144 | l_mut_34;
l_mut_55 = l_175;
}
} else {
let l_176 = u32(l_156);
let l_177 = l_176 << u32(10);
let l_178 = l_146 >> u32(13);
let l_179 = l_144 | l_177;
let l_180 = l_179 | l_178;
l_mut_55 = l_180;
let l_181 = l_146 & u32(4096);
let l_182 = l_181 != u32(0);
let l_183 = l_146 & u32(12287);
let l_184 = l_183 != u32(0);
let l_185 = l_182 && l_184;
if l_185 {
l_mut_55 = l_mut_55 + u32(1);
}
}
}
}
l_mut_57 = l_mut_55;
let l_186 = u32(1) * u32(16);
let l_187 = u32(65535) << l_186;
let l_188 = ~l_187;
let l_189 = l_mut_7 & l_188;
let l_190 = l_mut_57 & u32(65535);
let l_191 = l_190 << l_186;
let l_192 = l_189 | l_191;
l_mut_7 = l_192;
}
let l_200 = info.static_meta[u32(0)];
let l_201 = l_200 * u32(1);
let l_202 = l_5 < l_201;
if l_202 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[4];
}
}
