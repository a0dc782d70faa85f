// Shapes shared by the media encoders and decoders. Plain typed arrays, so the engine and the models
// can consume them without this module importing src/engine.

/** An RGB image in the layout the models take: CHW, `shape = [3, H, W]`, values in [-1, 1]. */
export interface ImageTensor {
  data: Float32Array;
  shape: [3, number, number];
}

/**
 * PCM audio, float samples nominally in [-1, 1] (values outside are clipped when encoded).
 * - `planar`: `shape [channels, samples]`, channel 0's samples first, then channel 1's (what models produce/consume).
 * - `interleaved`: L R L R ... (what wav files and ffmpeg's f32le carry).
 * A mono signal is the same in both layouts.
 */
export interface PcmAudio {
  data: Float32Array;
  sampleRate: number;
  channels: number;
  layout: 'planar' | 'interleaved';
}

/** Samples per channel in `a`. */
export function sampleCount(a: PcmAudio): number {
  return Math.floor(a.data.length / a.channels);
}

/** `a` as interleaved samples (returns `a.data` itself when no reordering is needed). */
export function interleave(a: PcmAudio): Float32Array {
  if (a.layout === 'interleaved' || a.channels === 1) return a.data;
  const n = sampleCount(a);
  const out = new Float32Array(n * a.channels);
  for (let c = 0; c < a.channels; c++) {
    const base = c * n;
    for (let i = 0; i < n; i++) out[i * a.channels + c] = a.data[base + i];
  }
  return out;
}

/** `a` as planar samples, `[channels, samples]`. */
export function deinterleave(data: Float32Array, channels: number): Float32Array {
  if (channels === 1) return data;
  const n = Math.floor(data.length / channels);
  const out = new Float32Array(n * channels);
  for (let c = 0; c < channels; c++) {
    const base = c * n;
    for (let i = 0; i < n; i++) out[base + i] = data[i * channels + c];
  }
  return out;
}
