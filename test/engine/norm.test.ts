// Norms (LayerNorm, RMSNorm + AdaLN fusions, QK-norm, GroupNorm) vs the float64 CPU reference.
// Tolerances: the TOLERANCE defaults. f32: statistics over <= 300 elements in f32 add ~1e-7 relative error;
// outputs are O(1..5) (modulated, plus residual), so 1e-5 abs/rel holds with margin. f16: one rounding
// of the output (2^-11 relative) dominates.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { DType } from '../../src/engine/dtype';
import { groupNorm, headRmsNorm, layerNorm, rmsNorm, type RowNormOptions } from '../../src/engine/ops/norm';
import type { Tensor } from '../../src/engine/tensor';
import { groupNormRef, rowNormRef, type RowNormRef } from './reference/norm';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type HostTensor, type Layout, type Rng } from './helpers';

const DTYPES: DType[] = ['f32', 'f16'];
const LAYOUTS: Layout[] = ['contiguous', 'transposed', 'sliced'];

interface Case {
  name: string;
  rms: boolean;
  affine?: 'w' | 'wb';
  /** modulation shape builder from x's shape (lead[:-1], S, D) */
  mod?: 'batch' | 'segments';
  gate?: boolean;
  residual?: boolean;
}

const CASES: Case[] = [
  { name: 'layer', rms: false },
  { name: 'layer affine', rms: false, affine: 'wb' },
  { name: 'rms weight', rms: true, affine: 'w' },
  { name: 'layer + per-batch modulation', rms: false, mod: 'batch' },
  { name: 'rms + per-segment modulation + gated residual', rms: true, affine: 'w', mod: 'segments', gate: true, residual: true },
  { name: 'layer + residual only', rms: false, residual: true },
];

const SHAPES = [[7], [3, 33], [2, 5, 129], [2, 2, 3, 13], [1, 4, 300]];

function segmentsFor(l: number): number[] {
  if (l < 3) return [l];
  const a = Math.floor(l / 3);
  return [a, 0, l - 2 * a - 1, a + 1]; // includes an empty segment
}

