// The GEMM tuning tables (src/engine/tuning.ts): which table an adapter takes, the defaults without one, a corrupt
// table costing one log line and never the engine, the committed tables valid, and gemm()'s 'auto' path following
// the table (through the emulated tensor-core kernel, so lavapipe runs it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine } from '../../src/engine/engine';
import { matmul } from '../../src/engine/ops/matmul';
import { SUBGROUP_TILES, subgroupMatrixPlan, subgroupTile } from '../../src/engine/ops/matmul_subgroup';
import { ATTENTION_TILES } from '../../src/engine/ops/attention_subgroup';
import { DEFAULT_GEMM, loadTuning, shapeClass, tuningFileName, validateTuningTable, type AdapterKey } from '../../src/engine/tuning';
import { projectRoot } from '../../src/paths';
import { matmulRef } from './reference/matmul';
import { assertClose, randomHost, seeded } from './helpers';

const VARIANTS = Object.keys(SUBGROUP_TILES);
const ATT = Object.keys(ATTENTION_TILES);
const H200: AdapterKey = { vendor: 'nvidia', architecture: 'hopper', device: '0x2335', driver: 'NVIDIA: 570.86.15' };
const table = (adapter: object, gemm: object) => JSON.stringify({ version: 1, adapter, measured: 'test', gemm });

function withDir(files: Record<string, string>, fn: (dir: string) => void | Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-tuning-'));
  for (const [n, text] of Object.entries(files)) writeFileSync(join(dir, n), text);
  return Promise.resolve(fn(dir)).finally(() => rmSync(dir, { recursive: true, force: true }));
}

test('shape classes split at 512x512 and 4096x4096 outputs; Krea 1K projections are large', () => {
  assert.deepEqual([shapeClass(511, 512), shapeClass(512, 512), shapeClass(4095, 4096), shapeClass(4096, 4096), shapeClass(4165, 6144)],
    ['small', 'medium', 'medium', 'large', 'large']);
  assert.equal(tuningFileName({ vendor: 'NVIDIA', architecture: 'Hopper (sm_90)' }), 'nvidia-hopper-sm-90.json');
});

test('no table for the adapter: the defaults, and not a log line', async () => {
  const logs: string[] = [];
  const none = loadTuning(H200, VARIANTS, join(tmpdir(), 'kiln-no-such-dir'), (l) => logs.push(l));
  assert.equal(none.table, null);
  assert.deepEqual(none.gemm(8192, 8192), DEFAULT_GEMM.large);
  await withDir({ 'amd-rdna3.json': table({ vendor: 'amd', architecture: 'rdna3' }, { large: { path: 'subgroup', variant: '64' } }) }, (dir) => {
    const t = loadTuning(H200, VARIANTS, dir, (l) => logs.push(l));
    assert.equal(t.table, null, 'another vendor\'s table is not taken');
    assert.deepEqual(t.gemm(8192, 8192), { path: 'tiled' });
    assert.match(t.source, /no table .* for nvidia\/hopper/);
  });
  assert.deepEqual(logs, []);
});

test('the most specific matching table wins; a table pinned to another driver is not taken', async () => {
  const files = {
    'a-generic.json': table({ vendor: 'NVIDIA', architecture: 'hopper' }, { large: { path: 'subgroup', variant: '64' } }),
    'b-device.json': table({ vendor: 'nvidia', architecture: 'hopper', device: '0x2335' }, { large: { path: 'subgroup', variant: '128' }, small: { path: 'tiled' } }),
    'c-other-driver.json': table({ vendor: 'nvidia', architecture: 'hopper', device: '0x2335', driver: 'NVIDIA: 535.1' }, { large: { path: 'tiled' } }),
  };
  await withDir(files, (dir) => {
    const logs: string[] = [];
    const t = loadTuning(H200, VARIANTS, dir, (l) => logs.push(l));
    assert.equal(t.source, join(dir, 'b-device.json'));
    assert.deepEqual(t.gemm(4165, 6144), { path: 'subgroup', variant: '128' });
    assert.deepEqual(t.gemm(64, 64), { path: 'tiled' });
    assert.deepEqual(t.gemm(1024, 1024), DEFAULT_GEMM.medium, 'a class the table leaves out takes the default');
    const onOther = loadTuning({ ...H200, device: '0x9999' }, VARIANTS, dir, (l) => logs.push(l));
    assert.equal(onOther.source, join(dir, 'a-generic.json'));
    const onOld = loadTuning({ ...H200, driver: 'NVIDIA: 535.1' }, VARIANTS, dir, (l) => logs.push(l));
    assert.equal(onOld.source, join(dir, 'c-other-driver.json'));
    assert.deepEqual(logs, []);
  });
});

