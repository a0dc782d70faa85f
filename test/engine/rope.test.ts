// RoPE: CPU tables (1D, multi-axis, MRoPE) vs float64 angles written as upstream states them, and the GPU
// apply kernel (rotate-half and interleaved, partial head dims, strided views, batched tables) vs the CPU
// rotation. Tolerances: tables hold f32-rounded cos/sin (|err| <= 2^-24 ~ 6e-8: checked at 1e-7); the apply
// kernel uses the TOLERANCE defaults (one product pair per element; outputs O(1)).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { DType } from '../../src/engine/dtype';
import { rope, type RopeStyle } from '../../src/engine/ops/rope';
import { gridPositions, mrope, rope1d, ropeAxes, uploadRope, type RopeTable } from '../../src/engine/rope-tables';
import type { Tensor } from '../../src/engine/tensor';
import { angles1dRef, anglesAxesRef, mropeInterleavedRef, mropeSectionedRef, ropeRef, type Angles } from './reference/rope';
import { assertClose, poisoned, randomHost, seeded, testEngine, type HostTensor, type Rng } from './helpers';

function checkTable(t: RopeTable, want: Angles, label: string): void {
  assert.equal(t.length, want.length, `${label}: length`);
  assert.equal(t.pairs, want.pairs, `${label}: pairs`);
  const shape = [want.length, want.pairs];
  assertClose(t.cos, { data: want.data.map(Math.cos), shape }, { atol: 1e-7, rtol: 0 }, `${label} cos`);
  assertClose(t.sin, { data: want.data.map(Math.sin), shape }, { atol: 1e-7, rtol: 0 }, `${label} sin`);
}

const fractional = (rng: Rng, n: number, scale: number) => Float64Array.from({ length: n }, () => Math.round(rng.next() * scale * 40) / 40);

test('rope tables: 1D, multi-axis and MRoPE match the float64 upstream formulas', seeded((rng) => {
  const pos = fractional(rng, 37, 5000); // large positions: angles of thousands of radians
  checkTable(rope1d(pos, 128, 1e6), angles1dRef(pos, 128, 1e6), 'rope1d 128 theta 1e6');
  checkTable(rope1d(pos, 24, 10000), angles1dRef(pos, 24, 10000), 'rope1d 24');
  const [t, h, w] = gridPositions(3, 5, 7, [2, 0, 0]);
  checkTable(ropeAxes([t, h, w], [16, 56, 56]), anglesAxesRef([t, h, w], [16, 56, 56], 10000), 'Qwen-Image axes (16,56,56)');
  const ft = fractional(rng, t.length, 200);
  checkTable(ropeAxes([ft, h, w], [32, 32, 32]), anglesAxesRef([ft, h, w], [32, 32, 32], 10000), 'H3-like 96 of 128, fractional t');
  checkTable(mrope([t, h, w], [24, 20, 20], 5e6), mropeInterleavedRef([t, h, w], [24, 20, 20], 5e6), 'Qwen3-VL interleaved MRoPE');
  checkTable(mrope([t, h, w], [16, 24, 24], 1e6, 'sectioned'), mropeSectionedRef([t, h, w], [16, 24, 24], 1e6), 'Qwen2-VL sectioned MRoPE');
  // text rows (t = h = w) make MRoPE equal to 1D rope
  const tp = Float64Array.from({ length: 9 }, (_, i) => i + 100);
  const m = mrope([tp, tp, tp], [24, 20, 20], 5e6);
  const r = rope1d(tp, 128, 5e6);
  assert.deepEqual([...m.cos], [...r.cos]);
  assert.deepEqual([...m.sin], [...r.sin]);
  assert.deepEqual([...gridPositions(2, 2, 3)[2]], [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]);
  assert.throws(() => ropeAxes([t, h], [16, 56, 56]), /ropeAxes: 2 position axes, expected 3/);
  assert.throws(() => rope1d(pos, 15), /rope: rotated dim 15 must be even/);
}));

interface Case {
  shape: [number, number, number, number] | [number, number, number]; // x [B, L, H, D] or [L, H, D]
  rotated: number; // 2P
  batchTables?: boolean;
  view: 'contiguous' | 'bhld' | 'qkv';
}

const CASES: Case[] = [
  { shape: [2, 5, 3, 16], rotated: 16, view: 'contiguous' },
  { shape: [1, 7, 2, 24], rotated: 16, view: 'bhld' }, // partial: 8 dims pass through
  { shape: [13, 4, 34], rotated: 20, view: 'contiguous' },
  { shape: [2, 3, 5, 12], rotated: 12, batchTables: true, view: 'qkv' },
  { shape: [1, 33, 1, 66], rotated: 48, view: 'qkv' },
];