for (const dtype of DTYPES) {
  test(`norm ${dtype}: layer/rms norms with affine, modulation, gate and residual over layouts`, seeded(async (rng) => {
    const e = await testEngine();
    // Every (case, shape) pair once, with the layouts rotating over them (a read costs ~0.1 s on lavapipe).
    for (const [ci, c] of CASES.entries()) {
      for (const [si, shape] of SHAPES.entries()) {
        const lead = shape.slice(0, -1);
        if ((c.mod || c.residual) && lead.length === 0) continue;
        for (const layout of [LAYOUTS[(ci + si) % LAYOUTS.length]!]) {
          const d = shape[shape.length - 1]!;
          const x = randomHost(rng, shape, dtype, -2, 3);
          const segs = c.mod === 'segments' ? segmentsFor(lead[lead.length - 1]!) : undefined;
          const modShape = c.mod === 'batch' ? [...lead.slice(0, -1), 1, d] : [...lead.slice(0, -1), segs?.length ?? 1, d];
          const host: Record<string, HostTensor> = {};
          if (c.affine) host.weight = randomHost(rng, [d], dtype, 0.5, 1.5);
          if (c.affine === 'wb') host.bias = randomHost(rng, [d], dtype);
          if (c.mod) {
            host.scale = randomHost(rng, modShape, dtype, -0.5, 0.5);
            host.shift = randomHost(rng, modShape, dtype);
          }
          if (c.gate) host.gate = randomHost(rng, modShape, dtype);
          if (c.residual) host.residual = randomHost(rng, shape, dtype);
          const eps = c.rms ? 1e-6 : 1e-5;
          const want = rowNormRef(x, { rms: c.rms, eps, segments: segs, ...host } as RowNormRef);

          const bases: Tensor[] = [];
          const up = (h: HostTensor, l: Layout) => {
            const u = uploadAs(e, h, dtype, h.shape.length >= 2 ? l : l === 'transposed' ? 'sliced' : l);
            bases.push(u.base);
            return u.view;
          };
          const gx = up(x, layout);
          const opts: RowNormOptions = { eps, segments: segs };
          for (const [k, h] of Object.entries(host)) (opts as Record<string, Tensor>)[k] = up(h, layout === 'contiguous' ? 'sliced' : 'contiguous');
          const out = poisoned(e, shape, dtype);
          (c.rms ? rmsNorm : layerNorm)(e, gx, { ...opts, out });
          assertClose(await e.read(out), want, dtype, `${c.name} ${dtype} x[${shape}] ${layout}`);
          for (const t of [...bases, out]) t.free();
        }
      }
    }
  }));

  test(`norm ${dtype}: modulation as chunks of one AdaLN projection [B, 3D]`, seeded(async (rng) => {
    const e = await testEngine();
    const [B, L, D] = [2, 9, 31];
    const x = randomHost(rng, [B, L, D], dtype);
    const proj = randomHost(rng, [B, 3 * D], dtype, -0.5, 0.5);
    const chunk = (k: number): HostTensor => ({
      data: Float64Array.from({ length: B * D }, (_, i) => proj.data[Math.floor(i / D) * 3 * D + k * D + (i % D)]!),
      shape: [B, 1, D],
    });
    const want = rowNormRef(x, { rms: false, eps: 1e-5, shift: chunk(0), scale: chunk(1), gate: chunk(2), residual: x });
    const gx = e.upload(x.data, x.shape, dtype);
    const gp = e.upload(proj.data, proj.shape, dtype);
    const view = (k: number) => gp.slice(1, k * D, (k + 1) * D).unsqueeze(1);
    const out = layerNorm(e, gx, { shift: view(0), scale: view(1), gate: view(2), residual: gx });
    assertClose(await e.read(out), want, dtype, `adaln chunks ${dtype}`);
    for (const t of [gx, gp, out]) t.free();
  }));

  test(`norm ${dtype}: per-head RMSNorm (QK-norm) on a permuted [B, L, H, D] view`, seeded(async (rng) => {
    const e = await testEngine();
    for (const [B, H, L, D] of [[1, 3, 5, 16], [2, 2, 7, 33]] as const) {
      // stored [B, H, L, D], viewed as [B, L, H, D]
      const stored = randomHost(rng, [B, H, L, D], dtype, -3, 3);
      const logical: HostTensor = { data: new Float64Array(stored.data.length), shape: [B, L, H, D] };
      for (let b = 0; b < B; b++) for (let h = 0; h < H; h++) for (let l = 0; l < L; l++) for (let d = 0; d < D; d++)
        logical.data[((b * L + l) * H + h) * D + d] = stored.data[((b * H + h) * L + l) * D + d]!;
      const w = randomHost(rng, [D], dtype, 0.5, 1.5);
      const want = rowNormRef(logical, { rms: true, eps: 1e-6, weight: w });
      const gs = e.upload(stored.data, stored.shape, dtype);
      const gw = e.upload(w.data, w.shape, dtype);
      const out = poisoned(e, logical.shape, dtype);
      headRmsNorm(e, gs.permute([0, 2, 1, 3]), gw, 1e-6, out);
      assertClose(await e.read(out), want, dtype, `qk-norm ${dtype} [${logical.shape}]`);
      for (const t of [gs, gw, out]) t.free();
    }
  }));

  test(`norm ${dtype}: GroupNorm channels-last with affine and fused SiLU, strided views`, seeded(async (rng) => {
    const e = await testEngine();
    const cases: [number[], number, boolean, boolean][] = [
      [[2, 5, 7, 12], 4, true, true],
      [[1, 9, 6], 3, false, false],
      [[2, 3, 2, 5, 8], 2, true, false], // 3D (video) latents
      [[1, 33, 7], 7, true, true],
    ];
    for (const [shape, groups, affine, silu] of cases) {
      for (const layout of ['contiguous', 'nchw'] as const) {
        const x = randomHost(rng, shape, dtype, -2, 3);
        const c = shape[shape.length - 1]!;
        const w = affine ? randomHost(rng, [c], dtype, 0.5, 1.5) : undefined;
        const b = affine ? randomHost(rng, [c], dtype) : undefined;
        const want = groupNormRef(x, groups, 1e-5, w, b, silu);
        const gx = layout === 'contiguous' ? { view: e.upload(x.data, shape, dtype), base: null } : uploadChannelsFirst(e, rng, x, dtype);
        const base = gx.base ?? gx.view;
        const gw = w && e.upload(w.data, [c], dtype);
        const gb = b && e.upload(b.data, [c], dtype);
        const out = poisoned(e, shape, dtype);
        groupNorm(e, gx.view, groups, { weight: gw, bias: gb, silu, out });
        assertClose(await e.read(out), want, dtype, `groupNorm ${dtype} [${shape}] G=${groups} ${layout}`);
        for (const t of [base, gw, gb, out]) t?.free();
      }
    }
  }));
}