test('a corrupt table: the defaults and one log line naming the file and why, never a throw', async () => {
  const broken: Record<string, string> = {
    'not-json.json': '{ "version": 1, "adapter": ',
    'bad-version.json': table({ vendor: 'nvidia', architecture: 'hopper' }, {}).replace('"version":1', '"version":2'),
    'bad-variant.json': table({ vendor: 'nvidia', architecture: 'hopper' }, { large: { path: 'subgroup', variant: '4096' } }),
    'bad-class.json': table({ vendor: 'nvidia', architecture: 'hopper' }, { huge: { path: 'tiled' } }),
    'bad-path.json': table({ vendor: 'nvidia', architecture: 'hopper' }, { large: { path: 'cuda' } }),
    'no-adapter.json': JSON.stringify({ version: 1, gemm: {} }),
    'array.json': '[]',
  };
  const why: Record<string, RegExp> = {
    'not-json.json': /JSON|Unexpected end/, 'bad-version.json': /version 2: only 1/, 'bad-variant.json': /variant "4096" unknown/,
    'bad-class.json': /gemm.huge: not a shape class/, 'bad-path.json': /path "cuda"/, 'no-adapter.json': /adapter is not an object/,
    'array.json': /the table is not an object/,
  };
  for (const [name, text] of Object.entries(broken)) {
    await withDir({ [name]: text }, (dir) => {
      const logs: string[] = [];
      const t = loadTuning(H200, VARIANTS, dir, (l) => logs.push(l));
      assert.equal(t.table, null, name);
      assert.deepEqual(t.gemm(8192, 8192), DEFAULT_GEMM.large, name);
      assert.equal(logs.length, 1, `${name}: one log line (${logs.join(' | ')})`);
      assert.ok(logs[0]!.includes(join(dir, name)), logs[0]);
      assert.match(logs[0]!, why[name]!, name);
    });
  }
  // a corrupt table beside a good one: the good one is used, the corrupt one logged
  await withDir({ 'x.json': '{', 'y.json': table({ vendor: 'nvidia', architecture: 'hopper' }, { large: { path: 'subgroup', variant: '64' } }) }, (dir) => {
    const logs: string[] = [];
    assert.deepEqual(loadTuning(H200, VARIANTS, dir, (l) => logs.push(l)).gemm(8192, 8192), { path: 'subgroup', variant: '64' });
    assert.equal(logs.length, 1);
  });
});

test('a table may name the generated double-buffered variants (issue 43), and the default never takes one', async () => {
  for (const v of ['db128', 'db128x64', 'db64k64', 'db64']) assert.ok(VARIANTS.includes(v), v);
  await withDir({ 'h.json': table({ vendor: 'nvidia', architecture: 'hopper' }, { large: { path: 'subgroup', variant: 'db128' } }) }, (dir) => {
    const logs: string[] = [];
    assert.deepEqual(loadTuning(H200, VARIANTS, dir, (l) => logs.push(l)).gemm(4165, 6144), { path: 'subgroup', variant: 'db128' });
    assert.deepEqual(logs, []);
  });
  // no tile named anywhere: the file kernel's largest preset that fits, never a generated one
  assert.equal(subgroupTile(undefined, { M: 16, N: 16 }, 1 << 20).stages, undefined);
  assert.deepEqual(subgroupTile(undefined, { M: 16, N: 16 }, 1 << 20), SUBGROUP_TILES['128']);
});

