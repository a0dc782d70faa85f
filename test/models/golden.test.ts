// The golden harness itself: case listing, metadata checks, typed access (test/models/golden.ts).
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { writeSafetensors } from '../../src/engine/safetensors-writer';
import { expectClose, expectF16, expectF32, F16_RULE, FLOAT16_UNIT, goldenCaseFiles, GoldenCase, selectRows } from './golden';

const META = { config: '{"model_type":"qwen3"}', upstream: 'x 1.0', seed: '7', tolerance: '{"f32":{"atol":1e-4,"rtol":1e-4}}' };

async function withFile(tensors: Parameters<typeof writeSafetensors>[1], meta: Record<string, string> | undefined, fn: (p: string) => Promise<void>) {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-golden-'));
  try {
    const p = join(dir, 'case.safetensors');
    await writeSafetensors(p, tensors, meta);
    await fn(p);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test('lists the committed cases and nothing for a missing component', () => {
  assert.ok(goldenCaseFiles('qwen3', 'decoder').length >= 3);
  assert.deepEqual(goldenCaseFiles('qwen3', 'no-such-component'), []);
  assert.deepEqual(goldenCaseFiles('qwen3', 'configs'), []); // JSON files are not cases
});

test('typed access to weight/input/output tensors and metadata', async () => {
  await withFile(
    {
      'weight.model.norm.weight': { dtype: 'F32', shape: [2], data: [1, 2] },
      'input.ids': { dtype: 'F32', shape: [1, 3], data: [4, 5, 6] },
      'output.last_hidden_state': { dtype: 'F32', shape: [1, 3, 2], data: [1, 2, 3, 4, 5, 6] },
    },
    META,
    async (p) => {
      const c = await GoldenCase.open(p);
      try {
        assert.equal(c.name, 'case');
        assert.deepEqual(c.config, { model_type: 'qwen3' });
        assert.equal(c.seed, 7);
        assert.deepEqual(c.tol('f32'), { atol: 1e-4, rtol: 1e-4 });
        assert.throws(() => c.tol('f16'), /no tolerance for f16/);
        assert.deepEqual(c.names('weight'), ['model.norm.weight']);
        assert.deepEqual(await c.ints('ids'), { data: [4, 5, 6], shape: [1, 3] });
        assert.deepEqual(Array.from((await c.output('last_hidden_state')).data), [1, 2, 3, 4, 5, 6]);
        assert.deepEqual(Array.from(selectRows([1, 2, 3, 4, 5, 6], [1, 3, 2], [0, 1, 1]).data), [3, 4, 5, 6]);
      } finally {
        await c.close();
      }
    },
  );
});

test('refuses a case without metadata or with stray keys', async () => {
  await withFile({ 'input.x': { dtype: 'F32', shape: [1], data: [0] } }, undefined, async (p) => {
    await assert.rejects(GoldenCase.open(p), /__metadata__ has no "config"/);
  });
  await withFile({ 'x': { dtype: 'F32', shape: [1], data: [0] } }, META, async (p) => {
    await assert.rejects(GoldenCase.open(p), /not weight\.\*, input\.\* or output\.\*/);
  });
  await withFile({ 'input.x': { dtype: 'F32', shape: [1], data: [0.5] } }, META, async (p) => {
    const c = await GoldenCase.open(p);
    await assert.rejects(c.ints('x'), /is not an integer/);
    await c.close();
  });
});

test('the float16 rule: a multiple of upstream\'s own f16 error, elementwise and in relative RMS', async () => {
  const err = { max: 0.01, rms: 0.01, peak: 4 };
  await withFile(
    { 'output.y': { dtype: 'F32', shape: [4], data: [4, -2, 1, 0.5] } },
    { ...META, f16_error: JSON.stringify({ y: err }) },
    async (p) => {
      const c = await GoldenCase.open(p);
      try {
        assert.deepEqual(c.f16Error('y'), err);
        assert.throws(() => c.f16Error('z'), /no f16_error for output\.z/);
        const want = await c.output('y');
        const a = c.f16Allowance('y');
        assert.equal(a.atol, F16_RULE.max * 0.01);
        assert.equal(a.rms, F16_RULE.rms * 0.01);
        // one element just inside the elementwise bound (the RMS well inside), then just outside
        c.expect('f16', [4 + 0.9 * a.atol, -2, 1, 0.5], want, 'y');
        assert.throws(() => c.expect('f16', [4 + 1.1 * a.atol, -2, 1, 0.5], want, 'y'), /f16 rule/);
        // every element inside the elementwise bound, the relative RMS over its bound
        const flat = { data: Float64Array.of(1, 1, 1, 1), shape: [4] };
        const d = 1.5 * a.rms;
        assert.ok(d < a.atol);
        assert.throws(() => expectF16([1 + d, 1 - d, 1 + d, 1 - d], flat, err, 'flat'), /relative RMS error/);
        // f32 keeps the stated tolerance
        assert.throws(() => c.expect('f32', [4 + 1e-3, -2, 1, 0.5], want, 'y'), /atol=0\.0001/);
      } finally {
        await c.close();
      }
    },
  );
  // a tensor upstream keeps exact in f16 still gets float16's unit roundoff (relative to its peak)
  const exact = { max: 0, rms: 0, peak: 8 };
  const eights = Array<number>(16).fill(8);
  expectF16([8 + 0.9 * F16_RULE.max * FLOAT16_UNIT * 8, ...eights.slice(1)], { data: Float64Array.from(eights), shape: [16] }, exact, 'floor');
  assert.throws(() => expectF16([8 + 1.1 * F16_RULE.max * FLOAT16_UNIT * 8, ...eights.slice(1)], { data: Float64Array.from(eights), shape: [16] }, exact, 'floor'), /f16 rule/);
  await withFile({ 'output.y': { dtype: 'F32', shape: [1], data: [1] } }, { ...META, f16_error: '{"y":{"max":-1}}' }, async (p) => {
    await assert.rejects(GoldenCase.open(p), /f16_error\.y needs max, rms and peak >= 0/);
  });
});

test('every comparison refuses a length or shape mismatch, naming the tensor, in every dtype', async () => {
  const err = { max: 0.01, rms: 0.01, peak: 4 };
  await withFile(
    { 'output.y': { dtype: 'F32', shape: [3, 2], data: [4, -2, 1, 0.5, 3, 2] } },
    { ...META, tolerance: '{"f32":{"atol":1e-4,"rtol":1e-4},"int8":{"atol":0.1,"rtol":0.1}}', f16_error: JSON.stringify({ y: err }) },
    async (p) => {
      const c = await GoldenCase.open(p);
      try {
        const want = await c.output('y');
        const rows2 = [4, -2, 1, 0.5];
        for (const dt of ['f32', 'f16', 'int8'] as const) {
          c.expect(dt, want.data, want, 'y');
          c.expect(dt, { data: want.data, shape: [3, 2] }, want, 'y');
          // the reference one row longer than the result: its first rows match exactly, so only the length can fail it
          assert.throws(() => c.expect(dt, rows2, want, 'y'), new RegExp(`^Error: y \\(${dt}\\): 4 elements, reference has 6 \\(shape \\[3, 2\\]\\)$`));
          assert.throws(() => c.expect(dt, { data: rows2, shape: [2, 2] }, want, 'y'), new RegExp(`^Error: y \\(${dt}\\): shape \\[2, 2\\], reference has \\[3, 2\\]$`));
          // the result longer than the reference
          assert.throws(() => c.expect(dt, [...want.data, 0], want, 'y'), /y \(\w+\): 7 elements, reference has 6/);
          // as many elements in another shape (a transposed or unsqueezed result)
          assert.throws(() => c.expect(dt, { data: want.data, shape: [2, 3] }, want, 'y'), /y \(\w+\): shape \[2, 3\], reference has \[3, 2\]/);
          assert.throws(() => c.expect(dt, { data: want.data, shape: [1, 3, 2] }, want, 'y'), /shape \[1, 3, 2\], reference has \[3, 2\]/);
        }
        // a reference whose data does not fill its shape (a caller's reshape gone wrong)
        assert.throws(() => expectF32(rows2, { data: Float64Array.from(rows2), shape: [3, 2] }, c.tol('f32'), undefined, 'bad'), /bad: the reference has 4 elements for its shape \[3, 2\] \(6\)/);
        assert.throws(() => expectClose(rows2, { data: want.data, shape: [2, 2] }, c.tol('f32'), 'bad2'), /bad2: the reference has 6 elements/);
        assert.throws(() => expectF16(rows2, want, err, 'half'), /half: 4 elements, reference has 6/);
      } finally {
        await c.close();
      }
    },
  );
});
