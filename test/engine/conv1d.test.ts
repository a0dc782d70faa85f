// conv1d (implicit GEMM, channels-last [N, L, C]) vs the float64 CPU reference on fresh random inputs: odd sizes,
// stride, explicit/'same'/causal padding, replicate padding, dilation, groups and depthwise, bias, PyTorch and
// prepared weights, x as a transposed view of a PyTorch [N, C, L] tensor and as a slice, poisoned outputs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { DType } from '../../src/engine/dtype';
import { conv1d, prepareConvWeight, type ConvOptions } from '../../src/engine/ops/conv';
import { convRef, type ConvRefOptions } from './reference/conv';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type Layout, type Tolerance } from './helpers';

// Sums over K = Cin/groups * k <= ~200 terms in f32: rounding grows like sqrt(K) ulps, so f32 states 1e-4 (as the
// GEMM tests). f16 output is rounded once from an f32 sum: within the f16 default.
const TOL: Record<'f32' | 'f16', Tolerance> = { f32: { atol: 1e-4, rtol: 1e-4 }, f16: { atol: 1e-2, rtol: 1e-2 } };
const SMALL_TILE = { wgx: 2, wgy: 2, bk: 4 };

interface Case {
  N: number; L: number; cin: number; cout: number; k: number;
  stride?: number; pad?: number | [number, number] | 'same'; dil?: number; groups?: number; bias?: boolean;
  causal?: boolean; replicate?: boolean;
}

const CASES: Case[] = [
  { N: 1, L: 1, cin: 1, cout: 1, k: 1 },
  { N: 2, L: 13, cin: 3, cout: 7, k: 3, pad: 1, bias: true },
  { N: 1, L: 33, cin: 17, cout: 33, k: 7, stride: 2, pad: 3, bias: true },
  { N: 3, L: 31, cin: 6, cout: 9, k: 5, dil: 3, pad: [5, 2], groups: 3 },
  { N: 1, L: 65, cin: 13, cout: 13, k: 7, pad: 'same', groups: 13, bias: true },   // depthwise
  { N: 2, L: 20, cin: 5, cout: 10, k: 4, stride: 3, groups: 5 },                     // depthwise, multiplier 2
  { N: 2, L: 29, cin: 8, cout: 12, k: 7, dil: 2, causal: true, bias: true },          // causal (codec convs)
  { N: 1, L: 11, cin: 4, cout: 5, k: 3, causal: true, replicate: true },
  { N: 1, L: 9, cin: 4, cout: 66, k: 5, pad: 4, stride: 4, replicate: true },
  { N: 1, L: 64, cin: 64, cout: 64, k: 3, pad: 1 },                                  // tile multiples
];

