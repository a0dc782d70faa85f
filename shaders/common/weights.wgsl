// Weight and int8-scale decoding shared by matmul.wgsl and gemv.wgsl (B / W read as u32 words).
// Needs in the including shader: `override BTYPE: u32` (0 f32, 1 f16, 2 int8: 4 per u32, little-endian bytes),
// `override STYPE: u32` (scale type: 0 f32, 1 f16), bindings `b: array<u32>` and `scales: array<u32>`, and
// Params `p` with the scales' element offset in p.offs.w and their stride in p.offs2.z.

// Weight element i (an element index, not a word index).
fn load_b(i: u32) -> f32 {
  switch BTYPE {
    case 1u: { return unpack2x16float(b[i >> 1u])[i & 1u]; }
    case 2u: { return f32(extractBits(bitcast<i32>(b[i >> 2u]), (i & 3u) * 8u, 8u)); }
    default: { return bitcast<f32>(b[i]); }
  }
}

//#include "common/int8_scale.wgsl"
