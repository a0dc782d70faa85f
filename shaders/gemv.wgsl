// Few-row GEMM (GEMV) for decode: y[r, n] = epilogue(sum_k x[r, k] * W[n, k]) for R <= ROWS rows, with W
// stored as PyTorch keeps a linear weight, (N, K) with k contiguous. Wrapper: src/engine/ops/gemv.ts (called by
// gemm() in src/engine/ops/matmul.ts); CPU reference: test/engine/reference/matmul.ts.
// Header (prepended): `alias T = f32;` or `enable f16; alias T = f16;` (the type of x, bias, gate, residual and the
// output). Products and sums are f32; the result is rounded to T once.
//
// Why not the tiled kernel: it computes a 64-row tile for the one row decode uses. Here each workgroup owns
// WG / TPC output columns; the TPC threads of a column split K and walk W's row n together, so consecutive threads
// read consecutive u32 words of the weight (coalesced). With ALIGNED (every row starts on a word) a word is
// decoded whole: 1 f32, 2 f16 or 4 int8 weights; with VEC4 too (every row starts on a 16-byte boundary) words are
// loaded 4 at a time as a vec4<u32> (the row's last < 4 words one by one); otherwise weights are read one by one. Each thread keeps
// ROWS f32 partial sums (one per input row), reduced across the column's TPC threads in workgroup memory.
//
// Rows: the R = batches * M rows of x (x is any strided view, (batch..., M, K)); row r is (batch r / M, m = r % M)
// and writes out[r, n] of the contiguous (batch..., M, N) output, which starts at element w.z of its binding. The weight is shared by every batch.
//
// Epilogue (same as matmul.wgsl): y = act(acc * scale[n] + bias[n]); if GATE y *= g[r,n]; if RESID y += res[r,n].
// Bindings: 0 params, 1 out, 2 x, 3 W (u32 words), 4 bias, 5 gate, 6 resid, 7 scales (u32 words), 8 W again as
// vec4<u32>; unused inputs are bound to x by the wrapper.

const ROWS = 8u;              // most rows per dispatch (GEMV_MAX_ROWS in the wrapper)
override WG: u32 = 256u;      // threads per workgroup
override TPC: u32 = 32u;      // threads per output column (a power of two dividing WG)
override BTYPE: u32 = 0u;     // W element type: 0 f32, 1 f16, 2 int8 (4 per u32, little-endian bytes)
override STYPE: u32 = 0u;     // int8 scale type: 0 f32, 1 f16
override ACT: u32 = 0u;       // 0 none, 1 gelu_tanh, 2 gelu_erf, 3 silu
override ALIGNED: bool = false;
override VEC4: bool = false;    // needs ALIGNED
override BIAS: bool = false;
override GATE: bool = false;
override RESID: bool = false;
//#include "common/saturate.wgsl"

