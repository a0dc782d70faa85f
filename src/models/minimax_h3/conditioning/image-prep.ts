// How MiniMax H3 puts input pictures onto its canvas (diffusers modular_pipelines/minimax_h3 at 58eb52c0:
// resolve_canvas_size, MiniMaxH3ResizeStep, MiniMaxH3Ref2VASetupStep), with Pillow's LANCZOS (pil-resize.ts) as there.
// The service's keyframe jobs take prepareFrameKeyframes (the job's frame, every image cover-cropped), its reference
// jobs prepareReferenceMatch (ComfyUI's `match`, below; docs/models/minimax-h3.md "References in the service").
//   canvas      short edge 768, area capped at 768 x 1344, both sides rounded (Python round) to multiples of 32,
//               aspect 1:4 .. 4:1; keyframe requests take the first keyframe's aspect, the others 16:9
//   keyframes   the first is stretched onto the canvas; a second (last) is scaled to cover it (sides rounded) and
//               centre-cropped at ((w - W) // 2, (h - H) // 2)
//   references  an image is scaled so its short edge is 2048 (upscaling too, no area cap), sides rounded to 32
import { KEYFRAME_MAX_COVER_PIXELS, keyframeCoverSize } from '../../../catalog';
import { pythonRound } from '../../../common/python-round';
import { cropImage, pilResizeLanczos, type Rgb8Image } from '../../common/pil-resize';

export interface CanvasRule {
  multiple: number;
  shortEdge: number;
  maxPixels: number;
}

/** The released checkpoint's canvas (canvas_short_edge 768, canvas_max_pixels 768 x 1344, canvas_multiple 32). */
export const RELEASED_CANVAS: CanvasRule = { multiple: 32, shortEdge: 768, maxPixels: 768 * 1344 };
/** reference_image_short_edge of the released checkpoint. */
export const REFERENCE_SHORT_EDGE = 2048;

/** resolve_canvas_size: the (height, width) of the canvas for an aspect given as width : height. */
export function resolveCanvasSize(aspectWidth: number, aspectHeight: number, rule: CanvasRule = RELEASED_CANVAS): { height: number; width: number } {
  if (!(aspectWidth > 0 && aspectHeight > 0)) throw new RangeError(`canvas: aspect ${aspectWidth}:${aspectHeight} must be positive`);
  const ratio = aspectWidth / aspectHeight;
  if (!(ratio >= 1 / 4 && ratio <= 4)) throw new RangeError(`canvas: aspect ${aspectWidth}:${aspectHeight} is outside 1:4 .. 4:1`);
  let width: number;
  let height: number;
  if (ratio >= 1.0) [width, height] = [rule.shortEdge * ratio, rule.shortEdge];
  else [width, height] = [rule.shortEdge, rule.shortEdge / ratio];
  const area = width * height;
  if (area > rule.maxPixels) {
    const scale = (rule.maxPixels / area) ** 0.5;
    [width, height] = [width * scale, height * scale];
  }
  const m = rule.multiple;
  return { height: Math.max(m, pythonRound(height / m) * m), width: Math.max(m, pythonRound(width / m) * m) };
}

/** MiniMaxH3ResizeStep: keyframes (first, then last) onto the canvas; the canvas follows the first unless given. */
export function prepareKeyframes(images: readonly Rgb8Image[], canvas?: { height: number; width: number }, rule: CanvasRule = RELEASED_CANVAS): { height: number; width: number; keyframes: Rgb8Image[] } {
  if (images.length < 1 || images.length > 2) throw new RangeError(`keyframes: ${images.length} images (the FL2VA recipe takes a first and a last)`);
  const { height, width } = canvas ?? resolveCanvasSize(images[0]!.width, images[0]!.height, rule);
  const keyframes = images.map((img, i) => {
    if (img.width === width && img.height === height) return { ...img, data: Uint8Array.from(img.data) };
    if (i === 0) return pilResizeLanczos(img, width, height); // the geometry anchor: stretched
    return coverCrop(img, width, height);
  });
  return { height, width, keyframes };
}

/** MiniMaxH3ResizeStep's last-keyframe rule: scaled (LANCZOS) to cover width x height, sides rounded, then
 * centre-cropped at ((w - W) // 2, (h - H) // 2). An image already of that size is copied as it is. */
