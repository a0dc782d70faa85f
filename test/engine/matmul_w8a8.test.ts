// The W8A8 tensor-core GEMM (ops/matmul_w8a8.ts) vs its CPU reference (per-token quantisation as
// quantizeActRef, exact integer sums, both scales, then the epilogue in float64), on fresh random inputs at sizes no
// tile divides: M 37 and 2 x 19 rows, N 45, K 80 (2.5 slices of BK 32; the K tail zero-filled), bias, gelu_tanh and
// a residual; natively a gate and f16 scales too. Native first (where the adapter has i8 x i8 -> i32 subgroup
// matrices: the GPU call's tests step), then emulated at 8x8x16 on any adapter with subgroups (lavapipe), one
// compile: 2x1 subgroups of 1x2 fragments, BK 32.
// Tolerance: the i32 sums are exact and the scales' f32 products 2^-22 off; the output is f16 (2^-11 of |y| <= ~8)
// and the f32 gelu a few ulp; a quantised x may sit one step off the reference's where x / s is within 2^-20 of a
// half-integer (WGSL's f32 division), which moves y by at most s_x * 127 * s_w <= 1/127 * max|w|: 1e-2 absolute
// and relative covers each of these.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gemmW8A8, w8a8Kernel, w8a8Plan, w8a8Ref, w8a8Refusal, W8A8_TILES, type W8A8Options } from '../../src/engine/ops/matmul_w8a8';
import { pipelinedGemmSource, pipelinedTileBytes } from '../../src/engine/ops/matmul_subgroup_gen';
import { emulateSubgroupMatrix } from '../../src/engine/ops/subgroup_matrix_emulation';
import { uninitialisedInBlock } from '../../src/engine/kernels';
import type { SubgroupTile } from '../../src/engine/ops/matmul_subgroup';
import { quantizeInt8PerChannel, uploadInt8 } from '../../src/engine/quantize';
import { linear } from '../../src/engine/ops/linear';
import type { Engine } from '../../src/engine/engine';
import type { Activation } from '../../src/engine/ops/matmul';
import { roundToDType } from '../../src/engine/dtype';
import { actRef } from './reference/matmul';
import { broadcastIndex } from './reference/elementwise';
import { assertClose, poisoned, randomHost, seeded, testEngine, type HostTensor, type Rng } from './helpers';

const TOL = { atol: 1e-2, rtol: 1e-2 };

interface Case { batch: number[]; M: number; N: number; K: number; act: Activation; gate: boolean; f16Scales: boolean }
const PLAIN: Case = { batch: [], M: 37, N: 45, K: 80, act: 'gelu_tanh', gate: false, f16Scales: false };
const BATCHED: Case = { ...PLAIN, batch: [2], M: 19 };
const GATED: Case = { ...BATCHED, act: 'none', gate: true, f16Scales: true };

async function check(e: Engine, rng: Rng, c: Case, opts: W8A8Options, what: string): Promise<void> {
  const { M, N, K } = c;
  const nb = c.batch.reduce((a, b) => a * b, 1);
  const shape = [...c.batch, M, N];
  const x = randomHost(rng, [...c.batch, M, K], 'f16', -2, 2);
  const wq = quantizeInt8PerChannel(rng.uniform(N * K), N, K);
  const bias = randomHost(rng, [N], 'f16');
  const gate = c.gate ? randomHost(rng, [...c.batch, 1, N], 'f16') : undefined;
  const resid = randomHost(rng, shape, 'f16');
  // reference: exact integer sums times both scales, then the epilogue
  const wscales = c.f16Scales ? roundToDType(Float64Array.from(wq.scales), 'f16') : wq.scales;   // as uploaded
  const y = w8a8Ref(x.data, nb * M, K, wq.q, wscales, N);
  const gi = gate && broadcastIndex(gate.shape, shape);
  for (let i = 0; i < y.length; i++) {
    let v = actRef(c.act, y[i]! + bias.data[i % N]!);
    if (gi) v *= gate!.data[gi(i)]!;
    y[i] = v + resid.data[i]!;
  }
  const up = (h: HostTensor) => e.upload(h.data, h.shape, 'f16');
  const gx = up(x), gb = up(bias), gr = up(resid), gg = gate && up(gate);
  const w = uploadInt8(e, wq, c.f16Scales ? 'f16' : 'f32');
  const out = poisoned(e, shape, 'f16');
  gemmW8A8(e, 'test', gx, w, { bias: gb, act: c.act, gate: gg, residual: gr, out }, opts);
  assertClose(await e.read(out), { data: y, shape }, TOL, `${what}: ${JSON.stringify(c)}`);
  for (const t of [gx, gb, gr, gg, w.q, w.scales, out]) t?.free();
}

