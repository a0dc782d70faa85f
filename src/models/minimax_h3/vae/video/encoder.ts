// MiniMax H3 video VAE encoder (diffusers AutoencoderKLMiniMaxH3.encode / _encode / _encode_clip and the modular
// pipeline's encode_vae_condition): pixels -> the posterior's moments (mean | logvar), clip by clip and tile by tile.
// This file walks the clips and tiles; the network is cnn.ts, encode_vae_condition's host steps condition.ts.
//
// Time: one frame runs alone (a keyframe or an image reference: no clips, nothing dropped); more frames are padded
// with the last frame to a multiple of clip_length (17), each clip is encoded on its own (its causal padding starts
// from zeros), the clips' latent frames are concatenated and the last token_drop (3) dropped: 17k + 5 frames give
// 5k + 2 latent frames. Space: tiles of 256 pixels with >= 64-pixel overlaps by default (upstream's tiling is on),
// each tile encoded alone and the moments stitched on the host (linear blends over the latent overlaps).
// Activations are channels-last [1, T, H, W, C] on the GPU; the moments come back to the host [2C, T, h, w].
import type { Engine } from '../../../../engine/engine';
import type { Checkpoint } from '../../../../engine/safetensors';
import { newWeightLoader, type ComputeDType } from '../../../common/weights';
import { Encoder3d, type EncoderCapture } from './cnn';
import { parseVideoVaeEncoderConfig, RELEASED_TILING, splitTiles, type TilingOptions, type VideoVaeEncoderConfig } from './config';

/** Host video, channel-first without the batch: [C, F, H, W] (upstream's layout). */
export interface HostVideo {
  data: Float32Array;
  shape: readonly [number, number, number, number];
}

export interface VideoVaeEncodeOptions {
  /** Spatial tiling in pixels; default the released 256 / 64. `false` encodes each clip in one piece. */
  tiling?: TilingOptions | false;
  /** Tests: intermediates of the first encoder call. */
  capture?: EncoderCapture;
}

export interface VideoVaeEncoderLoadOptions {
  /** Compute dtype (default f32: upstream pins the encoder to float32). */
  dtype?: ComputeDType;
  /** Key prefix (fixtures: "weight."). */
  prefix?: string;
}

export class VideoVaeEncoder {
  private constructor(readonly e: Engine, readonly cfg: VideoVaeEncoderConfig, readonly dtype: ComputeDType, readonly encoder: Encoder3d) {}

  /** cfg: the diffusers vae/config.json object (or an already parsed encoder config). */
  static async load(e: Engine, ckpt: Checkpoint, cfg: Record<string, unknown> | VideoVaeEncoderConfig, opts: VideoVaeEncoderLoadOptions = {}): Promise<VideoVaeEncoder> {
    const c = 'blockOutChannels' in cfg ? (cfg as VideoVaeEncoderConfig) : parseVideoVaeEncoderConfig(cfg as Record<string, unknown>, `${ckpt.path} config`);
    const dtype = opts.dtype ?? 'f32';
    const w = newWeightLoader(e, ckpt, dtype);
    try {
      return new VideoVaeEncoder(e, c, dtype, await Encoder3d.load(w, c, opts.prefix ?? ''));
    } catch (err) {
      w.loaded.forEach((t) => t.free());
      throw err;
    }
  }

  /** Latent frames for F pixel frames: 1 for one frame, else 5 per 17-frame clip (the tail padded) less token_drop. */
  latentFrames(frames: number): number {
    if (frames === 1) return 1;
    const clips = Math.ceil(frames / this.cfg.clipLength);
    return clips * this.clipLatents() - this.cfg.tokenDrop;
  }

