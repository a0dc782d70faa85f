// Unary math: out = f(clamp(x + shift, lo, hi)) (the clamp only when bounds are given). Wrapper: src/engine/ops/unary.ts; CPU reference:
// test/engine/reference/unary.ts. Header (prepended): `alias T = f32;` or `enable f16; alias T = f16;`.
// Math is done in f32 and rounded to T once.
//
// Bindings: 0 params, 1 out (contiguous), 2 x (any strided view). One thread per output element;
// index = gid.x + gid.y * (num_workgroups.x * WG) (see grid1d()).

override OP: u32 = 0u;         // 0 identity, 1 relu, 2 sigmoid, 3 tanh, 4 exp, 5 log, 6 sqrt, 7 abs, 8 square, 9 elu
override CONTIG: bool = false; // x contiguous with out's shape: skip the index math
override CLAMP: bool = false;  // apply clamp(., lo, hi) (off: inf and NaN pass through untouched)
override WG: u32 = 256u;

struct Params {
  n: u32,          // elements
  rank: u32,       // dims used in shape/strides (<= 8)
  x_off: u32,      // element offset of x in its storage
  out_off: u32,    // element offset of out (a contiguous view, possibly of a bigger tensor)
  shift: f32,      // added before the clamp
  lo: f32,         // clamp bounds (only with CLAMP; an open side is +-3.4e38)
  hi: f32,
  alpha: f32,      // ELU's alpha (OP 9 only)
  shape: array<vec4<u32>, 2>,   // outermost first
  x_str: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> x: array<T>;

// exp(v) - 1 without the cancellation near 0: for |v| < 0.5 a Taylor polynomial to v^9 in Horner form (truncation
// below 0.5^10 / 10! = 3e-10, far under f32's half ulp of |v| / 2), else exp(v) - 1 directly.
fn expm1(v: f32) -> f32 {
  if (abs(v) < 0.5) {
    var s = 1.0 + v / 9.0;
    s = 1.0 + v / 8.0 * s;
    s = 1.0 + v / 7.0 * s;
    s = 1.0 + v / 6.0 * s;
    s = 1.0 + v / 5.0 * s;
    s = 1.0 + v / 4.0 * s;
    s = 1.0 + v / 3.0 * s;
    s = 1.0 + v / 2.0 * s;
    return v * s;
  }
  return exp(v) - 1.0;
}

fn apply(v: f32) -> f32 {
  switch OP {
    case 0u: { return v; }
    case 1u: { return max(v, 0.0); }
    // exp(-v) overflows to inf for v < -88 and 1 / inf = 0: the right limit.
    case 2u: { return 1.0 / (1.0 + exp(-v)); }
    // WGSL's tanh may lose accuracy or overflow inside for large |v|; tanh(+-15) is +-1 in f32.
    case 3u: { return tanh(clamp(v, -15.0, 15.0)); }
    case 4u: { return exp(v); }
    case 5u: { return log(v); }
    case 6u: { return sqrt(v); }
    case 7u: { return abs(v); }
    // ELU: v for v > 0, alpha * (e^v - 1) otherwise (exp underflows to 0 for v < -88: -alpha; NaN stays NaN).
    case 9u: { return select(p.alpha * expm1(v), v, v > 0.0); }
    case 8u: { return v * v; }
    default: { return v; }
  }
}

fn dim(v: array<vec4<u32>, 2>, d: u32) -> u32 {
  return v[d / 4u][d % 4u];
}

@compute @workgroup_size(WG)
fn unary(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) { return; }
  var ix = p.x_off + i;
  if (!CONTIG) {
    var rem = i;
    ix = p.x_off;
    for (var d = i32(p.rank) - 1; d >= 0; d--) {
      let s = dim(p.shape, u32(d));
      ix += (rem % s) * dim(p.x_str, u32(d));
      rem = rem / s;
    }
  }
  var v = f32(x[ix]) + p.shift;
  if (CLAMP) { v = clamp(v, p.lo, p.hi); }
  out[p.out_off + i] = T(apply(v));
}
