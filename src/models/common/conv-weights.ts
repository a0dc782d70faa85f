// Conv weights for the engine's conv kernel: read as PyTorch stores them ([Cout, Cin/groups, k...], transposed
// convs [Cin, Cout/groups, k...]) in the loader's compute dtype, re-laid once at load (prepareConvWeight) and the
// raw copy freed. The prepared weight is tracked by the loader, like every other tensor it loads.
import { loadTensor } from '../../engine/load';
import { prepareConvWeight, type PreparedConvWeight } from '../../engine/ops/conv';
import type { Tensor } from '../../engine/tensor';
import { keyOf, type WeightLoader } from './weights';

export interface ConvWeightOptions {
  groups?: number;
  transposed?: boolean;
}

/** `raw` (a conv weight in PyTorch's layout, on the GPU) prepared for the kernel; `raw` is freed. */
export function prepareRawConvWeight(w: WeightLoader, raw: Tensor, o: ConvWeightOptions = {}): PreparedConvWeight {
  try {
    const prepared = prepareConvWeight(w.e, raw, o);
    w.loaded.push(prepared);
    return prepared;
  } finally {
    raw.free(); // ordered on the queue after the copy that reads it
  }
}

/** The conv weight `key` of PyTorch shape `shape`, prepared for the kernel. */
export async function loadConvWeight(w: WeightLoader, key: string, shape: readonly number[], o: ConvWeightOptions = {}): Promise<PreparedConvWeight> {
  const raw = await loadTensor(w.e, w.ckpt, keyOf(w, key), { dtype: w.dtype, shape });
  return prepareRawConvWeight(w, raw, o);
}
