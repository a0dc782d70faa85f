// The GEMM epilogue's store of an f16 output (matmul, matmul_subgroup, gemv: out = T(finite(y))). Override: SATURATE
// (the wrapper sets it for f16 outputs). A value past the largest finite half is stored as +-65504, as upstream clips
// its f16 hidden states (diffusers' QwenImage21TransformerBlock: hidden_states.clip(-65504, 65504)): a residual sum
// past it would otherwise be inf, and the next norm's mean of it NaN (a random demo Qwen-Image-2.1 in f16 did that at
// seed 4, and wrote an all-white png).
override SATURATE: bool = false;

fn finite(y: f32) -> f32 {
  if (SATURATE) { return clamp(y, -65504.0, 65504.0); }
  return y;
}
