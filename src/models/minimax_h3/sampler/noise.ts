// The seeded noise of a MiniMax H3 job, a pure function of (seed, stream, index) so the same task gives the same clip
// on any machine: stream 0 the video latents, 1 the audio latents, 2 + i keyframe i's 0.001 conditioning share.
// torch's Philox stream is not reproduced (upstream's noise for a seed is not ours).
import type { HostLatents } from '../conditioning/condition-rows';
import type { Geometry } from '../sequence/packed-sequence';

/**
 * Standard normal values, a pure function of (seed, stream, index): a 32-bit integer hash of the three (murmur3's
 * finaliser over a splitmix-style counter) gives two uniforms per pair of values, Box-Muller gives the normals.
 * The same seed reproduces the clip on any machine; torch's Philox stream is not reproduced (upstream's noise for
 * a seed is not ours).
 */
export function gaussianNoise(seed: number, stream: number, n: number): Float32Array {
  const out = new Float32Array(n);
  const s = seed >>> 0;
  const base = mix32((s ^ Math.imul(stream + 1, 0x9e3779b9)) >>> 0);
  for (let i = 0; i < n; i += 2) {
    const a = mix32((base + Math.imul(i, 0x85ebca6b)) >>> 0);
    const b = mix32((a ^ 0x27d4eb2f) + i + 1);
    const u1 = (a + 1) / 4294967297; // (0, 1): log is finite
    const u2 = b / 4294967296;
    const r = Math.sqrt(-2 * Math.log(u1));
    out[i] = r * Math.cos(2 * Math.PI * u2);
    if (i + 1 < n) out[i + 1] = r * Math.sin(2 * Math.PI * u2);
  }
  return out;
}

function mix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The initial latents of a job: video [C, F, h, w] (stream 0) and audio [2, A, Na] (stream 1), both N(0, 1). */
export function h3Noise(seed: number, geo: Geometry, videoChannels: number, audioChannels: number): { video: Float32Array; audio: Float32Array } {
  return {
    video: gaussianNoise(seed, 0, videoChannels * geo.numLatentFrames * geo.latentHeight * geo.latentWidth),
    audio: gaussianNoise(seed, 1, 2 * audioChannels * geo.numAudioLatents),
  };
}

/**
 * The 0.001 share of noise in each keyframe's conditioning rows, [C, 1, h, w] like its latents: Kiln's own seeded
 * stream 2 + i for keyframe i (video noise is stream 0, audio 1). Kiln's choice where upstreams differ
 * (h3-conditioning.md 7.1; docs/models/minimax-h3.md "Keyframes in the service"): the target noise is not torch's
 * anyway, and separate streams leave it the same as a text-only job of the same seed.
 */
export function keyframeNoises(seed: number, latents: readonly HostLatents[]): Float32Array[] {
  return latents.map((l, i) => gaussianNoise(seed, 2 + i, l.data.length));
}
