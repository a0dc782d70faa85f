// Tensor-core GEMM: f16 x f16 -> f32 through chromium_experimental_subgroup_matrix (VK_KHR_cooperative_matrix
// on NVIDIA). Same contract, Params and epilogue as matmul.wgsl (bias, ACT, GATE, RESID, int8 weights with
// per-output-channel scales), selected by src/engine/ops/matmul_subgroup.ts when the adapter lists an f16/f32
// subgroup-matrix config.
//
// The `// tile` consts are rewritten by the wrapper for each adapter and tile (matrix types and function-scope
// arrays need const sizes, so these cannot be overrides):
//   SM_M x SM_N x SM_K  the adapter's matrix config; SG its (fixed) subgroup size;
//   SGM x SGN subgroups per workgroup, each owning FM x FN fragments, so a workgroup computes a
//   BM x BN = (SGM*FM*SM_M) x (SGN*FN*SM_N) tile of C; K is walked in slices of BK, staged as f16 in workgroup
//   memory with rows padded by PAD halves (spreads a fragment's rows over the memory banks).
//   B_NK: B's k stride is 1 (a linear weight's transpose view): Bs is staged (n, k) and loaded column-major,
//   so both operands are read along their contiguous dim; otherwise Bs is (k, n), row-major.
//   VA / VB: the staged inner dim is contiguous in memory and 8-aligned (16 for int8 B; the wrapper checks
//   strides, offsets and the extent), so a thread reads 8 halves (16 int8) as one vec4<u32>; otherwise one element
//   at a time. a and b are bound as vec4<u32> arrays either way (pool buffers are multiples of 16 bytes).
//   BQ: B is int8 (4 per u32, little-endian bytes). Its values (-128..127) are exact in f16, so Bs holds them as
//   they are and the per-output-channel scale is applied in the epilogue, as matmul.wgsl does:
//   sum_k a*q*s = s * sum_k a*q (the f16 x f16 products are exact in the f32 accumulator).
// Any M, N, K is correct: the staging zero-fills outside the matrix, the epilogue skips outside C.
//
// Subgroups: subgroup g (@builtin(subgroup_id)) owns the fragments at (g % SGM, g / SGM). The offsets it passes
// to the matrix builtins depend on g, which Tint's subgroup_matrix_uniformity check flags as non-uniform (it made
// NVIDIA's Dawn refuse a 4-subgroup kernel at pipeline creation, 2026-11-28), hence the diagnostic(off) below:
// g is uniform within each subgroup, which is what the builtins need. Staging and the epilogue map work to
// local_invocation_index, so correctness never depends on which lanes form which subgroup.
//
// Epilogue, one fragment row at a time (keeps Cs at SGM*SGN*SM_M*FN*SM_N f32): each subgroup stores its FN
// accumulators of fragment row i into its slice of Cs, then every thread applies
// y = act(acc * scale[n] + bias[n]); y *= gate; y += resid; out = T(y) to its share of the slice's elements.
//
// Lavapipe has no subgroup matrix: ops/matmul_subgroup.ts can compile this file with the builtins replaced by the
// plain stand-ins of ops/subgroup_matrix_emulation.ts, so the tiling, staging and epilogue run in CI against
// the CPU reference (test/engine/matmul_subgroup.test.ts); on hardware the same test runs the real builtins.
//
// Bindings: 0 params, 1 out, 2 a, 3 b (f16 pairs or int8 quads in vec4<u32>), 4 bias, 5 gate, 6 resid,
// 7 scales (u32 words; int8 B only, any binding otherwise).
diagnostic(off, chromium.subgroup_matrix_uniformity);
enable chromium_experimental_subgroup_matrix;
enable subgroups;

const SM_M: u32 = 16u;     // tile
const SM_N: u32 = 16u;     // tile
const SM_K: u32 = 16u;     // tile
const SG: u32 = 32u;       // tile
const SGM: u32 = 2u;       // tile
const SGN: u32 = 2u;       // tile
const FM: u32 = 4u;        // tile
const FN: u32 = 4u;        // tile
const BK: u32 = 32u;       // tile
const PAD: u32 = 8u;       // tile
const B_NK: bool = true;   // tile
const VA: bool = true;     // tile
const VB: bool = true;     // tile
const BQ: bool = false;    // tile
override ACT: u32 = 0u;
override BIAS: bool = false;
override GATE: bool = false;
override RESID: bool = false;
//#include "common/saturate.wgsl"
override STYPE: u32 = 0u;     // int8 scale type: 0 f32, 1 f16

