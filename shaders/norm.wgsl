// Normalisation: LayerNorm / RMSNorm over the last dim (with fused affine, AdaLN modulation and gated
// residual) and GroupNorm on channels-last data (with fused SiLU). Wrapper: src/engine/ops/norm.ts;
// CPU reference: test/engine/reference/norm.ts. Statistics are f32 (two passes: mean, then the mean of
// squared deviations, which stays accurate when |mean| >> std); the result is rounded to T once.
//
// Entry `rows` (one workgroup per row of D elements; row = wid.x + wid.y * nwg.x):
//   y   = (x - mean) * rstd            (RMS: x * rstd, rstd = 1/sqrt(mean(x^2) + eps))
//   y   = y * w + b                    (HAS_W / HAS_B: weight/bias [D])
//   y   = y * (scale_offset + scale) + shift   (HAS_SCALE / HAS_SHIFT: AdaLN modulation)
//   out = r + gate * y                 (HAS_RES, HAS_GATE)
// x has up to 4 leading dims (lead, outermost first) and is strided. Modulation tensors are indexed by
// the leading coords, except that the last leading dim (the sequence L) is mapped to a segment index
// (segments = consecutive runs along L, e.g. text | audio | video rows): their strides are given for
// [...lead[:-1], S] (0 where broadcast). Bindings: 0 params, 1 out (contiguous [rows, D] from element offs[7]), 2 x, 3 r,
// 4 w, 5 b, 6 scale, 7 shift, 8 gate (absent ones are bound to x and never read).
//
// Entries `gn_stats` / `gn_apply`: GroupNorm over x [B, ...spatial(<=6 dims), C] (strided), G groups of
// C/G channels. gn_stats: one workgroup per (b, g) writes (mean, rstd) as f32 to stats[2*(b*G+g)];
// gn_apply: one thread per output element (contiguous), y = (x - mean) * rstd * w[c] + b[c], then SiLU.

override RMS: bool = false;
override HAS_W: bool = false;
override HAS_B: bool = false;
override HAS_SCALE: bool = false;
override HAS_SHIFT: bool = false;
override HAS_RES: bool = false;
override HAS_GATE: bool = false;
override SILU: bool = false;
override WG: u32 = 256u; // power of two (tree reduction)

struct Params {
  rows: u32,
  d: u32,
  lead_rank: u32,
  nseg: u32,
  eps: f32,
  scale_offset: f32,
  _p0: u32,
  _p1: u32,
  offs: array<vec4<u32>, 2>,    // element offsets: x, r, w, b | scale, shift, gate, out
  dstr: array<vec4<u32>, 2>,    // strides along D, same order
  lead: vec4<u32>,              // leading dims of x (unused slots 1)
  x_str: vec4<u32>,             // x strides of the leading dims
  r_str: vec4<u32>,
  sc_str: vec4<u32>,            // modulation strides for [...lead[:-1], segment]
  sh_str: vec4<u32>,
  g_str: vec4<u32>,
  seg_end: array<vec4<u32>, 2>, // exclusive end of each segment along the last leading dim
}

struct GnParams {
  n: u32,         // output elements
  c: u32,         // channels
  groups: u32,
  cpg: u32,       // channels per group
  spatial: u32,   // product of the spatial dims
  rank: u32,      // rank of x (2..8)
  eps: f32,
  b_str: u32,      // bias stride along C
  offs: vec4<u32>, // x, w, b offsets; weight stride along C in .w
  shape: array<vec4<u32>, 2>,
  x_str: array<vec4<u32>, 2>,
  out_off: u32,    // gn_apply: out's element offset (a contiguous view, possibly of a bigger tensor)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(0) var<uniform> gp: GnParams;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(1) var<storage, read_write> stats_out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<T>;
@group(0) @binding(3) var<storage, read> r: array<T>;
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<T>;
@group(0) @binding(5) var<storage, read> b: array<T>;
@group(0) @binding(6) var<storage, read> scale: array<T>;
@group(0) @binding(7) var<storage, read> shift: array<T>;
@group(0) @binding(8) var<storage, read> gate: array<T>;

var<workgroup> red: array<f32, WG>;

// Sum of v over the workgroup (every invocation must call it; returns the same value to all).
fn wg_sum(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (lid < s) { red[lid] = red[lid] + red[lid + s]; }
    workgroupBarrier();
  }
  let total = red[0];
  workgroupBarrier();
  return total;
}

fn segment(l: u32) -> u32 {
  var s = 0u;
  for (var k = 0u; k + 1u < p.nseg; k++) {
    if (l >= p.seg_end[k / 4u][k % 4u]) { s = k + 1u; }
  }
  return s;
}

