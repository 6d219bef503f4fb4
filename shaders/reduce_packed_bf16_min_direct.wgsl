// reduce_packed_bf16_min_direct: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_34: f32;
var l_mut_41: f32;
var l_mut_46: u32;
var l_mut_53: u32;
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
let l_124 = info.static_meta[u32(0)];
let l_125 = l_124 * u32(1);
let l_126 = l_5 < l_125;
let l_127 = l_125 - u32(1);
let l_128 = min(l_5, l_127);
let l_129 = buffer_0_global[l_128];
let l_130 = select(u32(0), l_129, l_126);
let l_6 = l_130;
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
let l_134 = info.static_meta[u32(2)];
let l_135 = l_134 * u32(1);
let l_136 = l_15 < l_135;
let l_137 = l_135 - u32(1);
let l_138 = min(l_15, l_137);
let l_139 = buffer_2_global[l_138];
let l_140 = select(u32(0), l_139, l_136);
let l_16 = l_140;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_22 = info.scalars_u32[1] + l_13;
let l_23 = l_22 / u32(2);
let l_141 = info.static_meta[u32(1)];
let l_142 = l_141 * u32(1);
let l_143 = l_23 < l_142;
let l_144 = l_142 - u32(1);
let l_145 = min(l_23, l_144);
let l_146 = buffer_1_global[l_145];
let l_147 = select(u32(0), l_146, l_143);
let l_24 = l_147;
let l_25 = l_22 % u32(2);
let l_26 = l_25 * u32(16);
let l_27 = l_24 >> l_26;
let l_28 = l_27 & u32(65535);
let l_29 = l_28 << u32(16);
let l_30 = bitcast<f32>(l_29);
l_mut_31 = l_30;
l_mut_21 = l_mut_31;
let l_32 = l_20 << u32(16);
let l_33 = bitcast<f32>(l_32);
l_mut_31 = l_33;
l_mut_34 = l_mut_21;
let l_35 = l_mut_31 < l_mut_21;
if l_35 {
l_mut_34 = l_mut_31;
}
let l_36 = l_mut_21 < l_mut_31;
let l_37 = !l_36;
let l_38 = l_mut_31 < l_mut_21;
let l_39 = !l_38;
let l_40 = l_37 && l_39;
if l_40 {
l_mut_41 = l_mut_21;
let l_42 = bitcast<u32>(l_mut_21);
let l_43 = bitcast<u32>(l_mut_31);
let l_44 = l_42 | l_43;
let l_45 = bitcast<f32>(l_44);
l_mut_41 = l_45;
l_mut_34 = l_mut_41;
}
l_mut_46 = u32(0);
let l_47 = bitcast<u32>(l_mut_34);
let l_48 = l_47 + u32(32767);
let l_49 = l_47 >> u32(16);
let l_50 = l_49 & u32(1);
let l_51 = l_48 + l_50;
let l_52 = l_51 >> u32(16);
l_mut_53 = l_52;
let l_54 = l_47 & u32(2139095040);
let l_55 = l_54 == u32(2139095040);
let l_56 = l_47 & u32(8388607);
let l_57 = l_56 != u32(0);
let l_58 = l_55 && l_57;
if l_58 {
let l_59 = l_47 >> u32(16);
let l_60 = l_59 | u32(64);
l_mut_53 = l_60;
}
let l_61 = l_mut_53 & u32(65535);
l_mut_46 = l_61;
let l_62 = u32(0) * u32(16);
let l_63 = u32(65535) << l_62;
let l_64 = ~l_63;
let l_65 = l_mut_7 & l_64;
let l_66 = l_mut_46 & u32(65535);
let l_67 = l_66 << l_62;
let l_68 = l_65 | l_67;
l_mut_7 = l_68;
}
let l_69 = l_5 * u32(2);
let l_70 = l_69 + u32(1);
let l_71 = l_70 >= info.scalars_u32[0];
let l_72 = l_70 < l_1;
let l_73 = l_71 && l_72;
if l_73 {
let l_74 = l_70 - info.scalars_u32[0];
let l_75 = info.scalars_u32[2] + l_74;
let l_76 = l_75 / u32(2);
let l_148 = info.static_meta[u32(2)];
let l_149 = l_148 * u32(1);
let l_150 = l_76 < l_149;
let l_151 = l_149 - u32(1);
let l_152 = min(l_76, l_151);
let l_153 = buffer_2_global[l_152];
let l_154 = select(u32(0), l_153, l_150);
let l_77 = l_154;
let l_78 = l_75 % u32(2);
let l_79 = l_78 * u32(16);
let l_80 = l_77 >> l_79;
let l_81 = l_80 & u32(65535);
l_mut_41 = f32(0.0);
let l_82 = info.scalars_u32[1] + l_74;
let l_83 = l_82 / u32(2);
let l_155 = info.static_meta[u32(1)];
let l_156 = l_155 * u32(1);
let l_157 = l_83 < l_156;
let l_158 = l_156 - u32(1);
let l_159 = min(l_83, l_158);
let l_160 = buffer_1_global[l_159];
let l_161 = select(u32(0), l_160, l_157);
let l_84 = l_161;
let l_85 = l_82 % u32(2);
let l_86 = l_85 * u32(16);
let l_87 = l_84 >> l_86;
let l_88 = l_87 & u32(65535);
let l_89 = l_88 << u32(16);
let l_90 = bitcast<f32>(l_89);
l_mut_34 = l_90;
l_mut_41 = l_mut_34;
let l_91 = l_81 << u32(16);
let l_92 = bitcast<f32>(l_91);
l_mut_34 = l_92;
l_mut_31 = l_mut_41;
let l_93 = l_mut_34 < l_mut_41;
if l_93 {
l_mut_31 = l_mut_34;
}
let l_94 = l_mut_41 < l_mut_34;
let l_95 = !l_94;
let l_96 = l_mut_34 < l_mut_41;
let l_97 = !l_96;
let l_98 = l_95 && l_97;
if l_98 {
l_mut_21 = l_mut_41;
let l_99 = bitcast<u32>(l_mut_41);
let l_100 = bitcast<u32>(l_mut_34);
let l_101 = l_99 | l_100;
let l_102 = bitcast<f32>(l_101);
l_mut_21 = l_102;
l_mut_31 = l_mut_21;
}
l_mut_53 = u32(0);
let l_103 = bitcast<u32>(l_mut_31);
let l_104 = l_103 + u32(32767);
let l_105 = l_103 >> u32(16);
let l_106 = l_105 & u32(1);
let l_107 = l_104 + l_106;
let l_108 = l_107 >> u32(16);
l_mut_46 = l_108;
let l_109 = l_103 & u32(2139095040);
let l_110 = l_109 == u32(2139095040);
let l_111 = l_103 & u32(8388607);
let l_112 = l_111 != u32(0);
let l_113 = l_110 && l_112;
if l_113 {
let l_114 = l_103 >> u32(16);
let l_115 = l_114 | u32(64);
l_mut_46 = l_115;
}
let l_116 = l_mut_46 & u32(65535);
l_mut_53 = l_116;
let l_117 = u32(1) * u32(16);
let l_118 = u32(65535) << l_117;
let l_119 = ~l_118;
let l_120 = l_mut_7 & l_119;
let l_121 = l_mut_53 & u32(65535);
let l_122 = l_121 << l_117;
let l_123 = l_120 | l_122;
l_mut_7 = l_123;
}
let l_131 = info.static_meta[u32(0)];
let l_132 = l_131 * u32(1);
let l_133 = l_5 < l_132;
if l_133 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
