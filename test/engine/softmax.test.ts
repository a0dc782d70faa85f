// Softmax over the last dim vs the float64 reference: odd row lengths, leading dims, views, large logits
// (the max subtraction), poisoned outputs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { softmax } from '../../src/engine/ops/softmax';
import { softmaxRef } from './reference/reduce';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type Layout, type Tolerance } from './helpers';

// f32: exp and an f32 sum over <= 1000 terms (1e-5 absolute on values <= 1); f16: one rounding (1e-2 default,
// here 2e-3 since outputs are <= 1).
const TOL: Record<'f32' | 'f16', Tolerance> = { f32: { atol: 1e-5, rtol: 1e-4 }, f16: { atol: 2e-3, rtol: 1e-2 } };

for (const dtype of ['f32', 'f16'] as const) {
  test(`softmax ${dtype}: odd rows, views, large logits`, seeded(async (rng) => {
    const e = await testEngine();
    for (const shape of [[1], [3, 7], [2, 65], [2, 3, 257], [2, 1000]]) {
      for (const layout of ['contiguous', 'transposed', 'sliced'] as Layout[]) {
        if (layout === 'transposed' && shape.length < 2) continue;
        const x = randomHost(rng, shape, dtype, -8, 8); // exp(16) spread: the max subtraction matters
        const gx = uploadAs(e, x, dtype, layout);
        const out = poisoned(e, shape, dtype);
        softmax(e, gx.view, out);
        assertClose(await e.read(out), softmaxRef(x), TOL[dtype], `softmax ${dtype}${JSON.stringify(shape)} ${layout}`);
        gx.base.free();
        out.free();
      }
    }
    const big = e.upload([1000, 999, -1000, 0], [1, 4], dtype === 'f16' ? 'f32' : dtype);
    const got = await e.read(softmax(e, big));
    assertClose(got, softmaxRef({ data: Float64Array.from([1000, 999, -1000, 0]), shape: [1, 4] }), TOL.f32, 'softmax of large logits');
  }));
}

test('softmax: input checks name the op and the shapes', async () => {
  const e = await testEngine();
  assert.throws(() => softmax(e, e.empty([2, 3]), e.empty([2, 4])), /softmax: out f32\[2,4\] must be a contiguous f32\[2,3\]/);
  assert.throws(() => softmax(e, e.empty([2, 3], 'i8')), /softmax: i8\[2,3\]: only f32 and f16 tensors/);
});
