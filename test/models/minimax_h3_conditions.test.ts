// MiniMax H3 visual conditioning rows (conditioning/condition-rows.ts) against diffusers' MiniMaxH3PrepareConditionLatentsStep (golden
// minimax_h3/conditions, tools/golden/minimax_h3_conditions.py): with upstream's draws given, the rows bit for bit;
// with the request generator replayed by TorchGenerator (one torch.randn per condition, in order), within the f32 rule.
import assert from 'node:assert/strict';
import { TorchGenerator } from '../../src/models/common/torch-rng';
import { conditionNoises, conditionRows, type HostLatents } from '../../src/models/minimax_h3/conditioning/condition-rows';
import { goldenTests, oneSample } from './golden';

goldenTests('minimax_h3', 'conditions', async (c) => {
  const n = c.names('input').filter((k) => k.startsWith('condition_')).length;
  const conditions: HostLatents[] = [];
  const noises: Float32Array[] = [];
  for (let i = 0; i < n; i++) {
    const x = oneSample(await c.input(`condition_${i}`), `input.condition_${i}`);
    conditions.push({ data: Float32Array.from(x.data), shape: x.shape as unknown as [number, number, number, number] });
    noises.push(Float32Array.from((await c.input(`noise_${i}`)).data));
  }
  const want = await c.output('condition_rows');
  const rows = conditionRows(conditions, noises);
  assert.equal(rows.length, want.data.length, 'row values');
  assert.deepEqual(Array.from(rows), Array.from(want.data, Math.fround), 'rows from upstream draws, bit for bit');
  // the request generator replayed: each draw within a few float32 ulps of torch's, times 0.001
  const ours = conditionNoises(new TorchGenerator((c.config as { seed: number }).seed), conditions);
  ours.forEach((d, i) => d.forEach((v, j) => assert.ok(Math.abs(v - noises[i]![j]!) <= 8 * 2 ** -23 * Math.max(1, Math.abs(v)), `draw ${i}[${j}]: ${v} vs ${noises[i]![j]}`)));
  c.expect('f32', conditionRows(conditions, ours), want, 'condition_rows', 'condition_rows (replayed draws)');
});
