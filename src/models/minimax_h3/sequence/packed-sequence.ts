// The packed sequence MiniMax H3 denoises, and its (t, h, w) RoPE positions, exactly as the diffusers modular
// pipeline builds them (before_denoise.py build_packed_sequence), in float64:
//
//   rows  [ text (Nt) | keyframe conditioning (K * rows/frame) | audio (2 * Na, channel-major) | video (F * rows/frame) ]
//   tags    1 (vision tokens of a keyframe inside the text: 0)      0                              2                 0
//   t       row index 0..Nt-1 | anchor time                      Nt + 0..Na-1 (per channel)     Nt + 5/3 * cumsum(1,4,4,4,4,1,4..)
//   h       0                 | frame grid                       0                              frame grid
//   w       0                 | frame grid                       grid[0] (left ch.) / grid[-1]  frame grid
//
// Time is in 40 Hz audio-latent units: one audio latent = 1, a video latent frame = 5/3 * (1 or 4) frames of 24 fps.
// The spatial grid is aspect-normalised: (dim / sqrt(h * w)) centred on [0, 1), times 32, one point per patch.
// Conditioning rows (keyframes now; references in part 2) are further rows with their own positions and
// indices: the transformer only reads `PackedSequence`, so a new row kind needs no change there.
import { alignFrames, FPS, FRAME_GRID } from '../../../catalog';
import { pythonRound } from '../../../common/python-round';

export const VIDEO_TAG = 0;
export const TEXT_TAG = 1;
export const AUDIO_TAG = 2;
/** AdaLN rows per timestep: one per modality tag. */
export const MODALITIES = 3;

export { FPS };
export const AUDIO_LATENTS_PER_SECOND = 40;
export const AUDIO_CHANNELS = 2;
/** The video VAE encodes each 17-frame chunk of the catalog's grid (17k + 5 frames) into 5 latent frames, the
 * 5-frame head into 2: latent frames 5k + 2. */
const LATENTS_PER_CHUNK = 5;
const HEAD_LATENTS = 2;
export const VAE_SPATIAL = 16;
/** A keyframe anchor is held at t = 0.999, just short of clean (the training distribution). */
export const KEYFRAME_NOISE_AUG = 0.999;

const FRAME_RESCALE = 5.0 / 3.0;
const FRAMES_PER_LATENT = [1, 4, 4, 4, 4] as const;
const SPATIAL_SCALE = 32;

export type KeyframeAnchor = 'first' | 'last';

/** Snaps a frame count up to the next 17k + 5 (the catalog's grid). */
export function alignNumFrames(numFrames: number): number {
  if (!Number.isInteger(numFrames) || numFrames < 1) throw new RangeError(`numFrames ${numFrames} must be a positive integer`);
  return alignFrames(numFrames);
}

/** Latent frames of an aligned frame count: 5k + 2. */
export function videoLatentFrames(numFrames: number): number {
  const { period, offset } = FRAME_GRID;
  if (numFrames % period !== offset) throw new RangeError(`numFrames ${numFrames} is not of the form ${period}k + ${offset}`);
  return ((numFrames - offset) / period) * LATENTS_PER_CHUNK + HEAD_LATENTS;
}

/** Audio latents (per channel) covering numFrames frames: Python's round(numFrames / 24 * 40). */
export function audioLatentFrames(numFrames: number): number {
  return pythonRound((numFrames / FPS) * AUDIO_LATENTS_PER_SECOND);
}

export interface Geometry {
  /** Aligned to 17k + 5. */
  numFrames: number;
  numLatentFrames: number;
  latentHeight: number;
  latentWidth: number;
  /** Per stereo channel. */
  numAudioLatents: number;
}

/** A request's latent geometry; height and width must be multiples of 32 (VAE 16 x patch 2). */
export function resolveGeometry(numFrames: number, height: number, width: number, patch: readonly [number, number, number] = [1, 2, 2]): Geometry {
  const multiple = [VAE_SPATIAL * patch[1], VAE_SPATIAL * patch[2]];
  if (!Number.isInteger(height) || !Number.isInteger(width) || height % multiple[0]! || width % multiple[1]! || height < 1 || width < 1) {
    throw new RangeError(`height ${height} / width ${width} must be positive multiples of ${multiple[0]} / ${multiple[1]}`);
  }
  const n = alignNumFrames(numFrames);
  return { numFrames: n, numLatentFrames: videoLatentFrames(n), latentHeight: height / VAE_SPATIAL, latentWidth: width / VAE_SPATIAL, numAudioLatents: audioLatentFrames(n) };
}

