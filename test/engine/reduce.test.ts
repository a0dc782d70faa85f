// sum / mean / max / argmax over the last dim vs the float64 reference: odd row lengths (below, at and past
// the workgroup size), leading dims, transposed and sliced views, poisoned outputs, ties.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { argmax, reduce, type ReduceOp } from '../../src/engine/ops/reduce';
import { argmaxRef, reduceRef } from './reference/reduce';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type Layout, type Tolerance } from './helpers';

// f32 sums over up to 1000 elements (1e-4); f16 results are one rounding of an f32 sum (1e-2).
const TOL: Record<'f32' | 'f16', Tolerance> = { f32: { atol: 1e-4, rtol: 1e-4 }, f16: { atol: 1e-2, rtol: 1e-2 } };
const SHAPES = [[1], [3, 7], [2, 63], [5, 65], [2, 3, 257], [3, 1000]];

for (const dtype of ['f32', 'f16'] as const) {
  test(`reduce ${dtype}: sum, mean, max, argmax on odd rows and views`, seeded(async (rng) => {
    const e = await testEngine();
    for (const shape of SHAPES) {
      for (const layout of ['contiguous', 'transposed', 'sliced'] as Layout[]) {
        if (layout === 'transposed' && shape.length < 2) continue;
        const x = randomHost(rng, shape, dtype);
        const gx = uploadAs(e, x, dtype, layout);
        const label = `${dtype}${JSON.stringify(shape)} ${layout}`;
        for (const op of ['sum', 'mean', 'max'] as ReduceOp[]) {
          const out = poisoned(e, shape.slice(0, -1), dtype);
          reduce(e, op, gx.view, out);
          assertClose(await e.read(out), reduceRef(op, x), TOL[dtype], `${op} ${label}`);
          out.free();
        }
        const idx = poisoned(e, shape.slice(0, -1), 'f32');
        argmax(e, gx.view, idx);
        assertClose(await e.read(idx), argmaxRef(x), { atol: 0, rtol: 0 }, `argmax ${label}`);
        idx.free();
        gx.base.free();
      }
    }
  }));
}

test('argmax: ties pick the lowest index; a constant row gives 0', async () => {
  const e = await testEngine();
  const row = new Array(300).fill(0.5);
  row[17] = row[200] = row[299] = 2;
  const x = e.upload([...row, ...new Array(300).fill(-1)], [2, 300], 'f16');
  assert.deepEqual([...(await e.read(argmax(e, x)))], [17, 0]);
});

test('reduce: input checks name the op and the shapes', async () => {
  const e = await testEngine();
  const x = e.empty([2, 3]);
  assert.throws(() => reduce(e, 'sum', x, e.empty([3])), /sum: out f32\[3\] must be a contiguous f32\[2\]/);
  assert.throws(() => argmax(e, x, e.empty([2], 'f16')), /argmax: out f16\[2\] must be a contiguous f32\[2\]/);
  assert.throws(() => reduce(e, 'max', e.empty([2, 0])), /max: f32\[2,0\]: empty rows/);
});
