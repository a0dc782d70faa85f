// The per-token activation quantiser (ops/quantize_act.ts) vs its CPU reference, on fresh random inputs.
// Tolerance: the scale within 2^-21 relative (absmax / 127 in f32: WGSL allows f32 division 2.5 ulp off, 2^-21.7);
// q equal to the reference's (round half away from zero, clamped to +-127) except where the reference's |x / s|
// lies within 2^-20 (relative) of a half-integer, where that division's ulps may round it to the neighbour: +-1 there
// (an exact half-integer, as row 1 makes with a power-of-two scale, must round away from zero: no exemption).
// Each value also dequantises to within half a step and the division's error: |q s - x| <= s / 2 + |x| 2^-20 (the
// +-1 exemption above moves q s by up to |x| 2^-20 past s / 2: a bound of s / 2 (1 + 2^-18) failed seed 656589082).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { quantizeActivations, quantizeActRef } from '../../src/engine/ops/quantize_act';
import type { Engine } from '../../src/engine/engine';
import { randomHost, seeded, testEngine, uploadAs, type HostTensor, type Layout, type Rng } from './helpers';

async function check(e: Engine, h: HostTensor, dtype: 'f16' | 'f32', layout: Layout, what: string): Promise<void> {
  const [M, K] = h.shape as [number, number];
  const x = uploadAs(e, h, dtype, layout);
  const got = quantizeActivations(e, x.view);
  const q = await e.read(got.q);
  const s = await e.read(got.scales);
  const ref = quantizeActRef(h.data, M, K);
  for (let m = 0; m < M; m++) {
    const rs = ref.scales[m]!;
    assert.ok(Math.abs(s[m]! - rs) <= rs * 2 ** -21, `${what}: scale of row ${m}: ${s[m]} vs ${rs}`);
    for (let k = 0; k < K; k++) {
      const i = m * K + k;
      const v = rs === 0 ? 0 : Math.abs(h.data[i]! / rs);
      const nearHalf = Math.abs(v - Math.floor(v) - 0.5) <= v * 2 ** -20 && v !== Math.floor(v) + 0.5;
      const d = Math.abs(q[i]! - ref.q[i]!);
      assert.ok(d === 0 || (nearHalf && d === 1), `${what}: q[${m}, ${k}] = ${q[i]}, reference ${ref.q[i]} (x ${h.data[i]}, scale ${rs})`);
      // half a step, plus what x / s's own error (2^-20 relative, as above) may add where it rounds the other way
      assert.ok(Math.abs(q[i]! * s[m]! - h.data[i]!) <= s[m]! / 2 + Math.abs(h.data[i]!) * 2 ** -20, `${what}: q[${m}, ${k}] s off x by more than half a step`);
    }
  }
  for (const t of [x.base, got.q, got.scales]) t.free();
}

function input(rng: Rng, M: number, K: number, dtype: 'f16' | 'f32'): HostTensor {
  const h = randomHost(rng, [M, K], dtype, -3, 3);
  h.data.fill(0, 2 * K, 3 * K);                       // row 2: zeros (scale 0, q 0)
  h.data[0] = -5;                                      // row 0: the absmax negative (q -127 exactly)
  // row 1: absmax 127 2^-6, so the scale is 2^-6 (exact), and every other value an exact half-integer after scaling:
  // the rounding mode shows (round half to even would give 2 for 2.5, -2 for -2.5)
  for (let k = 0; k < K; k++) h.data[K + k] = k === 0 ? 127 * 2 ** -6 : ((k % 254) - 127 + 0.5) * 2 ** -6;
  return h;
}

test('quantizeActivations: per-token absmax scales, round half away, f16 and f32, contiguous and sliced rows', seeded(async (rng) => {
  const e = await testEngine();
  for (const dtype of ['f16', 'f32'] as const) {
    await check(e, input(rng, 37, 100, dtype), dtype, 'contiguous', `${dtype} 37x100`);
    await check(e, input(rng, 5, 260, dtype), dtype, 'sliced', `${dtype} 5x260 sliced`);
  }
  // more rows than one grid dimension holds (65535): the second grid dimension's rows
  await check(e, randomHost(rng, [65600, 4], 'f32'), 'f32', 'contiguous', 'f32 65600x4');
}));

test('quantizeActivations: refusals say what to change', async () => {
  const e = await testEngine();
  const x = e.empty([3, 6], 'f16');
  assert.throws(() => quantizeActivations(e, x), /K 6 must be a multiple of 4/);
  assert.throws(() => quantizeActivations(e, x.reshape([18])), /must be \(M, K\)/);
  const y = e.empty([4, 8], 'f16');
  assert.throws(() => quantizeActivations(e, y.transpose()), /unit inner stride/);
  x.free(); y.free();
});
