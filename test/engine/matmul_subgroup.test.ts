// The subgroup-matrix (tensor-core) GEMM path vs the float64 reference. Two ways to run the same kernel:
//  - emulated (ops/subgroup_matrix_emulation.ts for the matrix builtins): on any adapter with subgroups,
//    lavapipe in CI included, so the tiling, the staging (vector and scalar, both B layouts) and the epilogue are
//    checked everywhere;
//  - native: where the adapter has chromium-experimental-subgroup-matrix; elsewhere it skips, printing why.
// Each runs every preset tile and a 2x2-subgroup tile small enough for lavapipe's 32 KiB of workgroup memory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { linear } from '../../src/engine/ops/linear';
import { matmul } from '../../src/engine/ops/matmul';
import { emulateSubgroupMatrix } from '../../src/engine/ops/subgroup_matrix_emulation';
import { pipelinedGemmSource } from '../../src/engine/ops/matmul_subgroup_gen';
import { uninitialisedInBlock } from '../../src/engine/kernels';
import {
  subgroupMatrixPlan, subgroupTileBytes, SUBGROUP_TILES, withTileConstants, type SubgroupTile,
} from '../../src/engine/ops/matmul_subgroup';
import type { Engine } from '../../src/engine/engine';
import { quantizeInt8PerChannel, uploadInt8 } from '../../src/engine/quantize';
import { roundToDType } from '../../src/engine/dtype';
import { linearRef, matmulRef } from './reference/matmul';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type Rng } from './helpers';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/paths';

// f16 products are exact in the f32 accumulator; the output is rounded to f16 once (2^-11 relative), and the sums
// of up to 130 products of values in [-1, 1] differ from float64 only in f32 rounding: 1e-2 covers both. An int8
// weight (|q| <= 127) is exact in f16, so its products are exact too and its outputs are of the same size.
const TOL = { atol: 1e-2, rtol: 1e-2 };

const TILES: Record<string, SubgroupTile> = { ...SUBGROUP_TILES, '2x2 small': { sgm: 2, sgn: 2, fm: 2, fn: 1, bk: 16, pad: 8 },
  '128 unpadded': { ...SUBGROUP_TILES['128'], pad: 0 },   // the default's geometry in lavapipe's 32 KiB
  // the generated double-buffered kernel (ops/matmul_subgroup_gen.ts) at sizes lavapipe's 32 KiB holds: 2x2
  // subgroups of one fragment, BK 32 (K 33..136 crosses 2..5 slices, both stages, a partial last slice); and 1x2
  // subgroups of 2x1 fragments, BK 16 (more slices per case, fm > 1). Its presets ('db128' ...) run natively.
  'db 2x2 small': { sgm: 2, sgn: 2, fm: 1, fn: 1, bk: 32, pad: 8, stages: 2 },
  'db 1x2 bk16': { sgm: 1, sgn: 2, fm: 2, fn: 1, bk: 16, pad: 8, stages: 2 },
};

/** Every tile the adapter's workgroup memory holds (names the rest, so a skip is visible). */
function tilesFor(e: Engine, emulate: boolean): [string, SubgroupTile][] {
  const plan = subgroupMatrixPlan(e, { emulate });
  if (!('config' in plan)) return [];
  const limit = e.describe().limits.maxComputeWorkgroupStorageSize;
  return Object.entries(TILES).filter(([name, t]) => {
    const fits = subgroupTileBytes(t, plan.config) <= limit;
    if (!fits) console.log(`# matmul_subgroup: tile ${name} needs ${subgroupTileBytes(t, plan.config)} B > ${limit}: not run here`);
    // a generated preset differs from the small generated tiles below only in constants, and each emulated case
    // is a cold compile of a minute or more on lavapipe: emulated, the small tiles stand for it
    const generatedPreset = emulate && t.stages !== undefined && name in SUBGROUP_TILES;
    if (fits && generatedPreset) console.log(`# matmul_subgroup: tile ${name} (generated) runs natively only; emulated, the 'db' small tiles cover it`);
    return fits && !generatedPreset && t.bk % plan.config.K === 0;
  });
}

