// The generated tensor-core attention (ops/attention_subgroup_gen.ts) vs the float64 reference, on fresh random
// inputs at small sizes no tile divides (query and key lengths off the tile, GQA, a chunk after a cache), through the
// emulated builtins on any adapter with subgroups (lavapipe in CI) and the native ones where the adapter has them.
// Three emulated variants, one compile each (one per variant, layout and mask, hence one mask per variant; lavapipe
// on the loaded 2-core box took 6 to 13 min a compile, 16x16x16 or 4x4x4 alike), each a different lane layout on
// lavapipe's 8-lane subgroups (NVIDIA's 32 lanes: 2 lanes per row at 16 rows a subgroup, 1 at 32):
//  - 'g16x4k32' at 16x16x16 fragments: 2 query rows per lane, vector (8 halves) staging of Q and packed K / V;
//  - 4 subgroups of 2 row blocks (each K and V fragment shared by both) at 4x4x4, 1 lane per row, 32 query rows
//    staged through Ks in 4 chunks, every operand a strided view read one half at a time;
//  - 2 subgroups of 1 row block at 4x4x4, 2 lanes per row (the shuffle reductions), rescale threshold 0, so O is
//    rescaled through workgroup memory whenever a row's max grows (the path a threshold of 8 takes rarely), on a
//    causal chunk after a cache with GQA.
// Natively (where the adapter has the feature: the GPU call's tests step) 'g16x4k32' and 'g32x4k32' on every case.
// The 'ramp' case makes scores grow by far more than 2^8 from tile to tile (keys scaled up along the sequence), so
// the default threshold's rescale runs too: an O left unscaled would weigh the early keys 2^16 times too much.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { attention, type AttentionMask } from '../../src/engine/ops/attention';
import { attentionSubgroupChoice, type AttentionSubgroupOptions } from '../../src/engine/ops/attention_subgroup';
import { generatedAttentionSource } from '../../src/engine/ops/attention_subgroup_gen';
import type { Engine } from '../../src/engine/engine';
import { roundToDType } from '../../src/engine/dtype';
import { attentionRef } from './reference/attention';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, uploadBLHD, type HostTensor, type Rng } from './helpers';

// f16 error: inputs are f16 on both sides and the sums f32, so the error is P rounded to f16 before P V (each
// weight off by at most 2^-11 of itself, while l sums the unrounded ones: the output off by <= 2 * 2^-11 max |v|)
// and the f16 output (2^-11 of |out| <= max |v|); v in [-1, 1]: <= 3 * 2^-11 ~ 1.5e-3. Stated with a margin for
// exp2 on the device: 2^-9 absolute, 2^-10 relative.
const TOL = { atol: 2 ** -9, rtol: 2 ** -10 };

interface Case { B: number; Hq: number; Hkv: number; Lq: number; Lk: number; D: number; mask: AttentionMask; queryOffset?: number; ramp?: boolean }
const GQA: Case = { B: 1, Hq: 4, Hkv: 2, Lq: 37, Lk: 45, D: 16, mask: 'none' };
const CHUNK: Case = { B: 1, Hq: 2, Hkv: 1, Lq: 21, Lk: 50, D: 16, mask: 'causal', queryOffset: 29 };
const RAMP: Case = { B: 1, Hq: 2, Hkv: 2, Lq: 19, Lk: 70, D: 16, mask: 'none', ramp: true };

function inputs(rng: Rng, c: Case): { q: HostTensor; k: HostTensor; v: HostTensor } {
  const q = randomHost(rng, [c.B, c.Hq, c.Lq, c.D], 'f16', c.ramp ? 0.5 : -2, c.ramp ? 1.5 : 2);
  const k = randomHost(rng, [c.B, c.Hkv, c.Lk, c.D], 'f16', c.ramp ? 0.5 : -2, c.ramp ? 1.5 : 2);
  if (c.ramp) {
    // key j times 1 + 6 j / Lk, rounded to f16 again (the reference sees the rounded value)
    k.data.set(roundToDType(k.data.map((x, i) => x * (1 + (6 * (Math.floor(i / c.D) % c.Lk)) / c.Lk)), 'f16'));
  }
  return { q, k, v: randomHost(rng, [c.B, c.Hkv, c.Lk, c.D], 'f16') };
}