  /**
   * Upstream `encode(x).latent_dist.parameters`: ImageNet-normalised pixels [3, F, H, W] -> moments [2C, T, h, w]
   * (mean | logvar, logvar not yet clamped).
   */
  async encode(pixels: HostVideo, opts: VideoVaeEncodeOptions = {}): Promise<HostVideo> {
    const c = this.cfg;
    const [C, F, H, W] = pixels.shape;
    if (C !== c.inChannels) throw new RangeError(`video VAE encode: pixels have ${C} channels, the encoder ${c.inChannels}`);
    if (pixels.data.length !== C * F * H * W || F < 1) throw new RangeError(`video VAE encode: pixels [${pixels.shape.join(', ')}] with ${pixels.data.length} values`);
    const tiling = opts.tiling ?? RELEASED_TILING;
    let capture = opts.capture;
    if (F === 1) return this.encodeClip(pixels, 0, 1, tiling, capture);
    const clips = Math.ceil(F / c.clipLength);
    const parts: HostVideo[] = [];
    for (let i = 0; i < clips; i++) {
      parts.push(await this.encodeClip(pixels, i * c.clipLength, c.clipLength, tiling, capture));
      capture = undefined;
    }
    return concatFrames(parts, c.tokenDrop);
  }

  free(): void {
    this.encoder.free();
  }

  private clipLatents(): number {
    let t = this.cfg.clipLength;
    for (const f of this.cfg.temporalFactors) if (f === 2) t = Math.floor((t + 2 - 3) / 2) + 1;
    return t;
  }

  /** Upstream _encode_clip on frames [f0, f0 + n) (past the end: the last frame repeated). */
  private async encodeClip(px: HostVideo, f0: number, n: number, tiling: TilingOptions | false, capture?: EncoderCapture): Promise<HostVideo> {
    const [, , H, W] = px.shape;
    const r = this.cfg.ratio;
    const ys = tiling ? splitTiles(H, tiling.tileHeight, tiling.minOverlapHeight, r) : { starts: [0], sizes: [H], overlaps: [] };
    const xs = tiling ? splitTiles(W, tiling.tileWidth, tiling.minOverlapWidth, r) : { starts: [0], sizes: [W], overlaps: [] };
    const rows: HostVideo[][] = [];
    for (let i = 0; i < ys.starts.length; i++) {
      const row: HostVideo[] = [];
      for (let j = 0; j < xs.starts.length; j++) {
        const th = Math.min(ys.sizes[i]!, H - ys.starts[i]!);
        const tw = Math.min(xs.sizes[j]!, W - xs.starts[j]!);
        row.push(await this.encodeTile(px, f0, n, ys.starts[i]!, th, xs.starts[j]!, tw, capture));
        capture = undefined;
      }
      rows.push(row);
    }
    if (rows.length === 1 && rows[0]!.length === 1) return rows[0]![0]!;
    return stitchLatentTiles(rows, ys.overlaps.map((o) => Math.floor(o / r)), xs.overlaps.map((o) => Math.floor(o / r)));
  }

  private async encodeTile(px: HostVideo, f0: number, n: number, y0: number, th: number, x0: number, tw: number, capture?: EncoderCapture): Promise<HostVideo> {
    const [C, F, H, W] = px.shape;
    const host = new Float32Array(n * th * tw * C); // [n, th, tw, C]
    for (let t = 0; t < n; t++) {
      const f = Math.min(f0 + t, F - 1);
      for (let y = 0; y < th; y++) {
        for (let x = 0; x < tw; x++) {
          const o = ((t * th + y) * tw + x) * C;
          for (let ch = 0; ch < C; ch++) host[o + ch] = px.data[((ch * F + f) * H + y0 + y) * W + x0 + x]!;
        }
      }
    }
    // the tile and its moments freed once read back
    const { out, shape } = await this.e.scope(async () => {
      const m = this.encoder.forward(this.e, this.e.upload(host, [1, n, th, tw, C], this.dtype, 'video vae encode tile'), capture);
      return { out: await this.e.read(m), shape: [...m.shape] };
    });
    const [, T, h, w, M] = shape as [number, number, number, number, number];
    return { data: channelsFirst(out, T, h, w, M), shape: [M, T, h, w] };
  }
}

/** [T, h, w, M] -> [M, T, h, w]. */
function channelsFirst(x: Float32Array, T: number, h: number, w: number, M: number): Float32Array {
  const out = new Float32Array(x.length);
  const n = T * h * w;
  for (let i = 0; i < n; i++) for (let m = 0; m < M; m++) out[m * n + i] = x[i * M + m]!;
  return out;
}

