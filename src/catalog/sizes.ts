// The spec's size tables (service-api.md "Reference tables") and the rules derived from them.
import { pythonRound } from '../common/python-round';

export const VIDEO_ASPECTS = ['16:9', '9:16', '1:1'] as const;
export const VIDEO_RES = ['352p', '480p', '768p'] as const;
export const IMAGE_ASPECTS = ['1:1', '16:9', '9:16', '4:3', '3:4'] as const;
export const IMAGE_RES = ['1K', '2K'] as const;

/** Video pixel sizes [width, height], all multiples of 32. */
export const VIDEO_SIZES: Record<string, Record<string, [number, number]>> = {
  '16:9': { '352p': [608, 352], '480p': [864, 480], '768p': [1344, 768] },
  '9:16': { '352p': [352, 608], '480p': [480, 864], '768p': [768, 1344] },
  '1:1': { '352p': [480, 480], '480p': [672, 672], '768p': [1024, 1024] },
};

/** Image pixel sizes [width, height]: 1K about 1 megapixel, 2K about 4. */
export const IMAGE_SIZES: Record<string, Record<string, [number, number]>> = {
  '1:1': { '1K': [1024, 1024], '2K': [2048, 2048] },
  '16:9': { '1K': [1344, 768], '2K': [2752, 1536] },
  '9:16': { '1K': [768, 1344], '2K': [1536, 2752] },
  '4:3': { '1K': [1152, 864], '2K': [2304, 1728] },
  '3:4': { '1K': [864, 1152], '2K': [1728, 2304] },
};

/** An explicit image `size`: both sides multiples of 32 within [min, max]. */
export const EXPLICIT_SIZE = { multiple_of: 32, min: 256, max: 4096 } as const;

/** Scales a w x h picture to about `tier` pixels (1K = 1024^2, 2K = 2048^2), keeping aspect, sides multiples of 32. */
export function sizeForTier(w: number, h: number, res: string): [number, number] {
  const area = res === '2K' ? 2048 * 2048 : 1024 * 1024;
  const scale = Math.sqrt(area / (w * h));
  const { multiple_of: m, min, max } = EXPLICIT_SIZE;
  const snap = (v: number) => Math.min(max, Math.max(min, Math.round((v * scale) / m) * m));
  return [snap(w), snap(h)];
}

/**
 * Pixels an edit reference is scaled to: the res tier's area (spec: "in editing, reference images are scaled to this
 * tier too"; upstream's output_resolution^2); for an explicit size the output's own area, at least 512^2 (so the
 * vision processor's 256^2 minimum holds at any aspect) and at most 2K's.
 */
export function referenceArea(res: string, width: number, height: number): number {
  if (res === '2K') return 2048 * 2048;
  if (res === '1K') return 1024 * 1024;
  return Math.min(2048 * 2048, Math.max(512 * 512, width * height));
}

/** The size a srcW x srcH reference is scaled to for `area` pixels: upstream's calculate_dimensions, sides the
 * nearest multiples of 32 (at least 32) of sqrt(area * ratio) and that / ratio. */
export function referenceSize(area: number, srcW: number, srcH: number): { width: number; height: number } {
  const ratio = srcW / srcH;
  const w = Math.sqrt(area * ratio);
  const h = w / ratio;
  const snap = (v: number) => Math.max(32, pythonRound(v / 32) * 32);
  return { width: snap(w), height: snap(h) };
}

/** The Qwen3-VL image processor (smart_resize) refuses a picture more than 200 times wider than tall, or taller. */
export const REFERENCE_MAX_ASPECT = 200;

/** Why an edit reference cannot be used, or undefined: its scaled size must stay within REFERENCE_MAX_ASPECT. */
export function referenceProblem(label: string, res: string, outW: number, outH: number, srcW: number, srcH: number): string | undefined {
  const { width, height } = referenceSize(referenceArea(res, outW, outH), srcW, srcH);
  if (Math.max(width, height) / Math.min(width, height) <= REFERENCE_MAX_ASPECT) return undefined;
  const how = width > height ? 'wider than tall' : 'taller than wide';
  return `${label}: a ${srcW}x${srcH} picture is scaled to ${width}x${height} for the model, more than ${REFERENCE_MAX_ASPECT} times ${how}, which it cannot take; crop it closer to square`;
}

/**
 * The size a keyframe is scaled to before its centre crop onto a video frame of frameW x frameH (MiniMax H3's
 * cover rule, diffusers MiniMaxH3ResizeStep: scale = max(W / w, H / h), sides Python-rounded, at least the frame).
 */
export function keyframeCoverSize(srcW: number, srcH: number, frameW: number, frameH: number): { width: number; height: number } {
  const scale = Math.max(frameW / srcW, frameH / srcH);
  return { width: Math.max(frameW, pythonRound(srcW * scale)), height: Math.max(frameH, pythonRound(srcH * scale)) };
}

/** Most pixels a keyframe may be scaled to before its crop (a sliver 8000 x 10 would be 99 MP onto 608 x 352; the
 * resampler runs on the worker's CPU): the input pixel cap, 8192 x 8192. */
export const KEYFRAME_MAX_COVER_PIXELS = 8192 * 8192;

/** Why a keyframe cannot be put onto the frame, or undefined. */
export function keyframeProblem(label: string, frameW: number, frameH: number, srcW: number, srcH: number): string | undefined {
  const { width, height } = keyframeCoverSize(srcW, srcH, frameW, frameH);
  if (width * height <= KEYFRAME_MAX_COVER_PIXELS) return undefined;
  return `${label}: a ${srcW}x${srcH} picture would be scaled to ${width}x${height} to cover the ${frameW}x${frameH} frame before its crop, over ${KEYFRAME_MAX_COVER_PIXELS / 1e6 | 0} megapixels; crop it closer to the frame's aspect`;
}

/** Smallest whole-number ratio, e.g. 1280x720 -> "16:9". */
export function aspectOf(w: number, h: number): string {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  const g = gcd(w, h);
  return `${w / g}:${h / g}`;
}

/** Video reference pictures (image_mode reference): upstream's Ref2VA setup refuses an aspect beyond 1:4 .. 4:1. */
export const VIDEO_REFERENCE_MAX_ASPECT = 4;

/** Why a `srcW` x `srcH` picture cannot be a reference picture, or null. */
export function videoReferenceProblem(label: string, srcW: number, srcH: number): string | null {
  if (srcW <= VIDEO_REFERENCE_MAX_ASPECT * srcH && srcH <= VIDEO_REFERENCE_MAX_ASPECT * srcW) return null;
  return `${label}: a ${srcW}x${srcH} reference picture is outside the aspects MiniMax H3 takes references at (1:${VIDEO_REFERENCE_MAX_ASPECT} to ${VIDEO_REFERENCE_MAX_ASPECT}:1); crop it`;
}
