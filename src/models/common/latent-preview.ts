// Live previews (issue 46): a small picture of where a job is going, made from the sampler's current denoised
// estimate x0 = x_t - sigma v by a linear latent-to-RGB projection, the way ComfyUI's latent2rgb previews are made.
// The projection is fitted once per loaded model against the model's own decoder (so it is right for whatever weights
// are loaded, real or demo): random latents in the sampler's space are decoded, each latent cell's pixels averaged, and
// RGB regressed on the cell's channels by least squares. A preview then costs one elementwise op, one read of the
// latents and a C x 3 product per cell on the host: far under a step (docs/performance.md "Previews").
import sharp from 'sharp';
import type { Tensor } from '../../engine/tensor';
import type { DenoisedPreview } from './guided-euler';
import type { RunContext } from './pipeline';
import { torchRandn } from './torch-rng';

/** RGB (0-255) of a latent cell: rgb = weights x latent + bias. */
export interface LatentProjection {
  channels: number;
  /** [3 * channels]: row r holds the weights of colour r. */
  weights: Float32Array;
  bias: Float32Array;
}

/** A decoded picture: 8-bit RGB, [height, width, 3] row-major. */
export interface RgbPicture {
  rgb: Uint8Array;
  width: number;
  height: number;
}

export interface ProjectionFit {
  channels: number;
  /** Latent cells per side of each fitted sample (at least 8). */
  grid: number;
  samples: number;
  seed: number;
  /** Decodes latents in the sampler's space, [grid, grid, channels] channel-last, to a picture whose sides are a
   * multiple of grid (each cell a square block of pixels). */
  decode(latents: Float32Array, grid: number): Promise<RgbPicture>;
}

/** Least squares of each cell's mean colour on its channels and a constant (ridge 1e-3 keeps it solvable). */
export async function fitLatentProjection(o: ProjectionFit): Promise<LatentProjection> {
  const C = o.channels;
  const K = C + 1;
  const xtx = new Float64Array(K * K);
  const xty = new Float64Array(K * 3);
  for (let s = 0; s < o.samples; s++) {
    const lat = torchRandn(o.seed + s, o.grid * o.grid * C);
    const pic = await o.decode(lat, o.grid);
    const bh = pic.height / o.grid;
    const bw = pic.width / o.grid;
    if (!Number.isInteger(bh) || !Number.isInteger(bw)) throw new RangeError(`fitLatentProjection: a ${pic.width}x${pic.height} picture for a ${o.grid} x ${o.grid} grid`);
    const row = new Float64Array(K);
    for (let gy = 0; gy < o.grid; gy++) {
      for (let gx = 0; gx < o.grid; gx++) {
        const mean = [0, 0, 0];
        for (let y = gy * bh; y < (gy + 1) * bh; y++) for (let x = gx * bw; x < (gx + 1) * bw; x++) for (let c = 0; c < 3; c++) mean[c]! += pic.rgb[(y * pic.width + x) * 3 + c]!;
        for (let c = 0; c < C; c++) row[c] = lat[(gy * o.grid + gx) * C + c]!;
        row[C] = 1;
        for (let a = 0; a < K; a++) {
          for (let b = 0; b < K; b++) xtx[a * K + b]! += row[a]! * row[b]!;
          for (let c = 0; c < 3; c++) xty[a * 3 + c]! += (row[a]! * mean[c]!) / (bh * bw);
        }
      }
    }
  }
  for (let a = 0; a < C; a++) xtx[a * K + a]! += 1e-3;
  const beta = solve(xtx, xty, K, 3);
  const weights = new Float32Array(3 * C);
  const bias = new Float32Array(3);
  for (let c = 0; c < 3; c++) {
    for (let k = 0; k < C; k++) weights[c * C + k] = beta[k * 3 + c]!;
    bias[c] = beta[C * 3 + c]!;
  }
  return { channels: C, weights, bias };
}

/** Solves A X = B (A: n x n, B: n x m) by Gaussian elimination with partial pivoting. */
function solve(A: Float64Array, B: Float64Array, n: number, m: number): Float64Array {
  const a = Float64Array.from(A);
  const b = Float64Array.from(B);
  for (let col = 0; col < n; col++) {
    let piv = col;
    for (let r = col + 1; r < n; r++) if (Math.abs(a[r * n + col]!) > Math.abs(a[piv * n + col]!)) piv = r;
    if (piv !== col) {
      for (let k = 0; k < n; k++) [a[col * n + k], a[piv * n + k]] = [a[piv * n + k]!, a[col * n + k]!];
      for (let k = 0; k < m; k++) [b[col * m + k], b[piv * m + k]] = [b[piv * m + k]!, b[col * m + k]!];
    }
    const d = a[col * n + col]!;
    if (d === 0) throw new RangeError('fitLatentProjection: the fit is singular');
    for (let r = 0; r < n; r++) {
      if (r === col) continue;
      const f = a[r * n + col]! / d;
      if (f === 0) continue;
      for (let k = col; k < n; k++) a[r * n + k]! -= f * a[col * n + k]!;
      for (let k = 0; k < m; k++) b[r * m + k]! -= f * b[col * m + k]!;
    }
  }
  for (let r = 0; r < n; r++) for (let k = 0; k < m; k++) b[r * m + k]! /= a[r * n + r]!;
  return b;
}