export interface PackedSequence {
  length: number;
  /** (t, h, w) per row, float64, [length, 3] row-major. */
  positions: Float64Array;
  /** Modality tag per row (VIDEO_TAG, TEXT_TAG, AUDIO_TAG). */
  tags: Uint8Array;
  /** Sequence rows of each input stream, in the stream's row order (conditioning rows first). */
  textIndices: Int32Array;
  videoIndices: Int32Array;
  audioIndices: Int32Array;
  /** Leading video / audio rows that are conditioning (never stepped by the sampler). */
  numConditionVideoRows: number;
  numConditionAudioRows: number;
}

export interface PackedSequenceRequest {
  /** Tag of every text row: TEXT_TAG, or VIDEO_TAG for a keyframe's vision tokens. */
  textTags: ArrayLike<number>;
  numLatentFrames: number;
  latentHeight: number;
  latentWidth: number;
  numAudioLatents: number;
  patchSize?: readonly [number, number, number];
  audioChannels?: number;
  /** One conditioning frame per entry, in packed order. */
  keyframeAnchors?: readonly KeyframeAnchor[];
}

/** The t2va / fl2va packed sequence [text | keyframes | audio | video] (diffusers build_packed_sequence). */
export function buildPackedSequence(r: PackedSequenceRequest): PackedSequence {
  const [, ph, pw] = r.patchSize ?? [1, 2, 2];
  const channels = r.audioChannels ?? AUDIO_CHANNELS;
  const anchors = r.keyframeAnchors ?? [];
  if (r.latentHeight % ph || r.latentWidth % pw) throw new RangeError(`latent ${r.latentHeight}x${r.latentWidth} is not divisible by the patch ${ph}x${pw}`);
  const rowsPerFrame = (r.latentHeight / ph) * (r.latentWidth / pw);
  const nt = r.textTags.length;
  const nc = anchors.length * rowsPerFrame;
  const na = r.numAudioLatents * channels;
  const nv = r.numLatentFrames * rowsPerFrame;
  const length = nt + nc + na + nv;
  const condStart = nt;
  const audioStart = condStart + nc;
  const videoStart = audioStart + na;
  const pos = new Float64Array(length * 3);
  const set = (row: number, t: number, h: number, w: number) => {
    pos[row * 3] = t;
    pos[row * 3 + 1] = h;
    pos[row * 3 + 2] = w;
  };
  for (let i = 0; i < nt; i++) set(i, i, 0, 0);

  const { h: frameH, w: frameW, widthGrid } = frameGrid(r.latentHeight, r.latentWidth, ph, pw);
  anchors.forEach((anchor, k) => {
    let time: number;
    if (anchor === 'first') time = nt;
    else if (anchor === 'last') time = nt + pairwiseSum(frameSpans(r.numLatentFrames)) - FRAME_RESCALE;
    else throw new RangeError(`keyframe anchor ${JSON.stringify(anchor)} must be 'first' or 'last'`);
    for (let j = 0; j < rowsPerFrame; j++) set(condStart + k * rowsPerFrame + j, time, frameH[j]!, frameW[j]!);
  });
  // Audio: channel-major; every channel runs the same clock; the first channel sits at the left edge of the
  // width grid and the others at the right edge.
  for (let row = 0; row < na; row++) {
    const i = row % r.numAudioLatents;
    set(audioStart + row, nt + i, 0, row < r.numAudioLatents ? widthGrid[0]! : widthGrid[widthGrid.length - 1]!);
  }
  const times = temporalGrid(r.numLatentFrames, nt);
  for (let f = 0; f < r.numLatentFrames; f++) {
    for (let j = 0; j < rowsPerFrame; j++) set(videoStart + f * rowsPerFrame + j, times[f]!, frameH[j]!, frameW[j]!);
  }

  const tags = new Uint8Array(length);
  const textIndices = Int32Array.from({ length: nt }, (_, i) => i);
  const videoIndices = new Int32Array(nc + nv);
  for (let i = 0; i < nc; i++) videoIndices[i] = condStart + i;
  for (let i = 0; i < nv; i++) videoIndices[nc + i] = videoStart + i;
  const audioIndices = Int32Array.from({ length: na }, (_, i) => audioStart + i);
  for (let i = 0; i < nt; i++) {
    const tag = r.textTags[i]!;
    if (tag !== TEXT_TAG && tag !== VIDEO_TAG) throw new RangeError(`text row ${i} has tag ${tag} (text rows are ${TEXT_TAG}, vision tokens ${VIDEO_TAG})`);
    tags[i] = tag;
  }
  for (const i of audioIndices) tags[i] = AUDIO_TAG;
  for (const i of videoIndices) tags[i] = VIDEO_TAG;
  return { length, positions: pos, tags, textIndices, videoIndices, audioIndices, numConditionVideoRows: nc, numConditionAudioRows: 0 };
}

