// The subgroup-matrix (tensor-core) GEMM path vs the float64 reference, where the adapter has it. Lavapipe has
// no subgroup matrix: the test skips with the reason (printed). Never run on hardware when written.
import { test } from 'node:test';
import { linear } from '../../src/engine/ops/linear';
import { matmul } from '../../src/engine/ops/matmul';
import { subgroupMatrixPlan } from '../../src/engine/ops/matmul_subgroup';
import { linearRef, matmulRef } from './reference/matmul';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs } from './helpers';

// f16 products are exact in the f32 accumulator; the output is rounded to f16 once.
const TOL = { atol: 1e-2, rtol: 1e-2 };

test('matmul subgroup-matrix f16: odd sizes, transposed operands, fused epilogue', async (t) => {
  const e = await testEngine();
  const plan = subgroupMatrixPlan(e);
  if (!('config' in plan)) {
    console.log(`# matmul_subgroup: skipped: ${plan.reason}`);
    t.skip(plan.reason);
    return;
  }
  await seeded(async (rng) => {
    for (const [M, K, N] of [[1, 1, 1], [7, 13, 33], [65, 40, 63], [128, 96, 130]] as const) {
      const a = randomHost(rng, [2, M, K], 'f16');
      const b = randomHost(rng, [K, N], 'f16');
      const ga = uploadAs(e, a, 'f16', 'transposed');
      const gb = uploadAs(e, b, 'f16', 'sliced');
      const out = poisoned(e, [2, M, N], 'f16');
      matmul(e, ga.view, gb.view, { out, path: 'subgroup' });
      assertClose(await e.read(out), matmulRef(a, b), TOL, `subgroup matmul ${M}x${K}x${N}`);
      for (const x of [ga.base, gb.base, out]) x.free();
    }
    const x = randomHost(rng, [3, 33, 64], 'f16');
    const w = randomHost(rng, [50, 64], 'f16');
    const bias = randomHost(rng, [50], 'f16');
    const r = randomHost(rng, [3, 33, 50], 'f16');
    const [gx, gw, gbias, gr] = [x, w, bias, r].map((h) => e.upload(h.data, h.shape, 'f16'));
    const out = linear(e, gx!, gw!, gbias, { act: 'gelu_tanh', residual: gr, path: 'subgroup' });
    assertClose(await e.read(out), linearRef(x, w, { bias, act: 'gelu_tanh', residual: r }), TOL, 'subgroup linear');
    for (const y of [gx, gw, gbias, gr, out]) y!.free();
  })();
});
