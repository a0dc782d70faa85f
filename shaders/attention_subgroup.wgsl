// Tensor-core flash attention: out = softmax(scale * Q K^T + mask) V with Q K^T and P V on the subgroup-matrix
// builtins (f16 x f16 -> f32; VK_KHR_cooperative_matrix on NVIDIA) and the online softmax in f32 between them.
// Same contract, Params and bindings as attention.wgsl (every mask, GQA, query offset, kv_len, window, views);
// selected by src/engine/ops/attention_subgroup.ts for f16 where the adapter has the feature.
//
// The `// tile` consts are rewritten by the wrapper (matrix types and register arrays need const sizes):
//   SM_M x SM_N x SM_K the adapter's matrix config, SG its fixed subgroup size; NSG subgroups per workgroup, each
//   owning SM_M query rows (BQ = NSG * SM_M rows of one (batch, head)); BKV keys per staged tile; D the head dim
//   (a multiple of SM_K and SM_N); staged f16 rows padded by PAD halves, f32 scratch rows by PAD / 2 floats
//   (16 bytes either way). VQ / VK / VV: that operand's head dim is contiguous and 8-aligned in memory (the
//   wrapper checks strides and offsets), so staging reads 8 halves as one vec4<u32>; otherwise one at a time.
//
// Per key tile, FlashAttention-2's order, each subgroup on its own rows:
//   1. the workgroup stages K and V (BKV x D, f16) in workgroup memory;
//   2. S = Q K^T (SM_M x BKV): Q's D / SM_K left fragments stay in registers from the start, K is read as the
//      right operand column-major; S goes to the subgroup's f32 scratch;
//   3. the softmax pass, lanes on elements: each query row is owned by LPR lanes (SG / SM_M, or 1 with RPL rows
//      per lane when SG < SM_M), which apply the mask and scale, reduce the row max and sum with subgroupShuffleXor,
//      rescale their share of the output accumulator (registers, f32) and write P = exp(s - m) as f16;
//   4. P V (SM_M x D) = P (left, from workgroup memory) x V (right), stored to the scratch, added to the
//      accumulator by the lanes that own each row.
// The accumulator never needs a matrix's element layout, which is opaque: it lives in the lanes, row-owned.
// Four workgroup barriers per tile; every loop around them is uniform (bounds from wid and params only).
//
// Subgroups: subgroup g (@builtin(subgroup_id)) owns rows g*SM_M..; its matrix offsets depend on g, which
// Tint's subgroup_matrix_uniformity check flags (see matmul_subgroup.wgsl), hence the diagnostic(off).
// Lavapipe: the emulated builtins of ops/subgroup_matrix_emulation.ts run this kernel's logic in CI
// (test/engine/attention_subgroup.test.ts).
//
// Bindings: 0 params, 1 out, 2 q, 3 k, 4 v (f16 pairs in vec4<u32>), 5 blk (f32 block ids; q when MASK != 2).
diagnostic(off, chromium.subgroup_matrix_uniformity);
enable chromium_experimental_subgroup_matrix;
enable subgroups;

const SM_M: u32 = 16u;   // tile
const SM_N: u32 = 16u;   // tile
const SM_K: u32 = 16u;   // tile
const SG: u32 = 32u;     // tile
const NSG: u32 = 2u;     // tile
const BKV: u32 = 32u;    // tile
const D: u32 = 128u;     // tile
const PAD: u32 = 8u;     // tile
const VQ: bool = true;   // tile
const VK: bool = true;   // tile
const VV: bool = true;   // tile
override MASK: u32 = 0u;   // 0 none, 1 causal, 2 block-causal

const NT: u32 = NSG * SG;
const BQ: u32 = NSG * SM_M;
const DS: u32 = D + PAD;                  // staged row stride (halves): KQs, Vs
const PS: u32 = BKV + PAD;                // Ps row stride (halves)
const SC: u32 = max(BKV, D) + PAD / 2u;   // scratch row stride (floats): S, then P V
const LPR: u32 = max(1u, SG / SM_M);      // lanes per query row in the softmax pass
const RPL: u32 = max(1u, SM_M / SG);      // query rows per lane
const DPL: u32 = D / LPR;                 // accumulator elements per row per lane: d = part + t * LPR
const KPL: u32 = BKV / LPR;               // scores per row per lane: j = part + t * LPR

//#include "common/attention_mask.wgsl"

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> q: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> k: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> blk: array<f32>;