/** x (channels-last) stored channels-first [B, C, ...spatial] and viewed back as channels-last. */
function uploadChannelsFirst(e: Awaited<ReturnType<typeof testEngine>>, _rng: Rng, x: HostTensor, dtype: DType): { view: Tensor; base: Tensor } {
  const [b, ...rest] = x.shape;
  const c = rest.pop()!;
  const sp = rest.reduce((a, n) => a * n, 1);
  const data = new Float64Array(x.data.length);
  for (let i = 0; i < b!; i++) for (let s = 0; s < sp; s++) for (let k = 0; k < c; k++) data[(i * c + k) * sp + s] = x.data[(i * sp + s) * c + k]!;
  const base = e.upload(data, [b!, c, ...rest], dtype);
  const order = [0, ...rest.map((_, i) => i + 2), 1];
  return { view: base.permute(order), base };
}

test('norm f32: large mean offset and more rows than one grid dimension', seeded(async (rng) => {
  const e = await testEngine();
  const x = randomHost(rng, [3, 5, 40], 'f32', 99, 101); // |mean| >> std: two-pass statistics stay exact
  const gx = e.upload(x.data, x.shape, 'f32');
  const out = layerNorm(e, gx);
  assertClose(await e.read(out), rowNormRef(x, { rms: false, eps: 1e-5 }), { atol: 1e-4, rtol: 1e-4 }, 'layer norm, mean 100');
  // 1e-4 here: the inputs carry only ~6e-6 of f32 resolution relative to their std of ~0.58
  gx.free();
  out.free();
  const n = 65537;
  const y = randomHost(rng, [n, 3], 'f32');
  const gy = e.upload(y.data, y.shape, 'f32');
  const o2 = rmsNorm(e, gy);
  assertClose(await e.read(o2), rowNormRef(y, { rms: true, eps: 1e-6 }), 'f32', `rms norm ${n} rows`);
  gy.free();
  o2.free();
}));

test('norm: input checks name the op and the shapes', async () => {
  const e = await testEngine();
  const x = e.empty([2, 5, 8]);
  const w = e.empty([7]);
  const h = e.empty([8], 'f16');
  const s = e.empty([3, 8]);
  assert.throws(() => layerNorm(e, x, { weight: w }), /layerNorm: weight f32\[7\] must be \[8\] for x f32\[2,5,8\]/);
  assert.throws(() => rmsNorm(e, x, { weight: h }), /rmsNorm: weight f16\[8\] vs x f32\[2,5,8\]: dtypes differ/);
  assert.throws(() => layerNorm(e, x, { scale: s }), /layerNorm: scale f32\[3,8\] does not broadcast to \[2,1,8\]/);
  assert.throws(() => layerNorm(e, x, { scale: s, segments: [2, 2] }), /layerNorm: segments \[2,2\] must be lengths summing to dim 1/);
  assert.throws(() => layerNorm(e, x, { residual: s }), /layerNorm: residual f32\[3,8\] vs x f32\[2,5,8\]: shapes differ/);
  assert.throws(() => groupNorm(e, x, 3), /groupNorm: 8 channels of x f32\[2,5,8\] do not split into 3 groups/);
  assert.throws(() => layerNorm(e, x, { out: e.empty([2, 5, 7]) }), /layerNorm: out f32\[2,5,7\] must be a contiguous f32\[2,5,8\]/);
  assert.throws(() => layerNorm(e, x, { out: x }), /layerNorm: out f32\[2,5,8\] aliases an input/);
  for (const t of [x, w, h, s]) t.free();
});
