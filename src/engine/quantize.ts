// Load-time weight quantisation (CPU, no GPU): symmetric int8 per output channel, for the int8 profiles'
// weight-only GEMM (ops/linear.ts with an Int8Weight). scale[n] = max_k |w[n,k]| / 127, q = round(w / scale)
// clamped to [-127, 127] (symmetric: -128 is never used, so negating a weight is exact). A row of zeros gets
// scale 0 and q 0.
import type { Engine } from './engine';
import type { DType } from './dtype';
import type { Int8Weight } from './ops/linear';

/** Bump when quantizeRowsInto's arithmetic (or the bytes it gives) changes: the int8 cache (int8-cache.ts) then
 * ignores every entry an older version wrote. */
export const QUANTIZER_VERSION = 1;

export interface QuantizedInt8 {
  /** (N, K) row-major. */
  q: Int8Array;
  /** (N). */
  scales: Float32Array;
  N: number;
  K: number;
}

export function quantizeInt8PerChannel(w: ArrayLike<number>, N: number, K: number): QuantizedInt8 {
  if (w.length !== N * K) throw new RangeError(`quantizeInt8PerChannel: ${w.length} values for (N, K) = (${N}, ${K})`);
  const q = new Int8Array(N * K);
  const scales = new Float32Array(N);
  quantizeRowsInto(w, K, N, q, scales, 0);
  return { q, scales, N, K };
}

/**
 * quantizeInt8PerChannel's arithmetic over `rows` rows of `w` (rows x K) into q (rows x K) and scales (rows): the one
 * loop both it and the load-time worker pool (quantize-parallel.ts) run, so both give the same bytes. `firstRow`
 * only numbers rows in the error message.
 */
export function quantizeRowsInto(w: ArrayLike<number>, K: number, rows: number, q: Int8Array, scales: Float32Array, firstRow: number): void {
  // plain compares instead of Math.max/abs/min calls: this runs over every int8 weight at load (billions)
  for (let n = 0, row = 0; n < rows; n++, row += K) {
    let max = 0;
    for (let k = 0; k < K; k++) {
      const v = w[row + k]!;
      const a = v < 0 ? -v : v;
      if (a > max || a !== a) max = a;
    }
    if (!Number.isFinite(max)) throw new RangeError(`quantizeInt8PerChannel: row ${firstRow + n} has a non-finite weight`);
    const s = Math.fround(max / 127);
    scales[n] = s;
    if (s === 0) continue;
    for (let k = 0; k < K; k++) {
      const r = Math.round(w[row + k]! / s);
      q[row + k] = r > 127 ? 127 : r < -127 ? -127 : r;
    }
  }
}

/** Uploads a quantised weight as an Int8Weight (scales in f32, or f16 to match f16 activations). */
export function uploadInt8(e: Engine, w: QuantizedInt8, scaleDtype: Exclude<DType, 'i8'> = 'f32', label = 'int8 weight'): Int8Weight {
  return {
    q: e.upload(w.q, [w.N, w.K], 'i8', `${label} q`),
    scales: e.upload(w.scales, [w.N], scaleDtype, `${label} scales`),
  };
}

/** The tensors uploadInt8 would make for an (N, K) weight, without values (the shape-only engine's int8 load). */
export function emptyInt8(e: Engine, N: number, K: number, scaleDtype: Exclude<DType, 'i8'> = 'f32', label = 'int8 weight'): Int8Weight {
  return { q: e.empty([N, K], 'i8', `${label} q`), scales: e.empty([N], scaleDtype, `${label} scales`) };
}
