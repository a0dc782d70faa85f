// Flash attention vs the float64 reference: every mask, GQA, decode with a query offset, a key-length limit,
// sliding windows (alone, after a cache, across tile edges), odd Lq/Lk (1, 7, 33, 130), head dims up to 128,
// K/V read through permuted (packed-layout) and sliced views.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { attention } from '../../src/engine/ops/attention';
import { attentionRef } from './reference/attention';
import { ATTENTION_CASES as CASES } from './attention_cases';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, uploadBLHD, type Tolerance } from './helpers';

// f32: exp and sums over Lk in f32 (1e-4). f16: inputs and output in f16, softmax and sums in f32 (1e-2).
const TOL: Record<'f32' | 'f16', Tolerance> = { f32: { atol: 1e-4, rtol: 1e-4 }, f16: { atol: 1e-2, rtol: 1e-2 } };

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
      attention(e, gq.view, gk.view, gv.view, { ...opts, blockIds: gids, out, tile: c.tile, path: 'flash' });
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
