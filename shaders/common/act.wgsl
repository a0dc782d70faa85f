// The GEMM epilogue's activation (matmul.wgsl, matmul_subgroup.wgsl, gemv.wgsl): act(x) in f32.
// Needs in the including shader: `override ACT: u32` (0 none, 1 gelu_tanh, 2 gelu_erf, 3 silu).

// erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7): WGSL has no erf.
fn erf_approx(x: f32) -> f32 {
  let t = 1.0 / (1.0 + 0.3275911 * abs(x));
  let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return sign(x) * (1.0 - poly * exp(-x * x));
}

fn act(x: f32) -> f32 {
  switch ACT {
    case 1u: {
      // tanh saturates long before |u| = 15; clamping keeps exp-based tanh implementations finite
      let u = clamp(0.7978845608028654 * (x + 0.044715 * x * x * x), -15.0, 15.0);
      return 0.5 * x * (1.0 + tanh(u));
    }
    case 2u: { return 0.5 * x * (1.0 + erf_approx(x * 0.7071067811865476)); }
    case 3u: { return x / (1.0 + exp(-x)); }
    default: { return x; }
  }
}
