// Pixels in and out of Qwen-Image-2.1: the VAE's RGBA output as the png's RGB, and reference images brought to
// upstream's size and encoded into the packed latents the transformer reads.
import type { Engine } from '../../engine/engine';
import { concat } from '../../engine/ops/layout';
import type { Tensor } from '../../engine/tensor';
import type { ImageTensor } from '../../media';
import type { QwenImage21Vae } from './vae';
import { referenceSize } from '../../catalog';


/**
 * The VAE's output (H, W, C) channels-last in [-1, 1] as the png's RGB, CHW in [-1, 1]: RGB as is for 3 channels; the
 * RGBA model (4 channels) composited over white with alpha = (a + 1) / 2 clamped to [0, 1], which is what a light
 * page shows (the png writer has no alpha channel; upstream returns an RGBA image).
 */
export function rgbOverWhite(data: Float32Array, height: number, width: number, channels: number): Float32Array {
  const n = height * width;
  if (data.length !== channels * n) throw new RangeError(`rgbOverWhite: ${data.length} values for ${height}x${width}x${channels}`);
  if (channels !== 3 && channels !== 4) throw new RangeError(`rgbOverWhite: ${channels} channels (3 or 4 expected)`);
  const out = new Float32Array(3 * n);
  for (let i = 0; i < n; i++) {
    const a = channels === 4 ? Math.min(1, Math.max(0, (data[i * 4 + 3]! + 1) / 2)) : 1;
    for (let c = 0; c < 3; c++) out[c * n + i] = a * data[i * channels + c]! + (1 - a);
  }
  return out;
}

/**
 * The size a reference of srcW x srcH is brought to: upstream's calculate_dimensions(area, ratio), the catalog's
 * referenceSize (the API refuses at creation what it would make too narrow for the vision processor). Upstream
 * resizes to exactly that (a slight stretch); we scale to cover it and crop the sliver (media 'cover'), keeping
 * proportions.
 */
export const referenceDimensions = referenceSize;

/**
 * References (CHW RGB in [-1, 1], sides multiples of 16) -> their normalised latents packed in order,
 * (1, sum of (H/16)(W/16), zDim): VAE encode of each as opaque RGBA (upstream converts to RGBA; alpha 1), the
 * (1, h, w, C) result taken row-major as upstream's _pack_latents does.
 */
export function encodeReferences(e: Engine, vae: QwenImage21Vae, images: readonly ImageTensor[]): Tensor {
  const parts: Tensor[] = [];
  try {
    for (const im of images) {
      const [, H, W] = im.shape;
      const n = H * W;
      const rgba = new Float32Array(n * 4);
      for (let i = 0; i < n; i++) {
        rgba[i * 4] = im.data[i]!;
        rgba[i * 4 + 1] = im.data[n + i]!;
        rgba[i * 4 + 2] = im.data[2 * n + i]!;
        rgba[i * 4 + 3] = 1;
      }
      const px = e.upload(rgba, [1, H, W, 4], vae.dtype, 'qi21 reference pixels');
      try {
        const z = vae.encode(px); // (1, H/16, W/16, C)
        parts.push(z.reshape([1, z.shape[1]! * z.shape[2]!, z.shape[3]!]));
      } finally {
        px.free();
      }
    }
    return parts.length === 1 ? parts.pop()! : concat(e, parts, 1);
  } finally {
    for (const p of parts) p.free();
  }
}
