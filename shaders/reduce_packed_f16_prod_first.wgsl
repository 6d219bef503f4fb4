// reduce_packed_f16_prod_first: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
let l_154 = info.static_meta[u32(0)];
let l_155 = l_154 * u32(1);
let l_156 = l_5 < l_155;
let l_157 = l_155 - u32(1);
let l_158 = min(l_5, l_157);
let l_159 = buffer_0_global[l_158];
let l_160 = select(u32(0), l_159, l_156);
let l_6 = l_160;
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
let l_161 = info.static_meta[u32(2)];
let l_162 = l_161 * u32(1);
let l_163 = l_15 < l_162;
let l_164 = l_162 - u32(1);
let l_165 = min(l_15, l_164);
let l_166 = buffer_2_global[l_165];
let l_167 = select(u32(0), l_166, l_163);
let l_16 = l_167;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_22 = info.scalars_u32[1] + l_13;
let l_23 = l_22 / u32(2);
let l_168 = info.static_meta[u32(1)];
let l_169 = l_168 * u32(1);
let l_170 = l_23 < l_169;
let l_171 = l_169 - u32(1);
let l_172 = min(l_23, l_171);
let l_173 = buffer_1_global[l_172];
let l_174 = select(u32(0), l_173, l_170);
let l_24 = l_174;
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
let l_82 = l_mut_21 * l_mut_49;
l_mut_31 = l_82;
let l_175 = info.static_meta[u32(3)];
let l_176 = l_175 * u32(1);
let l_177 = l_13 < l_176;
if l_177 {
buffer_3_global[l_13] = l_mut_31;
}
}
let l_83 = l_5 * u32(2);
let l_84 = l_83 + u32(1);
let l_85 = l_84 >= info.scalars_u32[0];
let l_86 = l_84 < l_1;
let l_87 = l_85 && l_86;
if l_87 {
let l_88 = l_84 - info.scalars_u32[0];
let l_89 = info.scalars_u32[2] + l_88;
let l_90 = l_89 / u32(2);
let l_178 = info.static_meta[u32(2)];
let l_179 = l_178 * u32(1);
let l_180 = l_90 < l_179;
let l_181 = l_179 - u32(1);
let l_182 = min(l_90, l_181);
let l_183 = buffer_2_global[l_182];
let l_184 = select(u32(0), l_183, l_180);
let l_91 = l_184;
let l_92 = l_89 % u32(2);
let l_93 = l_92 * u32(16);
let l_94 = l_91 >> l_93;
let l_95 = l_94 & u32(65535);
l_mut_49 = f32(0.0);
let l_96 = info.scalars_u32[1] + l_88;
let l_97 = l_96 / u32(2);
let l_185 = info.static_meta[u32(1)];
let l_186 = l_185 * u32(1);
let l_187 = l_97 < l_186;
let l_188 = l_186 - u32(1);
let l_189 = min(l_97, l_188);
let l_190 = buffer_1_global[l_189];
let l_191 = select(u32(0), l_190, l_187);
let l_98 = l_191;
let l_99 = l_96 % u32(2);
let l_100 = l_99 * u32(16);
let l_101 = l_98 >> l_100;
let l_102 = l_101 & u32(65535);
let l_103 = l_102 << u32(16);
let l_104 = bitcast<f32>(l_103);
l_mut_31 = l_104;
let l_105 = l_102 & u32(32768);
let l_106 = l_105 << u32(16);
let l_107 = l_102 >> u32(10);
let l_108 = l_107 & u32(31);
let l_109 = l_102 & u32(1023);
let l_110 = l_108 + u32(112);
let l_111 = l_110 << u32(23);
let l_112 = l_106 | l_111;
let l_113 = l_109 << u32(13);
let l_114 = l_112 | l_113;
l_mut_42 = l_114;
let l_115 = l_108 == u32(31);
if l_115 {
let l_116 = l_106 | u32(2139095040);
let l_117 = l_109 << u32(13);
let l_118 = l_116 | l_117;
l_mut_42 = l_118;
let l_119 = l_109 != u32(0);
if l_119 {
l_mut_42 = l_mut_42 | u32(4194304);
}
}
let l_120 = bitcast<f32>(l_mut_42);
l_mut_21 = l_120;
let l_121 = l_108 == u32(0);
if l_121 {
let l_122 = f32(l_109);
let l_123 = l_122 * f32(5.960464477539063e-8);
l_mut_21 = l_123;
let l_124 = l_106 != u32(0);
if l_124 {
let l_125 = -l_123;
l_mut_21 = l_125;
}
let l_126 = l_109 == u32(0);
if l_126 {
let l_127 = bitcast<f32>(l_106);
l_mut_21 = l_127;
}
}
l_mut_31 = l_mut_21;
l_mut_49 = l_mut_31;
let l_128 = l_95 << u32(16);
let l_129 = bitcast<f32>(l_128);
l_mut_31 = l_129;
let l_130 = l_95 & u32(32768);
let l_131 = l_130 << u32(16);
let l_132 = l_95 >> u32(10);
let l_133 = l_132 & u32(31);
let l_134 = l_95 & u32(1023);
let l_135 = l_133 + u32(112);
let l_136 = l_135 << u32(23);
let l_137 = l_131 | l_136;
let l_138 = l_134 << u32(13);
let l_139 = l_137 | l_138;
l_mut_42 = l_139;
let l_140 = l_133 == u32(31);
if l_140 {
let l_141 = l_131 | u32(2139095040);
let l_142 = l_134 << u32(13);
let l_143 = l_141 | l_142;
l_mut_42 = l_143;
let l_144 = l_134 != u32(0);
if l_144 {
l_mut_42 = l_mut_42 | u32(4194304);
}
}
let l_145 = bitcast<f32>(l_mut_42);
l_mut_21 = l_145;
let l_146 = l_133 == u32(0);
if l_146 {
let l_147 = f32(l_134);
let l_148 = l_147 * f32(5.960464477539063e-8);
l_mut_21 = l_148;
let l_149 = l_131 != u32(0);
if l_149 {
let l_150 = -l_148;
l_mut_21 = l_150;
}
let l_151 = l_134 == u32(0);
if l_151 {
let l_152 = bitcast<f32>(l_131);
l_mut_21 = l_152;
}
}
l_mut_31 = l_mut_21;
l_mut_21 = l_mut_49;
let l_153 = l_mut_49 * l_mut_31;
l_mut_21 = l_153;
let l_192 = info.static_meta[u32(3)];
let l_193 = l_192 * u32(1);
let l_194 = l_88 < l_193;
if l_194 {
buffer_3_global[l_88] = l_mut_21;
}
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