const RUNS: { what: string; opts: W8A8Options; cases: Case[] }[] = [
  { what: 'native, default tile', opts: {}, cases: [PLAIN, BATCHED, GATED] },
  { what: "native, 'w64'", opts: { tile: 'w64' }, cases: [PLAIN, GATED] },
  { what: 'emulated 8x8x16, 2x1 subgroups of 1x2 fragments, BK 32', opts: { emulate: true, tile: { sgm: 2, sgn: 1, fm: 1, fn: 2, bk: 32, pad: 16, stages: 2 } }, cases: [PLAIN, BATCHED] },
];
for (const run of RUNS) {
  test(`W8A8 GEMM (${run.what}): unaligned M, N, K tail, batch, bias + act + gate + residual`, async (t) => {
    const e = await testEngine();
    const plan = w8a8Plan(e, run.opts);
    if ('reason' in plan) { console.log(`# matmul_w8a8 (${run.what}): skipped: ${plan.reason}`); t.skip(plan.reason); return; }
    const t0 = performance.now();
    await seeded(async (rng) => { for (const c of run.cases) await check(e, rng, c, run.opts, run.what); })();
    console.log(`# matmul_w8a8 (${run.what}): ${((performance.now() - t0) / 1000).toFixed(1)} s, compile included`);
  });
}

