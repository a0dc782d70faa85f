// Activations vs the float64 CPU reference. Tolerances: TOLERANCE defaults. f32: the shader's erf is within
// 2.4e-7 of the true erf and exp/sin are within a few ulp, so |err| << 1e-5 for |x| <= 6; f16: one output
// rounding plus input rounding carried through sin(alpha x) (alpha <= 2.7, |x| <= 3: < 1e-2).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { DType } from '../../src/engine/dtype';
import { activation, glu, snake, type Act } from '../../src/engine/ops/activation';
import { erfRef, gluRef, snakeRef, unaryRef } from './reference/activation';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type HostTensor, type Layout } from './helpers';

const ACTS: Act[] = ['gelu', 'gelu_tanh', 'silu'];
const LAYOUTS: Layout[] = ['contiguous', 'transposed', 'sliced'];

test('activation reference: erf matches known values', () => {
  const known: [number, number][] = [[0.5, 0.5204998778130465], [1, 0.8427007929497149], [2.5, 0.9995930479825550], [3.5, 0.9999992569016276], [-1.5, -0.9661051464753108]];
  for (const [x, v] of known) assert.ok(Math.abs(erfRef(x) - v) < 1e-14, `erf(${x}) = ${erfRef(x)}, want ${v}`);
});

for (const dtype of ['f32', 'f16'] as DType[]) {
  test(`activation ${dtype}: GELU (erf, tanh) and SiLU on odd sizes and views`, seeded(async (rng) => {
    const e = await testEngine();
    const shapes = [[257], [3, 33], [2, 7, 13]];
    for (const act of ACTS) {
      for (const [si, shape] of shapes.entries()) {
        const layout = LAYOUTS[(si + ACTS.indexOf(act)) % 3]!;
        const x = randomHost(rng, shape, dtype, -6, 6);
        const g = uploadAs(e, x, dtype, layout);
        const out = poisoned(e, shape, dtype);
        activation(e, act, g.view, out);
        assertClose(await e.read(out), unaryRef(act, x), dtype, `${act} ${dtype} [${shape}] ${layout}`);
        g.base.free();
        out.free();
      }
    }
  }));

  test(`activation ${dtype}: SwiGLU / GeGLU from two tensors and from halves of one`, seeded(async (rng) => {
    const e = await testEngine();
    for (const act of ACTS) {
      for (const shape of [[5, 31], [2, 3, 64]]) {
        const gate = randomHost(rng, shape, dtype, -4, 4);
        const up = randomHost(rng, shape, dtype, -2, 2);
        const want = gluRef(act, gate, up);
        // two tensors, as views
        const gg = uploadAs(e, gate, dtype, 'transposed');
        const gu = uploadAs(e, up, dtype, 'sliced');
        const out = poisoned(e, shape, dtype);
        glu(e, act, gg.view, gu.view, { out });
        assertClose(await e.read(out), want, dtype, `${act} glu two tensors ${dtype} [${shape}]`);
        // one [..., 2F] tensor: gate first, then up first
        for (const gateFirst of [true, false]) {
          const f = shape[shape.length - 1]!;
          const rows = gate.data.length / f;
          const both = new Float64Array(rows * 2 * f);
          for (let r = 0; r < rows; r++) {
            both.set(gate.data.subarray(r * f, (r + 1) * f), r * 2 * f + (gateFirst ? 0 : f));
            both.set(up.data.subarray(r * f, (r + 1) * f), r * 2 * f + (gateFirst ? f : 0));
          }
          const gb = e.upload(both, [...shape.slice(0, -1), 2 * f], dtype);
          const o2 = glu(e, act, gb, undefined, { gateFirst });
          assertClose(await e.read(o2), want, dtype, `${act} glu halves gateFirst=${gateFirst} ${dtype} [${shape}]`);
          gb.free();
          o2.free();
        }
        for (const t of [gg.base, gu.base, out]) t.free();
      }
    }
  }));

  test(`activation ${dtype}: snake and snake-beta, channels-last and channels-first, log scale`, seeded(async (rng) => {
    const e = await testEngine();
    const cases: [number[], number, boolean, boolean][] = [
      [[2, 37, 6], 2, false, false], // [B, T, C] channels-last
      [[2, 5, 33], 1, true, true], // [B, C, T] as BigVGAN stores it, snake-beta with log alpha/beta
      [[3, 13, 7], 2, true, false],
    ];
    for (const [shape, cdim, beta, logScale] of cases) {
      const c = shape[cdim]!;
      const x = randomHost(rng, shape, dtype, -3, 3);
      const a: HostTensor = logScale ? randomHost(rng, [c], dtype, -0.7, 1) : randomHost(rng, [c], dtype, 0.3, 2.7);
      const b: HostTensor | undefined = beta ? (logScale ? randomHost(rng, [c], dtype, -0.7, 1) : randomHost(rng, [c], dtype, 0.3, 2.7)) : undefined;
      const want = snakeRef(x, cdim, a, b, logScale);
      const gx = uploadAs(e, x, dtype, 'transposed');
      const ga = uploadAs(e, a, dtype, 'sliced');
      const gb = b && uploadAs(e, b, dtype, 'sliced');
      const out = poisoned(e, shape, dtype);
      snake(e, gx.view, ga.view, { beta: gb?.view, logScale, channelDim: cdim, out });
      assertClose(await e.read(out), want, dtype, `snake${beta ? '-beta' : ''} ${dtype} [${shape}] cdim ${cdim}${logScale ? ' log' : ''}`);
      for (const t of [gx.base, ga.base, gb?.base, out]) t?.free();
    }
  }));
}

test('activation: input checks name the op and the shapes', async () => {
  const e = await testEngine();
  const x = e.empty([4, 6]);
  const y = e.empty([4, 5]);
  const h = e.empty([4, 6], 'f16');
  const a = e.empty([5]);
  assert.throws(() => glu(e, 'silu', x, y), /swiglu: gate f32\[4,6\] vs up f32\[4,5\]: shapes differ/);
  assert.throws(() => glu(e, 'gelu', x, h), /geglu: gate f32\[4,6\] vs up f16\[4,6\]: dtypes differ/);
  assert.throws(() => glu(e, 'silu', y), /swiglu: x f32\[4,5\] must have an even last dim/);
  assert.throws(() => snake(e, x, a), /snake: alpha f32\[5\] must be \[6\] \(dim 1 of x f32\[4,6\]\)/);
  assert.throws(() => snake(e, x, a, { beta: a, channelDim: 0 }), /snakeBeta: alpha f32\[5\] must be \[4\]/);
  assert.throws(() => activation(e, 'gelu', x, y), /gelu: out f32\[4,5\] must be a contiguous f32\[4,6\]/);
  for (const t of [x, y, h, a]) t.free();
});
