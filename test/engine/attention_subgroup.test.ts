// The tensor-core attention path vs the float64 reference, on the shared cases (attention_cases.ts). Two ways to
// run the same kernel:
//  - emulated builtins (ops/subgroup_matrix_emulation.ts), on any adapter with subgroups, lavapipe in CI included:
//    at 16x16x16 fragments (the hardware's shape; lavapipe's 8-lane subgroups then hold two query rows per lane)
//    every case whose head dim 16 divides, and at 4x4x4 (two lanes per row, as 32-lane subgroups on 16x16: the
//    shuffle reductions) the causal cases at head dim 16, with the operands' staging swapped (vector Q, scalar K, V);
//  - native builtins where the adapter has chromium-experimental-subgroup-matrix (every case it divides); elsewhere
//    it skips, saying why.
// Each case runs on the default tile for its head dim ('2x32', or '1x32' where that does not fit: D 128 on
// lavapipe). Compiling an emulated variant takes lavapipe 5-50 s (running it, milliseconds), which bounds the
// number of variants (head dim x mask) run here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { attention } from '../../src/engine/ops/attention';
import { attentionSubgroupChoice, type AttentionSubgroupOptions } from '../../src/engine/ops/attention_subgroup';
import type { Engine } from '../../src/engine/engine';
import { attentionRef } from './reference/attention';
import { ATTENTION_CASES, type AttentionCase } from './attention_cases';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, uploadBLHD, type Rng } from './helpers';

// As the flash kernel's f16 test (inputs and output f16, sums f32), plus P rounded to f16 before P V: each
// probability in [0, 1] moves by at most 2^-11 of itself, so the output by 2^-11 of max |v| (v in [-1, 1]).
const TOL = { atol: 1e-2, rtol: 1e-2 };

async function checkCase(e: Engine, rng: Rng, c: AttentionCase, subgroup: AttentionSubgroupOptions, swapped: boolean, what: string): Promise<void> {
  const q = randomHost(rng, [c.B, c.Hq, c.Lq, c.D], 'f16', -2, 2);
  const k = randomHost(rng, [c.B, c.Hkv, c.Lk, c.D], 'f16', -2, 2);
  const v = randomHost(rng, [c.B, c.Hkv, c.Lk, c.D], 'f16');
  const P = Math.max(c.Lk, c.Lq + (c.queryOffset ?? 0));
  const ids = c.block ? Array.from({ length: P }, (_, i) => Math.floor(i / c.block!)) : undefined;
  // sliced: offsets and strides off 8, read one half at a time; contiguous and the packed (B, L, H, D) layout:
  // 8 halves per read
  const gq = uploadAs(e, q, 'f16', swapped ? 'contiguous' : 'sliced');
  const gk = swapped ? uploadAs(e, k, 'f16', 'sliced') : uploadBLHD(e, k, 'f16');
  const gv = swapped ? uploadAs(e, v, 'f16', 'sliced') : uploadBLHD(e, v, 'f16');
  const gids = ids && e.upload(ids, [P], 'f32');
  const out = poisoned(e, q.shape, 'f16');
  const o = { mask: c.mask, queryOffset: c.queryOffset, kvLen: c.kvLen, window: c.window };
  attention(e, gq.view, gk.view, gv.view, { ...o, blockIds: gids, out, path: 'subgroup', subgroup });
  assertClose(await e.read(out), attentionRef(q, k, v, { ...o, blockIds: ids }), TOL, `${what}: ${JSON.stringify(c)}`);
  for (const t of [gq.base, gk.base, gv.base, gids, out]) t?.free();
}

const RUNS: { what: string; emulate: AttentionSubgroupOptions['emulate']; swapped: boolean; cases: (c: AttentionCase) => boolean }[] = [
  { what: 'emulated builtins, 16x16x16 fragments', emulate: true, swapped: false, cases: () => true },
  { what: 'emulated builtins, 4x4x4 fragments', emulate: { M: 4, N: 4, K: 4 }, swapped: true, cases: (c) => c.mask === 'causal' && c.D === 16 },
  { what: 'native builtins', emulate: false, swapped: false, cases: () => true },
];
for (const run of RUNS) {
  test(`attention subgroup-matrix f16 (${run.what}): masks, GQA, offsets, windows, views`, async (t) => {
    const e = await testEngine();
    const subgroup = { emulate: run.emulate };
    const plan = attentionSubgroupChoice(e, 16, subgroup);
    if ('reason' in plan) { console.log(`# attention_subgroup (${run.what}): skipped: ${plan.reason}`); t.skip(plan.reason); return; }
    const cases = ATTENTION_CASES.filter((c) => run.cases(c) && 'config' in attentionSubgroupChoice(e, c.D, subgroup));
    assert.ok(cases.length >= 3, `${run.what}: only ${cases.length} cases runnable`);
    await seeded(async (rng) => { for (const c of cases) await checkCase(e, rng, c, subgroup, run.swapped, run.what); })();
  });
}

test('attention path subgroup: refusals say what to change', async () => {
  const e = await testEngine();
  const emulate = { emulate: true };
  const q = e.empty([1, 2, 4, 16], 'f32');
  assert.throws(() => attention(e, q, q, q, { path: 'subgroup', subgroup: emulate }), /attention: .*path 'subgroup': f32 \(it takes f16\)/);
  const h = e.empty([1, 2, 4, 24], 'f16');
  if ('config' in attentionSubgroupChoice(e, 16, emulate)) {
    assert.throws(() => attention(e, h, h, h, { path: 'subgroup', subgroup: emulate }), /head dim 24 is not a multiple of the matrix config's K 16/);
    const huge = { nsg: 8, bkv: 128, pad: 8 };
    assert.throws(() => attention(e, h, h, h, { path: 'subgroup', subgroup: { emulate: { M: 8, N: 8, K: 8 }, tile: huge } }), /no tile fits: .* B of workgroup memory/);
  }
  for (const t of [q, h]) t.free();
});
