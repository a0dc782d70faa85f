// The golden harness itself: case listing, metadata checks, typed access (test/models/golden.ts).
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { writeSafetensors } from '../../src/engine/safetensors';
import { goldenCaseFiles, GoldenCase, selectRows } from './golden';

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
