// linear(x, W, bias?, epilogue): x (..., K) · W^T with W (N, K) as stored by PyTorch -> (..., N), the weight
// read through a transpose view (no copy). W may be an int8 weight with per-output-channel scales
// (see src/engine/quantize.ts), dequantised inside the GEMM. Up to 5 dims in x: the last is K, the one before
// is the GEMM's M, the rest are batch dims. One row in all (decode) runs the GEMV (ops/gemv.ts) instead of the
// tiled GEMM; `path: 'gemv'` asks for it with up to 8 rows.
// W8A8 (issue 43, opt-in): with an int8 weight, `path: 'w8a8'` (or KILN_W8A8=1 on 'auto', for more than 8 rows:
// fewer stay on the GEMV) quantises x per token and runs the i8 x i8 tensor-core GEMM (ops/matmul_w8a8.ts). Where it
// cannot run, 'w8a8' throws the reason and KILN_W8A8=1 keeps W8A16, logging the reason once.
import type { Engine } from '../engine';
import { fmtShape, type Tensor } from '../tensor';
import { gemm, type Epilogue, type GemmOptions } from './matmul';
import { gemmW8A8, w8a8Refusal, type W8A8Options } from './matmul_w8a8';

/** An int8 weight (N, K), 4 bytes per u32 on the GPU, with per-output-channel scales (N) in f32 or f16. */
export interface Int8Weight {
  q: Tensor;
  scales: Tensor;
}

export interface LinearOptions extends Epilogue {
  out?: Tensor;
  tile?: GemmOptions['tile'];
  path?: GemmOptions['path'] | 'w8a8';
  subgroup?: GemmOptions['subgroup'];
  /** The W8A8 kernel's tile, and `emulate` for tests. */
  w8a8?: W8A8Options;
}

const fallbacks = new Set<string>();

export function linear(e: Engine, x: Tensor, w: Tensor | Int8Weight, bias?: Tensor | null, epi: LinearOptions = {}): Tensor {
  const wt = 'q' in w ? w.q : w;
  if (wt.rank !== 2) throw new RangeError(`linear: weight ${wt} must be (N, K)`);
  if (x.rank < 1 || x.rank > 5) throw new RangeError(`linear: x${fmtShape(x.shape)} must have 1..5 dims`);
  const [N, K] = wt.shape as [number, number];
  if (x.shape[x.rank - 1] !== K) throw new RangeError(`linear: x${fmtShape(x.shape)} vs weight (N, K)=${fmtShape(wt.shape)}: K differs`);
  if ('q' in w && w.q.dtype !== 'i8') throw new TypeError(`linear: Int8Weight.q ${w.q} must be i8`);
  const x2 = x.rank === 1 ? x.unsqueeze(0) : x;
  let out = epi.out;
  if (out && x.rank === 1) out = out.unsqueeze(0);
  if (epi.path === 'w8a8' && !('q' in w)) throw new TypeError(`linear: path 'w8a8' needs an int8 weight (Int8Weight), got ${w}`);
  const rows = x2.numel / K;
  if ('q' in w && (epi.path === 'w8a8' || ((epi.path ?? 'auto') === 'auto' && e.settings.w8a8 && rows > 8))) {
    const why = w8a8Refusal(e, x2, w, epi.w8a8);
    if (!why) {
      const y = gemmW8A8(e, 'linear', x2, w, { bias: bias ?? undefined, act: epi.act, gate: epi.gate, residual: epi.residual, out }, epi.w8a8);
      return x.rank === 1 ? y.reshape([N]) : y;
    }
    if (epi.path === 'w8a8') throw new Error(`linear: path 'w8a8' unavailable: ${why}`);
    if (!fallbacks.has(why)) { fallbacks.add(why); console.warn(`[kiln] KILN_W8A8=1: linear keeps W8A16: ${why}`); }
  }
  const { w8a8: _w8a8, path, ...rest } = epi;
  const opts: GemmOptions = { ...rest, path: path as GemmOptions['path'], bias: bias ?? undefined, scales: 'q' in w ? w.scales : undefined };
  const y = gemm(e, 'linear', x2, wt.transpose(), { ...opts, out });
  return x.rank === 1 ? y.reshape([N]) : y;
}
