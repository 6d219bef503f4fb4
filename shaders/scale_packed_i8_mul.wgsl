// scale_packed_i8_mul: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_22: i32;
var l_mut_27: i32;
let l_0 = info.scalars_u32[0] / u32(4);
let l_1 = info.scalars_u32[0] + info.scalars_u32[2];
l_mut_2 = id;
loop {
let l_3 = l_mut_2 < info.scalars_u32[3];
let l_4 = !l_3;
if l_4 {
break;
}
let l_5 = l_0 + l_mut_2;
let l_114 = info.static_meta[u32(0)];
let l_115 = l_114 * u32(1);
let l_116 = l_5 < l_115;
let l_117 = l_115 - u32(1);
let l_118 = min(l_5, l_117);
let l_119 = buffer_0_global[l_118];
let l_120 = select(u32(0), l_119, l_116);
let l_6 = l_120;
l_mut_7 = l_6;
let l_8 = l_5 * u32(4);
let l_9 = l_8 + u32(0);
let l_10 = l_9 >= info.scalars_u32[0];
let l_11 = l_9 < l_1;
let l_12 = l_10 && l_11;
if l_12 {
let l_13 = info.scalars_u32[1] + l_9;
let l_14 = l_13 - info.scalars_u32[0];
let l_15 = l_14 / u32(4);
let l_124 = info.static_meta[u32(1)];
let l_125 = l_124 * u32(1);
let l_126 = l_15 < l_125;
let l_127 = l_125 - u32(1);
let l_128 = min(l_15, l_127);
let l_129 = buffer_1_global[l_128];
let l_130 = select(u32(0), l_129, l_126);
let l_16 = l_130;
let l_17 = l_14 % u32(4);
let l_18 = l_17 * u32(8);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(255);
let l_21 = bitcast<i32>(l_20);
l_mut_22 = l_21;
let l_23 = l_20 << u32(24);
let l_24 = bitcast<i32>(l_23);
let l_25 = l_24 >> u32(i32(24));
l_mut_22 = l_25;
let l_26 = l_mut_22 * info.scalars_i32[0];
l_mut_27 = l_26;
let l_28 = bitcast<u32>(l_mut_27);
let l_29 = u32(0) * u32(8);
let l_30 = u32(255) << l_29;
let l_31 = ~l_30;
let l_32 = l_mut_7 & l_31;
let l_33 = l_28 & u32(255);
let l_34 = l_33 << l_29;
let l_35 = l_32 | l_34;
l_mut_7 = l_35;
}
let l_36 = l_5 * u32(4);
let l_37 = l_36 + u32(1);
let l_38 = l_37 >= info.scalars_u32[0];
let l_39 = l_37 < l_1;
let l_40 = l_38 && l_39;
if l_40 {
let l_41 = info.scalars_u32[1] + l_37;
let l_42 = l_41 - info.scalars_u32[0];
let l_43 = l_42 / u32(4);
let l_131 = info.static_meta[u32(1)];
let l_132 = l_131 * u32(1);
let l_133 = l_43 < l_132;
let l_134 = l_132 - u32(1);
let l_135 = min(l_43, l_134);
let l_136 = buffer_1_global[l_135];
let l_137 = select(u32(0), l_136, l_133);
let l_44 = l_137;
let l_45 = l_42 % u32(4);
let l_46 = l_45 * u32(8);
let l_47 = l_44 >> l_46;
let l_48 = l_47 & u32(255);
let l_49 = bitcast<i32>(l_48);
l_mut_27 = l_49;
let l_50 = l_48 << u32(24);
let l_51 = bitcast<i32>(l_50);
let l_52 = l_51 >> u32(i32(24));
l_mut_27 = l_52;
let l_53 = l_mut_27 * info.scalars_i32[0];
l_mut_22 = l_53;
let l_54 = bitcast<u32>(l_mut_22);
let l_55 = u32(1) * u32(8);
let l_56 = u32(255) << l_55;
let l_57 = ~l_56;
let l_58 = l_mut_7 & l_57;
let l_59 = l_54 & u32(255);
let l_60 = l_59 << l_55;
let l_61 = l_58 | l_60;
l_mut_7 = l_61;
}
let l_62 = l_5 * u32(4);
let l_63 = l_62 + u32(2);
let l_64 = l_63 >= info.scalars_u32[0];
let l_65 = l_63 < l_1;
let l_66 = l_64 && l_65;
if l_66 {
let l_67 = info.scalars_u32[1] + l_63;
let l_68 = l_67 - info.scalars_u32[0];
let l_69 = l_68 / u32(4);
let l_138 = info.static_meta[u32(1)];
let l_139 = l_138 * u32(1);
let l_140 = l_69 < l_139;
let l_141 = l_139 - u32(1);
let l_142 = min(l_69, l_141);
let l_143 = buffer_1_global[l_142];
let l_144 = select(u32(0), l_143, l_140);
let l_70 = l_144;
let l_71 = l_68 % u32(4);
let l_72 = l_71 * u32(8);
let l_73 = l_70 >> l_72;
let l_74 = l_73 & u32(255);
let l_75 = bitcast<i32>(l_74);
l_mut_27 = l_75;
let l_76 = l_74 << u32(24);
let l_77 = bitcast<i32>(l_76);
let l_78 = l_77 >> u32(i32(24));
l_mut_27 = l_78;
let l_79 = l_mut_27 * info.scalars_i32[0];
l_mut_22 = l_79;
let l_80 = bitcast<u32>(l_mut_22);
let l_81 = u32(2) * u32(8);
let l_82 = u32(255) << l_81;
let l_83 = ~l_82;
let l_84 = l_mut_7 & l_83;
let l_85 = l_80 & u32(255);
let l_86 = l_85 << l_81;
let l_87 = l_84 | l_86;
l_mut_7 = l_87;
}
let l_88 = l_5 * u32(4);
let l_89 = l_88 + u32(3);
let l_90 = l_89 >= info.scalars_u32[0];
let l_91 = l_89 < l_1;
let l_92 = l_90 && l_91;
if l_92 {
let l_93 = info.scalars_u32[1] + l_89;
let l_94 = l_93 - info.scalars_u32[0];
let l_95 = l_94 / u32(4);
let l_145 = info.static_meta[u32(1)];
let l_146 = l_145 * u32(1);
let l_147 = l_95 < l_146;
let l_148 = l_146 - u32(1);
let l_149 = min(l_95, l_148);
let l_150 = buffer_1_global[l_149];
let l_151 = select(u32(0), l_150, l_147);
let l_96 = l_151;
let l_97 = l_94 % u32(4);
let l_98 = l_97 * u32(8);
let l_99 = l_96 >> l_98;
let l_100 = l_99 & u32(255);
let l_101 = bitcast<i32>(l_100);
l_mut_27 = l_101;
let l_102 = l_100 << u32(24);
let l_103 = bitcast<i32>(l_102);
let l_104 = l_103 >> u32(i32(24));
l_mut_27 = l_104;
let l_105 = l_mut_27 * info.scalars_i32[0];
l_mut_22 = l_105;
let l_106 = bitcast<u32>(l_mut_22);
let l_107 = u32(3) * u32(8);
let l_108 = u32(255) << l_107;
let l_109 = ~l_108;
let l_110 = l_mut_7 & l_109;
let l_111 = l_106 & u32(255);
let l_112 = l_111 << l_107;
let l_113 = l_110 | l_112;
l_mut_7 = l_113;
}
let l_121 = info.static_meta[u32(0)];
let l_122 = l_121 * u32(1);
let l_123 = l_5 < l_122;
if l_123 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[4];
}
}