var<workgroup> KQs: array<f16, max(BQ, BKV) * DS>;   // Q's rows at the start, then each K tile: (row, d)
var<workgroup> Vs: array<f16, BKV * DS>;             // (key, d)
var<workgroup> Ss: array<f32, NSG * SM_M * SC>;      // per subgroup (row, key) scores, then (row, d) P V
var<workgroup> Ps: array<f16, NSG * SM_M * PS>;      // per subgroup (row, key) probabilities

// One vec4<u32> (8 halves) of operand `which` (0 q, 1 k, 2 v) holding element e.
fn src8(which: u32, e: u32) -> vec4<u32> {
  if (which == 0u) { return q[e >> 3u]; }
  if (which == 1u) { return k[e >> 3u]; }
  return v[e >> 3u];
}

fn put(which: u32, i: u32, h: f16) {
  if (which == 2u) { Vs[i] = h; } else { KQs[i] = h; }
}

// Rows row0.. (nrows of them, positions < lim) of operand `which` at element base, row stride rstr, dim stride
// dstr, into KQs (q, k) or Vs (v) as (row, d) with stride DS; zero past lim.
fn stage(which: u32, tid: u32, base: u32, row0: u32, nrows: u32, lim: u32, rstr: u32, dstr: u32, vec: bool) {
  if (vec) {
    for (var u = tid; u < nrows * D / 8u; u += NT) {
      let r = u / (D / 8u);
      let c = (u % (D / 8u)) * 8u;
      var w = vec4<u32>(0u);
      if (row0 + r < lim) { w = src8(which, base + (row0 + r) * rstr + c); }
      let h = array<vec2<f16>, 4>(bitcast<vec2<f16>>(w.x), bitcast<vec2<f16>>(w.y), bitcast<vec2<f16>>(w.z), bitcast<vec2<f16>>(w.w));
      for (var x = 0u; x < 8u; x++) { put(which, r * DS + c + x, h[x >> 1u][x & 1u]); }
    }
  } else {
    for (var s = tid; s < nrows * D; s += NT) {
      let r = s / D;
      let d = s % D;
      var h = f16(0.0);
      if (row0 + r < lim) {
        let e = base + (row0 + r) * rstr + d * dstr;
        h = bitcast<vec2<f16>>(src8(which, e)[(e >> 1u) & 3u])[e & 1u];
      }
      put(which, r * DS + d, h);
    }
  }
}

// The maximum / sum over the LPR lanes owning a row (lanes lane % SM_M + i * SM_M); nothing to do when LPR is 1.
fn row_max(x: f32) -> f32 {
  var y = x;
  for (var o = SM_M; o < SG; o <<= 1u) { y = max(y, subgroupShuffleXor(y, o)); }
  return y;
}

fn row_sum(x: f32) -> f32 {
  var y = x;
  for (var o = SM_M; o < SG; o <<= 1u) { y += subgroupShuffleXor(y, o); }
  return y;
}

