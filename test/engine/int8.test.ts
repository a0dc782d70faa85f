// int8 weight-only linear: the CPU quantiser's contract, then the GPU GEMM (dequantised in the kernel) vs the
// float64 reference on the dequantised weight (q * scale), with f32 and f16 scales and activations.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { linear } from '../../src/engine/ops/linear';
import { quantizeInt8PerChannel, uploadInt8 } from '../../src/engine/quantize';
import { roundToDType } from '../../src/engine/dtype';
import { linearRef } from './reference/matmul';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type Tolerance } from './helpers';

const TOL: Record<'f32' | 'f16', Tolerance> = { f32: { atol: 1e-4, rtol: 1e-4 }, f16: { atol: 1e-2, rtol: 1e-2 } };

test('quantizeInt8PerChannel: symmetric per-row scales, error within half a step', seeded((rng) => {
  const [N, K] = [5, 37];
  const w = Float32Array.from(rng.normal(N * K, 0.1));
  w.fill(0, 2 * K, 3 * K); // a zero row
  const { q, scales } = quantizeInt8PerChannel(w, N, K);
  assert.equal(scales[2], 0);
  for (let n = 0; n < N; n++) {
    let max = 0;
    for (let k = 0; k < K; k++) max = Math.max(max, Math.abs(w[n * K + k]!));
    assert.equal(scales[n], Math.fround(max / 127));
    for (let k = 0; k < K; k++) {
      const i = n * K + k;
      assert.ok(q[i]! >= -127 && q[i]! <= 127);
      assert.ok(Math.abs(q[i]! * scales[n]! - w[i]!) <= scales[n]! / 2 + 1e-9, `w[${n},${k}]`);
    }
  }
  assert.throws(() => quantizeInt8PerChannel(w, N, K + 1), /quantizeInt8PerChannel: 185 values for \(N, K\) = \(5, 38\)/);
}));

for (const dtype of ['f32', 'f16'] as const) {
  test(`int8 linear ${dtype}: odd sizes, f32 and f16 scales, bias + gelu, sliced x`, seeded(async (rng) => {
    const e = await testEngine();
    for (const scaleDtype of ['f32', 'f16'] as const) {
      for (const [M, K, N] of [[1, 1, 1], [3, 5, 7], [13, 33, 65], [7, 130, 31]] as const) {
        const x = randomHost(rng, [M, K], dtype);
        const wq = quantizeInt8PerChannel(Float32Array.from(rng.normal(N * K, 0.2)), N, K);
        const s = roundToDType(wq.scales, scaleDtype);
        const wDeq = { data: Float64Array.from(wq.q, (v, i) => v * s[Math.floor(i / K)]!), shape: [N, K] };
        const bias = randomHost(rng, [N], dtype);
        const gx = uploadAs(e, x, dtype, M > 1 ? 'transposed' : 'sliced');
        const gw = uploadInt8(e, wq, scaleDtype);
        const gb = e.upload(bias.data, bias.shape, dtype);
        const out = poisoned(e, [M, N], dtype);
        linear(e, gx.view, gw, gb, { act: 'gelu_tanh', out });
        const label = `int8 linear ${dtype} scales ${scaleDtype} ${M}x${K}x${N}`;
        assertClose(await e.read(out), linearRef(x, wDeq, { bias, act: 'gelu_tanh' }), TOL[dtype], label);
        for (const t of [gx.base, gw.q, gw.scales, gb, out]) t.free();
      }
    }
  }));
}

test('int8 linear: a weight view (rows sliced) reads the right bytes', seeded(async (rng) => {
  const e = await testEngine();
  const [N, K] = [9, 23]; // odd K: rows start mid-word
  const wq = quantizeInt8PerChannel(Float32Array.from(rng.normal(N * K)), N, K);
  const gw = uploadInt8(e, wq);
  const x = randomHost(rng, [4, K], 'f32');
  const gx = e.upload(x.data, x.shape, 'f32');
  const out = linear(e, gx, { q: gw.q.slice(0, 3, 8), scales: gw.scales.slice(0, 3, 8) });
  const wDeq = { data: Float64Array.from(wq.q.subarray(3 * K, 8 * K), (v, i) => v * wq.scales[3 + Math.floor(i / K)]!), shape: [5, K] };
  assertClose(await e.read(out), linearRef(x, wDeq), TOL.f32, 'int8 sliced weight');
  for (const t of [gw.q, gw.scales, gx, out]) t.free();
  assert.throws(() => linear(e, gx, { q: gw.q, scales: e.empty([N + 1]) }), /linear: scales f32\[10\] must be f32\[9\] or f16\[9\]/);
}));
