// Loading a model's tensors from a checkpoint, for every model: norms, biases and embeddings in the compute dtype,
// linear weights in the compute dtype or as weight-only int8 (quantised per output channel at load, see
// src/engine/quantize.ts). bf16 checkpoints are converted on upload (load.ts); a value beyond f16's range fails
// loudly. A checkpoint with a host copy attached (host-weights.ts) is served from / recorded into that copy instead.
// Conv weights: conv-weights.ts.
import type { Engine } from '../../engine/engine';
import { loadTensor } from '../../engine/load';
import type { Int8Weight } from '../../engine/ops/linear';
import { emptyInt8, uploadInt8 } from '../../engine/quantize';
import { quantizeInt8FromCheckpoint } from '../../engine/quantize-parallel';
import type { Checkpoint } from '../../engine/safetensors';
import type { Tensor } from '../../engine/tensor';
import { hostWeightsOf } from './host-weights';

/** The dtype a model computes in: its activations and its (non-int8) weights. */
export type ComputeDType = 'f32' | 'f16';

/** A pipeline's compute dtype unless told: f16 where the adapter has shader-f16, else f32. */
export function defaultComputeDType(e: Engine): ComputeDType {
  return e.gpu.hasFeature('shader-f16') ? 'f16' : 'f32';
}
/** A linear weight (N, K) as PyTorch stores it: plain, or int8 with per-output-channel scales. */
export type LinearWeight = Tensor | Int8Weight;

export interface WeightLoader {
  e: Engine;
  ckpt: Checkpoint;
  dtype: ComputeDType;
  /** loadLinear quantises to int8 (weight-only, per output channel). */
  int8: boolean;
  /** Prepended to every key the loaders read (golden fixtures: "weight."). Default: none. */
  prefix?: string;
  /** Everything loaded so far (tensors, prepared conv weights, ...), to free them all if a later one fails. */
  loaded: { free(): void }[];
}

export function newWeightLoader(e: Engine, ckpt: Checkpoint, dtype: ComputeDType, o: { int8?: boolean; prefix?: string } = {}): WeightLoader {
  return { e, ckpt, dtype, int8: !!o.int8, prefix: o.prefix ?? '', loaded: [] };
}

/** The checkpoint key of `key` (the loader's prefix prepended). */
export function keyOf(w: WeightLoader, key: string): string {
  return w.prefix ? w.prefix + key : key;
}

export async function loadPlain(w: WeightLoader, key: string, shape: readonly number[]): Promise<Tensor> {
  const k = keyOf(w, key);
  const host = w.e.shapeOnly ? undefined : hostWeightsOf(w.ckpt);
  const t = host ? await host.loadPlain(w.e, w.ckpt, k, shape, w.dtype) : await loadTensor(w.e, w.ckpt, k, { dtype: w.dtype, shape });
  w.loaded.push(t);
  return t;
}

export async function loadLinear(w: WeightLoader, key: string, shape: readonly [number, number]): Promise<LinearWeight> {
  if (!w.int8) return loadPlain(w, key, shape);
  const k = keyOf(w, key);
  if (w.e.shapeOnly) {
    w.ckpt.entry(k, shape); // a plan: shape checked, nothing read or quantised
    const t = emptyInt8(w.e, shape[0], shape[1], w.dtype, k);
    w.loaded.push(t.q, t.scales);
    return t;
  }
  const host = hostWeightsOf(w.ckpt);
  if (host) {
    const t = await host.loadInt8(w.e, w.ckpt, k, shape, w.dtype);
    w.loaded.push(t.q, t.scales);
    return t;
  }
  w.ckpt.entry(k, shape); // shape check with the checkpoint's message
  const q = await quantizeInt8FromCheckpoint(w.ckpt, k, shape[0], shape[1]);
  const t = uploadInt8(w.e, q, w.dtype, k);
  w.loaded.push(t.q, t.scales);
  return t;
}

/** Host values (weights folded or derived at load) uploaded in the loader's dtype (or `dtype`), tracked. */
export function uploadTracked(w: WeightLoader, values: ArrayLike<number>, shape: readonly number[], label: string, dtype: ComputeDType = w.dtype): Tensor {
  const t = w.e.upload(values, shape, dtype, label);
  w.loaded.push(t);
  return t;
}

export function freeLinear(w: LinearWeight): void {
  if ('q' in w) {
    w.q.free();
    w.scales.free();
  } else w.free();
}
