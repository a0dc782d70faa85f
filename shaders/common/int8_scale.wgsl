// The per-output-channel scale of an int8 weight, shared by matmul.wgsl, gemv.wgsl (through weights.wgsl) and
// matmul_subgroup.wgsl. Needs in the including shader: `override STYPE: u32` (0 f32, 1 f16), a binding
// `scales: array<u32>`, and Params `p` with the scales' element offset in p.offs.w and their stride in p.offs2.z.

// The int8 dequantisation scale of output channel n.
fn load_scale(n: u32) -> f32 {
  let i = p.offs.w + n * p.offs2.z;
  if (STYPE == 1u) { return unpack2x16float(scales[i >> 1u])[i & 1u]; }
  return bitcast<f32>(scales[i]);
}
