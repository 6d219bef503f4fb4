// reduce_packed_bf16_min_last: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_26: f32;
var l_mut_33: f32;
var l_mut_38: u32;
var l_mut_45: u32;
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
let l_108 = info.static_meta[u32(0)];
let l_109 = l_108 * u32(1);
let l_110 = l_5 < l_109;
let l_111 = l_109 - u32(1);
let l_112 = min(l_5, l_111);
let l_113 = buffer_0_global[l_112];
let l_114 = select(u32(0), l_113, l_110);
let l_6 = l_114;
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
let l_118 = info.static_meta[u32(2)];
let l_119 = l_118 * u32(1);
let l_120 = l_15 < l_119;
let l_121 = l_119 - u32(1);
let l_122 = min(l_15, l_121);
let l_123 = buffer_2_global[l_122];
let l_124 = select(u32(0), l_123, l_120);
let l_16 = l_124;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_125 = info.static_meta[u32(3)];
let l_126 = l_125 * u32(1);
let l_127 = l_13 < l_126;
let l_128 = l_126 - u32(1);
let l_129 = min(l_13, l_128);
let l_130 = buffer_3_global[l_129];
let l_131 = select(f32(0.0), l_130, l_127);
let l_22 = l_131;
l_mut_21 = l_22;
let l_23 = l_20 << u32(16);
let l_24 = bitcast<f32>(l_23);
l_mut_25 = l_24;
l_mut_26 = l_mut_21;
let l_27 = l_mut_25 < l_mut_21;
if l_27 {
l_mut_26 = l_mut_25;
}
let l_28 = l_mut_21 < l_mut_25;
let l_29 = !l_28;
let l_30 = l_mut_25 < l_mut_21;
let l_31 = !l_30;
let l_32 = l_29 && l_31;
if l_32 {
l_mut_33 = l_mut_21;
let l_34 = bitcast<u32>(l_mut_21);
let l_35 = bitcast<u32>(l_mut_25);
let l_36 = l_34 | l_35;
let l_37 = bitcast<f32>(l_36);
l_mut_33 = l_37;
l_mut_26 = l_mut_33;
}
l_mut_38 = u32(0);
let l_39 = bitcast<u32>(l_mut_26);
let l_40 = l_39 + u32(32767);
let l_41 = l_39 >> u32(16);
let l_42 = l_41 & u32(1);
let l_43 = l_40 + l_42;
let l_44 = l_43 >> u32(16);
l_mut_45 = l_44;
let l_46 = l_39 & u32(2139095040);
let l_47 = l_46 == u32(2139095040);
let l_48 = l_39 & u32(8388607);
let l_49 = l_48 != u32(0);
let l_50 = l_47 && l_49;
if l_50 {
let l_51 = l_39 >> u32(16);
let l_52 = l_51 | u32(64);
l_mut_45 = l_52;
}
let l_53 = l_mut_45 & u32(65535);
l_mut_38 = l_53;
let l_54 = u32(0) * u32(16);
let l_55 = u32(65535) << l_54;
let l_56 = ~l_55;
let l_57 = l_mut_7 & l_56;
let l_58 = l_mut_38 & u32(65535);
let l_59 = l_58 << l_54;
let l_60 = l_57 | l_59;
l_mut_7 = l_60;
}
let l_61 = l_5 * u32(2);
let l_62 = l_61 + u32(1);
let l_63 = l_62 >= info.scalars_u32[0];
let l_64 = l_62 < l_1;
let l_65 = l_63 && l_64;
if l_65 {
let l_66 = l_62 - info.scalars_u32[0];
let l_67 = info.scalars_u32[2] + l_66;
let l_68 = l_67 / u32(2);
let l_132 = info.static_meta[u32(2)];
let l_133 = l_132 * u32(1);
let l_134 = l_68 < l_133;
let l_135 = l_133 - u32(1);
let l_136 = min(l_68, l_135);
let l_137 = buffer_2_global[l_136];
let l_138 = select(u32(0), l_137, l_134);
let l_69 = l_138;
let l_70 = l_67 % u32(2);
let l_71 = l_70 * u32(16);
let l_72 = l_69 >> l_71;
let l_73 = l_72 & u32(65535);
l_mut_33 = f32(0.0);
let l_139 = info.static_meta[u32(3)];
let l_140 = l_139 * u32(1);
let l_141 = l_66 < l_140;
let l_142 = l_140 - u32(1);
let l_143 = min(l_66, l_142);
let l_144 = buffer_3_global[l_143];
let l_145 = select(f32(0.0), l_144, l_141);
let l_74 = l_145;
l_mut_33 = l_74;
let l_75 = l_73 << u32(16);
let l_76 = bitcast<f32>(l_75);
l_mut_26 = l_76;
l_mut_25 = l_mut_33;
let l_77 = l_mut_26 < l_mut_33;
if l_77 {
l_mut_25 = l_mut_26;
}
let l_78 = l_mut_33 < l_mut_26;
let l_79 = !l_78;
let l_80 = l_mut_26 < l_mut_33;
let l_81 = !l_80;
let l_82 = l_79 && l_81;
if l_82 {
l_mut_21 = l_mut_33;
let l_83 = bitcast<u32>(l_mut_33);
let l_84 = bitcast<u32>(l_mut_26);
let l_85 = l_83 | l_84;
let l_86 = bitcast<f32>(l_85);
l_mut_21 = l_86;
l_mut_25 = l_mut_21;
}
l_mut_45 = u32(0);
let l_87 = bitcast<u32>(l_mut_25);
let l_88 = l_87 + u32(32767);
let l_89 = l_87 >> u32(16);
let l_90 = l_89 & u32(1);
let l_91 = l_88 + l_90;
let l_92 = l_91 >> u32(16);
l_mut_38 = l_92;
let l_93 = l_87 & u32(2139095040);
let l_94 = l_93 == u32(2139095040);
let l_95 = l_87 & u32(8388607);
let l_96 = l_95 != u32(0);
let l_97 = l_94 && l_96;
if l_97 {
let l_98 = l_87 >> u32(16);
let l_99 = l_98 | u32(64);
l_mut_38 = l_99;
}
let l_100 = l_mut_38 & u32(65535);
l_mut_45 = l_100;
let l_101 = u32(1) * u32(16);
let l_102 = u32(65535) << l_101;
let l_103 = ~l_102;
let l_104 = l_mut_7 & l_103;
let l_105 = l_mut_45 & u32(65535);
let l_106 = l_105 << l_101;
let l_107 = l_104 | l_106;
l_mut_7 = l_107;
}
let l_115 = info.static_meta[u32(0)];
let l_116 = l_115 * u32(1);
let l_117 = l_5 < l_116;
if l_117 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
