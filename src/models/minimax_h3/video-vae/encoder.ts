// MiniMax H3 video VAE encoder (diffusers AutoencoderKLMiniMaxH3.encode / _encode / _encode_clip and the modular
// pipeline's encode_vae_condition): pixels -> the posterior's moments (mean | logvar), clip by clip and tile by tile.
//
//   encoder.conv_in                 CausalConv3d(3 -> C0, k 3): reflect pad 1 in h, w; 2 zero frames in front
//   encoder.down_blocks.<i>         resnets.<j> (GroupNorm per frame + SiLU, conv1, GroupNorm + SiLU, conv2,
//                                   conv_shortcut 1x1x1 where the width changes; x + h), then downsamplers.0.conv
//                                   (k 3, stride (t_i, s_i, s_i); a spatial stride of 2 reflect-pads 1 at the
//                                   bottom/right first) where t_i * s_i > 1
//   encoder.norm_out, SiLU, encoder.conv_out (-> 2 x latent channels), quant_conv (1x1x1)
// Time: one frame runs alone (a keyframe or an image reference: no clips, nothing dropped); more frames are padded
// with the last frame to a multiple of clip_length (17), each clip is encoded on its own (its causal padding starts
// from zeros), the clips' latent frames are concatenated and the last token_drop (3) dropped: 17k + 5 frames give
// 5k + 2 latent frames. Space: tiles of 256 pixels with >= 64-pixel overlaps by default (upstream's tiling is on),
// each tile encoded alone and the moments stitched on the host (linear blends over the latent overlaps).
// Activations are channels-last [1, T, H, W, C] on the GPU; the moments come back to the host [2C, T, h, w].
import { f16BitsToF32, f32ToF16Bits } from '../../../engine/dtype';
import type { Engine } from '../../../engine/engine';
import { conv3d, type PreparedConvWeight } from '../../../engine/ops/conv';
import { add } from '../../../engine/ops/elementwise';
import { copy, pad } from '../../../engine/ops/layout';
import { groupNorm } from '../../../engine/ops/norm';
import type { Checkpoint } from '../../../engine/safetensors';
import type { Tensor } from '../../../engine/tensor';
import { loadConvWeight } from '../../common/conv-weights';
import { torchRandn } from '../../common/torch-rng';
import { loadPlain, newWeightLoader, type ComputeDType, type WeightLoader } from '../../common/weights';
import { RELEASED_TILING, splitTiles, VideoVaeConfigError, type TilingOptions } from './config';
import { PIXEL_MEAN, PIXEL_STD } from './decoder';

export interface VideoVaeEncoderConfig {
  inChannels: number;
  latentChannels: number;
  blockOutChannels: number[];
  layersPerBlock: number;
  spatialFactors: number[];
  temporalFactors: number[];
  groups: number;
  eps: number;
  /** Product of the spatial factors (16 released): pixels per latent along h and w. */
  ratio: number;
  clipLength: number;
  tokenDrop: number;
  latentsMean: number[];
  latentsStd: number[];
}