function label(c: Case): string {
  return JSON.stringify(c).replace(/"/g, '');
}

function refOptions(c: Case, biasH?: { data: Float64Array; shape: number[] }): ConvRefOptions {
  const dil = c.dil ?? 1;
  let padding: [number, number];
  if (c.pad === 'same') {
    const t = dil * (c.k - 1);
    padding = [Math.floor(t / 2), t - Math.floor(t / 2)];
  } else if (Array.isArray(c.pad)) padding = c.pad;
  else padding = [c.pad ?? 0, c.pad ?? 0];
  return {
    stride: [c.stride ?? 1], padding: [padding], dilation: [dil], groups: c.groups ?? 1, bias: biasH,
    causal: c.causal, padMode: [c.replicate ? 'replicate' : 'zeros'],
  };
}

function engineOptions(c: Case): ConvOptions {
  return {
    stride: c.stride, dilation: c.dil, groups: c.groups, causal: c.causal, padMode: c.replicate ? 'replicate' : undefined,
    padding: Array.isArray(c.pad) ? [c.pad] : c.pad,
  };
}

for (const dtype of ['f32', 'f16'] as DType[]) {
  test(`conv1d ${dtype}: odd sizes, stride/padding/dilation/groups/causal, PyTorch and prepared weights`, seeded(async (rng) => {
    const e = await testEngine();
    for (const c of CASES) {
      const x = randomHost(rng, [c.N, c.L, c.cin], dtype);
      const w = randomHost(rng, [c.cout, c.cin / (c.groups ?? 1), c.k], dtype);
      const b = c.bias ? randomHost(rng, [c.cout], dtype) : undefined;
      const want = convRef(x, w, refOptions(c, b));
      const gx = e.upload(x.data, x.shape, dtype);
      const gw = e.upload(w.data, w.shape, dtype);
      const gb = b && e.upload(b.data, b.shape, dtype);
      const pw = prepareConvWeight(e, gw, { groups: c.groups });
      for (const [weight, tile] of [[gw, undefined], [pw, undefined], [gw, SMALL_TILE]] as const) {
        const out = poisoned(e, want.shape, dtype);
        const got = conv1d(e, gx, weight, { ...engineOptions(c), bias: gb, out, tile });
        assert.equal(got, out);
        const wl = 'prepared' in weight ? 'prepared' : 'torch';
        assertClose(await e.read(out), want, TOL[dtype as 'f32'], `conv1d ${dtype} ${label(c)} w ${wl} tile ${JSON.stringify(tile)}`);
        out.free();
      }
      for (const t of [gx, gw, gb, pw]) t?.free();
    }
  }));

  test(`conv1d ${dtype}: x as a transposed [N, C, L] view or a slice; strided weight; dense and depthwise`, seeded(async (rng) => {
    const e = await testEngine();
    for (const [layout, depthwise] of [['transposed', false], ['sliced', false], ['transposed', true], ['sliced', true]] as [Layout, boolean][]) {
      const cin = rng.int(1, 12);
      const c: Case = {
        N: 2, L: rng.int(5, 40), cin, cout: depthwise ? cin : rng.int(1, 20), k: 3, pad: 1, bias: true, stride: rng.int(1, 2),
        groups: depthwise ? cin : 1,
      };
      const x = randomHost(rng, [c.N, c.L, c.cin], dtype);
      const w = randomHost(rng, [c.cout, depthwise ? 1 : c.cin, c.k], dtype);
      const b = randomHost(rng, [c.cout], dtype);
      const gx = uploadAs(e, x, dtype, layout);
      const gw = uploadAs(e, w, dtype, 'sliced'); // every dim strided inside a bigger tensor
      const gb = uploadAs(e, b, dtype, 'sliced');
      const out = conv1d(e, gx.view, gw.view, { ...engineOptions(c), bias: gb.view });
      assertClose(await e.read(out), convRef(x, w, refOptions(c, b)), TOL[dtype as 'f32'], `conv1d ${dtype} x ${layout} ${label(c)}`);
      for (const t of [gx.base, gw.base, gb.base, out]) t.free();
    }
  }));
}

test('conv1d: more row tiles than one grid dimension holds (folded into z)', seeded(async (rng) => {
  // 1x1 tiles of 4 output rows: 270 001 rows are 67 501 row tiles > 65535, so the grid folds into z.
  const e = await testEngine();
  const c: Case = { N: 1, L: 270001, cin: 1, cout: 1, k: 3, pad: 1 };
  const x = randomHost(rng, [1, c.L, 1], 'f32');
  const w = randomHost(rng, [1, 1, 3], 'f32');
  const gx = e.upload(x.data, x.shape, 'f32');
  const gw = e.upload(w.data, w.shape, 'f32');
  const out = poisoned(e, [1, c.L, 1], 'f32');
  conv1d(e, gx, gw, { padding: 1, out, tile: { wgx: 1, wgy: 1, bk: 4 } });
  assertClose(await e.read(out), convRef(x, w, refOptions(c)), TOL.f32, 'conv1d folded grid');
  for (const t of [gx, gw, out]) t.free();
}));

test('conv1d: input checks name the op, the tensors and the shapes', async () => {
  const e = await testEngine();
  const x = e.empty([2, 10, 6]);
  const w = e.empty([4, 6, 3]);
  assert.throws(() => conv1d(e, e.empty([10, 6]), w), /conv1d: x f32\[10,6\] must be channels-last \[N, L, C\]/);
  assert.throws(() => conv1d(e, x, e.empty([4, 5, 3])), /conv1d: x f32\[2,10,6\] with groups 1 has 6 channels per group but w f32\[4,5,3\] \(\[Cout, Cin\/groups, k...\]\) expects 5/);
  assert.throws(() => conv1d(e, x, e.empty([4, 6, 3], 'f16')), /conv1d: x f32\[2,10,6\] vs w f16\[4,6,3\]: dtypes differ/);
  assert.throws(() => conv1d(e, x, e.empty([4, 2, 3]), { groups: 4 }), /conv1d: x f32\[2,10,6\]: 6 input channels not divisible by groups 4/);
  assert.throws(() => conv1d(e, x, e.empty([5, 2, 3]), { groups: 3 }), /conv1d: w f32\[5,2,3\]: 5 output channels not divisible by groups 3/);
  assert.throws(() => conv1d(e, x, w, { bias: e.empty([5]) }), /conv1d: bias f32\[5\] must be f32\[4\]/);
  assert.throws(() => conv1d(e, x, e.empty([4, 6, 11])), /conv1d: x f32\[2,10,6\] with kernel \[11\].*empty output \[0\]/);
  assert.throws(() => conv1d(e, x, w, { stride: 0 }), /conv1d: stride 0 must be an integer >= 1/);
  assert.throws(() => conv1d(e, x, w, { padding: [1, 2] }), /conv1d: padding \[1,2\] must be a number, 1 numbers or 1 \[front, back\] pairs/);
  assert.throws(() => conv1d(e, x, w, { padding: 'same', stride: 2 }), /conv1d: padding 'same' needs stride 1/);
  assert.throws(() => conv1d(e, x, w, { padding: 1, out: e.empty([2, 8, 4]) }), /conv1d: out f32\[2,8,4\] must be a contiguous f32\[2,10,4\]/);
  const pw = prepareConvWeight(e, w);
  assert.throws(() => conv1d(e, x, pw, { groups: 2 }), /conv1d: w f32\[4,6,3\] was prepared for groups 1; this call has groups 2/);
  pw.free();
});
