// Unary math (relu, sigmoid, tanh, exp, log, sqrt, abs, square, elu, shift/clamp) vs the float64 CPU reference on fresh
// random inputs: odd sizes, contiguous/transposed/sliced views, poisoned outputs, large arguments, input checks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { DType } from '../../src/engine/dtype';
import { clamp, elu, unary, type UnaryOp, type UnaryOptions } from '../../src/engine/ops/unary';
import { unaryRef } from './reference/unary';
import { ODD_SIZES, assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type Layout } from './helpers';

const OPS: UnaryOp[] = ['identity', 'relu', 'sigmoid', 'tanh', 'exp', 'log', 'sqrt', 'abs', 'square', 'elu'];
const LAYOUTS: Layout[] = ['contiguous', 'transposed', 'sliced'];

/** Input range per op: log and sqrt need positive arguments unless a clamp makes them so. */
const RANGE: Partial<Record<UnaryOp, [number, number]>> = { log: [0.01, 4], sqrt: [0, 4] };

for (const dtype of ['f32', 'f16'] as DType[]) {
  test(`unary ${dtype}: every op on odd sizes and all layouts`, seeded(async (rng) => {
    const e = await testEngine();
    for (const op of OPS) {
      for (const layout of LAYOUTS) {
        const shape = [ODD_SIZES[rng.int(1, 6)]!, ODD_SIZES[rng.int(0, ODD_SIZES.length - 1)]!];
        const [lo, hi] = RANGE[op] ?? [-3, 3];
        const x = randomHost(rng, shape, dtype, lo, hi);
        const gx = uploadAs(e, x, dtype, layout);
        const out = poisoned(e, shape, dtype);
        assert.equal(unary(e, op, gx.view, { out }), out);
        assertClose(await e.read(out), unaryRef(op, x), dtype, `${op} ${dtype} [${shape}] ${layout}`);
        gx.base.free();
        out.free();
      }
    }
  }));

  test(`unary ${dtype}: shift and clamp before f (log(max(x, eps)), sqrt(x + eps), clamp)`, seeded(async (rng) => {
    const e = await testEngine();
    const cases: [UnaryOp, UnaryOptions][] = [
      ['log', { min: 1e-5 }],
      ['sqrt', { min: 1e-3 }],
      ['sqrt', { shift: 0.25, min: 0 }],
      ['identity', { min: -0.5, max: 0.25 }],
      ['identity', { max: 0.5 }],
      ['exp', { shift: -1, max: 1 }],
    ];
    for (const [op, o] of cases) {
      const x = randomHost(rng, [3, ODD_SIZES[rng.int(2, 8)]!], dtype, -1, 1);
      const gx = uploadAs(e, x, dtype, 'transposed');
      const out = unary(e, op, gx.view, o);
      assertClose(await e.read(out), unaryRef(op, x, o), dtype, `${op} ${dtype} ${JSON.stringify(o)}`);
      gx.base.free();
      out.free();
    }
    const x = randomHost(rng, [65], dtype, -2, 2);
    const gx = e.upload(x.data, x.shape, dtype);
    const out = clamp(e, gx, -1, 1);
    assertClose(await e.read(out), unaryRef('identity', x, { min: -1, max: 1 }), dtype, `clamp ${dtype}`);
    gx.free();
    out.free();
  }));

  test(`unary ${dtype}: elu with alpha != 1 on odd sizes and all layouts, and through shift/clamp`, seeded(async (rng) => {
    const e = await testEngine();
    for (const layout of LAYOUTS) {
      const alpha = Math.fround(0.1 + 2.4 * rng.uniform(1, 0, 1)[0]!);
      const shape = [ODD_SIZES[rng.int(1, 6)]!, ODD_SIZES[rng.int(0, ODD_SIZES.length - 1)]!];
      const x = randomHost(rng, shape, dtype, -6, 3);
      const gx = uploadAs(e, x, dtype, layout);
      const out = poisoned(e, shape, dtype);
      assert.equal(elu(e, gx.view, alpha, { out }), out);
      assertClose(await e.read(out), unaryRef('elu', x, { alpha }), dtype, `elu alpha ${alpha} ${dtype} [${shape}] ${layout}`);
      const shifted = elu(e, gx.view, alpha, { shift: -0.5, min: -4 });
      assertClose(await e.read(shifted), unaryRef('elu', x, { alpha, shift: -0.5, min: -4 }), dtype, `elu shifted ${dtype} ${layout}`);
      gx.base.free();
      out.free();
      shifted.free();
    }
  }));
}

test('unary f32: elu is expm1-accurate near 0 (relative) and saturates to -alpha', seeded(async (rng) => {
  const e = await testEngine();
  // tiny negative arguments, where exp(x) - 1 in f32 loses most digits (-1e-7 would come out -1.19e-7 or 0), the
  // polynomial/exp seam at -0.5, saturation, 0 and a positive value; 1e-6 relative is a few f32 roundings
  const x = randomHost(rng, [129], 'f32', -1e-3, 0);
  x.data.set([-1e-7, -0.4999999, -0.5, -0.5000001, -100, -1e-30, 0, 2].map(Math.fround));
  const gx = e.upload(x.data, x.shape, 'f32');
  const out = elu(e, gx, 1.5);
  const got = await e.read(out);
  const want = unaryRef('elu', x, { alpha: 1.5 });
  for (let i = 0; i < x.data.length; i++) {
    const w = want.data[i]!;
    assert.ok(Math.abs(got[i]! - w) <= 1e-6 * Math.abs(w), `elu(${x.data[i]}) = ${got[i]}, want ${w}`);
  }
  gx.free();
  out.free();
}));

test('unary f32: sigmoid and tanh saturate without NaN for large arguments; log(0) is -inf', seeded(async (rng) => {
  const e = await testEngine();
  const x = randomHost(rng, [257], 'f32', -80, 80);
  x.data[0] = -80;
  x.data[1] = 80;
  const gx = e.upload(x.data, x.shape, 'f32');
  for (const op of ['sigmoid', 'tanh'] as UnaryOp[]) {
    const out = unary(e, op, gx);
    assertClose(await e.read(out), unaryRef(op, x), { atol: 1e-6, rtol: 1e-5 }, `${op} large arguments`);
    out.free();
  }
  gx.free();
  const z = e.upload([0, 1], [2], 'f32');
  const l = unary(e, 'log', z);
  assert.deepEqual(Array.from(await e.read(l)), [-Infinity, 0]);
  z.free();
  l.free();
}));

test('unary: input checks name the op and the tensor', async () => {
  const e = await testEngine();
  const x = e.empty([2, 3], 'f32');
  const wrong = e.empty([3, 2], 'f32');
  assert.throws(() => unary(e, 'log', x, { out: wrong }), /log: out f32\[3,2\] must be a contiguous f32\[2,3\]/);
  assert.throws(() => unary(e, 'sqrt', x, { min: 1, max: 0 }), /sqrt: min 1 > max 0/);
  assert.throws(() => unary(e, 'exp', x, { shift: NaN }), /exp: shift NaN must be a finite number/);
  assert.throws(() => unary(e, 'nope' as UnaryOp, x), /unknown op "nope"/);
  assert.throws(() => elu(e, x, Infinity), /elu: alpha Infinity must be a finite number/);
  assert.throws(() => unary(e, 'relu', x, { alpha: 2 }), /relu: alpha is an elu option/);
  x.free();
  wrong.free();
});
