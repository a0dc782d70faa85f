// CPU reference for shaders/resample.wgsl: float64, logical row-major channels-last host arrays.
// interpolateRef runs one 1D pass per spatial axis (separable), unlike the kernel's 8-corner blend.
// upSample1dRef / downSample1dRef follow alias-free torch step by step: explicit replicate padding, then a
// scatter (transposed conv) or a strided correlation, then the crop.
import type { HostTensor } from '../helpers';

const prod = (v: readonly number[]) => v.reduce((a, b) => a * b, 1);

/** One axis of F.interpolate: for each output index, [(source index, weight)...]. */
function axisTaps(inN: number, outN: number, mode: 'nearest' | 'linear', align: boolean): [number, number][][] {
  const taps: [number, number][][] = [];
  for (let o = 0; o < outN; o++) {
    if (mode === 'nearest') {
      taps.push([[Math.min(Math.floor((o * inN) / outN), inN - 1), 1]]);
      continue;
    }
    let s: number;
    if (align) s = outN > 1 ? (o * (inN - 1)) / (outN - 1) : 0;
    else s = Math.max(((o + 0.5) * inN) / outN - 0.5, 0);
    const i0 = Math.min(Math.floor(s), inN - 1);
    const i1 = Math.min(i0 + 1, inN - 1);
    const l = s - Math.floor(s);
    taps.push([[i0, 1 - l], [i1, l]]);
  }
  return taps;
}

/** Resamples axis `a` (1-based spatial axis of [N, ...sp, C]) to outN. */
function resampleAxis(x: HostTensor, a: number, outN: number, mode: 'nearest' | 'linear', align: boolean): HostTensor {
  const shape = [...x.shape];
  const inN = shape[a]!;
  shape[a] = outN;
  const outer = prod(x.shape.slice(0, a));
  const inner = prod(x.shape.slice(a + 1));
  const taps = axisTaps(inN, outN, mode, align);
  const data = new Float64Array(prod(shape));
  for (let p = 0; p < outer; p++) {
    for (let o = 0; o < outN; o++) {
      for (let q = 0; q < inner; q++) {
        let s = 0;
        for (const [i, w] of taps[o]!) s += w * x.data[(p * inN + i) * inner + q]!;
        data[(p * outN + o) * inner + q] = s;
      }
    }
  }
  return { data, shape };
}

/** F.interpolate on channels-last x to `size` (one per spatial axis); 'linear' means (bi/tri)linear. */
export function interpolateRef(x: HostTensor, size: number[], mode: 'nearest' | 'linear', alignCorners = false): HostTensor {
  let y = x;
  size.forEach((n, i) => (y = resampleAxis(y, i + 1, n, mode, alignCorners)));
  return y;
}

/** x [N, L, C] replicate-padded by (left, right) along L. */
function replicatePad(x: HostTensor, left: number, right: number): HostTensor {
  const [N, L, C] = x.shape as [number, number, number];
  const Lp = L + left + right;
  const data = new Float64Array(N * Lp * C);
  for (let n = 0; n < N; n++)
    for (let t = 0; t < Lp; t++) {
      const s = Math.min(Math.max(t - left, 0), L - 1);
      for (let c = 0; c < C; c++) data[(n * Lp + t) * C + c] = x.data[(n * L + s) * C + c]!;
    }
  return { data, shape: [N, Lp, C] };
}

/** alias-free torch UpSample1d on [N, L, C] with the given filter taps (length K). */
export function upSample1dRef(x: HostTensor, ratio: number, taps: Float64Array): HostTensor {
  const K = taps.length;
  const pad = Math.floor(K / ratio) - 1;
  const padLeft = pad * ratio + Math.floor((K - ratio) / 2);
  const padRight = pad * ratio + Math.floor((K - ratio + 1) / 2);
  const xp = replicatePad(x, pad, pad);
  const [N, Lp, C] = xp.shape as [number, number, number];
  const full = (Lp - 1) * ratio + K; // conv_transpose1d output length
  const y = new Float64Array(N * full * C);
  for (let n = 0; n < N; n++)
    for (let i = 0; i < Lp; i++)
      for (let j = 0; j < K; j++)
        for (let c = 0; c < C; c++) y[(n * full + i * ratio + j) * C + c] += ratio * xp.data[(n * Lp + i) * C + c]! * taps[j]!;
  const Lout = full - padLeft - padRight;
  const data = new Float64Array(N * Lout * C);
  for (let n = 0; n < N; n++)
    for (let t = 0; t < Lout; t++) for (let c = 0; c < C; c++) data[(n * Lout + t) * C + c] = y[(n * full + t + padLeft) * C + c]!;
  return { data, shape: [N, Lout, C] };
}

/** alias-free torch DownSample1d (LowPassFilter1d with stride = ratio, replicate padding) on [N, L, C]. */
export function downSample1dRef(x: HostTensor, ratio: number, taps: Float64Array): HostTensor {
  const K = taps.length;
  const even = K % 2 === 0;
  const xp = replicatePad(x, Math.floor(K / 2) - (even ? 1 : 0), Math.floor(K / 2));
  const [N, Lp, C] = xp.shape as [number, number, number];
  const Lout = Math.floor((Lp - K) / ratio) + 1;
  const data = new Float64Array(N * Lout * C);
  for (let n = 0; n < N; n++)
    for (let t = 0; t < Lout; t++)
      for (let c = 0; c < C; c++) {
        let s = 0;
        for (let j = 0; j < K; j++) s += xp.data[(n * Lp + t * ratio + j) * C + c]! * taps[j]!;
        data[(n * Lout + t) * C + c] = s;
      }
  return { data, shape: [N, Lout, C] };
}