test('W8A8 kernel text: every preset at 16x16x32 fits 48 KiB, has i8 matrices, and emulates cleanly', () => {
  for (const [name, tile] of Object.entries(W8A8_TILES) as [string, SubgroupTile][]) {
    assert.ok(pipelinedTileBytes(tile, { M: 16, N: 16 }, 1) <= 48 * 1024, `${name}: ${pipelinedTileBytes(tile, { M: 16, N: 16 }, 1)} B`);
    const { source } = w8a8Kernel({ M: 16, N: 16, K: 32 }, 32, tile, false);
    assert.deepEqual(uninitialisedInBlock(source), [], name);
    assert.match(source, /subgroupMatrixLoad<subgroup_matrix_left<i8, SM_K, SM_M>>\(&As/);
    assert.match(source, /var acc_0_0: subgroup_matrix_result<i32, SM_N, SM_M>;/);
    const em = w8a8Kernel({ M: 16, N: 16, K: 32 }, 32, tile, true).source;
    assert.doesNotMatch(em.replace(/^\s*\/\/.*$/gm, ''), /subgroupMatrix|subgroup_matrix|chromium/);
    assert.match(em, /smMmaI8\(/);
  }
  const f16 = pipelinedGemmSource({ SM_M: 16, SM_N: 16, SM_K: 16, SG: 32, tile: W8A8_TILES.w64, B_NK: true, VA: true, VB: true, BQ: true });
  const i8 = w8a8Kernel({ M: 16, N: 16, K: 32 }, 32, W8A8_TILES.w64, false).source;
  assert.throws(() => emulateSubgroupMatrix(i8 + f16.slice(f16.indexOf('fn matmul')).replace('fn matmul', 'fn other'), 'mixed.wgsl'), /mixed.wgsl: the emulation has both f16 and i8 matrices/);
  assert.throws(() => pipelinedGemmSource({ SM_M: 16, SM_N: 16, SM_K: 32, SG: 32, tile: W8A8_TILES.w64, B_NK: true, VA: false, VB: true, BQ: true, AQ: true }), /W8A8 needs int8 a and b/);
  assert.throws(() => pipelinedGemmSource({ SM_M: 16, SM_N: 16, SM_K: 32, SG: 32, tile: { ...W8A8_TILES.w64, pad: 8 }, B_NK: true, VA: true, VB: true, BQ: true, AQ: true }), /W8A8 pad 8 must be a multiple of 16/);
});

test('W8A8: refusals name what to change', async () => {
  const e = await testEngine();
  const emulate = { emulate: true as const };
  if ('reason' in w8a8Plan(e, emulate)) return;
  const w = { q: e.empty([8, 24], 'i8'), scales: e.empty([8], 'f32') };
  const x = e.empty([3, 24], 'f16');
  assert.match(w8a8Refusal(e, x, w, emulate) ?? '', /K 24 is not a multiple of 16/);
  assert.throws(() => gemmW8A8(e, 'lin', x, w, {}, emulate), /lin: W8A8 unavailable: K 24/);
  const w32 = { q: e.empty([8, 32], 'i8'), scales: e.empty([8], 'f32') };
  assert.match(w8a8Refusal(e, e.empty([3, 32], 'f32'), w32, emulate) ?? '', /is not f16/);
  assert.match(w8a8Refusal(e, e.empty([2, 3, 64], 'f16').slice(2, 0, 32), w32, emulate) ?? '', /not contiguous/);
  assert.throws(() => gemmW8A8(e, 'lin', e.empty([3, 32], 'f16'), w32, {}, { ...emulate, tile: 'w999' as never }), /W8A8 tile 'w999' unknown: one of w128, w64/);
  assert.ok(Object.keys(W8A8_TILES).length === 2);
});

test("linear path 'w8a8' (emulated, the kernel above's constants: no new compile) and KILN_W8A8=1's W8A16 fallback", seeded(async (rng) => {
  const e = await testEngine();
  const emulated: W8A8Options = RUNS[2]!.opts;
  if ('reason' in w8a8Plan(e, emulated)) return;
  const [B, M, N, K] = [2, 19, 45, 80];
  const x = randomHost(rng, [B, M, K], 'f16', -2, 2);
  const wq = quantizeInt8PerChannel(rng.uniform(N * K), N, K);
  const bias = randomHost(rng, [N], 'f16');
  const resid = randomHost(rng, [B, M, N], 'f16');
  const y = w8a8Ref(x.data, B * M, K, wq.q, wq.scales, N).map((v, i) => actRef('gelu_tanh', v + bias.data[i % N]!) + resid.data[i]!);
  const up = (h: HostTensor) => e.upload(h.data, h.shape, 'f16');
  const gx = up(x), gb = up(bias), gr = up(resid);
  const w = uploadInt8(e, wq);
  const epi = { act: 'gelu_tanh' as const, residual: gr };
  const got = linear(e, gx, w, gb, { ...epi, path: 'w8a8', w8a8: emulated });
  assertClose(await e.read(got), { data: y, shape: [B, M, N] }, TOL, "linear path 'w8a8'");
  // named but unavailable natively here: the reason; an f16 weight: refused
  const native = w8a8Plan(e);
  if ('reason' in native) assert.throws(() => linear(e, gx, w, gb, { path: 'w8a8' }), /linear: path 'w8a8' unavailable: adapter .* lacks/);
  assert.throws(() => linear(e, gx, e.empty([N, K], 'f16'), null, { path: 'w8a8' }), /path 'w8a8' needs an int8 weight/);
  // KILN_W8A8=1 where the adapter lacks i8 matrices: W8A16, the same bits as asking for it
  const held = e.settings;
  (e as { settings: typeof held }).settings = { ...held, w8a8: true };
  try {
    if ('reason' in native) {
      const a = await e.read(linear(e, gx, w, gb, epi));
      (e as { settings: typeof held }).settings = held;
      assert.deepEqual(a, await e.read(linear(e, gx, w, gb, epi)), 'KILN_W8A8=1 without the feature: W8A16, as without it');
    }
  } finally {
    (e as { settings: typeof held }).settings = held;
  }
  for (const t of [gx, gb, gr, w.q, w.scales, got]) t.free();
}));
