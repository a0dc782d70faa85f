// The engine's KILN_* switches (src/engine/settings.ts): what each value means, and that an engine takes them when it
// is created. Pure parsing and a shape-only H200 engine: no device needed.
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { test } from 'node:test';
import { Engine } from '../../src/engine/engine';
import { matmul } from '../../src/engine/ops/matmul';
import { engineSettings } from '../../src/engine/settings';

test('engineSettings: the defaults, and what each variable turns', () => {
  assert.deepEqual(engineSettings({}), {
    subgroupMatrix: false, subgroupMatrixOff: false, subgroupTile: undefined, w8a8: false, subgroupAttention: true, subgroupAttentionTile: undefined, loadThreads: Math.min(availableParallelism(), 16),
    allowSoftwareGpu: undefined, debug: false, profile: false, cacheDir: undefined, dawnToggles: undefined,
  });
  const all = engineSettings({
    KILN_SUBGROUP_MATRIX: '1', KILN_SUBGROUP_TILE: '64', KILN_W8A8: '1', KILN_SUBGROUP_ATTENTION: '0', KILN_SUBGROUP_ATTENTION_TILE: 'g16x4k32', KILN_LOAD_THREADS: '3',
    KILN_ALLOW_SOFTWARE_GPU: 'Yes', KILN_ENGINE_DEBUG: '1', KILN_PROFILE: '1', KILN_CACHE_DIR: '/var/cache/kiln', KILN_DAWN_TOGGLES: 'Fast',
  });
  assert.deepEqual(all, { subgroupMatrix: true, subgroupMatrixOff: false, subgroupTile: '64', w8a8: true, subgroupAttention: false, subgroupAttentionTile: 'g16x4k32', loadThreads: 3, allowSoftwareGpu: true, debug: true, profile: true, cacheDir: '/var/cache/kiln', dawnToggles: 'fast' });
  // Only '1' turns a switch on, only '0' turns the tensor-core attention off; software: 1/true/yes, else refused.
  const other = engineSettings({ KILN_SUBGROUP_MATRIX: 'true', KILN_SUBGROUP_ATTENTION: 'no', KILN_ALLOW_SOFTWARE_GPU: '0', KILN_ENGINE_DEBUG: 'yes', KILN_PROFILE: 'true', KILN_LOAD_THREADS: '' });
  assert.deepEqual([other.subgroupMatrix, other.subgroupAttention, other.allowSoftwareGpu, other.debug, other.profile], [false, true, false, false, false]);
  assert.deepEqual([engineSettings({ KILN_SUBGROUP_MATRIX: '0' }).subgroupMatrixOff, engineSettings({ KILN_SUBGROUP_MATRIX: '0' }).subgroupMatrix], [true, false]);
  assert.equal(engineSettings({ KILN_ALLOW_SOFTWARE_GPU: '' }).allowSoftwareGpu, undefined, 'empty is unset: the device-node rule decides');
  assert.equal(engineSettings({ KILN_LOAD_THREADS: '64' }).loadThreads, 16);
  assert.throws(() => engineSettings({ KILN_LOAD_THREADS: '2.5' }), /KILN_LOAD_THREADS=2.5: must be a whole number >= 1/);
});

test('an engine takes the environment when it is created: a later change reaches the next engine only', async () => {
  const keep = { m: process.env.KILN_SUBGROUP_MATRIX, t: process.env.KILN_SUBGROUP_TILE };
  const restore = (name: string, v: string | undefined) => (v === undefined ? delete process.env[name] : (process.env[name] = v));
  let first: Engine | undefined;
  let second: Engine | undefined;
  try {
    process.env.KILN_SUBGROUP_MATRIX = '1';
    process.env.KILN_SUBGROUP_TILE = 'nope';
    first = await Engine.create({ allowSoftware: true });
    delete process.env.KILN_SUBGROUP_MATRIX;
    delete process.env.KILN_SUBGROUP_TILE;
    // the second a shape-only engine: it reads the settings as Engine.create does, and a second real device in
    // one process made its teardown SIGSEGV on lavapipe (the known abort, docs/engine.md) once the engine's module
    // graph grew (2026-12-07: every run with engine.ts importing more)
    second = Engine.createShapeOnly('h200');
    assert.deepEqual([first.settings.subgroupMatrix, first.settings.subgroupTile], [true, 'nope']);
    assert.deepEqual([second.settings.subgroupMatrix, second.settings.subgroupTile], [false, undefined]);
    // The GEMM takes its tile from the engine's settings, not from the environment as it is now. (Emulated, so any
    // adapter with subgroups runs the path; the tile is refused before a kernel is built.)
    const a = first.empty([32, 32], 'f16');
    const b = first.empty([32, 32], 'f16');
    assert.throws(() => matmul(first!, a, b, { path: 'subgroup', subgroup: { emulate: true } }), /subgroup-matrix tile 'nope' unknown \(KILN_SUBGROUP_TILE\?\)/);
    a.free();
    b.free();
  } finally {
    await first?.shutdown(); // synced first: destroying with Dawn callbacks owed can crash lavapipe at exit (docs/engine.md)
    second?.destroy();
    restore('KILN_SUBGROUP_MATRIX', keep.m);
    restore('KILN_SUBGROUP_TILE', keep.t);
  }
});
