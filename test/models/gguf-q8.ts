// Q8_0 blocks as ggml writes them, for the tests that build GGUF checkpoints from the demo weights
// (krea2_worker, qwen_image21_comfy).
import { f32ToF16Bits } from '../../src/engine/dtype';

/** Q8_0 blocks of `v` (whole rows of 32): d = max |x| / 127 in fp16, q = round(x / d), as ggml's quantize_row_q8_0. */
export function quantizeQ8(v: Float32Array): Uint8Array {
  const out = new Uint8Array((v.length / 32) * 34);
  const dv = new DataView(out.buffer);
  for (let b = 0; b < v.length / 32; b++) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(v[b * 32 + j]!));
    const d = amax / 127;
    dv.setUint16(b * 34, f32ToF16Bits(d), true);
    const id = d ? 1 / d : 0;
    for (let j = 0; j < 32; j++) dv.setInt8(b * 34 + 2 + j, Math.round(v[b * 32 + j]! * id));
  }
  return out;
}
