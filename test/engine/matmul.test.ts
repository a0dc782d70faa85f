// Batched matmul (register-tiled kernel) vs the float64 CPU reference on fresh random inputs: odd sizes that
// cross tile edges, transposed and sliced operands, batch broadcasting, poisoned outputs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { DType } from '../../src/engine/dtype';
import { matmul } from '../../src/engine/ops/matmul';
import { matmulRef } from './reference/matmul';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type Layout, type Tolerance } from './helpers';

// Sums over K in f32 (K <= 130 here): rounding grows like sqrt(K) ulps, so f32 states 1e-4. f16 output is
// rounded once from an f32 sum: 2^-11 relative, within the f16 default.
export const GEMM_TOL: Record<'f32' | 'f16', Tolerance> = { f32: { atol: 1e-4, rtol: 1e-4 }, f16: { atol: 1e-2, rtol: 1e-2 } };
const DTYPES: ('f32' | 'f16')[] = ['f32', 'f16'];
// (M, K, N): ones, primes, one past a tile, and a tile multiple
const SIZES: [number, number, number][] = [[1, 1, 1], [1, 33, 7], [7, 13, 33], [33, 65, 31], [64, 16, 64], [65, 17, 130]];
const SMALL_TILE = { wgx: 2, wgy: 2, bk: 4 }; // 8x8 tiles, K slices of 4: many edges on small sizes

for (const dtype of DTYPES) {
  test(`matmul ${dtype}: odd sizes, both tile configs`, seeded(async (rng) => {
    const e = await testEngine();
    for (const [M, K, N] of SIZES) {
      for (const tile of [undefined, SMALL_TILE]) {
        const a = randomHost(rng, [M, K], dtype);
        const b = randomHost(rng, [K, N], dtype);
        const ga = e.upload(a.data, a.shape, dtype);
        const gb = e.upload(b.data, b.shape, dtype);
        const out = poisoned(e, [M, N], dtype);
        matmul(e, ga, gb, { out, tile });
        assertClose(await e.read(out), matmulRef(a, b), GEMM_TOL[dtype], `matmul ${dtype} ${M}x${K}x${N} tile ${JSON.stringify(tile)}`);
        for (const t of [ga, gb, out]) t.free();
      }
    }
  }));

  test(`matmul ${dtype}: transposed and sliced operands, batch broadcast`, seeded(async (rng) => {
    const e = await testEngine();
    const layouts: [Layout, Layout][] = [['transposed', 'contiguous'], ['contiguous', 'transposed'], ['transposed', 'transposed'], ['sliced', 'sliced']];
    for (const [la, lb] of layouts) {
      // a (2, 3, M, K) vs b (3, K, N): b broadcasts over the leading batch dim
      const [M, K, N] = [rng.int(1, 20), rng.int(1, 40), rng.int(1, 20)];
      const a = randomHost(rng, [2, 3, M, K], dtype);
      const b = randomHost(rng, [3, K, N], dtype);
      const ga = uploadAs(e, a, dtype, la);
      const gb = uploadAs(e, b, dtype, lb);
      const out = matmul(e, ga.view, gb.view, { tile: SMALL_TILE });
      assert.deepEqual(out.shape, [2, 3, M, N]);
      assertClose(await e.read(out), matmulRef(a, b), GEMM_TOL[dtype], `matmul ${dtype} a ${la} b ${lb} ${M}x${K}x${N}`);
      for (const t of [ga.base, gb.base, out]) t.free();
    }
    // a weight shared by every batch via expand (stride 0), a (4, M, K)
    const a = randomHost(rng, [4, 5, 9], dtype);
    const b = randomHost(rng, [9, 11], dtype);
    const ga = e.upload(a.data, a.shape, dtype);
    const gb = e.upload(b.data, b.shape, dtype);
    const out = matmul(e, ga, gb.expand([4, 9, 11]));
    assertClose(await e.read(out), matmulRef(a, b), GEMM_TOL[dtype], `matmul ${dtype} expanded b`);
    for (const t of [ga, gb, out]) t.free();
  }));
}

test('matmul: input checks name the op and the shapes', async () => {
  const e = await testEngine();
  const a = e.empty([2, 3]);
  const b = e.empty([4, 5]);
  const h = e.empty([3, 5], 'f16');
  assert.throws(() => matmul(e, a, b), /matmul: a\[2,3\] · b\[4,5\]: inner dims 3 vs 4/);
  assert.throws(() => matmul(e, a, h), /matmul: a f32\[2,3\] vs b f16\[3,5\]: dtypes differ/);
  assert.throws(() => matmul(e, e.empty([2, 2, 3]), e.empty([3, 3, 5])), /batch dims do not broadcast/);
  assert.throws(() => matmul(e, a, e.empty([3, 5]), { out: e.empty([5, 2]) }), /matmul: out f32\[5,2\] must be a contiguous f32\[2,5\]/);
  const d: DType = 'i8';
  assert.throws(() => matmul(e, a, e.empty([3, 5], d)), /int8 weight i8\[3,5\] needs per-channel scales/);
  assert.throws(() => matmul(e, a, e.empty([3, 5]), { scales: e.empty([5]) }), /matmul: scales f32\[5\] given for f32\[3,5\]: they dequantise an int8 weight only/);
  // the tensor-core path (emulated here, so any adapter with subgroups reaches its checks) takes f16 activations only
  const q = e.empty([3, 5], d);
  assert.throws(() => matmul(e, a, q, { scales: e.empty([5]), path: 'subgroup', subgroup: { emulate: true } }),
    /matmul: subgroup-matrix GEMM (needs f16 a and an f16 or int8 b \(got f32\[2,3\], i8\[3,5\]\)|unavailable: .*lacks subgroups)/);
});
