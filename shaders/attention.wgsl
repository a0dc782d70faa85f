// Flash-style attention: out = softmax(scale * Q K^T + mask) V with an online softmax in f32; the score matrix
// never exists. Wrapper: src/engine/ops/attention.ts; CPU reference: test/engine/reference/attention.ts.
// Header (prepended): `alias T = f32;` or `enable f16; alias T = f16;`.
//
// Shapes: Q (B, Hq, Lq, D), K and V (B, Hkv, Lk, D), any strides (views of a packed QKV projection or of a
// KV cache); out (B, Hq, Lq, D) contiguous from element out_off of its binding. Grouped-query: query head h reads kv head h / (Hq / Hkv).
// Masks (MASK): 0 none; 1 causal, query i sees keys j <= i + q_offset (q_offset = tokens already in the
// KV cache when decoding); 2 block-causal, with blk[pos] a block id per position (f32): query i sees key j
// when blk[j] <= blk[i + q_offset]. Every mask also hides keys j >= kv_len (a padded cache), and with a sliding
// window W > 0 (local attention) keys j <= i + q_offset - W (the query sees the last W positions up to its own).
// A query that sees no key gets 0 (not NaN).
//
// Work split: a workgroup is BQ query rows of one (batch, head); each thread owns one query row (q and the
// output accumulator in registers as vec4s). Tiles of BKV keys and values are staged in workgroup memory
// as f32 vec4s and shared by the BQ rows. Per tile: BKV scores, the tile max, one rescale of the
// accumulator, then the weighted V sum (the classic FlashAttention-2 order).
//
// Bindings: 0 params, 1 out, 2 q, 3 k, 4 v, 5 blk (f32 block ids; bound to q when MASK != 2).

override D: u32 = 64u;          // head dim (<= 128)
override BQ: u32 = 32u;         // query rows per workgroup = threads
override BKV: u32 = 16u;        // keys per staged tile (<= MAX_BKV)
override MASK: u32 = 0u;        // 0 none, 1 causal, 2 block-causal
override DV: u32 = (D + 3u) / 4u;
const MAX_DV: u32 = 32u;        // 128 / 4: register arrays need a constant size
const MAX_BKV: u32 = 32u;

//#include "common/attention_mask.wgsl"

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> q: array<T>;
@group(0) @binding(3) var<storage, read> k: array<T>;
@group(0) @binding(4) var<storage, read> v: array<T>;
@group(0) @binding(5) var<storage, read> blk: array<f32>;

var<workgroup> Ks: array<vec4<f32>, BKV * DV>;   // Ks[j * DV + d4] = K[key0 + j, 4*d4 .. 4*d4+3]
var<workgroup> Vs: array<vec4<f32>, BKV * DV>;

@compute @workgroup_size(BQ)
fn attention(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let h = wid.y;
  let bz = wid.z;
  let hk = h / (p.Hq / p.Hkv);
  let qi = wid.x * BQ + lid.x;
  let live = qi < p.Lq;
  let qpos = qi + p.q_offset;   // the query's position in the key sequence

  var qr: array<vec4<f32>, MAX_DV>;   // this row of Q, times scale
  var acc: array<vec4<f32>, MAX_DV>;  // unnormalised output row
  if (live) {
    let qb = p.q_off + bz * p.q_str.x + h * p.q_str.y + qi * p.q_str.z;
    for (var d4 = 0u; d4 < DV; d4++) {
      var x = vec4<f32>(0.0);
      for (var c = 0u; c < 4u; c++) {
        let d = 4u * d4 + c;
        if (d < D) { x[c] = f32(q[qb + d * p.q_str.w]); }
      }
      qr[d4] = x * p.scale;
    }
  }
  var m = -3.0e38;   // running max (finite, so exp(m - m_new) never sees inf - inf)
  var l = 0.0;       // running sum of exp(s - m)

  // Keys past this point are hidden from every row of the workgroup (uniform: depends on wid only).
  var kend = min(p.Lk, p.kv_len);
  if (MASK == 1u) { kend = min(kend, min(wid.x * BQ + BQ, p.Lq) + p.q_offset); }
  // With a window, keys before the first query's window are hidden from every row too (uniform as well).
  var kstart = 0u;
  let qfirst = wid.x * BQ + p.q_offset;
  if (p.window > 0u && qfirst + 1u > p.window) { kstart = qfirst + 1u - p.window; }
  let kb = p.k_off + bz * p.k_str.x + hk * p.k_str.y;
  let vb = p.v_off + bz * p.v_str.x + hk * p.v_str.y;

  for (var key0 = kstart; key0 < kend; key0 += BKV) {
    for (var s = lid.x; s < BKV * DV; s += BQ) {
      let j = s / DV;
      let d4 = s % DV;
      let key = key0 + j;
      var kx = vec4<f32>(0.0);
      var vx = vec4<f32>(0.0);
      if (key < p.Lk) {
        for (var c = 0u; c < 4u; c++) {
          let d = 4u * d4 + c;
          if (d < D) {
            kx[c] = f32(k[kb + key * p.k_str.z + d * p.k_str.w]);
            vx[c] = f32(v[vb + key * p.v_str.z + d * p.v_str.w]);
          }
        }
      }
      Ks[s] = kx;
      Vs[s] = vx;
    }
    workgroupBarrier();
    if (live) {
      var sc = array<f32, MAX_BKV>();
      var tmax = -3.0e38;
      var seen = false;
      for (var j = 0u; j < BKV; j++) {
        if (!visible(qpos, key0 + j)) { continue; }
        var dotv = vec4<f32>(0.0);
        for (var d4 = 0u; d4 < DV; d4++) { dotv += qr[d4] * Ks[j * DV + d4]; }
        let sj = dotv.x + dotv.y + dotv.z + dotv.w;
        sc[j] = sj;
        tmax = max(tmax, sj);
        seen = true;
      }
      if (seen) {
        let mn = max(m, tmax);
        let alpha = exp(m - mn);
        l *= alpha;
        for (var d4 = 0u; d4 < DV; d4++) { acc[d4] *= alpha; }
        for (var j = 0u; j < BKV; j++) {
          if (!visible(qpos, key0 + j)) { continue; }
          let pj = exp(sc[j] - mn);
          l += pj;
          for (var d4 = 0u; d4 < DV; d4++) { acc[d4] += pj * Vs[j * DV + d4]; }
        }
        m = mn;
      }
    }
    workgroupBarrier();
  }

  if (!live) { return; }
  let inv = select(0.0, 1.0 / l, l > 0.0);
  let ob = p.out_off + ((bz * p.Hq + h) * p.Lq + qi) * D;
  for (var d4 = 0u; d4 < DV; d4++) {
    let y = acc[d4] * inv;
    for (var c = 0u; c < 4u; c++) {
      let d = 4u * d4 + c;
      if (d < D) { out[ob + d] = T(y[c]); }
    }
  }
}
