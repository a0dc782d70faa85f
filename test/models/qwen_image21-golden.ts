// Shared by the Qwen-Image-2.1 golden tests: fixture inputs -> joint sequence, model and tensors, and host-side row helpers.
import type { Engine } from '../../src/engine/engine';
import type { Tensor } from '../../src/engine/tensor';
import { jointSequence, parseQwenImage21Config, QwenImage21Transformer, type ImageShape, type JointSequence, type QwenImage21Config } from '../../src/models/qwen_image21';
import type { ComputeDType } from '../../src/models/common/weights';
import type { HostTensor } from '../engine/helpers';
import { WEIGHT_PREFIX, type GoldenCase } from './golden';
import type { Variant } from './qwen3-golden';

// The same run variants (f32, f16, int8 linears) as the Qwen3 golden tests.
export { VARIANTS, type Variant } from './qwen3-golden';

/** Uploads host tensors at `dtype`, recording each in `temps` for the caller to free. */
export function uploader(e: Engine, dtype: ComputeDType, temps: Tensor[]): (h: HostTensor) => Tensor {
  return (h) => {
    const t = e.upload(h.data, h.shape, dtype);
    temps.push(t);
    return t;
  };
}

/** The transformer config of a case (trajectory fixtures nest it under "transformer"). */
export function caseConfig(c: GoldenCase): QwenImage21Config {
  const raw = (c.config.transformer ?? c.config) as Record<string, unknown>;
  return parseQwenImage21Config(raw, `${c.path} config`);
}

/** input.img_mask (B, Lvlm) (rows equal: samples share a sequence) + input.img_shapes (N, 3) -> the joint sequence. */
export async function caseSequence(c: GoldenCase): Promise<JointSequence> {
  const mask = await c.ints('img_mask');
  const L = mask.shape[mask.shape.length - 1]!;
  const row = mask.data.slice(0, L);
  for (let b = 1; b < mask.data.length / L; b++) {
    if (mask.data.slice(b * L, (b + 1) * L).some((v, i) => v !== row[i])) throw new Error(`${c.name}: img_mask rows differ between samples`);
  }
  const shapes = await c.ints('img_shapes');
  const imgShapes: ImageShape[] = [];
  for (let i = 0; i < shapes.data.length; i += 3) imgShapes.push([shapes.data[i]!, shapes.data[i + 1]!, shapes.data[i + 2]!]);
  return jointSequence(row, imgShapes);
}

export async function loadCaseModel(e: Engine, c: GoldenCase, v: Variant): Promise<QwenImage21Transformer> {
  return QwenImage21Transformer.load(e, c.ckpt, caseConfig(c), { dtype: v.dtype, int8: v.int8, prefix: WEIGHT_PREFIX });
}

/** Rows [a, b) along dim 1 of a (B, L, ...) host tensor. */
export function rows(t: HostTensor, a: number, b: number): HostTensor {
  const [B, L] = t.shape as [number, number];
  const w = t.data.length / (B * L);
  const out = new Float64Array(B * (b - a) * w);
  for (let i = 0; i < B; i++) out.set(t.data.subarray((i * L + a) * w, (i * L + b) * w), i * (b - a) * w);
  return { data: out, shape: [B, b - a, ...t.shape.slice(2)] };
}

/** Concatenation along dim 1 of (B, La, W) and (B, Lb, W) flat arrays. */
export function concatRows(a: ArrayLike<number>, b: ArrayLike<number>, B: number): Float32Array {
  const wa = a.length / B;
  const wb = b.length / B;
  const out = new Float32Array(a.length + b.length);
  for (let i = 0; i < B; i++) {
    out.set(Array.from({ length: wa }, (_, j) => a[i * wa + j]!), i * (wa + wb));
    out.set(Array.from({ length: wb }, (_, j) => b[i * wb + j]!), i * (wa + wb) + wa);
  }
  return out;
}

/** Rows [r0, r1, ...] of a 2D host tensor. */
export function pickRows(t: HostTensor, which: number[]): HostTensor {
  const w = t.data.length / t.shape[0]!;
  const out = new Float64Array(which.length * w);
  which.forEach((r, i) => out.set(t.data.subarray(r * w, (r + 1) * w), i * w));
  return { data: out, shape: [which.length, w] };
}
