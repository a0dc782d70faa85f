// The few-row GEMV path of linear() (shaders/gemv.wgsl) vs the float64 reference on fresh random inputs: rows
// 1..GEMV_MAX_ROWS (batched x included), odd K and N, x as contiguous / sliced / transposed views, weights whose rows
// start on 16 bytes (vec4 loads, with and without a tail of single words), on a u32 word only (word loads) and on
// neither (element loads), every epilogue, f32/f16/int8 weights,
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
import type { Tensor } from '../../src/engine/tensor';
import type { Int8Weight } from '../../src/engine/ops/linear';
import { linearRef } from './reference/matmul';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type HostTensor, type Layout, type Rng, type Tolerance } from './helpers';

// As linear/int8 tests: f32 sums over K (up to ~300 here) plus the shader's erf approximation: 1e-4; f16 one rounding.
const TOL: Record<'f32' | 'f16', Tolerance> = { f32: { atol: 1e-4, rtol: 1e-4 }, f16: { atol: 1e-2, rtol: 1e-2 } };
const ACTS: Activation[] = ['none', 'gelu_tanh', 'gelu_erf', 'silu'];
const LAYOUTS: Layout[] = ['contiguous', 'sliced', 'transposed'];
type WKind = 'f32' | 'f16' | 'int8';

/** contiguous; sliced: rows 1..N+1 and columns 1..K+1 of a bigger weight (rows start mid-word for odd K); padded:
 * columns 0..K of a weight whose rows are a multiple of 16 elements (16-byte aligned rows, a partial last vec4). */
type WLayout = 'contiguous' | 'sliced' | 'padded';

/** A random weight (N, K) of the kind as a view in the layout; want = the values the GPU sees. */
function weight(e: Engine, rng: Rng, kind: WKind, N: number, K: number, layout: WLayout, scaleDtype: 'f32' | 'f16' = 'f32') {
  const [rows, cols, r0, c0] = layout === 'sliced' ? [N + 2, K + 2, 1, 1] : layout === 'padded' ? [N, 16 * Math.ceil((K + 1) / 16), 0, 0] : [N, K, 0, 0];
  let full: Float64Array;
  let arg: Tensor | Int8Weight;
  let free: () => void;
  if (kind !== 'int8') {
    full = randomHost(rng, [rows, cols], kind).data;
    const g = e.upload(full, [rows, cols], kind);
    arg = g;
    free = () => g.free();
  } else {
    const wq = quantizeInt8PerChannel(Float32Array.from(rng.normal(rows * cols, 0.2)), rows, cols);
    const s = roundToDType(wq.scales, scaleDtype);
    full = Float64Array.from(wq.q, (v, i) => v * s[Math.floor(i / cols)]!);
    const g = uploadInt8(e, wq, scaleDtype);
    arg = g;
    free = () => { g.q.free(); g.scales.free(); };
  }
  const want: HostTensor = { data: Float64Array.from({ length: N * K }, (_, i) => full[(r0 + Math.floor(i / K)) * cols + c0 + (i % K)]!), shape: [N, K] };
  const view = (t: Tensor) => t.slice(0, r0, r0 + N).slice(1, c0, c0 + K);
  const a = 'q' in arg ? { q: view(arg.q), scales: arg.scales.slice(0, r0, r0 + N) } : view(arg);
  return { want, arg: a, free };
}

for (const kind of ['f32', 'f16', 'int8'] as const) {
  for (const dtype of kind === 'int8' ? (['f32', 'f16'] as const) : [kind]) {
    test(`gemv ${kind} weights, ${dtype} x: rows 1..${GEMV_MAX_ROWS}, odd sizes, views, bias + every activation`, seeded(async (rng) => {
      const e = await testEngine();
      for (let rows = 1; rows <= GEMV_MAX_ROWS; rows++) {
        const act = ACTS[rows % ACTS.length]!;
        const layout = LAYOUTS[rows % LAYOUTS.length]!;
        // rows 2, 6: K a multiple of 16, contiguous (vec4 loads for every kind); rows 4, 8: K = 4 * odd (vec4 for f32,
        // word loads for f16 and int8); rows 1, 5: odd K in padded rows (vec4 plus single words); rows 3, 7: sliced
        const K = rows % 4 === 2 ? 16 * rng.int(1, 20) : rows % 4 === 0 ? 4 * (2 * rng.int(0, 40) + 1) : 2 * rng.int(0, 160) + 1;
        const N = rng.int(1, 70);
        const wl: WLayout = rows % 4 === 3 ? 'sliced' : rows % 4 === 1 ? 'padded' : 'contiguous';
        // 1-row cases as a vector (K) or (1, K); 4 and 6 rows as a batched (2, rows/2, K)
        const xshape = rows === 1 ? (act === 'none' ? [K] : [1, K]) : rows === 4 || rows === 6 ? [2, rows / 2, K] : [rows, K];
        const x = randomHost(rng, xshape, dtype, -2, 2);
        const gx = uploadAs(e, x, dtype, layout);
        const w = weight(e, rng, kind, N, K, wl, rows % 2 ? 'f32' : 'f16');
        const bias = randomHost(rng, [N], dtype);
        const gb = e.upload(bias.data, bias.shape, dtype);
        const out = poisoned(e, [...xshape.slice(0, -1), N], dtype);
        linear(e, gx.view, w.arg, gb, { act, out, path: rows > 1 ? 'gemv' : 'auto' });
        const label = `gemv ${kind}/${dtype} x${JSON.stringify(xshape)} ${layout} W[${N},${K}] ${wl} ${act}`;
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
      const w = weight(e, rng, kind, N, K, 'contiguous');
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
