// The shape-only engine (plan-device.ts) and the meter (meter.ts): the same ops on lavapipe and on a shape-only
// engine standing for it record the same dispatches, FLOPs and bytes and hold the same pool bytes, and the FLOP
// counts are the ops' formulas; shape errors are still thrown; nothing is read from a checkpoint.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MAX_BINDING_BYTES } from '../../src/engine/device';
import { Engine } from '../../src/engine/engine';
import { loadTensor } from '../../src/engine/load';
import { workSince } from '../../src/engine/meter';
import { attention } from '../../src/engine/ops/attention';
import { conv2d, convTranspose2d } from '../../src/engine/ops/conv';
import { linear } from '../../src/engine/ops/linear';
import { matmul } from '../../src/engine/ops/matmul';
import { adapterProfile, adapterProfileOf } from '../../src/engine/plan-device';
import { Checkpoint } from '../../src/engine/safetensors';
import { writeSafetensors } from '../../src/engine/safetensors-writer';
import type { Tensor } from '../../src/engine/tensor';
import { makeRng, testEngine } from './helpers';

/** A small chain of every costed op family plus an elementwise tail, freeing as a model does. */
function chain(e: Engine): Tensor {
  const x = e.empty([2, 37, 48], 'f32');
  const w = e.empty([40, 48], 'f32');
  const h = linear(e, x, w); // (2, 37, 40)
  w.free();
  const q = e.empty([1, 4, 37, 16], 'f32');
  const a = attention(e, q, q, q); // (1, 4, 37, 16)
  q.free();
  const img = e.empty([1, 12, 10, 8], 'f32');
  const k = e.empty([6, 8, 3, 3], 'f32');
  const c = conv2d(e, img, k, { padding: 1 }); // (1, 12, 10, 6)
  const kt = e.empty([6, 5, 4, 4], 'f32');
  const up = convTranspose2d(e, c, kt, { stride: 2, padding: 1 }); // (1, 24, 20, 5)
  const m = matmul(e, h, h.transpose(-1, -2)); // (2, 37, 37)
  for (const t of [x, a, img, k, c, kt, h]) t.free();
  up.free();
  return m;
}

