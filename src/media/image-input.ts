// Images in: user uploads (png, jpeg, webp, gif; animated or multi-page inputs use the first frame)
// become float tensors `[3, H, W]` in [-1, 1], CHW.
//
// Safety: a byte cap before anything is parsed, and a pixel-count cap checked against the header
// (and enforced again by sharp's limitInputPixels) so a tiny file declaring huge dimensions is
// refused before any pixel buffer is allocated. Every decode failure is a BadInputError naming the input.
//
// Normalisation: EXIF orientation applied, colour converted to sRGB (CMYK, grey, 16-bit, ICC),
// alpha flattened on white by default (transparent logos and product cut-outs are usually meant for
// a light page; black is available), then either
//   cover: scaled to cover the target and centre-cropped to exactly width x height (video keyframes), or
//   tier:  scaled keeping the aspect ratio to about a tier's area, sides multiples of 32 (or 16),
//          with a centre crop of at most one multiple (references, edit inputs).
import sharp from 'sharp';
import { MAX_INPUT_BYTES } from '../catalog';
import { BadInputError, CancelledError } from '../common/errors';
import { abortReason } from './ffmpeg';
import { rgb8ToTensor } from './pixels';
import type { ImageTensor } from './types';

/** The spec's per-image byte limit (25 MiB, the catalog's input limit). */
export const MAX_IMAGE_BYTES = MAX_INPUT_BYTES;
/** 8192 x 8192 = 67 megapixels: above phone cameras' 48-50 MP; decoding stays under ~270 MB of RGBA. */
export const MAX_IMAGE_PIXELS = 8192 * 8192;
export const IMAGE_FORMATS = ['png', 'jpeg', 'webp', 'gif'] as const;
export type ImageFormat = (typeof IMAGE_FORMATS)[number];

/** Target areas of the image resolution tiers (1K about one megapixel, 2K about four). */
export const RES_TIER_AREAS = { '1K': 1024 * 1024, '2K': 2048 * 2048 } as const;
export type ResTier = keyof typeof RES_TIER_AREAS;

const DECODE_TIMEOUT_S = 30;

export interface ImageProbe {
  format: ImageFormat;
  /** Size as displayed, i.e. after EXIF orientation. */
  width: number;
  height: number;
  /** Frames or pages in the file (1 for still images); only the first is used. */
  pages: number;
  hasAlpha: boolean;
  bytes: number;
}

export interface ProbeImageOptions {
  /** Also decode the pixels once (catches truncated or corrupt data at validation time, at the cost of a decode). */
  verify?: boolean;
  signal?: AbortSignal;
}

/**
 * Cheap validation-time check: byte cap, format, dimensions and pixel cap from the header alone
 * (plus a full decode with `verify`). Throws BadInputError naming `label`, CancelledError on abort.
 */
export async function probeImage(buf: Buffer, label = 'image', opts: ProbeImageOptions = {}): Promise<ImageProbe> {
  checkBytes(buf, label);
  // Header only, no pixels decoded: the pixel limit is lifted here so the message can state the size.
  const meta = await guard(sharp(buf, { ...sharpInput, limitInputPixels: false }).metadata(), label, undefined, opts.signal);
  const format = meta.format as string;
  if (!(IMAGE_FORMATS as readonly string[]).includes(format)) {
    throw new BadInputError(`${label}: ${format} images are not accepted; use png, jpeg, webp or gif (the first frame of an animated one)`);
  }
  const width = meta.autoOrient?.width ?? meta.width;
  const height = meta.autoOrient?.height ?? meta.height;
  // pageHeight: for animated gif/webp, metadata height is of one frame already; keep the frame's size.
  checkPixels(width, height, label);
  const probe: ImageProbe = { format: format as ImageFormat, width, height, pages: meta.pages ?? 1, hasAlpha: meta.hasAlpha, bytes: buf.length };
  if (opts.verify) {
    await guard(sharp(buf, sharpInput).resize(64, 64, { fit: 'inside' }).raw().timeout({ seconds: DECODE_TIMEOUT_S }).toBuffer(), label, format, opts.signal);
  }
  return probe;
}

