// Tensor views, upload/readback, and the buffer pool's reuse and accounting.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BufferPool, GpuOutOfMemoryError, sizeClass } from '../../src/engine/memory';
import { arith } from '../../src/engine/ops/elementwise';
import { roundToDType } from '../../src/engine/dtype';
import { assertClose, randomHost, seeded, testEngine } from './helpers';

test('views share storage and compute strides and offsets', async () => {
  const e = await testEngine();
  const t = e.empty([2, 3, 4]);
  assert.deepEqual(t.strides, [12, 4, 1]);
  const tr = t.transpose(0, 2);
  assert.deepEqual([tr.shape, tr.strides, tr.isContiguous], [[4, 3, 2], [1, 4, 12], false]);
  const s = t.slice(1, 1, 3);
  assert.deepEqual([s.shape, s.strides, s.offset, s.isContiguous], [[2, 2, 4], [12, 4, 1], 4, false]);
  const st = t.slice(2, 1, 4, 2);
  assert.deepEqual([st.shape, st.strides, st.offset], [[2, 3, 2], [12, 4, 2], 1]);
  const ex = e.empty([3, 1]).expand([2, 3, 5]);
  assert.deepEqual([ex.shape, ex.strides], [[2, 3, 5], [0, 1, 0]]);
  assert.deepEqual(t.reshape([6, -1]).shape, [6, 4]);
  assert.deepEqual(t.unsqueeze(1).shape, [2, 1, 3, 4]);
  assert.throws(() => tr.reshape([24]), /non-contiguous/);
  assert.throws(() => t.slice(1, 2, 5), /slice: \[2:5:1\] on dim 1 of f32\[2,3,4\]/);
  assert.equal(s.storage, t.storage);
  assert.equal(String(tr), 'f32[4,3,2]');
  t.free();
  assert.throws(() => arith(e, 'add', s, 1), /used after free/);
});

for (const dtype of ['f32', 'f16'] as const) {
  test(`upload and read back ${dtype}, odd lengths and offset views`, seeded(async (rng) => {
    const e = await testEngine();
    for (const n of [1, 3, 7, 1001]) {
      const h = randomHost(rng, [n], dtype, -100, 100);
      const t = e.upload(h.data, [n], dtype);
      assertClose(await e.read(t), h, { atol: 0, rtol: 0 }, `${dtype}[${n}]`);
      if (n > 2) {
        // odd element offset: f16 views starting mid-word go through the copy kernel
        const v = t.slice(0, 1, n);
        assertClose(await e.read(v), { data: h.data.slice(1), shape: [n - 1] }, { atol: 0, rtol: 0 }, `${dtype}[1:${n}]`);
      }
      t.free();
    }
    const big = e.upload([70000, 1e-8, -0.1], [3], dtype);
    assert.deepEqual(Array.from(await e.read(big)), Array.from(roundToDType([70000, 1e-8, -0.1], dtype)));
    big.free();
  }));
}

test('size classes waste at most 25% and are 16-byte multiples', () => {
  for (const n of [1, 255, 256, 257, 1000, 4097, 3 * 2 ** 20 + 5, 2 ** 30 + 1]) {
    const c = sizeClass(n);
    assert.ok(c >= n && c % 16 === 0 && (n <= 256 || c <= n * 1.25), `${n} -> ${c}`);
  }
});

test('the pool reuses released buffers and can be frozen inside a step', async () => {
  const e = await testEngine();
  const pool = new BufferPool(e.device, 2 ** 20, e.gpu.maxBindingBytes);
  const a = pool.acquire(1000);
  pool.release(a);
  const b = pool.acquire(1000);
  assert.equal(b.buffer, a.buffer);
  assert.equal(pool.stats().buffersCreated, 1);
  pool.frozen = true;
  assert.throws(() => pool.acquire(50_000), /frozen/);
  pool.frozen = false;
  const c = pool.acquire(600_000);
  assert.equal(pool.stats().inUseBytes, sizeClass(1000) + sizeClass(600_000));
  assert.equal(pool.canFit(300_000), true);
  assert.equal(pool.canFit(500_000), false);
  assert.throws(() => pool.acquire(500_000), GpuOutOfMemoryError);
  pool.release(c);
  pool.release(b);
  // cached buffers are trimmed when a new size needs the room
  const d = pool.acquire(900_000);
  const s = pool.stats();
  assert.equal(s.inUseBytes, sizeClass(900_000));
  assert.equal(s.peakInUseBytes, Math.max(sizeClass(900_000), sizeClass(1000) + sizeClass(600_000)));
  assert.ok(s.allocatedBytes <= s.budgetBytes);
  pool.release(d);
  pool.destroy();
});

test('a tensor over the largest binding is refused with the sizes', async () => {
  const e = await testEngine();
  const max = e.gpu.maxBindingBytes;
  assert.throws(() => e.empty([max / 4 + 16]), /over the .* this adapter allows; split it/);
  assert.ok(max <= 2 ** 31);
});

test('a warmed-up step allocates nothing', async () => {
  const e = await testEngine();
  const x = e.upload([1, 2, 3], [3]);
  const step = () => {
    const y = arith(e, 'mul', x, 2);
    const z = arith(e, 'add', y, x);
    y.free();
    return z;
  };
  step().free(); // warm-up
  e.pool.frozen = true;
  try {
    const z = step();
    assert.deepEqual(Array.from(await e.read(z)), [3, 6, 9]);
    z.free();
  } finally {
    e.pool.frozen = false;
    x.free();
  }
});