async function checkTile(e: Engine, rng: Rng, tile: SubgroupTile, emulate: boolean, what: string): Promise<void> {
  const subgroup = { tile, emulate };
  // odd sizes cross every tile edge; 'transposed' A and 'sliced' B take the scalar staging, a plain B the (k, n)
  // row staging with vector reads; linear() (a weight's transpose view) the (n, k) staging with vector reads.
  // A big tile's emulation is slow on lavapipe (each lane holds all fm*fn fragments: 4096 f32 for 4x4), so there
  // one case of each staging crosses the tile's edges.
  const all = [[1, 1, 1, 'transposed', 'sliced'], [7, 13, 33, 'transposed', 'sliced'], [65, 40, 63, 'contiguous', 'sliced'],
    [70, 48, 136, 'contiguous', 'contiguous'], [128, 96, 130, 'transposed', 'contiguous']] as const;
  const big = emulate && tile.fm * tile.fn > 8;
  const cases = big ? [all[2], all[3]] : all;
  for (const [M, K, N, la, lb] of cases) {
    const a = randomHost(rng, [2, M, K], 'f16');
    const b = randomHost(rng, [K, N], 'f16');
    const ga = uploadAs(e, a, 'f16', la);
    const gb = uploadAs(e, b, 'f16', lb);
    const out = poisoned(e, [2, M, N], 'f16');
    matmul(e, ga.view, gb.view, { out, path: 'subgroup', subgroup });
    assertClose(await e.read(out), matmulRef(a, b), TOL, `${what} matmul ${M}x${K}x${N} (${la} a, ${lb} b)`);
    for (const x of [ga.base, gb.base, out]) x.free();
  }
  for (const [T, K, N] of big ? [[67, 40, 72]] as const : [[33, 64, 50], [67, 40, 72]] as const) {
    const x = randomHost(rng, [3, T, K], 'f16');
    const w = randomHost(rng, [N, K], 'f16');
    const bias = randomHost(rng, [N], 'f16');
    const r = randomHost(rng, [3, T, N], 'f16');
    const gate = randomHost(rng, [3, 1, N], 'f16');
    const [gx, gw, gbias, gr, gg] = [x, w, bias, r, gate].map((h) => e.upload(h.data, h.shape, 'f16'));
    const out = linear(e, gx!, gw!, gbias, { act: 'gelu_tanh', gate: gg, residual: gr, path: 'subgroup', subgroup });
    const want = linearRef(x, w, { bias, act: 'gelu_tanh', gate, residual: r });
    assertClose(await e.read(out), want, TOL, `${what} linear ${T}x${K}x${N} (gelu, gate, residual)`);
    for (const y of [gx, gw, gbias, gr, gg, out]) y!.free();
  }
  // Not on an emulated big tile: its int8 variants' cold compile on lavapipe cost CI over a minute, and their
  // staging loops differ from the small tile's only in constants (the native run takes every tile).
  if (!big) await checkInt8(e, rng, subgroup, what);
}

/** int8 weights: K a multiple of 16 takes the 16-byte staging, K = 40 the byte-at-a-time one; f16 and f32 scales. */
async function checkInt8(e: Engine, rng: Rng, subgroup: { tile: SubgroupTile; emulate: boolean }, what: string): Promise<void> {
  for (const [T, K, N, sd] of [[33, 64, 50, 'f16'], [67, 40, 72, 'f32']] as const) {
    const x = randomHost(rng, [2, T, K], 'f16');
    const wq = quantizeInt8PerChannel(Float32Array.from(rng.normal(N * K, 0.2)), N, K);
    const sc = roundToDType(wq.scales, sd);
    const wDeq = { data: Float64Array.from(wq.q, (v, i) => v * sc[Math.floor(i / K)]!), shape: [N, K] };
    const bias = randomHost(rng, [N], 'f16');
    const gx = e.upload(x.data, x.shape, 'f16');
    const gw = uploadInt8(e, wq, sd);
    const gbias = e.upload(bias.data, bias.shape, 'f16');
    const out = linear(e, gx, gw, gbias, { act: 'gelu_tanh', path: 'subgroup', subgroup });
    assertClose(await e.read(out), linearRef(x, wDeq, { bias, act: 'gelu_tanh' }), TOL, `${what} int8 linear ${T}x${K}x${N} (scales ${sd}, bias, gelu)`);
    for (const y of [gx, gw.q, gw.scales, gbias, out]) y.free();
  }
  { // an int8 b as (k, n) rows (matmul, not a weight's transpose view): the (k, n) staging, 16 bytes a read
    const [M, K, N] = [37, 24, 48];
    const a = randomHost(rng, [M, K], 'f16');
    const q = Int8Array.from(rng.normal(K * N, 40), (v) => Math.max(-127, Math.min(127, Math.round(v))));
    const scales = roundToDType(Float32Array.from(rng.normal(N, 0.01)), 'f16');
    const bDeq = { data: Float64Array.from(q, (v, i) => v * scales[i % N]!), shape: [K, N] };
    const ga = e.upload(a.data, a.shape, 'f16');
    const gq = e.upload(q, [K, N], 'i8');
    const gs = e.upload(scales, [N], 'f16');
    const out = matmul(e, ga, gq, { scales: gs, path: 'subgroup', subgroup });
    assertClose(await e.read(out), matmulRef(a, bDeq), TOL, `${what} int8 matmul ${M}x${K}x${N} ((k, n) b)`);
    for (const y of [ga, gq, gs, out]) y.free();
  }
}