@compute @workgroup_size(WG)
fn rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }
  // Storage offsets of this row in x, r and the modulation tensors.
  var xo = p.offs[0].x;
  var ro = p.offs[0].y;
  var so = p.offs[1].x;
  var ho = p.offs[1].y;
  var go = p.offs[1].z;
  var rem = row;
  for (var k = i32(p.lead_rank) - 1; k >= 0; k--) {
    let n = p.lead[k];
    let c = rem % n;
    rem = rem / n;
    xo += c * p.x_str[k];
    ro += c * p.r_str[k];
    var m = c;
    if (u32(k) + 1u == p.lead_rank) { m = segment(c); }
    so += m * p.sc_str[k];
    ho += m * p.sh_str[k];
    go += m * p.g_str[k];
  }
  let xd = p.dstr[0].x;
  let inv_d = 1.0 / f32(p.d);

  var mean = 0.0;
  if (!RMS) {
    var s = 0.0;
    for (var i = lid; i < p.d; i += WG) { s += f32(x[xo + i * xd]); }
    mean = wg_sum(s, lid) * inv_d;
  }
  var q = 0.0;
  for (var i = lid; i < p.d; i += WG) {
    let v = f32(x[xo + i * xd]) - mean;
    q += v * v;
  }
  let rstd = 1.0 / sqrt(wg_sum(q, lid) * inv_d + p.eps);

  for (var i = lid; i < p.d; i += WG) {
    var y = (f32(x[xo + i * xd]) - mean) * rstd;
    if (HAS_W) { y *= f32(w[p.offs[0].z + i * p.dstr[0].z]); }
    if (HAS_B) { y += f32(b[p.offs[0].w + i * p.dstr[0].w]); }
    if (HAS_SCALE) { y *= p.scale_offset + f32(scale[so + i * p.dstr[1].x]); }
    if (HAS_SHIFT) { y += f32(shift[ho + i * p.dstr[1].y]); }
    if (HAS_GATE) { y *= f32(gate[go + i * p.dstr[1].z]); }
    if (HAS_RES) { y += f32(r[ro + i * p.dstr[0].y]); }
    out[p.offs[1].w + row * p.d + i] = T(y);
  }
}

fn dim8(v: array<vec4<u32>, 2>, d: u32) -> u32 {
  return v[d / 4u][d % 4u];
}

// Storage index of x[b, s, c] (s = flat index over the spatial dims).
fn gn_index(bi: u32, s: u32, c: u32) -> u32 {
  var idx = gp.offs.x + bi * dim8(gp.x_str, 0u) + c * dim8(gp.x_str, gp.rank - 1u);
  var rem = s;
  for (var d = gp.rank - 2u; d >= 1u; d--) {
    let n = dim8(gp.shape, d);
    idx += (rem % n) * dim8(gp.x_str, d);
    rem = rem / n;
  }
  return idx;
}

@compute @workgroup_size(WG)
fn gn_stats(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let bi = wid.x / gp.groups;
  let c0 = (wid.x % gp.groups) * gp.cpg;
  let count = gp.spatial * gp.cpg;
  var s = 0.0;
  for (var j = lid; j < count; j += WG) { s += f32(x[gn_index(bi, j / gp.cpg, c0 + j % gp.cpg)]); }
  let mean = wg_sum(s, lid) / f32(count);
  var q = 0.0;
  for (var j = lid; j < count; j += WG) {
    let v = f32(x[gn_index(bi, j / gp.cpg, c0 + j % gp.cpg)]) - mean;
    q += v * v;
  }
  let var_ = wg_sum(q, lid) / f32(count);
  if (lid == 0u) {
    stats_out[2u * wid.x] = mean;
    stats_out[2u * wid.x + 1u] = 1.0 / sqrt(var_ + gp.eps);
  }
}

@compute @workgroup_size(WG)
fn gn_apply(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= gp.n) { return; }
  let c = i % gp.c;
  let s = (i / gp.c) % gp.spatial;
  let bi = i / (gp.c * gp.spatial);
  let sg = 2u * (bi * gp.groups + c / gp.cpg);
  var y = (f32(x[gn_index(bi, s, c)]) - stats[sg]) * stats[sg + 1u];
  if (HAS_W) { y *= f32(w[gp.offs.y + c * gp.offs.w]); }
  if (HAS_B) { y += f32(b[gp.offs.z + c * gp.b_str]); }
  if (SILU) { y = y / (1.0 + exp(-y)); }
  out[gp.out_off + i] = T(y);
}
