// Device creation, description, software guard, loss and rebuild, clean exit, errors named after kernels.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { GpuDevice, DeviceLostError } from '../../src/engine/device';
import { EngineHolder } from '../../src/engine/engine';
import { KernelError, Params } from '../../src/engine/kernels';
import { arith } from '../../src/engine/ops/elementwise';
import { testEngine } from './helpers';

test('describe() is a plain object for /api/health', async (t) => {
  const e = await testEngine();
  const d = e.describe();
  t.diagnostic(JSON.stringify(d));
  assert.equal(typeof d.name, 'string');
  assert.equal(typeof d.vendor, 'string');
  assert.ok(d.limits.maxStorageBufferBindingSize >= 128 * 2 ** 20);
  assert.ok(d.limits.maxStorageBufferBindingSize <= 2 ** 32);
  assert.ok(Array.isArray(d.subgroupMatrixConfigs));
  assert.equal(d.lost, null);
  assert.deepEqual(JSON.parse(JSON.stringify(d)), d);
  if (d.software) {
    // lavapipe: f16 and subgroups exist, tensor cores do not
    assert.ok(d.features.includes('shader-f16'));
    assert.deepEqual(d.subgroupMatrixConfigs, []);
  }
});

test('a software adapter is refused unless allowed', async (t) => {
  const e = await testEngine();
  if (!e.gpu.isSoftware) return t.skip('adapter is a GPU: nothing to refuse');
  await assert.rejects(GpuDevice.create({ allowSoftware: false }), /CPU\/software.*KILN_ALLOW_SOFTWARE_GPU=1/s);
});

test('destroy() lets Node exit', () => {
  const engineJs = join(__dirname, '../../src/engine/engine.js');
  const script = `
    const { Engine } = require(${JSON.stringify(engineJs)});
    Engine.create({ allowSoftware: true }).then(async (e) => {
      const t = e.upload([1, 2, 3], [3]);
      console.log(Array.from(await e.read(t)).join(','));
      e.destroy();
    });`;
  const start = Date.now();
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 });
  const ms = Date.now() - start;
  assert.equal(r.signal, null, `node did not exit after destroy() (killed after ${ms} ms): ${r.stderr}`);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), '1,2,3');
  assert.ok(ms < 5000, `exit took ${ms} ms`);
});

test('a lost device is reported, and the holder rebuilds the engine', async () => {
  const holder = new EngineHolder({ allowSoftware: true });
  const first = await holder.get();
  const a = first.upload([1, 2], [2]);
  first.device.destroy(); // what a driver reset looks like from here
  await first.device.lost;
  assert.ok(first.lost);
  assert.throws(() => arith(first, 'add', a, a), DeviceLostError);
  const second = await holder.get();
  assert.notEqual(second, first);
  assert.equal(holder.generation, 2);
  const b = second.upload([1, 2], [2]);
  assert.deepEqual(Array.from(await second.read(arith(second, 'add', b, b))), [2, 4]);
  holder.destroy();
  first.destroy();
});

test('a WGSL error names the kernel and the file line', async () => {
  const e = await testEngine();
  const source = '@compute @workgroup_size(1)\nfn main() {\n  let x: u32 = 1.5;\n}\n';
  await assert.rejects(
    e.kernels.compile({ shader: 'broken', source, dtype: 'f32' }),
    (err: Error) => err instanceof KernelError && /broken\.wgsl:main<f32>/.test(err.message) && /line 3:/.test(err.message),
  );
  // the synchronous path reports at the next sync()
  e.kernels.get({ shader: 'broken2', source, dtype: 'f16' });
  await assert.rejects(e.sync(), /broken2\.wgsl:main<f16>/);
});

test('a bad dispatch names the kernel', async () => {
  const e = await testEngine();
  const kernel = e.kernels.get({ shader: 'elementwise', entry: 'copy', dtype: 'f32', constants: { WG: 64 } });
  const t = e.empty([4]);
  // copy needs out and a; binding only out is a validation error
  e.recorder.dispatch({ kernel, bindings: [t], params: new Params().u32(4), workgroups: [1] });
  await assert.rejects(e.sync(), /elementwise\.wgsl:copy<f32>\{WG=64\}/);
  t.free();
});

test('dispatches share passes and are submitted in batches', async () => {
  const e = await testEngine();
  const a = e.upload([1], [1]);
  const before = e.recorder.submitCount;
  let x = a;
  for (let i = 0; i < 100; i++) {
    const y = arith(e, 'add', x, 1);
    if (x !== a) x.free();
    x = y;
  }
  assert.equal(e.recorder.submitCount - before, Math.floor(100 / e.recorder.submitEvery));
  assert.deepEqual(Array.from(await e.read(x)), [101]);
  a.free();
  x.free();
});
