// BigVGAN's anti-aliased 1D resampling (alias-free torch): UpSample1d, DownSample1d and the Activation1d
// composite (upsample 2x -> snake / snake-beta -> downsample 2x), on channels-last [N, L, C] activations.
//   shader:    shaders/resample.wgsl (entries upfir, downfir)
//   filters:   src/engine/filters.ts (kaiserSincFilter1d, float64 on the CPU, uploaded once as f32), or the taps a
//              checkpoint stores (its float32 buffers, what the model ran with: within ~1e-7 of ours, but through a
//              deep stack that difference grows into a visible share of float32's own rounding)
//   reference: test/engine/reference/resample.ts
//   tests:     test/engine/resample_alias_free.test.ts
// Upstream semantics (NVIDIA/BigVGAN alias_free_activation/torch/resample.py, filter.py):
//   UpSample1d(R, K = 6R rounded to even): replicate-pad by K/R - 1 each side, transposed conv with stride R and
//     the low-pass filter (cutoff 0.5/R, half-width 0.6/R) per channel, times R, crop to L*R samples.
//   DownSample1d(R, K): replicate-pad (K/2 - [K even], K/2), conv with the same kind of filter, stride R.
import type { Engine } from '../engine';
import { kaiserSincFilter1d } from '../filters';
import { Params } from '../kernels';
import { grid1d } from '../recorder';
import type { Tensor } from '../tensor';
import { snake, type SnakeOptions } from './activation';
import { checkFloat, outputTensor } from './checks';

const WG = 256;

/** A resampler's constants and its filter taps (f32 [K] on the GPU; free() it with the model). */
export interface AliasFreeResampler {
  readonly kind: 'up' | 'down';
  readonly ratio: number;
  readonly kernelSize: number;
  /** The taps in use: kaiserSincFilter1d(0.5/ratio, 0.6/ratio, kernelSize) in float64, or the ones given. */
  readonly taps: Float64Array;
  readonly filter: Tensor;
  free(): void;
}

/** upstream's default kernel size for a ratio: int(6 * R // 2) * 2. */
export const defaultKernelSize = (ratio: number) => Math.floor((6 * ratio) / 2) * 2;

/** `taps`: the kernelSize filter taps to use instead of computing them (a checkpoint's stored buffer). */
export function createUpSample1d(e: Engine, ratio = 2, kernelSize = defaultKernelSize(ratio), taps?: ArrayLike<number>): AliasFreeResampler {
  return create(e, 'up', ratio, kernelSize, taps);
}

export function createDownSample1d(e: Engine, ratio = 2, kernelSize = defaultKernelSize(ratio), taps?: ArrayLike<number>): AliasFreeResampler {
  return create(e, 'down', ratio, kernelSize, taps);
}

function create(e: Engine, kind: 'up' | 'down', ratio: number, kernelSize: number, given?: ArrayLike<number>): AliasFreeResampler {
  const op = kind === 'up' ? 'UpSample1d' : 'DownSample1d';
  if (!Number.isInteger(ratio) || ratio < 1) throw new RangeError(`${op}: ratio ${ratio} must be an integer >= 1`);
  if (!Number.isInteger(kernelSize) || kernelSize < 1) throw new RangeError(`${op}: kernelSize ${kernelSize} must be an integer >= 1`);
  if (kind === 'up' && kernelSize < ratio) throw new RangeError(`${op}: kernelSize ${kernelSize} must be >= ratio ${ratio}`);
  if (given && given.length !== kernelSize) throw new RangeError(`${op}: ${given.length} taps given for kernelSize ${kernelSize}`);
  const taps = given ? Float64Array.from(given) : kaiserSincFilter1d(0.5 / ratio, 0.6 / ratio, kernelSize);
  const filter = e.upload(taps, [kernelSize], 'f32', `${op} filter`);
  return { kind, ratio, kernelSize, taps, filter, free: () => filter.free() };
}

