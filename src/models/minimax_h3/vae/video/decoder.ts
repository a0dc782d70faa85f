// MiniMax H3 video VAE decode (diffusers AutoencoderKLMiniMaxH3._decode / _decode_clip / _stitch_tiles and the
// pipeline's decode step): de-normalise the latents, cut them into temporal clips of 7 latent frames (5-frame
// chunks + 2 frames of overlap), cut each clip into spatial tiles, run the ViT on every tile on the GPU, then on
// the host stitch the tiles (linear blends over the overlaps) and cross-fade consecutive chunks over 5 frames.
// Memory is bounded by one clip: GPU work is one tile at a time, the host holds one clip's tiles and the
// previous chunk's overlap frames; frames are handed out as soon as they are final.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Engine } from '../../../../engine/engine';
import { Checkpoint } from '../../../../engine/safetensors';
import type { Tensor } from '../../../../engine/tensor';
import type { ComputeDType, WeightLoader } from '../../../common/weights';
import { assertFiniteOutput, OVERFLOW_HINT } from '../../../common/finite-output';
import { decodePlan, parseVideoVaeConfig, RELEASED_TILING, splitTiles, temporalGeometry, type TilingOptions, type VideoVaeConfig } from './config';
import { tileRope, VaeViTDecoder, type Capture, type TileRope } from './vit';

/** The released vae/ folder: three fp16 shards behind this index (encoder keys are never read). */
export const VIDEO_VAE_INDEX = 'diffusion_pytorch_model.safetensors.index.json';

/** A vae/ folder (sharded index or single file) or a .safetensors / index path. */
export function openVideoVaeCheckpoint(path: string): Promise<Checkpoint> {
  for (const f of [VIDEO_VAE_INDEX, 'diffusion_pytorch_model.safetensors']) if (existsSync(join(path, f))) return Checkpoint.open(join(path, f));
  return Checkpoint.open(path);
}

/** Normalised latents as the sampler hands them over: [C, T, h, w] (upstream's layout without the batch). */
export interface VideoLatents {
  data: Float32Array;
  shape: readonly [number, number, number, number];
}

/** Decoded frames, channels-last: data [F, H, W, 3]. */
export interface DecodedVideo {
  frames: number;
  height: number;
  width: number;
  data: Float32Array;
}

/** The pipeline's pixel convention: ImageNet mean / std (decode output * std + mean, clamped to [0, 1]). */
export const PIXEL_MEAN = [0.485, 0.456, 0.406] as const;
export const PIXEL_STD = [0.229, 0.224, 0.225] as const;

export interface VideoVaeLoadOptions {
  /** Compute dtype (default f32; the released decode runs in f16). Weights convert on upload. */
  dtype?: ComputeDType;
  /** Key prefix (fixtures: "weight."). */
  prefix?: string;
}

export interface VideoVaeDecodeOptions {
  /** Spatial tiling in pixels; default the released 256 / 64. `false` decodes each clip in one piece. */
  tiling?: TilingOptions | false;
  /** 'rgb' (default): pipeline post-processing, RGB in [0, 1]. 'raw': the VAE's ImageNet-normalised output. */
  output?: 'rgb' | 'raw';
  /** Tests: intermediates of the first tile of the first clip. */
  capture?: Capture;
}

/** A tile's pixels, channels-last [F, h, w, 3]. */
interface Pixels {
  frames: number;
  height: number;
  width: number;
  data: Float32Array;
}

export class VideoVaeDecoder {
  private constructor(
    readonly e: Engine,
    readonly cfg: VideoVaeConfig,
    readonly dtype: ComputeDType,
    readonly vit: VaeViTDecoder,
  ) {}

  /** cfg: the diffusers vae/config.json object (or an already parsed config). */
  static async load(e: Engine, ckpt: Checkpoint, cfg: Record<string, unknown> | VideoVaeConfig, opts: VideoVaeLoadOptions = {}): Promise<VideoVaeDecoder> {
    const c = 'latentsMean' in cfg ? (cfg as VideoVaeConfig) : parseVideoVaeConfig(cfg as Record<string, unknown>, `${ckpt.path} config`);
    const dtype = opts.dtype ?? 'f32';
    const w: WeightLoader = { e, ckpt, dtype, int8: false, loaded: [] };
    try {
      return new VideoVaeDecoder(e, c, dtype, await VaeViTDecoder.load(w, c, opts.prefix ?? ''));
    } catch (err) {
      w.loaded.forEach((t) => t.free());
      throw err;
    }
  }

