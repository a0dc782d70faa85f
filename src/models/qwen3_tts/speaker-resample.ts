// Band-limited resampling of a reference clip to the speaker encoder's 24 kHz, on the CPU in float64.
// Upstream (Qwen3TTSModel.create_voice_clone_prompt) calls librosa.resample(y, orig_sr, target_sr), whose default is
// soxr's "HQ" linear-phase filter, and librosa then trims/pads the result to ceil(N * target / orig) samples. soxr
// is not available here; this is a windowed-sinc resampler of the same kind (linear phase, cut-off just below the
// lower Nyquist frequency, >100 dB stopband), so its output equals soxr's up to the two filters' slightly
// different transition bands (content above ~0.91 x the lower Nyquist frequency) and edge transients.
// The cost is ~2 * ZERO_CROSSINGS / min(1, ratio) multiply-adds per output sample (about 0.1 s for 10 s of 48 kHz).

/** Filter half-length in zero crossings of the cut-off sinc. */
const ZERO_CROSSINGS = 64;
/** Cut-off as a fraction of the lower Nyquist frequency. */
const ROLLOFF = 0.945;
/** Kaiser window shape (about 140 dB of stopband attenuation). */
const KAISER_BETA = 14.77;

/** Modified Bessel function of the first kind, order 0 (power series; converges fast for the betas used here). */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  const q = (x * x) / 4;
  for (let k = 1; k < 500; k++) {
    term *= q / (k * k);
    sum += term;
    if (term < 1e-17 * sum) break;
  }
  return sum;
}

const MAX_CACHED_PHASES = 4096;
const KAISER_POINTS = 1 << 14;

/** The Kaiser window w(r) = I0(beta sqrt(1 - r^2)) / I0(beta) for |r| < 1 (0 beyond), from a table with linear
 * interpolation (error ~1e-8, below the window's own stopband). */
function kaiserTable(): (r: number) => number {
  const i0beta = besselI0(KAISER_BETA);
  const t = Float64Array.from({ length: KAISER_POINTS + 1 }, (_, i) => {
    const r = i / KAISER_POINTS;
    return besselI0(KAISER_BETA * Math.sqrt(Math.max(0, 1 - r * r))) / i0beta;
  });
  return (r) => {
    if (r >= 1) return 0;
    const x = r * KAISER_POINTS;
    const i = Math.floor(x);
    return t[i]! + (t[i + 1]! - t[i]!) * (x - i);
  };
}

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

/** Output length librosa.resample gives: ceil(n * to / from). */
export function resampledLength(n: number, from: number, to: number): number {
  return Math.ceil((n * to) / from);
}

/**
 * y (mono, `from` Hz) -> `to` Hz, ceil(N * to / from) samples. Output sample i sits at input position i * from / to;
 * it is the sum of the input samples within the filter's reach weighted by the Kaiser-windowed sinc low-pass (cut-off
 * ROLLOFF * min(from, to) / 2), zero outside the clip. Filters are cached per phase (i * from mod to).
 */
export function resampleAudio(y: Float32Array, from: number, to: number): Float32Array {
  for (const [name, v] of [['from', from], ['to', to]] as const) {
    if (!Number.isInteger(v) || v < 1) throw new RangeError(`resampleAudio: ${name} rate ${v} must be a positive integer`);
  }
  if (from === to) return Float32Array.from(y);
  const g = gcd(from, to);
  const up = to / g; // output samples per `down` input samples
  const down = from / g;
  const fc = ROLLOFF * Math.min(1, to / from); // cut-off in cycles per input sample * 2 (sinc zero every 1/fc samples)
  const half = Math.ceil(ZERO_CROSSINGS / fc); // reach in input samples, each side
  const reach = ZERO_CROSSINGS / fc;
  const window = kaiserTable();
  const cache = new Map<number, Float64Array>();
  const filterFor = (phase: number): Float64Array => {
    let h = cache.get(phase);
    if (h) return h;
    const frac = phase / up; // output position minus its floor, in input samples
    h = new Float64Array(2 * half + 1);
    for (let j = -half; j <= half; j++) {
      const u = j - frac; // input sample (base + j) relative to the output position
      const a = Math.PI * fc * u;
      h[j + half] = fc * (a === 0 ? 1 : Math.sin(a) / a) * window(Math.abs(u) / reach);
    }
    // Common rates have few phases (48k -> 24k: 1, 44.1k: 80); odd ones are computed per sample instead of cached.
    if (up <= MAX_CACHED_PHASES) cache.set(phase, h);
    return h;
  };
  const n = resampledLength(y.length, from, to);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const base = Math.floor((i * down) / up);
    const h = filterFor((i * down) % up);
    let acc = 0;
    const lo = Math.max(0, base - half);
    const hi = Math.min(y.length - 1, base + half);
    for (let k = lo; k <= hi; k++) acc += y[k]! * h[k - base + half]!;
    out[i] = acc;
  }
  return out;
}
