// Conv and resample cases for `npm run bench:engine` (bench/engine/main.ts runs them like the others).
// FLOPs count the useful multiply-adds (2 per tap and channel pair); transposed convs count the scatter form's
// work, which the gather kernel exceeds by the stride (it visits every tap and skips the ones no input hits).
// Default sizes take tens of milliseconds per call on lavapipe; `--sizes large` are VAE/vocoder-sized layers.
import type { Engine } from '../../src/engine/engine';
import type { Tensor } from '../../src/engine/tensor';
import { conv1d, conv2d, conv3d, convTranspose1d, prepareConvWeight } from '../../src/engine/ops/conv';
import { interpolate } from '../../src/engine/ops/resample';
import { Activation1d } from '../../src/engine/ops/resample_alias_free';

export interface BenchCase { op: string; size: string; flops?: number; bytes?: number; setup: (e: Engine) => { run: () => void; free: () => void } }
type Up = (e: Engine, shape: number[], dtype: 'f32' | 'f16') => Tensor;


/** A case that calls `f` on prepared inputs and frees its last output before the next call. */
function make(op: string, size: string, work: { flops?: number; bytes?: number }, inputs: (e: Engine) => { f: () => Tensor; free: () => void }): BenchCase {
  return { op, size, ...work, setup: (e) => {
    const { f, free } = inputs(e);
    let y: Tensor | null = null;
    return { run: () => { y?.free(); y = f(); }, free: () => { free(); y?.free(); } };
  } };
}

export function convResampleCases(large: boolean, up: Up): BenchCase[] {
  const out: BenchCase[] = [];
  for (const dtype of ['f32', 'f16'] as const) {
    // conv1d, k7 dilation 3 'same' (BigVGAN/DAC residual unit), prepared weight
    const [L, C] = large ? [65536, 512] : [1024, 64];
    out.push(make(`conv1d ${dtype}`, `L${L} C${C}->${C} k7 d3`, { flops: 2 * L * C * C * 7 }, (e) => {
      const x = up(e, [1, L, C], dtype); const w0 = up(e, [C, C, 7], dtype);
      const w = prepareConvWeight(e, w0); w0.free();
      return { f: () => conv1d(e, x, w, { padding: 'same', dilation: 3 }), free: () => { x.free(); w.free(); } };
    }));
    // conv2d 3x3 pad 1 (image VAE block)
    const [H, C2] = large ? [256, 512] : [32, 64];
    out.push(make(`conv2d ${dtype}`, `${H}x${H} C${C2}->${C2} k3`, { flops: 2 * H * H * C2 * C2 * 9 }, (e) => {
      const x = up(e, [1, H, H, C2], dtype); const w0 = up(e, [C2, C2, 3, 3], dtype);
      const w = prepareConvWeight(e, w0); w0.free();
      return { f: () => conv2d(e, x, w, { padding: 1 }), free: () => { x.free(); w.free(); } };
    }));
    // conv3d 3x3x3, causal time with the first frame replicated (video VAE block)
    const [T, H3, W3, C3] = large ? [9, 96, 160, 256] : [5, 16, 16, 32];
    out.push(make(`conv3d causal ${dtype}`, `${T}x${H3}x${W3} C${C3}->${C3} k3`, { flops: 2 * T * H3 * W3 * C3 * C3 * 27 }, (e) => {
      const x = up(e, [1, T, H3, W3, C3], dtype); const w0 = up(e, [C3, C3, 3, 3, 3], dtype);
      const w = prepareConvWeight(e, w0); w0.free();
      return { f: () => conv3d(e, x, w, { padding: 1, causal: true, padMode: ['replicate', 'zeros', 'zeros'] }), free: () => { x.free(); w.free(); } };
    }));
  }
  // transposed conv1d x4 upsample, k8 (BigVGAN upsampling layer)
  const [Lt, Ci, Co] = large ? [8192, 512, 256] : [512, 64, 32];
  out.push(make('convT1d x4 f32', `L${Lt} C${Ci}->${Co} k8`, { flops: 2 * Lt * Ci * Co * 8 }, (e) => {
    const x = up(e, [1, Lt, Ci], 'f32'); const w0 = up(e, [Ci, Co, 8], 'f32');
    const w = prepareConvWeight(e, w0, { transposed: true }); w0.free();
    return { f: () => convTranspose1d(e, x, w, { stride: 4, padding: 2 }), free: () => { x.free(); w.free(); } };
  }));
  // depthwise conv1d k7 (ConvNeXt-style codec blocks)
  const [Ld, Cd] = large ? [65536, 1024] : [4096, 256];
  out.push(make('conv1d depthwise f32', `L${Ld} C${Cd} k7`, { flops: 2 * Ld * Cd * 7 }, (e) => {
    const x = up(e, [1, Ld, Cd], 'f32'); const w = up(e, [Cd, 1, 7], 'f32');
    return { f: () => conv1d(e, x, w, { padding: 3, groups: Cd }), free: () => { x.free(); w.free(); } };
  }));
  // 2x upsampling of a VAE feature map; bytes = read + written
  const [Hi, Ci2] = large ? [256, 512] : [64, 64];
  for (const mode of ['nearest', 'bilinear'] as const) {
    out.push(make(`interp ${mode} 2x f16`, `${Hi}x${Hi} C${Ci2}`, { bytes: 5 * Hi * Hi * Ci2 * 2 }, (e) => {
      const x = up(e, [1, Hi, Hi, Ci2], 'f16');
      return { f: () => interpolate(e, x, { mode, scale: 2 }), free: () => x.free() };
    }));
  }
  // BigVGAN Activation1d: up 2x (K12), snake-beta, down 2x; bytes = what the three kernels read and write (10 L C)
  const [La, Ca] = large ? [65536, 512] : [2048, 128];
  out.push(make('Activation1d f32', `L${La} C${Ca}`, { bytes: 10 * La * Ca * 4 }, (e) => {
    const x = up(e, [1, La, Ca], 'f32'); const a = up(e, [Ca], 'f32'); const b = up(e, [Ca], 'f32');
    const act = Activation1d.create(e);
    return { f: () => act.forward(e, x, a, { beta: b, logScale: true }), free: () => { x.free(); a.free(); b.free(); act.free(); } };
  }));
  return out;
}
