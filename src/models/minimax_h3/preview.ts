// MiniMax H3's live previews (issue 46; the common part: models/common/latent-preview.ts): the generated rows'
// denoised estimate shown as its first, middle and last latent frames through a latent-to-RGB projection fitted
// against the loaded video VAE.
import type { Engine } from '../../engine/engine';
import type { Tensor } from '../../engine/tensor';
import { fitLatentProjection, projectLatents, type LatentProjection, type RgbPicture } from '../common/latent-preview';
import { unpatchify } from './transformer/patchify';
import type { VideoVaeDecoder } from './vae/video';

/** The generated rows [rows, patch] as latents: channels, [T, h, w] latent frames and cells, the transformer's patch. */
export interface PreviewGeometry {
  channels: number;
  dims: [number, number, number];
  patch: readonly [number, number, number];
}

/** The first, middle and last latent frames of the rows x0 through `p` (one picture each, distinct frames only).
 * Rows are frame-major (patchify.ts), so each frame's patch group is a contiguous run of rows: only those groups are
 * unpatchified and read (3 of 72 latent frames at 768p 10 s: 1.1 of 26.6 MiB). */
export async function h3PreviewFrames(e: Engine, x0: Tensor, g: PreviewGeometry, p: LatentProjection): Promise<RgbPicture[]> {
  const C = g.channels;
  const [T, h, w] = g.dims;
  const [pt, ph, pw] = g.patch;
  const perGroup = (h / ph) * (w / pw);
  const pictures: RgbPicture[] = [];
  for (const t of new Set([0, Math.floor((T - 1) / 2), T - 1])) {
    const group = Math.floor(t / pt);
    // [1, C, pt, h, w]: the latent frames of this group of rows
    const lat = unpatchify(e, x0.slice(0, group * perGroup, (group + 1) * perGroup), C, [pt, h, w], g.patch);
    let data: Float32Array;
    try {
      data = await e.read(lat);
    } finally {
      lat.free();
    }
    const f = t % pt;
    const cells = new Float32Array(h * w * C);
    for (let c = 0; c < C; c++) for (let i = 0; i < h * w; i++) cells[i * C + c] = data[(c * pt + f) * h * w + i]!;
    pictures.push(projectLatents(p, cells, h, w));
  }
  return pictures;
}

/** The projection of the sampler's latents to RGB, fitted against the video VAE's first frame of still clips. */
export function fitH3Projection(vae: VideoVaeDecoder, C: number): Promise<LatentProjection> {
  return fitLatentProjection({
    channels: C, grid: 16, samples: 2, seed: 46,
    decode: async (lat, g) => {
      // a still clip of the fewest latent frames the decoder takes: [g, g, C] -> [C, T, g, g], every frame the same
      const T = fewestLatentFrames(vae, C, g);
      const cm = new Float32Array(C * T * g * g);
      for (let c = 0; c < C; c++) for (let t = 0; t < T; t++) for (let i = 0; i < g * g; i++) cm[(c * T + t) * g * g + i] = lat[i * C + c]!;
      const shape: [number, number, number, number] = [C, T, g, g];
      const { height, width } = vae.outputShape(shape);
      const frames = vae.frames({ data: cm, shape });
      const first = (await frames.next()).value as Float32Array | undefined;
      await frames.return(undefined);
      if (!first) throw new Error('the video VAE decoded no frame');
      const rgb = new Uint8Array(first.length);
      for (let i = 0; i < first.length; i++) rgb[i] = Math.round(Math.min(1, Math.max(0, first[i]!)) * 255);
      return { rgb, width, height };
    },
  });
}

/** The fewest latent frames the video VAE decodes (its chunking needs a few). */
function fewestLatentFrames(vae: VideoVaeDecoder, C: number, g: number): number {
  for (let T = 1; T <= 64; T++) {
    try {
      vae.outputShape([C, T, g, g]);
      return T;
    } catch {
      // too few for a chunk: one more
    }
  }
  throw new Error('the video VAE decodes no clip of up to 64 latent frames');
}
