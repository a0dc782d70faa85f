// conv2d ([N, H, W, C]) and conv3d ([N, T, H, W, C]) vs the float64 CPU reference on fresh random inputs: odd
// sizes, per-axis stride/padding/dilation, groups and depthwise, bias, causal time padding with zero or replicated
// first frames (video VAEs), PyTorch and prepared weights, x as a permuted NCHW/NCTHW tensor or a slice.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { DType } from '../../src/engine/dtype';
import type { Engine } from '../../src/engine/engine';
import type { Tensor } from '../../src/engine/tensor';
import { conv2d, conv3d, prepareConvWeight, type ConvOptions, type PadMode } from '../../src/engine/ops/conv';
import { convRef } from './reference/conv';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type HostTensor, type Tolerance } from './helpers';

// K = Cin/groups * kernel volume <= ~220 terms summed in f32: 1e-4 as the GEMM tests; f16 rounded once.
const TOL: Record<'f32' | 'f16', Tolerance> = { f32: { atol: 1e-4, rtol: 1e-4 }, f16: { atol: 1e-2, rtol: 1e-2 } };
const SMALL_TILE = { wgx: 2, wgy: 2, bk: 4 };

interface Case {
  N: number; sp: number[]; cin: number; cout: number; k: number[];
  stride?: number[]; pad?: [number, number][]; dil?: number[]; groups?: number; bias?: boolean;
  causal?: boolean; padMode?: PadMode[];
}

const CASES_2D: Case[] = [
  { N: 1, sp: [1, 1], cin: 1, cout: 1, k: [1, 1] },
  { N: 1, sp: [7, 5], cin: 3, cout: 5, k: [3, 3], pad: [[1, 1], [1, 1]], bias: true },
  { N: 2, sp: [9, 13], cin: 8, cout: 17, k: [3, 5], stride: [2, 1], pad: [[1, 1], [2, 2]], dil: [1, 2] },
  { N: 1, sp: [11, 10], cin: 6, cout: 6, k: [3, 3], pad: [[1, 1], [1, 1]], groups: 6, bias: true },  // depthwise
  { N: 1, sp: [8, 9], cin: 4, cout: 6, k: [1, 1], groups: 2 },
  { N: 1, sp: [6, 7], cin: 5, cout: 3, k: [4, 3], stride: [2, 2], pad: [[2, 1], [0, 2]], padMode: ['replicate', 'replicate'] },
  { N: 1, sp: [16, 16], cin: 16, cout: 64, k: [3, 3], pad: [[1, 1], [1, 1]] },                          // tile multiples
];

const CASES_3D: Case[] = [
  { N: 1, sp: [5, 6, 7], cin: 4, cout: 6, k: [3, 3, 3], pad: [[1, 1], [1, 1], [1, 1]], bias: true },
  // causal time, zeros (e.g. Wan's CausalConv3d)
  { N: 1, sp: [5, 6, 5], cin: 3, cout: 5, k: [3, 3, 3], causal: true, pad: [[0, 0], [1, 1], [1, 1]], stride: [1, 2, 2] },
  // causal time with the first frame replicated, zero spatial padding (LTX-style)
  { N: 2, sp: [4, 5, 3], cin: 3, cout: 4, k: [3, 3, 3], causal: true, pad: [[0, 0], [1, 1], [1, 1]], padMode: ['replicate', 'zeros', 'zeros'], bias: true },
  // causal time, replicate on every axis (Hunyuan-style)
  { N: 1, sp: [3, 4, 4], cin: 2, cout: 3, k: [3, 3, 3], causal: true, pad: [[0, 0], [1, 1], [1, 1]], padMode: ['replicate', 'replicate', 'replicate'] },
  { N: 1, sp: [7, 4, 5], cin: 6, cout: 4, k: [2, 3, 1], dil: [2, 1, 1], groups: 2, stride: [2, 1, 1], causal: true },
  { N: 1, sp: [3, 5, 5], cin: 4, cout: 4, k: [3, 3, 3], groups: 4, pad: [[1, 1], [1, 1], [1, 1]] },  // depthwise
];

function refOpts(c: Case, bias?: HostTensor) {
  const d = c.sp.length;
  return {
    stride: c.stride ?? Array(d).fill(1), padding: c.pad ?? Array.from({ length: d }, () => [0, 0] as [number, number]),
    dilation: c.dil ?? Array(d).fill(1), groups: c.groups ?? 1, bias, causal: c.causal, padMode: c.padMode,
  };
}

function engineOpts(c: Case): ConvOptions {
  return { stride: c.stride, padding: c.pad, dilation: c.dil, groups: c.groups, causal: c.causal, padMode: c.padMode };
}

const run = (e: Engine, d: number, x: Tensor, w: Parameters<typeof conv2d>[2], o: ConvOptions) => (d === 2 ? conv2d(e, x, w, o) : conv3d(e, x, w, o));

/** Host data of x stored channels-first ([N, C, ...spatial], PyTorch's layout), and the permutation that views it
 * as channels-last. */
function channelsFirst(x: HostTensor): { data: Float64Array; shape: number[]; perm: number[] } {
  const d = x.shape.length - 2;
  const [N, C] = [x.shape[0]!, x.shape[d + 1]!];
  const S = x.shape.slice(1, 1 + d).reduce((a, b) => a * b, 1);
  const data = new Float64Array(x.data.length);
  for (let n = 0; n < N; n++) for (let s = 0; s < S; s++) for (let c = 0; c < C; c++) data[(n * C + c) * S + s] = x.data[(n * S + s) * C + c]!;
  return { data, shape: [N, C, ...x.shape.slice(1, 1 + d)], perm: [0, ...Array.from({ length: d }, (_, i) => i + 2), 1] };
}

