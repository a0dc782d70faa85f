// The tensor-core path's default (issue 43, production settings; src/engine/tensor-cores.ts): on where the adapter has
// subgroup matrices and a self-test of the variants 'auto' would take passes, off with the reason otherwise. On
// lavapipe the native feature is absent (the check says so, instantly); the kernels themselves are checked through
// the emulated builtins, and a variant made to fail turns the path off with its error named.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Engine } from '../../src/engine/engine';
import { checkTensorCores, TENSOR_CORES_UNCHECKED } from '../../src/engine/tensor-cores';
import { Tuning } from '../../src/engine/tuning';
import { testEngine } from './helpers';

test('an engine starts unchecked: the tensor-core path opt-in, and describe() says so', async () => {
  const e = await testEngine();
  assert.deepEqual(e.describe().tensorCores, TENSOR_CORES_UNCHECKED);
});

test('natively: on where the adapter has subgroup matrices and its kernels pass; else off, naming what is missing', { timeout: 600_000 }, async () => {
  const e = await testEngine();
  const s = await checkTensorCores(e);
  if (e.gpu.hasFeature('chromium-experimental-subgroup-matrix')) {
    // a GPU (the device call's tests step): the real self-test of the worker, every variant 'auto' would take
    assert.equal(s.gemm, true, s.reason);
    assert.equal(s.attention, e.settings.subgroupAttention, s.reason);
    assert.ok(s.checked.includes('gemm default'), s.checked.join(', '));
    console.log(`# tensor cores: ${s.reason} (${s.ms.toFixed(0)} ms)`);
    return;
  }
  assert.equal(s.gemm, false);
  assert.equal(s.attention, false);
  assert.match(s.reason, /lacks chromium-experimental-subgroup-matrix/);
  assert.deepEqual(s.checked, []);
});

test('KILN_SUBGROUP_MATRIX=0 turns it off before anything is checked', async () => {
  const e = await testEngine();
  const off = Object.create(e, { settings: { value: { ...e.settings, subgroupMatrixOff: true } } }) as Engine;
  const s = await checkTensorCores(off, { emulate: true });
  assert.equal(s.gemm, false);
  assert.equal(s.reason, 'KILN_SUBGROUP_MATRIX=0');
});

test('a GEMM variant that computes wrong turns the path off, naming the variant, the element and the tolerance', async () => {
  const e = await testEngine();
  // B read transposed-by-mistake: right size, wrong elements
  const wrong = async (_v: string, a: Float32Array, b: Float32Array, M: number, K: number, N: number) => {
    const out = new Float32Array(M * N);
    for (let i = 0; i < M; i++) for (let j = 0; j < N; j++) for (let k = 0; k < K; k++) out[i * N + j]! += a[i * K + k]! * b[((k * N + j) * 7) % (K * N)]!;
    return out;
  };
  const s = await checkTensorCores(e, { emulate: true, gemmVariants: ['db64'], runGemm: wrong });
  assert.equal(s.gemm, false);
  assert.equal(s.attention, false);
  assert.match(s.reason, /the tensor-core GEMM \(db64\) failed its self-test: 67x80 by 80x72: .* at \(\d+, \d+\) against .* \(tolerance /);
  assert.deepEqual(s.checked, ['gemm db64']);
  // one that throws (a kernel that does not compile) is named the same way
  const broken = await checkTensorCores(e, { emulate: true, gemmVariants: ['x'], runGemm: async () => { throw new Error('kernel x: no such tile'); } });
  assert.equal(broken.gemm, false);
  assert.match(broken.reason, /\(x\) failed its self-test: kernel x: no such tile/);
});

test('with the path on, the default takes the tensor-core GEMM for medium and large outputs; a table still rules', () => {
  const none = new Tuning(null, 'no table');
  assert.deepEqual(none.gemm(64, 64, true), { path: 'tiled' }, 'small stays register-tiled');
  assert.deepEqual(none.gemm(1024, 3072, true), { path: 'subgroup' });
  assert.deepEqual(none.gemm(4096, 12288, true), { path: 'subgroup' });
  assert.deepEqual(none.gemm(4096, 12288, false), { path: 'tiled' }, 'unchecked or failed: as before');
  const table = new Tuning({ version: 1, adapter: { vendor: 'nvidia', architecture: 'hopper' }, gemm: { large: { path: 'tiled' }, medium: { path: 'subgroup', variant: 'db128' } } }, 'a table');
  assert.deepEqual(table.gemm(4096, 12288, true), { path: 'tiled' });
  assert.deepEqual(table.gemm(1024, 3072, true), { path: 'subgroup', variant: 'db128' });
});

test('the real kernels pass the check through the emulated builtins (a small GEMM tile and the attention)', { timeout: 1_800_000 }, async (t) => {
  const e = await testEngine();
  // where the feature is native the check above ran the real kernels; emulated compiles are minutes on lavapipe
  if (e.gpu.hasFeature('chromium-experimental-subgroup-matrix')) return t.skip('native subgroup matrices: checked natively above');
  const s = await checkTensorCores(e, { emulate: true, gemmVariants: ['64'], attention: true });
  assert.equal(s.gemm, true, s.reason);
  assert.equal(s.attention, true, s.reason);
  assert.deepEqual(s.checked, ['gemm 64', 'attention']);
  assert.match(s.reason, /^checked on .*: gemm 64, attention$/);
  // applied, describe() reports it (the worker's hello carries describe())
  const before = e.tensorCores;
  try {
    e.useTensorCores(s);
    assert.equal(e.describe().tensorCores.gemm, true);
  } finally {
    e.useTensorCores(before);
  }
});
