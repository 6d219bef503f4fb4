// scale_packed_bf16_div: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_25: f32;
var l_mut_27: u32;
var l_mut_34: u32;
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
let l_88 = info.static_meta[u32(0)];
let l_89 = l_88 * u32(1);
let l_90 = l_5 < l_89;
let l_91 = l_89 - u32(1);
let l_92 = min(l_5, l_91);
let l_93 = buffer_0_global[l_92];
let l_94 = select(u32(0), l_93, l_90);
let l_6 = l_94;
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
let l_98 = info.static_meta[u32(1)];
let l_99 = l_98 * u32(1);
let l_100 = l_15 < l_99;
let l_101 = l_99 - u32(1);
let l_102 = min(l_15, l_101);
let l_103 = buffer_1_global[l_102];
let l_104 = select(u32(0), l_103, l_100);
let l_16 = l_104;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
let l_21 = l_20 << u32(16);
let l_22 = bitcast<f32>(l_21);
l_mut_23 = l_22;
let l_24 = l_mut_23 * info.scalars_f32[0];
l_mut_25 = l_24;
let l_26 = l_mut_23 / info.scalars_f32[0];
l_mut_25 = l_26;
l_mut_27 = u32(0);
let l_28 = bitcast<u32>(l_mut_25);
let l_29 = l_28 + u32(32767);
let l_30 = l_28 >> u32(16);
let l_31 = l_30 & u32(1);
let l_32 = l_29 + l_31;
let l_33 = l_32 >> u32(16);
l_mut_34 = l_33;
let l_35 = l_28 & u32(2139095040);
let l_36 = l_35 == u32(2139095040);
let l_37 = l_28 & u32(8388607);
let l_38 = l_37 != u32(0);
let l_39 = l_36 && l_38;
if l_39 {
let l_40 = l_28 >> u32(16);
let l_41 = l_40 | u32(64);
l_mut_34 = l_41;
}
let l_42 = l_mut_34 & u32(65535);
l_mut_27 = l_42;
let l_43 = u32(0) * u32(16);
let l_44 = u32(65535) << l_43;
let l_45 = ~l_44;
let l_46 = l_mut_7 & l_45;
let l_47 = l_mut_27 & u32(65535);
let l_48 = l_47 << l_43;
let l_49 = l_46 | l_48;
l_mut_7 = l_49;
}
let l_50 = l_5 * u32(2);
let l_51 = l_50 + u32(1);
let l_52 = l_51 >= info.scalars_u32[0];
let l_53 = l_51 < l_1;
let l_54 = l_52 && l_53;
if l_54 {
let l_55 = info.scalars_u32[1] + l_51;
let l_56 = l_55 - info.scalars_u32[0];
let l_57 = l_56 / u32(2);
let l_105 = info.static_meta[u32(1)];
let l_106 = l_105 * u32(1);
let l_107 = l_57 < l_106;
let l_108 = l_106 - u32(1);
let l_109 = min(l_57, l_108);
let l_110 = buffer_1_global[l_109];
let l_111 = select(u32(0), l_110, l_107);
let l_58 = l_111;
let l_59 = l_56 % u32(2);
let l_60 = l_59 * u32(16);
let l_61 = l_58 >> l_60;
let l_62 = l_61 & u32(65535);
let l_63 = l_62 << u32(16);
let l_64 = bitcast<f32>(l_63);
l_mut_25 = l_64;
let l_65 = l_mut_25 * info.scalars_f32[0];
l_mut_23 = l_65;
let l_66 = l_mut_25 / info.scalars_f32[0];
l_mut_23 = l_66;
l_mut_34 = u32(0);
let l_67 = bitcast<u32>(l_mut_23);
let l_68 = l_67 + u32(32767);
let l_69 = l_67 >> u32(16);
let l_70 = l_69 & u32(1);
let l_71 = l_68 + l_70;
let l_72 = l_71 >> u32(16);
l_mut_27 = l_72;
let l_73 = l_67 & u32(2139095040);
let l_74 = l_73 == u32(2139095040);
let l_75 = l_67 & u32(8388607);
let l_76 = l_75 != u32(0);
let l_77 = l_74 && l_76;
if l_77 {
let l_78 = l_67 >> u32(16);
let l_79 = l_78 | u32(64);
l_mut_27 = l_79;
}
let l_80 = l_mut_27 & u32(65535);
l_mut_34 = l_80;
let l_81 = u32(1) * u32(16);
let l_82 = u32(65535) << l_81;
let l_83 = ~l_82;
let l_84 = l_mut_7 & l_83;
let l_85 = l_mut_34 & u32(65535);
let l_86 = l_85 << l_81;
let l_87 = l_84 | l_86;
l_mut_7 = l_87;
}
let l_95 = info.static_meta[u32(0)];
let l_96 = l_95 * u32(1);
let l_97 = l_5 < l_96;
if l_97 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[4];
}
}