/** The encoder side of the diffusers vae/config.json (AutoencoderKLMiniMaxH3). */
export function parseVideoVaeEncoderConfig(raw: Record<string, unknown>, where = 'video VAE config'): VideoVaeEncoderConfig {
  const bad = (why: string) => new VideoVaeConfigError(`${where}: ${why}`);
  const int = (k: string, min = 1): number => {
    const v = raw[k];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min) throw bad(`"${k}" must be an integer >= ${min} (got ${JSON.stringify(v)})`);
    return v;
  };
  const ints = (k: string): number[] => {
    const v = raw[k];
    if (!Array.isArray(v) || v.length === 0 || v.some((x) => typeof x !== 'number' || !Number.isInteger(x) || x < 1)) throw bad(`"${k}" must be a list of positive integers`);
    return [...(v as number[])];
  };
  const floats = (k: string, n: number): number[] => {
    const v = raw[k];
    if (!Array.isArray(v) || v.length !== n || v.some((x) => typeof x !== 'number' || !Number.isFinite(x))) throw bad(`"${k}" must be ${n} numbers`);
    return [...(v as number[])];
  };
  const latentChannels = int('latent_channels');
  const blockOutChannels = ints('block_out_channels');
  const spatialFactors = ints('spatial_downsample_factors');
  const temporalFactors = ints('temporal_downsample_factors');
  const levels = blockOutChannels.length;
  if (spatialFactors.length !== levels || temporalFactors.length !== levels) throw bad(`one spatial and one temporal factor per level (${levels})`);
  if ([...spatialFactors, ...temporalFactors].some((f) => f > 2)) throw bad('downsample factors must be 1 or 2 (one stride-2 conv per level)');
  const groups = int('norm_num_groups');
  if (blockOutChannels.some((c) => c % groups)) throw bad(`block_out_channels ${JSON.stringify(blockOutChannels)} must split into ${groups} groups`);
  const mode = raw.spatial_padding_mode ?? 'reflect';
  if (mode !== 'reflect') throw bad(`spatial_padding_mode ${JSON.stringify(mode)}: only "reflect" (the released mode) is implemented`);
  const eps = raw.norm_eps;
  if (typeof eps !== 'number' || !(eps > 0)) throw bad('"norm_eps" must be a positive number');
  const cfg: VideoVaeEncoderConfig = {
    inChannels: int('in_channels'),
    latentChannels,
    blockOutChannels,
    layersPerBlock: int('layers_per_block'),
    spatialFactors,
    temporalFactors,
    groups,
    eps,
    ratio: spatialFactors.reduce((a, b) => a * b, 1),
    clipLength: int('clip_length'),
    tokenDrop: int('token_drop', 0),
    latentsMean: floats('latents_mean', latentChannels),
    latentsStd: floats('latents_std', latentChannels),
  };
  if (cfg.latentsStd.some((s) => s <= 0)) throw bad('latents_std must be positive');
  return cfg;
}

/** Intermediates of the first encoder call (first clip, first tile), channels-last [1, T, H, W, C]. */
export type EncoderCapture = (name: string, t: Tensor) => void;

/** MiniMaxH3VideoCausalConv3d: symmetric reflect padding in h, w; temporal_padding zero frames in front. */
class CausalConv3d {
  constructor(
    readonly weight: PreparedConvWeight,
    readonly bias: Tensor,
    readonly stride: [number, number, number],
    readonly spatialPad: number,
    readonly temporalPad: number,
  ) {}

  static async load(w: WeightLoader, p: string, cin: number, cout: number, k: number, o: { stride?: [number, number, number]; spatialPad?: number; temporalPad?: number } = {}): Promise<CausalConv3d> {
    const weight = await loadConvWeight(w, `${p}weight`, [cout, cin, k, k, k]);
    return new CausalConv3d(weight, await loadPlain(w, `${p}bias`, [cout]), o.stride ?? [1, 1, 1], o.spatialPad ?? 0, o.temporalPad ?? 0);
  }

  /** x [1, T, H, W, Cin] (not consumed) -> [1, T', H', W', Cout]. */
  forward(e: Engine, x: Tensor): Tensor {
    const s = this.spatialPad;
    const xp = s > 0 ? pad(e, x, [[s, s], [s, s], [0, 0]], 'reflect') : x;
    const y = conv3d(e, xp, this.weight, { bias: this.bias, stride: this.stride, padding: [[this.temporalPad, 0], [0, 0], [0, 0]] });
    if (xp !== x) xp.free();
    return y;
  }

  free(): void {
    this.weight.free();
    this.bias.free();
  }
}

/** MiniMaxH3VideoGroupNorm (statistics per frame: time folded into the batch), with the SiLU that follows it fused. */
class FrameGroupNorm {
  constructor(readonly weight: Tensor, readonly bias: Tensor, readonly groups: number, readonly eps: number) {}

