// The Qwen3-VL image processor (transformers' Qwen2VLImageProcessor, which Qwen3VLProcessor uses) from a decoded
// RGB image to the tower's patch rows, deterministic and on the CPU:
//
//   image [3, H, W] in [-1, 1] (src/media's ImageTensor: v / 127.5 - 1 for 8-bit v)
//   -> smart_resize check: H, W multiples of patch * merge (32) and minPixels <= H * W <= maxPixels, where the
//      processor's resize is the identity (we do not resample: callers resize first, as the pipeline does)
//   -> (v / 255 - mean[c]) / std[c]            (= the ImageTensor value itself when mean = std = 0.5)
//   -> patches in merge-block order: for each 2x2 block of patches (row-major over blocks), its 4 patches
//      (row-major inside the block); one patch row = [c][t][y][x] (C * T * p * p = 1536), the single frame
//      repeated over the T = 2 temporal slots (what Conv3d's kernel (T, p, p) reads)
//
// grid = [1, H / p, W / p]; the LLM sees (H / p / 2) * (W / p / 2) merged tokens per image.
import type { ImageTensor } from '../../media/types';
import type { Qwen3VlImageProcessorConfig, Qwen3VlVisionConfig } from './config';
import { pythonRound } from '../../common/python-round';

/** One image ready for the tower. */
export interface VisionInput {
  /** (patches, C * T * p * p) row-major, float32. */
  patches: Float32Array;
  /** image_grid_thw: [1, H / p, W / p]. */
  grid: [number, number, number];
}

/** transformers' smart_resize(height, width, factor, min_pixels, max_pixels) -> [h, w]. */
export function smartResize(height: number, width: number, factor: number, minPixels: number, maxPixels: number): [number, number] {
  if (Math.max(height, width) / Math.min(height, width) > 200) throw new RangeError(`smartResize: aspect ratio of ${width}x${height} exceeds 200`);
  let h = pythonRound(height / factor) * factor;
  let w = pythonRound(width / factor) * factor;
  if (h * w > maxPixels) {
    const beta = Math.sqrt((height * width) / maxPixels);
    h = Math.max(factor, Math.floor(height / beta / factor) * factor);
    w = Math.max(factor, Math.floor(width / beta / factor) * factor);
  } else if (h * w < minPixels) {
    const beta = Math.sqrt(minPixels / (height * width));
    h = Math.ceil((height * beta) / factor) * factor;
    w = Math.ceil((width * beta) / factor) * factor;
  }
  return [h, w];
}

/** Merged tokens (<|image_pad|> slots) of an image that needs no resize. */
export function visionTokenCount(grid: readonly [number, number, number], merge: number): number {
  return (grid[0] * grid[1] * grid[2]) / (merge * merge);
}

/** The processor on one image (see the header); throws when the processor would have resized it. */
export function imagePatches(image: ImageTensor, cfg: Qwen3VlVisionConfig, proc: Qwen3VlImageProcessorConfig, label = 'image'): VisionInput {
  const [C, H, W] = image.shape;
  const { patchSize: p, temporalPatchSize: T, spatialMergeSize: m } = cfg;
  if (C !== cfg.inChannels || image.data.length !== C * H * W) throw new RangeError(`${label}: image [${image.shape}] with ${image.data.length} values, expected [${cfg.inChannels}, H, W]`);
  const [rh, rw] = smartResize(H, W, p * m, proc.minPixels, proc.maxPixels);
  if (rh !== H || rw !== W) {
    throw new RangeError(
      `${label}: ${W}x${H} would be resized to ${rw}x${rh} by the Qwen3-VL processor; resize it first (sides multiples of ${p * m}, ${proc.minPixels}..${proc.maxPixels} pixels)`,
    );
  }
  const gh = H / p;
  const gw = W / p;
  const row = C * T * p * p;
  const out = new Float32Array(gh * gw * row);
  // [-1, 1] -> [0, 1] -> (x - mean) / std, per channel; exact identity for mean = std = 0.5
  const scale = proc.imageStd.map((s) => 1 / (2 * s));
  const shift = proc.imageMean.map((mu, c) => (0.5 - mu) / proc.imageStd[c]!);
  const identity = proc.imageMean.every((v) => v === 0.5) && proc.imageStd.every((v) => v === 0.5);
  let o = 0;
  for (let bh = 0; bh < gh / m; bh++) {
    for (let bw = 0; bw < gw / m; bw++) {
      for (let mh = 0; mh < m; mh++) {
        for (let mw = 0; mw < m; mw++) {
          const y0 = (bh * m + mh) * p;
          const x0 = (bw * m + mw) * p;
          for (let c = 0; c < C; c++) {
            const plane = c * H * W;
            for (let t = 0; t < T; t++) {
              for (let y = 0; y < p; y++) {
                const src = plane + (y0 + y) * W + x0;
                for (let x = 0; x < p; x++) {
                  const v = image.data[src + x]!;
                  out[o++] = identity ? v : v * scale[c]! + shift[c]!;
                }
              }
            }
          }
        }
      }
    }
  }
  return { patches: out, grid: [1, gh, gw] };
}
