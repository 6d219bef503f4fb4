// reduce_packed_bf16_prod_last: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_28: u32;
var l_mut_35: u32;
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
let l_89 = info.static_meta[u32(0)];
let l_90 = l_89 * u32(1);
let l_91 = l_5 < l_90;
let l_92 = l_90 - u32(1);
let l_93 = min(l_5, l_92);
let l_94 = buffer_0_global[l_93];
let l_95 = select(u32(0), l_94, l_91);
let l_6 = l_95;
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
let l_99 = info.static_meta[u32(2)];
let l_100 = l_99 * u32(1);
let l_101 = l_15 < l_100;
let l_102 = l_100 - u32(1);
let l_103 = min(l_15, l_102);
let l_104 = buffer_2_global[l_103];
let l_105 = select(u32(0), l_104, l_101);
let l_16 = l_105;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
l_mut_21 = f32(0.0);
let l_106 = info.static_meta[u32(3)];
let l_107 = l_106 * u32(1);
let l_108 = l_13 < l_107;
let l_109 = l_107 - u32(1);
let l_110 = min(l_13, l_109);
let l_111 = buffer_3_global[l_110];
let l_112 = select(f32(0.0), l_111, l_108);
let l_22 = l_112;
l_mut_21 = l_22;
let l_23 = l_20 << u32(16);
let l_24 = bitcast<f32>(l_23);
l_mut_25 = l_24;
l_mut_26 = l_mut_21;
let l_27 = l_mut_21 * l_mut_25;
l_mut_26 = l_27;
l_mut_28 = u32(0);
let l_29 = bitcast<u32>(l_mut_26);
let l_30 = l_29 + u32(32767);
let l_31 = l_29 >> u32(16);
let l_32 = l_31 & u32(1);
let l_33 = l_30 + l_32;
let l_34 = l_33 >> u32(16);
l_mut_35 = l_34;
let l_36 = l_29 & u32(2139095040);
let l_37 = l_36 == u32(2139095040);
let l_38 = l_29 & u32(8388607);
let l_39 = l_38 != u32(0);
let l_40 = l_37 && l_39;
if l_40 {
let l_41 = l_29 >> u32(16);
let l_42 = l_41 | u32(64);
l_mut_35 = l_42;
}
let l_43 = l_mut_35 & u32(65535);
l_mut_28 = l_43;
let l_44 = u32(0) * u32(16);
let l_45 = u32(65535) << l_44;
let l_46 = ~l_45;
let l_47 = l_mut_7 & l_46;
let l_48 = l_mut_28 & u32(65535);
let l_49 = l_48 << l_44;
let l_50 = l_47 | l_49;
l_mut_7 = l_50;
}
let l_51 = l_5 * u32(2);
let l_52 = l_51 + u32(1);
let l_53 = l_52 >= info.scalars_u32[0];
let l_54 = l_52 < l_1;
let l_55 = l_53 && l_54;
if l_55 {
let l_56 = l_52 - info.scalars_u32[0];
let l_57 = info.scalars_u32[2] + l_56;
let l_58 = l_57 / u32(2);
let l_113 = info.static_meta[u32(2)];
let l_114 = l_113 * u32(1);
let l_115 = l_58 < l_114;
let l_116 = l_114 - u32(1);
let l_117 = min(l_58, l_116);
let l_118 = buffer_2_global[l_117];
let l_119 = select(u32(0), l_118, l_115);
let l_59 = l_119;
let l_60 = l_57 % u32(2);
let l_61 = l_60 * u32(16);
let l_62 = l_59 >> l_61;
let l_63 = l_62 & u32(65535);
l_mut_26 = f32(0.0);
let l_120 = info.static_meta[u32(3)];
let l_121 = l_120 * u32(1);
let l_122 = l_56 < l_121;
let l_123 = l_121 - u32(1);
let l_124 = min(l_56, l_123);
let l_125 = buffer_3_global[l_124];
let l_126 = select(f32(0.0), l_125, l_122);
let l_64 = l_126;
l_mut_26 = l_64;
let l_65 = l_63 << u32(16);
let l_66 = bitcast<f32>(l_65);
l_mut_25 = l_66;
l_mut_21 = l_mut_26;
let l_67 = l_mut_26 * l_mut_25;
l_mut_21 = l_67;
l_mut_35 = u32(0);
let l_68 = bitcast<u32>(l_mut_21);
let l_69 = l_68 + u32(32767);
let l_70 = l_68 >> u32(16);
let l_71 = l_70 & u32(1);
let l_72 = l_69 + l_71;
let l_73 = l_72 >> u32(16);
l_mut_28 = l_73;
let l_74 = l_68 & u32(2139095040);
let l_75 = l_74 == u32(2139095040);
let l_76 = l_68 & u32(8388607);
let l_77 = l_76 != u32(0);
let l_78 = l_75 && l_77;
if l_78 {
let l_79 = l_68 >> u32(16);
let l_80 = l_79 | u32(64);
l_mut_28 = l_80;
}
let l_81 = l_mut_28 & u32(65535);
l_mut_35 = l_81;
let l_82 = u32(1) * u32(16);
let l_83 = u32(65535) << l_82;
let l_84 = ~l_83;
let l_85 = l_mut_7 & l_84;
let l_86 = l_mut_35 & u32(65535);
let l_87 = l_86 << l_82;
let l_88 = l_85 | l_87;
l_mut_7 = l_88;
}
let l_96 = info.static_meta[u32(0)];
let l_97 = l_96 * u32(1);
let l_98 = l_5 < l_97;
if l_98 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[5];
}
}
