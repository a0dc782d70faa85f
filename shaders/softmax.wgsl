// Softmax over the last dim, statistics (max, sum of exp) in f32. Wrapper: src/engine/ops/softmax.ts;
// reference: test/engine/reference/reduce.ts. Header: `alias T = f32;` or `enable f16; alias T = f16;`.
//
// x (rows..., N) any strided view (rank <= 8); out (rows..., N) contiguous from element out_off. One workgroup per row (index
// wid.x + wid.y * num_workgroups.x); three passes over the row: max, sum of exp(x - max), write.
//
// Bindings: 0 params, 1 out, 2 x.

override WG: u32 = 64u;   // a power of two

struct Params {
  rows: u32, N: u32, rank: u32, x_off: u32,
  n_str: u32, out_off: u32, _p1: u32, _p2: u32,   // out_off: out's element offset
  shape: array<vec4<u32>, 2>,
  strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> x: array<T>;

var<workgroup> red: array<f32, WG>;

fn dim(v: array<vec4<u32>, 2>, d: u32) -> u32 {
  return v[d / 4u][d % 4u];
}

fn row_base(row: u32) -> u32 {
  var rem = row;
  var off = p.x_off;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let s = dim(p.shape, u32(d));
    off += (rem % s) * dim(p.strides, u32(d));
    rem /= s;
  }
  return off;
}

// Tree over red[]; every thread returns the result. is_max selects max, else sum.
fn tree(lid: u32, v: f32, is_max: bool) -> f32 {
  workgroupBarrier();   // red[] may still be read by the previous tree
  red[lid] = v;
  for (var s = WG / 2u; s > 0u; s /= 2u) {
    workgroupBarrier();
    if (lid < s) { red[lid] = select(red[lid] + red[lid + s], max(red[lid], red[lid + s]), is_max); }
  }
  workgroupBarrier();
  return red[0];
}

@compute @workgroup_size(WG)
fn softmax(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }
  let base = row_base(row);
  var m = -3.4028234e38;
  for (var i = lid.x; i < p.N; i += WG) { m = max(m, f32(x[base + i * p.n_str])); }
  m = tree(lid.x, m, true);
  var s = 0.0;
  for (var i = lid.x; i < p.N; i += WG) { s += exp(f32(x[base + i * p.n_str]) - m); }
  s = tree(lid.x, s, false);
  let inv = 1.0 / s;
  let ob = p.out_off + row * p.N;
  for (var i = lid.x; i < p.N; i += WG) { out[ob + i] = T(exp(f32(x[base + i * p.n_str]) - m) * inv); }
}
