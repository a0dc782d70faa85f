// The recorder's bind-group cache (src/engine/bind-groups.ts): a repeated dispatch sequence creates no new groups,
// every dispatch still reads its own params (its slot), and a pool trim leaves nothing stale behind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { add } from '../../src/engine/ops/elementwise';
import { BindGroupCache, slotFor } from '../../src/engine/bind-groups';
import type { Engine } from '../../src/engine/engine';
import type { Tensor } from '../../src/engine/tensor';
import { testEngine } from './helpers';

/** n adds ping-ponging between x and y, the i-th adding i + 1 (its own params): x ends at n (n + 1) / 2 for n even. */
function pingPong(e: Engine, x: Tensor, y: Tensor, n: number): void {
  for (let i = 0; i < n; i++) {
    if (i % 2 === 0) add(e, x, i + 1, y);
    else add(e, y, i + 1, x);
  }
}

test('a repeated dispatch sequence reuses its bind groups, each dispatch with its own params', async () => {
  const e = await testEngine();
  const x = e.upload([0], [1]);
  const y = e.empty([1]);
  const n = 200;   // several batches, so slots collide and wrap
  await e.sync();
  const made0 = e.recorder.groups.misses;
  pingPong(e, x, y, n);
  assert.deepEqual(Array.from(await e.read(x)), [(n * (n + 1)) / 2]);
  const made = e.recorder.groups.misses - made0;
  assert.ok(made > 0 && made <= n, `first pass made ${made} groups`);

  e.write(x, [0]);
  await e.sync();
  const made1 = e.recorder.groups.misses;
  const hits1 = e.recorder.groups.hits;
  pingPong(e, x, y, n);
  assert.deepEqual(Array.from(await e.read(x)), [(n * (n + 1)) / 2], 'the second pass reads each dispatch\'s own params');
  assert.equal(e.recorder.groups.misses - made1, 0, 'the second pass made no group');
  assert.equal(e.recorder.groups.hits - hits1, n);
  x.free();
  y.free();
});

test('a pool trim drops the cached groups, and a new buffer is never bound through an old group', async () => {
  const e = await testEngine();
  const x = e.upload([1], [1]);
  const y = e.empty([1]);
  add(e, x, 1, y);
  await e.sync();
  y.free();
  e.pool.trim();   // destroys y's buffer
  assert.equal(e.recorder.groups.size, 0);
  const z = e.empty([1]);   // same size class: a new buffer
  add(e, x, 5, z);
  assert.deepEqual(Array.from(await e.read(z)), [6]);
  x.free();
  z.free();
});

test('bind-group keys name the kernel and each buffer; a raw buffer binding has none', async () => {
  const e = await testEngine();
  const a = e.empty([4]);
  const b = e.empty([4]);
  const k1 = {};
  const k2 = {};
  assert.equal(BindGroupCache.key(k1, [a, b]), BindGroupCache.key(k1, [a, b]));
  assert.notEqual(BindGroupCache.key(k1, [a, b]), BindGroupCache.key(k1, [b, a]));
  assert.notEqual(BindGroupCache.key(k1, [a, b]), BindGroupCache.key(k2, [a, b]));
  assert.equal(BindGroupCache.key(k1, [a, { buffer: a.storage.buffer }]), null);
  const key = BindGroupCache.key(k1, [a, b])!;
  assert.equal(slotFor(key, 256), slotFor(key, 256));
  assert.ok(slotFor(key, 256) >= 0 && slotFor(key, 256) < 256);
  const c = new BindGroupCache(2);
  const made: string[] = [];
  const group = (name: string) => () => { made.push(name); return {} as GPUBindGroup; };
  c.get('a', 0, group('a0'));
  c.get('a', 1, group('a1'));
  c.get('a', 0, group('again'));
  c.get('b', 0, group('b0'));   // over the cap of 2: the oldest (a@0) goes
  c.get('a', 0, group('a0 remade'));
  assert.deepEqual(made, ['a0', 'a1', 'b0', 'a0 remade']);
  assert.equal(c.size, 2);
  a.free();
  b.free();
});
