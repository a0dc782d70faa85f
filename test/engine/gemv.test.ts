// The few-row GEMV path of linear() (shaders/gemv.wgsl) vs the float64 reference on fresh random inputs: rows
// 1..GEMV_MAX_ROWS (batched x included), odd K and N, x as contiguous / sliced / transposed views, weights whose rows
// start on a u32 word (whole-word loads) and ones that do not (element loads), every epilogue, f32/f16/int8 weights,
// poisoned outputs. 'auto' takes the GEMV for 1 row only, so 2..8 rows ask for it with path 'gemv'. Then which kernel
// linear() and matmul() pick, read from the recorder's batch of kernel names.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { linear } from '../../src/engine/ops/linear';
import { matmul, type Activation } from '../../src/engine/ops/matmul';
import { GEMV_MAX_ROWS } from '../../src/engine/ops/gemv';
import { quantizeInt8PerChannel, uploadInt8 } from '../../src/engine/quantize';
import { roundToDType } from '../../src/engine/dtype';
import type { Engine } from '../../src/engine/engine';
import { linearRef } from './reference/matmul';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type HostTensor, type Layout, type Rng, type Tolerance } from './helpers';

// As linear/int8 tests: f32 sums over K (up to ~300 here) plus the shader's erf approximation: 1e-4; f16 one rounding.
const TOL: Record<'f32' | 'f16', Tolerance> = { f32: { atol: 1e-4, rtol: 1e-4 }, f16: { atol: 1e-2, rtol: 1e-2 } };
const ACTS: Activation[] = ['none', 'gelu_tanh', 'gelu_erf', 'silu'];
const LAYOUTS: Layout[] = ['contiguous', 'sliced', 'transposed'];
type WKind = 'f32' | 'f16' | 'int8';

/** A random weight (N, K) of the kind, uploaded as a contiguous or sliced view; want = the values the GPU sees. */
function weight(e: Engine, rng: Rng, kind: WKind, N: number, K: number, sliced: boolean, scaleDtype: 'f32' | 'f16' = 'f32') {
  if (kind !== 'int8') {
    const w = randomHost(rng, [N, K], kind);
    const g = uploadAs(e, w, kind, sliced ? 'sliced' : 'contiguous');
    return { want: w, arg: g.view, free: () => g.base.free() };
  }
  // int8: quantise N + 2 rows and take rows 1..N+1 when sliced (the view starts mid-word for K % 4 != 0)
  const rows = sliced ? N + 2 : N;
  const wq = quantizeInt8PerChannel(Float32Array.from(rng.normal(rows * K, 0.2)), rows, K);
  const s = roundToDType(wq.scales, scaleDtype);
  const r0 = sliced ? 1 : 0;
  const want: HostTensor = { data: Float64Array.from({ length: N * K }, (_, i) => wq.q[r0 * K + i]! * s[r0 + Math.floor(i / K)]!), shape: [N, K] };
  const g = uploadInt8(e, wq, scaleDtype);
  const arg = sliced ? { q: g.q.slice(0, 1, N + 1), scales: g.scales.slice(0, 1, N + 1) } : g;
  return { want, arg, free: () => { g.q.free(); g.scales.free(); } };
}

