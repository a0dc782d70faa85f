// Keyframes (image_mode keyframe, FL2VA): which frames the images are pinned at, and the packed sequence with their
// conditioning rows. The pipeline's keyframe jobs (mode i2v) build their sequence here (docs/models/minimax-h3.md
// "Keyframes in the service"), and track jobs (audio_mode track) theirs with the soundtrack as an audio guide at frame 0.
//
// 1 image: the first frame; 2: first and last. Both are the official FL2VA recipe, diffusers' build_packed_sequence
// (packed-sequence.ts buildPackedSequence with 'first' / 'last' anchors), reproduced bit for bit.
// 3 to 6 images (the service's contract: first, last, and the rest evenly along the timeline in order) exist upstream
// only as ComfyUI's MiniMaxH3AddGuide, which pins a guide at any pixel frame: buildGuideSequence is ComfyUI's
// PackedLayout (comfy/ldm/minimax/model.py at 01a56b76) for such guides, bit for bit:
//
//   rows  [ text | per guide: its video rows (one latent frame per image), then its audio rows | audio | video ]
//   guide t = text_len + 5/3 * frame_index (pixel frames of 24 fps in 40 Hz audio-latent units); (h, w) the target
//         frame grid; an audio guide's rows t = that + k, w pinned to the target grid's first / last value per channel
//   tags  guide video rows 0, guide audio rows 2; timesteps max(t_v, 0.999) and max(t_a, 1.0) (sampler.ts
//         rowTimestepPlan's conditioning defaults)
// ComfyUI's spatial axis is arange(n) * (ratio / n) + (1 - ratio) / 2, which can differ from diffusers' linspace form
// in the last bit; each path reproduces its own upstream.
import { VIDEO_MAX_IMAGES } from '../../../catalog';
import { PackedRows } from './packed-rows';
import {
  AUDIO_CHANNELS, buildPackedSequence, frameGridOfAxes, temporalGrid, type FrameGrid, type PackedSequence, type PackedSequenceRequest,
} from './packed-sequence';

const FRAME_RESCALE = 5.0 / 3.0;
const FRAMES_PER_LATENT = [1, 4, 4, 4, 4] as const;
const SPATIAL_SCALE = 32;
/** The service's keyframe limit (service-api.md: 0 to 6 images): the catalog's, which its capability table reads. */
export const MAX_KEYFRAMES = VIDEO_MAX_IMAGES;

/**
 * Pixel frames the service pins `count` keyframe images at, for a video of `numFrames` frames: 0; 0 and the last;
 * from 3 on the first, the last and the rest evenly between them in order (round(i (N - 1) / (count - 1)), ties to
 * even as Python's round). Kiln's rule: no upstream maps more than two images onto frames.
 */
export function keyframeFrameIndices(count: number, numFrames: number): number[] {
  if (!Number.isInteger(count) || count < 1 || count > MAX_KEYFRAMES) throw new RangeError(`keyframes: ${count} images (1 to ${MAX_KEYFRAMES})`);
  if (!Number.isInteger(numFrames) || numFrames < count) throw new RangeError(`keyframes: ${count} images do not fit ${numFrames} frames`);
  if (count === 1) return [0];
  const last = numFrames - 1;
  return Array.from({ length: count }, (_, i) => roundHalfEven((i * last) / (count - 1)));
}

function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** One guide pinned at a pixel frame of the target: an image (one latent frame) and/or an audio clip's latents. */
export interface FrameGuide {
  /** Resolved pixel frame index, 0 .. numFrames - 1. */
  frameIndex: number;
  /** Latent frames of its video rows: 1 for an image, 0 for none (default 1). */
  videoLatentFrames?: number;
  /** Audio latent frames (per channel) of its audio rows (default 0). */
  audioLatents?: number;
}

export type GuideSequenceRequest = Omit<PackedSequenceRequest, 'keyframeAnchors'> & { guides: readonly FrameGuide[] };

