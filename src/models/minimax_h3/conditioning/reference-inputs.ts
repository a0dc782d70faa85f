// The reference pictures of a video job (image_mode reference, the Ref2VA partition), the steps of diffusers'
// MiniMaxH3Ref2VASetupStep and reference encoder step before the packing (docs/models/minimax-h3.md "References in
// the service"):
//   file -> 8-bit sRGB at its own size (media decodeImageRgb8: EXIF orientation, alpha on white, no resize)
//        -> its own canvas, keeping its aspect (a reference does not bind geometry), Pillow's LANCZOS: by default
//           ComfyUI's `match` (scaled down to at most the job's frame area, never up, sides on 32: image-prep.ts
//           prepareReferenceMatch), or upstream diffusers' 2048 short edge (prepareReferenceImage, checked against
//           upstream) with canvas 'diffusers'
//        -> encode_vae_condition exactly as a keyframe (keyframe-inputs.ts encodeKeyframes: the video VAE encoder on the
//           single frame, seed-42 posterior, float16 rounding, normalisation) -> one latent frame [C, 1, H/16, W/16]
// The packed sequence is references.ts buildReferenceSequence (one image block per picture, request order).
import { readFile } from 'node:fs/promises';
import { videoReferenceProblem } from '../../../catalog';
import { BadInputError, throwIfCancelled } from '../../../common/errors';
import { decodeImageRgb8 } from '../../../media';
import type { Rgb8Image } from '../../common/pil-resize';
import type { HostLatents } from './condition-rows';
import { prepareReferenceImage, prepareReferenceMatch } from './image-prep';
import type { ReferenceBlock } from '../sequence/references';

/** How a reference picture is sized: 'match' (the service's default: at most the frame's area) or 'diffusers' (a 2048
 * short edge, upscaling too). */
export type ReferenceCanvas = 'match' | 'diffusers';

/** Reads the images (request order; labels images[i]) and puts each on its own reference canvas. */
export async function readReferences(paths: readonly string[], frame: { width: number; height: number }, signal?: AbortSignal, canvas: ReferenceCanvas = 'match'): Promise<Rgb8Image[]> {
  const out: Rgb8Image[] = [];
  for (const [i, path] of paths.entries()) {
    const d = await decodeImageRgb8(await readFile(path), { label: `images[${i}]`, signal });
    const img: Rgb8Image = { width: d.width, height: d.height, data: d.data, channels: 3 };
    // the API refuses these at creation; a task from elsewhere fails as bad input, naming the picture
    const problem = videoReferenceProblem(`images[${i}]`, img.width, img.height);
    if (problem) throw new BadInputError(problem);
    out.push(canvas === 'diffusers' ? prepareReferenceImage(img) : prepareReferenceMatch(img, frame.width, frame.height));
    throwIfCancelled(signal);
  }
  return out;
}

/** The packed sequence's blocks of encoded reference pictures: one latent frame each, on its own grid. */
export function referenceBlocks(latents: readonly HostLatents[]): ReferenceBlock[] {
  return latents.map((l) => {
    if (l.shape[1] !== 1) throw new RangeError(`reference picture: ${l.shape[1]} latent frames (one expected)`);
    return { kind: 'image', latentHeight: l.shape[2], latentWidth: l.shape[3] };
  });
}
