// Activations: GELU (erf, tanh), SiLU; gated units (SwiGLU, GeGLU: act(gate) * up); snake and snake-beta.
// Wrapper: src/engine/ops/activation.ts; CPU reference: test/engine/reference/activation.ts.
// Math in f32, rounded to T once. Inputs are strided views (rank <= 8); out is contiguous. One thread per
// output element; index = gid.x + gid.y * (num_workgroups.x * WG).
//
// Entries (bindings: 0 params, 1 out, then inputs):
//   unary: out = act(a)                                  (2 a)
//   glu:   out = act(a) * b                              (2 a = gate, 3 b = up; both [..., F] views, so the
//                                                        halves of one [..., 2F] tensor are just slices)
//   snake: out = x + 1/(beta + 1e-9) * sin(alpha x)^2    (2 a = x, 3 alpha [C], 4 beta [C]; C is dim cdim;
//          beta = alpha unless SNAKE_BETA; LOG_SCALE: alpha = exp(alpha), beta = exp(beta), as BigVGAN stores them)

override ACT: u32 = 0u;           // 0 GELU (erf), 1 GELU (tanh approximation), 2 SiLU
override SNAKE_BETA: bool = false;
override LOG_SCALE: bool = false;
override WG: u32 = 256u;

struct Params {
  n: u32,
  rank: u32,
  cdim: u32,   // snake: the channel dim
  a_off: u32,
  b_off: u32,
  b_cstr: u32, // snake: alpha stride
  c_off: u32,
  c_cstr: u32, // snake: beta stride
  shape: array<vec4<u32>, 2>,
  a_str: array<vec4<u32>, 2>,
  b_str: array<vec4<u32>, 2>, // glu: up's strides
  out_off: u32,                // out's element offset (a contiguous view, possibly of a bigger tensor)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> a: array<T>;
@group(0) @binding(3) var<storage, read> b: array<T>;
@group(0) @binding(4) var<storage, read> c: array<T>;

fn dim8(v: array<vec4<u32>, 2>, d: u32) -> u32 {
  return v[d / 4u][d % 4u];
}

// erf with |error| < 1.2e-7 (Numerical Recipes' erfc Chebyshev fit), enough for f32 GELU.
fn erf_(x: f32) -> f32 {
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
          t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return select(r - 1.0, 1.0 - r, x >= 0.0);
}

fn act(x: f32) -> f32 {
  switch ACT {
    case 0u: { return 0.5 * x * (1.0 + erf_(x * 0.7071067811865476)); }
    case 1u: {
      // tanh written out, with the argument clamped: tanh(15) is 1 in f32 and exp stays finite
      let u = clamp(0.7978845608028654 * (x + 0.044715 * x * x * x), -15.0, 15.0);
      let e2 = exp(2.0 * u);
      return 0.5 * x * (1.0 + (e2 - 1.0) / (e2 + 1.0));
    }
    default: { return x / (1.0 + exp(-x)); }
  }
}

fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

@compute @workgroup_size(WG)
fn unary(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  if (i >= p.n) { return; }
  var rem = i;
  var ia = p.a_off;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let s = dim8(p.shape, u32(d));
    ia += (rem % s) * dim8(p.a_str, u32(d));
    rem = rem / s;
  }
  out[p.out_off + i] = T(act(f32(a[ia])));
}

@compute @workgroup_size(WG)
fn glu(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  if (i >= p.n) { return; }
  var rem = i;
  var ia = p.a_off;
  var ib = p.b_off;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let s = dim8(p.shape, u32(d));
    let k = rem % s;
    rem = rem / s;
    ia += k * dim8(p.a_str, u32(d));
    ib += k * dim8(p.b_str, u32(d));
  }
  out[p.out_off + i] = T(act(f32(a[ia])) * f32(b[ib]));
}

@compute @workgroup_size(WG)
fn snake(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  if (i >= p.n) { return; }
  var rem = i;
  var ia = p.a_off;
  var ch = 0u;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let s = dim8(p.shape, u32(d));
    let k = rem % s;
    rem = rem / s;
    ia += k * dim8(p.a_str, u32(d));
    if (u32(d) == p.cdim) { ch = k; }
  }
  let x = f32(a[ia]);
  var al = f32(b[p.b_off + ch * p.b_cstr]);
  var be = al;
  if (SNAKE_BETA) { be = f32(c[p.c_off + ch * p.c_cstr]); }
  if (LOG_SCALE) {
    al = exp(al);
    be = exp(be);
  }
  let sn = sin(al * x);
  out[p.out_off + i] = T(x + sn * sn / (be + 1e-9));
}
