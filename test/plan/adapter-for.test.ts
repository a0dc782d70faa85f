// The adapter profile a dry run's plan stands for (src/plan/adapter-for.ts): the worker's where one is recorded, else
// the H200's with a note that says so and why.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { adapterFor } from '../../src/plan/adapter-for';

describe('adapterFor: the plan\'s adapter from what the worker reported', () => {
  it('this box\'s lavapipe and an H200 are their own profiles, with no note', () => {
    assert.deepEqual(adapterFor({ available: true, software: true, name: 'llvmpipe (LLVM 15.0.7, 256 bits)' }), { adapter: adapterFor({ available: true, software: true, name: 'llvmpipe' }).adapter });
    assert.equal(adapterFor({ available: true, software: true, name: 'llvmpipe (LLVM 15.0.7, 256 bits)' }).adapter.id, 'lavapipe');
    const h200 = adapterFor({ available: true, software: false, name: 'NVIDIA H200 NVL' });
    assert.equal(h200.adapter.id, 'h200');
    assert.equal(h200.note, undefined);
  });

  it('no adapter yet, none at all, or one with no recorded profile: the H200 assumed, and why', () => {
    assert.match(adapterFor(undefined).note!, /^adapter profile assumed: NVIDIA H200 \(the GPU worker has not reported its adapter\)$/);
    assert.match(adapterFor({ available: false, error: 'no WebGPU adapter' }).note!, /assumed: NVIDIA H200 \(no WebGPU adapter\)/);
    const other = adapterFor({ available: true, software: false, name: 'AMD Radeon RX 7900 XTX' });
    assert.equal(other.adapter.id, 'h200');
    assert.match(other.note!, /"AMD Radeon RX 7900 XTX", has no recorded profile/);
    const swift = adapterFor({ available: true, software: true, name: 'SwiftShader Device' });
    assert.equal(swift.adapter.id, 'lavapipe');
    assert.match(swift.note!, /assumed: llvmpipe/);
  });
});
