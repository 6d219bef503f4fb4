// scale_packed_u8_mul: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_24: i32;
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
let l_102 = info.static_meta[u32(0)];
let l_103 = l_102 * u32(1);
let l_104 = l_5 < l_103;
let l_105 = l_103 - u32(1);
let l_106 = min(l_5, l_105);
let l_107 = buffer_0_global[l_106];
let l_108 = select(u32(0), l_107, l_104);
let l_6 = l_108;
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
let l_112 = info.static_meta[u32(1)];
let l_113 = l_112 * u32(1);
let l_114 = l_15 < l_113;
let l_115 = l_113 - u32(1);
let l_116 = min(l_15, l_115);
let l_117 = buffer_1_global[l_116];
let l_118 = select(u32(0), l_117, l_114);
let l_16 = l_118;
let l_17 = l_14 % u32(4);
let l_18 = l_17 * u32(8);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(255);
let l_21 = bitcast<i32>(l_20);
l_mut_22 = l_21;
let l_23 = l_mut_22 * info.scalars_i32[0];
l_mut_24 = l_23;
let l_25 = bitcast<u32>(l_mut_24);
let l_26 = u32(0) * u32(8);
let l_27 = u32(255) << l_26;
let l_28 = ~l_27;
let l_29 = l_mut_7 & l_28;
let l_30 = l_25 & u32(255);
let l_31 = l_30 << l_26;
let l_32 = l_29 | l_31;
l_mut_7 = l_32;
}
let l_33 = l_5 * u32(4);
let l_34 = l_33 + u32(1);
let l_35 = l_34 >= info.scalars_u32[0];
let l_36 = l_34 < l_1;
let l_37 = l_35 && l_36;
if l_37 {
let l_38 = info.scalars_u32[1] + l_34;
let l_39 = l_38 - info.scalars_u32[0];
let l_40 = l_39 / u32(4);
let l_119 = info.static_meta[u32(1)];
let l_120 = l_119 * u32(1);
let l_121 = l_40 < l_120;
let l_122 = l_120 - u32(1);
let l_123 = min(l_40, l_122);
let l_124 = buffer_1_global[l_123];
let l_125 = select(u32(0), l_124, l_121);
let l_41 = l_125;
let l_42 = l_39 % u32(4);
let l_43 = l_42 * u32(8);
let l_44 = l_41 >> l_43;
let l_45 = l_44 & u32(255);
let l_46 = bitcast<i32>(l_45);
l_mut_24 = l_46;
let l_47 = l_mut_24 * info.scalars_i32[0];
l_mut_22 = l_47;
let l_48 = bitcast<u32>(l_mut_22);
let l_49 = u32(1) * u32(8);
let l_50 = u32(255) << l_49;
let l_51 = ~l_50;
let l_52 = l_mut_7 & l_51;
let l_53 = l_48 & u32(255);
let l_54 = l_53 << l_49;
let l_55 = l_52 | l_54;
l_mut_7 = l_55;
}
let l_56 = l_5 * u32(4);
let l_57 = l_56 + u32(2);
let l_58 = l_57 >= info.scalars_u32[0];
let l_59 = l_57 < l_1;
let l_60 = l_58 && l_59;
if l_60 {
let l_61 = info.scalars_u32[1] + l_57;
let l_62 = l_61 - info.scalars_u32[0];
let l_63 = l_62 / u32(4);
let l_126 = info.static_meta[u32(1)];
let l_127 = l_126 * u32(1);
let l_128 = l_63 < l_127;
let l_129 = l_127 - u32(1);
let l_130 = min(l_63, l_129);
let l_131 = buffer_1_global[l_130];
let l_132 = select(u32(0), l_131, l_128);
let l_64 = l_132;
let l_65 = l_62 % u32(4);
let l_66 = l_65 * u32(8);
let l_67 = l_64 >> l_66;
let l_68 = l_67 & u32(255);
let l_69 = bitcast<i32>(l_68);
l_mut_24 = l_69;
let l_70 = l_mut_24 * info.scalars_i32[0];
l_mut_22 = l_70;
let l_71 = bitcast<u32>(l_mut_22);
let l_72 = u32(2) * u32(8);
let l_73 = u32(255) << l_72;
let l_74 = ~l_73;
let l_75 = l_mut_7 & l_74;
let l_76 = l_71 & u32(255);
let l_77 = l_76 << l_72;
let l_78 = l_75 | l_77;
l_mut_7 = l_78;
}
let l_79 = l_5 * u32(4);
let l_80 = l_79 + u32(3);
let l_81 = l_80 >= info.scalars_u32[0];
let l_82 = l_80 < l_1;
let l_83 = l_81 && l_82;
if l_83 {
let l_84 = info.scalars_u32[1] + l_80;
let l_85 = l_84 - info.scalars_u32[0];
let l_86 = l_85 / u32(4);
let l_133 = info.static_meta[u32(1)];
let l_134 = l_133 * u32(1);
let l_135 = l_86 < l_134;
let l_136 = l_134 - u32(1);
let l_137 = min(l_86, l_136);
let l_138 = buffer_1_global[l_137];
let l_139 = select(u32(0), l_138, l_135);
let l_87 = l_139;
let l_88 = l_85 % u32(4);
let l_89 = l_88 * u32(8);
let l_90 = l_87 >> l_89;
let l_91 = l_90 & u32(255);
let l_92 = bitcast<i32>(l_91);
l_mut_24 = l_92;
let l_93 = l_mut_24 * info.scalars_i32[0];
l_mut_22 = l_93;
let l_94 = bitcast<u32>(l_mut_22);
let l_95 = u32(3) * u32(8);
let l_96 = u32(255) << l_95;
let l_97 = ~l_96;
let l_98 = l_mut_7 & l_97;
let l_99 = l_94 & u32(255);
let l_100 = l_99 << l_95;
let l_101 = l_98 | l_100;
l_mut_7 = l_101;
}
let l_109 = info.static_meta[u32(0)];
let l_110 = l_109 * u32(1);
let l_111 = l_5 < l_110;
if l_111 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[4];
}
}