// The generated kernel's emulated cases: every staging once over its two small tiles rather than every case on each
// (each case is a cold compile of its own on lavapipe, about a minute on the loaded 2-core box; the native run
// takes checkTile's full list on every tile). K crosses 2..5 slices (odd and even counts, a partial last slice).
type GenCase = { mm: [number, number, number, 'contiguous' | 'transposed', 'contiguous' | 'sliced'] } | { lin: [number, number, number] } | { int8: [number, number, number] };
const GENERATED_EMULATED: Record<string, GenCase[]> = {
  // A vector, B (k, n) scalar; linear: B (n, k) vector with the fused gelu, gate and residual
  'db 2x2 small': [{ mm: [65, 40, 63, 'contiguous', 'sliced'] }, { lin: [67, 40, 72] }],
  // A scalar, B (k, n) vector, 5 slices of 16; int8 weights as 16-byte reads staged as f16, f16 scales, bias
  'db 1x2 bk16': [{ mm: [37, 72, 48, 'transposed', 'contiguous'] }, { int8: [33, 64, 50] }],
};

function checkGenerated(cases: GenCase[]) {
  return async (e: Engine, rng: Rng, tile: SubgroupTile, emulate: boolean, what: string): Promise<void> => {
    const subgroup = { tile, emulate };
    for (const c of cases) {
      if ('mm' in c) {
        const [M, K, N, la, lb] = c.mm;
        const a = randomHost(rng, [2, M, K], 'f16');
        const b = randomHost(rng, [K, N], 'f16');
        const ga = uploadAs(e, a, 'f16', la);
        const gb = uploadAs(e, b, 'f16', lb);
        const out = poisoned(e, [2, M, N], 'f16');
        matmul(e, ga.view, gb.view, { out, path: 'subgroup', subgroup });
        assertClose(await e.read(out), matmulRef(a, b), TOL, `${what} matmul ${M}x${K}x${N} (${la} a, ${lb} b)`);
        for (const x of [ga.base, gb.base, out]) x.free();
      } else if ('lin' in c) {
        const [T, K, N] = c.lin;
        const x = randomHost(rng, [3, T, K], 'f16');
        const w = randomHost(rng, [N, K], 'f16');
        const bias = randomHost(rng, [N], 'f16');
        const r = randomHost(rng, [3, T, N], 'f16');
        const gate = randomHost(rng, [3, 1, N], 'f16');
        const [gx, gw, gbias, gr, gg] = [x, w, bias, r, gate].map((h) => e.upload(h.data, h.shape, 'f16'));
        const out = linear(e, gx!, gw!, gbias, { act: 'gelu_tanh', gate: gg, residual: gr, path: 'subgroup', subgroup });
        assertClose(await e.read(out), linearRef(x, w, { bias, act: 'gelu_tanh', gate, residual: r }), TOL, `${what} linear ${T}x${K}x${N} (gelu, gate, residual)`);
        for (const y of [gx, gw, gbias, gr, gg, out]) y!.free();
      } else {
        const [T, K, N] = c.int8;
        const x = randomHost(rng, [2, T, K], 'f16');
        const wq = quantizeInt8PerChannel(Float32Array.from(rng.normal(N * K, 0.2)), N, K);
        const sc = roundToDType(wq.scales, 'f16');
        const wDeq = { data: Float64Array.from(wq.q, (v, i) => v * sc[Math.floor(i / K)]!), shape: [N, K] };
        const bias = randomHost(rng, [N], 'f16');
        const gx = e.upload(x.data, x.shape, 'f16');
        const gw = uploadInt8(e, wq, 'f16');
        const gbias = e.upload(bias.data, bias.shape, 'f16');
        const out = linear(e, gx, gw, gbias, { act: 'gelu_tanh', path: 'subgroup', subgroup });
        assertClose(await e.read(out), linearRef(x, wDeq, { bias, act: 'gelu_tanh' }), TOL, `${what} int8 linear ${T}x${K}x${N} (scales f16, bias, gelu)`);
        for (const y of [gx, gw.q, gw.scales, gbias, out]) y.free();
      }
    }
  };
}

