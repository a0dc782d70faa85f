// convTranspose1d/2d/3d (the conv kernel's gather form) vs the float64 scatter-add CPU reference on fresh random
// inputs: stride, symmetric and explicit padding, output_padding, dilation, groups and depthwise, bias, PyTorch
// and prepared weights, a transposed [N, C, L] input view, poisoned outputs. BigVGAN/DAC-style upsampling layers
// (kernel 2*stride, padding stride/2) are among the 1D cases.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { DType } from '../../src/engine/dtype';
import { convTranspose1d, convTranspose2d, convTranspose3d, prepareConvWeight, type ConvTransposeOptions } from '../../src/engine/ops/conv';
import { convTransposeRef } from './reference/conv';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type HostTensor, type Tolerance } from './helpers';

const TOL: Record<'f32' | 'f16', Tolerance> = { f32: { atol: 1e-4, rtol: 1e-4 }, f16: { atol: 1e-2, rtol: 1e-2 } };
const SMALL_TILE = { wgx: 2, wgy: 2, bk: 4 };

interface Case {
  N: number; sp: number[]; cin: number; cout: number; k: number[];
  stride?: number[]; pad?: [number, number][]; opad?: number[]; dil?: number[]; groups?: number; bias?: boolean;
}

const CASES: Case[] = [
  { N: 1, sp: [1], cin: 1, cout: 1, k: [1] },
  { N: 1, sp: [7], cin: 3, cout: 5, k: [4], stride: [2], pad: [[1, 1]] },
  { N: 2, sp: [13], cin: 8, cout: 6, k: [16], stride: [8], pad: [[4, 4]], bias: true },       // BigVGAN x8 upsample
  { N: 1, sp: [9], cin: 6, cout: 9, k: [5], stride: [3], pad: [[2, 2]], opad: [2], groups: 3 },
  { N: 1, sp: [10], cin: 4, cout: 7, k: [3], stride: [2], dil: [2], opad: [1], bias: true },
  { N: 2, sp: [11], cin: 5, cout: 5, k: [4], stride: [2], pad: [[1, 1]], groups: 5 },          // depthwise
  { N: 1, sp: [8], cin: 4, cout: 3, k: [7], stride: [3], pad: [[3, 1]] },                      // explicit per side
  { N: 1, sp: [33], cin: 20, cout: 66, k: [2], stride: [2] },
  { N: 1, sp: [5, 6], cin: 4, cout: 3, k: [3, 4], stride: [2, 3], pad: [[1, 1], [1, 1]], opad: [1, 2], bias: true },
  { N: 2, sp: [4, 3], cin: 4, cout: 6, k: [2, 2], stride: [2, 2], groups: 2 },
  { N: 1, sp: [3, 4, 5], cin: 2, cout: 3, k: [3, 3, 3], stride: [1, 2, 2], pad: [[1, 1], [1, 1], [1, 1]], opad: [0, 1, 1] },
];

const fn = [convTranspose1d, convTranspose2d, convTranspose3d];

function refOpts(c: Case, bias?: HostTensor) {
  const d = c.sp.length;
  const ones = Array<number>(d).fill(1);
  return {
    stride: c.stride ?? ones, padding: c.pad ?? Array.from({ length: d }, () => [0, 0] as [number, number]),
    outputPadding: c.opad ?? Array<number>(d).fill(0), dilation: c.dil ?? ones, groups: c.groups ?? 1, bias,
  };
}

function engineOpts(c: Case): ConvTransposeOptions {
  return { stride: c.stride, padding: c.pad, outputPadding: c.opad, dilation: c.dil, groups: c.groups };
}