const NT: u32 = SGM * SGN * SG;   // threads per workgroup
const WM: u32 = FM * SM_M;        // rows of C per subgroup
const WN: u32 = FN * SM_N;        // columns of C per subgroup
const BM: u32 = SGM * WM;
const BN: u32 = SGN * WN;
const AS_STR: u32 = BK + PAD;                            // As: (m, k), row stride
const BS_ROWS: u32 = select(BK, BN, B_NK);               // Bs: (n, k) if B_NK, else (k, n)
const BS_IN: u32 = select(BN, BK, B_NK);                 // Bs's inner extent
const BS_STR: u32 = BS_IN + PAD;
const CS_SLICE: u32 = SM_M * WN;                         // one subgroup's fragment row

struct Params {
  M: u32, N: u32, K: u32, bias_str: u32,
  bshape: vec4<u32>,
  offs: vec4<u32>,
  offs2: vec4<u32>,   // gate offset, resid offset, scale stride, out offset
  a_b: vec4<u32>, a_mk: vec4<u32>,
  b_b: vec4<u32>, b_kn: vec4<u32>,
  g_b: vec4<u32>, g_mn: vec4<u32>,
  r_b: vec4<u32>, r_mn: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> b: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> bias: array<T>;
@group(0) @binding(5) var<storage, read> gate: array<T>;
@group(0) @binding(6) var<storage, read> resid: array<T>;
@group(0) @binding(7) var<storage, read> scales: array<u32>;

var<workgroup> As: array<f16, BM * AS_STR>;
var<workgroup> Bs: array<f16, BS_ROWS * BS_STR>;
var<workgroup> Cs: array<f32, SGM * SGN * CS_SLICE>;

//#include "common/act.wgsl"
//#include "common/dot3.wgsl"
//#include "common/int8_scale.wgsl"

// Element e of a packed f16 array.
fn a_half(e: u32) -> f16 { return bitcast<vec2<f16>>(a[e >> 3u][(e >> 1u) & 3u])[e & 1u]; }
fn b_half(e: u32) -> f16 { return bitcast<vec2<f16>>(b[e >> 3u][(e >> 1u) & 3u])[e & 1u]; }
// Element e of B as f16 (int8 or f16).
fn b_elem(e: u32) -> f16 {
  if (BQ) { return f16(extractBits(bitcast<i32>(b[e >> 4u][(e >> 2u) & 3u]), (e & 3u) * 8u, 8u)); }
  return b_half(e);
}

// The 8 halves of one vec4<u32> read, in memory order.
fn halves8(w: vec4<u32>) -> array<f16, 8> {
  let h0 = bitcast<vec2<f16>>(w.x); let h1 = bitcast<vec2<f16>>(w.y);
  let h2 = bitcast<vec2<f16>>(w.z); let h3 = bitcast<vec2<f16>>(w.w);
  return array<f16, 8>(h0.x, h0.y, h1.x, h1.y, h2.x, h2.y, h3.x, h3.y);
}

// B's elements in one vec4<u32> read (8 halves, or 16 int8), and element i of such a read, in memory order, as f16.
const BV: u32 = select(8u, 16u, BQ);
fn b_vec_elem(w: vec4<u32>, i: u32) -> f16 {
  if (BQ) { return f16(unpack4xI8(w[i >> 2u])[i & 3u]); }
  return bitcast<vec2<f16>>(w[i >> 1u])[i & 1u];
}

// A's K slice at k0 into As (BM x BK): zero outside M and K.
fn stage_a(tid: u32, abase: u32, m0: u32, k0: u32) {
  if (VA) {
    for (var u = tid; u < BM * BK / 8u; u += NT) {
      let r = u / (BK / 8u);
      let c = (u % (BK / 8u)) * 8u;
      let m = m0 + r;
      let k = k0 + c;
      var w = vec4<u32>(0u);
      if (m < p.M && k < p.K) { w = a[(abase + m * p.a_mk.x + k) >> 3u]; }
      let h = halves8(w);
      for (var q = 0u; q < 8u; q++) { As[r * AS_STR + c + q] = h[q]; }
    }
  } else {
    for (var s = tid; s < BM * BK; s += NT) {
      let m = m0 + s / BK;
      let k = k0 + s % BK;
      As[(s / BK) * AS_STR + s % BK] = select(f16(0.0), a_half(abase + m * p.a_mk.x + k * p.a_mk.y), m < p.M && k < p.K);
    }
  }
}

// B's K slice at k0 into Bs: rows along n (B_NK) or k, the inner dim along the other; zero outside K and N.
fn stage_b(tid: u32, bbase: u32, n0: u32, k0: u32) {
  // (row, inner) -> (k, n), and their strides and limits in B
  let r0 = select(k0, n0, B_NK);
  let i0 = select(n0, k0, B_NK);
  let rstr = select(p.b_kn.x, p.b_kn.y, B_NK);
  let istr = select(p.b_kn.y, p.b_kn.x, B_NK);
  let rlim = select(p.K, p.N, B_NK);
  let ilim = select(p.N, p.K, B_NK);
  if (VB) {
    for (var u = tid; u < BS_ROWS * BS_IN / BV; u += NT) {
      let r = u / (BS_IN / BV);
      let c = (u % (BS_IN / BV)) * BV;
      var w = vec4<u32>(0u);
      if (r0 + r < rlim && i0 + c < ilim) { w = b[(bbase + (r0 + r) * rstr + i0 + c) / BV]; }
      for (var i = 0u; i < BV; i++) { Bs[r * BS_STR + c + i] = b_vec_elem(w, i); }
    }
  } else {
    for (var s = tid; s < BS_ROWS * BS_IN; s += NT) {
      let r = s / BS_IN;
      let c = s % BS_IN;
      let ok = r0 + r < rlim && i0 + c < ilim;
      Bs[r * BS_STR + c] = select(f16(0.0), b_elem(bbase + (r0 + r) * rstr + (i0 + c) * istr), ok);
    }
  }
}

@compute @workgroup_size(NT)
fn matmul(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
          @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let z = wid.z;
  let bc = vec3<u32>(z / (p.bshape.y * p.bshape.z), (z / p.bshape.z) % p.bshape.y, z % p.bshape.z);
  let abase = p.offs.x + dot3(bc, p.a_b);
  let bbase = p.offs.y + dot3(bc, p.b_b);
  let wm = (sg % SGM) * WM;   // this subgroup's fragments within the tile
  let wn = (sg / SGM) * WN;

  var acc: array<subgroup_matrix_result<f32, SM_N, SM_M>, FM * FN>;
  for (var k0 = 0u; k0 < p.K; k0 += BK) {
    stage_a(tid, abase, m0, k0);
    stage_b(tid, bbase, n0, k0);
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk += SM_K) {
      var left = array<subgroup_matrix_left<f16, SM_K, SM_M>, FM>();
      for (var i = 0u; i < FM; i++) {
        left[i] = subgroupMatrixLoad<subgroup_matrix_left<f16, SM_K, SM_M>>(&As, (wm + i * SM_M) * AS_STR + kk, false, AS_STR);
      }
      for (var j = 0u; j < FN; j++) {
        // (k, n) at kk, wn + j*SM_N: (n, k) rows read column-major, or (k, n) rows row-major
        let boff = select(kk * BS_STR + wn + j * SM_N, (wn + j * SM_N) * BS_STR + kk, B_NK);
        let right = subgroupMatrixLoad<subgroup_matrix_right<f16, SM_N, SM_K>>(&Bs, boff, B_NK, BS_STR);
        for (var i = 0u; i < FM; i++) {
          acc[i * FN + j] = subgroupMatrixMultiplyAccumulate(left[i], right, acc[i * FN + j]);
        }
      }
    }
    workgroupBarrier();
  }

