// The synthetic-checkpoint tools every demo checkpoint and benchmark uses (src/models/common/synthetic-checkpoint.ts,
// random-weights.ts): seeded values per key whatever the order, at the scale each rule gives; a checkpoint that
// creates what loaders ask for and records it; the tensors a demo writer writes from that record.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WeightSynth } from '../../src/models/common/random-weights';
import { SyntheticCheckpoint, zeroFill } from '../../src/models/common/synthetic-checkpoint';

describe('synthetic checkpoints (demo and benchmark weights)', () => {
  test('WeightSynth: deterministic per key whatever the order, F16 fill equal to the values, scales by rule', () => {
    const a = new WeightSynth(5);
    const b = new WeightSynth(5);
    const shape = [64, 300];
    assert.deepEqual(a.values('x.weight', shape), b.values('x.weight', shape));
    assert.notDeepEqual(a.values('x.weight', shape), a.values('y.weight', shape));
    const part = a.values('x.weight', shape, 1000, 50);
    assert.deepEqual(part, a.values('x.weight', shape).subarray(1000, 1050));
    const ck = new SyntheticCheckpoint({ label: 'synthetic', dtype: 'F16', fill: a.fill });
    return ck.readFloat32(ck.entry('x.weight', shape).name).then((f16) => {
      const f32 = a.values('x.weight', shape);
      for (let i = 0; i < f32.length; i++) assert.ok(Math.abs(f16[i]! - f32[i]!) <= Math.abs(f32[i]!) * 1e-3 + 1e-7, `element ${i}`);
      const std = Math.sqrt(f32.reduce((s, v) => s + v * v, 0) / f32.length);
      assert.ok(Math.abs(std - 1 / Math.sqrt(300)) < 0.2 / Math.sqrt(300), `std ${std} ~ 1/sqrt(fan_in)`);
      const norm = a.values('model.norm.weight', [4096]);
      assert.ok(Math.abs(norm.reduce((s, v) => s + v, 0) / norm.length - 1) < 0.05, 'norm weights around 1');
      assert.ok(a.values('q.cluster_usage', [4096]).every((v) => v >= 0.5 && v <= 2), 'usage counts positive');
    });
  });

  test('SyntheticCheckpoint: has() policy, shapes fixed at first ask, shapeless asks need a hint', () => {
    const ck = new SyntheticCheckpoint({ label: 'synthetic', dtype: 'F32', fill: (_, o) => o.fill(0), has: (n) => !n.startsWith('absent'), shapeOf: (n) => (n === 'hinted' ? [2, 3] : undefined) });
    assert.equal(ck.has('absent.weight'), false);
    assert.throws(() => ck.entry('absent.weight', [1]), /no tensor "absent.weight"/);
    assert.deepEqual(ck.entry('a', [4, 5]).shape, [4, 5]);
    assert.throws(() => ck.entry('a', [5, 4]), /asked for as \[5,4\] after \[4,5\]/);
    assert.deepEqual(ck.entry('hinted').shape, [2, 3]);
    assert.throws(() => ck.entry('unknown'), /without a shape/);
    assert.deepEqual(ck.keys(), ['a', 'hinted']);
  });

  test('shapes() lists what was asked for; WeightSynth.tensors writes exactly that, per-key dtype and scale', () => {
    const ck = new SyntheticCheckpoint({ label: 'synthetic', dtype: 'F32', fill: zeroFill });
    ck.entry('a.weight', [3, 4]);
    ck.entry('b.bias', [4]);
    const shapes = ck.shapes();
    assert.deepEqual([...shapes], [['a.weight', [3, 4]], ['b.bias', [4]]]);
    const synth = new WeightSynth(7);
    const t = synth.tensors(shapes, (k) => (k.endsWith('bias') ? 'F32' : 'BF16'), (k) => (k === 'b.bias' ? 0.5 : undefined));
    assert.deepEqual(Object.keys(t), ['a.weight', 'b.bias']);
    assert.equal(t['a.weight']!.dtype, 'BF16');
    assert.equal(t['b.bias']!.dtype, 'F32');
    assert.deepEqual(t['a.weight']!.data, synth.values('a.weight', [3, 4]));
    assert.deepEqual(t['b.bias']!.data, synth.values('b.bias', [4]).map((v) => v * 0.5));
  });
});
