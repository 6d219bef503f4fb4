// reduce_packed_i8_prod_direct: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_29: i32;
var l_mut_34: i32;
var l_mut_38: i32;
let l_0 = info.scalars_u32[0] / u32(4);
let l_1 = info.scalars_u32[0] + info.scalars_u32[3];
l_mut_2 = id;
loop {
let l_3 = l_mut_2 < info.scalars_u32[4];
let l_4 = !l_3;
if l_4 {
break;
}
let l_5 = l_0 + l_mut_2;
let l_159 = info.static_meta[u32(0)];
let l_160 = l_159 * u32(1);
let l_161 = l_5 < l_160;
let l_162 = l_160 - u32(1);
let l_163 = min(l_5, l_162);
let l_164 = buffer_0_global[l_163];
let l_165 = select(u32(0), l_164, l_161);
let l_6 = l_165;
l_mut_7 = l_6;
let l_8 = l_5 * u32(4);
let l_9 = l_8 + u32(0);
let l_10 = l_9 >= info.scalars_u32[0];
let l_11 = l_9 < l_1;
let l_12 = l_10 && l_11;
if l_12 {
let l_13 = l_9 - info.scalars_u32[0];
let l_14 = info.scalars_u32[2] + l_13;
let l_15 = l_14 / u32(4);
let l_169 = info.static_meta[u32(2)];
let l_170 = l_169 * u32(1);
let l_171 = l_15 < l_170;
let l_172 = l_170 - u32(1);
let l_173 = min(l_15, l_172);
let l_174 = buffer_2_global[l_173];
let l_175 = select(u32(0), l_174, l_171);
let l_16 = l_175;
let l_17 = l_14 % u32(4);
let l_18 = l_17 * u32(8);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(255);
let l_21 = info.scalars_u32[1] + l_13;
let l_22 = l_21 / u32(4);
let l_176 = info.static_meta[u32(1)];
let l_177 = l_176 * u32(1);
let l_178 = l_22 < l_177;
let l_179 = l_177 - u32(1);
let l_180 = min(l_22, l_179);
let l_181 = buffer_1_global[l_180];
let l_182 = select(u32(0), l_181, l_178);
let l_23 = l_182;
let l_24 = l_21 % u32(4);
let l_25 = l_24 * u32(8);
let l_26 = l_23 >> l_25;
let l_27 = l_26 & u32(255);
let l_28 = bitcast<i32>(l_27);
l_mut_29 = l_28;
let l_30 = l_27 << u32(24);
let l_31 = bitcast<i32>(l_30);
let l_32 = l_31 >> u32(i32(24));
l_mut_29 = l_32;
let l_33 = bitcast<i32>(l_20);
l_mut_34 = l_33;
let l_35 = l_20 << u32(24);
let l_36 = bitcast<i32>(l_35);
let l_37 = l_36 >> u32(i32(24));
l_mut_34 = l_37;
l_mut_38 = l_mut_29;
let l_39 = l_mut_29 * l_mut_34;
l_mut_38 = l_39;
let l_40 = bitcast<u32>(l_mut_38);
let l_41 = u32(0) * u32(8);
let l_42 = u32(255) << l_41;
let l_43 = ~l_42;
let l_44 = l_mut_7 & l_43;
let l_45 = l_40 & u32(255);
let l_46 = l_45 << l_41;
let l_47 = l_44 | l_46;
l_mut_7 = l_47;
}
let l_48 = l_5 * u32(4);
let l_49 = l_48 + u32(1);
let l_50 = l_49 >= info.scalars_u32[0];
let l_51 = l_49 < l_1;
let l_52 = l_50 && l_51;
if l_52 {
let l_53 = l_49 - info.scalars_u32[0];
let l_54 = info.scalars_u32[2] + l_53;
let l_55 = l_54 / u32(4);
let l_183 = info.static_meta[u32(2)];
let l_184 = l_183 * u32(1);
let l_185 = l_55 < l_184;
let l_186 = l_184 - u32(1);
let l_187 = min(l_55, l_186);
let l_188 = buffer_2_global[l_187];
let l_189 = select(u32(0), l_188, l_185);
let l_56 = l_189;
let l_57 = l_54 % u32(4);
let l_58 = l_57 * u32(8);
let l_59 = l_56 >> l_58;
let l_60 = l_59 & u32(255);
let l_61 = info.scalars_u32[1] + l_53;
let l_62 = l_61 / u32(4);
let l_190 = info.static_meta[u32(1)];
let l_191 = l_190 * u32(1);
let l_192 = l_62 < l_191;
let l_193 = l_191 - u32(1);
let l_194 = min(l_62, l_193);
let l_195 = buffer_1_global[l_194];
let l_196 = select(u32(0), l_195, l_192);
let l_63 = l_196;
let l_64 = l_61 % u32(4);
let l_65 = l_64 * u32(8);
let l_66 = l_63 >> l_65;
let l_67 = l_66 & u32(255);
let l_68 = bitcast<i32>(l_67);
l_mut_38 = l_68;
let l_69 = l_67 << u32(24);
let l_70 = bitcast<i32>(l_69);
let l_71 = l_70 >> u32(i32(24));
l_mut_38 = l_71;
let l_72 = bitcast<i32>(l_60);
l_mut_34 = l_72;
let l_73 = l_60 << u32(24);
let l_74 = bitcast<i32>(l_73);
let l_75 = l_74 >> u32(i32(24));
l_mut_34 = l_75;
l_mut_29 = l_mut_38;
let l_76 = l_mut_38 * l_mut_34;
l_mut_29 = l_76;
let l_77 = bitcast<u32>(l_mut_29);
let l_78 = u32(1) * u32(8);
let l_79 = u32(255) << l_78;
let l_80 = ~l_79;
let l_81 = l_mut_7 & l_80;
let l_82 = l_77 & u32(255);
let l_83 = l_82 << l_78;
let l_84 = l_81 | l_83;
l_mut_7 = l_84;
}
let l_85 = l_5 * u32(4);
let l_86 = l_85 + u32(2);
let l_87 = l_86 >= info.scalars_u32[0];
let l_88 = l_86 < l_1;
let l_89 = l_87 && l_88;
if l_89 {
let l_90 = l_86 - info.scalars_u32[0];
let l_91 = info.scalars_u32[2] + l_90;
let l_92 = l_91 / u32(4);
let l_197 = info.static_meta[u32(2)];
let l_198 = l_197 * u32(1);
let l_199 = l_92 < l_198;
let l_200 = l_198 - u32(1);
let l_201 = min(l_92, l_200);
let l_202 = buffer_2_global[l_201];
let l_203 = select(u32(0), l_202, l_199);
let l_93 = l_203;
let l_94 = l_91 % u32(4);
let l_95 = l_94 * u32(8);
let l_96 = l_93 >> l_95;
let l_97 = l_96 & u32(255);
let l_98 = info.scalars_u32[1] + l_90;
let l_99 = l_98 / u32(4);
let l_204 = info.static_meta[u32(1)];
let l_205 = l_204 * u32(1);
let l_206 = l_99 < l_205;
let l_207 = l_205 - u32(1);
let l_208 = min(l_99, l_207);
let l_209 = buffer_1_global[l_208];
let l_210 = select(u32(0), l_209, l_206);
let l_100 = l_210;
let l_101 = l_98 % u32(4);
let l_102 = l_101 * u32(8);
let l_103 = l_100 >> l_102;
let l_104 = l_103 & u32(255);
let l_105 = bitcast<i32>(l_104);
l_mut_38 = l_105;
let l_106 = l_104 << u32(24);
let l_107 = bitcast<i32>(l_106);
let l_108 = l_107 >> u32(i32(24));
l_mut_38 = l_108;
let l_109 = bitcast<i32>(l_97);
l_mut_34 = l_109;
let l_110 = l_97 << u32(24);
let l_111 = bitcast<i32>(l_110);
let l_112 = l_111 >> u32(i32(24));
l_mut_34 = l_112;
l_mut_29 = l_mut_38;
let l_113 = l_mut_38 * l_mut_34;
l_mut_29 = l_113;
let l_114 = bitcast<u32>(l_mut_29);
let l_115 = u32(2) * u32(8);
let l_116 = u32(255) << l_115;
let l_117 = ~l_116;
let l_118 = l_mut_7 & l_117;
let l_119 = l_114 & u32(255);
let l_120 = l_119 << l_115;
let l_121 = l_118 | l_120;
l_mut_7 = l_121;
}
let l_122 = l_5 * u32(4);
let l_123 = l_122 + u32(3);
let l_124 = l_123 >= info.scalars_u32[0];
let l_125 = l_123 < l_1;
let l_126 = l_124 && l_125;
if l_126 {
let l_127 = l_123 - info.scalars_u32[0];
let l_128 = info.scalars_u32[2] + l_127;
let l_129 = l_128 / u32(4);
let l_211 = info.static_meta[u32(2)];
let l_212 = l_211 * u32(1);
let l_213 = l_129 < l_212;
let l_214 = l_212 - u32(1);
let l_215 = min(l_129, l_214);
let l_216 = buffer_2_global[l_215];
let l_217 = select(u32(0), l_216, l_213);
let l_130 = l_217;
let l_131 = l_128 % u32(4);
let l_132 = l_131 * u32(8);
let l_133 = l_130 >> l_132;
let l_134 = l_133 & u32(255);
let l_135 = info.scalars_u32[1] + l_127;
let l_136 = l_135 / u32(4);
let l_218 = info.static_meta[u32(1)];
let l_219 = l_218 * u32(1);
let l_220 = l_136 < l_219;
let l_221 = l_219 - u32(1);
let l_222 = min(l_136, l_221);
let l_223 = buffer_1_global[l_222];
let l_224 = select(u32(0), l_223, l_220);
let l_137 = l_224;
let l_138 = l_135 % u32(4);
let l_139 = l_138 * u32(8);
let l_140 = l_137 >> l_139;
let l_141 = l_140 & u32(255);
let l_142 = bitcast<i32>(l_141);
l_mut_38 = l_142;
let l_143 = l_141 << u32(24);
let l_144 = bitcast<i32>(l_143);
let l_145 = l_144 >> u32(i32(24));
l_mut_38 = l_145;
let l_146 = bitcast<i32>(l_134);
l_mut_34 = l_146;
let l_147 = l_134 << u32(24);
let l_148 = bitcast<i32>(l_147);
let l_149 = l_148 >> u32(i32(24));
l_mut_34 = l_149;
l_mut_29 = l_mut_38;
let l_150 = l_mut_38 * l_mut_34;
l_mut_29 = l_150;
let l_151 = bitcast<u32>(l_mut_29);
let l_152 = u32(3) * u32(8);
let l_153 = u32(255) << l_152;
let l_154 = ~l_153;
let l_155 = l_mut_7 & l_154;
let l_156 = l_151 & u32(255);
let l_157 = l_156 << l_152;
let l_158 = l_155 | l_157;
l_mut_7 = l_158;
}
let l_166 = info.static_meta[u32(0)];
let l_167 = l_166 * u32(1);
let l_168 = l_5 < l_167;
if l_168 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
