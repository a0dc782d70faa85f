// linear(x, W, bias?, epilogue) vs the float64 reference: every activation, gate and residual (broadcast and
// strided), odd sizes, a sliced x and a weight view, poisoned outputs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { linear } from '../../src/engine/ops/linear';
import type { Activation } from '../../src/engine/ops/matmul';
import { linearRef } from './reference/matmul';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type HostTensor, type Tolerance } from './helpers';

// f32: sums over K plus the shader's erf approximation (1.5e-7) and f32 exp/tanh: 1e-4. f16: one rounding.
const TOL: Record<'f32' | 'f16', Tolerance> = { f32: { atol: 1e-4, rtol: 1e-4 }, f16: { atol: 1e-2, rtol: 1e-2 } };
const ACTS: Activation[] = ['none', 'gelu_tanh', 'gelu_erf', 'silu'];

for (const dtype of ['f32', 'f16'] as const) {
  test(`linear ${dtype}: bias and every activation on odd sizes`, seeded(async (rng) => {
    const e = await testEngine();
    for (const act of ACTS) {
      const [B, L, K, N] = [2, rng.int(1, 9), rng.int(1, 70), rng.int(1, 70)];
      // inputs scaled up so the activations see their curved region (|xW| up to a few units)
      const x = randomHost(rng, [B, L, K], dtype, -2, 2);
      const w = randomHost(rng, [N, K], dtype);
      const bias = randomHost(rng, [N], dtype);
      const gx = uploadAs(e, x, dtype, 'sliced');
      const gw = e.upload(w.data, w.shape, dtype);
      const gb = e.upload(bias.data, bias.shape, dtype);
      const out = poisoned(e, [B, L, N], dtype);
      linear(e, gx.view, gw, gb, { act, out });
      assertClose(await e.read(out), linearRef(x, w, { bias, act }), TOL[dtype], `linear ${dtype} ${act} x[${B},${L},${K}] W[${N},${K}]`);
      for (const t of [gx.base, gw, gb, out]) t.free();
    }
  }));

  test(`linear ${dtype}: gate multiply and gated residual epilogues`, seeded(async (rng) => {
    const e = await testEngine();
    const [B, L, K, N] = [2, 7, 33, 13];
    const x = randomHost(rng, [B, L, K], dtype);
    const w = randomHost(rng, [N, K], dtype);
    const bias = randomHost(rng, [N], dtype);
    const up = (h: HostTensor) => e.upload(h.data, h.shape, dtype);
    const gx = up(x);
    const gw = up(w);
    const gbias = up(bias);
    // SwiGLU-style: act(xW + b) * g with g (B, L, N) given as a transposed view
    const g = randomHost(rng, [B, L, N], dtype);
    const gg = uploadAs(e, g, dtype, 'transposed');
    let out = linear(e, gx, gw, gbias, { act: 'silu', gate: gg.view });
    assertClose(await e.read(out), linearRef(x, w, { bias, act: 'silu', gate: g }), TOL[dtype], `linear ${dtype} silu * gate`);
    out.free();
    // adaLN-style residual: r + gate * (xW + b), gate (B, 1, N) broadcast over tokens
    const gate = randomHost(rng, [B, 1, N], dtype);
    const r = randomHost(rng, [B, L, N], dtype);
    const ggate = up(gate);
    const gr = uploadAs(e, r, dtype, 'sliced');
    out = linear(e, gx, gw, gbias, { gate: ggate, residual: gr.view });
    assertClose(await e.read(out), linearRef(x, w, { bias, gate, residual: r }), TOL[dtype], `linear ${dtype} residual + gate`);
    out.free();
    // residual alone, no bias, x a single vector (K) -> (N)
    const v = randomHost(rng, [K], dtype);
    const rv = randomHost(rng, [N], dtype);
    const gv = up(v);
    const grv = up(rv);
    out = linear(e, gv, gw, null, { residual: grv });
    assert.deepEqual(out.shape, [N]);
    assertClose(await e.read(out), linearRef(v, w, { residual: rv }), TOL[dtype], `linear ${dtype} vector + residual`);
    for (const t of [out, gx, gw, gbias, gg.base, ggate, gr.base, gv, grv]) t.free();
  }));
}

test('linear: input checks name the op and the shapes', async () => {
  const e = await testEngine();
  const x = e.empty([2, 5]);
  const w = e.empty([3, 4]);
  assert.throws(() => linear(e, x, w), /linear: x\[2,5\] vs weight \(N, K\)=\[3,4\]: K differs/);
  const w5 = e.empty([3, 5]);
  assert.throws(() => linear(e, x, w5, e.empty([4])), /linear: bias f32\[4\] must be f32\[3\]/);
  assert.throws(() => linear(e, x, w5, null, { gate: e.empty([4, 3]) }), /linear: gate\[4,3\] does not broadcast to the output \[2,3\]/);
});