  /** Pixel frames, height and width the decode of latents [C, T, h, w] produces. */
  outputShape(shape: readonly number[]): { frames: number; height: number; width: number } {
    const [, T, h, w] = shape as [number, number, number, number];
    return { frames: decodePlan(this.cfg, T).frames, height: h * this.cfg.patch, width: w * this.cfg.patch };
  }

  /** The whole clip on the host: data [F, H, W, 3]. Prefer `frames()` for long clips (bounded memory). */
  async decode(latents: VideoLatents | Tensor, opts: VideoVaeDecodeOptions = {}): Promise<DecodedVideo> {
    const host = await this.toHost(latents);
    const { frames, height, width } = this.outputShape(host.shape);
    const size = height * width * 3;
    const data = new Float32Array(frames * size);
    let i = 0;
    for await (const f of this.frames(host, opts)) data.set(f, size * i++);
    return { frames, height, width, data };
  }

  /** Frames in order, each a fresh Float32Array [H, W, 3], as soon as it is final (for the video writer). */
  async *frames(latents: VideoLatents | Tensor, opts: VideoVaeDecodeOptions = {}): AsyncGenerator<Float32Array> {
    const c = this.cfg;
    const host = await this.toHost(latents);
    const [C, T, h, w] = host.shape;
    if (C !== c.latentChannels) throw new RangeError(`video VAE: latents have ${C} channels, the decoder ${c.latentChannels}`);
    const plan = decodePlan(c, T);
    const g = temporalGeometry(c);
    const z = this.denormalise(host, plan.padTokens);
    const chunkFrames = g.tokensChunk * c.patchT;
    const frameSize = h * c.patch * w * c.patch * 3;
    const post = opts.output === 'raw' || this.e.shapeOnly ? null : toRgb;
    // a plan (shape-only engine) decodes every clip as the run does, and hands on one frame of zeros for each
    const zero = this.e.shapeOnly ? new Float32Array(frameSize) : null;
    let emitted = 0;
    let overlap: Float32Array[] | null = null;
    let capture = opts.capture;
    for (const clip of plan.clips) {
      const px = await this.decodeClip(z, T + plan.padTokens, h, w, clip.start, clip.length, opts.tiling ?? RELEASED_TILING, capture);
      capture = undefined;
      const frame = (k: number) => zero ?? px.data.subarray(k * frameSize, (k + 1) * frameSize).slice();
      // j = 0: frames [prePad, chunkFrames) of the clip, their head cross-faded with the previous chunk's overlap
      const first: Float32Array[] = [];
      for (let k = g.framePrePadding; k < Math.min(chunkFrames, px.frames); k++) first.push(frame(k));
      if (overlap) blendFrames(overlap, first, g.frameOverlap);
      // j = 1 (token_drop > 0): frames [chunkFrames + prePad, clip end) are the next chunk's overlap
      overlap = null;
      if (c.tokenDrop > 0) {
        overlap = [];
        for (let k = chunkFrames + g.framePrePadding; k < Math.min(2 * chunkFrames, px.frames); k++) overlap.push(frame(k));
      }
      for (const f of first) {
        if (emitted >= plan.frames) return;
        emitted++;
        yield post ? post(f) : f;
      }
    }
    for (const f of overlap ?? []) {
      if (emitted >= plan.frames) return;
      emitted++;
      yield post ? post(f) : f;
    }
  }

  free(): void {
    this.vit.free();
  }

  private async toHost(latents: VideoLatents | Tensor): Promise<VideoLatents> {
    if (!('storage' in latents)) {
      if (latents.shape.length !== 4 || latents.data.length !== latents.shape.reduce((a, b) => a * b, 1)) {
        throw new RangeError(`video VAE: latents [${latents.shape.join(', ')}] with ${latents.data.length} values`);
      }
      return latents;
    }
    const t = latents.rank === 5 ? latents.slice(0, 0, 1).reshape(latents.shape.slice(1)) : latents;
    if (t.rank !== 4) throw new RangeError(`video VAE: latents ${latents} must be [C, T, h, w] or [1, C, T, h, w]`);
    return { data: await this.e.read(t), shape: t.shape as unknown as [number, number, number, number] };
  }

  /** latents * std + mean per channel, the tail padded by repeating the last frame: [C, T + pad, h, w]. */
  private denormalise(x: VideoLatents, pad: number): Float32Array {
    const [C, T, h, w] = x.shape;
    const hw = h * w;
    const Tp = T + pad;
    const out = new Float32Array(C * Tp * hw);
    for (let ch = 0; ch < C; ch++) {
      const m = this.cfg.latentsMean[ch]!;
      const s = this.cfg.latentsStd[ch]!;
      for (let t = 0; t < Tp; t++) {
        const src = (ch * T + Math.min(t, T - 1)) * hw;
        const dst = (ch * Tp + t) * hw;
        for (let i = 0; i < hw; i++) out[dst + i] = Math.fround(x.data[src + i]! * Math.fround(s)) + Math.fround(m);
      }
    }
    return out;
  }

