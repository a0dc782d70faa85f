// Rotary position embedding applied to x [B, L, H, D] (strided view) with f32 cos/sin tables [Bt, L, P]
// (Bt = 1 broadcast or B; built on the CPU by src/engine/rope-tables.ts). The first R = 2P head dims are
// rotated, the remaining D - R pass through unchanged. Wrapper: src/engine/ops/rope.ts; CPU reference:
// test/engine/reference/rope.ts.
//   rotate-half (INTERLEAVED = false, GPT-NeoX / Qwen): pair j = (d_j, d_{j+P})
//   interleaved pairs (INTERLEAVED = true, GPT-J / Flux / Qwen-Image): pair j = (d_{2j}, d_{2j+1})
//   (a, b) -> (a cos - b sin, b cos + a sin)
// One thread per output element (each reads its own value and its partner); out is contiguous.
// Bindings: 0 params, 1 out, 2 x, 3 cos, 4 sin.

override INTERLEAVED: bool = false;
override WG: u32 = 256u;

struct Params {
  n: u32,
  l: u32,
  h: u32,
  d: u32,
  pairs: u32,
  x_off: u32,
  c_off: u32,
  s_off: u32,
  x_str: vec4<u32>,   // strides of x's B, L, H, D
  t_str: vec4<u32>,   // strides of the tables' B (0 = broadcast), L, P
  out_off: u32,       // out's element offset (a contiguous view, possibly of a bigger tensor)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> x: array<T>;
@group(0) @binding(3) var<storage, read> cos_t: array<f32>;
@group(0) @binding(4) var<storage, read> sin_t: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) { return; }
  let d = i % p.d;
  let hh = (i / p.d) % p.h;
  let l = (i / (p.d * p.h)) % p.l;
  let b = i / (p.d * p.h * p.l);
  let row = p.x_off + b * p.x_str.x + l * p.x_str.y + hh * p.x_str.z;
  let v = f32(x[row + d * p.x_str.w]);
  if (d >= 2u * p.pairs) {
    out[p.out_off + i] = T(v);
    return;
  }
  var j: u32;
  var partner: u32;
  var sign: f32; // -1 for the first of a pair (a cos - b sin), +1 for the second (b cos + a sin)
  if (INTERLEAVED) {
    j = d / 2u;
    let first = (d % 2u) == 0u;
    partner = select(d - 1u, d + 1u, first);
    sign = select(1.0, -1.0, first);
  } else {
    let first = d < p.pairs;
    j = select(d - p.pairs, d, first);
    partner = select(d - p.pairs, d + p.pairs, first);
    sign = select(1.0, -1.0, first);
  }
  let t = b * p.t_str.x + l * p.t_str.y + j * p.t_str.z;
  let o = f32(x[row + partner * p.x_str.w]);
  out[p.out_off + i] = T(v * cos_t[p.c_off + t] + sign * o * sin_t[p.s_off + t]);
}
