// Elementwise + broadcast arithmetic vs the float64 CPU reference, on fresh random inputs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { DType } from '../../src/engine/dtype';
import { arith, contiguous, type BinaryOp, scalarOp, type ScalarOp } from '../../src/engine/ops/elementwise';
import { binaryRef } from './reference/elementwise';
import { ODD_SIZES, assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type Layout } from './helpers';

const DTYPES: DType[] = ['f32', 'f16'];
const BINARY: BinaryOp[] = ['add', 'sub', 'mul', 'div', 'max', 'min'];

// (a shape, b shape) pairs: same shape, row/column broadcast, leading dims, scalar-like.
const SHAPE_PAIRS: [number[], number[]][] = [
  [[3, 7], [3, 7]],
  [[5, 13], [13]],
  [[5, 13], [5, 1]],
  [[2, 3, 31], [3, 1]],
  [[1, 7, 1], [4, 1, 5]],
  [[257], [1]],
];

for (const dtype of DTYPES) {
  test(`elementwise ${dtype}: every binary op, broadcast shapes, all layouts`, seeded(async (rng) => {
    const e = await testEngine();
    for (const op of BINARY) {
      for (const [sa, sb] of SHAPE_PAIRS) {
        for (const layout of ['contiguous', 'transposed', 'sliced'] as Layout[]) {
          const a = randomHost(rng, sa, dtype);
          // keep divisors away from zero so f16 rounding of a quotient stays within tolerance
          const b = op === 'div' ? randomHost(rng, sb, dtype, 0.5, 2) : randomHost(rng, sb, dtype);
          const ga = uploadAs(e, a, dtype, layout);
          const gb = uploadAs(e, b, dtype, layout === 'transposed' ? 'sliced' : layout);
          const want = binaryRef(op, a, b);
          const out = poisoned(e, want.shape, dtype);
          arith(e, op, ga.view, gb.view, out);
          assertClose(await e.read(out), want, dtype, `${op} ${dtype} a[${sa}] ${layout} vs b[${sb}]`);
          for (const t of [ga.base, gb.base, out]) t.free();
        }
      }
    }
  }));

  test(`elementwise ${dtype}: scalar ops on odd sizes and views`, seeded(async (rng) => {
    const e = await testEngine();
    const ops: ScalarOp[] = ['add', 'sub', 'mul', 'div', 'rsub', 'rdiv', 'max', 'min'];
    for (const op of ops) {
      const n = ODD_SIZES[rng.int(0, ODD_SIZES.length - 1)]!;
      const shape = [3, n];
      const s = op === 'rdiv' ? 1.5 : Math.fround(rng.uniform(1, -2, 2)[0]!);
      const a = op === 'rdiv' ? randomHost(rng, shape, dtype, 0.5, 2) : randomHost(rng, shape, dtype);
      for (const layout of ['contiguous', 'transposed'] as Layout[]) {
        const ga = uploadAs(e, a, dtype, layout);
        const out = scalarOp(e, op, ga.view, s);
        assertClose(await e.read(out), binaryRef(op, a, s), dtype, `${op} ${dtype} [${shape}] ${layout} scalar ${s}`);
        ga.base.free();
        out.free();
      }
    }
  }));

  test(`elementwise ${dtype}: contiguous() copies strided views exactly`, seeded(async (rng) => {
    const e = await testEngine();
    const a = randomHost(rng, [4, 33, 7], dtype);
    const base = e.upload(a.data, a.shape, dtype);
    const view = base.permute([2, 0, 1]).slice(2, 1, 32, 3); // (7, 4, 11) with steps
    const out = contiguous(e, view);
    const got = await e.read(out);
    const want = new Float64Array(7 * 4 * 11);
    let k = 0;
    for (let i = 0; i < 7; i++) for (let j = 0; j < 4; j++) for (let m = 1; m < 32; m += 3) want[k++] = a.data[j * 33 * 7 + m * 7 + i]!;
    assertClose(got, { data: want, shape: [7, 4, 11] }, { atol: 0, rtol: 0 }, 'contiguous');
    assertClose(await e.read(view), { data: want, shape: [7, 4, 11] }, { atol: 0, rtol: 0 }, 'read(view)');
    base.free();
    out.free();
  }));
}

test('elementwise: a large 1D add exercises the 2D grid fold', seeded(async (rng) => {
  const e = await testEngine();
  const n = 65535 * 256 + 1001; // more workgroups than one dimension allows
  const a = randomHost(rng, [n], 'f32');
  const ga = e.upload(a.data, [n], 'f32');
  const out = arith(e, 'add', ga, 1);
  const got = await e.read(out);
  for (const i of [0, 1, 65535 * 256 - 1, 65535 * 256, n - 1]) assert.equal(got[i], Math.fround(a.data[i]! + 1), `element ${i}`);
  ga.free();
  out.free();
}));

test('elementwise: input checks name the op and the shapes', async () => {
  const e = await testEngine();
  const a = e.empty([2, 3]);
  const b = e.empty([4]);
  const h = e.empty([3], 'f16');
  assert.throws(() => arith(e, 'add', a, b), /add: a\[2,3\] vs b\[4\] do not broadcast/);
  assert.throws(() => arith(e, 'mul', a, h), /mul: a f32\[2,3\] vs b f16\[3\]: dtypes differ/);
  assert.throws(() => arith(e, 'sub', a, a, e.empty([3, 2])), /sub: out f32\[3,2\] must be a contiguous f32\[2,3\]/);
  for (const t of [a, b, h]) t.free();
});

test('elementwise: an out view at a nonzero offset is written there, the rest of its storage untouched', async () => {
  // Regression: the kernels wrote from element 0 of the out binding, so a contiguous slice such as rows 1..2 of a
  // [3, 4] tensor received the result in row 0 and its own rows stayed as they were (then the view was refused);
  // now out_off carries the view's offset. test/engine/out_offset.test.ts covers every op.
  const e = await testEngine();
  const a = e.upload(Float32Array.from({ length: 8 }, (_, i) => i), [2, 4], 'f32');
  const big = e.upload(new Float32Array(12).fill(-7), [3, 4], 'f32');
  const rows12 = big.slice(0, 1, 3);
  assert.equal(rows12.isContiguous, true);
  assert.equal(arith(e, 'add', a, 1, rows12), rows12);
  assert.deepEqual([...(await e.read(big))], [-7, -7, -7, -7, 1, 2, 3, 4, 5, 6, 7, 8]);
  scalarOp(e, 'mul', a, 2, rows12);
  arith(e, 'sub', a, a.slice(0, 0, 1), big.slice(0, 0, 2));
  assert.deepEqual([...(await e.read(big))], [0, 0, 0, 0, 4, 4, 4, 4, 8, 10, 12, 14]);
  a.free();
  big.free();
});
