// Step times from measured rates (issue 43: "npm run plan prints predicted step times from the tuning table"): the
// meter's counts per rate class (engine/meter.ts), the tuning table's `rates` (engine/tuning.ts) and the arithmetic
// that joins them (plan/step-time.ts). The CLI's prediction from a table: test/plan/plan.test.ts.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Engine } from '../../src/engine/engine';
import { RATE_CLASSES, shapesSince, workByRateSince, type RateClass, type Work } from '../../src/engine/meter';
import { attention } from '../../src/engine/ops/attention';
import { conv2d } from '../../src/engine/ops/conv';
import { add } from '../../src/engine/ops/elementwise';
import { linear } from '../../src/engine/ops/linear';
import { matmul } from '../../src/engine/ops/matmul';
import { ADAPTERS } from '../../src/engine/plan-device';
import { validateTuningTable, type MeasuredRates } from '../../src/engine/tuning';
import { ratesFor, stepTime } from '../../src/plan/step-time';

const none = (): Record<RateClass, Work> => Object.fromEntries(RATE_CLASSES.map((c) => [c, { dispatches: 0, flops: 0, bytes: 0 }])) as Record<RateClass, Work>;

describe('the meter per rate class (shape-only engine)', () => {
  let e: Engine;
  before(() => {
    e = Engine.createShapeOnly('h200');
  });
  after(() => e.destroy());

  test('GEMMs by the tuning table\'s shape class, attention, convolutions, the rest memory-bound; the classes sum to the total', () => {
    const t0 = e.recorder.meter.snapshot();
    const c0 = e.recorder.meter.snapshotByRate();
    const s0 = e.recorder.meter.snapshotShapes();
    const big = [e.empty([4096, 4096], 'f16'), e.empty([4096, 4096], 'f16')];
    const small = [e.empty([256, 64], 'f16'), e.empty([100, 64], 'f16')];
    const q = e.empty([1, 8, 300, 64], 'f16');
    const img = e.empty([1, 20, 20, 8], 'f16');
    const k3 = e.empty([16, 8, 3, 3], 'f16');
    const outs = [matmul(e, big[0]!, big[1]!), linear(e, small[0]!, small[1]!), attention(e, q, q, q), conv2d(e, img, k3, { padding: 1 })];
    add(e, outs[0]!, 1, big[0]!); // big[0] = outs[0] + 1: two tensors bound
    const by = workByRateSince(e.recorder.meter.snapshotByRate(), c0);
    const total = e.recorder.meter.snapshot();
    assert.equal(by['gemm-large'].flops, 2 * 4096 ** 3, '4096x4096 output: large (2^24)');
    assert.equal(by['gemm-small'].flops, 2 * 256 * 100 * 64, '256x100 output: small');
    assert.equal(by['gemm-medium'].dispatches, 0);
    assert.equal(by.attention.flops, 4 * 8 * 300 * 300 * 64);
    assert.equal(by.conv.flops, 2 * 400 * 72 * 16);
    assert.equal(by.memory.dispatches, 1, 'the add');
    assert.equal(by.memory.bytes, 2 * 4096 * 4096 * 2);
    for (const f of ['dispatches', 'flops', 'bytes'] as const) {
      assert.equal(RATE_CLASSES.reduce((a, c) => a + by[c][f], 0), total[f] - t0[f], f);
    }
    const shapes = shapesSince(e.recorder.meter.snapshotShapes(), s0);
    assert.deepEqual([...shapes.keys()].sort(), ['attention B1 H8 Lq300 Lk300 D64', 'gemm 256x64x100', 'gemm 4096x4096x4096'], 'GEMMs and attention by their dims');
    assert.equal(shapes.get('gemm 4096x4096x4096')!.flops, 2 * 4096 ** 3);
    for (const t of [...big, ...small, q, img, k3, ...outs]) t.free();
  });
});