describe('shape-only engine', () => {
  let real: Engine;
  let plan: Engine;
  before(async () => {
    real = await testEngine();
    plan = Engine.createShapeOnly(adapterProfileOf(real.describe(), 24 * 2 ** 30));
  });
  after(() => plan.destroy());

  test('the same ops hold the same pool bytes and record the same dispatches, FLOPs and bytes as on the device', async () => {
    const r0 = real.recorder.meter.snapshot();
    const p0 = plan.recorder.meter.snapshot();
    const rs = real.pool.stats();
    const ps = plan.pool.stats();
    const out = [chain(real), chain(plan)];
    await real.sync();
    assert.deepEqual(workSince(plan.recorder.meter.snapshot(), p0), workSince(real.recorder.meter.snapshot(), r0));
    const grow = (a: typeof rs, b: typeof rs) => ({ inUse: b.inUseBytes - a.inUseBytes, peak: b.peakInUseBytes - a.peakInUseBytes });
    assert.deepEqual(grow(ps, plan.pool.stats()), grow(rs, real.pool.stats()));
    assert.ok(plan.pool.stats().peakInUseBytes > 0);
    assert.deepEqual(out[1]!.shape, out[0]!.shape);
    assert.equal((await plan.read(out[1]!)).length, 2 * 37 * 37, 'a read gives zeros of the right length');
    for (const t of out) t.free();
  });

  test('FLOPs per op are the formulas: 2MNK for GEMMs, 4 B H Lq Lk D for attention, 2 M (Cin k) Cout for convolutions', () => {
    const rng = makeRng(Date.now());
    const cost = (f: () => Tensor) => {
      const before = plan.recorder.meter.snapshot();
      f().free();
      return workSince(plan.recorder.meter.snapshot(), before);
    };
    const [M, N, K] = [rng.int(1, 300), rng.int(1, 300), rng.int(1, 300)];
    const x = plan.empty([M, K], 'f16');
    const w = plan.empty([N, K], 'f16');
    assert.deepEqual(cost(() => linear(plan, x, w)), { dispatches: 1, flops: 2 * M * N * K, bytes: 2 * (M * K + N * K + M * N) });
    const one = plan.empty([1, K], 'f16');
    assert.equal(cost(() => linear(plan, one, w)).flops, 2 * N * K, 'the GEMV path too');
    const [B, H, Lq, Lk, D] = [rng.int(1, 3), rng.int(1, 8), rng.int(1, 200), rng.int(1, 200), 64];
    const q = plan.empty([B, H, Lq, D], 'f16');
    const kv = plan.empty([B, H, Lk, D], 'f16');
    assert.equal(cost(() => attention(plan, q, kv, kv)).flops, 4 * B * H * Lq * Lk * D);
    const [Hh, Ww, Cin, Cout] = [rng.int(1, 40), rng.int(1, 40), rng.int(1, 16), rng.int(1, 16)];
    const img = plan.empty([1, Hh, Ww, Cin], 'f16');
    const k3 = plan.empty([Cout, Cin, 3, 3], 'f16');
    assert.equal(cost(() => conv2d(plan, img, k3, { padding: 1 })).flops, 2 * (Hh * Ww) * (Cin * 9) * Cout);
    const dw = plan.empty([Cin, 1, 3, 3], 'f16');
    assert.equal(cost(() => conv2d(plan, img, dw, { padding: 1, groups: Cin })).flops, 2 * (Hh * Ww) * 9 * Cin, 'depthwise');
    for (const t of [x, w, one, q, kv, img, k3, dw]) t.free();
  });

  test('shape errors are thrown as on a device', () => {
    const a = plan.empty([4, 8], 'f32');
    const b = plan.empty([9, 4], 'f32');
    assert.throws(() => matmul(plan, a, b), /matmul/);
    a.free();
    b.free();
  });

  test('stands for an adapter it does not have: the H200 profile gives 2 GiB bindings and f16', () => {
    const h = Engine.createShapeOnly('h200');
    try {
      assert.equal(h.shapeOnly, true);
      assert.equal(h.gpu.hasFeature('shader-f16'), true);
      assert.equal(h.pool.maxBindingBytes, MAX_BINDING_BYTES, 'the H200 allows 2 GiB - 4 B; the engine caps every binding below 2 GiB');
      const t = h.empty([512, 2 ** 20], 'f16'); // 1 GiB: over lavapipe's 128 MiB binding, fine on the H200
      assert.equal(h.pool.stats().inUseBytes, 2 ** 30);
      t.free();
      assert.throws(() => adapterProfile('nope'), /known: h200, lavapipe/);
    } finally {
      h.destroy();
    }
  });

  test('loading a checkpoint tensor reads no bytes, but checks its shape', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'shape-only-'));
    try {
      const file = join(dir, 'w.safetensors');
      await writeSafetensors(file, { w: { dtype: 'F32', shape: [3, 5], data: new Float32Array(15).fill(1) } });
      const ckpt = await Checkpoint.open(file);
      const reads: string[] = [];
      const spy = new Proxy(ckpt, {
        get: (target, prop, recv) => {
          if (prop === 'readChunks' || prop === 'readFloat32') reads.push(String(prop));
          const v = Reflect.get(target, prop, recv);
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
      const t = await loadTensor(plan, spy, 'w', { shape: [3, 5], dtype: 'f16' });
      assert.deepEqual([t.shape, t.dtype, reads], [[3, 5], 'f16', []]);
      t.free();
      await assert.rejects(loadTensor(plan, spy, 'w', { shape: [5, 3] }), /\[5,3\]|5, 3|shape/);
      const r = await loadTensor(real, spy, 'w', { shape: [3, 5] });
      assert.deepEqual(reads, ['readChunks'], 'the device engine reads it');
      r.free();
      await ckpt.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
