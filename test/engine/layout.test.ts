// Layout ops vs the CPU reference. Copies, pads, concat and gather move bits: compared exactly (atol 0).
// Casts: f16 -> f32 is exact; f32 -> f16 may round to either neighbour in WGSL, so 1 f16 ulp (rtol 2^-10).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { roundToDType, type DType } from '../../src/engine/dtype';
import { cast, concat, copy, copyInto, gather, pad, uploadIds, type PadMode } from '../../src/engine/ops/layout';
import { concatRef, gatherRef, padRef, permuteRef } from './reference/layout';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type HostTensor } from './helpers';

const EXACT = { atol: 0, rtol: 0 };

for (const dtype of ['f32', 'f16'] as DType[]) {
  test(`layout ${dtype}: copy materialises permuted, sliced and expanded views; copyInto writes a slice`, seeded(async (rng) => {
    const e = await testEngine();
    const x = randomHost(rng, [3, 5, 7, 2], dtype);
    const g = e.upload(x.data, x.shape, dtype);
    const order = [2, 0, 3, 1];
    const o1 = poisoned(e, [7, 3, 2, 5], dtype);
    copy(e, g.permute(order), o1);
    assertClose(await e.read(o1), permuteRef(x, order), EXACT, `copy permute ${dtype}`);
    const s = uploadAs(e, x, dtype, 'sliced');
    const o2 = copy(e, s.view.slice(1, 1, 5, 2));
    const want2 = { data: Float64Array.from({ length: 3 * 2 * 7 * 2 }, (_, i) => {
      const [a, b, c, d] = [Math.floor(i / 28), Math.floor(i / 14) % 2, Math.floor(i / 2) % 7, i % 2];
      return x.data[((a * 5 + 1 + 2 * b) * 7 + c) * 2 + d]!;
    }), shape: [3, 2, 7, 2] };
    assertClose(await e.read(o2), want2, EXACT, `copy sliced+stepped ${dtype}`);
    const row = randomHost(rng, [13], dtype);
    const gr = e.upload(row.data, [13], dtype);
    const o3 = copy(e, gr.unsqueeze(0).expand([4, 13]));
    assertClose(await e.read(o3), { data: Float64Array.from({ length: 52 }, (_, i) => row.data[i % 13]!), shape: [4, 13] }, EXACT, `copy expand ${dtype}`);
    // copyInto: write a transposed [5, 3] into columns 2..5 of a poisoned [5, 9]
    const big = poisoned(e, [5, 9], dtype);
    const y = randomHost(rng, [3, 5], dtype);
    const gy = e.upload(y.data, y.shape, dtype);
    copyInto(e, gy.transpose(), big.slice(1, 2, 5));
    const got = await e.read(big);
    for (let i = 0; i < 5; i++) for (let j = 0; j < 9; j++) {
      const v = got[i * 9 + j]!;
      if (j >= 2 && j < 5) assert.equal(v, y.data[(j - 2) * 5 + i], `copyInto [${i},${j}]`);
      else assert.ok(Number.isNaN(v), `copyInto touched [${i},${j}]`);
    }
    for (const t of [g, o1, s.base, o2, gr, o3, big, gy]) t.free();
  }));

  test(`layout ${dtype}: concat along every dim, with views and odd sizes`, seeded(async (rng) => {
    const e = await testEngine();
    for (const dim of [0, 1, 2]) {
      const sizes = [1, 7, 3];
      const hosts: HostTensor[] = sizes.map((n) => {
        const shape = [2, 5, 3];
        shape[dim] = n;
        return randomHost(rng, shape, dtype);
      });
      const ups = hosts.map((h, i) => uploadAs(e, h, dtype, i === 1 ? 'transposed' : 'sliced'));
      const out = concat(e, ups.map((u) => u.view), dim);
      assertClose(await e.read(out), concatRef(hosts, dim), EXACT, `concat dim ${dim} ${dtype}`);
      for (const t of [...ups.map((u) => u.base), out]) t.free();
    }
  }));

  test(`layout ${dtype}: pad constant, replicate and reflect on several dims`, seeded(async (rng) => {
    const e = await testEngine();
    const cases: [number[], [number, number][], PadMode][] = [
      [[3, 5, 7], [[0, 2], [3, 1]], 'constant'],
      [[2, 4, 6], [[2, 2], [1, 3], [0, 5]], 'replicate'],
      [[2, 5, 7], [[4, 1], [6, 5]], 'reflect'],
      [[2, 33], [[3, 0]], 'reflect'], // left pad only on the last dim
    ];
    for (const [shape, pads, mode] of cases) {
      const x = randomHost(rng, shape, dtype);
      const lead = shape.length - pads.length;
      const before = shape.map((_, d) => (d < lead ? 0 : pads[d - lead]![0]));
      const after = shape.map((_, d) => (d < lead ? 0 : pads[d - lead]![1]));
      const u = uploadAs(e, x, dtype, 'transposed');
      const out = pad(e, u.view, pads, mode, -1.5);
      assertClose(await e.read(out), padRef(x, before, after, mode, -1.5), EXACT, `pad ${mode} ${dtype} [${shape}] ${JSON.stringify(pads)}`);
      u.base.free();
      out.free();
    }
  }));

  test(`layout ${dtype}: gather rows by int32 ids (embedding lookup), out-of-range ids give NaN`, seeded(async (rng) => {
    const e = await testEngine();
    const table = randomHost(rng, [11, 13], dtype);
    const u = uploadAs(e, table, dtype, 'transposed');
    const ids = [3, 0, 10, 3, 7, 1];
    const out = gather(e, u.view, uploadIds(e, ids, [2, 3]));
    assertClose(await e.read(out), gatherRef(table, ids, [2, 3]), EXACT, `gather ${dtype}`);
    const bad = gather(e, u.view, [2, 11, -1]);
    assertClose(await e.read(bad), gatherRef(table, [2, 11, -1], [3]), EXACT, `gather out of range ${dtype}`);
    for (const t of [u.base, out, bad]) t.free();
  }));
}