  /** Upstream _decode_clip: latent frames [t0, t0 + len) of z [C, Tp, h, w] -> pixels, tiled when asked. */
  private async decodeClip(z: Float32Array, Tp: number, h: number, w: number, t0: number, len: number, tiling: TilingOptions | false, capture?: Capture): Promise<Pixels> {
    const r = this.cfg.patch;
    const H = h * r;
    const W = w * r;
    const ys = tiling ? splitTiles(H, tiling.tileHeight, tiling.minOverlapHeight, r) : { starts: [0], sizes: [H], overlaps: [] };
    const xs = tiling ? splitTiles(W, tiling.tileWidth, tiling.minOverlapWidth, r) : { starts: [0], sizes: [W], overlaps: [] };
    const rows: Pixels[][] = [];
    // the RoPE tables of the tile sizes, shared by the clip's tiles: freed with the scope once its tiles are decoded
    await this.e.scope(async () => {
      const ropes = new Map<string, TileRope>();
      for (let i = 0; i < ys.starts.length; i++) {
        const row: Pixels[] = [];
        for (let j = 0; j < xs.starts.length; j++) {
          const y0 = Math.floor(ys.starts[i]! / r);
          const x0 = Math.floor(xs.starts[j]! / r);
          const th = Math.min(Math.floor(ys.sizes[i]! / r), h - y0);
          const tw = Math.min(Math.floor(xs.sizes[j]! / r), w - x0);
          const key = `${len}x${th}x${tw}`;
          if (!ropes.has(key)) ropes.set(key, tileRope(this.e, this.cfg, len, th, tw));
          row.push(await this.decodeTile(z, Tp, h, w, t0, len, y0, th, x0, tw, ropes.get(key)!, capture));
          capture = undefined;
        }
        rows.push(row);
      }
    });
    // a plan (shape-only engine): the tiles' GPU work is recorded above; their pixels are zeros, not blended on the host
    if (this.e.shapeOnly) return { frames: rows[0]![0]!.frames, height: H, width: W, data: new Float32Array(0) };
    return rows.length === 1 && rows[0]!.length === 1 ? rows[0]![0]! : stitchTiles(rows, ys.overlaps, xs.overlaps);
  }

  /** One latent tile through the ViT, read back and un-patchified: [len * pt, th * p, tw * p, 3]. */
  private async decodeTile(z: Float32Array, Tp: number, h: number, w: number, t0: number, len: number, y0: number, th: number, x0: number, tw: number, rot: TileRope, capture?: Capture): Promise<Pixels> {
    const c = this.cfg;
    const C = c.latentChannels;
    const N = len * th * tw;
    const tokens = new Float32Array(N * C); // [N, C], tokens (t, y, x) row-major
    for (let t = 0; t < (this.e.shapeOnly ? 0 : len); t++) {
      for (let y = 0; y < th; y++) {
        for (let x = 0; x < tw; x++) {
          const n = (t * th + y) * tw + x;
          for (let ch = 0; ch < C; ch++) tokens[n * C + ch] = z[((ch * Tp + t0 + t) * h + y0 + y) * w + x0 + x]!;
        }
      }
    }
    // the tile and its patch rows freed once read back
    const rowsHost = await this.e.scope(async () => this.e.read(this.vit.forward(this.e, this.e.upload(tokens, [1, N, C], this.dtype, 'video vae tile'), rot, capture)));
    // a plan reads zeros: the tile's size, without the host's un-patchify
    if (this.e.shapeOnly) return { frames: len * c.patchT, height: th * c.patch, width: tw * c.patch, data: new Float32Array(0) };
    assertFiniteOutput(rowsHost, 'the decoded video', OVERFLOW_HINT);
    return unpatchify(rowsHost, c.outChannels, len, th, tw, c.patchT, c.patch);
  }
}

