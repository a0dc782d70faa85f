// The few-row GEMM path (decode: 1 row per step): shaders/gemv.wgsl. B must be a linear weight's transpose view:
// W (N, K) with k contiguous, shared by every batch (what linear() passes). gemm() (ops/matmul.ts) takes it for
// path 'auto' without a tile override when the output has 1 row in all, and for path 'gemv' up to GEMV_MAX_ROWS
// rows. Why 'auto' stops at 1 row: the GEMV sums K in a different order than the tiled kernel, so a row's last bits
// depend on which kernel ran; taking it for 2..8 rows made a 4-frame and a 5-frame codec decode (8 vs 10 rows after
// upsampling) disagree in the shared frames (test/models/qwen3_tts_codec_decoder.test.ts wants them equal).
// Batched decode callers that accept that opt in with path 'gemv'. Same epilogue and dtypes as the tiled path.
//   reference: test/engine/reference/matmul.ts; tests: test/engine/gemv.test.ts
import type { Engine } from '../engine';
import { Params } from '../kernels';
import type { Tensor } from '../tensor';
import { ACT_CODE, type Activation } from './matmul';

/** Most rows (batches x M) one GEMV dispatch handles; `ROWS` in shaders/gemv.wgsl. */
export const GEMV_MAX_ROWS = 8;
const WG = 256;
const TPC = 32; // threads per output column: 32 consecutive words (128 B) of a weight row per step
const COLS = WG / TPC;

/** Why the GEMV cannot run rows x b, b (batch..., K, N) expanded to the output's batch dims; null if it can. */
export function gemvRefusal(rows: number, b: Tensor): string | null {
  if (rows > GEMV_MAX_ROWS) return `${rows} rows > ${GEMV_MAX_ROWS}`;
  const r = b.rank;
  if (b.strides[r - 2] !== 1 || b.strides.slice(0, -2).some((s) => s !== 0)) {
    return `b ${b} is not a shared (N, K) weight's transpose (k stride ${b.strides[r - 2]}, batch strides ${b.strides.slice(0, -2).join(',') || 'none'})`;
  }
  return null;
}

export interface Gemv {
  /** x (batch..., M, K) and b = W^T (batch..., K, N) expanded to the output's batch dims; out contiguous (any offset). */
  a: Tensor; b: Tensor; out: Tensor; M: number; N: number; K: number; batch: number[];
  bias?: Tensor; gate?: Tensor; residual?: Tensor; scales?: Tensor; act: Activation;
}

export function gemv(e: Engine, g: Gemv): void {
  const { a, b, out, M, N, K, bias, gate, residual, scales } = g;
  const rows = g.batch.reduce((x, y) => x * y, 1) * M;
  const per = b.dtype === 'f32' ? 1 : b.dtype === 'f16' ? 2 : 4; // weights per u32 word
  const rowStride = b.strides[b.rank - 1]!;
  // Whole-word loads need every row W[n, 0] to start a word (N = 1 has a single row).
  const aligned = b.offset % per === 0 && (N === 1 || rowStride % per === 0);
  // vec4<u32> loads need every row to start on 16 bytes (4 words).
  const vec4 = aligned && b.offset % (4 * per) === 0 && (N === 1 || rowStride % (4 * per) === 0);
  const bstr = (t: Tensor | undefined) => pad3(t ? t.strides.slice(0, -2) : []);
  const mat = (t: Tensor | undefined) => (t ? [t.strides[t.rank - 2]!, t.strides[t.rank - 1]!] : [0, 0]);
  const blocks = Math.ceil(N / COLS);
  const max = e.gpu.device.limits.maxComputeWorkgroupsPerDimension;
  const gx = Math.min(blocks, max);
  const params = new Params()
    .u32(rows).u32(M).u32(N).u32(K)
    .dims(pad3(g.batch, 1), 4)
    .dims([a.offset, b.offset, bias?.offset ?? 0, scales?.offset ?? 0], 4)
    .dims([gate?.offset ?? 0, residual?.offset ?? 0, scales?.strides[0] ?? 0, bias?.strides[0] ?? 0], 4)
    .dims(bstr(a), 4).dims(mat(a), 4)
    .dims(bstr(gate), 4).dims(mat(gate), 4)
    .dims(bstr(residual), 4).dims(mat(residual), 4)
    .dims([rowStride, gx, out.offset, 0], 4);
  const kernel = e.kernels.get({
    shader: 'gemv',
    entry: 'gemv',
    dtype: a.dtype,
    constants: {
      WG, TPC,
      BTYPE: b.dtype === 'f32' ? 0 : b.dtype === 'f16' ? 1 : 2,
      STYPE: scales?.dtype === 'f16' ? 1 : 0,
      ACT: ACT_CODE[g.act],
      ALIGNED: aligned, VEC4: vec4, BIAS: !!bias, GATE: !!gate, RESID: !!residual, SATURATE: a.dtype === 'f16',
    },
  });
  e.recorder.dispatch({
    kernel,
    bindings: [out, a, b, bias ?? a, gate ?? a, residual ?? a, scales ?? a, b],
    params,
    workgroups: [gx, Math.ceil(blocks / gx)],
    flops: 2 * rows * N * K,
  });
}

function pad3(v: readonly number[], fill = 0): number[] {
  return [...Array<number>(3 - v.length).fill(fill), ...v];
}