test('a table may name the attention kernel (issue 43): flash or a tensor-core tile; a bad entry costs the table, not the engine', async () => {
  const hopper = { vendor: 'nvidia', architecture: 'hopper' };
  const withAtt = (attention: object) => JSON.stringify({ version: 1, adapter: hopper, gemm: {}, attention });
  await withDir({ 'h.json': withAtt({ path: 'subgroup', variant: 'g16x4k32' }) }, (dir) => {
    const logs: string[] = [];
    assert.deepEqual(loadTuning(H200, VARIANTS, dir, (l) => logs.push(l), ATT).attention(), { path: 'subgroup', variant: 'g16x4k32' });
    assert.deepEqual(logs, []);
  });
  assert.deepEqual(loadTuning(H200, VARIANTS, join(tmpdir(), 'kiln-no-such-dir'), () => undefined, ATT).attention(), { path: 'flash' }, 'no table: flash');
  const bad: [object, RegExp][] = [
    [{ path: 'subgroup', variant: 'g99' }, /attention: variant "g99" unknown \(one of 2x32, 1x32, g16x4k32/],
    [{ path: 'flash', variant: '2x32' }, /attention: a variant is for path 'subgroup' only/],
    [{ path: 'cuda' }, /attention: path "cuda": 'flash' or 'subgroup'/],
  ];
  for (const [entry, why] of bad) {
    await withDir({ 'h.json': withAtt(entry) }, (dir) => {
      const logs: string[] = [];
      const t = loadTuning(H200, VARIANTS, dir, (l) => logs.push(l), ATT);
      assert.equal(t.table, null);
      assert.deepEqual(t.attention(), { path: 'flash' });
      assert.equal(logs.length, 1);
      assert.match(logs[0]!, why);
    });
  }
});

test('every committed table in tuning/ validates', () => {
  const dir = join(projectRoot(), 'tuning');
  for (const n of readdirSync(dir).filter((f) => f.endsWith('.json'))) {
    const t = validateTuningTable(JSON.parse(readFileSync(join(dir, n), 'utf8')), VARIANTS, ATT);
    assert.equal(n, tuningFileName(t.adapter), `${n}: named by its adapter`);
  }
});

test('gemm() auto follows the adapter\'s table per shape class (emulated tensor-core kernel), KILN_SUBGROUP_MATRIX=0 overrides it', seeded(async (rng) => {
  const keep = process.env.KILN_SUBGROUP_MATRIX;
  const dir = mkdtempSync(join(tmpdir(), 'kiln-tuning-'));
  const engines: Engine[] = [];
  const create = async (env: string | undefined): Promise<Engine> => {
    if (env === undefined) delete process.env.KILN_SUBGROUP_MATRIX; else process.env.KILN_SUBGROUP_MATRIX = env;
    const e = await Engine.create({ allowSoftware: true, debug: true, tuningDir: dir });
    engines.push(e);
    return e;
  };
  try {
    // the table names this adapter, and a corrupt file beside it costs a log line only
    const probe = await Engine.create({ allowSoftware: true });
    const info = probe.gpu.adapter.info;
    const emulated = subgroupMatrixPlan(probe, { emulate: true });
    await probe.shutdown();
    if (!('config' in emulated)) {
      console.log(`# tuning: auto-path check skipped: ${emulated.reason}`);
      return;
    }
    const here = { vendor: info.vendor, architecture: info.architecture };
    writeFileSync(join(dir, tuningFileName(here)), table(here, { small: { path: 'subgroup', variant: '64' } }));
    writeFileSync(join(dir, 'zzz-corrupt.json'), 'nope');
    const byTable = await create(undefined);
    const off = await create('0');
    assert.equal(byTable.tuning.source, join(dir, tuningFileName(here)));
    const run = async (e: Engine, M: number, N: number): Promise<string> => {
      const K = 40;
      const a = randomHost(rng, [M, K], 'f16');
      const b = randomHost(rng, [K, N], 'f16');
      const [ga, gb] = [e.upload(a.data, a.shape, 'f16'), e.upload(b.data, b.shape, 'f16')];
      const out = matmul(e, ga, gb, { subgroup: { emulate: true } });
      const kernel = e.recorder.recent.at(-1)!;
      assertClose(await e.read(out), matmulRef(a, b), { atol: 1e-2, rtol: 1e-2 }, `${kernel} ${M}x${K}x${N}`);
      for (const t of [ga, gb, out]) t.free();
      return kernel;
    };
    assert.match(await run(byTable, 70, 33), /^matmul_subgroup_emulated_.*SGM1_SGN1_FM4_FN4_BK32_PAD0/, 'small class: the table\'s variant 64');
    assert.match(await run(off, 70, 33), /^matmul\b(?!_subgroup)/, 'KILN_SUBGROUP_MATRIX=0: the tiled kernel');
    assert.match(await run(byTable, 520, 520), /^matmul\b(?!_subgroup)/, 'medium class, not in the table: the default, tiled');
  } finally {
    for (const e of engines) await e.shutdown();
    if (keep === undefined) delete process.env.KILN_SUBGROUP_MATRIX; else process.env.KILN_SUBGROUP_MATRIX = keep;
    rmSync(dir, { recursive: true, force: true });
  }
}));