for (const kind of ['f32', 'f16', 'int8'] as const) {
  for (const dtype of kind === 'int8' ? (['f32', 'f16'] as const) : [kind]) {
    test(`gemv ${kind} weights, ${dtype} x: rows 1..${GEMV_MAX_ROWS}, odd sizes, views, bias + every activation`, seeded(async (rng) => {
      const e = await testEngine();
      for (let rows = 1; rows <= GEMV_MAX_ROWS; rows++) {
        const act = ACTS[rows % ACTS.length]!;
        const layout = LAYOUTS[rows % LAYOUTS.length]!;
        // even rows: K a multiple of 4 (whole-word weight loads when contiguous); odd rows: odd K (element loads)
        const K = rows % 2 === 0 ? 4 * rng.int(1, 80) : 2 * rng.int(0, 160) + 1;
        const N = rng.int(1, 70);
        const slicedW = rows % 4 === 3;
        // 1-row cases as a vector (K) or (1, K); 4 and 6 rows as a batched (2, rows/2, K)
        const xshape = rows === 1 ? (act === 'none' ? [K] : [1, K]) : rows === 4 || rows === 6 ? [2, rows / 2, K] : [rows, K];
        const x = randomHost(rng, xshape, dtype, -2, 2);
        const gx = uploadAs(e, x, dtype, layout);
        const w = weight(e, rng, kind, N, K, slicedW, rows % 2 ? 'f32' : 'f16');
        const bias = randomHost(rng, [N], dtype);
        const gb = e.upload(bias.data, bias.shape, dtype);
        const out = poisoned(e, [...xshape.slice(0, -1), N], dtype);
        linear(e, gx.view, w.arg, gb, { act, out, path: rows > 1 ? 'gemv' : 'auto' });
        const label = `gemv ${kind}/${dtype} x${JSON.stringify(xshape)} ${layout} W[${N},${K}]${slicedW ? ' sliced' : ''} ${act}`;
        assertClose(await e.read(out), linearRef(x, w.want, { bias, act }), TOL[dtype], label);
        for (const t of [gx.base, gb, out]) t.free();
        w.free();
      }
    }));

    test(`gemv ${kind} weights, ${dtype} x: gate and residual epilogues`, seeded(async (rng) => {
      const e = await testEngine();
      const [B, L, K, N] = [2, 3, 2 * rng.int(1, 100) + 1, 2 * rng.int(4, 40) + 1];
      const x = randomHost(rng, [B, L, K], dtype);
      const gx = uploadAs(e, x, dtype, 'sliced');
      const w = weight(e, rng, kind, N, K, false);
      const bias = randomHost(rng, [N], dtype);
      const gb = e.upload(bias.data, bias.shape, dtype);
      // SwiGLU-style act(xW + b) * g, g (B, L, N) a transposed view
      const g = randomHost(rng, [B, L, N], dtype);
      const gg = uploadAs(e, g, dtype, 'transposed');
      let out = poisoned(e, [B, L, N], dtype);
      linear(e, gx.view, w.arg, gb, { act: 'silu', gate: gg.view, out, path: 'gemv' });
      assertClose(await e.read(out), linearRef(x, w.want, { bias, act: 'silu', gate: g }), TOL[dtype], `gemv ${kind}/${dtype} silu * gate`);
      out.free();
      // adaLN-style r + gate * (xW + b), gate (B, 1, N) broadcast over tokens, r a sliced view
      const gate = randomHost(rng, [B, 1, N], dtype);
      const r = randomHost(rng, [B, L, N], dtype);
      const ggate = e.upload(gate.data, gate.shape, dtype);
      const gr = uploadAs(e, r, dtype, 'sliced');
      out = poisoned(e, [B, L, N], dtype);
      linear(e, gx.view, w.arg, gb, { gate: ggate, residual: gr.view, out, path: 'gemv' });
      assertClose(await e.read(out), linearRef(x, w.want, { bias, gate, residual: r }), TOL[dtype], `gemv ${kind}/${dtype} residual + gate`);
      out.free();
      // residual alone (broadcast (N) over rows), no bias
      const rv = randomHost(rng, [N], dtype);
      const grv = e.upload(rv.data, rv.shape, dtype);
      out = linear(e, gx.view, w.arg, null, { residual: grv, path: 'gemv' });
      assertClose(await e.read(out), linearRef(x, w.want, { residual: rv }), TOL[dtype], `gemv ${kind}/${dtype} residual`);
      for (const t of [out, gx.base, gb, gg.base, ggate, gr.base, grv]) t.free();
      w.free();
    }));
  }
}

/** The kernel the last recorded dispatch ran (the recorder's open batch, emptied by sync()). */
async function lastKernel(e: Engine, run: () => void): Promise<string> {
  await e.sync();
  run();
  const name = e.recorder.recent.at(-1) ?? '';
  await e.sync();
  return name;
}

test('gemv: linear() takes it for 1 row against a (N, K) weight (or when asked), the tiled kernel otherwise', async () => {
  const e = await testEngine();
  const [K, N] = [40, 24];
  const w = e.upload(new Float32Array(N * K).fill(0.5), [N, K]);
  const x = (rows: number) => e.upload(new Float32Array(rows * K).fill(1), [rows, K]);
  const cases: [string, () => ReturnType<typeof linear>, RegExp][] = [
    ['1 row', () => linear(e, x(1), w), /^gemv\.wgsl:gemv</],
    ['vector', () => linear(e, x(1).reshape([K]), w), /^gemv\.wgsl:gemv</],
    ['2 rows', () => linear(e, x(2), w), /^matmul\.wgsl:matmul</],
    [`${GEMV_MAX_ROWS} rows, path gemv`, () => linear(e, x(GEMV_MAX_ROWS), w, null, { path: 'gemv' }), /^gemv\.wgsl:gemv</],
    ['64 rows', () => linear(e, x(64), w), /^matmul\.wgsl:matmul</],
    ['1 row, path tiled', () => linear(e, x(1), w, null, { path: 'tiled' }), /^matmul\.wgsl:matmul</],
    // matmul's B (K, N) row-major has n contiguous, not k: not a layout the GEMV reads
    ['matmul 1 row, B (K, N)', () => matmul(e, x(1), e.upload(new Float32Array(K * N), [K, N])), /^matmul\.wgsl:matmul</],
    ['matmul 1 row, B = W^T', () => matmul(e, x(1), w.transpose()), /^gemv\.wgsl:gemv</],
  ];
  for (const [label, run, want] of cases) {
    let y: ReturnType<typeof linear> | null = null;
    const name = await lastKernel(e, () => { y = run(); });
    assert.match(name, want, label);
    // the value confirms the kernel ran: every output is K * 0.5 (matmul of zeros: 0)
    const got = await e.read(y!);
    assert.ok(got.every((v) => v === (label.includes('(K, N)') ? 0 : K * 0.5)), `${label}: ${got[0]}`);
  }
  assert.throws(() => linear(e, x(GEMV_MAX_ROWS + 1), w, null, { path: 'gemv' }), /linear: path 'gemv': 9 rows > 8/);
  assert.throws(() => matmul(e, x(1), e.upload(new Float32Array(K * N), [K, N]), { path: 'gemv' }), /matmul: path 'gemv': b f32\[40,24\] is not a shared \(N, K\) weight's transpose/);
});
