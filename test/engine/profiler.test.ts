// The per-kernel GPU-time profiler (src/engine/profiler.ts): every dispatch is counted under its kernel and grid, once;
// the times are real timestamps (a 256^3 GEMM outlasts a 16-element add); results stay right with each dispatch in
// a pass of its own, across a full query set (more than 1024 dispatches before a sync) and params-ring flushes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../../src/engine/engine';
import { arith } from '../../src/engine/ops/elementwise';
import { matmul } from '../../src/engine/ops/matmul';
import { formatProfile } from '../../src/engine/profiler';

test('profiler: per-kernel calls and GPU time, results intact across a full query set', async (t) => {
  const e = await Engine.create({ debug: true, allowSoftware: true, profile: true });
  t.after(() => e.shutdown());
  assert.ok(e.profiler, 'profile: true gives an engine a profiler');
  const n0 = e.recorder.dispatchCount;
  let x = e.upload(new Float32Array(16), [16]);
  for (let i = 0; i < 1100; i++) {   // 1100 > the 1024 dispatches a query set holds
    const y = arith(e, 'add', x, 1);
    x.free();
    x = y;
  }
  const adds = e.recorder.dispatchCount - n0;
  const addKernel = `${e.recorder.recent.at(-1)!} [1,1,1]`;   // 16 elements: one workgroup
  const a = e.upload(Array.from({ length: 256 * 256 }, (_, i) => (i % 7) - 3), [256, 256]);
  const m0 = e.recorder.dispatchCount;
  const c = matmul(e, a, a);
  const gemms = e.recorder.dispatchCount - m0;
  const gemmName = e.recorder.recent.at(-1)!;
  assert.deepEqual([...await e.read(x)], new Array(16).fill(1100), 'the chained adds are all there, in order');
  await e.read(c);
  const rows = await e.profiler.report();
  const byName = new Map(rows.map((r) => [r.kernel, r]));
  const gemmKernel = rows.find((r) => r.kernel.startsWith(`${gemmName} [`))?.kernel ?? `${gemmName} (not in the report)`;
  assert.equal(byName.get(addKernel)?.calls, adds, `${addKernel}: one count per dispatch`);
  assert.equal(byName.get(gemmKernel)?.calls, gemms, `${gemmKernel}: one count per dispatch`);
  assert.equal(rows.reduce((s, r) => s + r.calls, 0), e.recorder.dispatchCount, 'every dispatch since the engine was made is counted once');
  const perAdd = byName.get(addKernel)!.ms / adds;
  const perGemm = byName.get(gemmKernel)!.ms / gemms;
  assert.ok(perGemm > perAdd && perGemm > 0, `a 256^3 GEMM (${perGemm} ms) outlasts a 16-element add (${perAdd} ms)`);
  const text = formatProfile(rows, 1);
  assert.match(text.at(-1)!, /ms total GPU time in \d+ dispatches/);
  assert.equal(rows[0]!.ms >= rows.at(-1)!.ms, true, 'most time first');
  await e.profiler.reset();
  assert.deepEqual(await e.profiler.report(), []);
  for (const y of [x, a, c]) y.free();
});

test('profiler: off unless asked', async (t) => {
  const e = await Engine.create({ debug: true, allowSoftware: true, profile: false });
  t.after(() => e.shutdown());
  assert.equal(e.profiler, null);
});
