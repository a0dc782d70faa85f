// Every op that takes an `out` tensor, given an out view at a nonzero element offset inside a bigger NaN-poisoned
// buffer (e.g. rows of a preallocated tensor): the op either writes exactly its own result at that offset and leaves
// every other element of the buffer untouched, or refuses with a RangeError naming the op and the offset (and
// writes nothing). Regression: matmul, attention, softmax, the reductions and sample checked only contiguity and
// wrote from element 0 of the storage, silently corrupting whatever lived there.
// "Its own result" is the same op into a fresh tensor (same kernel, so bit-equal); each op's own test checks that
// result against the float64 CPU reference.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DType } from '../../src/engine/dtype';
import type { Engine } from '../../src/engine/engine';
import type { Tensor } from '../../src/engine/tensor';
import { projectRoot } from '../../src/paths';
import { matmul } from '../../src/engine/ops/matmul';
import { linear } from '../../src/engine/ops/linear';
import { subgroupMatrixUsable } from '../../src/engine/ops/matmul_subgroup';
import { quantizeInt8PerChannel, uploadInt8 } from '../../src/engine/quantize';
import { add, arith, contiguous, scalarOp } from '../../src/engine/ops/elementwise';
import { clamp, unary } from '../../src/engine/ops/unary';
import { activation, glu, snake } from '../../src/engine/ops/activation';
import { softmax } from '../../src/engine/ops/softmax';
import { argmax, reduce } from '../../src/engine/ops/reduce';
import { groupNorm, headRmsNorm, layerNorm, rmsNorm } from '../../src/engine/ops/norm';
import { rope } from '../../src/engine/ops/rope';
import { cast, concat, copy, gather, pad } from '../../src/engine/ops/layout';
import { conv1d, conv2d, convTranspose1d, prepareConvWeight } from '../../src/engine/ops/conv';
import { interpolate, upsampleLinear, upsampleNearest } from '../../src/engine/ops/resample';
import { Activation1d, createDownSample1d, createUpSample1d, downSample1d, upSample1d } from '../../src/engine/ops/resample_alias_free';
import { attention } from '../../src/engine/ops/attention';
import { sample } from '../../src/engine/ops/sampling';
import { randomHost, seeded, testEngine, type Rng } from './helpers';

const OFF = 5; // odd, so an f16 view does not start on a 4-byte word either
const TAIL = 7;

interface Case {
  /** The op name its errors start with. */
  op: string;
  /** true: the op writes at out.offset; false: it refuses an offset out. */
  honours: boolean;
  /** The output's shape and dtype. */
  shape: number[];
  dtype: DType;
  /** Runs the op (into `out` when given) and returns its result. */
  run(out?: Tensor): Tensor;
}

/** Every op family with an `out` option, on small odd shapes (the engine is destroyed after the file). All honour an offset
 * out now except cast f32 -> f16 (it writes whole u32 words of two halves); the refusal path stays tested there. */
