// torchaudio's band-limited resampler (torchaudio.transforms.Resample / functional.resample with their defaults:
// sinc_interp_hann, lowpass_filter_width 6, rolloff 0.99), which upstream diffusers puts a MiniMax H3 reference
// soundtrack on the audio VAE's 32 kHz with (MiniMaxH3Ref2VASetupStep._normalize_audio_condition). Reproduced step for
// step from torchaudio 2.11's _get_sinc_resample_kernel / _apply_sinc_resample_kernel, with the transform's dtype
// rule: the kernel computed in float64 and cached as float32 (the functional form computes it in the waveform's
// dtype instead). Golden: test/fixtures/golden/minimax_h3/voice_prep (tools/golden/minimax_h3_voice_prep.py).
//
//   rates over their gcd: orig, new; base = min(orig, new) x rolloff; width = ceil(lpw x orig / base)
//   kernel [new, 2 width + orig]: t = (float32(-j / new) + (k - width) / orig) x base, clamped to +-lpw;
//     window cos(t pi / lpw / 2)^2; sinc(pi t) (1 at t = 0); x window x (base / orig); then float32
//   out [i new + j] = sum_k kernel[j, k] x x_padded[i orig + k], x padded with width zeros in front and
//     width + orig behind (a strided conv1d); the first ceil(float32(new x length / orig)) samples kept

const LOWPASS_FILTER_WIDTH = 6;
const ROLLOFF = 0.99;

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

export interface ResampleKernel {
  /** The rates over their gcd. */
  orig: number;
  new: number;
  /** Zeros padded in front of the waveform (torchaudio's `width`). */
  width: number;
  /** Taps per phase: 2 width + orig. */
  taps: number;
  /** [new, taps] float32 values (torchaudio's kernel [new, 1, taps]). */
  data: Float32Array;
}

function checkRate(rate: number, what: string): void {
  if (!Number.isInteger(rate) || rate <= 0) throw new RangeError(`torchaudio resample: ${what} rate ${rate} is not a positive whole number of Hz`);
}

/** torchaudio's cached kernel for resampling `origRate` to `newRate` (Resample(orig, new).kernel). */
export function resampleKernel(origRate: number, newRate: number): ResampleKernel {
  checkRate(origRate, 'source');
  checkRate(newRate, 'target');
  const g = gcd(origRate, newRate);
  const orig = origRate / g;
  const nw = newRate / g;
  const base = Math.min(orig, nw) * ROLLOFF;
  const lpw = LOWPASS_FILTER_WIDTH;
  const width = Math.ceil((lpw * orig) / base);
  const taps = 2 * width + orig;
  const scale = base / orig;
  const data = new Float32Array(nw * taps);
  for (let j = 0; j < nw; j++) {
    // torch.arange(0, -new, -1) / new is an int64 tensor divided in the default float32, then added to float64 idx
    const shift = Math.fround(-j / nw);
    for (let k = 0; k < taps; k++) {
      let t = (shift + (k - width) / orig) * base;
      t = Math.min(Math.max(t, -lpw), lpw);
      const c = Math.cos((t * Math.PI) / lpw / 2);
      const window = c * c;
      const tp = t * Math.PI;
      const sinc = tp === 0 ? 1 : Math.sin(tp) / tp;
      data[j * taps + k] = sinc * (window * scale);
    }
  }
  return { orig, new: nw, width, taps, data };
}

/** Samples torchaudio returns for `length` input samples: ceil(float32(new x length / orig)). */
export function resampledLength(length: number, k: Pick<ResampleKernel, 'orig' | 'new'>): number {
  return Math.ceil(Math.fround((k.new * length) / k.orig));
}

/** One channel resampled (a new array; the input itself when the rates are equal, as torchaudio returns it). Sums run
 * in float64 and round once to float32 (torch's float32 conv accumulates in float32: within a few float32 ulps). */
export function torchaudioResample(x: Float32Array, origRate: number, newRate: number, kernel?: ResampleKernel): Float32Array {
  if (origRate === newRate) {
    checkRate(origRate, 'source');
    return x;
  }
  const k = kernel ?? resampleKernel(origRate, newRate);
  const g = gcd(origRate, newRate);
  if (k.orig !== origRate / g || k.new !== newRate / g) throw new RangeError(`torchaudio resample: a ${k.orig}:${k.new} kernel for ${origRate} -> ${newRate} Hz`);
  const L = x.length;
  const padded = new Float64Array(L + 2 * k.width + k.orig);
  for (let i = 0; i < L; i++) padded[k.width + i] = x[i]!;
  // conv1d with stride orig over the padded signal: floor((L + 2 width + orig - taps) / orig) + 1 positions
  const positions = Math.floor(L / k.orig) + 1;
  const keep = resampledLength(L, k);
  const out = new Float32Array(keep);
  for (let i = 0; i < positions; i++) {
    const off = i * k.orig;
    for (let j = 0; j < k.new; j++) {
      const o = i * k.new + j;
      if (o >= keep) return out;
      const row = j * k.taps;
      let s = 0;
      for (let t = 0; t < k.taps; t++) s += k.data[row + t]! * padded[off + t]!;
      out[o] = s;
    }
  }
  if (positions * k.new < keep) throw new Error(`torchaudio resample: ${positions * k.new} samples made, ${keep} wanted`);
  return out;
}
