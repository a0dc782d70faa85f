// Load-time int8 quantisation on the worker pool (quantize-parallel.ts) gives the one-thread bytes exactly, for every
// stored dtype it takes, and fails on the same row with the same message.
process.env.KILN_LOAD_THREADS = '3'; // before the pool exists: 3 threads, 12 row blocks, on any machine
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { quantizeInt8PerChannel } from '../../src/engine/quantize';
import { loadThreads, parallelQuantizeCount, PARALLEL_MIN_ELEMENTS, quantizeInt8FromCheckpoint } from '../../src/engine/quantize-parallel';
import { readWholeFloat32, type SafeDType } from '../../src/engine/safetensors';
import { WeightSynth } from '../../src/models/common/random-weights';
import { SyntheticCheckpoint } from '../../src/models/common/synthetic-checkpoint';
import { seeded } from './helpers';

// just over the pool's threshold, with N and K that no block size divides
const N = 1027;
const K = Math.ceil(PARALLEL_MIN_ELEMENTS / N) + 2;

for (const dtype of ['F32', 'F16', 'BF16'] as SafeDType[]) {
  test(`int8 quantisation on the pool, ${dtype}: the same q and scales as one thread`, seeded(async (rng) => {
    const synth = new WeightSynth(1 + Math.floor(rng.uniform(1, 0, 1e6)[0]!));
    const ckpt = new SyntheticCheckpoint({ label: `random ${dtype}`, dtype, fill: synth.fill });
    ckpt.entry('w.weight', [N, K]);
    const before = parallelQuantizeCount();
    const got = await quantizeInt8FromCheckpoint(ckpt, 'w.weight', N, K);
    assert.equal(parallelQuantizeCount(), before + 1, 'took the worker pool');
    const want = quantizeInt8PerChannel(await readWholeFloat32(ckpt, 'w.weight'), N, K);
    assert.deepEqual(got.scales, want.scales);
    assert.ok(Buffer.from(got.q.buffer, got.q.byteOffset, got.q.byteLength).equals(Buffer.from(want.q.buffer)), 'q bytes');
    assert.ok(!(got.q.buffer instanceof SharedArrayBuffer), 'plain ArrayBuffer out (uploads and host copies take it)');
  }));
}

test('int8 quantisation on the pool: a non-finite weight fails on the first such row, as one thread does', async () => {
  const bad = new Set([700 * K + 5, 900 * K]); // rows 700 and 900
  const fill = (_: unknown, out: Uint8Array, first: number) => {
    const f = new Float32Array(out.buffer, out.byteOffset, out.byteLength / 4);
    for (let i = 0; i < f.length; i++) f[i] = bad.has(first + i) ? (first + i === 900 * K ? Infinity : NaN) : ((first + i) % 7) - 3;
  };
  const ckpt = new SyntheticCheckpoint({ label: 'nan', dtype: 'F32', fill });
  ckpt.entry('w.weight', [N, K]);
  await assert.rejects(quantizeInt8FromCheckpoint(ckpt, 'w.weight', N, K), /^RangeError: quantizeInt8PerChannel: row 700 has a non-finite weight$/);
  assert.throws(() => quantizeInt8PerChannel(Float32Array.from({ length: N * K }, (_, i) => (bad.has(i) ? NaN : 1)), N, K), /row 700 has a non-finite weight/);
});

test('KILN_LOAD_THREADS: a whole number >= 1, at most 16 used', () => {
  const keep = process.env.KILN_LOAD_THREADS;
  try {
    process.env.KILN_LOAD_THREADS = '64';
    assert.equal(loadThreads(), 16);
    for (const v of ['0', '1.5', 'two']) {
      process.env.KILN_LOAD_THREADS = v;
      assert.throws(() => loadThreads(), new RegExp(`KILN_LOAD_THREADS=${v}: must be a whole number >= 1`));
    }
  } finally {
    process.env.KILN_LOAD_THREADS = keep;
  }
});
