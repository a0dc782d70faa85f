// Flash attention vs the float64 reference: every mask, GQA, decode with a query offset, a key-length limit,
// sliding windows (alone, after a cache, across tile edges), odd Lq/Lk (1, 7, 33, 130), head dims up to 128,
// K/V read through permuted (packed-layout) and sliced views.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Engine } from '../../src/engine/engine';
import { attention, type AttentionMask } from '../../src/engine/ops/attention';
import type { Tensor } from '../../src/engine/tensor';
import { attentionRef } from './reference/attention';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type HostTensor, type Tolerance } from './helpers';

// f32: exp and sums over Lk in f32 (1e-4). f16: inputs and output in f16, softmax and sums in f32 (1e-2).
const TOL: Record<'f32' | 'f16', Tolerance> = { f32: { atol: 1e-4, rtol: 1e-4 }, f16: { atol: 1e-2, rtol: 1e-2 } };

interface Case {
  B: number; Hq: number; Hkv: number; Lq: number; Lk: number; D: number;
  mask: AttentionMask; queryOffset?: number; kvLen?: number; block?: number; tile?: { bq: number; bkv: number };
  window?: number;
}
const CASES: Case[] = [
  { B: 1, Hq: 4, Hkv: 2, Lq: 7, Lk: 7, D: 16, mask: 'none' },
  { B: 2, Hq: 2, Hkv: 1, Lq: 33, Lk: 33, D: 40, mask: 'causal' },
  { B: 1, Hq: 3, Hkv: 3, Lq: 1, Lk: 130, D: 64, mask: 'causal', queryOffset: 129 }, // decode one token
  { B: 1, Hq: 2, Hkv: 1, Lq: 7, Lk: 33, D: 16, mask: 'causal', queryOffset: 26, tile: { bq: 4, bkv: 4 } }, // chunked prefill
  { B: 1, Hq: 4, Hkv: 1, Lq: 130, Lk: 130, D: 128, mask: 'block_causal', block: 13 },
  { B: 2, Hq: 2, Hkv: 2, Lq: 5, Lk: 33, D: 7, mask: 'none', kvLen: 20 }, // padded cache, odd head dim
  { B: 1, Hq: 2, Hkv: 1, Lq: 3, Lk: 7, D: 16, mask: 'causal', kvLen: 0 }, // nothing visible: zeros
  { B: 1, Hq: 4, Hkv: 2, Lq: 33, Lk: 33, D: 16, mask: 'causal', window: 5, tile: { bq: 8, bkv: 4 } }, // window across tiles
  { B: 1, Hq: 2, Hkv: 2, Lq: 130, Lk: 130, D: 64, mask: 'causal', window: 72 }, // the Qwen3-TTS codec's window
  { B: 1, Hq: 2, Hkv: 1, Lq: 7, Lk: 130, D: 16, mask: 'causal', queryOffset: 123, window: 9 }, // chunk after a cache
  { B: 1, Hq: 2, Hkv: 2, Lq: 7, Lk: 7, D: 8, mask: 'causal', window: 1 }, // each query sees itself only
  { B: 1, Hq: 2, Hkv: 1, Lq: 33, Lk: 33, D: 16, mask: 'none', window: 4 }, // left-limited, sees the future
];

/** Stores host (B, H, L, D) as (B, L, H, D) (a packed QKV layout) and returns the permuted view. */
function uploadBLHD(e: Engine, h: HostTensor, dtype: 'f32' | 'f16'): { view: Tensor; base: Tensor } {
  const [B, H, L, D] = h.shape as [number, number, number, number];
  const data = new Float64Array(h.data.length);
  for (let b = 0; b < B; b++) for (let hh = 0; hh < H; hh++) for (let l = 0; l < L; l++) for (let d = 0; d < D; d++)
    data[((b * L + l) * H + hh) * D + d] = h.data[((b * H + hh) * L + l) * D + d]!;
  const base = e.upload(data, [B, L, H, D], dtype);
  return { view: base.permute([0, 2, 1, 3]), base };
}

