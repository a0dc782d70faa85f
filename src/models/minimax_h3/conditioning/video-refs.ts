// A video reference (Ref2VA) before encoding, as diffusers does it (58eb52c0): MiniMaxH3Ref2VASetupStep.
// _normalize_video_condition (onto 24 fps by holding / dropping whole frames, truncated to the generated frame count,
// LANCZOS onto the canvas its own aspect resolves to) and MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames
// (the frames the text encoder sees at 2 fps, merged in pairs, each pair's vision block labelled with its mean
// timestamp). Not wired into the service yet (issue 15, docs/models/minimax-h3.md "Part 2 status").
import { FRAME_GRID } from '../../../catalog';
import { pythonRound } from '../../../common/python-round';
import { pilResizeLanczos, type Rgb8Image } from '../../common/pil-resize';
import { RELEASED_CANVAS, resolveCanvasSize, type CanvasRule } from './image-prep';

/** The reference frame each 24 fps output frame shows: frame i is held from slot floor(i s + 0.5) to the next one. */
export function resampleFrameIndices(count: number, fps: number, targetFps = 24): number[] {
  if (!(fps > 0)) throw new RangeError(`video reference: frame rate ${fps}`);
  if (fps === targetFps) return Array.from({ length: count }, (_, i) => i);
  const scale = targetFps / fps;
  const slot = (i: number) => Math.floor(i * scale + 0.5);
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const next = i + 1 < count ? slot(i + 1) : Math.floor(count * scale + 0.5);
    for (let k = slot(i); k < next; k++) out.push(i);
  }
  return out;
}

/** _normalize_video_condition on 8-bit frames: 24 fps, at most `numFrames`, on the canvas of the frames' own aspect. */
export function prepareVideoReference(frames: readonly Rgb8Image[], fps: number, numFrames: number, rule: CanvasRule = RELEASED_CANVAS, targetFps = 24): Rgb8Image[] {
  if (frames.length === 0) throw new RangeError('video reference: no frames');
  const picked = resampleFrameIndices(frames.length, fps, targetFps).slice(0, numFrames).map((i) => frames[i]!);
  const { height, width } = resolveCanvasSize(picked[0]!.width, picked[0]!.height, rule);
  if (picked[0]!.width === width && picked[0]!.height === height) return picked.map((f) => ({ ...f, data: Uint8Array.from(f.data) }));
  return picked.map((f) => pilResizeLanczos(f, width, height));
}

/**
 * _sample_video_condition_frames: which of `count` frames (at `fps`) the text encoder reads at `sampleFps` (every
 * fps / sampleFps-th, Python-rounded, deduplicated), and the timestamp of each merged group of `temporalPatch` (the
 * last sampled frame repeated to fill the group): the mean of its first and last sample times.
 */
export function sampleVideoFrames(count: number, fps = 24, sampleFps = 2, temporalPatch = 2): { indices: number[]; blockTimestamps: number[] } {
  const stride = fps / sampleFps;
  const indices: number[] = [];
  let cursor = 0.0;
  while (pythonRound(cursor) < count) {
    const r = pythonRound(cursor);
    if (indices.length === 0 || r > indices[indices.length - 1]!) indices.push(r);
    cursor += stride;
  }
  if (indices.length < temporalPatch) {
    const minimum = pythonRound((temporalPatch - 1) * stride) + 1;
    throw new RangeError(`video reference: ${count} frames at ${fps} fps; read at ${sampleFps} fps in groups of ${temporalPatch} it needs at least ${minimum}`);
  }
  const times = indices.map((_, i) => i / sampleFps);
  while (times.length % temporalPatch) times.push(times[times.length - 1]!);
  const blockTimestamps: number[] = [];
  for (let i = 0; i < times.length; i += temporalPatch) blockTimestamps.push((times[i]! + times[i + temporalPatch - 1]!) / 2);
  return { indices, blockTimestamps };
}

/**
 * How many of a prepared video reference's frames the video VAE encodes (MiniMaxH3Ref2VAReferenceEncoderStep): the
 * first max(1, (n - 5) // 17) * 17 + 5, i.e. snapped *down* to 17k + 5 so the encoder needs no padding (a clip shorter
 * than 22 frames is kept whole: the slice bound is past its end).
 */
export function videoReferenceEncodeFrames(count: number): number {
  if (!Number.isInteger(count) || count < 1) throw new RangeError(`video reference: ${count} frames`);
  const { period, offset } = FRAME_GRID;
  return Math.min(count, Math.max(1, Math.floor((count - offset) / period)) * period + offset);
}