@compute @workgroup_size(NT)
fn attention(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let h = wid.y;
  let bz = wid.z;
  let hk = h / (p.Hq / p.Hkv);
  let q0 = wid.x * BQ;                  // the workgroup's first query row
  let sbase = sg * SM_M * SC;           // this subgroup's scratch
  let pbase = sg * SM_M * PS;           // and probabilities
  let part = lane / SM_M;               // which of its row's LPR lanes this one is (0 when SG <= SM_M)

  // Q (BQ x D) through KQs into registers: D / SM_K left fragments of this subgroup's rows.
  stage(0u, tid, p.q_off + bz * p.q_str.x + h * p.q_str.y, q0, BQ, p.Lq, p.q_str.z, p.q_str.w, VQ);
  workgroupBarrier();
  var qf: array<subgroup_matrix_left<f16, SM_K, SM_M>, D / SM_K>;
  for (var dk = 0u; dk < D / SM_K; dk++) {
    qf[dk] = subgroupMatrixLoad<subgroup_matrix_left<f16, SM_K, SM_M>>(&KQs, sg * SM_M * DS + dk * SM_K, false, DS);
  }
  workgroupBarrier();

  var m: array<f32, RPL>;     // per owned row: running max of scale * s (finite: exp(m - m_new) never sees inf - inf)
  var l: array<f32, RPL>;     // running sum of exp(scale * s - m)
  var o: array<f32, RPL * DPL>;   // unnormalised output, row i's d = part + t * LPR at o[i * DPL + t]
  for (var i = 0u; i < RPL; i++) { m[i] = -3.0e38; }

  // Keys outside [kstart, kend) are hidden from every row of the workgroup (uniform: wid and params only).
  var kend = min(p.Lk, p.kv_len);
  if (MASK == 1u) { kend = min(kend, min(q0 + BQ, p.Lq) + p.q_offset); }
  var kstart = 0u;
  if (p.window > 0u && q0 + p.q_offset + 1u > p.window) { kstart = q0 + p.q_offset + 1u - p.window; }
  let kb = p.k_off + bz * p.k_str.x + hk * p.k_str.y;
  let vb = p.v_off + bz * p.v_str.x + hk * p.v_str.y;

  for (var key0 = kstart; key0 < kend; key0 += BKV) {
    stage(1u, tid, kb, key0, BKV, p.Lk, p.k_str.z, p.k_str.w, VK);
    stage(2u, tid, vb, key0, BKV, p.Lk, p.v_str.z, p.v_str.w, VV);
    workgroupBarrier();

    // S = Q K^T: (k, n) = (d, key) of the (key, d) rows, read column-major
    for (var jn = 0u; jn < BKV / SM_N; jn++) {
      // zeroed explicitly: Dawn here keeps a bare `var s: T;` in a loop at its last iteration's value
      var s = subgroup_matrix_result<f32, SM_N, SM_M>();
      for (var dk = 0u; dk < D / SM_K; dk++) {
        let kt = subgroupMatrixLoad<subgroup_matrix_right<f16, SM_N, SM_K>>(&KQs, jn * SM_N * DS + dk * SM_K, true, DS);
        s = subgroupMatrixMultiplyAccumulate(qf[dk], kt, s);
      }
      subgroupMatrixStore(&Ss, sbase + jn * SM_N, s, false, SC);
    }
    workgroupBarrier();

    // online softmax on the lanes' rows: mask, scale, max, rescale, P
    for (var i = 0u; i < RPL; i++) {
      let r = lane % SM_M + i * SG;
      let qi = q0 + sg * SM_M + r;
      let qpos = qi + p.q_offset;
      let live = qi < p.Lq;
      var tmax = -3.0e38;
      for (var t = 0u; t < KPL; t++) {
        let j = part + t * LPR;
        if (live && visible(qpos, key0 + j)) { tmax = max(tmax, Ss[sbase + r * SC + j] * p.scale); }
      }
      let mn = max(m[i], row_max(tmax));
      let alpha = exp(m[i] - mn);
      var ls = 0.0;
      for (var t = 0u; t < KPL; t++) {
        let j = part + t * LPR;
        var pj = 0.0;
        if (live && visible(qpos, key0 + j)) { pj = exp(Ss[sbase + r * SC + j] * p.scale - mn); }
        Ps[pbase + r * PS + j] = f16(pj);
        ls += pj;
      }
      l[i] = l[i] * alpha + row_sum(ls);
      m[i] = mn;
      for (var t = 0u; t < DPL; t++) { o[i * DPL + t] *= alpha; }
    }
    workgroupBarrier();

    // P V: (SM_M x BKV) x (BKV x D) into the scratch, one result fragment per SM_N columns of D
    var pf = array<subgroup_matrix_left<f16, SM_K, SM_M>, BKV / SM_K>();
    for (var kk = 0u; kk < BKV / SM_K; kk++) {
      pf[kk] = subgroupMatrixLoad<subgroup_matrix_left<f16, SM_K, SM_M>>(&Ps, pbase + kk * SM_K, false, PS);
    }
    for (var dn = 0u; dn < D / SM_N; dn++) {
      var pv = subgroup_matrix_result<f32, SM_N, SM_M>();
      for (var kk = 0u; kk < BKV / SM_K; kk++) {
        let vt = subgroupMatrixLoad<subgroup_matrix_right<f16, SM_N, SM_K>>(&Vs, kk * SM_K * DS + dn * SM_N, false, DS);
        pv = subgroupMatrixMultiplyAccumulate(pf[kk], vt, pv);
      }
      subgroupMatrixStore(&Ss, sbase + dn * SM_N, pv, false, SC);
    }
    workgroupBarrier();

    for (var i = 0u; i < RPL; i++) {
      let r = lane % SM_M + i * SG;
      for (var t = 0u; t < DPL; t++) { o[i * DPL + t] += Ss[sbase + r * SC + part + t * LPR]; }
    }
    // The next tile's staging writes KQs and Vs, read only before the barrier above; its S store waits on the
    // barrier after that staging, by which time every lane has read the scratch.
  }

  for (var i = 0u; i < RPL; i++) {
    let qi = q0 + sg * SM_M + lane % SM_M + i * SG;
    if (qi >= p.Lq) { continue; }
    let inv = select(0.0, 1.0 / l[i], l[i] > 0.0);
    let ob = p.out_off + ((bz * p.Hq + h) * p.Lq + qi) * D;
    for (var t = 0u; t < DPL; t++) { out[ob + part + t * LPR] = T(o[i * DPL + t] * inv); }
  }
}
