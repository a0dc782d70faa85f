// Pixel layout conversions between model tensors and 8-bit RGB.
//   tensor: Float32Array, CHW `[3, H, W]` (or HWC), values in [-1, 1] ('signed') or [0, 1] ('unit')
//   rgb8:   Uint8Array/Buffer, HWC `[H, W, 3]`, 0..255 (what ffmpeg's rgb24 and sharp's raw input take)
import type { ImageTensor } from './types';

/** How float pixels are scaled: 'signed' is [-1, 1] (diffusion/VAE convention), 'unit' is [0, 1]. */
export type FloatRange = 'signed' | 'unit';
/** Memory order of a float frame: 'chw' is `[3, H, W]` (planar), 'hwc' is `[H, W, 3]` (interleaved). */
export type PixelLayout = 'chw' | 'hwc';

/** 8-bit RGB, HWC `[H, W, 3]`. */
export interface RgbImage {
  data: Uint8Array;
  width: number;
  height: number;
}

/**
 * Float pixels to 8-bit HWC RGB: scaled to 0..255 from `range`, then clamped and rounded by
 * Uint8ClampedArray semantics (round half to even; NaN becomes 0), which V8 does natively: about
 * 10-15 ms for a 1344x768 frame. `out` may be passed to reuse one buffer per frame.
 */
export function floatToRgb8(
  src: Float32Array,
  width: number,
  height: number,
  range: FloatRange,
  layout: PixelLayout,
  out: Buffer = Buffer.allocUnsafe(width * height * 3),
): Buffer {
  const n = width * height;
  if (src.length !== n * 3) throw new Error(`floatToRgb8: ${src.length} values for ${width}x${height}x3 (${n * 3} expected)`);
  const dst = new Uint8ClampedArray(out.buffer, out.byteOffset, n * 3);
  // v8 = v * k + b: [-1, 1] -> (v + 1) * 127.5, [0, 1] -> v * 255
  const k = range === 'signed' ? 127.5 : 255;
  const b = range === 'signed' ? 127.5 : 0;
  if (layout === 'hwc') {
    for (let i = 0; i < n * 3; i++) dst[i] = src[i] * k + b;
  } else {
    for (let i = 0, o = 0; i < n; i++, o += 3) {
      dst[o] = src[i] * k + b;
      dst[o + 1] = src[n + i] * k + b;
      dst[o + 2] = src[2 * n + i] * k + b;
    }
  }
  return out;
}

/** 8-bit HWC RGB (3 channels) to a CHW tensor in [-1, 1]. */
export function rgb8ToTensor(src: Uint8Array, width: number, height: number): ImageTensor {
  const n = width * height;
  if (src.length !== n * 3) throw new Error(`rgb8ToTensor: ${src.length} bytes for ${width}x${height}x3`);
  const data = new Float32Array(n * 3);
  for (let i = 0, s = 0; i < n; i++, s += 3) {
    data[i] = src[s] / 127.5 - 1;
    data[n + i] = src[s + 1] / 127.5 - 1;
    data[2 * n + i] = src[s + 2] / 127.5 - 1;
  }
  return { data, shape: [3, height, width] };
}

/** A CHW tensor in `range` (default [-1, 1]) to 8-bit HWC RGB. */
export function tensorToRgb8(t: ImageTensor, range: FloatRange = 'signed'): RgbImage {
  const [c, height, width] = t.shape;
  if (c !== 3) throw new Error(`tensorToRgb8: shape [${t.shape.join(', ')}], expected [3, H, W]`);
  return { data: floatToRgb8(t.data, width, height, range, 'chw'), width, height };
}
