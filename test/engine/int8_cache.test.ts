// The int8 cache (int8-cache.ts): a second load reads the first load's quantisation back bit for bit; an entry whose
// source changed or that an older quantiser wrote is ignored and replaced; a corrupt one is deleted, never returned;
// a Hugging Face cache link is keyed by its blob; sources without an identity, and a cache that cannot be written,
// leave loads as they were.
process.env.KILN_LOAD_THREADS = '2';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, beforeEach, test } from 'node:test';
import { int8CacheDir, int8CacheKey, int8CacheStats, readInt8Entry, resetInt8CacheStats, useInt8Cache, writeInt8Entry } from '../../src/engine/int8-cache';
import { quantizeInt8PerChannel, type QuantizedInt8 } from '../../src/engine/quantize';
import { PARALLEL_MIN_ELEMENTS, parallelQuantizeCount, quantizeInt8FromCheckpoint } from '../../src/engine/quantize-parallel';
import { Checkpoint, readWholeFloat32 } from '../../src/engine/safetensors';
import { writeSafetensors } from '../../src/engine/safetensors-writer';
import { engineSettings } from '../../src/engine/settings';
import { SyntheticCheckpoint } from '../../src/models/common/synthetic-checkpoint';

const scratch = mkdtempSync(join(tmpdir(), 'kiln-int8-cache-'));
after(() => {
  useInt8Cache(undefined);
  rmSync(scratch, { recursive: true, force: true });
});

let n = 0;
let cacheRoot = '';
beforeEach(() => {
  cacheRoot = join(scratch, `cache-${++n}`);
  useInt8Cache(cacheRoot);
  resetInt8CacheStats();
});
afterEach(() => useInt8Cache(undefined));

// a big tensor (the worker pool's path) and a small one (one thread), BF16 as the real checkpoints store them
const BIG: [number, number] = [1031, Math.ceil(PARALLEL_MIN_ELEMENTS / 1031) + 3];
const SMALL: [number, number] = [48, 40];

function values(count: number, seed: number): Float32Array {
  const v = new Float32Array(count);
  let s = seed >>> 0;
  for (let i = 0; i < count; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    v[i] = ((s >>> 8) / 2 ** 24 - 0.5) * (1 + (i % 5));
  }
  return v;
}

async function writeCheckpoint(path: string, seed: number): Promise<void> {
  await writeSafetensors(path, {
    'big.weight': { dtype: 'BF16', shape: BIG, data: values(BIG[0] * BIG[1], seed) },
    'small.weight': { dtype: 'BF16', shape: SMALL, data: values(SMALL[0] * SMALL[1], seed + 1) },
  });
}

/** What the loaders get with no cache at all. */
async function fresh(ckpt: Checkpoint, name: string, [N, K]: [number, number]): Promise<QuantizedInt8> {
  return quantizeInt8PerChannel(await readWholeFloat32(ckpt, name), N, K);
}

function assertSame(got: QuantizedInt8, want: QuantizedInt8, what: string): void {
  assert.ok(Buffer.from(got.q.buffer, got.q.byteOffset, got.q.byteLength).equals(Buffer.from(want.q.buffer, want.q.byteOffset, want.q.byteLength)), `${what}: q bytes`);
  assert.ok(Buffer.from(got.scales.buffer, got.scales.byteOffset, got.scales.byteLength).equals(Buffer.from(want.scales.buffer, want.scales.byteOffset, want.scales.byteLength)), `${what}: scales bytes`);
  assert.ok(!(got.q.buffer instanceof SharedArrayBuffer), `${what}: a plain ArrayBuffer (Dawn's writeBuffer refuses shared memory)`);
}

const entries = () => readdirSync(join(cacheRoot, 'int8')).filter((f) => f.endsWith('.safetensors'));

