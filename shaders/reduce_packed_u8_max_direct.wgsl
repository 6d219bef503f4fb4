// reduce_packed_u8_max_direct: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_31: i32;
var l_mut_32: i32;
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
let l_135 = info.static_meta[u32(0)];
let l_136 = l_135 * u32(1);
let l_137 = l_5 < l_136;
let l_138 = l_136 - u32(1);
let l_139 = min(l_5, l_138);
let l_140 = buffer_0_global[l_139];
let l_141 = select(u32(0), l_140, l_137);
let l_6 = l_141;
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
let l_145 = info.static_meta[u32(2)];
let l_146 = l_145 * u32(1);
let l_147 = l_15 < l_146;
let l_148 = l_146 - u32(1);
let l_149 = min(l_15, l_148);
let l_150 = buffer_2_global[l_149];
let l_151 = select(u32(0), l_150, l_147);
let l_16 = l_151;
let l_17 = l_14 % u32(4);
let l_18 = l_17 * u32(8);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(255);
let l_21 = info.scalars_u32[1] + l_13;
let l_22 = l_21 / u32(4);
let l_152 = info.static_meta[u32(1)];
let l_153 = l_152 * u32(1);
let l_154 = l_22 < l_153;
let l_155 = l_153 - u32(1);
let l_156 = min(l_22, l_155);
let l_157 = buffer_1_global[l_156];
let l_158 = select(u32(0), l_157, l_154);
let l_23 = l_158;
let l_24 = l_21 % u32(4);
let l_25 = l_24 * u32(8);
let l_26 = l_23 >> l_25;
let l_27 = l_26 & u32(255);
let l_28 = bitcast<i32>(l_27);
l_mut_29 = l_28;
let l_30 = bitcast<i32>(l_20);
l_mut_31 = l_30;
l_mut_32 = l_mut_29;
let l_33 = l_mut_31 > l_mut_29;
if l_33 {
l_mut_32 = l_mut_31;
}
let l_34 = bitcast<u32>(l_mut_32);
let l_35 = u32(0) * u32(8);
let l_36 = u32(255) << l_35;
let l_37 = ~l_36;
let l_38 = l_mut_7 & l_37;
let l_39 = l_34 & u32(255);
let l_40 = l_39 << l_35;
let l_41 = l_38 | l_40;
l_mut_7 = l_41;
}
let l_42 = l_5 * u32(4);
let l_43 = l_42 + u32(1);
let l_44 = l_43 >= info.scalars_u32[0];
let l_45 = l_43 < l_1;
let l_46 = l_44 && l_45;
if l_46 {
let l_47 = l_43 - info.scalars_u32[0];
let l_48 = info.scalars_u32[2] + l_47;
let l_49 = l_48 / u32(4);
let l_159 = info.static_meta[u32(2)];
let l_160 = l_159 * u32(1);
let l_161 = l_49 < l_160;
let l_162 = l_160 - u32(1);
let l_163 = min(l_49, l_162);
let l_164 = buffer_2_global[l_163];
let l_165 = select(u32(0), l_164, l_161);
let l_50 = l_165;
let l_51 = l_48 % u32(4);
let l_52 = l_51 * u32(8);
let l_53 = l_50 >> l_52;
let l_54 = l_53 & u32(255);
let l_55 = info.scalars_u32[1] + l_47;
let l_56 = l_55 / u32(4);
let l_166 = info.static_meta[u32(1)];
let l_167 = l_166 * u32(1);
let l_168 = l_56 < l_167;
let l_169 = l_167 - u32(1);
let l_170 = min(l_56, l_169);
let l_171 = buffer_1_global[l_170];
let l_172 = select(u32(0), l_171, l_168);
let l_57 = l_172;
let l_58 = l_55 % u32(4);
let l_59 = l_58 * u32(8);
let l_60 = l_57 >> l_59;
let l_61 = l_60 & u32(255);
let l_62 = bitcast<i32>(l_61);
l_mut_32 = l_62;
let l_63 = bitcast<i32>(l_54);
l_mut_31 = l_63;
l_mut_29 = l_mut_32;
let l_64 = l_mut_31 > l_mut_32;
if l_64 {
l_mut_29 = l_mut_31;
}
let l_65 = bitcast<u32>(l_mut_29);
let l_66 = u32(1) * u32(8);
let l_67 = u32(255) << l_66;
let l_68 = ~l_67;
let l_69 = l_mut_7 & l_68;
let l_70 = l_65 & u32(255);
let l_71 = l_70 << l_66;
let l_72 = l_69 | l_71;
l_mut_7 = l_72;
}
let l_73 = l_5 * u32(4);
let l_74 = l_73 + u32(2);
let l_75 = l_74 >= info.scalars_u32[0];
let l_76 = l_74 < l_1;
let l_77 = l_75 && l_76;
if l_77 {
let l_78 = l_74 - info.scalars_u32[0];
let l_79 = info.scalars_u32[2] + l_78;
let l_80 = l_79 / u32(4);
let l_173 = info.static_meta[u32(2)];
let l_174 = l_173 * u32(1);
let l_175 = l_80 < l_174;
let l_176 = l_174 - u32(1);
let l_177 = min(l_80, l_176);
let l_178 = buffer_2_global[l_177];
let l_179 = select(u32(0), l_178, l_175);
let l_81 = l_179;
let l_82 = l_79 % u32(4);
let l_83 = l_82 * u32(8);
let l_84 = l_81 >> l_83;
let l_85 = l_84 & u32(255);
let l_86 = info.scalars_u32[1] + l_78;
let l_87 = l_86 / u32(4);
let l_180 = info.static_meta[u32(1)];
let l_181 = l_180 * u32(1);
let l_182 = l_87 < l_181;
let l_183 = l_181 - u32(1);
let l_184 = min(l_87, l_183);
let l_185 = buffer_1_global[l_184];
let l_186 = select(u32(0), l_185, l_182);
let l_88 = l_186;
let l_89 = l_86 % u32(4);
let l_90 = l_89 * u32(8);
let l_91 = l_88 >> l_90;
let l_92 = l_91 & u32(255);
let l_93 = bitcast<i32>(l_92);
l_mut_32 = l_93;
let l_94 = bitcast<i32>(l_85);
l_mut_31 = l_94;
l_mut_29 = l_mut_32;
let l_95 = l_mut_31 > l_mut_32;
if l_95 {
l_mut_29 = l_mut_31;
}
let l_96 = bitcast<u32>(l_mut_29);
let l_97 = u32(2) * u32(8);
let l_98 = u32(255) << l_97;
let l_99 = ~l_98;
let l_100 = l_mut_7 & l_99;
let l_101 = l_96 & u32(255);
let l_102 = l_101 << l_97;
let l_103 = l_100 | l_102;
l_mut_7 = l_103;
}
let l_104 = l_5 * u32(4);
let l_105 = l_104 + u32(3);
let l_106 = l_105 >= info.scalars_u32[0];
let l_107 = l_105 < l_1;
let l_108 = l_106 && l_107;
if l_108 {
let l_109 = l_105 - info.scalars_u32[0];
let l_110 = info.scalars_u32[2] + l_109;
let l_111 = l_110 / u32(4);
let l_187 = info.static_meta[u32(2)];
let l_188 = l_187 * u32(1);
let l_189 = l_111 < l_188;
let l_190 = l_188 - u32(1);
let l_191 = min(l_111, l_190);
let l_192 = buffer_2_global[l_191];
let l_193 = select(u32(0), l_192, l_189);
let l_112 = l_193;
let l_113 = l_110 % u32(4);
let l_114 = l_113 * u32(8);
let l_115 = l_112 >> l_114;
let l_116 = l_115 & u32(255);
let l_117 = info.scalars_u32[1] + l_109;
let l_118 = l_117 / u32(4);
let l_194 = info.static_meta[u32(1)];
let l_195 = l_194 * u32(1);
let l_196 = l_118 < l_195;
let l_197 = l_195 - u32(1);
let l_198 = min(l_118, l_197);
let l_199 = buffer_1_global[l_198];
let l_200 = select(u32(0), l_199, l_196);
let l_119 = l_200;
let l_120 = l_117 % u32(4);
let l_121 = l_120 * u32(8);
let l_122 = l_119 >> l_121;
let l_123 = l_122 & u32(255);
let l_124 = bitcast<i32>(l_123);
l_mut_32 = l_124;
let l_125 = bitcast<i32>(l_116);
l_mut_31 = l_125;
l_mut_29 = l_mut_32;
let l_126 = l_mut_31 > l_mut_32;
if l_126 {
l_mut_29 = l_mut_31;
}
let l_127 = bitcast<u32>(l_mut_29);
let l_128 = u32(3) * u32(8);
let l_129 = u32(255) << l_128;
let l_130 = ~l_129;
let l_131 = l_mut_7 & l_130;
let l_132 = l_127 & u32(255);
let l_133 = l_132 << l_128;
let l_134 = l_131 | l_133;
l_mut_7 = l_134;
}
let l_142 = info.static_meta[u32(0)];
let l_143 = l_142 * u32(1);
let l_144 = l_5 < l_143;
if l_144 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