for (const emulate of [true, false]) {
  const how = emulate ? 'emulated builtins' : 'native builtins';
  test(`matmul subgroup-matrix f16 (${how}): every tile, odd sizes, strided operands, fused epilogue, int8 weights`, async (t) => {
    const e = await testEngine();
    const plan = subgroupMatrixPlan(e, { emulate });
    if (!('config' in plan)) {
      console.log(`# matmul_subgroup (${how}): skipped: ${plan.reason}`);
      t.skip(plan.reason);
      return;
    }
    const tiles = tilesFor(e, emulate);
    assert.ok(tiles.length > 0, 'no tile fits this adapter');
    // a subtest per tile, so a GPU run's log says which tile failed (scripts/gpu-run.sh reads it)
    for (const [name, tile] of tiles) {
      const check = emulate && GENERATED_EMULATED[name] ? checkGenerated(GENERATED_EMULATED[name]) : checkTile;
      await t.test(`${how}, tile ${name}`, seeded((rng) => check(e, rng, tile, emulate, `${how}, tile ${name}`)));
    }
  });
}

test('the emulation swaps every matrix builtin, and the tile constants are all set', () => {
  const src = readFileSync(join(projectRoot(), 'shaders', 'matmul_subgroup.wgsl'), 'utf8');
  const set = withTileConstants(src, { SGM: 3, B_NK: false });
  assert.match(set, /^const SGM: u32 = 3u;\s*\/\/ tile$/m);
  assert.match(set, /^const B_NK: bool = false;\s*\/\/ tile$/m);
  assert.throws(() => withTileConstants(src, { NOPE: 1 }), /no `const NOPE/);
  const em = emulateSubgroupMatrix(src, 'matmul_subgroup.wgsl');
  assert.doesNotMatch(em.replace(/^\s*\/\/.*$/gm, ''), /subgroupMatrix|subgroup_matrix|chromium/);
  assert.match(em, /\/\/#include "common\/subgroup_matrix_emulated.wgsl"/);
  assert.match(em, /^fn sm_load_As_SmLeft\(/m);
  assert.match(em, /^fn sm_load_Bs_SmRight\(/m);
  assert.match(em, /^fn sm_store_Cs\(/m);
  assert.throws(() => emulateSubgroupMatrix(src.replace('subgroupMatrixMultiplyAccumulate(', 'subgroupMatrixMultiply('), 'm.wgsl'), /m.wgsl: the emulation (expects|has no stand-in)/);
  assert.throws(() => emulateSubgroupMatrix(src.replace('subgroup_matrix_left<f16, SM_K, SM_M>>(&As', 'subgroup_matrix_left<f32, SM_K, SM_M>>(&As'), 'm.wgsl'), /no stand-in for a load of subgroup_matrix_left<f32/);
});

test('the generated double-buffered kernel: every preset and operand layout emulates cleanly and fits 48 KiB', () => {
  for (const [name, tile] of Object.entries(SUBGROUP_TILES) as [string, SubgroupTile][]) {
    if (!tile.stages) continue;
    assert.ok(subgroupTileBytes(tile, { M: 16, N: 16 }) <= 48 * 1024, `${name}: ${subgroupTileBytes(tile, { M: 16, N: 16 })} B`);
    for (const flags of [0, 1, 2, 3, 4, 5, 6, 7, 8, 15]) {
      const [B_NK, VA, VB, BQ] = [1, 2, 4, 8].map((bit) => (flags & bit) !== 0) as [boolean, boolean, boolean, boolean];
      const src = pipelinedGemmSource({ SM_M: 16, SM_N: 16, SM_K: 16, SG: 32, tile, B_NK, VA, VB, BQ });
      assert.deepEqual(uninitialisedInBlock(src), [], `${name} flags ${flags}`);
      assert.doesNotMatch(src, /acc\[|array<subgroup_matrix/, 'named accumulators, no fragment arrays');
      assert.equal(src.match(/workgroupBarrier\(\);/g)!.length, 2 + 2 * tile.fm * tile.fn, 'one barrier in the K loop, one after the prologue');
      const em = emulateSubgroupMatrix(src, `${name}.wgsl`);
      assert.doesNotMatch(em.replace(/^\s*\/\/.*$/gm, ''), /subgroupMatrix|subgroup_matrix|chromium/);
    }
  }
  assert.throws(() => pipelinedGemmSource({ SM_M: 16, SM_N: 16, SM_K: 16, SG: 32, tile: { ...SUBGROUP_TILES.db128, stages: 3 }, B_NK: true, VA: true, VB: true, BQ: false }), /only 2/);
});