function cases(e: Engine, rng: Rng, dt: 'f32' | 'f16'): Case[] {
  const up = (shape: number[], lo = -1, hi = 1) => e.upload(randomHost(rng, shape, dt, lo, hi).data, shape, dt);
  const f32 = (shape: number[], lo = -1, hi = 1) => e.upload(randomHost(rng, shape, 'f32', lo, hi).data, shape, 'f32');
  const a = up([3, 5, 7]);
  const b = up([7, 9]);
  const w = up([9, 7]);
  const bias = up([9]);
  const q8 = uploadInt8(e, quantizeInt8PerChannel(randomHost(rng, [9, 7], 'f32').data, 9, 7));
  const x = up([2, 3, 8]);
  const y = up([2, 3, 8]);
  const pos = up([2, 3, 8], 0.5, 2);
  const ch = up([8], 0.2, 1);
  const qh = up([1, 3, 5, 8]);
  const kh = up([1, 3, 6, 8]);
  const vh = up([1, 3, 6, 8]);
  const rx = up([1, 5, 3, 8]); // [B, L, H, D]
  const cos = f32([5, 3]);
  const sin = f32([5, 3]);
  const table = up([11, 6]);
  const cx = up([2, 9, 4]); // conv1d [N, L, C]
  const cw = up([5, 4, 3]); // [Cout, Cin, k]
  const ctw = up([4, 5, 3]); // transposed: [Cin, Cout, k]
  const dw = up([4, 1, 3]); // depthwise (its own direct kernel)
  const cwPrepared = prepareConvWeight(e, cw);
  const cb = up([5]);
  const x2 = up([1, 4, 5, 3]); // [N, H, W, C]
  const w2 = up([2, 3, 3, 3]);
  const logits = up([3, 17]);
  const gen = f32([3, 17]);
  const upR = createUpSample1d(e, 2, 12);
  const downR = createDownSample1d(e, 2, 12);
  const act1d = Activation1d.create(e);
  const ax = up([1, 10, 4]);
  return [
    { op: 'matmul', honours: true, shape: [3, 5, 9], dtype: dt, run: (out) => matmul(e, a, b, { out }) },
    { op: 'matmul', honours: true, shape: [3, 5, 9], dtype: dt, run: (out) => matmul(e, a, b, { out, tile: { wgx: 2, wgy: 2, bk: 4 }, bias, act: 'silu' }) },
    { op: 'matmul', honours: true, shape: [1, 9], dtype: dt, run: (out) => matmul(e, a.slice(0, 0, 1).slice(1, 0, 1).reshape([1, 7]), w.transpose(), { out, path: 'gemv', bias }) },
    ...(dt === 'f16' && subgroupMatrixUsable(e)
      ? [{ op: 'matmul', honours: true, shape: [3, 5, 9], dtype: dt, run: (out?: Tensor) => matmul(e, a, b, { out, path: 'subgroup' }) }]
      : []),
    { op: 'linear', honours: true, shape: [9], dtype: dt, run: (out) => linear(e, a.slice(0, 0, 1).slice(1, 0, 1).reshape([7]), w, bias, { out }) },
    { op: 'linear', honours: true, shape: [3, 5, 9], dtype: dt, run: (out) => linear(e, a, q8, null, { out }) },
    { op: 'linear', honours: true, shape: [1, 2, 9], dtype: dt, run: (out) => linear(e, a.slice(0, 0, 1).slice(1, 0, 2), q8, null, { out, path: 'gemv' }) },
    { op: 'add', honours: true, shape: [2, 3, 8], dtype: dt, run: (out) => add(e, x, y, out) },
    { op: 'mul', honours: true, shape: [3, 2, 8], dtype: dt, run: (out) => arith(e, 'mul', x.transpose(0, 1), ch, out) },
    { op: 'rsub', honours: true, shape: [2, 3, 8], dtype: dt, run: (out) => scalarOp(e, 'rsub', x, 0.25, out) },
    { op: 'contiguous', honours: true, shape: [8, 3, 2], dtype: dt, run: (out) => contiguous(e, x.permute([2, 1, 0]), out) },
    { op: 'tanh', honours: true, shape: [2, 3, 8], dtype: dt, run: (out) => unary(e, 'tanh', x.transpose(1, 2).transpose(1, 2), { out }) },
    { op: 'identity', honours: true, shape: [2, 3, 8], dtype: dt, run: (out) => clamp(e, x, -0.5, 0.5, out) },
    { op: 'gelu', honours: true, shape: [2, 3, 8], dtype: dt, run: (out) => activation(e, 'gelu', x, out) },
    { op: 'swiglu', honours: true, shape: [2, 3, 8], dtype: dt, run: (out) => glu(e, 'silu', x, y, { out }) },
    { op: 'snake', honours: true, shape: [2, 3, 8], dtype: dt, run: (out) => snake(e, x, ch, { out }) },
    { op: 'softmax', honours: true, shape: [2, 3, 8], dtype: dt, run: (out) => softmax(e, x, out) },
    { op: 'sum', honours: true, shape: [2, 3], dtype: dt, run: (out) => reduce(e, 'sum', x, out) },
    { op: 'max', honours: true, shape: [2, 8], dtype: dt, run: (out) => reduce(e, 'max', x.transpose(1, 2), out) },
    { op: 'argmax', honours: true, shape: [2, 3], dtype: 'f32', run: (out) => argmax(e, x, out) },
    { op: 'layerNorm', honours: true, shape: [2, 3, 8], dtype: dt, run: (out) => layerNorm(e, x, { weight: ch, bias: ch, residual: y, out }) },
    { op: 'rmsNorm', honours: true, shape: [2, 3, 8], dtype: dt, run: (out) => rmsNorm(e, x, { weight: ch, out }) },
    { op: 'headRmsNorm', honours: true, shape: [2, 3, 8], dtype: dt, run: (out) => headRmsNorm(e, x, ch, 1e-6, out) },
    { op: 'groupNorm', honours: true, shape: [2, 3, 8], dtype: dt, run: (out) => groupNorm(e, x, 2, { weight: ch, out }) },
    { op: 'rope', honours: true, shape: [1, 5, 3, 8], dtype: dt, run: (out) => rope(e, rx, cos, sin, { out }) },
    { op: 'copy', honours: true, shape: [8, 3, 2], dtype: dt, run: (out) => copy(e, x.permute([2, 1, 0]), out) },
    { op: 'concat', honours: true, shape: [2, 6, 8], dtype: dt, run: (out) => concat(e, [x, y], 1, out) },
    { op: 'pad', honours: true, shape: [2, 3, 11], dtype: dt, run: (out) => pad(e, x, [[1, 2]], 'reflect', 0, out) },
    { op: 'gather', honours: true, shape: [4, 6], dtype: dt, run: (out) => gather(e, table, [3, 0, 10, 3], out) },
    { op: 'cast', honours: dt === 'f16', shape: [2, 3, 8], dtype: dt === 'f32' ? 'f16' : 'f32', run: (out) => cast(e, x, dt === 'f32' ? 'f16' : 'f32', out) },
    { op: 'conv1d', honours: true, shape: [2, 9, 5], dtype: dt, run: (out) => conv1d(e, cx, cw, { padding: 1, out }) },
    { op: 'conv1d', honours: true, shape: [2, 9, 5], dtype: dt, run: (out) => conv1d(e, cx, cwPrepared, { padding: 1, bias: cb, out }) },
    { op: 'conv1d', honours: true, shape: [2, 9, 4], dtype: dt, run: (out) => conv1d(e, cx, dw, { padding: 1, groups: 4, out }) },
    { op: 'conv2d', honours: true, shape: [1, 4, 5, 2], dtype: dt, run: (out) => conv2d(e, x2, w2, { padding: 1, out }) },
    { op: 'convTranspose1d', honours: true, shape: [2, 19, 5], dtype: dt, run: (out) => convTranspose1d(e, cx, ctw, { stride: 2, out }) },
    { op: 'interpolate(nearest)', honours: true, shape: [1, 8, 10, 3], dtype: dt, run: (out) => interpolate(e, x2, { mode: 'nearest', scale: 2, out }) },
    { op: 'interpolate(nearest)', honours: true, shape: [1, 8, 10, 3], dtype: dt, run: (out) => upsampleNearest(e, x2, 2, out) },
    { op: 'interpolate(bilinear)', honours: true, shape: [1, 8, 10, 3], dtype: dt, run: (out) => upsampleLinear(e, x2, 2, false, out) },
    { op: 'upSample1d', honours: true, shape: [1, 20, 4], dtype: dt, run: (out) => upSample1d(e, ax, upR, out) },
    { op: 'downSample1d', honours: true, shape: [1, 5, 4], dtype: dt, run: (out) => downSample1d(e, ax, downR, out) },
    { op: 'downSample1d', honours: true, shape: [1, 10, 4], dtype: dt, run: (out) => act1d.forward(e, ax, ch.slice(0, 0, 4), { out }) },
    { op: 'attention', honours: true, shape: [1, 3, 5, 8], dtype: dt, run: (out) => attention(e, qh, kh, vh, { mask: 'causal', queryOffset: 1, out }) },
    { op: 'sample', honours: true, shape: [3], dtype: 'f32', run: (out) => sample(e, logits, { topK: 4, temperature: 0.8, seed: 7, repetitionPenalty: 1.3, prevTokens: gen.slice(1, 0, 2), out }) },
  ];
}

