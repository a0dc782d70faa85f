// f16 GEMM outputs saturate at the largest finite half (SATURATE in matmul.wgsl, matmul_subgroup.wgsl, gemv.wgsl), as
// upstream clips its f16 hidden states to +-65504: a gated residual whose sum passes 65504 is stored as +-65504 on
// every GEMM path (tiled, GEMV, subgroup-matrix emulated), never inf; in f32 (tiled, GEMV) the same sum is kept. Found by the live
// previews of a random demo Qwen-Image-2.1 in f16 at seed 4: the residual stream overflowed, the next LayerNorm made
// NaN, and the job wrote an all-white png.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { linear } from '../../src/engine/ops/linear';
import { subgroupMatrixPlan } from '../../src/engine/ops/matmul_subgroup';
import { testEngine } from './helpers';

/** Rows of x W^T + residual with every output about +-(40000 + 40000): x = 200 (K = 4), W = +-50, residual +-40000. */
function overflowing(rows: number, N: number) {
  const K = 4;
  const x = new Float32Array(rows * K).fill(200);
  const w = Float32Array.from({ length: N * K }, (_, i) => (Math.floor(i / K) % 2 ? -50 : 50));
  const r = Float32Array.from({ length: rows * N }, (_, i) => (i % N) % 2 ? -40000 : 40000);
  return { x, w, r, K, want: Float32Array.from({ length: rows * N }, (_, i) => ((i % N) % 2 ? -80000 : 80000)) };
}

for (const [path, rows] of [['tiled', 9], ['gemv', 3], ['subgroup', 9]] as const) {
  test(`${path}: an f16 residual sum past 65504 is stored as +-65504; f32 keeps it`, async (ctx) => {
    const e = await testEngine();
    const emulate = path === 'subgroup';
    const plan = emulate ? subgroupMatrixPlan(e, { emulate }) : undefined;
    if (plan && 'reason' in plan) return ctx.skip(`the emulated subgroup-matrix path cannot run here: ${plan.reason}`);
    const N = 6;
    const c = overflowing(rows, N);
    // the subgroup-matrix path takes f16 only (f16 x f16 -> f32 fragments)
    for (const dtype of emulate ? (['f16'] as const) : (['f16', 'f32'] as const)) {
      const gx = e.upload(c.x, [rows, c.K], dtype);
      const gw = e.upload(c.w, [N, c.K], dtype);
      const gr = e.upload(c.r, [rows, N], dtype);
      const out = linear(e, gx, gw, null, { residual: gr, path, ...(emulate ? { subgroup: { tile: { sgm: 2, sgn: 2, fm: 2, fn: 1, bk: 16, pad: 8 }, emulate } } : {}) });
      const got = await e.read(out);
      const want = dtype === 'f16' ? c.want.map((v) => Math.sign(v) * 65504) : c.want;
      assert.deepEqual([...got], [...want], `${path} ${dtype}`);
      for (const t of [gx, gw, gr, out]) t.free();
    }
  });
}