test('a step\'s time: each class\'s work at its rate, dispatches at their cost, summed; a class with work and no rate is named, never guessed', () => {
  const w = none();
  w['gemm-large'] = { dispatches: 100, flops: 300e12, bytes: 50e9 };
  w['gemm-small'] = { dispatches: 40, flops: 2e12, bytes: 1e9 };
  w.attention = { dispatches: 20, flops: 30e12, bytes: 2e9 };
  w.memory = { dispatches: 400, flops: 1e9, bytes: 60e9 };
  const rates: MeasuredRates = { gemm: { small: 20, large: 300 }, attention: 150, memory_gbs: 3000, dispatch_us: 10 };
  const t = stepTime(w, rates, 'b');
  assert.ok('step_s' in t);
  assert.deepEqual(Object.keys(t.by_class).sort(), ['attention', 'dispatch', 'gemm-large', 'gemm-small', 'memory']);
  assert.ok(Math.abs(t.by_class['gemm-large']! - 1) < 1e-12);
  assert.ok(Math.abs(t.by_class['gemm-small']! - 0.1) < 1e-12);
  assert.ok(Math.abs(t.by_class.attention! - 0.2) < 1e-12);
  assert.ok(Math.abs(t.by_class.memory! - 0.02) < 1e-12);
  assert.ok(Math.abs(t.by_class.dispatch! - 560 * 10e-6) < 1e-12);
  assert.ok(Math.abs(t.step_s - (1 + 0.1 + 0.2 + 0.02 + 0.0056)) < 1e-12);
  w.conv = { dispatches: 1, flops: 1e9, bytes: 1e6 };
  w['gemm-medium'] = { dispatches: 1, flops: 1e9, bytes: 1e6 };
  const missing = stepTime(w, { ...rates, dispatch_us: undefined }, 'b');
  assert.ok('missing' in missing);
  assert.deepEqual(missing.missing.map((m) => m.split(' ')[0]), ['gemm-medium', 'conv', 'dispatch']);
});

describe('the table a plan reads its rates from', () => {
  let dir: string;
  const table = (vendor: string, architecture: string, rates?: MeasuredRates) =>
    JSON.stringify({ version: 1, adapter: { vendor, architecture }, gemm: { large: { path: 'tiled' } }, ...(rates ? { rates } : {}) });
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kiln-rates-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('by vendor and the profile\'s architecture; a table without rates or another adapter\'s is not used; two candidates for an adapter of unknown architecture are not guessed between', () => {
    const d = join(dir, 'a');
    mkdirSync(d);
    writeFileSync(join(d, 'mesa-software.json'), table('mesa', 'software', { memory_gbs: 1 }));
    writeFileSync(join(d, 'mesa-other.json'), table('mesa', 'other', { memory_gbs: 2 }));
    writeFileSync(join(d, 'nvidia-hopper.json'), table('nvidia', 'hopper'));
    writeFileSync(join(d, 'broken.json'), '{ not json');
    const lava = ratesFor(ADAPTERS.lavapipe!, d);
    assert.ok('table' in lava && lava.table.rates!.memory_gbs === 1 && lava.file === join(d, 'mesa-software.json'));
    const h200 = ratesFor(ADAPTERS.h200!, d);
    assert.ok('none' in h200 && /no tuning table with measured rates for NVIDIA H200/.test(h200.none), JSON.stringify(h200));
    writeFileSync(join(d, 'nvidia-hopper.json'), table('nvidia', 'hopper', { attention: 100 }));
    const one = ratesFor(ADAPTERS.h200!, d);
    assert.ok('table' in one && one.table.rates!.attention === 100, 'the H200 profile records no architecture: its vendor\'s one table');
    writeFileSync(join(d, 'nvidia-blackwell.json'), table('nvidia', 'blackwell', { attention: 200 }));
    const two = ratesFor(ADAPTERS.h200!, d);
    assert.ok('none' in two && /2 tuning tables with rates match NVIDIA H200/.test(two.none), JSON.stringify(two));
  });

  test('the table\'s rates are checked: positive numbers, known classes and keys', () => {
    const base = { version: 1, adapter: { vendor: 'v', architecture: 'a' }, gemm: {} };
    assert.doesNotThrow(() => validateTuningTable({ ...base, rates: { gemm: { large: 310.5 }, attention: 160, memory_gbs: 3900, dispatch_us: 6 } }, []));
    for (const [rates, re] of [
      [{ gemm: { large: -1 } }, /rates\.gemm\.large must be a positive number/],
      [{ gemm: { huge: 1 } }, /rates\.gemm\.huge: not a shape class/],
      [{ attention: 'fast' }, /rates\.attention must be a positive number/],
      [{ tflops: 1 }, /rates\.tflops: unknown/],
    ] as const) assert.throws(() => validateTuningTable({ ...base, rates }, []), re);
  });
});