/** Uploads x [B, L, H, D] as a view: contiguous, stored [B, H, L, D] and permuted, or one third of a fused qkv. */
function uploadView(e: Awaited<ReturnType<typeof testEngine>>, rng: Rng, x: HostTensor, dtype: DType, view: Case['view']): { view: Tensor; base: Tensor } {
  const [B, L, H, D] = x.shape as [number, number, number, number];
  const at = (b: number, l: number, h: number, d: number) => x.data[((b * L + l) * H + h) * D + d]!;
  if (view === 'contiguous') {
    const base = e.upload(x.data, x.shape, dtype);
    return { view: base, base };
  }
  if (view === 'bhld') {
    const data = new Float64Array(x.data.length);
    for (let b = 0; b < B; b++) for (let h = 0; h < H; h++) for (let l = 0; l < L; l++) for (let d = 0; d < D; d++) data[((b * H + h) * L + l) * D + d] = at(b, l, h, d);
    const base = e.upload(data, [B, H, L, D], dtype);
    return { view: base.permute([0, 2, 1, 3]), base };
  }
  // [B, L, 3H, D] with x as the middle third (the k of a fused qkv projection)
  const data = randomHost(rng, [B, L, 3 * H, D], dtype).data;
  for (let b = 0; b < B; b++) for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) for (let d = 0; d < D; d++) data[((b * L + l) * 3 * H + H + h) * D + d] = at(b, l, h, d);
  const base = e.upload(data, [B, L, 3 * H, D], dtype);
  return { view: base.slice(2, H, 2 * H), base };
}

for (const dtype of ['f32', 'f16'] as DType[]) {
  for (const style of ['half', 'interleaved'] as RopeStyle[]) {
    test(`rope ${dtype} ${style}: partial head dims, views, batched and sliced tables`, seeded(async (rng) => {
      const e = await testEngine();
      for (const c of CASES) {
        const shape4 = c.shape.length === 3 ? [1, ...c.shape] : [...c.shape];
        const [B, L] = shape4 as [number, number];
        const x = randomHost(rng, shape4, dtype);
        const P = c.rotated / 2;
        const tb = c.batchTables ? B : 1;
        // positions for tb batches, taken from a longer table at an offset (a decode step's rows)
        const start = 3;
        const pos = fractional(rng, tb * (L + start), 300);
        const table = rope1d(pos, c.rotated, 10000);
        const want = ropeRef(
          x,
          Float64Array.from({ length: tb * L * P }, (_, i) => {
            const b = Math.floor(i / (L * P));
            const l = Math.floor(i / P) % L;
            return pos[b * (L + start) + start + l]! * (1 / 10000 ** ((2 * (i % P)) / c.rotated));
          }),
          tb,
          P,
          style,
        );
        const { cos, sin } = uploadRope(e, table);
        const view = (t: Tensor) => (tb === 1 ? t.slice(0, start, start + L) : t.reshape([tb, L + start, P]).slice(1, start, start + L));
        const gx = uploadView(e, rng, x, dtype, c.view);
        const xv = c.shape.length === 3 ? gx.view.reshape(c.shape) : gx.view;
        const out = poisoned(e, [...c.shape], dtype);
        rope(e, xv, view(cos), view(sin), { style, out });
        assertClose(await e.read(out), { data: want.data, shape: [...c.shape] }, dtype, `rope ${style} ${dtype} x[${c.shape}] R=${c.rotated} ${c.view} tables[${tb},${L},${P}]`);
        for (const t of [cos, sin, gx.base, out]) t.free();
      }
    }));
  }
}

test('rope: multi-axis table on a 3D token grid, interleaved, f32', seeded(async (rng) => {
  const e = await testEngine();
  const [T, Hh, W] = [2, 3, 4];
  const pos = gridPositions(T, Hh, W, [1, 0, 0]);
  const dims = [8, 12, 12];
  const x = randomHost(rng, [1, T * Hh * W, 2, 40], 'f32'); // 32 of 40 dims rotated
  const ang = anglesAxesRef(pos, dims, 10000);
  const want = ropeRef(x, ang.data, 1, ang.pairs, 'interleaved');
  const { cos, sin } = uploadRope(e, ropeAxes(pos, dims));
  const gx = e.upload(x.data, x.shape, 'f32');
  const out = rope(e, gx, cos, sin, { style: 'interleaved' });
  assertClose(await e.read(out), want, 'f32', 'grid rope');
  for (const t of [cos, sin, gx, out]) t.free();
}));

test('rope: input checks name the op and the shapes', async () => {
  const e = await testEngine();
  const x = e.empty([2, 5, 3, 16]);
  const cos = e.empty([5, 8]);
  const sin = e.empty([5, 8]);
  const big = e.empty([5, 9]);
  const h = e.empty([5, 8], 'f16');
  assert.throws(() => rope(e, x, big, big), /rope: tables f32\[5,9\] rotate 18 dims but x f32\[2,5,3,16\] has head dim 16/);
  assert.throws(() => rope(e, x, cos, big), /rope: cos f32\[5,8\] and sin f32\[5,9\] differ/);
  assert.throws(() => rope(e, x, h, h), /rope: tables cos f16\[5,8\] \/ sin f16\[5,8\] must be f32/);
  assert.throws(() => rope(e, x, cos.slice(0, 0, 4), sin.slice(0, 0, 4)), /rope: tables f32\[4,8\] do not match x f32\[2,5,3,16\]/);
  assert.throws(() => rope(e, e.empty([5, 16]), cos, sin), /rope: x f32\[5,16\] must be \[B, L, H, D\]/);
  for (const t of [x, cos, sin, big, h]) t.free();
});