test('the second load reads the first one\'s quantisation from the cache: bit-identical, no quantising', async () => {
  const path = join(scratch, 'a.safetensors');
  await writeCheckpoint(path, 1);
  const ckpt = await Checkpoint.open(path);
  try {
    const first = { big: await quantizeInt8FromCheckpoint(ckpt, 'big.weight', ...BIG), small: await quantizeInt8FromCheckpoint(ckpt, 'small.weight', ...SMALL) };
    assert.deepEqual(int8CacheStats(), { hits: 0, misses: 2, stale: 0, corrupt: 0, written: 2, writeErrors: 0 });
    assert.equal(entries().length, 2, 'one safetensors file per tensor');
    const pool = parallelQuantizeCount();
    const second = { big: await quantizeInt8FromCheckpoint(ckpt, 'big.weight', ...BIG), small: await quantizeInt8FromCheckpoint(ckpt, 'small.weight', ...SMALL) };
    assert.equal(parallelQuantizeCount(), pool, 'nothing quantised on the second load');
    assert.equal(int8CacheStats().hits, 2);
    const want = { big: await fresh(ckpt, 'big.weight', BIG), small: await fresh(ckpt, 'small.weight', SMALL) };
    for (const k of ['big', 'small'] as const) {
      assertSame(first[k], want[k], `${k}, first load`);
      assertSame(second[k], want[k], `${k}, from the cache`);
    }
    // the entry is a plain safetensors file: q I8 (N, K) and scales F32 (N)
    const cached = await Checkpoint.open(join(cacheRoot, 'int8', entries()[0]!));
    assert.deepEqual(cached.keys().sort(), ['q', 'scales']);
    assert.equal(cached.entry('q').dtype, 'I8');
    assert.equal(cached.entry('scales').dtype, 'F32');
    await cached.close();
  } finally {
    await ckpt.close();
  }
});

test('a source that changed (size or mtime), or an entry of another quantiser version, is ignored and replaced', async () => {
  const path = join(scratch, 'b.safetensors');
  await writeCheckpoint(path, 2);
  let ckpt = await Checkpoint.open(path);
  await quantizeInt8FromCheckpoint(ckpt, 'small.weight', ...SMALL);
  await ckpt.close();
  // new values in the same place (same size): the mtime tells
  await writeCheckpoint(path, 3);
  const t = statSync(path).mtimeMs / 1000 + 5;
  utimesSync(path, t, t);
  ckpt = await Checkpoint.open(path);
  try {
    resetInt8CacheStats();
    const got = await quantizeInt8FromCheckpoint(ckpt, 'small.weight', ...SMALL);
    assertSame(got, await fresh(ckpt, 'small.weight', SMALL), 'the changed source\'s values');
    assert.deepEqual([int8CacheStats().stale, int8CacheStats().written], [1, 1]);
    assert.equal(entries().length, 1, 'the stale entry was replaced, not joined by another');
    assertSame(await quantizeInt8FromCheckpoint(ckpt, 'small.weight', ...SMALL), got, 'then read from the cache');
    assert.equal(int8CacheStats().hits, 1);

    // an entry an older quantiser wrote (another version in its identity) is stale too
    const key = (await int8CacheKey(ckpt, 'small.weight', ...SMALL))!;
    assert.match(key.what, /^int8 v\d+ \(48, 40\) /);
    const bogus = { ...got, scales: got.scales.map((s) => s * 2) };
    await writeInt8Entry(int8CacheDir()!, { ...key, what: key.what.replace(/^int8 v\d+/, 'int8 v0') }, bogus);
    resetInt8CacheStats();
    assertSame(await quantizeInt8FromCheckpoint(ckpt, 'small.weight', ...SMALL), got, 'not the old version\'s bytes');
    assert.deepEqual([int8CacheStats().stale, int8CacheStats().written], [1, 1]);
  } finally {
    await ckpt.close();
  }
});

test('a corrupt entry (a flipped byte, a truncated file, garbage) is deleted and never loaded', async () => {
  const path = join(scratch, 'c.safetensors');
  await writeCheckpoint(path, 4);
  const ckpt = await Checkpoint.open(path);
  try {
    const want = await fresh(ckpt, 'small.weight', SMALL);
    const key = (await int8CacheKey(ckpt, 'small.weight', ...SMALL))!;
    const dir = int8CacheDir()!;
    const damage: [string, (b: Buffer) => Buffer][] = [
      ['a flipped byte in q', (b) => { b[b.length - SMALL[0] * 4 - 7]! ^= 1; return b; }],
      ['a flipped byte in scales', (b) => { b[b.length - 3]! ^= 0x40; return b; }],
      ['truncated', (b) => b.subarray(0, b.length - 100)],
      ['garbage', () => Buffer.from('not a safetensors file at all')],
    ];
    for (const [what, hurt] of damage) {
      await quantizeInt8FromCheckpoint(ckpt, 'small.weight', ...SMALL); // (re)writes the entry
      const file = join(dir, entries()[0]!);
      writeFileSync(file, hurt(readFileSync(file)));
      resetInt8CacheStats();
      assert.equal(await readInt8Entry(dir, key, ...SMALL), null, `${what}: not returned`);
      assert.equal(int8CacheStats().corrupt, 1, what);
      assert.deepEqual(entries(), [], `${what}: deleted`);
      assertSame(await quantizeInt8FromCheckpoint(ckpt, 'small.weight', ...SMALL), want, `${what}: quantised afresh`);
      assert.equal(entries().length, 1, `${what}: written again`);
    }
  } finally {
    await ckpt.close();
  }
});