export function coverCrop(img: Rgb8Image, width: number, height: number): Rgb8Image {
  if (img.width === width && img.height === height) return { ...img, data: Uint8Array.from(img.data) };
  const { width: rw, height: rh } = keyframeCoverSize(img.width, img.height, width, height);
  if (rw * rh > KEYFRAME_MAX_COVER_PIXELS) throw new RangeError(`keyframe: ${img.width}x${img.height} would be scaled to ${rw}x${rh} to cover ${width}x${height} (over ${KEYFRAME_MAX_COVER_PIXELS} pixels)`);
  const left = Math.max(0, Math.floor((rw - width) / 2));
  const top = Math.max(0, Math.floor((rh - height) / 2));
  return cropImage(pilResizeLanczos(img, rw, rh), left, top, width, height);
}

/**
 * The service's keyframes (service-api.md: "images are scaled and cropped to the target frame"): the frame is the
 * job's size (aspect and res), not the first image's aspect, so every image, the first included, is cover-cropped
 * onto it (coverCrop). Where the first image has the frame's aspect this is diffusers' stretch up to the rounding of
 * the covering size; ComfyUI's MiniMaxH3AddGuide also centre-crops every guide (h3-conditioning.md 7.3).
 */
export function prepareFrameKeyframes(images: readonly Rgb8Image[], width: number, height: number): Rgb8Image[] {
  if (images.length < 1) throw new RangeError('keyframes: no images');
  return images.map((img) => coverCrop(img, width, height));
}

/** The size a reference image is encoded at: its short edge at `shortEdge`, sides rounded to the multiple. */
export function referenceImageSize(width: number, height: number, shortEdge = REFERENCE_SHORT_EDGE, multiple = RELEASED_CANVAS.multiple): { height: number; width: number } {
  if (!(width > 0 && height > 0)) throw new RangeError(`reference image: ${width}x${height}`);
  if (width > 4 * height || height > 4 * width) throw new RangeError(`reference image: ${width}x${height} is outside 1:4 .. 4:1`);
  const scale = shortEdge / Math.min(width, height);
  return {
    height: Math.max(multiple, pythonRound((height * scale) / multiple) * multiple),
    width: Math.max(multiple, pythonRound((width * scale) / multiple) * multiple),
  };
}

/** MiniMaxH3Ref2VASetupStep for an image reference: resized (LANCZOS) to referenceImageSize. */
export function prepareReferenceImage(img: Rgb8Image, shortEdge = REFERENCE_SHORT_EDGE, multiple = RELEASED_CANVAS.multiple): Rgb8Image {
  const { height, width } = referenceImageSize(img.width, img.height, shortEdge, multiple);
  return img.width === width && img.height === height ? { ...img, data: Uint8Array.from(img.data) } : pilResizeLanczos(img, width, height);
}

/**
 * The service's reference canvas (docs/models/minimax-h3.md "References in the service"): ComfyUI's `match` rule
 * (MiniMaxH3ReferenceToVideo's default, h3-conditioning.md 7.5), the picture's own aspect scaled *down* so its area is
 * at most the job's frame (never up), sides rounded (Python round) to multiples of 32, at least 32. Upstream diffusers
 * instead always scales to a 2048 short edge (referenceImageSize): 4096 rows per square picture whatever the video.
 */
export function referenceMatchSize(width: number, height: number, frameWidth: number, frameHeight: number, multiple = RELEASED_CANVAS.multiple): { height: number; width: number } {
  if (!(width > 0 && height > 0)) throw new RangeError(`reference image: ${width}x${height}`);
  if (width > 4 * height || height > 4 * width) throw new RangeError(`reference image: ${width}x${height} is outside 1:4 .. 4:1`);
  const scale = Math.min(1, Math.sqrt((frameWidth * frameHeight) / (width * height)));
  return {
    height: Math.max(multiple, pythonRound((height * scale) / multiple) * multiple),
    width: Math.max(multiple, pythonRound((width * scale) / multiple) * multiple),
  };
}

/** A reference picture on the service's canvas (referenceMatchSize), resized with Pillow's LANCZOS. */
export function prepareReferenceMatch(img: Rgb8Image, frameWidth: number, frameHeight: number): Rgb8Image {
  const { height, width } = referenceMatchSize(img.width, img.height, frameWidth, frameHeight);
  return img.width === width && img.height === height ? { ...img, data: Uint8Array.from(img.data) } : pilResizeLanczos(img, width, height);
}