  let obase = p.offs2.w + z * p.M * p.N;   // out's element offset (a view of a bigger tensor) + batch
  let gbase = p.offs2.x + dot3(bc, p.g_b);
  let rbase = p.offs2.y + dot3(bc, p.r_b);
  for (var i = 0u; i < FM; i++) {
    for (var j = 0u; j < FN; j++) {
      subgroupMatrixStore(&Cs, sg * CS_SLICE + j * SM_N, acc[i * FN + j], false, WN);
    }
    workgroupBarrier();
    for (var s = tid; s < SGM * SGN * CS_SLICE; s += NT) {
      let g = s / CS_SLICE;
      let m = m0 + (g % SGM) * WM + i * SM_M + (s % CS_SLICE) / WN;
      let n = n0 + (g / SGM) * WN + s % WN;
      if (m >= p.M || n >= p.N) { continue; }
      var y = Cs[s];
      if (BQ) { y *= load_scale(n); }
      if (BIAS) { y += f32(bias[p.offs.z + n * p.bias_str]); }
      y = act(y);
      if (GATE) { y *= f32(gate[gbase + m * p.g_mn.x + n * p.g_mn.y]); }
      if (RESID) { y += f32(resid[rbase + m * p.r_mn.x + n * p.r_mn.y]); }
      out[obase + m * p.N + n] = T(finite(y));
    }
    workgroupBarrier();
  }
}