test('a Hugging Face cache link is keyed by its blob: a touched or re-linked file keeps its entry', async () => {
  const blobs = join(scratch, 'hub', 'models--org--m', 'blobs');
  const snap = join(scratch, 'hub', 'models--org--m', 'snapshots', 'a'.repeat(40));
  mkdirSync(blobs, { recursive: true });
  mkdirSync(snap, { recursive: true });
  const blob = join(blobs, 'ab'.repeat(32));
  await writeCheckpoint(blob, 5);
  symlinkSync(`../../blobs/${'ab'.repeat(32)}`, join(snap, 'model.safetensors'));
  let ckpt = await Checkpoint.open(join(snap, 'model.safetensors'));
  const first = await quantizeInt8FromCheckpoint(ckpt, 'small.weight', ...SMALL);
  const key = (await int8CacheKey(ckpt, 'small.weight', ...SMALL))!;
  assert.match(key.what, new RegExp(`blob:${'ab'.repeat(32)}:`));
  await ckpt.close();
  const t = Date.now() / 1000 + 60;
  utimesSync(blob, t, t);
  ckpt = await Checkpoint.open(join(snap, 'model.safetensors'));
  resetInt8CacheStats();
  assertSame(await quantizeInt8FromCheckpoint(ckpt, 'small.weight', ...SMALL), first, 'from the cache');
  assert.equal(int8CacheStats().hits, 1, 'a touched blob is the same content');
  await ckpt.close();
});

test('not cached: sources without an identity (SyntheticCheckpoint), and everything when the cache is off', async () => {
  const synth = new SyntheticCheckpoint({ label: 'synthetic', dtype: 'F32', fill: (_, out) => void new Float32Array(out.buffer, out.byteOffset, out.byteLength / 4).fill(0.5) });
  synth.entry('w', [4, 8]);
  await quantizeInt8FromCheckpoint(synth, 'w', 4, 8);
  assert.deepEqual(int8CacheStats(), { hits: 0, misses: 0, stale: 0, corrupt: 0, written: 0, writeErrors: 0 });

  useInt8Cache(null);
  assert.equal(int8CacheDir(), null);
  const path = join(scratch, 'd.safetensors');
  await writeCheckpoint(path, 6);
  const ckpt = await Checkpoint.open(path);
  await quantizeInt8FromCheckpoint(ckpt, 'small.weight', ...SMALL);
  await ckpt.close();
  assert.equal(int8CacheStats().written, 0);

  // the environment's setting, when the process set none: KILN_CACHE_DIR (off, empty or unset: none)
  useInt8Cache(undefined);
  assert.equal(engineSettings({ KILN_CACHE_DIR: '/x/kiln' }).cacheDir, '/x/kiln');
  for (const v of ['off', 'OFF', '', undefined]) assert.equal(engineSettings({ KILN_CACHE_DIR: v }).cacheDir, undefined, String(v));
});

test('a cache that cannot be written: the load goes on (quantised), warned once', async () => {
  const locked = join(scratch, 'locked');
  writeFileSync(locked, 'a file where the cache folder should be'); // unwritable even for root
  useInt8Cache(locked);
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(w.message);
  process.on('warning', onWarning);
  try {
    const path = join(scratch, 'e.safetensors');
    await writeCheckpoint(path, 7);
    const ckpt = await Checkpoint.open(path);
    assertSame(await quantizeInt8FromCheckpoint(ckpt, 'small.weight', ...SMALL), await fresh(ckpt, 'small.weight', SMALL), 'quantised');
    await quantizeInt8FromCheckpoint(ckpt, 'small.weight', ...SMALL);
    await ckpt.close();
    await new Promise((r) => setImmediate(r));
    assert.equal(int8CacheStats().writeErrors, 2);
    assert.equal(warnings.filter((w) => /int8 cache: cannot write/.test(w)).length, 1, 'warned once');
  } finally {
    process.off('warning', onWarning);
  }
});
