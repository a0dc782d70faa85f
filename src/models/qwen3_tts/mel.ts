// The speaker encoder's log-mel front end, as upstream's `mel_spectrogram` computes it for
// `extract_speaker_embedding` (docs/models/qwen3-tts.md, "Speaker embedding"):
//   24 kHz mono -> reflect pad (n_fft - hop) / 2 = 384 both sides -> frames of 1024 every 256 samples (center=False)
//   -> periodic Hann window -> one-sided DFT (513 bins) -> magnitude sqrt(re^2 + im^2 + 1e-9)
//   -> Slaney mel filterbank (128 bands, 0..12 kHz, Slaney area norm) -> log(max(x, 1e-5)).
// On the engine: the frames are an overlapping strided view of the padded signal (no copy), the windowed DFT is one
// matmul against a [1024, 2 * 513] cos/sin basis, the filterbank another matmul. Both matrices are computed here on
// the CPU in float64 and uploaded once (f32: the front end always runs in f32, whatever the encoder's dtype).
import type { Engine } from '../../engine/engine';
import { Tensor } from '../../engine/tensor';
import { add } from '../../engine/ops/elementwise';
import { pad } from '../../engine/ops/layout';
import { matmul } from '../../engine/ops/matmul';
import { log, sqrt, square } from '../../engine/ops/unary';

export interface MelSettings {
  sampleRate: number;
  nFft: number;
  hop: number;
  win: number;
  nMels: number;
  fmin: number;
  fmax: number;
}

/** What extract_speaker_embedding passes to mel_spectrogram. */
export const SPEAKER_MEL: Readonly<MelSettings> = Object.freeze({
  sampleRate: 24000, nFft: 1024, hop: 256, win: 1024, nMels: 128, fmin: 0, fmax: 12000,
});

/** Added under the square root of the power (upstream's `+ 1e-9`). */
const MAGNITUDE_EPS = 1e-9;
/** dynamic_range_compression: log(clamp(x, min=1e-5)). */
const LOG_CLAMP = 1e-5;

// ---- Slaney mel scale (librosa's default, htk=False): linear below 1 kHz, logarithmic above ----

const F_SP = 200 / 3; // Hz per mel below 1 kHz
const MIN_LOG_HZ = 1000;
const MIN_LOG_MEL = MIN_LOG_HZ / F_SP; // 15
const LOGSTEP = Math.log(6.4) / 27; // 27 mels per factor 6.4 above 1 kHz

export function hzToMelSlaney(hz: number): number {
  return hz >= MIN_LOG_HZ ? MIN_LOG_MEL + Math.log(hz / MIN_LOG_HZ) / LOGSTEP : hz / F_SP;
}

export function melToHzSlaney(mel: number): number {
  return mel >= MIN_LOG_MEL ? MIN_LOG_HZ * Math.exp(LOGSTEP * (mel - MIN_LOG_MEL)) : F_SP * mel;
}

/**
 * The Slaney-normed mel filterbank, [nMels, nFft / 2 + 1] row-major, in float64 (librosa.filters.mel with
 * norm="slaney", htk=False). Band i is the triangle over FFT bin frequencies linspace(0, sr/2, bins) rising from
 * edge i to edge i+1 and falling to edge i+2 (edges equally spaced in mel from fmin to fmax), scaled by
 * 2 / (edge i+2 - edge i) so each band has unit area in Hz.
 */
export function slaneyMelFilterbank(s: Pick<MelSettings, 'sampleRate' | 'nFft' | 'nMels' | 'fmin' | 'fmax'>): Float64Array {
  const bins = Math.floor(s.nFft / 2) + 1;
  const lo = hzToMelSlaney(s.fmin);
  const hi = hzToMelSlaney(s.fmax);
  const edges = Array.from({ length: s.nMels + 2 }, (_, i) => melToHzSlaney(lo + ((hi - lo) * i) / (s.nMels + 1)));
  const out = new Float64Array(s.nMels * bins);
  for (let m = 0; m < s.nMels; m++) {
    const [left, centre, right] = [edges[m]!, edges[m + 1]!, edges[m + 2]!];
    const norm = 2 / (right - left);
    for (let k = 0; k < bins; k++) {
      const f = ((s.sampleRate / 2) * k) / (bins - 1);
      const rising = (f - left) / (centre - left);
      const falling = (right - f) / (right - centre);
      out[m * bins + k] = Math.max(0, Math.min(rising, falling)) * norm;
    }
  }
  return out;
}

/** torch.hann_window(n) (periodic): 0.5 - 0.5 cos(2 pi i / n). */
export function hannWindow(n: number): Float64Array {
  return Float64Array.from({ length: n }, (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / n));
}

/**
 * The windowed one-sided DFT as a matrix [nFft, 2 * bins]: column k is window[n] * cos(2 pi k n / nFft), column
 * bins + k is -window[n] * sin(...) (the imaginary part's sign does not matter for the magnitude). A window shorter
 * than nFft is zero-padded on both sides, centred, as torch.stft does.
 */
