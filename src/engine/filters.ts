// FIR filters computed on the CPU in float64 (no GPU): the Kaiser-windowed sinc low-pass of alias-free torch
// (BigVGAN's alias_free_activation/torch/filter.py, kaiser_sinc_filter1d), used by the anti-aliased 1D
// resamplers in src/engine/ops/resample_alias_free.ts. Upstream builds the same filter in float32 torch; the
// float64 values here differ from it by float32 rounding only (~1e-8 relative).

/** Modified Bessel function of the first kind, order 0: sum_k ((x/2)^k / k!)^2 (converges for every x; the terms
 * are summed until they stop changing the float64 sum). */
export function besselI0(x: number): number {
  const q = (x * x) / 4;
  let term = 1;
  let sum = 1;
  for (let k = 1; k < 500; k++) {
    term *= q / (k * k);
    const next = sum + term;
    if (next === sum) break;
    sum = next;
  }
  return sum;
}

/** Symmetric Kaiser window of n points (torch.kaiser_window(n, periodic=False, beta)):
 * w[i] = I0(beta * sqrt(1 - ((i - m) / m)^2)) / I0(beta), m = (n - 1) / 2; a 1-point window is [1]. */
export function kaiserWindow(n: number, beta: number): Float64Array {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`kaiserWindow: length ${n} must be a positive integer`);
  const w = new Float64Array(n);
  if (n === 1) {
    w[0] = 1;
    return w;
  }
  const m = (n - 1) / 2;
  const norm = besselI0(beta);
  for (let i = 0; i < n; i++) {
    const r = (i - m) / m;
    w[i] = besselI0(beta * Math.sqrt(Math.max(0, 1 - r * r))) / norm;
  }
  return w;
}

/** Kaiser beta for a transition band: the empirical fit (Kaiser's formula, as upstream) from the attenuation
 * A = 2.285 * (floor(n/2) - 1) * pi * (4 * halfWidth) + 7.95 dB. */
export function kaiserBeta(kernelSize: number, halfWidth: number): number {
  const a = 2.285 * (Math.floor(kernelSize / 2) - 1) * Math.PI * (4 * halfWidth) + 7.95;
  if (a > 50) return 0.1102 * (a - 8.7);
  if (a >= 21) return 0.5842 * (a - 21) ** 0.4 + 0.07886 * (a - 21);
  return 0;
}

/**
 * The low-pass filter of alias-free torch: 2*cutoff * kaiser(n) * sinc(2*cutoff*t), normalised to sum 1, with
 * t = i - n/2 + 0.5 for even n (symmetric around the centre between two taps) and t = i - (n-1)/2 for odd n.
 * cutoff and halfWidth are in cycles per sample (upstream uses cutoff 0.5/ratio, halfWidth 0.6/ratio).
 * cutoff 0 gives all zeros (upstream's special case).
 */
export function kaiserSincFilter1d(cutoff: number, halfWidth: number, kernelSize: number): Float64Array {
  if (!Number.isInteger(kernelSize) || kernelSize < 1) throw new RangeError(`kaiserSincFilter1d: kernelSize ${kernelSize} must be a positive integer`);
  if (!(cutoff >= 0 && cutoff <= 0.5)) throw new RangeError(`kaiserSincFilter1d: cutoff ${cutoff} must be in [0, 0.5]`);
  const even = kernelSize % 2 === 0;
  const half = Math.floor(kernelSize / 2);
  const window = kaiserWindow(kernelSize, kaiserBeta(kernelSize, halfWidth));
  const f = new Float64Array(kernelSize);
  if (cutoff === 0) return f;
  let sum = 0;
  for (let i = 0; i < kernelSize; i++) {
    const t = even ? i - half + 0.5 : i - half;
    const u = 2 * cutoff * t;
    const sinc = u === 0 ? 1 : Math.sin(Math.PI * u) / (Math.PI * u);
    f[i] = 2 * cutoff * window[i]! * sinc;
    sum += f[i]!;
  }
  for (let i = 0; i < kernelSize; i++) f[i] = f[i]! / sum;
  return f;
}
