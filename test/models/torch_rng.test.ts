// PyTorch's CPU generator (src/models/common/torch-rng.ts) against torch itself (golden torch/rng, tools/golden/
// torch_rng.py): torch.rand's uniforms bit for bit; torch.randn's normals within a few float32 ulps (torch's vectorised
// log / sin / cos are not correctly rounded), with the bit-equal share reported.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Mt19937, torchRand, torchRandn } from '../../src/models/common/torch-rng';
import { goldenTests } from './golden';

/** float32 ulps between a and b (same sign assumed; 0 when equal). */
function ulps(a: number, b: number): number {
  const buf = new DataView(new ArrayBuffer(8));
  buf.setFloat32(0, a);
  buf.setFloat32(4, b);
  const ia = buf.getInt32(0);
  const ib = buf.getInt32(4);
  return (ia < 0) !== (ib < 0) ? Math.abs(ia & 0x7fffffff) + Math.abs(ib & 0x7fffffff) : Math.abs(ia - ib);
}

/**
 * Float32 ulps allowed between a normal of ours and torch's: log, sqrt and sin/cos in torch's vectorised float32 math
 * are each within about an ulp (Sleef's u10 functions) and ours are correctly rounded, so through r cos(theta) the two
 * part by a few ulps (3 at most on the cases); 8 leaves room for other builds' math libraries.
 */
const NORMAL_ULPS = 8;

goldenTests('torch', 'rng', async (c, t) => {
  const { seed, n } = c.config as { seed: number; n: number };
  assert.deepEqual(Array.from(torchRand(seed, n)), Array.from((await c.output('uniform')).data), 'torch.rand bit for bit');
  const got = torchRandn(seed, n);
  const want = (await c.output('normal')).data;
  let equal = 0;
  let worst = 0;
  for (let i = 0; i < n; i++) {
    const u = ulps(got[i]!, want[i]!);
    if (u === 0) equal++;
    worst = Math.max(worst, u);
    if (u > NORMAL_ULPS) assert.fail(`torch.randn[${i}]: got ${got[i]}, want ${want[i]} (${u} ulps)`);
  }
  t.diagnostic(`${c.name}: ${equal} of ${n} normals bit-equal, worst ${worst} ulps`);
});

test('mt19937 seeded 5489 gives std::mt19937\'s 10000th output 4123659995', () => {
  const g = new Mt19937(5489);
  let v = 0;
  for (let i = 0; i < 10000; i++) v = g.next();
  assert.equal(v, 4123659995);
  assert.throws(() => torchRandn(42, 15), /fewer than 16/);
});
