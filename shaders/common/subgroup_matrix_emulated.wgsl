// Plain-WGSL stand-ins for the subgroup-matrix builtins matmul_subgroup.wgsl uses, so that kernel's tiling,
// staging and epilogue can run (and be checked against the CPU reference) on adapters without the feature, such
// as lavapipe in CI. Test-only: ops/matmul_subgroup.ts swaps them in when asked (`emulate`), never by default.
//
// Each invocation holds a whole fragment (row-major): loads read every element, the multiply-accumulate is the
// full SM_M x SM_N x SM_K product with f32 sums (as the f16 x f16 -> f32 builtins), and a store writes a lane's
// share of the elements (e = lane, lane + SG, ...), so every element is written once. The layout the real
// builtins use across lanes is opaque and never seen by the kernel, which only loads, multiplies and stores.
// Expects the includer's SM_M, SM_N, SM_K, SG and its workgroup arrays As (left), Bs (right), Cs (result).
alias SmLeft = array<f16, SM_M * SM_K>;    // (m, k)
alias SmRight = array<f16, SM_K * SM_N>;   // (k, n)
alias SmAcc = array<f32, SM_M * SM_N>;     // (m, n)

// Element (r, c) of a matrix at `off` with `stride` between rows (row-major) or columns (column-major).
fn sm_at(off: u32, r: u32, c: u32, col_major: bool, stride: u32) -> u32 {
  return select(off + r * stride + c, off + c * stride + r, col_major);
}

fn smLoadLeft(off: u32, col_major: bool, stride: u32) -> SmLeft {
  var f: SmLeft;
  for (var r = 0u; r < SM_M; r++) {
    for (var c = 0u; c < SM_K; c++) { f[r * SM_K + c] = As[sm_at(off, r, c, col_major, stride)]; }
  }
  return f;
}

fn smLoadRight(off: u32, col_major: bool, stride: u32) -> SmRight {
  var f: SmRight;
  for (var r = 0u; r < SM_K; r++) {
    for (var c = 0u; c < SM_N; c++) { f[r * SM_N + c] = Bs[sm_at(off, r, c, col_major, stride)]; }
  }
  return f;
}

fn smMma(l: SmLeft, r: SmRight, c: SmAcc) -> SmAcc {
  var o = c;
  for (var i = 0u; i < SM_M; i++) {
    for (var j = 0u; j < SM_N; j++) {
      var s = o[i * SM_N + j];
      for (var k = 0u; k < SM_K; k++) { s += f32(l[i * SM_K + k]) * f32(r[k * SM_N + j]); }
      o[i * SM_N + j] = s;
    }
  }
  return o;
}

fn smStore(lane: u32, off: u32, c: SmAcc, col_major: bool, stride: u32) {
  for (var e = lane; e < SM_M * SM_N; e += SG) {
    Cs[sm_at(off, e / SM_N, e % SM_N, col_major, stride)] = c[e];
  }
}
