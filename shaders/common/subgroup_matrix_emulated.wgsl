// Plain-WGSL types and multiply-accumulate standing in for the subgroup-matrix builtins (tests only): included by
// src/engine/ops/subgroup_matrix_emulation.ts in place of `enable chromium_experimental_subgroup_matrix`, which also
// generates the loads and stores for each of the kernel's workgroup arrays (they use sm_at below).
//
// Each invocation holds a whole fragment (row-major): the multiply-accumulate is the full SM_M x SM_N x SM_K
// product with f32 sums (as the f16 x f16 -> f32 builtins). The layout the real builtins use across lanes is
// opaque and never seen by a kernel, which only loads, multiplies and stores. Expects the includer's SM_M, SM_N,
// SM_K and SG.
alias SmLeft = array<f16, SM_M * SM_K>;    // (m, k)
alias SmRight = array<f16, SM_K * SM_N>;   // (k, n)
alias SmAcc = array<f32, SM_M * SM_N>;     // (m, n)

// Element (r, c) of a matrix at `off` with `stride` between rows (row-major) or columns (column-major).
fn sm_at(off: u32, r: u32, c: u32, col_major: bool, stride: u32) -> u32 {
  return select(off + r * stride + c, off + c * stride + r, col_major);
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
