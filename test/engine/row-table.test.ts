// RowTable: an embedding table on the GPU (gather) or read row by row from the checkpoint file (host path). Both
// must hand out exactly the rows a plain CPU reference decodes from the file, for every checkpoint dtype and
// compute dtype; a table over maxBindingBytes must go to the host by itself; lookups after warm-up create no GPU
// buffer; bad ids are refused.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bf16BitsToF32, f32ToBf16Bits, f16BitsToF32, f32ToF16Bits } from '../../src/engine/dtype';
import { RowTable } from '../../src/engine/row-table';
import { Checkpoint, CheckpointError, type SafeDType } from '../../src/engine/safetensors';
import { writeSafetensors } from '../../src/engine/safetensors-writer';
import { assertClose, seeded, testEngine } from './helpers';

const dir = mkdtempSync(join(tmpdir(), 'kiln-rowtable-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const EXACT = { atol: 0, rtol: 0 };
const V = 37;
const D = 13; // odd: f16 rows end off a 4-byte boundary

/** What the file holds for value x (float64 reference of each storage format, round to nearest). */
function storeAs(x: number, d: SafeDType | 'f32' | 'f16'): number {
  if (d === 'F32' || d === 'f32') return Math.fround(x);
  if (d === 'F16' || d === 'f16') return f16BitsToF32(f32ToF16Bits(x));
  return bf16BitsToF32(f32ToBf16Bits(x));
}

/** Reference rows: table[ids] as float64 after the file's rounding and then the compute dtype's. */
function referenceRows(values: Float64Array, ids: number[], file: SafeDType, dtype: 'f32' | 'f16', dim: number): Float64Array {
  const out = new Float64Array(ids.length * dim);
  ids.forEach((id, i) => {
    for (let c = 0; c < dim; c++) out[i * dim + c] = storeAs(storeAs(values[id * dim + c]!, file), dtype);
  });
  return out;
}

for (const file of ['F32', 'F16', 'BF16'] as const) {
  for (const dtype of ['f32', 'f16'] as const) {
    test(`host path = GPU path = CPU reference: ${file} file, ${dtype} rows`, seeded(async (rng) => {
      const e = await testEngine();
      const values = rng.uniform(V * D, -3, 3);
      const path = join(dir, `t-${file}-${dtype}.safetensors`);
      await writeSafetensors(path, { other: { dtype: 'F32', shape: [3], data: [1, 2, 3] }, 'embed.weight': { dtype: file, shape: [V, D], data: values } });
      const ck = await Checkpoint.open(path);
      const gpu = await RowTable.load(e, ck, 'embed.weight', { dtype, shape: [V, D] });
      const host = await RowTable.load(e, ck, 'embed.weight', { dtype, shape: [V, D], placement: 'host' });
      await ck.close(); // the host table keeps its own descriptor
      try {
        assert.equal(gpu.placement, 'gpu');
        assert.equal(host.placement, 'host');
        const ids = [0, V - 1, 5, 5, rng.int(0, V - 1), 17];
        const want = { data: referenceRows(values, ids, file, dtype, D), shape: [2, 3, D] };
        const a = gpu.lookup(ids, [2, 3]);
        const b = host.lookup(ids, [2, 3]);
        assert.deepEqual(a.shape, [2, 3, D]);
        assert.deepEqual(b.shape, [2, 3, D]);
        assert.equal(b.dtype, dtype);
        const [ga, hb] = [await e.read(a), await e.read(b)];
        assertClose(ga, want, EXACT, 'gpu path');
        assertClose(hb, want, EXACT, 'host path');
        a.free();
        b.free();
        // a single row, default shape
        const one = host.lookup([rng.int(0, V - 1)]);
        assert.deepEqual(one.shape, [1, D]);
        one.free();
      } finally {
        gpu.free();
        host.free();
      }
    }));
  }
}

test('no GPU buffer is created per lookup after warm-up (both paths)', seeded(async (rng) => {
  const e = await testEngine();
  const values = rng.uniform(V * D);
  const path = join(dir, 'frozen.safetensors');
  await writeSafetensors(path, { w: { dtype: 'BF16', shape: [V, D], data: values } });
  const ck = await Checkpoint.open(path);
  const tables = [await RowTable.load(e, ck, 'w', { dtype: 'f16' }), await RowTable.load(e, ck, 'w', { dtype: 'f16', placement: 'host' })];
  await ck.close();
  try {
    for (const t of tables) {
      t.lookup([1, 2, 3, 4, 5]).free(); // warm-up: the pool gets its buffers
      e.pool.frozen = true;
      try {
        for (let step = 0; step < 4; step++) {
          const ids = Array.from({ length: 5 }, () => rng.int(0, V - 1));
          const x = t.lookup(ids);
          assertClose(await e.read(x), { data: referenceRows(values, ids, 'BF16', 'f16', D), shape: [5, D] }, EXACT, `${t.placement} step ${step}`);
          x.free();
        }
      } finally {
        e.pool.frozen = false;
      }
    }
  } finally {
    for (const t of tables) t.free();
  }
}));

test('bad ids, shapes and dtypes are refused with clear messages', async () => {
  const e = await testEngine();
  const path = join(dir, 'bad.safetensors');
  await writeSafetensors(path, {
    w: { dtype: 'F16', shape: [V, D], data: new Float64Array(V * D) },
    big: { dtype: 'BF16', shape: [2, 4], data: [1, 2, 3, 4, 1e5, 6, 7, 8] },
    q: { dtype: 'I8', shape: [2, 4], data: [1, 2, 3, 4, 5, 6, 7, 8] },
    v: { dtype: 'F32', shape: [4], data: [1, 2, 3, 4] },
  });
  const ck = await Checkpoint.open(path);
  const tables = [await RowTable.load(e, ck, 'w'), await RowTable.load(e, ck, 'w', { placement: 'host' })];
  try {
    for (const t of tables) {
      for (const bad of [-1, V, 1.5, NaN]) {
        assert.throws(() => t.lookup([0, bad]), (err: Error) => err instanceof RangeError && err.message === `RowTable w: id ${bad} at 1 outside 0..${V - 1}`, `${t.placement} ${bad}`);
      }
      assert.throws(() => t.lookup([1, 2, 3], [2, 2]), /RowTable w: 3 ids for shape \[2, ?2\]/);
    }
    await assert.rejects(RowTable.load(e, ck, 'w', { shape: [V, D + 1] }), CheckpointError);
    await assert.rejects(RowTable.load(e, ck, 'q'), /"q" is I8; a row table reads F32, F16 or BF16/);
    await assert.rejects(RowTable.load(e, ck, 'v'), /a row table is \[rows, dim\]/);
    // bf16 -> f16 on the host path checks range per row, as loadTensor does for the whole table
    const big = await RowTable.load(e, ck, 'big', { dtype: 'f16', placement: 'host' });
    big.lookup([0]).free();
    assert.throws(() => big.lookup([1]), /"big" row 1 holds \d+, beyond f16's range/);
    big.free();
    assert.throws(() => big.lookup([0]), /used after free/);
  } finally {
    for (const t of tables) t.free();
    await ck.close();
  }
});

// Exactly representable in f16 (k / 1024 with |k| <= 1023), so the file can be F16 and checked without keeping it.
const bigValue = (r: number, c: number) => (((r * 37 + c * 11) % 2047) - 1023) / 1024;

test('a table over maxBindingBytes goes to the host by itself and reads right', async (t) => {
  const e = await testEngine();
  const limit = e.gpu.maxBindingBytes;
  if (limit > 256 * 2 ** 20) {
    t.skip(`maxBindingBytes is ${limit}: a table over it is too big for a test file (lavapipe's is 128 MiB)`);
    return;
  }
  const dim = 1024;
  const rows = Math.floor(limit / (dim * 2)) + 1024; // 2 MiB over the limit in f16
  const path = join(dir, 'big.safetensors');
  // streamed, 1024 rows (2 MiB) at a time: the test never holds the table
  let header = JSON.stringify({ table: { dtype: 'F16', shape: [rows, dim], data_offsets: [0, rows * dim * 2] } });
  header += ' '.repeat((8 - (header.length % 8)) % 8);
  const fh = await open(path, 'w');
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    await fh.write(len);
    await fh.write(Buffer.from(header));
    const chunk = new Uint16Array(1024 * dim);
    for (let r0 = 0; r0 < rows; r0 += 1024) {
      const n = Math.min(1024, rows - r0);
      for (let r = 0; r < n; r++) for (let c = 0; c < dim; c++) chunk[r * dim + c] = f32ToF16Bits(bigValue(r0 + r, c));
      await fh.write(new Uint8Array(chunk.buffer, 0, n * dim * 2));
    }
  } finally {
    await fh.close();
  }
  assert.ok(statSync(path).size > limit);
  const ck = await Checkpoint.open(path);
  const before = e.pool.stats().allocatedBytes;
  const table = await RowTable.load(e, ck, 'table', { shape: [rows, dim] });
  try {
    assert.equal(table.placement, 'host');
    assert.equal(table.dtype, 'f16');
    assert.ok(e.pool.stats().allocatedBytes - before < 2 ** 20, 'the table itself takes no GPU memory');
    const ids = [0, rows - 1, Math.floor(limit / (dim * 2)), 12345, rows - 1024];
    const x = table.lookup(ids);
    const want = new Float64Array(ids.length * dim);
    ids.forEach((id, i) => {
      for (let c = 0; c < dim; c++) want[i * dim + c] = bigValue(id, c);
    });
    assertClose(await e.read(x), { data: want, shape: [ids.length, dim] }, EXACT, 'big table rows');
    x.free();
  } finally {
    table.free();
    await ck.close();
    rmSync(path, { force: true });
  }
});
