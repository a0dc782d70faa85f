// GGUF dequantisation: blocks of a ggml quantised type -> values. Wrapper: src/engine/ops/dequant.ts; CPU reference:
// src/engine/gguf.ts dequantize (ggml's dequantize_row_*, float32 arithmetic; the block layouts are described there).
// Header (prepended): `alias T = f32;` or `enable f16; alias T = f16;` (the output's type). Math is f32, rounded to T once.
//
// Bindings: 0 params, 1 out (contiguous, values written from out_off), 2 blocks: the raw bytes read as u32 words
// (little-endian; the tensor's byte length padded to a whole word). One thread per output value;
// index = gid.x + gid.y * (num_workgroups.x * WG) (see grid1d()).

override TYPE: u32 = 8u;   // the GGUF type id: 8 Q8_0, 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 12 Q4_K, 13 Q5_K, 14 Q6_K
override WG: u32 = 256u;

struct Params {
  n: u32,        // values to write (whole blocks)
  out_off: u32,  // element offset of the first one in out
  _p0: u32,
  _p1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> blocks: array<u32>;

fn byte_at(o: u32) -> u32 {
  return (blocks[o >> 2u] >> ((o & 3u) * 8u)) & 0xffu;
}

fn i8_at(o: u32) -> i32 {
  return (i32(byte_at(o)) << 24u) >> 24u;
}

// an fp16 at an even byte offset
fn half_at(o: u32) -> f32 {
  return unpack2x16float((blocks[o >> 2u] >> ((o & 2u) * 8u)) & 0xffffu).x;
}

fn u32_at(o: u32) -> u32 {
  return byte_at(o) | (byte_at(o + 1u) << 8u) | (byte_at(o + 2u) << 16u) | (byte_at(o + 3u) << 24u);
}

// 6-bit scale (x) and min (y) j of a K-quant's 12 scale bytes at s (ggml's get_scale_min_k4)
fn scale_min_k4(s: u32, j: u32) -> vec2<u32> {
  if (j < 4u) {
    return vec2<u32>(byte_at(s + j) & 63u, byte_at(s + j + 4u) & 63u);
  }
  return vec2<u32>((byte_at(s + j + 4u) & 0xfu) | ((byte_at(s + j - 4u) >> 6u) << 4u), (byte_at(s + j + 4u) >> 4u) | ((byte_at(s + j) >> 6u) << 4u));
}

fn value(i: u32) -> f32 {
  switch TYPE {
    case 8u: {   // Q8_0: d, qs[32]
      let o = (i / 32u) * 34u;
      return half_at(o) * f32(i8_at(o + 2u + i % 32u));
    }
    case 2u, 3u: {   // Q4_0: d, qs[16]; Q4_1: d, m, qs[16]
      let one = TYPE == 3u;
      let o = (i / 32u) * select(18u, 20u, one);
      let j = i % 32u;
      let b = byte_at(o + select(2u, 4u, one) + j % 16u);
      let q = select(b & 0xfu, b >> 4u, j >= 16u);
      if (one) {
        return half_at(o) * f32(q) + half_at(o + 2u);
      }
      return f32(i32(q) - 8) * half_at(o);
    }
    case 6u, 7u: {   // Q5_0: d, qh, qs[16]; Q5_1: d, m, qh, qs[16]
      let one = TYPE == 7u;
      let o = (i / 32u) * select(22u, 24u, one);
      let j = i % 32u;
      let qh_at = o + select(2u, 4u, one);
      let qh = u32_at(qh_at);
      let b = byte_at(qh_at + 4u + j % 16u);
      let q = select(b & 0xfu, b >> 4u, j >= 16u) | (((qh >> j) & 1u) << 4u);
      if (one) {
        return half_at(o) * f32(q) + half_at(o + 2u);
      }
      return f32(i32(q) - 16) * half_at(o);
    }
    case 12u, 13u: {   // Q4_K: d, dmin, scales[12], qs[128]; Q5_K: the same with qh[32] before qs
      let five = TYPE == 13u;
      let o = (i / 256u) * select(144u, 176u, five);
      let j = i % 256u;
      let chunk = j / 64u;          // 64 values: 32 low nibbles, then 32 high ones of the same 32 bytes
      let hi = (j % 64u) >= 32u;
      let l = j % 32u;
      let sm = scale_min_k4(o + 4u, chunk * 2u + select(0u, 1u, hi));
      let b = byte_at(o + select(16u, 48u, five) + chunk * 32u + l);
      var q = select(b & 0xfu, b >> 4u, hi);
      if (five) {
        let bit = chunk * 2u + select(0u, 1u, hi);
        q = q + select(0u, 16u, ((byte_at(o + 16u + l) >> bit) & 1u) != 0u);
      }
      let d1 = half_at(o) * f32(sm.x);
      let m1 = half_at(o + 2u) * f32(sm.y);
      return d1 * f32(q) - m1;
    }
    case 14u: {   // Q6_K: ql[128], qh[64], scales[16] int8, d
      let o = (i / 256u) * 210u;
      let j = i % 256u;
      let half = j / 128u;          // two halves of 128 values
      let r = (j % 128u) / 32u;     // row 0..3 of 32 within the half
      let l = j % 32u;
      let ql = byte_at(o + half * 64u + l + select(0u, 32u, r == 1u || r == 3u));
      let lo = select(ql & 0xfu, ql >> 4u, r >= 2u);
      let hb = (byte_at(o + 128u + half * 32u + l) >> (2u * r)) & 3u;
      let q = i32(lo | (hb << 4u)) - 32;
      let sc = i8_at(o + 192u + half * 8u + l / 16u + 2u * r);
      return (half_at(o + 208u) * f32(sc)) * f32(q);
    }
    default: {
      return 0.0;
    }
  }
}

@compute @workgroup_size(WG)
fn dequant(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * (nwg.x * WG);
  if (i >= p.n) {
    return;
  }
  out[p.out_off + i] = T(value(i));
}
