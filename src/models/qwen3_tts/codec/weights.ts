// Loading helpers of the 12 Hz codec (speech_tokenizer/model.safetensors) on top of the common loaders
// (src/models/common/weights.ts, conv-weights.ts): pointwise convs read as linears, and derived tensors computed on
// the CPU in float64 from checkpoint values (codebooks = embedding_sum / max(cluster_usage, eps)).
import type { Tensor } from '../../../engine/tensor';
import { loadPlain, type WeightLoader } from '../../common/weights';

/** A kernel-size-1 Conv1d weight [out, in, 1] loaded as a linear weight [out, in]. */
export async function loadPointwise(w: WeightLoader, key: string, out: number, inp: number): Promise<Tensor> {
  return (await loadPlain(w, key, [out, inp, 1])).reshape([out, inp]);
}

/** EuclideanCodebook's vectors: embedding_sum [V, D] / max(cluster_usage [V], eps) row by row, in float64. */
export async function codebookVectors(w: WeightLoader, sumKey: string, usageKey: string, size: number, dim: number, eps = 1e-5): Promise<Float64Array> {
  w.ckpt.entry(sumKey, [size, dim]);
  w.ckpt.entry(usageKey, [size]);
  const sum = await w.ckpt.readFloat32(sumKey);
  const usage = await w.ckpt.readFloat32(usageKey);
  const out = new Float64Array(size * dim);
  for (let v = 0; v < size; v++) {
    const u = Math.max(usage[v]!, eps);
    for (let d = 0; d < dim; d++) out[v * dim + d] = sum[v * dim + d]! / u;
  }
  return out;
}