/** The packed sequence of keyframes pinned at frame indices (ComfyUI's PackedLayout with keyframes, no references). */
export function buildGuideSequence(r: GuideSequenceRequest): PackedSequence {
  const [, ph, pw] = r.patchSize ?? [1, 2, 2];
  const channels = r.audioChannels ?? AUDIO_CHANNELS;
  if (channels !== 2) throw new RangeError(`guide sequence: ${channels} audio channels (the layout is stereo)`);
  if (r.latentHeight % ph || r.latentWidth % pw) throw new RangeError(`latent ${r.latentHeight}x${r.latentWidth} is not divisible by the patch ${ph}x${pw}`);
  const frames = pixelFrames(r.numLatentFrames);
  const grid = comfyFrameGrid(r.latentHeight, r.latentWidth, ph, pw);
  const rows = new PackedRows(r.textTags);
  const cursor = r.textTags.length; // no references: the target timeline starts right after the text
  for (const [k, g] of r.guides.entries()) {
    const vt = g.videoLatentFrames ?? 1;
    const rt = g.audioLatents ?? 0;
    if (!Number.isInteger(g.frameIndex) || g.frameIndex < 0 || g.frameIndex >= frames) throw new RangeError(`guide ${k}: frame ${g.frameIndex} outside the video's ${frames} frames`);
    if (!Number.isInteger(vt) || vt < 0 || !Number.isInteger(rt) || rt < 0 || vt + rt === 0) throw new RangeError(`guide ${k}: ${vt} video latent frames, ${rt} audio latents`);
    const condT = cursor + FRAME_RESCALE * g.frameIndex;
    // ComfyUI's _video_t_grid is the same sequential float64 cumsum as diffusers' temporal grid
    rows.videoRows(temporalGrid(vt, condT), grid, 'condition');
    rows.audioRows(rt, condT, grid.widthGrid, 'condition');
  }
  rows.audioRows(r.numAudioLatents, cursor, grid.widthGrid, 'target');
  rows.videoRows(temporalGrid(r.numLatentFrames, cursor), grid, 'target');
  return rows.sequence();
}

/**
 * The keyframe sequence the service builds for `count` images: the official FL2VA layout for 1 ('first') and 2
 * ('first', 'last'), else guides at keyframeFrameIndices (one latent frame each).
 */
export function buildKeyframeSequence(r: Omit<PackedSequenceRequest, 'keyframeAnchors'>, count: number): PackedSequence {
  const frames = pixelFrames(r.numLatentFrames);
  if (count === 0) return buildPackedSequence(r);
  if (count <= 2) return buildPackedSequence({ ...r, keyframeAnchors: count === 1 ? ['first'] : ['first', 'last'] });
  return buildGuideSequence({ ...r, guides: keyframeFrameIndices(count, frames).map((frameIndex) => ({ frameIndex })) });
}

/**
 * The sequence of a track job (audio_mode track): the soundtrack as an audio guide pinned at frame 0 over
 * `trackLatents` audio latents, with `keyframes` images at keyframeFrameIndices. ComfyUI's guide layout for every
 * count (the official FL2VA layout has no audio conditioning): the first keyframe's guide carries the track too
 * (frame 0, its video rows then the track's audio rows, as the golden "keyframes_with_audio_guide"); with no image
 * the track is a guide alone ("track_audio_guide"). First / last keyframes sit at the FL2VA coordinates.
 */
export function buildTrackSequence(r: Omit<PackedSequenceRequest, 'keyframeAnchors'>, keyframes: number, trackLatents: number): PackedSequence {
  if (!Number.isInteger(trackLatents) || trackLatents < 1 || trackLatents > r.numAudioLatents) {
    throw new RangeError(`track: ${trackLatents} audio latents for a target of ${r.numAudioLatents}`);
  }
  const frames = pixelFrames(r.numLatentFrames);
  const guides: FrameGuide[] = keyframes ? keyframeFrameIndices(keyframes, frames).map((frameIndex) => ({ frameIndex })) : [{ frameIndex: 0, videoLatentFrames: 0 }];
  guides[0] = { ...guides[0]!, audioLatents: trackLatents };
  return buildGuideSequence({ ...r, guides });
}

/** Pixel frames of n latent frames: 1 + 4 + 4 + 4 + 4 + 1 + ... (17k + 5 for 5k + 2). */
export function pixelFrames(n: number): number {
  let f = 0;
  for (let k = 0; k < n; k++) f += FRAMES_PER_LATENT[k % FRAMES_PER_LATENT.length]!;
  return f;
}

/** ComfyUI _axis_from_sqrt_area: (arange(n) * (ratio / n) + (1 - ratio) / 2) * 32, n = dim / patch. */
function comfyAxis(dim: number, patch: number, sqrtArea: number): Float64Array {
  const ratio = dim / sqrtArea;
  const n = Math.floor(dim / patch);
  const step = ratio / n;
  const left = (1.0 - ratio) / 2.0;
  return Float64Array.from({ length: n }, (_, i) => (i * step + left) * SPATIAL_SCALE);
}

function comfyFrameGrid(latentH: number, latentW: number, ph: number, pw: number): FrameGrid {
  const area = Math.sqrt(latentH * latentW);
  return frameGridOfAxes(comfyAxis(latentH, ph, area), comfyAxis(latentW, pw, area));
}