/** Checks that text, video and audio rows cover the sequence exactly once (any packed sequence, built here or not). */
export function checkPackedSequence(s: PackedSequence): void {
  const seen = new Uint8Array(s.length);
  for (const [name, idx] of [['text', s.textIndices], ['video', s.videoIndices], ['audio', s.audioIndices]] as const) {
    for (const i of idx) {
      if (!(i >= 0 && i < s.length)) throw new RangeError(`packed sequence: ${name} row ${i} outside the sequence of ${s.length}`);
      if (seen[i]++) throw new RangeError(`packed sequence: row ${i} is claimed twice (${name})`);
    }
  }
  const missing = seen.indexOf(0);
  if (missing >= 0) throw new RangeError(`packed sequence: row ${missing} belongs to no stream`);
  if (s.positions.length !== 3 * s.length || s.tags.length !== s.length) throw new RangeError(`packed sequence: positions/tags do not have ${s.length} rows`);
  if (s.numConditionVideoRows > s.videoIndices.length || s.numConditionAudioRows > s.audioIndices.length) throw new RangeError('packed sequence: more conditioning rows than rows');
}

/** The span in rotary time of each latent frame: 5/3 * (1, 4, 4, 4, 4, 1, 4, ...). */
function frameSpans(n: number): Float64Array {
  return Float64Array.from({ length: n }, (_, i) => FRAME_RESCALE * FRAMES_PER_LATENT[i % FRAMES_PER_LATENT.length]!);
}

/** origin + [0, s0, s0 + s1, ...]: a sequential float64 cumsum (torch.cumsum on the CPU). */
export function temporalGrid(n: number, origin: number): Float64Array {
  const spans = frameSpans(n);
  const out = new Float64Array(n);
  let acc = 0;
  for (let i = 0; i < n; i++) {
    out[i] = origin + acc;
    acc += spans[i]!;
  }
  return out;
}

/**
 * numpy's float64 sum of a contiguous array (pairwise_sum: below 8 values a plain loop, up to 128 eight
 * interleaved accumulators, above that halves at a multiple of 8). The 'last' keyframe anchor is summed this
 * way upstream, and it differs from a sequential sum in the last ulp from 16 latent frames on.
 */
export function pairwiseSum(a: Float64Array, start = 0, n = a.length): number {
  if (n < 8) {
    let res = 0;
    for (let i = 0; i < n; i++) res += a[start + i]!;
    return res;
  }
  if (n <= 128) {
    const r = Array.from({ length: 8 }, (_, j) => a[start + j]!);
    let i = 8;
    for (; i < n - (n % 8); i += 8) for (let j = 0; j < 8; j++) r[j]! += a[start + i + j]!;
    let res = r[0]! + r[1]! + (r[2]! + r[3]!) + (r[4]! + r[5]! + (r[6]! + r[7]!));
    for (; i < n; i++) res += a[start + i]!;
    return res;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return pairwiseSum(a, start, n2) + pairwiseSum(a, start + n2, n - n2);
}

/** numpy.linspace(left, left + ratio, dim / patch, endpoint=False) * 32, reproduced operation by operation. */
function spatialGrid(dim: number, patch: number, sqrtArea: number): Float64Array {
  const ratio = dim / sqrtArea;
  const left = (1.0 - ratio) / 2.0;
  const num = Math.floor(dim / patch);
  const step = (left + ratio - left) / num;
  return Float64Array.from({ length: num }, (_, i) => (i * step + left) * SPATIAL_SCALE);
}

/** One latent frame's rows: (h, w) per patch, row-major, and the width axis (audio rows sit at its ends). */
export interface FrameGrid {
  h: Float64Array;
  w: Float64Array;
  widthGrid: Float64Array;
}

/** (h, w) of the rows of one latent frame (row-major over patches), and the width axis. */
export function frameGrid(latentH: number, latentW: number, ph: number, pw: number): FrameGrid {
  const sqrtArea = Math.sqrt(latentH * latentW);
  return frameGridOfAxes(spatialGrid(latentH, ph, sqrtArea), spatialGrid(latentW, pw, sqrtArea));
}

/** The rows of one latent frame over a height axis and a width axis (diffusers' linspace axes or ComfyUI's). */
export function frameGridOfAxes(hg: Float64Array, wg: Float64Array): FrameGrid {
  const h = new Float64Array(hg.length * wg.length);
  const w = new Float64Array(hg.length * wg.length);
  for (let i = 0; i < hg.length; i++) {
    for (let j = 0; j < wg.length; j++) {
      h[i * wg.length + j] = hg[i]!;
      w[i * wg.length + j] = wg[j]!;
    }
  }
  return { h, w, widthGrid: wg };
}