/** [N, L, C] -> [N, L*R, C]. */
export function upSample1d(e: Engine, x: Tensor, up: AliasFreeResampler, out?: Tensor): Tensor {
  const op = 'upSample1d';
  check(op, x, up, 'up');
  const [N, L, C] = x.shape as [number, number, number];
  const R = up.ratio;
  const K = up.kernelSize;
  const pad = Math.floor(K / R) - 1;
  const padLeft = pad * R + Math.floor((K - R) / 2);
  const o = outputTensor(e, op, [N, L * R, C], x.dtype, out, [x], true); // any offset: in_sp.w
  dispatch(e, 'upfir', o, x, up, [R, K, pad, padLeft], R);
  return o;
}

/** [N, L, C] -> [N, floor((L - 1) / R) + 1, C] (upstream's LowPassFilter1d output length with its padding). */
export function downSample1d(e: Engine, x: Tensor, down: AliasFreeResampler, out?: Tensor): Tensor {
  const op = 'downSample1d';
  check(op, x, down, 'down');
  const [N, L, C] = x.shape as [number, number, number];
  const R = down.ratio;
  const K = down.kernelSize;
  const padLeft = Math.floor(K / 2) - (K % 2 === 0 ? 1 : 0);
  const padRight = Math.floor(K / 2);
  const lout = Math.floor((L + padLeft + padRight - K) / R) + 1;
  const o = outputTensor(e, op, [N, lout, C], x.dtype, out, [x], true); // any offset: in_sp.w
  dispatch(e, 'downfir', o, x, down, [R, K, 0, padLeft], 1);
  return o;
}

/** BigVGAN's Activation1d: upSample1d -> snake (or snake-beta) per channel -> downSample1d, [N, L, C] -> [N, L', C]. */
export class Activation1d {
  private constructor(readonly up: AliasFreeResampler, readonly down: AliasFreeResampler) {}

  /** Upstream's defaults: ratios 2 and 2, kernel sizes 12 and 12; upTaps / downTaps: stored filters to use. */
  static create(
    e: Engine,
    o: { upRatio?: number; downRatio?: number; upKernelSize?: number; downKernelSize?: number; upTaps?: ArrayLike<number>; downTaps?: ArrayLike<number> } = {},
  ): Activation1d {
    const up = createUpSample1d(e, o.upRatio ?? 2, o.upKernelSize ?? 12, o.upTaps);
    return new Activation1d(up, createDownSample1d(e, o.downRatio ?? 2, o.downKernelSize ?? 12, o.downTaps));
  }

  /** alpha (and beta) [C]: snake's parameters as stored (`logScale` when the checkpoint holds log values). */
  forward(e: Engine, x: Tensor, alpha: Tensor, o: Omit<SnakeOptions, 'channelDim' | 'out'> & { out?: Tensor } = {}): Tensor {
    const u = upSample1d(e, x, this.up);
    const a = snake(e, u, alpha, { beta: o.beta, logScale: o.logScale, channelDim: -1 });
    u.free();
    const y = downSample1d(e, a, this.down, o.out);
    a.free();
    return y;
  }

  free(): void {
    this.up.free();
    this.down.free();
  }
}

function check(op: string, x: Tensor, r: AliasFreeResampler, kind: 'up' | 'down'): void {
  checkFloat(op, x);
  if (x.rank !== 3) throw new RangeError(`${op}: x ${x} must be channels-last [N, L, C]`);
  if (x.shape[1] === 0) throw new RangeError(`${op}: x ${x} is empty along L`);
  if (r.kind !== kind) throw new TypeError(`${op}: got a ${r.kind}sampler (make it with create${kind === 'up' ? 'Up' : 'Down'}Sample1d)`);
}

function dispatch(e: Engine, entry: 'upfir' | 'downfir', out: Tensor, x: Tensor, r: AliasFreeResampler, fir: number[], gain: number): void {
  const [, L, C] = x.shape as [number, number, number];
  const params = new Params()
    .u32(out.numel).u32(C).u32(x.offset).u32(x.strides[0]!)
    .dims([L, 0, 0, out.offset], 4)
    .dims([out.shape[1]!], 4)
    .dims([x.strides[1]!, x.strides[2]!], 4)
    .dims([], 4) // interp scale: unused
    .dims(fir, 4)
    .f32(gain);
  const kernel = e.kernels.get({ shader: 'resample', entry, dtype: x.dtype, constants: { WG } });
  e.recorder.dispatch({ kernel, bindings: [out, x, r.filter], params, workgroups: grid1d(out.numel, WG) });
}
