// interpolate (nearest, linear/bilinear/trilinear, align_corners) on channels-last tensors vs the float64
// separable CPU reference: integer factors and arbitrary sizes up and down, odd sizes, strided inputs, poisoned
// outputs, and the input checks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { DType } from '../../src/engine/dtype';
import { interpolate, upsampleLinear, upsampleNearest, type InterpMode } from '../../src/engine/ops/resample';
import { interpolateRef } from './reference/resample';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type Layout } from './helpers';

interface Case { sp: number[]; C: number; mode: InterpMode; size?: number[]; scale?: number | number[]; align?: boolean }

const CASES: Case[] = [
  { sp: [7], C: 3, mode: 'nearest', scale: 2 },
  { sp: [13], C: 5, mode: 'nearest', scale: 3 },
  { sp: [7], C: 2, mode: 'nearest', size: [17] },
  { sp: [13], C: 4, mode: 'nearest', size: [5] },
  { sp: [9], C: 3, mode: 'linear', scale: 2 },
  { sp: [5], C: 3, mode: 'linear', size: [12], align: true },
  { sp: [11], C: 1, mode: 'linear', size: [4] },
  { sp: [1], C: 3, mode: 'linear', size: [5], align: true },
  { sp: [7, 5], C: 3, mode: 'nearest', scale: 2 },
  { sp: [7, 5], C: 6, mode: 'nearest', size: [3, 11] },
  { sp: [6, 9], C: 5, mode: 'bilinear', scale: [2, 2] },
  { sp: [6, 9], C: 5, mode: 'bilinear', size: [13, 4], align: true },
  { sp: [5, 3], C: 33, mode: 'bilinear', size: [9, 10] },
  { sp: [3, 5, 4], C: 4, mode: 'nearest', scale: [1, 2, 2] },  // video VAE spatial-only upsample
  { sp: [2, 3, 3], C: 3, mode: 'nearest', scale: 2 },
  { sp: [3, 4, 5], C: 2, mode: 'trilinear', size: [5, 7, 3] },
  { sp: [3, 4, 5], C: 2, mode: 'trilinear', scale: 2, align: true },
];

function targetSize(c: Case): number[] {
  if (c.size) return c.size;
  const s = typeof c.scale === 'number' ? c.sp.map(() => c.scale as number) : c.scale!;
  return c.sp.map((n, i) => n * s[i]!);
}

for (const dtype of ['f32', 'f16'] as DType[]) {
  test(`interpolate ${dtype}: nearest and (bi/tri)linear, integer factors and sizes, align_corners`, seeded(async (rng) => {
    const e = await testEngine();
    for (const c of CASES) {
      const N = rng.int(1, 2);
      const x = randomHost(rng, [N, ...c.sp, c.C], dtype);
      const size = targetSize(c);
      const want = interpolateRef(x, size, c.mode === 'nearest' ? 'nearest' : 'linear', c.align);
      const gx = e.upload(x.data, x.shape, dtype);
      const out = poisoned(e, want.shape, dtype);
      interpolate(e, gx, { mode: c.mode, size: c.size, scale: c.scale, alignCorners: c.align, out });
      assertClose(await e.read(out), want, dtype, `interpolate ${dtype} ${JSON.stringify(c).replace(/"/g, '')}`);
      for (const t of [gx, out]) t.free();
    }
  }));

  test(`interpolate ${dtype}: strided inputs (transposed last dims, slices); upsample helpers`, seeded(async (rng) => {
    const e = await testEngine();
    for (const layout of ['transposed', 'sliced'] as Layout[]) {
      for (const d of [1, 2, 3]) {
        const sp = Array.from({ length: d }, () => rng.int(2, 6));
        const x = randomHost(rng, [2, ...sp, rng.int(1, 5)], dtype);
        const gx = uploadAs(e, x, dtype, layout);
        const size = sp.map((n) => n * 2);
        let out = upsampleNearest(e, gx.view, 2);
        assertClose(await e.read(out), interpolateRef(x, size, 'nearest'), dtype, `upsampleNearest ${dtype} ${d}D x ${layout}`);
        out.free();
        out = upsampleLinear(e, gx.view, 2, layout === 'sliced');
        assertClose(await e.read(out), interpolateRef(x, size, 'linear', layout === 'sliced'), dtype, `upsampleLinear ${dtype} ${d}D x ${layout}`);
        for (const t of [out, gx.base]) t.free();
      }
    }
  }));
}

test('interpolate: input checks name the op and the shapes', async () => {
  const e = await testEngine();
  const x = e.empty([1, 4, 5, 3]);
  assert.throws(() => interpolate(e, x, { mode: 'linear', scale: 2 }), /interpolate\(linear\): x f32\[1,4,5,3\] has 2 spatial axes; linear needs 1/);
  assert.throws(() => interpolate(e, x, { mode: 'nearest', scale: 2, alignCorners: true }), /interpolate\(nearest\): alignCorners only applies to the linear modes/);
  assert.throws(() => interpolate(e, x, { mode: 'nearest' }), /interpolate\(nearest\): give exactly one of size and scale/);
  assert.throws(() => interpolate(e, x, { mode: 'nearest', scale: 1.5 }), /interpolate\(nearest\): scale 1.5 must be an integer >= 1 or 2 of them/);
  assert.throws(() => interpolate(e, x, { mode: 'bilinear', size: [8] }), /interpolate\(bilinear\): size \[8\] must be 2 integers >= 1/);
  assert.throws(() => interpolate(e, e.empty([4, 3]), { mode: 'nearest', scale: 2 }), /interpolate\(nearest\): x f32\[4,3\] must be channels-last/);
  assert.throws(() => interpolate(e, x, { mode: 'nearest', scale: 2, out: e.empty([1, 8, 10, 4]) }), /interpolate\(nearest\): out f32\[1,8,10,4\] must be a contiguous f32\[1,8,10,3\]/);
});
