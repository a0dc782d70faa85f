// Reductions over the last dim: sum, mean, max (entry `reduce`, OP) and argmax (entry `argmax`, f32 indices,
// the lowest index among equal maxima). Wrapper: src/engine/ops/reduce.ts; reference:
// test/engine/reference/reduce.ts. Header: `alias T = f32;` or `enable f16; alias T = f16;`. Sums in f32.
//
// x (rows..., N) is any strided view (rank <= 8); out (rows...) contiguous from element out_off. One workgroup per row (index
// wid.x + wid.y * num_workgroups.x): each thread folds a strided slice of the row, then a tree in
// workgroup memory.
//
// Bindings: 0 params, 1 out (T for reduce, f32 for argmax), 2 x.

override OP: u32 = 0u;    // 0 sum, 1 mean, 2 max
override WG: u32 = 64u;   // a power of two

struct Params {
  rows: u32, N: u32, rank: u32, x_off: u32,   // rank counts the leading (row) dims
  n_str: u32, out_off: u32, _p1: u32, _p2: u32,   // out_off: out's element offset
  shape: array<vec4<u32>, 2>,                 // leading dims, outermost first
  strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(1) var<storage, read_write> out_idx: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<T>;

var<workgroup> red: array<f32, WG>;
var<workgroup> red_i: array<u32, WG>;

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

fn combine(a: f32, b: f32) -> f32 {
  if (OP == 2u) { return max(a, b); }
  return a + b;
}

@compute @workgroup_size(WG)
fn reduce(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = wid.x + wid.y * nwg.x;   // uniform per workgroup
  if (row >= p.rows) { return; }
  let base = row_base(row);
  var acc = select(0.0, -3.4028234e38, OP == 2u);
  for (var i = lid.x; i < p.N; i += WG) { acc = combine(acc, f32(x[base + i * p.n_str])); }
  red[lid.x] = acc;
  for (var s = WG / 2u; s > 0u; s /= 2u) {
    workgroupBarrier();
    if (lid.x < s) { red[lid.x] = combine(red[lid.x], red[lid.x + s]); }
  }
  if (lid.x == 0u) {
    var y = red[0];
    if (OP == 1u) { y /= f32(p.N); }
    out[p.out_off + row] = T(y);
  }
}

@compute @workgroup_size(WG)
fn argmax(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }
  let base = row_base(row);
  var best = -3.4028234e38;
  var bi = 0xffffffffu;
  for (var i = lid.x; i < p.N; i += WG) {
    let v = f32(x[base + i * p.n_str]);
    if (bi == 0xffffffffu || v > best) { best = v; bi = i; }   // i rises: the first max is kept
  }
  red[lid.x] = best;
  red_i[lid.x] = bi;
  for (var s = WG / 2u; s > 0u; s /= 2u) {
    workgroupBarrier();
    if (lid.x < s) {
      let ov = red[lid.x + s];
      let oi = red_i[lid.x + s];
      let mine = red_i[lid.x];
      if (oi != 0xffffffffu && (mine == 0xffffffffu || ov > red[lid.x] || (ov == red[lid.x] && oi < mine))) {
        red[lid.x] = ov;
        red_i[lid.x] = oi;
      }
    }
  }
  if (lid.x == 0u) { out_idx[p.out_off + row] = f32(red_i[0]); }
}