test('layout: cast f32 <-> f16 of views, odd counts', seeded(async (rng) => {
  const e = await testEngine();
  for (const shape of [[7], [3, 5], [2, 33, 3]]) {
    const x = randomHost(rng, shape, 'f32', -300, 300);
    const u = uploadAs(e, x, 'f32', shape.length > 1 ? 'transposed' : 'sliced');
    const h = cast(e, u.view, 'f16');
    assert.equal(h.dtype, 'f16');
    assertClose(await e.read(h), { data: roundToDType(x.data, 'f16'), shape }, { atol: 0, rtol: 2 ** -10 }, `cast f32->f16 [${shape}]`);
    const xh = randomHost(rng, shape, 'f16', -300, 300);
    const uh = uploadAs(e, xh, 'f16', shape.length > 1 ? 'transposed' : 'sliced');
    const f = cast(e, uh.view, 'f32');
    assertClose(await e.read(f), xh, EXACT, `cast f16->f32 [${shape}]`);
    for (const t of [u.base, h, uh.base, f]) t.free();
  }
}));

test('layout: input checks name the op and the shapes', async () => {
  const e = await testEngine();
  const x = e.empty([2, 3]);
  const y = e.empty([2, 4]);
  assert.throws(() => concat(e, [x, y], 0), /concat: f32\[2,3\], f32\[2,4\] differ outside dim 0/);
  assert.throws(() => pad(e, x, [[0, 3]], 'reflect'), /pad: reflect pads \[0, 3\] on dim 1 of x f32\[2,3\] must be < 3/);
  assert.throws(() => pad(e, x, [[0, 0], [0, 0], [1, 1]]), /pad: 3 pad pairs for x f32\[2,3\]/);
  assert.throws(() => gather(e, e.empty([4]), [1]), /gather: table f32\[4\] must be \[V, D\]/);
  assert.throws(() => copyInto(e, x, y), /copyInto: dst f32\[2,4\] vs src f32\[2,3\]/);
  assert.throws(() => copy(e, x, x), /copy: out f32\[2,3\] aliases an input/);
  for (const t of [x, y]) t.free();
});
