// Keyframes (image_mode keyframe, FL2VA): which frames the images are pinned at, and the packed sequence with their
// conditioning rows. Not wired into the service yet (issue 15, docs/models/minimax-h3.md "Part 2 status").
//
// 1 image: the first frame; 2: first and last. Both are the official FL2VA recipe, diffusers' build_packed_sequence
// (sequence.ts buildPackedSequence with 'first' / 'last' anchors), reproduced bit for bit.
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
import { AUDIO_CHANNELS, AUDIO_TAG, buildPackedSequence, TEXT_TAG, VIDEO_TAG, type PackedSequence, type PackedSequenceRequest } from './sequence';

const FRAME_RESCALE = 5.0 / 3.0;
const FRAMES_PER_LATENT = [1, 4, 4, 4, 4] as const;
const SPATIAL_SCALE = 32;
/** The service's keyframe limit (service-api.md: 0 to 6 images). */
export const MAX_KEYFRAMES = 6;

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
  const { h: frameH, w: frameW, widthGrid } = comfyFrameGrid(r.latentHeight, r.latentWidth, ph, pw);
  const rowsPerFrame = frameH.length;
  const wLow = widthGrid[0]!;
  const wHigh = widthGrid[widthGrid.length - 1]!;
  const nt = r.textTags.length;
  const positions: number[] = [];
  const tags: number[] = [];
  const push = (t: number, h: number, w: number, tag: number) => {
    positions.push(t, h, w);
    tags.push(tag);
  };
  for (let i = 0; i < nt; i++) {
    const tag = r.textTags[i]!;
    if (tag !== TEXT_TAG && tag !== VIDEO_TAG) throw new RangeError(`text row ${i} has tag ${tag} (text rows are ${TEXT_TAG}, vision tokens ${VIDEO_TAG})`);
    push(i, 0, 0, tag);
  }
  const condVideo: number[] = [];
  const condAudio: number[] = [];
  const cursor = nt; // no references: the target timeline starts right after the text
  for (const [k, g] of r.guides.entries()) {
    const vt = g.videoLatentFrames ?? 1;
    const rt = g.audioLatents ?? 0;
    if (!Number.isInteger(g.frameIndex) || g.frameIndex < 0 || g.frameIndex >= frames) throw new RangeError(`guide ${k}: frame ${g.frameIndex} outside the video's ${frames} frames`);
    if (!Number.isInteger(vt) || vt < 0 || !Number.isInteger(rt) || rt < 0 || vt + rt === 0) throw new RangeError(`guide ${k}: ${vt} video latent frames, ${rt} audio latents`);
    const condT = cursor + FRAME_RESCALE * g.frameIndex;
    const times = timeGrid(vt, condT);
    for (let f = 0; f < vt; f++) {
      for (let j = 0; j < rowsPerFrame; j++) {
        condVideo.push(tags.length);
        push(times[f]!, frameH[j]!, frameW[j]!, VIDEO_TAG);
      }
    }
    for (let c = 0; c < 2; c++) {
      for (let i = 0; i < rt; i++) {
        condAudio.push(tags.length);
        push(condT + i, 0, c === 0 ? wLow : wHigh, AUDIO_TAG);
      }
    }
  }
  const targetAudio: number[] = [];
  for (let c = 0; c < 2; c++) {
    for (let i = 0; i < r.numAudioLatents; i++) {
      targetAudio.push(tags.length);
      push(cursor + i, 0, c === 0 ? wLow : wHigh, AUDIO_TAG);
    }
  }
  const targetVideo: number[] = [];
  const times = timeGrid(r.numLatentFrames, cursor);
  for (let f = 0; f < r.numLatentFrames; f++) {
    for (let j = 0; j < rowsPerFrame; j++) {
      targetVideo.push(tags.length);
      push(times[f]!, frameH[j]!, frameW[j]!, VIDEO_TAG);
    }
  }
  return {
    length: tags.length,
    positions: Float64Array.from(positions),
    tags: Uint8Array.from(tags),
    textIndices: Int32Array.from({ length: nt }, (_, i) => i),
    videoIndices: Int32Array.from([...condVideo, ...targetVideo]),
    audioIndices: Int32Array.from([...condAudio, ...targetAudio]),
    numConditionVideoRows: condVideo.length,
    numConditionAudioRows: condAudio.length,
  };
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

/** Pixel frames of n latent frames: 1 + 4 + 4 + 4 + 4 + 1 + ... (17k + 5 for 5k + 2). */
export function pixelFrames(n: number): number {
  let f = 0;
  for (let k = 0; k < n; k++) f += FRAMES_PER_LATENT[k % FRAMES_PER_LATENT.length]!;
  return f;
}

/** origin + exclusive cumsum of the latent frames' spans 5/3 x (1, 4, 4, 4, 4, ...) (ComfyUI _video_t_grid). */
function timeGrid(n: number, origin: number): Float64Array {
  const out = new Float64Array(n);
  let acc = 0;
  for (let k = 0; k < n; k++) {
    out[k] = origin + acc;
    acc += FRAME_RESCALE * FRAMES_PER_LATENT[k % FRAMES_PER_LATENT.length]!;
  }
  return out;
}

/** ComfyUI _axis_from_sqrt_area: (arange(n) * (ratio / n) + (1 - ratio) / 2) * 32, n = dim / patch. */
function comfyAxis(dim: number, patch: number, sqrtArea: number): Float64Array {
  const ratio = dim / sqrtArea;
  const n = Math.floor(dim / patch);
  const step = ratio / n;
  const left = (1.0 - ratio) / 2.0;
  return Float64Array.from({ length: n }, (_, i) => (i * step + left) * SPATIAL_SCALE);
}

function comfyFrameGrid(latentH: number, latentW: number, ph: number, pw: number): { h: Float64Array; w: Float64Array; widthGrid: Float64Array } {
  const area = Math.sqrt(latentH * latentW);
  const hg = comfyAxis(latentH, ph, area);
  const wg = comfyAxis(latentW, pw, area);
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