  static async load(w: WeightLoader, p: string, c: number, groups: number, eps: number): Promise<FrameGroupNorm> {
    return new FrameGroupNorm(await loadPlain(w, `${p}weight`, [c]), await loadPlain(w, `${p}bias`, [c]), groups, eps);
  }

  /** silu(groupnorm(x)) per frame: x [1, T, H, W, C] contiguous. */
  forwardSilu(e: Engine, x: Tensor): Tensor {
    const [, T, H, W, C] = x.shape as [number, number, number, number, number];
    const y = groupNorm(e, x.reshape([T, H * W, C]), this.groups, { weight: this.weight, bias: this.bias, eps: this.eps, silu: true });
    return y.reshape([1, T, H, W, C]);
  }

  free(): void {
    this.weight.free();
    this.bias.free();
  }
}

class ResnetBlock3d {
  constructor(
    readonly norm1: FrameGroupNorm,
    readonly conv1: CausalConv3d,
    readonly norm2: FrameGroupNorm,
    readonly conv2: CausalConv3d,
    readonly conv_shortcut: CausalConv3d | null,
  ) {}

  static async load(w: WeightLoader, p: string, c: VideoVaeEncoderConfig, cin: number, cout: number): Promise<ResnetBlock3d> {
    const conv = (q: string, i: number) => CausalConv3d.load(w, `${p}${q}.`, i, cout, 3, { spatialPad: 1, temporalPad: 2 });
    return new ResnetBlock3d(
      await FrameGroupNorm.load(w, `${p}norm1.`, cin, c.groups, c.eps),
      await conv('conv1', cin),
      await FrameGroupNorm.load(w, `${p}norm2.`, cout, c.groups, c.eps),
      await conv('conv2', cout),
      cin !== cout ? await CausalConv3d.load(w, `${p}conv_shortcut.`, cin, cout, 1) : null,
    );
  }

  forward(e: Engine, x: Tensor): Tensor {
    const a = this.norm1.forwardSilu(e, x);
    const h1 = this.conv1.forward(e, a);
    a.free();
    const b = this.norm2.forwardSilu(e, h1);
    h1.free();
    const h2 = this.conv2.forward(e, b);
    b.free();
    const res = this.conv_shortcut ? this.conv_shortcut.forward(e, x) : x;
    const out = add(e, res, h2);
    h2.free();
    if (res !== x) res.free();
    return out;
  }

  free(): void {
    [this.norm1, this.conv1, this.norm2, this.conv2, this.conv_shortcut].forEach((m) => m?.free());
  }
}

/** MiniMaxH3VideoDownsample3d: k 3, stride (t, s, s), no spatial padding but a bottom/right reflect pad of 1 when s = 2. */
class Downsample3d {
  constructor(readonly conv: CausalConv3d, readonly spatialStride: number) {}

  static async load(w: WeightLoader, p: string, c: number, t: number, s: number): Promise<Downsample3d> {
    return new Downsample3d(await CausalConv3d.load(w, `${p}conv.`, c, c, 3, { stride: [t, s, s], temporalPad: 2 }), s);
  }

  forward(e: Engine, x: Tensor): Tensor {
    const xp = this.spatialStride === 2 ? pad(e, x, [[0, 1], [0, 1], [0, 0]], 'reflect') : x;
    const y = this.conv.forward(e, xp);
    if (xp !== x) xp.free();
    return y;
  }

  free(): void {
    this.conv.free();
  }
}

class DownBlock3d {
  constructor(readonly resnets: ResnetBlock3d[], readonly downsamplers: [Downsample3d] | null) {}

