// linear(x, W, bias?, epilogue): x (..., K) · W^T with W (N, K) as stored by PyTorch -> (..., N), the weight
// read through a transpose view (no copy). W may be an int8 weight with per-output-channel scales
// (see src/engine/quantize.ts), dequantised inside the GEMM. Up to 5 dims in x: the last is K, the one before
// is the GEMM's M, the rest are batch dims. One row in all (decode) runs the GEMV (ops/gemv.ts) instead of the
// tiled GEMM; `path: 'gemv'` asks for it with up to 8 rows.
import type { Engine } from '../engine';
import { fmtShape, type Tensor } from '../tensor';
import { gemm, type Epilogue, type GemmOptions } from './matmul';

/** An int8 weight (N, K), 4 bytes per u32 on the GPU, with per-output-channel scales (N) in f32 or f16. */
export interface Int8Weight {
  q: Tensor;
  scales: Tensor;
}

export interface LinearOptions extends Epilogue {
  out?: Tensor;
  tile?: GemmOptions['tile'];
  path?: GemmOptions['path'];
  subgroup?: GemmOptions['subgroup'];
}

export function linear(e: Engine, x: Tensor, w: Tensor | Int8Weight, bias?: Tensor | null, epi: LinearOptions = {}): Tensor {
  const wt = 'q' in w ? w.q : w;
  if (wt.rank !== 2) throw new RangeError(`linear: weight ${wt} must be (N, K)`);
  if (x.rank < 1 || x.rank > 5) throw new RangeError(`linear: x${fmtShape(x.shape)} must have 1..5 dims`);
  const [N, K] = wt.shape as [number, number];
  if (x.shape[x.rank - 1] !== K) throw new RangeError(`linear: x${fmtShape(x.shape)} vs weight (N, K)=${fmtShape(wt.shape)}: K differs`);
  if ('q' in w && w.q.dtype !== 'i8') throw new TypeError(`linear: Int8Weight.q ${w.q} must be i8`);
  const x2 = x.rank === 1 ? x.unsqueeze(0) : x;
  const opts: GemmOptions = { ...epi, bias: bias ?? undefined, scales: 'q' in w ? w.scales : undefined };
  let out = epi.out;
  if (out && x.rank === 1) out = out.unsqueeze(0);
  const y = gemm(e, 'linear', x2, wt.transpose(), { ...opts, out });
  return x.rank === 1 ? y.reshape([N]) : y;
}
