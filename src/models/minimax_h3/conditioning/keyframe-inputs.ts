// The keyframe images of a video job (image_mode keyframe, mode i2v) as conditioning latents, the steps of diffusers'
// FL2VA path before the packing (docs/models/minimax-h3.md "Keyframes in the service"):
//   file -> 8-bit sRGB at its own size (media decodeImageRgb8: EXIF orientation, alpha on white, no resize)
//        -> cover-cropped onto the job's frame with Pillow's LANCZOS (image-prep.ts prepareFrameKeyframes)
//        -> [3, 1, H, W] uint8 values -> encode_vae_condition (condition.ts): ImageNet normalisation, the video VAE
//           encoder on the single frame (tiled as released), the posterior drawn with torch's seed-42 generator,
//           float16 rounding, (z - mean) / std
//        -> one latent frame [C, 1, H / 16, W / 16] per image, in request order
// The VAE encoder is loaded for the job and freed before the text encoder or the transformer's activations need the
// memory (the pipeline calls this between the text encoding and the sampling).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { throwIfCancelled } from '../../../common/errors';
import type { Engine } from '../../../engine/engine';
import { decodeImageRgb8 } from '../../../media';
import type { Rgb8Image } from '../../common/pil-resize';
import type { HostLatents } from './condition-rows';
import { prepareFrameKeyframes } from './image-prep';
import { conditionLatents, conditionNoise, normalizePixels, openVideoVaeCheckpoint, parseVideoVaeEncoderConfig, VideoVaeEncoder, type HostVideo, type TilingOptions } from '../vae/video';

/** Reads the images (request order; labels images[i]) and cover-crops each onto the width x height frame. */
export async function readKeyframes(paths: readonly string[], width: number, height: number, signal?: AbortSignal): Promise<Rgb8Image[]> {
  const decoded: Rgb8Image[] = [];
  for (const [i, path] of paths.entries()) {
    const d = await decodeImageRgb8(await readFile(path), { label: `images[${i}]`, signal });
    decoded.push({ width: d.width, height: d.height, data: d.data, channels: 3 });
    throwIfCancelled(signal);
  }
  return prepareFrameKeyframes(decoded, width, height);
}

/** A prepared RGB picture [H, W, 3] as the encoder's uint8-valued video [3, 1, H, W]. */
export function keyframeVideo(img: Rgb8Image): HostVideo {
  const { width: W, height: H, data } = img;
  if (img.channels !== 3 || data.length !== W * H * 3) throw new RangeError(`keyframe: ${W}x${H}x${img.channels} with ${data.length} values (RGB expected)`);
  const out = new Float32Array(3 * H * W);
  for (let p = 0; p < H * W; p++) for (let c = 0; c < 3; c++) out[c * H * W + p] = data[p * 3 + c]!;
  return { data: out, shape: [3, 1, H, W] };
}

export interface KeyframeEncodeOptions {
  /** Spatial tiling of the encoder (default the released 256 / 64 px). */
  tiling?: TilingOptions | false;
  signal?: AbortSignal;
}

/** encode_vae_condition on each prepared keyframe with the checkpoint's video VAE encoder (vae/), loaded and freed here. */
export async function encodeKeyframes(e: Engine, vaeDir: string, images: readonly Rgb8Image[], o: KeyframeEncodeOptions = {}): Promise<HostLatents[]> {
  const raw = JSON.parse(await readFile(join(vaeDir, 'config.json'), 'utf8')) as Record<string, unknown>;
  const cfg = parseVideoVaeEncoderConfig(raw, join(vaeDir, 'config.json'));
  const ckpt = await openVideoVaeCheckpoint(vaeDir);
  let encoder: VideoVaeEncoder;
  try {
    encoder = await VideoVaeEncoder.load(e, ckpt, cfg); // f32: upstream pins the encoder to float32
  } finally {
    await ckpt.close();
  }
  try {
    const out: HostLatents[] = [];
    for (const img of images) {
      const moments = await encoder.encode(normalizePixels(keyframeVideo(img)), { tiling: o.tiling });
      const n = (moments.shape[0] / 2) * moments.shape[1] * moments.shape[2] * moments.shape[3];
      // a fresh seed-42 generator per picture, as encode_vae_condition makes one per call
      out.push(conditionLatents(cfg, moments, conditionNoise(n)));
      throwIfCancelled(o.signal);
    }
    return out;
  } finally {
    encoder.free();
  }
}