  forward(e: Engine, x: Tensor): Tensor {
    let h = x;
    for (const r of this.resnets) {
      const next = r.forward(e, h);
      if (h !== x) h.free();
      h = next;
    }
    if (this.downsamplers) {
      const d = this.downsamplers[0].forward(e, h);
      if (h !== x) h.free();
      h = d;
    }
    return h === x ? copy(e, x) : h;
  }

  free(): void {
    this.resnets.forEach((r) => r.free());
    this.downsamplers?.[0].free();
  }
}

/** MiniMaxH3VideoEncoder3d + quant_conv. */
class Encoder3d {
  constructor(
    readonly conv_in: CausalConv3d,
    readonly down_blocks: DownBlock3d[],
    readonly norm_out: FrameGroupNorm,
    readonly conv_out: CausalConv3d,
    readonly quant_conv: CausalConv3d,
  ) {}

  static async load(w: WeightLoader, c: VideoVaeEncoderConfig, prefix: string): Promise<Encoder3d> {
    const p = `${prefix}encoder.`;
    const ch = c.blockOutChannels;
    const conv_in = await CausalConv3d.load(w, `${p}conv_in.`, c.inChannels, ch[0]!, 3, { spatialPad: 1, temporalPad: 2 });
    const blocks: DownBlock3d[] = [];
    for (let i = 0; i < ch.length; i++) {
      const cin = i === 0 ? ch[0]! : ch[i - 1]!;
      const resnets: ResnetBlock3d[] = [];
      for (let j = 0; j < c.layersPerBlock; j++) resnets.push(await ResnetBlock3d.load(w, `${p}down_blocks.${i}.resnets.${j}.`, c, j === 0 ? cin : ch[i]!, ch[i]!));
      const t = c.temporalFactors[i]!;
      const s = c.spatialFactors[i]!;
      const down = t * s > 1 ? ([await Downsample3d.load(w, `${p}down_blocks.${i}.downsamplers.0.`, ch[i]!, t, s)] as [Downsample3d]) : null;
      blocks.push(new DownBlock3d(resnets, down));
    }
    const last = ch[ch.length - 1]!;
    const norm_out = await FrameGroupNorm.load(w, `${p}norm_out.`, last, c.groups, c.eps);
    const conv_out = await CausalConv3d.load(w, `${p}conv_out.`, last, 2 * c.latentChannels, 3, { spatialPad: 1, temporalPad: 2 });
    const quant_conv = await CausalConv3d.load(w, `${prefix}quant_conv.`, 2 * c.latentChannels, 2 * c.latentChannels, 1);
    return new Encoder3d(conv_in, blocks, norm_out, conv_out, quant_conv);
  }

  /** pixels [1, T, H, W, 3] (ImageNet-normalised) -> moments [1, T', H / ratio', W / ratio', 2C]. */
  forward(e: Engine, x: Tensor, capture?: EncoderCapture): Tensor {
    let h = this.conv_in.forward(e, x);
    capture?.('conv_in', h);
    for (const [i, b] of this.down_blocks.entries()) {
      const next = b.forward(e, h);
      h.free();
      h = next;
      capture?.(`down_block.${i}`, h);
    }
    const s = this.norm_out.forwardSilu(e, h);
    h.free();
    const out = this.conv_out.forward(e, s);
    s.free();
    capture?.('encoder', out);
    const m = this.quant_conv.forward(e, out);
    out.free();
    return m;
  }

  free(): void {
    [this.conv_in, ...this.down_blocks, this.norm_out, this.conv_out, this.quant_conv].forEach((m) => m.free());
  }
}

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
    const xt = this.e.upload(host, [1, n, th, tw, C], this.dtype, 'video vae encode tile');
    let out: Float32Array;
    let shape: number[];
    try {
      const m = this.encoder.forward(this.e, xt, capture);
      try {
        out = await this.e.read(m);
        shape = [...m.shape];
      } finally {
        m.free();
      }
    } finally {
      xt.free();
    }
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

