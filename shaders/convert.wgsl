// Checkpoint element conversion at load: BF16 or F32 words as read from the file -> f16, BF16 -> f32, so the raw
// bytes cross to the GPU and the conversion runs there, not in a JS loop on the main thread. Wrapper:
// src/engine/ops/convert.ts; CPU reference: src/engine/dtype.ts (f32ToF16Bits, bf16ToF16Table), which load.ts used
// on every chunk before. Integer arithmetic only (no f16 feature, no pack2x16float, whose rounding and overflow WGSL
// leaves to the driver), so the bits are the CPU's: round to nearest even, subnormals, ±0, ±inf, NaN -> quiet NaN
// with its sign (0x7e00 | sgn); a finite value beyond f16's range (65504, or rounding past it) is written as ±inf and
// reported in `status`, so the loader refuses the tensor by name as the CPU path does.
//
// Bindings: 0 params, 1 out (contiguous; values written from out_off), 2 src: the file's bytes read as u32 words
// (little-endian; padded to a whole word), 3 status (to_f16 only): [0] the largest |bits| of a positive value beyond
// f16's range, [1] of a negative one (f32 bits; 0: none). Index = gid.x + gid.y * (num_workgroups.x * WG) (grid1d()).

override SRC: u32 = 0u;   // to_f16's source: 0 BF16, 1 F32
override WG: u32 = 256u;

struct Params {
  n: u32,        // elements to convert
  out_off: u32,  // element offset of the first one in out (even for to_f16: a thread writes one word, two halves)
  _p0: u32,
  _p1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> src: array<u32>;
@group(0) @binding(3) var<storage, read_write> status: array<atomic<u32>, 4>;

// f32 bits -> f16 bits; x: the half, y: 1 where a finite value overflowed. dtype.ts f32ToF16Bits step for step, its
// branches made selects: every invocation takes the same path, which is what a SIMD lane (and llvmpipe) runs fast.
fn f16_of(x: u32) -> vec2<u32> {
  let sgn = (x >> 16u) & 0x8000u;
  let ex = (x >> 23u) & 0xffu;
  let mant = x & 0x7fffffu;
  let e = i32(ex) - 127 + 15;
  // normal half: 10 mantissa bits, the rest rounded to nearest even; a carry out of the mantissa bumps the exponent
  // (the sum does it: 0x3ff + 1 carries into the exponent field), and a carry into exponent 31 is an overflow
  let m = mant >> 13u;
  let rest = mant & 0x1fffu;
  let up = select(0u, 1u, rest > 0x1000u || (rest == 0x1000u && (m & 1u) != 0u));
  let normal = (u32(max(e, 0)) << 10u) + m + up;
  // subnormal half (e <= 0): the implicit 1 shifted in, rounded to nearest even; below e = -10 it is zero (a shift of
  // 25 leaves nothing of a 24-bit mantissa and no round-up)
  let full = mant | 0x800000u;
  let shift = u32(clamp(14 - e, 14, 25));
  let halfway = 1u << (shift - 1u);
  let sm = full >> shift;
  let srest = full & ((1u << shift) - 1u);
  let sub = sm + select(0u, 1u, srest > halfway || (srest == halfway && (sm & 1u) != 0u));
  var h = select(normal, sub, e <= 0);
  let special = ex == 0xffu;
  let over = !special && (e >= 0x1f || h >= 0x7c00u);
  h = select(h, 0x7c00u, over);
  h = select(h, 0x7c00u | select(0u, 0x200u, mant != 0u), special); // inf / NaN
  return vec2<u32>(sgn | h, select(0u, 1u, over));
}

fn report(x: u32, over: u32) {
  if (over != 0u) {
    atomicMax(&status[(x >> 31u) & 1u], x & 0x7fffffffu);
  }
}

// one thread per output word: halves 2w and 2w + 1 of the dispatch (the second kept as it was past n)
@compute @workgroup_size(WG)
fn to_f16(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = gid.x + gid.y * (nwg.x * WG);
  let i = 2u * w;
  if (i >= p.n) {
    return;
  }
  let o = (p.out_off >> 1u) + w;
  let pair = i + 1u < p.n;
  var x0: u32;
  var x1 = 0u;
  if (SRC == 1u) {
    x0 = src[i];
    if (pair) {
      x1 = src[i + 1u];
    }
  } else {
    let word = src[w];
    x0 = word << 16u;
    x1 = word & 0xffff0000u;
  }
  let lo = f16_of(x0);
  let hi = f16_of(x1);
  if ((lo.y | hi.y) != 0u) {
    report(x0, lo.y);
    report(x1, select(0u, hi.y, pair));
  }
  var top = hi.x;
  if (!pair) {
    top = out[o] >> 16u;
  }
  out[o] = lo.x | (top << 16u);
}

// one thread per source word: BF16 elements 2w and 2w + 1 -> two f32 (exact: bf16 is the top half of an f32)
@compute @workgroup_size(WG)
fn bf16_to_f32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = gid.x + gid.y * (nwg.x * WG);
  let i = 2u * w;
  if (i >= p.n) {
    return;
  }
  let word = src[w];
  out[p.out_off + i] = word << 16u;
  if (i + 1u < p.n) {
    out[p.out_off + i + 1u] = word & 0xffff0000u;
  }
}