const name = (c: Case) => JSON.stringify(c).replace(/"/g, '');

for (const dtype of ['f32', 'f16'] as DType[]) {
  test(`convTranspose ${dtype}: stride, padding, output_padding, dilation, groups; PyTorch and prepared weights`, seeded(async (rng) => {
    const e = await testEngine();
    for (const c of CASES) {
      const d = c.sp.length;
      const x = randomHost(rng, [c.N, ...c.sp, c.cin], dtype);
      const w = randomHost(rng, [c.cin, c.cout / (c.groups ?? 1), ...c.k], dtype);
      const b = c.bias ? randomHost(rng, [c.cout], dtype) : undefined;
      const want = convTransposeRef(x, w, refOpts(c, b));
      const gx = e.upload(x.data, x.shape, dtype);
      const gw = e.upload(w.data, w.shape, dtype);
      const gb = b && e.upload(b.data, b.shape, dtype);
      const pw = prepareConvWeight(e, gw, { groups: c.groups, transposed: true });
      for (const [weight, tile] of [[gw, undefined], [pw, undefined], [gw, SMALL_TILE]] as const) {
        const out = poisoned(e, want.shape, dtype);
        fn[d - 1]!(e, gx, weight, { ...engineOpts(c), bias: gb, out, tile });
        const wl = 'prepared' in weight ? 'prepared' : 'torch';
        assertClose(await e.read(out), want, TOL[dtype as 'f32'], `convTranspose${d}d ${dtype} ${name(c)} w ${wl} tile ${JSON.stringify(tile)}`);
        out.free();
      }
      for (const t of [gx, gw, gb, pw]) t?.free();
    }
  }));

  test(`convTranspose1d ${dtype}: x as a transposed [N, C, L] view`, seeded(async (rng) => {
    const e = await testEngine();
    const c: Case = { N: 2, sp: [rng.int(3, 30)], cin: rng.int(1, 10), cout: rng.int(1, 10), k: [4], stride: [2], pad: [[1, 1]], bias: true };
    const x = randomHost(rng, [c.N, ...c.sp, c.cin], dtype);
    const w = randomHost(rng, [c.cin, c.cout, ...c.k], dtype);
    const b = randomHost(rng, [c.cout], dtype);
    const gx = uploadAs(e, x, dtype, 'transposed');
    const gw = e.upload(w.data, w.shape, dtype);
    const gb = e.upload(b.data, b.shape, dtype);
    const out = convTranspose1d(e, gx.view, gw, { ...engineOpts(c), bias: gb });
    assertClose(await e.read(out), convTransposeRef(x, w, refOpts(c, b)), TOL[dtype as 'f32'], `convTranspose1d ${dtype} transposed x ${name(c)}`);
    for (const t of [gx.base, gw, gb, out]) t.free();
  }));
}

test('convTranspose: input checks name the op, the tensors and the shapes', async () => {
  const e = await testEngine();
  const x = e.empty([1, 8, 4]);
  assert.throws(() => convTranspose1d(e, x, e.empty([6, 3, 4])), /convTranspose1d: x f32\[1,8,4\] has 4 channels but w f32\[6,3,4\] \(\[Cin, Cout\/groups, k...\]\) expects 6/);
  assert.throws(() => convTranspose1d(e, x, e.empty([4, 3, 4]), { stride: 2, outputPadding: 2 }), /convTranspose1d: outputPadding 2 must be < max\(stride 2, dilation 1\) \(axis 0\)/);
  assert.throws(() => convTranspose1d(e, x, e.empty([4, 3, 2]), { padding: 5 }), /convTranspose1d: x f32\[1,8,4\] with kernel \[2\].*empty output \[-1\]/);
  assert.throws(() => convTranspose2d(e, e.empty([1, 3, 3, 4]), e.empty([4, 3, 2, 2]), { groups: 3 }), /convTranspose2d: x f32\[1,3,3,4\]: 4 input channels not divisible by groups 3/);
  const pw = prepareConvWeight(e, e.empty([4, 3, 4]));
  assert.throws(() => convTranspose1d(e, x, pw), /convTranspose1d: w f32\[4,3,4\] was prepared for groups 1; this call has groups 1, transposed/);
  pw.free();
});
