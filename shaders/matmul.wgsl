// Batched GEMM C = A·B with a fused epilogue: the register-tiled path every adapter runs (lavapipe
// included). Wrapper: src/engine/ops/matmul.ts; CPU reference: test/engine/reference/matmul.ts.
// Header (prepended): `alias T = f32;` or `enable f16; alias T = f16;` (the type of A, bias, gate, residual
// and the output). Products and sums are f32; the result is rounded to T once.
//
// Shapes: A (batch..., M, K), B (batch..., K, N), C (batch..., M, N) contiguous from element offs2.w. A and B are any strided
// views (a transposed operand is just swapped strides); batch dims (3, padded with 1 at the front) come
// from workgroup_id.z, each operand with its own batch strides (0 = broadcast, e.g. a linear weight).
// B is read as u32 words so one kernel serves f32, f16 and int8 weights (BTYPE); int8 weights are
// dequantised by their per-output-channel scale in the epilogue (sum_k a*q*s = s * sum_k a*q).
//
// Tiling: a workgroup of WGX x WGY threads computes a (4*WGY) x (4*WGX) tile of C; each thread owns a 4x4
// block (acc: 4 rows x vec4 of columns). A and B tiles of depth BK are staged in workgroup memory as f32
// vec4s, so the inner loop is 1 vec4 load of A, 1 of B and 4 vec4 FMAs per k.
//
// Epilogue: y = act(acc * scale[n] + bias[n]); if GATE y *= g[m,n]; if RESID y += r[m,n]; out = T(y).
// So "gate multiply" is ACT + GATE, "residual with gate" (r + g * (xW + b)) is GATE + RESID.
//
// Bindings: 0 params, 1 out, 2 a, 3 b (u32 words), 4 bias, 5 gate, 6 resid, 7 scales (u32 words).
// Unused inputs are bound to `a` by the wrapper (they are statically referenced, so the layout has them).

override WGX: u32 = 16u;      // threads along N (tile width 4*WGX)
override WGY: u32 = 16u;      // threads along M (tile height 4*WGY)
override BK: u32 = 16u;       // depth of a staged K slice
override BTYPE: u32 = 0u;     // B element type: 0 f32, 1 f16, 2 int8 (4 per u32, little-endian bytes)
override STYPE: u32 = 0u;     // int8 scale type: 0 f32, 1 f16
override ACT: u32 = 0u;       // 0 none, 1 gelu_tanh, 2 gelu_erf, 3 silu
override BIAS: bool = false;
override GATE: bool = false;
override RESID: bool = false;
//#include "common/saturate.wgsl"

struct Params {
  M: u32, N: u32, K: u32, bias_str: u32,
  bshape: vec4<u32>,   // batch dims (x outermost .. z innermost)
  offs: vec4<u32>,     // element offsets: a, b, bias, scales
  offs2: vec4<u32>,    // gate offset, resid offset, scale stride, out offset
  a_b: vec4<u32>, a_mk: vec4<u32>,   // batch strides; (m, k) strides
  b_b: vec4<u32>, b_kn: vec4<u32>,   // batch strides; (k, n) strides
  g_b: vec4<u32>, g_mn: vec4<u32>,
  r_b: vec4<u32>, r_mn: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> a: array<T>;
@group(0) @binding(3) var<storage, read> b: array<u32>;
@group(0) @binding(4) var<storage, read> bias: array<T>;
@group(0) @binding(5) var<storage, read> gate: array<T>;
@group(0) @binding(6) var<storage, read> resid: array<T>;
@group(0) @binding(7) var<storage, read> scales: array<u32>;

// As[k * WGY + i] = A[m0 + 4i .. 4i+3, k0 + k]; Bs[k * WGX + j] = B[k0 + k, n0 + 4j .. 4j+3]
var<workgroup> As: array<vec4<f32>, BK * WGY>;
var<workgroup> Bs: array<vec4<f32>, BK * WGX>;

//#include "common/weights.wgsl"
//#include "common/act.wgsl"
//#include "common/dot3.wgsl"

@compute @workgroup_size(WGX, WGY)
fn matmul(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let tid = lid.y * WGX + lid.x;
  let nthreads = WGX * WGY;
  let m0 = wid.y * 4u * WGY;
  let n0 = wid.x * 4u * WGX;
  let z = wid.z;
  let bc = vec3<u32>(z / (p.bshape.y * p.bshape.z), (z / p.bshape.z) % p.bshape.y, z % p.bshape.z);
  let abase = p.offs.x + dot3(bc, p.a_b);
  let bbase = p.offs.y + dot3(bc, p.b_b);

  var acc: array<vec4<f32>, 4>;   // acc[r] = C[m0 + 4*lid.y + r, n0 + 4*lid.x .. +3]
  for (var k0 = 0u; k0 < p.K; k0 += BK) {
    // A slice: consecutive threads walk k (the contiguous dim of a row-major A); zero outside M, K.
    for (var s = tid; s < BK * WGY; s += nthreads) {
      let k = s % BK;
      let i = s / BK;
      let kk = k0 + k;
      var v = vec4<f32>(0.0);
      if (kk < p.K) {
        for (var c = 0u; c < 4u; c++) {
          let m = m0 + 4u * i + c;
          if (m < p.M) { v[c] = f32(a[abase + m * p.a_mk.x + kk * p.a_mk.y]); }
        }
      }
      As[k * WGY + i] = v;
    }
    // B slice: consecutive threads walk n (the contiguous dim of a row-major B).
    for (var s = tid; s < BK * WGX; s += nthreads) {
      let j = s % WGX;
      let k = s / WGX;
      let kk = k0 + k;
      var v = vec4<f32>(0.0);
      if (kk < p.K) {
        for (var c = 0u; c < 4u; c++) {
          let n = n0 + 4u * j + c;
          if (n < p.N) { v[c] = load_b(bbase + kk * p.b_kn.x + n * p.b_kn.y); }
        }
      }
      Bs[k * WGX + j] = v;
    }
    workgroupBarrier();
    for (var k = 0u; k < BK; k++) {
      let av = As[k * WGY + lid.y];
      let bv = Bs[k * WGX + lid.x];
      acc[0] += av.x * bv;
      acc[1] += av.y * bv;
      acc[2] += av.z * bv;
      acc[3] += av.w * bv;
    }
    workgroupBarrier();
  }

  let obase = p.offs2.w + z * p.M * p.N;   // out's element offset (a view of a bigger tensor) + batch
  let gbase = p.offs2.x + dot3(bc, p.g_b);
  let rbase = p.offs2.y + dot3(bc, p.r_b);
  for (var c = 0u; c < 4u; c++) {
    let n = n0 + 4u * lid.x + c;
    if (n >= p.N) { break; }
    var sc = 1.0;
    if (BTYPE == 2u) { sc = load_scale(n); }
    var bn = 0.0;
    if (BIAS) { bn = f32(bias[p.offs.z + n * p.bias_str]); }
    for (var r = 0u; r < 4u; r++) {
      let m = m0 + 4u * lid.y + r;
      if (m >= p.M) { break; }
      var y = act(acc[r][c] * sc + bn);
      if (GATE) { y *= f32(gate[gbase + m * p.g_mn.x + n * p.g_mn.y]); }
      if (RESID) { y += f32(resid[rbase + m * p.r_mn.x + n * p.r_mn.y]); }
      out[obase + m * p.N + n] = T(finite(y));
    }
  }
}
