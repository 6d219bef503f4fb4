// scale_packed_bf16_mul: generated from src/kernels/packed.rs by the CubeCL 0.10 WGSL compiler.
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
var l_mut_26: u32;
var l_mut_33: u32;
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
let l_86 = info.static_meta[u32(0)];
let l_87 = l_86 * u32(1);
let l_88 = l_5 < l_87;
let l_89 = l_87 - u32(1);
let l_90 = min(l_5, l_89);
let l_91 = buffer_0_global[l_90];
let l_92 = select(u32(0), l_91, l_88);
let l_6 = l_92;
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
let l_96 = info.static_meta[u32(1)];
let l_97 = l_96 * u32(1);
let l_98 = l_15 < l_97;
let l_99 = l_97 - u32(1);
let l_100 = min(l_15, l_99);
let l_101 = buffer_1_global[l_100];
let l_102 = select(u32(0), l_101, l_98);
let l_16 = l_102;
let l_17 = l_14 % u32(2);
let l_18 = l_17 * u32(16);
let l_19 = l_16 >> l_18;
let l_20 = l_19 & u32(65535);
let l_21 = l_20 << u32(16);
let l_22 = bitcast<f32>(l_21);
l_mut_23 = l_22;
let l_24 = l_mut_23 * info.scalars_f32[0];
l_mut_25 = l_24;
l_mut_26 = u32(0);
let l_27 = bitcast<u32>(l_mut_25);
let l_28 = l_27 + u32(32767);
let l_29 = l_27 >> u32(16);
let l_30 = l_29 & u32(1);
let l_31 = l_28 + l_30;
let l_32 = l_31 >> u32(16);
l_mut_33 = l_32;
let l_34 = l_27 & u32(2139095040);
let l_35 = l_34 == u32(2139095040);
let l_36 = l_27 & u32(8388607);
let l_37 = l_36 != u32(0);
let l_38 = l_35 && l_37;
if l_38 {
let l_39 = l_27 >> u32(16);
let l_40 = l_39 | u32(64);
l_mut_33 = l_40;
}
let l_41 = l_mut_33 & u32(65535);
l_mut_26 = l_41;
let l_42 = u32(0) * u32(16);
let l_43 = u32(65535) << l_42;
let l_44 = ~l_43;
let l_45 = l_mut_7 & l_44;
let l_46 = l_mut_26 & u32(65535);
let l_47 = l_46 << l_42;
let l_48 = l_45 | l_47;
l_mut_7 = l_48;
}
let l_49 = l_5 * u32(2);
let l_50 = l_49 + u32(1);
let l_51 = l_50 >= info.scalars_u32[0];
let l_52 = l_50 < l_1;
let l_53 = l_51 && l_52;
if l_53 {
let l_54 = info.scalars_u32[1] + l_50;
let l_55 = l_54 - info.scalars_u32[0];
let l_56 = l_55 / u32(2);
let l_103 = info.static_meta[u32(1)];
let l_104 = l_103 * u32(1);
let l_105 = l_56 < l_104;
let l_106 = l_104 - u32(1);
let l_107 = min(l_56, l_106);
let l_108 = buffer_1_global[l_107];
let l_109 = select(u32(0), l_108, l_105);
let l_57 = l_109;
let l_58 = l_55 % u32(2);
let l_59 = l_58 * u32(16);
let l_60 = l_57 >> l_59;
let l_61 = l_60 & u32(65535);
let l_62 = l_61 << u32(16);
let l_63 = bitcast<f32>(l_62);
l_mut_25 = l_63;
let l_64 = l_mut_25 * info.scalars_f32[0];
l_mut_23 = l_64;
l_mut_33 = u32(0);
let l_65 = bitcast<u32>(l_mut_23);
let l_66 = l_65 + u32(32767);
let l_67 = l_65 >> u32(16);
let l_68 = l_67 & u32(1);
let l_69 = l_66 + l_68;
let l_70 = l_69 >> u32(16);
l_mut_26 = l_70;
let l_71 = l_65 & u32(2139095040);
let l_72 = l_71 == u32(2139095040);
let l_73 = l_65 & u32(8388607);
let l_74 = l_73 != u32(0);
let l_75 = l_72 && l_74;
if l_75 {
let l_76 = l_65 >> u32(16);
let l_77 = l_76 | u32(64);
l_mut_26 = l_77;
}
let l_78 = l_mut_26 & u32(65535);
l_mut_33 = l_78;
let l_79 = u32(1) * u32(16);
let l_80 = u32(65535) << l_79;
let l_81 = ~l_80;
let l_82 = l_mut_7 & l_81;
let l_83 = l_mut_33 & u32(65535);
let l_84 = l_83 << l_79;
let l_85 = l_82 | l_84;
l_mut_7 = l_85;
}
let l_93 = info.static_meta[u32(0)];
let l_94 = l_93 * u32(1);
let l_95 = l_5 < l_94;
if l_95 {
buffer_0_global[l_5] = l_mut_7;
}
l_mut_2 = l_mut_2 + info.scalars_u32[4];
}
}