async function check(e: Engine, rng: Rng, c: Case, subgroup: AttentionSubgroupOptions, strided: boolean, what: string): Promise<void> {
  const { q, k, v } = inputs(rng, c);
  const gq = uploadAs(e, q, 'f16', strided ? 'sliced' : 'contiguous');
  const gk = strided ? uploadAs(e, k, 'f16', 'sliced') : uploadBLHD(e, k, 'f16');
  const gv = strided ? uploadAs(e, v, 'f16', 'sliced') : uploadBLHD(e, v, 'f16');
  const out = poisoned(e, q.shape, 'f16');
  const o = { mask: c.mask, queryOffset: c.queryOffset };
  attention(e, gq.view, gk.view, gv.view, { ...o, out, path: 'subgroup', subgroup });
  assertClose(await e.read(out), attentionRef(q, k, v, o), TOL, `${what}: ${JSON.stringify(c)}`);
  for (const t of [gq.base, gk.base, gv.base, out]) t.free();
}

const RUNS: { what: string; sub: AttentionSubgroupOptions; strided: boolean; cases: Case[] }[] = [
  // native first: the GPU call's tests step is bounded, and there the native result is the one that matters
  { what: "'g16x4k32', native builtins", sub: { tile: 'g16x4k32' }, strided: false, cases: [GQA, CHUNK, RAMP] },
  { what: "'g32x4k32', native builtins, strided views", sub: { tile: 'g32x4k32' }, strided: true, cases: [GQA, CHUNK, RAMP] },
  { what: "'g16x4k32', 16x16x16 emulated", sub: { tile: 'g16x4k32', emulate: true }, strided: false, cases: [GQA, RAMP] },
  { what: '4 subgroups x 2 row blocks, 8 keys, 4x4x4 emulated, strided views', sub: { tile: { nsg: 4, fm: 2, bkv: 8, pad: 8 }, emulate: { M: 4, N: 4, K: 4 } }, strided: true, cases: [GQA, RAMP] },
  { what: '2 subgroups x 1 row block, 8 keys, threshold 0, 4x4x4 emulated', sub: { tile: { nsg: 2, fm: 1, bkv: 8, pad: 8, th: 0 }, emulate: { M: 4, N: 4, K: 4 } }, strided: false, cases: [CHUNK] },
];
for (const run of RUNS) {
  test(`attention generated subgroup-matrix f16 (${run.what}): unaligned lengths, GQA, causal chunk, growing scores`, async (t) => {
    const e = await testEngine();
    const plan = attentionSubgroupChoice(e, 16, run.sub);
    if ('reason' in plan) { console.log(`# attention_subgroup_gen (${run.what}): skipped: ${plan.reason}`); t.skip(plan.reason); return; }
    assert.ok(plan.tile.fm, `${run.what}: the generated kernel was chosen`);
    await seeded(async (rng) => { for (const c of run.cases) await check(e, rng, c, run.sub, run.strided, run.what); })();
  });
}

test('attention generated kernel: refusals and the file-kernel fallback', async () => {
  const e = await testEngine();
  const emulate = { emulate: true as const };
  assert.throws(() => generatedAttentionSource({ SM_M: 16, SM_N: 16, SM_K: 16, SG: 32, D: 40, tile: { nsg: 2, fm: 1, bkv: 32, pad: 8 }, VQ: false, VK: false, VV: false }),
    /head dim 40 is not a multiple of the matrix config's K 16/);
  assert.throws(() => attentionSubgroupChoice(e, 16, { tile: 'g99' as never, ...emulate }), /attention tile 'g99' unknown .* one of 2x32, 1x32, g16x4k32/);
  if (!('config' in attentionSubgroupChoice(e, 16, emulate))) return;
  // named in the options: refused with the reason (a bench row never times another kernel)
  const h = e.empty([1, 2, 4, 24], 'f16');
  assert.throws(() => attention(e, h, h, h, { path: 'subgroup', subgroup: { tile: 'g16x4k32', ...emulate } }), /path 'subgroup': generated kernel: head dim 24/);
  h.free();
  // from KILN_SUBGROUP_ATTENTION_TILE: a head dim it cannot take goes to the file kernel's default
  const held = e.settings;
  (e as { settings: typeof held }).settings = { ...held, subgroupAttentionTile: 'g16x2k64' };
  try {
    const ok = attentionSubgroupChoice(e, 16, emulate);
    assert.ok('config' in ok && ok.tile.fm === 1 && ok.tile.bkv === 64, 'the environment names the generated preset');
    const big = attentionSubgroupChoice(e, 128, emulate);   // 47 KiB: more than lavapipe's 32 KiB
    if (e.describe().limits.maxComputeWorkgroupStorageSize < 48136) assert.ok('config' in big && !big.tile.fm, 'fell back to the file kernel');
  } finally {
    (e as { settings: typeof held }).settings = held;
  }
});