/** The op's result into a view at element OFF of a NaN-filled buffer of OFF + numel + TAIL elements. */
async function checkCase(e: Engine, c: Case): Promise<void> {
  const label = `${c.op} -> ${c.dtype}[${c.shape.join(',')}]`;
  const fresh = c.run();
  assert.deepEqual(fresh.shape, c.shape, `${label}: fresh result shape`);
  const want = await e.read(fresh);
  assert.ok(want.every(Number.isFinite), `${label}: the fresh result is finite (else the comparison proves nothing)`);
  const n = want.length;
  const big = e.empty([OFF + n + TAIL], c.dtype, `poisoned ${label}`);
  e.fill(big, NaN);
  const view = big.slice(0, OFF, OFF + n).reshape(c.shape);
  assert.equal(view.offset, OFF);
  if (c.honours) {
    const got = c.run(view);
    assert.equal(got.storage, big.storage, `${label}: the result is the given out`);
    assert.equal(got.offset, OFF, `${label}: the result starts at the out's offset`);
  } else {
    assert.throws(() => c.run(view), (err: Error) => {
      assert.ok(err instanceof RangeError, `${label}: ${err}`);
      assert.match(err.message, new RegExp(`^${c.op.replace(/[()]/g, '\\$&')}: out .* element offset ${OFF}\\b.*at offset 0`), label);
      return true;
    });
  }
  const all = await e.read(big);
  for (let i = 0; i < all.length; i++) {
    const inside = i >= OFF && i < OFF + n;
    if (!inside || !c.honours) assert.ok(Number.isNaN(all[i]), `${label}: element ${i} outside the result (or after a refusal) was overwritten with ${all[i]}`);
    else assert.equal(all[i], want[i - OFF], `${label}: element ${i - OFF} of the result`);
  }
  big.free();
  fresh.free();
}

