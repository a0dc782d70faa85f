import assert from 'node:assert/strict';
import { test } from 'node:test';
import { auth, startApp } from './harness';

test('/api/health describes the real WebGPU adapter through the engine (lavapipe here, the GPU on a GPU host)', async () => {
  const t = await startApp({ gpu: 'real', env: { GPU_MEMORY_BUDGET: '3GiB' } });
  try {
    const h = (await t.http.get('/api/health').set(auth)).body;
    assert.equal(h.gpu.available, true, `adapter: ${JSON.stringify(h.gpu)}`);
    for (const k of ['name', 'vendor', 'architecture', 'backend', 'features', 'limits', 'memory']) assert.ok(k in h.gpu, k);
    assert.ok(Array.isArray(h.gpu.features));
    assert.ok(h.gpu.limits.maxStorageBufferBindingSize > 0);
    assert.equal(h.gpu.memory.budgetBytes, 3 * 2 ** 30, 'the budget in force: GPU_MEMORY_BUDGET, handed to the worker');
    // the worker checked the tensor-core kernels on its engine: lavapipe has no subgroup matrices, so they stay off,
    // and the reason says so (on a GPU with the feature: on, with the variants checked)
    assert.equal(h.gpu.tensorCores.gemm, false, JSON.stringify(h.gpu.tensorCores));
    assert.equal(h.gpu.tensorCores.attention, false);
    assert.match(h.gpu.tensorCores.reason, /lacks chromium-experimental-subgroup-matrix/);
  } finally {
    await t.close(true); // must also destroy the engine, or this test file would never exit
  }
});
