// Decode-shape linears for `npm run bench:engine -- --only linear-decode`: one row (x [1, K]) times a PyTorch
// weight [N, K], as the Qwen3-TTS talker (hidden 2048, MLP 6144) and code predictor (1024, 3072) run them once per
// generated token. Bound by reading the weight, so the rate is GB/s of weight bytes (f16: 2 per element, int8: 1).
import type { Engine } from '../../src/engine/engine';
import type { Tensor } from '../../src/engine/tensor';
import { linear } from '../../src/engine/ops/linear';
import { quantizeInt8PerChannel, uploadInt8 } from '../../src/engine/quantize';
import type { BenchCase } from './conv_resample';

type Up = (e: Engine, shape: number[], dtype: 'f32' | 'f16') => Tensor;

export function decodeCases(rand: (n: number) => Float32Array, up: Up): BenchCase[] {
  const out: BenchCase[] = [];
  for (const [K, N] of [[2048, 6144], [1024, 3072]] as const) {
    out.push({ op: 'linear-decode f16', size: `1x${K}x${N}`, bytes: 2 * N * K, setup: (e) => {
      const x = up(e, [1, K], 'f16'); const w = up(e, [N, K], 'f16');
      let y: Tensor | null = null;
      return { run: () => { y?.free(); y = linear(e, x, w); }, free: () => { x.free(); w.free(); y?.free(); } };
    } });
    out.push({ op: 'linear-decode int8', size: `1x${K}x${N}`, bytes: N * K, setup: (e) => {
      const x = up(e, [1, K], 'f16');
      const w = uploadInt8(e, quantizeInt8PerChannel(rand(N * K), N, K), 'f16');
      let y: Tensor | null = null;
      return { run: () => { y?.free(); y = linear(e, x, w); }, free: () => { x.free(); w.q.free(); w.scales.free(); y?.free(); } };
    } });
  }
  return out;
}