for (const dtype of ['f32', 'f16'] as DType[]) {
  for (const [d, cases] of [[2, CASES_2D], [3, CASES_3D]] as const) {
    test(`conv${d}d ${dtype}: odd sizes, stride/padding/dilation/groups/causal/replicate, PyTorch and prepared weights`, seeded(async (rng) => {
      const e = await testEngine();
      for (const c of cases) {
        const x = randomHost(rng, [c.N, ...c.sp, c.cin], dtype);
        const w = randomHost(rng, [c.cout, c.cin / (c.groups ?? 1), ...c.k], dtype);
        const b = c.bias ? randomHost(rng, [c.cout], dtype) : undefined;
        const want = convRef(x, w, refOpts(c, b));
        const gx = e.upload(x.data, x.shape, dtype);
        const gw = e.upload(w.data, w.shape, dtype);
        const gb = b && e.upload(b.data, b.shape, dtype);
        const pw = prepareConvWeight(e, gw, { groups: c.groups });
        for (const [weight, tile] of [[gw, undefined], [pw, undefined], [pw, SMALL_TILE]] as const) {
          const out = poisoned(e, want.shape, dtype);
          run(e, d, gx, weight, { ...engineOpts(c), bias: gb, out, tile });
          const wl = 'prepared' in weight ? 'prepared' : 'torch';
          assertClose(await e.read(out), want, TOL[dtype as 'f32'], `conv${d}d ${dtype} ${JSON.stringify(c).replace(/"/g, '')} w ${wl} tile ${JSON.stringify(tile)}`);
          out.free();
        }
        for (const t of [gx, gw, gb, pw]) t?.free();
      }
    }));

    test(`conv${d}d ${dtype}: x as a permuted channels-first tensor and as a slice`, seeded(async (rng) => {
      const e = await testEngine();
      const sp = d === 2 ? [rng.int(3, 12), rng.int(3, 12)] : [rng.int(2, 5), rng.int(3, 7), rng.int(3, 7)];
      const c: Case = { N: 2, sp, cin: rng.int(1, 9), cout: rng.int(1, 9), k: Array(d).fill(3), pad: Array.from({ length: d }, () => [1, 1]), bias: true };
      const x = randomHost(rng, [c.N, ...c.sp, c.cin], dtype);
      const w = randomHost(rng, [c.cout, c.cin, ...c.k], dtype);
      const b = randomHost(rng, [c.cout], dtype);
      const want = convRef(x, w, refOpts(c, b));
      const gw = e.upload(w.data, w.shape, dtype);
      const gb = e.upload(b.data, b.shape, dtype);
      const cf = channelsFirst(x);
      const nc = e.upload(cf.data, cf.shape, dtype);
      let out = run(e, d, nc.permute(cf.perm), gw, { ...engineOpts(c), bias: gb });
      assertClose(await e.read(out), want, TOL[dtype as 'f32'], `conv${d}d ${dtype} x channels-first view ${JSON.stringify(c)}`);
      out.free();
      const sl = uploadAs(e, x, dtype, 'sliced');
      out = run(e, d, sl.view, gw, { ...engineOpts(c), bias: gb });
      assertClose(await e.read(out), want, TOL[dtype as 'f32'], `conv${d}d ${dtype} x sliced ${JSON.stringify(c)}`);
      for (const t of [out, sl.base, nc, gw, gb]) t.free();
    }));
  }
}

test('conv2d/conv3d: input checks name the op, the tensors and the shapes', async () => {
  const e = await testEngine();
  const x = e.empty([1, 6, 6, 4]);
  assert.throws(() => conv2d(e, e.empty([1, 6, 6, 4, 1]), e.empty([2, 4, 3, 3])), /conv2d: x f32\[1,6,6,4,1\] must be channels-last \[N, H, W, C\]/);
  assert.throws(() => conv2d(e, x, e.empty([2, 4, 3])), /conv2d: w f32\[2,4,3\] must be \[Cout, Cin\/groups, k...\] with 2 kernel dims/);
  assert.throws(() => conv3d(e, e.empty([1, 2, 6, 6, 4]), e.empty([2, 4, 3, 3, 3]), { padding: [1, 1] }), /conv3d: padding \[1,1\] must be a number, 3 numbers or 3 \[front, back\] pairs/);
  assert.throws(() => conv3d(e, e.empty([1, 2, 6, 6, 4]), e.empty([2, 4, 3, 3, 3]), { padMode: ['replicate'] }), /conv3d: padMode \["replicate"\] must be 'zeros' \| 'replicate' or one per axis \(3\)/);
  assert.throws(() => conv3d(e, e.empty([1, 2, 6, 6, 4]), e.empty([2, 4, 3, 3, 3])), /conv3d: x f32\[1,2,6,6,4\] with kernel \[3,3,3\].*empty output \[0,4,4\]/);
  // kernel dims stored column-major (a transposed view of the last two dims): refused with the fix named
  const wt = e.empty([2, 4, 3, 5]).transpose(-1, -2);
  assert.throws(() => conv2d(e, x, wt), /conv2d: w f32\[2,4,5,3\]: kernel dims must be row-major among themselves \(strides \[60,15,1,5\]\); copy\(\) it/);
  assert.throws(() => conv2d(e, x, e.empty([2, 4, 3, 3]), { dilation: [1, 0] }), /conv2d: dilation \[1,0\] must be an integer >= 1 or 2 of them/);
});