/** Clips [M, T_i, h, w] concatenated along time, the last `drop` frames left out. */
function concatFrames(parts: HostVideo[], drop: number): HostVideo {
  const [M, , h, w] = parts[0]!.shape;
  const total = parts.reduce((s, p) => s + p.shape[1], 0);
  const T = total - drop;
  if (T < 1) throw new RangeError(`video VAE encode: ${total} latent frames, ${drop} dropped`);
  const hw = h * w;
  const out = new Float32Array(M * T * hw);
  for (let m = 0; m < M; m++) {
    let t0 = 0;
    for (const p of parts) {
      const Tp = p.shape[1];
      const keep = Math.max(0, Math.min(Tp, T - t0));
      out.set(p.data.subarray(m * Tp * hw, (m * Tp + keep) * hw), (m * T + t0) * hw);
      t0 += Tp;
    }
  }
  return { data: out, shape: [M, T, h, w] };
}

/** Upstream _blend on channel-first latents [M, T, h, w] along h (axis 2) or w (axis 3): a new tile of b's size. */
function blendLatent(a: HostVideo, b: HostVideo, extent: number, axis: 2 | 3): HostVideo {
  const [M, T, bh, bw] = b.shape;
  const [, , ah, aw] = a.shape;
  const ext = Math.min(axis === 2 ? ah : aw, axis === 2 ? bh : bw, extent);
  const out = Float32Array.from(b.data);
  for (let m = 0; m < M; m++) {
    for (let t = 0; t < T; t++) {
      for (let y = 0; y < (axis === 2 ? ext : bh); y++) {
        for (let x = 0; x < (axis === 3 ? ext : bw); x++) {
          const k = axis === 2 ? y : x;
          const wb = Math.fround(k / ext);
          const wa = Math.fround(1 - wb);
          const ay = axis === 2 ? ah - ext + y : y;
          const ax = axis === 3 ? aw - ext + x : x;
          const ib = ((m * T + t) * bh + y) * bw + x;
          const ia = ((m * T + t) * ah + ay) * aw + ax;
          out[ib] = Math.fround(Math.fround(a.data[ia]! * wa) + Math.fround(b.data[ib]! * wb));
        }
      }
    }
  }
  return { data: out, shape: b.shape };
}

/** Upstream _stitch_tiles on latent tiles: blend with the raw tile above and to the left, crop, concatenate. */
export function stitchLatentTiles(tiles: HostVideo[][], hOverlaps: readonly number[], wOverlaps: readonly number[]): HostVideo {
  const kept = tiles.map((row, i) =>
    row.map((raw, j) => {
      let tile = raw;
      if (i > 0) tile = blendLatent(tiles[i - 1]![j]!, tile, hOverlaps[i - 1]!, 2);
      if (j > 0) tile = blendLatent(row[j - 1]!, tile, wOverlaps[j - 1]!, 3);
      const h = i < tiles.length - 1 ? tile.shape[2] - hOverlaps[i]! : tile.shape[2];
      const w = j < row.length - 1 ? tile.shape[3] - wOverlaps[j]! : tile.shape[3];
      return { tile, h, w };
    }),
  );
  const [M, T] = tiles[0]![0]!.shape;
  const H = kept.reduce((s, row) => s + row[0]!.h, 0);
  const W = kept[0]!.reduce((s, t) => s + t.w, 0);
  const data = new Float32Array(M * T * H * W);
  let y0 = 0;
  for (const row of kept) {
    let x0 = 0;
    for (const { tile, h, w } of row) {
      const [, , th, tw] = tile.shape;
      for (let mt = 0; mt < M * T; mt++) {
        for (let y = 0; y < h; y++) {
          const src = (mt * th + y) * tw;
          data.set(tile.data.subarray(src, src + w), (mt * H + y0 + y) * W + x0);
        }
      }
      x0 += w;
    }
    y0 += row[0]!.h;
  }
  return { data, shape: [M, T, H, W] };
}
