// A video job's rows as the sampler starts from them, in the packed sequence's order: video rows [nc + nv, C * 4]
// (the keyframes' conditioning rows, then the patchified target noise) and audio rows [nca + 2 Na, A] (a track's
// clean rows, then the target's noise, channel-major). The conditioning rows come first in their part and are never
// stepped (sampler.ts skips them).
import type { Engine } from '../../../engine/engine';
import { copyInto } from '../../../engine/ops/layout';
import type { Tensor } from '../../../engine/tensor';
import { patchify } from '../transformer/patchify';
import type { Geometry } from '../sequence/packed-sequence';

export interface InitialRowsInput {
  geo: Geometry;
  patch: readonly [number, number, number];
  /** Video latent channels (C) and audio latent channels (A). */
  channels: number;
  audioChannels: number;
  /** The target's noise: video [C, F, h, w], audio [2, A, Na]. */
  noise: { video: Float32Array; audio: Float32Array };
  /** The keyframes' conditioning rows [nc, C * 4] (conditioning/condition-rows.ts) and the clean audio rows [nca, A]: a track's
   * (track-inputs.ts) or the voices' (voice-inputs.ts). */
  keyframeRows: Float32Array;
  trackRows: Float32Array;
  /** Conditioning rows the packed sequence holds (numConditionVideoRows, numConditionAudioRows). */
  nc: number;
  nca: number;
}

/** Uploads the starting rows (the caller frees both tensors). */
export function uploadInitialRows(e: Engine, r: InitialRowsInput): { video: Tensor; audio: Tensor } {
  const { geo, patch, channels: C, audioChannels: A, nc, nca } = r;
  if (r.noise.video.length !== C * geo.numLatentFrames * geo.latentHeight * geo.latentWidth || r.noise.audio.length !== 2 * A * geo.numAudioLatents) {
    throw new RangeError('MiniMax H3: the given noise does not fit the job\'s latent geometry');
  }
  const lat = e.upload(r.noise.video, [1, C, geo.numLatentFrames, geo.latentHeight, geo.latentWidth], 'f32', 'h3 video noise');
  const target = patchify(e, lat, patch); // [nv, C * 4]
  lat.free();
  const nv = target.shape[0]!;
  const rowWidth = target.shape[1]!;
  let video = target;
  try {
    if (r.keyframeRows.length !== nc * rowWidth) throw new Error(`MiniMax H3: ${r.keyframeRows.length / rowWidth} keyframe rows for the sequence's ${nc}`);
    if (r.trackRows.length !== nca * A) throw new Error(`MiniMax H3: ${r.trackRows.length / A} track rows for the sequence's ${nca}`);
    if (nc) {
      video = e.empty([nc + nv, rowWidth], 'f32', 'h3 video rows');
      const cond = e.upload(r.keyframeRows, [nc, rowWidth], 'f32', 'h3 keyframe rows');
      copyInto(e, cond, video.slice(0, 0, nc));
      copyInto(e, target, video.slice(0, nc, nc + nv));
      cond.free();
      target.free();
    }
    const audioInit = new Float32Array((nca + 2 * geo.numAudioLatents) * A);
    audioInit.set(r.trackRows);
    audioInit.set(audioRows(r.noise.audio, 2, A, geo.numAudioLatents), r.trackRows.length);
    return { video, audio: e.upload(audioInit, [nca + 2 * geo.numAudioLatents, A], 'f32', 'h3 audio rows') };
  } catch (err) {
    video.free();
    throw err;
  }
}

/** Audio latents [N, A, T] -> transformer rows [N * T, A] (channel-major: row c * T + t). */
export function audioRows(x: Float32Array, N: number, A: number, T: number): Float32Array {
  const out = new Float32Array(N * T * A);
  for (let c = 0; c < N; c++) for (let k = 0; k < A; k++) for (let t = 0; t < T; t++) out[(c * T + t) * A + k] = x[(c * A + k) * T + t]!;
  return out;
}

/** The inverse of audioRows: rows [N * T, A] -> latents [N, A, T] (the audio VAE's layout). */
export function channelsFromRows(rows: Float32Array, N: number, A: number, T: number): Float32Array {
  const out = new Float32Array(N * A * T);
  for (let c = 0; c < N; c++) for (let t = 0; t < T; t++) for (let k = 0; k < A; k++) out[(c * A + k) * T + t] = rows[(c * T + t) * A + k]!;
  return out;
}
