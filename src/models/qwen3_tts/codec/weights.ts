// Loading helpers for the 12 Hz codec (speech_tokenizer/model.safetensors): plain tensors in the compute dtype
// (src/models/common/weights.ts), conv weights re-laid once for the conv kernel, and derived tensors computed on the
// CPU in float64 from checkpoint values (codebooks = embedding_sum / max(cluster_usage, eps)).
import type { Engine } from '../../../engine/engine';
import { loadTensor } from '../../../engine/load';
import { prepareConvWeight, type PreparedConvWeight } from '../../../engine/ops/conv';
import type { Tensor } from '../../../engine/tensor';
import { loadPlain, type WeightLoader } from '../../common/weights';

export { loadPlain, type WeightLoader };

/** A conv weight as PyTorch stores it ([Cout, Cin/groups, k] or, transposed, [Cin, Cout/groups, k]), prepared for
 * the kernel. The raw upload is freed; the prepared tensor is tracked for cleanup. */
export async function loadConvWeight(
  w: WeightLoader,
  key: string,
  shape: readonly number[],
  o: { groups?: number; transposed?: boolean } = {},
): Promise<PreparedConvWeight> {
  const raw = await loadTensor(w.e, w.ckpt, key, { dtype: w.dtype, shape });
  try {
    const prepared = prepareConvWeight(w.e, raw, o);
    w.loaded.push(prepared.tensor);
    return prepared;
  } finally {
    raw.free(); // ordered on the queue after the copy that reads it
  }
}

/** A kernel-size-1 Conv1d weight [out, in, 1] loaded as a linear weight [out, in]. */
export async function loadPointwise(w: WeightLoader, key: string, out: number, inp: number): Promise<Tensor> {
  const t = await loadTensor(w.e, w.ckpt, key, { dtype: w.dtype, shape: [out, inp, 1] });
  w.loaded.push(t);
  return t.reshape([out, inp]);
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

/** Uploads host values in the loader's dtype (or `dtype`) and tracks the tensor. */
export function uploadTracked(w: WeightLoader, values: ArrayLike<number>, shape: readonly number[], label: string, dtype = w.dtype): Tensor {
  const t = w.e.upload(values, shape, dtype, label);
  w.loaded.push(t);
  return t;
}

export function newLoader(e: Engine, ckpt: WeightLoader['ckpt'], dtype: WeightLoader['dtype']): WeightLoader {
  return { e, ckpt, dtype, int8: false, loaded: [] };
}