for (const dtype of ['f32', 'f16'] as const) {
  test(`attention ${dtype}: masks, GQA, decode offset, kv limit, odd sizes, views`, seeded(async (rng) => {
    const e = await testEngine();
    for (const c of CASES) {
      const q = randomHost(rng, [c.B, c.Hq, c.Lq, c.D], dtype, -2, 2);
      const k = randomHost(rng, [c.B, c.Hkv, c.Lk, c.D], dtype, -2, 2);
      const v = randomHost(rng, [c.B, c.Hkv, c.Lk, c.D], dtype);
      const P = Math.max(c.Lk, c.Lq + (c.queryOffset ?? 0));
      const ids = c.block ? Array.from({ length: P }, (_, i) => Math.floor(i / c.block!)) : undefined;
      const gq = uploadAs(e, q, dtype, 'sliced');
      const gk = uploadBLHD(e, k, dtype);
      const gv = uploadBLHD(e, v, dtype);
      const gids = ids && e.upload(ids, [P], 'f32');
      const out = poisoned(e, q.shape, dtype);
      const opts = { mask: c.mask, queryOffset: c.queryOffset, kvLen: c.kvLen, window: c.window };
      attention(e, gq.view, gk.view, gv.view, { ...opts, blockIds: gids, out, tile: c.tile });
      const want = attentionRef(q, k, v, { ...opts, blockIds: ids });
      assertClose(await e.read(out), want, TOL[dtype], `attention ${dtype} ${JSON.stringify(c)}`);
      for (const t of [gq.base, gk.base, gv.base, gids, out]) t?.free();
    }
  }));
}

test('attention f32: explicit scale, contiguous inputs, strided block ids', seeded(async (rng) => {
  const e = await testEngine();
  const [B, H, L, D] = [1, 2, 33, 16];
  const q = randomHost(rng, [B, H, L, D], 'f32');
  const k = randomHost(rng, [B, H, L, D], 'f32');
  const v = randomHost(rng, [B, H, L, D], 'f32');
  const ids = Array.from({ length: L }, (_, i) => Math.floor(i / 5));
  const gids = e.upload(ids.flatMap((x) => [x, -1]), [2 * L], 'f32'); // every other element
  const [gq, gk, gv] = [q, k, v].map((h) => e.upload(h.data, h.shape, 'f32'));
  const out = attention(e, gq!, gk!, gv!, { scale: 0.9, mask: 'block_causal', blockIds: gids.slice(0, 0, 2 * L, 2) });
  assertClose(await e.read(out), attentionRef(q, k, v, { scale: 0.9, mask: 'block_causal', blockIds: ids }), TOL.f32, 'attention scale 0.9');
  for (const t of [gq, gk, gv, gids, out]) t!.free();
}));

test('attention: input checks name the op and the shapes', async () => {
  const e = await testEngine();
  const q = e.empty([1, 3, 4, 8]);
  const k = e.empty([1, 2, 5, 8]);
  assert.throws(() => attention(e, q, k, k), /attention: q\[1,3,4,8\] k\[1,2,5,8\] v\[1,2,5,8\]: Hq 3 is not a multiple of Hkv 2/);
  assert.throws(() => attention(e, e.empty([1, 2, 4, 8]), k, e.empty([1, 2, 5, 4])), /attention: .*: shapes do not match/);
  assert.throws(() => attention(e, e.empty([1, 2, 4, 130]), e.empty([1, 2, 5, 130]), e.empty([1, 2, 5, 130])), /head dim 130 not in 1..128/);
  assert.throws(() => attention(e, e.empty([1, 2, 4, 8]), k, k, { mask: 'block_causal' }), /block_causal needs blockIds f32\[>=5\]/);
  assert.throws(() => attention(e, e.empty([1, 2, 4, 8]), k, k, { mask: 'causal', window: 0 }), /attention: window 0 must be an integer >= 1/);
});