/** The picture of `frames` latent grids, [frames][h][w][C] channel-last, side by side (a video's few frames), one
 * pixel per cell. */
export function projectLatents(p: LatentProjection, latents: Float32Array, h: number, w: number, frames = 1): RgbPicture {
  const C = p.channels;
  if (latents.length !== frames * h * w * C) throw new RangeError(`projectLatents: ${latents.length} values for ${frames} x ${h} x ${w} x ${C}`);
  const width = w * frames;
  const rgb = new Uint8Array(h * width * 3);
  for (let f = 0; f < frames; f++) {
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        const at = ((f * h + y) * w + x) * C;
        const out = (y * width + f * w + x) * 3;
        for (let c = 0; c < 3; c++) {
          let v = p.bias[c]!;
          for (let k = 0; k < C; k++) v += p.weights[c * C + k]! * latents[at + k]!;
          rgb[out + c] = v <= 0 ? 0 : v >= 255 ? 255 : Math.round(v);
        }
      }
    }
  }
  return { rgb, width, height: h };
}

/** The size a picture is shown at: its longer side `side` px, its aspect kept. */
function previewSize(pic: RgbPicture, side: number): { width: number; height: number } {
  const scale = side / Math.max(pic.width, pic.height);
  return { width: Math.max(1, Math.round(pic.width * scale)), height: Math.max(1, Math.round(pic.height * scale)) };
}

/** One picture scaled to previewSize (up from the latent grid, smoothly), as an encoder input. */
function scaled(pic: RgbPicture, size: { width: number; height: number }) {
  return sharp(Buffer.from(pic.rgb.buffer, pic.rgb.byteOffset, pic.rgb.byteLength), { raw: { width: pic.width, height: pic.height, channels: 3 } })
    .resize(size.width, size.height, { kernel: 'cubic' });
}

/** The preview file: webp, scaled so that its longer side is `side` px. */
export async function previewWebp(pic: RgbPicture, side = 256): Promise<{ webp: Buffer; width: number; height: number }> {
  const size = previewSize(pic, side);
  return { webp: await scaled(pic, size).webp({ quality: 80 }).toBuffer(), ...size };
}

/** A video's preview: its frames as an animated webp (0.4 s each, looping), each scaled as previewWebp scales a
 * picture, so the preview has the output's aspect. */
export async function previewAnimatedWebp(frames: readonly RgbPicture[], side = 256): Promise<{ webp: Buffer; width: number; height: number }> {
  if (frames.length === 1) return previewWebp(frames[0]!, side);
  const size = previewSize(frames[0]!, side);
  // each frame scaled once, raw, then one animated encode
  const raws = await Promise.all(frames.map((f) => scaled(f, size).png({ compressionLevel: 0 }).toBuffer()));
  const webp = await sharp(raws, { join: { animated: true } }).webp({ quality: 80, delay: 400, loop: 0 }).toBuffer();
  return { webp, ...size };
}

/** A decoder's planar [3][height * width] output in [-1, 1] as an 8-bit picture. */
export function pictureFromPlanar(planar: Float32Array, width: number, height: number): RgbPicture {
  const n = width * height;
  const rgb = new Uint8Array(3 * n);
  for (let i = 0; i < n; i++) for (let c = 0; c < 3; c++) rgb[i * 3 + c] = Math.min(255, Math.max(0, Math.round(((planar[c * n + i]! + 1) / 2) * 255)));
  return { rgb, width, height };
}

/** The sampler's preview hook for a job (undefined when previews are off): at previewSteps, `picture` of the
 * denoised estimate, sent as a webp through ctx.preview. */
export function denoisedPreview(ctx: RunContext, steps: number, picture: (x0: Tensor) => Promise<RgbPicture | RgbPicture[]>, offset = 0): DenoisedPreview | undefined {
  const send = ctx.preview;
  if (!send) return undefined;
  const at = previewSteps(steps);
  let broken = false;
  // `offset`: added to the sampler's count to give the job's step (a grid-points profile counts its first point)
  return {
    at: (done) => !broken && at.has(done + offset),
    // a preview that fails never fails the job: the job goes on without previews, and the worker's log says why
    show: async (x0, done) => {
      try {
        const pic = await picture(x0);
        send({ step: done + offset, max: steps, ...(await (Array.isArray(pic) ? previewAnimatedWebp(pic) : previewWebp(pic))) });
      } catch (err) {
        broken = true;
        console.warn(`previews off for this job: ${err instanceof Error ? err.message : String(err)}`);
      }
    },
  };
}

/** Which steps get a preview: about `count` evenly spread, never the last (the output itself follows it). */
export function previewSteps(total: number, count = 5): Set<number> {
  const out = new Set<number>();
  const every = Math.max(1, Math.ceil(total / (count + 1)));
  for (let s = every; s < total; s += every) out.add(s);
  return out;
}