/** How the decoded image is brought to the model's size. */
export type ImageFit =
  /** Scale to cover width x height, centre-crop the overflow: exactly width x height out (keyframes). */
  | { mode: 'cover'; width: number; height: number }
  /** Keep the aspect ratio at about `area` pixels (see tierSize); references and edit inputs. */
  | { mode: 'tier'; area: number; multiple?: number; minSide?: number; maxSide?: number };

export interface LoadImageOptions {
  /** Names the input in error messages, e.g. `images[1]`. */
  label: string;
  fit: ImageFit;
  /** Colour under transparent pixels. Default 'white'. */
  background?: 'white' | 'black';
  signal?: AbortSignal;
}

export interface LoadedImage extends ImageTensor {
  /** What the file was: format and displayed size before scaling. */
  source: ImageProbe;
}

/**
 * Decodes, normalises and scales one uploaded image to a CHW float tensor in [-1, 1].
 * Throws BadInputError (naming `label`) for anything wrong with the data, CancelledError on abort.
 */
export async function loadImage(buf: Buffer, opts: LoadImageOptions): Promise<LoadedImage> {
  const { label } = opts;
  const source = await probeImage(buf, label, { signal: opts.signal });
  const { width, height } =
    opts.fit.mode === 'cover'
      ? { width: opts.fit.width, height: opts.fit.height }
      : tierSize(source.width, source.height, opts.fit.area, opts.fit);
  if (!(width >= 1 && height >= 1)) throw new Error(`loadImage: target size ${width}x${height} is not valid`);
  const bg = opts.background === 'black' ? { r: 0, g: 0, b: 0 } : { r: 255, g: 255, b: 255 };
  const pipeline = sharp(buf, sharpInput)
    .flatten({ background: bg })
    .resize(width, height, { fit: 'cover', position: 'centre', kernel: 'lanczos3' })
    .toColourspace('srgb')
    .removeAlpha()
    .raw()
    .timeout({ seconds: DECODE_TIMEOUT_S });
  const { data, info } = await guard(pipeline.toBuffer({ resolveWithObject: true }), label, source.format, opts.signal);
  if (info.channels !== 3 || info.width !== width || info.height !== height || data.length !== width * height * 3) {
    throw new Error(`loadImage ${label}: sharp returned ${info.width}x${info.height}x${info.channels}, expected ${width}x${height}x3`);
  }
  return { ...rgb8ToTensor(data, width, height), source };
}

/** An image decoded at its own size as 8-bit RGB, interleaved [height, width, 3] (the layout Pillow gives). */
export interface DecodedRgb8 {
  width: number;
  height: number;
  data: Uint8Array;
  channels: 3;
  source: ImageProbe;
}

/**
 * Decodes one uploaded image to 8-bit sRGB at its displayed size, with no resize: EXIF orientation applied, alpha
 * flattened on white (or black). For models whose upstream resizes with Pillow (MiniMax H3's keyframes): their own
 * resampler (models/common/pil-resize.ts) then sees the original pixels, where sharp's Lanczos would differ by a
 * level here and there. Throws BadInputError naming `label`, CancelledError on abort.
 */
export async function decodeImageRgb8(buf: Buffer, opts: { label: string; background?: 'white' | 'black'; signal?: AbortSignal }): Promise<DecodedRgb8> {
  const { label } = opts;
  const source = await probeImage(buf, label, { signal: opts.signal });
  const bg = opts.background === 'black' ? { r: 0, g: 0, b: 0 } : { r: 255, g: 255, b: 255 };
  const pipeline = sharp(buf, sharpInput).flatten({ background: bg }).toColourspace('srgb').removeAlpha().raw().timeout({ seconds: DECODE_TIMEOUT_S });
  const { data, info } = await guard(pipeline.toBuffer({ resolveWithObject: true }), label, source.format, opts.signal);
  if (info.channels !== 3 || info.width !== source.width || info.height !== source.height || data.length !== source.width * source.height * 3) {
    throw new Error(`decodeImageRgb8 ${label}: sharp returned ${info.width}x${info.height}x${info.channels}, expected ${source.width}x${source.height}x3`);
  }
  return { width: info.width, height: info.height, data: new Uint8Array(data.buffer, data.byteOffset, data.length), channels: 3, source };
}

