// Loading the audio VAE decoder's tensors (single-file fp32 checkpoint, diffusers keys, passthrough from the
// original): conv weights with weight norm folded on the CPU in float64, biases and SnakeBeta parameters in the
// compute dtype, and the stored Kaiser resampling filters: checked against the engine's own, then used as stored.
//
// Weight norm (torch.nn.utils.weight_norm, dim 0) is stored as `<p>weight_g` [d0, 1, 1] and `<p>weight_v` (the
// conv weight's shape); the effective weight is g * v / ||v|| with the norm over every dim but 0 (for a transposed
// conv, whose weight is [Cin, Cout, k], that is per *input* channel). The newer parametrisation spelling
// (`<p>parametrizations.weight.original0/1` = g, v) and a plain `<p>weight` are read too.
import { kaiserSincFilter1d } from '../../../../engine/filters';
import type { AliasFreeResampler } from '../../../../engine/ops/resample_alias_free';
import type { PreparedConvWeight } from '../../../../engine/ops/conv';
import { CheckpointError } from '../../../../engine/safetensors';
import { loadConvWeight, prepareRawConvWeight } from '../../../common/conv-weights';
import { keyOf, type WeightLoader } from '../../../common/weights';

/** Max |stored - computed| accepted for a resampling filter tap: upstream builds them in float32 (~1e-7 off). */
const FILTER_ATOL = 1e-6;

/** g * v / ||v||, norm over every dim but 0, in float64: v [d0, ...rest] flat, g [d0]. */
export function foldWeightNorm(g: ArrayLike<number>, v: ArrayLike<number>, d0: number): Float64Array {
  const rest = v.length / d0;
  if (!Number.isInteger(rest) || g.length !== d0) throw new RangeError(`foldWeightNorm: g has ${g.length} values, v ${v.length}, dim 0 = ${d0}`);
  const out = new Float64Array(v.length);
  for (let i = 0; i < d0; i++) {
    let ss = 0;
    for (let j = 0; j < rest; j++) ss += v[i * rest + j]! ** 2;
    const s = g[i]! / Math.sqrt(ss);
    for (let j = 0; j < rest; j++) out[i * rest + j] = v[i * rest + j]! * s;
  }
  return out;
}

/**
 * A conv weight of PyTorch shape `shape` ([Cout, Cin, k], or [Cin, Cout, k] when `transposed`) under module
 * prefix `p` (e.g. "decoder.conv_pre."), weight-norm pairs folded, prepared for the conv kernel.
 */
export async function loadWeightNormConv(w: WeightLoader, p: string, shape: readonly number[], transposed = false): Promise<PreparedConvWeight> {
  const key = (k: string) => keyOf(w, p + k);
  const pairs: [string, string][] = [['weight_g', 'weight_v'], ['parametrizations.weight.original0', 'parametrizations.weight.original1']];
  const pair = pairs.find(([g, v]) => w.ckpt.has(key(g)) && w.ckpt.has(key(v)));
  if (pair) {
    const d0 = shape[0]!;
    w.ckpt.entry(key(pair[0]), [d0, ...shape.slice(1).map(() => 1)]);
    w.ckpt.entry(key(pair[1]), shape);
    const folded = foldWeightNorm(await w.ckpt.readFloat32(key(pair[0])), await w.ckpt.readFloat32(key(pair[1])), d0);
    return prepareRawConvWeight(w, w.e.upload(folded, shape, w.dtype, `${p}weight`), { transposed });
  }
  if (w.ckpt.has(key('weight'))) return loadConvWeight(w, `${p}weight`, shape, { transposed });
  throw new CheckpointError(`${w.ckpt.path}: no ${key('weight')} nor a weight-norm pair (${key('weight_g')} / ${key('weight_v')})`);
}

/**
 * Checks a stored resampling filter buffer (`<p>filter`, [1, 1, K]) against the resampler in use. A checkpoint
 * without the buffer passes (the taps are a function of the ratio and kernel size alone); one whose taps differ
 * would need that filter and fails loudly.
 */
export async function checkFilter(w: WeightLoader, key: string, r: AliasFreeResampler): Promise<void> {
  const k = keyOf(w, key);
  if (!w.ckpt.has(k)) return;
  w.ckpt.entry(k, [1, 1, r.kernelSize]);
  const stored = await w.ckpt.readFloat32(k);
  for (let i = 0; i < r.kernelSize; i++) {
    const d = Math.abs(stored[i]! - r.taps[i]!);
    if (!(d <= FILTER_ATOL)) {
      throw new CheckpointError(`${w.ckpt.path}: ${k}[${i}] = ${stored[i]} but the Kaiser-sinc ${r.kind}sampler (ratio ${r.ratio}, ${r.kernelSize} taps) has ${r.taps[i]}`);
    }
  }
}

/**
 * The taps of the first stored filter buffer whose key ends with `suffix` (e.g. "upsample.filter"), or undefined.
 * Upstream computes them in float32 (torch's kaiser_window and sinc) and every Activation1d stores the same values;
 * using them rather than our float64 taps rounded to f32 (up to ~1e-7 apart) keeps the deep stack on the filters the
 * model ran with: measured on the golden cases, our own taps roughly doubled Kiln's float32 error against upstream's
 * float64 run at the last stages (docs/models/README.md "f32 in the deep conv stacks").
 */
export async function storedTaps(w: WeightLoader, suffix: string, ratio: number, kernelSize: number): Promise<Float32Array | undefined> {
  const prefix = keyOf(w, '');
  const k = w.ckpt.keys().find((key) => key.startsWith(prefix) && key.endsWith(`.${suffix}`));
  if (!k) return undefined;
  w.ckpt.entry(k, [1, 1, kernelSize]);
  const stored = await w.ckpt.readFloat32(k);
  const ours = kaiserSincFilter1d(0.5 / ratio, 0.6 / ratio, kernelSize);
  const i = ours.findIndex((t, j) => !(Math.abs(stored[j]! - t) <= FILTER_ATOL));
  if (i >= 0) throw new CheckpointError(`${w.ckpt.path}: ${k}[${i}] = ${stored[i]} but a Kaiser-sinc filter (ratio ${ratio}, ${kernelSize} taps) has ${ours[i]}`);
  return stored;
}