/** encode_vae_condition's pixel step: uint8 values [3, F, H, W] -> (x / 255 - mean) / std per channel, in float32. */
export function normalizePixels(u8: HostVideo): HostVideo {
  const [C, F, H, W] = u8.shape;
  if (C !== 3) throw new RangeError(`video VAE encode: ${C} channels, expected RGB`);
  const plane = F * H * W;
  const out = new Float32Array(u8.data.length);
  for (let ch = 0; ch < 3; ch++) {
    const m = Math.fround(PIXEL_MEAN[ch]!);
    const s = Math.fround(PIXEL_STD[ch]!);
    for (let i = ch * plane; i < (ch + 1) * plane; i++) out[i] = Math.fround(Math.fround(Math.fround(u8.data[i]! / 255) - m) / s);
  }
  return { data: out, shape: u8.shape };
}

/**
 * The posterior draw of encode_vae_condition: z = mean + exp(0.5 clamp(logvar, -30, 20)) x noise in float32 (upstream
 * draws the noise with torch.Generator().manual_seed(42)); `noise` = null takes the posterior's mean (its mode).
 * moments [2C, T, h, w] -> [C, T, h, w].
 */
export function posteriorSample(cfg: VideoVaeEncoderConfig, moments: HostVideo, noise: Float32Array | null): HostVideo {
  const [M, T, h, w] = moments.shape;
  const C = cfg.latentChannels;
  if (M !== 2 * C) throw new RangeError(`video VAE: moments have ${M} channels, expected ${2 * C}`);
  const n = C * T * h * w;
  if (noise && noise.length !== n) throw new RangeError(`video VAE: ${noise.length} noise values for ${n} latents`);
  const out = moments.data.slice(0, n);
  if (noise) {
    for (let i = 0; i < n; i++) {
      const logvar = Math.min(20, Math.max(-30, moments.data[n + i]!));
      const std = Math.fround(Math.exp(Math.fround(0.5 * logvar)));
      out[i] = Math.fround(out[i]! + Math.fround(std * noise[i]!));
    }
  }
  return { data: out, shape: [C, T, h, w] };
}

/** encode_vae_condition's last step: z rounded to float16, then (z - latents_mean) / latents_std per channel (float32). */
export function normalizeSample(cfg: VideoVaeEncoderConfig, z: HostVideo): HostVideo {
  const [C, T, h, w] = z.shape;
  if (C !== cfg.latentChannels) throw new RangeError(`video VAE: ${C} latent channels, expected ${cfg.latentChannels}`);
  const n = T * h * w;
  const out = new Float32Array(z.data.length);
  for (let ch = 0; ch < C; ch++) {
    const lm = Math.fround(cfg.latentsMean[ch]!);
    const ls = Math.fround(cfg.latentsStd[ch]!);
    for (let i = ch * n; i < (ch + 1) * n; i++) out[i] = Math.fround(Math.fround(roundF16(z.data[i]!) - lm) / ls);
  }
  return { data: out, shape: z.shape };
}

/** encode_vae_condition's generator seed (components.keyframe_encode_seed). */
export const KEYFRAME_ENCODE_SEED = 42;

/**
 * The noise encode_vae_condition's posterior.sample draws for n latent values: torch.randn under a fresh generator
 * seeded 42 (torch-rng.ts: within a few float32 ulps of torch's own draw).
 */
export function conditionNoise(n: number): Float32Array {
  return torchRandn(KEYFRAME_ENCODE_SEED, n);
}

/** encode_vae_condition after the encoder: the conditioning latents [C, T, h, w] the packing takes. */
export function conditionLatents(cfg: VideoVaeEncoderConfig, moments: HostVideo, noise: Float32Array | null): HostVideo {
  return normalizeSample(cfg, posteriorSample(cfg, moments, noise));
}

/** A float32 value rounded to the nearest float16 (ties to even), as torch's .to(torch.float16). */
export const roundF16 = (x: number): number => f16BitsToF32(f32ToF16Bits(x));