export function windowedDftBasis(nFft: number, win: number): Float64Array {
  if (win > nFft) throw new RangeError(`mel: window ${win} longer than n_fft ${nFft}`);
  const bins = Math.floor(nFft / 2) + 1;
  const w = new Float64Array(nFft);
  w.set(hannWindow(win), Math.floor((nFft - win) / 2));
  const out = new Float64Array(nFft * 2 * bins);
  for (let n = 0; n < nFft; n++) {
    for (let k = 0; k < bins; k++) {
      // (k * n) mod nFft keeps the angle small, so cos/sin are exact to float64 rounding.
      const angle = (2 * Math.PI * ((k * n) % nFft)) / nFft;
      out[n * 2 * bins + k] = w[n]! * Math.cos(angle);
      out[n * 2 * bins + bins + k] = -w[n]! * Math.sin(angle);
    }
  }
  return out;
}

/** Frames for N samples: floor((N + 2 * pad - nFft) / hop) + 1 with pad = (nFft - hop) / 2. */
export function melFrameCount(samples: number, s: MelSettings = SPEAKER_MEL): number {
  return Math.floor((samples + 2 * melPadding(s) - s.nFft) / s.hop) + 1;
}

/** Fewest samples the front end takes: reflect padding needs more samples than it pads. */
export function melMinSamples(s: MelSettings = SPEAKER_MEL): number {
  return melPadding(s) + 1;
}

function melPadding(s: MelSettings): number {
  return Math.floor((s.nFft - s.hop) / 2);
}

/** The front end's two matrices on the GPU (f32), made once per engine. */
export class MelFrontEnd {
  private constructor(
    readonly settings: Readonly<MelSettings>,
    /** [nFft, 2 * bins]: windowed cos | -sin. */
    readonly dft: Tensor,
    /** [bins, nMels]: the filterbank transposed, so the mel step is magnitude [frames, bins] x this. */
    readonly melT: Tensor,
  ) {}

  static create(e: Engine, settings: MelSettings = SPEAKER_MEL): MelFrontEnd {
    const bins = Math.floor(settings.nFft / 2) + 1;
    const fb = slaneyMelFilterbank(settings);
    const fbT = new Float64Array(bins * settings.nMels);
    for (let m = 0; m < settings.nMels; m++) for (let k = 0; k < bins; k++) fbT[k * settings.nMels + m] = fb[m * bins + k]!;
    const dft = e.upload(windowedDftBasis(settings.nFft, settings.win), [settings.nFft, 2 * bins], 'f32', 'mel dft basis');
    const melT = e.upload(fbT, [bins, settings.nMels], 'f32', 'mel filterbank');
    return new MelFrontEnd(Object.freeze({ ...settings }), dft, melT);
  }

  /**
   * Log-mel of waveforms [N] or [B, N] (f32, any view): [B, frames, nMels] (a 1-D input gives B = 1), channels-last
   * as the speaker encoder reads it (upstream's (B, nMels, frames) transposed).
   */
  run(e: Engine, wav: Tensor): Tensor {
    const s = this.settings;
    if (wav.dtype !== 'f32') throw new TypeError(`mel: waveform ${wav} must be f32`);
    if (wav.rank !== 1 && wav.rank !== 2) throw new RangeError(`mel: waveform ${wav} must be [N] or [B, N]`);
    const x = wav.rank === 1 ? wav.unsqueeze(0) : wav;
    const [B, N] = x.shape as [number, number];
    if (N < melMinSamples(s)) throw new RangeError(`mel: waveform ${wav} has ${N} samples; reflect padding needs at least ${melMinSamples(s)}`);
    const p = melPadding(s);
    const frames = melFrameCount(N, s);
    const bins = Math.floor(s.nFft / 2) + 1;
    // each step's input freed once its output exists (engine/scope.ts)
    return e.chain(
      () => pad(e, x, [[p, p]], 'reflect'), // [B, N + 2p], contiguous
      // overlapping frames as a view: frame f starts at sample f * hop
      (padded) => matmul(e, new Tensor(padded.storage, [B, frames, s.nFft], 'f32', [N + 2 * p, s.hop, 1], padded.offset), this.dft), // [B, frames, 2 * bins]: re | im
      (spec) => square(e, spec),
      (sq) => add(e, sq.slice(2, 0, bins), sq.slice(2, bins, 2 * bins)),
      (power) => sqrt(e, power, { shift: MAGNITUDE_EPS }),
      (mag) => matmul(e, mag, this.melT), // [B, frames, nMels]
      (mel) => log(e, mel, { min: LOG_CLAMP }),
    );
  }

  /** Uploads a host waveform and runs the front end: [1, frames, nMels]. */
  runHost(e: Engine, wav: Float32Array): Tensor {
    if (wav.length < melMinSamples(this.settings)) {
      throw new RangeError(`mel: ${wav.length} samples; reflect padding needs at least ${melMinSamples(this.settings)}`);
    }
    return e.chain(() => e.upload(wav, [wav.length], 'f32', 'waveform'), (w) => this.run(e, w));
  }

  free(): void {
    this.dft.free();
    this.melT.free();
  }
}