struct Params {
  R: u32, M: u32, N: u32, K: u32,
  bshape: vec4<u32>,   // batch dims of x / out (x outermost .. z innermost)
  offs: vec4<u32>,     // element offsets: x, W, bias, scales
  offs2: vec4<u32>,    // gate offset, resid offset, scale stride, bias stride
  a_b: vec4<u32>, a_mk: vec4<u32>,   // x batch strides; (m, k) strides
  g_b: vec4<u32>, g_mn: vec4<u32>,
  r_b: vec4<u32>, r_mn: vec4<u32>,
  w: vec4<u32>,        // W row stride (elements between W[n, 0] and W[n+1, 0]), workgroups along x, out offset, 0
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> a: array<T>;
@group(0) @binding(3) var<storage, read> b: array<u32>;
@group(0) @binding(4) var<storage, read> bias: array<T>;
@group(0) @binding(5) var<storage, read> gate: array<T>;
@group(0) @binding(6) var<storage, read> resid: array<T>;
@group(0) @binding(7) var<storage, read> scales: array<u32>;
@group(0) @binding(8) var<storage, read> b4: array<vec4<u32>>;

// red[r * WG + t]: thread t's partial sum for row r
var<workgroup> red: array<f32, ROWS * WG>;

//#include "common/weights.wgsl"

// Weight j of a whole word (j < elements per word).
fn unpack_word(w: u32, j: u32) -> f32 {
  switch BTYPE {
    case 1u: { return unpack2x16float(w)[j]; }
    case 2u: { return f32(extractBits(bitcast<i32>(w), j * 8u, 8u)); }
    default: { return bitcast<f32>(w); }
  }
}

//#include "common/act.wgsl"
//#include "common/dot3.wgsl"

/** The batch coordinates of row r. */
fn batch_of(r: u32) -> vec3<u32> {
  let z = r / p.M;
  return vec3<u32>(z / (p.bshape.y * p.bshape.z), (z / p.bshape.z) % p.bshape.y, z % p.bshape.z);
}

/** acc[r] += x[r, k] * wv for every row. */
fn fma_rows(acc: ptr<function, array<f32, ROWS>>, xbase: ptr<function, array<u32, ROWS>>, k: u32, wv: f32) {
  for (var r = 0u; r < ROWS; r++) {
    if (r >= p.R) { break; }
    (*acc)[r] += f32(a[(*xbase)[r] + k * p.a_mk.y]) * wv;
  }
}

/** The weights of word c of a row (k = c*per ..), per = weights per word; a last word's tail past K is the next row. */
fn fma_word(acc: ptr<function, array<f32, ROWS>>, xbase: ptr<function, array<u32, ROWS>>, w: u32, c: u32, per: u32) {
  for (var j = 0u; j < per; j++) {
    let k = c * per + j;
    if (k < p.K) { fma_rows(acc, xbase, k, unpack_word(w, j)); }
  }
}

@compute @workgroup_size(WG)
fn gemv(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let col = lid.x / TPC;
  let lane = lid.x % TPC;
  let n = (wid.x + wid.y * p.w.y) * (WG / TPC) + col;

  var xbase: array<u32, ROWS>;   // element index of x[r, 0]
  for (var r = 0u; r < ROWS; r++) {
    if (r >= p.R) { break; }
    xbase[r] = p.offs.x + dot3(batch_of(r), p.a_b) + (r % p.M) * p.a_mk.x;
  }
  var acc: array<f32, ROWS>;
  if (n < p.N) {
    let row = p.offs.y + n * p.w.x;   // element index of W[n, 0]
    if (ALIGNED) {
      let per = select(select(1u, 2u, BTYPE == 1u), 4u, BTYPE == 2u);   // weights per u32 word
      let word0 = row / per;
      let nwords = (p.K + per - 1u) / per;
      var c = lane;
      if (VEC4) {
        for (var q = lane; q < nwords / 4u; q += TPC) {
          let v = b4[word0 / 4u + q];
          for (var i = 0u; i < 4u; i++) { fma_word(&acc, &xbase, v[i], 4u * q + i, per); }
        }
        c = (nwords & ~3u) + lane;
      }
      for (; c < nwords; c += TPC) { fma_word(&acc, &xbase, b[word0 + c], c, per); }
    } else {
      for (var k = lane; k < p.K; k += TPC) { fma_rows(&acc, &xbase, k, load_b(row + k)); }
    }
  }

  // Tree reduction over the column's TPC threads (threads past N hold zeros and take part in the barriers).
  for (var r = 0u; r < ROWS; r++) { red[r * WG + lid.x] = acc[r]; }
  workgroupBarrier();
  for (var s = TPC / 2u; s > 0u; s >>= 1u) {
    if (lane < s) {
      for (var r = 0u; r < ROWS; r++) { red[r * WG + lid.x] += red[r * WG + lid.x + s]; }
    }
    workgroupBarrier();
  }

  if (lane != 0u || n >= p.N) { return; }
  var sc = 1.0;
  if (BTYPE == 2u) { sc = load_scale(n); }
  var bn = 0.0;
  if (BIAS) { bn = f32(bias[p.offs.z + n * p.offs2.w]); }
  for (var r = 0u; r < ROWS; r++) {
    if (r >= p.R) { break; }
    let bc = batch_of(r);
    let m = r % p.M;
    var y = act(red[r * WG + lid.x] * sc + bn);
    if (GATE) { y *= f32(gate[p.offs2.x + dot3(bc, p.g_b) + m * p.g_mn.x + n * p.g_mn.y]); }
    if (RESID) { y += f32(resid[p.offs2.y + dot3(bc, p.r_b) + m * p.r_mn.x + n * p.r_mn.y]); }
    out[p.w.z + r * p.N + n] = T(finite(y));
  }
}