/**
 * Size for a resolution tier keeping the aspect ratio of `srcW x srcH`: each side is rounded down to a
 * multiple of `multiple` (default 32) so the area never exceeds `area`, then clamped to
 * [minSide, maxSide] (default 256 to 4096, the spec's explicit-size range). For 1K this gives the spec's
 * table exactly: 1024x1024, 1344x768, 768x1344, 1152x864, 864x1152.
 */
export function tierSize(
  srcW: number,
  srcH: number,
  area: number,
  opts: { multiple?: number; minSide?: number; maxSide?: number } = {},
): { width: number; height: number } {
  const m = opts.multiple ?? 32;
  const lo = Math.max(m, opts.minSide ?? 256);
  const hi = opts.maxSide ?? 4096;
  const aspect = srcW / srcH;
  // 1e-6 guards against 767.9999... flooring to 736
  const side = (x: number) => Math.min(hi, Math.max(lo, Math.floor(x / m + 1e-6) * m));
  return { width: side(Math.sqrt(area * aspect)), height: side(Math.sqrt(area / aspect)) };
}

// first frame/page only; 'error' rather than sharp's default 'warning' so that harmless decoder warnings
// (extraneous bytes after a JPEG's end marker, as some cameras write) are accepted like browsers do, while
// truncated and corrupt data still fail.
const sharpInput = { failOn: 'error', limitInputPixels: MAX_IMAGE_PIXELS, pages: 1, page: 0, autoOrient: true } as const;

function checkBytes(buf: Buffer, label: string): void {
  if (buf.length === 0) throw new BadInputError(`${label}: the file is empty`);
  if (buf.length > MAX_IMAGE_BYTES) {
    throw new BadInputError(`${label}: image is ${(buf.length / 1048576).toFixed(1)} MB; at most 25 MB is accepted`);
  }
}

function checkPixels(width: number, height: number, label: string): void {
  if (!(width > 0 && height > 0)) throw new BadInputError(`${label}: the image declares no size (${width}x${height})`);
  if (width * height > MAX_IMAGE_PIXELS) {
    throw new BadInputError(
      `${label}: image is ${width}x${height} (${((width * height) / 1e6).toFixed(0)} megapixels); at most ${(MAX_IMAGE_PIXELS / 1e6).toFixed(0)} megapixels are accepted`,
    );
  }
}

/** Awaits a sharp promise, turning its errors into BadInputError and an abort into CancelledError. */
async function guard<T>(p: Promise<T>, label: string, format: string | undefined, signal: AbortSignal | undefined): Promise<T> {
  if (signal?.aborted) {
    p.catch(() => undefined);
    throw new CancelledError(abortReason(signal));
  }
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(new CancelledError(abortReason(signal)));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    // sharp's work cannot be interrupted; on abort it finishes in the background, bounded by its timeout.
    return await Promise.race([p, aborted]);
  } catch (err) {
    if (err instanceof CancelledError) {
      p.catch(() => undefined);
      throw err;
    }
    throw new BadInputError(describeSharpError(err as Error, label, format));
  } finally {
    if (onAbort) signal?.removeEventListener('abort', onAbort);
  }
}

function describeSharpError(err: Error, label: string, format: string | undefined): string {
  const msg = err.message ?? '';
  if (/unsupported image format/i.test(msg)) return `${label}: not a png, jpeg, webp or gif image`;
  if (/empty/i.test(msg)) return `${label}: the file is empty`;
  if (/pixel limit/i.test(msg)) return `${label}: image dimensions exceed ${(MAX_IMAGE_PIXELS / 1e6).toFixed(0)} megapixels`;
  if (/timeout/i.test(msg)) return `${label}: decoding took longer than ${DECODE_TIMEOUT_S} s`;
  const what = format ? `${format} data` : 'image data';
  const detail = msg.replace(/\s+/g, ' ').trim().replace(/:$/, '').slice(0, 200);
  return `${label}: the ${what} is damaged or truncated and cannot be decoded (${detail})`;
}