for (const dt of ['f32', 'f16'] as const) {
  test(`out at a nonzero offset, ${dt}: every op writes exactly there or refuses by name`, seeded(async (rng) => {
    const e = await testEngine();
    for (const c of cases(e, rng, dt)) await checkCase(e, c);
  }));
}

const OPS_DIR = join(projectRoot(), 'src/engine/ops');
// A source check: it runs wherever the sources are (CI, this repo); the GPU kit ships compiled code only.
const noSources = existsSync(OPS_DIR) ? false : `no sources at ${OPS_DIR} (a compiled-only bundle such as the GPU kit)`;

test('out checks: every op file validates `out` through checks.outputTensor (no hand-rolled check to forget the offset)', { skip: noSources }, () => {
  const dir = OPS_DIR;
  const files = readdirSync(dir).filter((f) => f.endsWith('.ts') && f !== 'checks.ts');
  assert.ok(files.length > 10, `ops files in ${dir}`);
  for (const f of files) {
    const src = readFileSync(join(dir, f), 'utf8');
    // the tell-tale of a local check: comparing out's layout or building its own "must be a contiguous" message
    assert.doesNotMatch(src, /out \$\{[^}]*\} must be a contiguous/, `${f}: builds its own out message; use outputTensor from ./checks`);
    assert.doesNotMatch(src, /\bout\.isContiguous\b/, `${f}: checks out itself; use outputTensor from ./checks`);
  }
});