/** Patch rows [N, (c, a, b, d)] of a T x h x w tile -> channels-last pixels [T * pt, h * p, w * p, C]. */
export function unpatchify(rows: Float32Array, C: number, T: number, h: number, w: number, pt: number, p: number): Pixels {
  const F = T * pt;
  const H = h * p;
  const W = w * p;
  const data = new Float32Array(F * H * W * C);
  const per = C * pt * p * p;
  for (let n = 0; n < T * h * w; n++) {
    const t = Math.floor(n / (h * w));
    const y = Math.floor(n / w) % h;
    const x = n % w;
    for (let ch = 0; ch < C; ch++) {
      for (let a = 0; a < pt; a++) {
        for (let b = 0; b < p; b++) {
          for (let d = 0; d < p; d++) {
            const v = rows[n * per + ((ch * pt + a) * p + b) * p + d]!;
            data[(((t * pt + a) * H + y * p + b) * W + x * p + d) * C + ch] = v;
          }
        }
      }
    }
  }
  return { frames: F, height: H, width: W, data };
}

/** Upstream _blend over time: b's first frames = a's last frames * (1 - k/e) + b * k/e (in place on b). */
function blendFrames(a: Float32Array[], b: Float32Array[], extent: number): void {
  const e = Math.min(a.length, b.length, extent);
  for (let k = 0; k < e; k++) {
    const fa = a[a.length - e + k]!;
    const fb = b[k]!;
    const wb = Math.fround(k / e);
    const wa = Math.fround(1 - wb);
    for (let i = 0; i < fb.length; i++) fb[i] = fa[i]! * wa + fb[i]! * wb;
  }
}

/** Upstream _blend along height (axis 1) or width (axis 2) of channels-last tiles: a new tile, b's size. */
function blendSpatial(a: Pixels, b: Pixels, extent: number, axis: 1 | 2): Pixels {
  const e = Math.min(axis === 1 ? a.height : a.width, axis === 1 ? b.height : b.width, extent);
  const out = Float32Array.from(b.data);
  const C = 3;
  for (let f = 0; f < b.frames; f++) {
    for (let y = 0; y < (axis === 1 ? e : b.height); y++) {
      for (let x = 0; x < (axis === 2 ? e : b.width); x++) {
        const k = axis === 1 ? y : x;
        const wb = Math.fround(k / e);
        const wa = Math.fround(1 - wb);
        const ay = axis === 1 ? a.height - e + y : y;
        const ax = axis === 2 ? a.width - e + x : x;
        for (let ch = 0; ch < C; ch++) {
          const ib = ((f * b.height + y) * b.width + x) * C + ch;
          const ia = ((f * a.height + ay) * a.width + ax) * C + ch;
          out[ib] = a.data[ia]! * wa + b.data[ib]! * wb;
        }
      }
    }
  }
  return { ...b, data: out };
}

/**
 * Upstream _stitch_tiles: each tile blended with the (raw) tile above and the (raw) tile to its left, then its
 * bottom / right overlap cropped (except on the last row / column), and everything concatenated.
 */
export function stitchTiles(tiles: Pixels[][], hOverlaps: readonly number[], wOverlaps: readonly number[]): Pixels {
  const kept: { tile: Pixels; h: number; w: number }[][] = tiles.map((row, i) =>
    row.map((raw, j) => {
      let tile = raw;
      if (i > 0) tile = blendSpatial(tiles[i - 1]![j]!, tile, hOverlaps[i - 1]!, 1);
      if (j > 0) tile = blendSpatial(row[j - 1]!, tile, wOverlaps[j - 1]!, 2);
      const hKeep = i < tiles.length - 1 ? tile.height - hOverlaps[i]! : tile.height;
      const wKeep = j < row.length - 1 ? tile.width - wOverlaps[j]! : tile.width;
      return { tile, h: hKeep, w: wKeep };
    }),
  );
  const F = tiles[0]![0]!.frames;
  const H = kept.reduce((s, row) => s + row[0]!.h, 0);
  const W = kept[0]!.reduce((s, t) => s + t.w, 0);
  const data = new Float32Array(F * H * W * 3);
  let y0 = 0;
  for (const row of kept) {
    let x0 = 0;
    for (const { tile, h, w } of row) {
      for (let f = 0; f < F; f++) {
        for (let y = 0; y < h; y++) {
          const src = ((f * tile.height + y) * tile.width) * 3;
          data.set(tile.data.subarray(src, src + w * 3), ((f * H + y0 + y) * W + x0) * 3);
        }
      }
      x0 += w;
    }
    y0 += row[0]!.h;
  }
  return { frames: F, height: H, width: W, data };
}

/** The pipeline's decode step on one channels-last frame: * PIXEL_STD + PIXEL_MEAN, clamped to [0, 1]. */
export function toRgb(frame: Float32Array): Float32Array {
  const out = new Float32Array(frame.length);
  for (let i = 0; i < frame.length; i++) {
    const ch = i % 3;
    out[i] = Math.min(1, Math.max(0, frame[i]! * PIXEL_STD[ch]! + PIXEL_MEAN[ch]!));
  }
  return out;
}
