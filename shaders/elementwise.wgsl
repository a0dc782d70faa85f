// Elementwise and broadcast arithmetic. Wrapper: src/engine/ops/elementwise.ts; CPU reference:
// test/engine/reference/elementwise.ts. Header (prepended): `alias T = f32;` or `enable f16; alias T = f16;`.
// Math is done in f32 and rounded to T once.
//
// Bindings: 0 params, 1 out (contiguous from element out_off), 2 a, 3 b. Strides are in elements; 0 on broadcast dims.
// One thread per output element; index = gid.x + gid.y * (num_workgroups.x * WG) (see grid1d()).

override OP: u32 = 0u;        // 0 add, 1 sub, 2 mul, 3 div, 4 rsub (s - a), 5 rdiv (s / a), 6 max, 7 min
override CONTIG: bool = false; // a, b and out all contiguous with out's shape: skip the index math
override WG: u32 = 256u;

struct Params {
  n: u32,          // output elements
  rank: u32,       // dims used in shape/strides (<= 8)
  a_off: u32,      // element offsets of a and b in their storage
  b_off: u32,
  scalar: f32,     // the b operand of `scalar`
  out_off: u32,    // element offset of out (a contiguous view, possibly of a bigger tensor)
  _pad1: u32, _pad2: u32,
  shape: array<vec4<u32>, 2>,   // output shape, outermost first
  a_str: array<vec4<u32>, 2>,
  b_str: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> a: array<T>;
@group(0) @binding(3) var<storage, read> b: array<T>;

fn apply(x: f32, y: f32) -> f32 {
  switch OP {
    case 0u: { return x + y; }
    case 1u: { return x - y; }
    case 2u: { return x * y; }
    case 3u: { return x / y; }
    case 4u: { return y - x; }
    case 5u: { return y / x; }
    case 6u: { return max(x, y); }
    default: { return min(x, y); }
  }
}

fn dim(v: array<vec4<u32>, 2>, d: u32) -> u32 {
  return v[d / 4u][d % 4u];
}

// Storage indices of a and b for output element i (row-major over p.shape).
fn source_index(i: u32) -> vec2<u32> {
  var rem = i;
  var ia = p.a_off;
  var ib = p.b_off;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let s = dim(p.shape, u32(d));
    let c = rem % s;
    rem = rem / s;
    ia += c * dim(p.a_str, u32(d));
    ib += c * dim(p.b_str, u32(d));
  }
  return vec2<u32>(ia, ib);
}

fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

// out = a OP b, broadcast and strided.
@compute @workgroup_size(WG)
fn binary(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  if (i >= p.n) { return; }
  var ia = p.a_off + i;
  var ib = p.b_off + i;
  if (!CONTIG) {
    let s = source_index(i);
    ia = s.x;
    ib = s.y;
  }
  out[p.out_off + i] = T(apply(f32(a[ia]), f32(b[ib])));
}

// out = a OP p.scalar (OP 4/5 put the scalar first).
@compute @workgroup_size(WG)
fn scalar(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  if (i >= p.n) { return; }
  var ia = p.a_off + i;
  if (!CONTIG) { ia = source_index(i).x; }
  out[p.out_off + i] = T(apply(f32(a[ia]), p.scalar));
}

// out = a (strided view -> contiguous copy, bit exact).
@compute @workgroup_size(WG)
fn copy(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  if (i >= p.n) { return; }
  out[p.out_off + i] = a[source_index(i).x];
}
