// Tensor-core GEMM: f16 x f16 -> f32 through chromium_experimental_subgroup_matrix (VK_KHR_cooperative_matrix
// on NVIDIA). Same contract, Params and epilogue as matmul.wgsl (bias, ACT, GATE, RESID; no int8), selected by
// src/engine/ops/matmul_subgroup.ts when the adapter lists an f16/f32 subgroup-matrix config.
// Checked on an H200 (2026-11-28: its test, and matmul/linear with KILN_SUBGROUP_MATRIX=1); lavapipe has no
// subgroup matrix, so its test skips there. Not yet timed against the register-tiled kernel.
//
// SM_M/SM_N/SM_K are the adapter's config (matrix types need const sizes, so the wrapper rewrites the three
// `const` lines below). Workgroup: one subgroup of SG lanes owning the whole 64x64 tile, i.e. (64/SM_M) x (64/SM_N)
// f32 accumulators. One subgroup, not four in a 2x2 layout: the matrix builtins need workgroup-uniform offsets
// (Tint's subgroup_matrix_uniformity), and an offset computed from the lane index (local_invocation_index / SG)
// is not, which NVIDIA's Dawn refused at pipeline creation (2026-11-28, H200: "'subgroupMatrixStore' requires
// argument 1 to be uniform"). Per K slice of BK=32, A (64x32) and B (32x64) are staged as f16 in workgroup memory
// (zero-filled at edges, so any M, N, K is correct), then the subgroup loads its left/right fragments from there.
// The accumulators go through a 64x64 f32 tile in workgroup memory for the epilogue, so every edge check and the
// output layout stay plain scalar code.
//
// Bindings: 0 params, 1 out, 2 a, 3 b (f16), 4 bias, 5 gate, 6 resid.
enable chromium_experimental_subgroup_matrix;
enable subgroups;

const SM_M: u32 = 16u;
const SM_N: u32 = 16u;
const SM_K: u32 = 16u;
override SG: u32 = 32u;         // subgroup size (fixed on the adapters this path is selected for)
override ACT: u32 = 0u;
override BIAS: bool = false;
override GATE: bool = false;
override RESID: bool = false;
const BM: u32 = 64u;
const BN: u32 = 64u;
const BK: u32 = 32u;
const FM: u32 = BM / SM_M;     // fragments along M
const FN: u32 = BN / SM_N;

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
@group(0) @binding(2) var<storage, read> a: array<f16>;
@group(0) @binding(3) var<storage, read> b: array<f16>;
@group(0) @binding(4) var<storage, read> bias: array<T>;
@group(0) @binding(5) var<storage, read> gate: array<T>;
@group(0) @binding(6) var<storage, read> resid: array<T>;

var<workgroup> As: array<f16, BM * BK>;   // row-major (m, k)
var<workgroup> Bs: array<f16, BK * BN>;   // row-major (k, n)
var<workgroup> Cs: array<f32, BM * BN>;   // row-major (m, n)

//#include "common/act.wgsl"
//#include "common/dot3.wgsl"

@compute @workgroup_size(SG)
fn matmul(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let nthreads = SG;
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let z = wid.z;
  let bc = vec3<u32>(z / (p.bshape.y * p.bshape.z), (z / p.bshape.z) % p.bshape.y, z % p.bshape.z);
  let abase = p.offs.x + dot3(bc, p.a_b);
  let bbase = p.offs.y + dot3(bc, p.b_b);

  var acc: array<subgroup_matrix_result<f32, SM_N, SM_M>, FM * FN>;
  for (var k0 = 0u; k0 < p.K; k0 += BK) {
    for (var s = tid; s < BM * BK; s += nthreads) {
      let m = m0 + s / BK;
      let k = k0 + s % BK;
      As[s] = select(f16(0.0), a[abase + m * p.a_mk.x + k * p.a_mk.y], m < p.M && k < p.K);
    }
    for (var s = tid; s < BK * BN; s += nthreads) {
      let k = k0 + s / BN;
      let n = n0 + s % BN;
      Bs[s] = select(f16(0.0), b[bbase + k * p.b_kn.x + n * p.b_kn.y], k < p.K && n < p.N);
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk += SM_K) {
      for (var i = 0u; i < FM; i++) {
        let left = subgroupMatrixLoad<subgroup_matrix_left<f16, SM_K, SM_M>>(&As, i * SM_M * BK + kk, false, BK);
        for (var j = 0u; j < FN; j++) {
          let right = subgroupMatrixLoad<subgroup_matrix_right<f16, SM_N, SM_K>>(&Bs, kk * BN + j * SM_N, false, BN);
          acc[i * FN + j] = subgroupMatrixMultiplyAccumulate(left, right, acc[i * FN + j]);
        }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < FM; i++) {
    for (var j = 0u; j < FN; j++) {
      subgroupMatrixStore(&Cs, i * SM_M * BN + j * SM_N, acc[i * FN + j], false, BN);
    }
  }
  workgroupBarrier();

  let obase = p.offs2.w + z * p.M * p.N;   // out's element offset (a view of a bigger tensor) + batch
  let gbase = p.offs2.x + dot3(bc, p.g_b);
  let rbase = p.offs2.y + dot3(bc, p.r_b);
  for (var s = tid; s < BM * BN; s += nthreads) {
    let m = m0 + s / BN;
    let n = n0 + s % BN;
    if (m >= p.M || n >= p.N) { continue; }
    var y = Cs[s];
    if (BIAS) { y += f32(bias[p.offs.z + n * p.bias_str]); }
    y = act(y);
    if (GATE) { y *= f32(gate[gbase + m * p.g_mn.x + n * p.g_mn.y]); }
    if (RESID) { y += f32(resid[rbase + m * p.r_mn.x + n * p.r_mn.y]); }
    out[obase + m * p.N + n] = T(y);
  }
}
