// Krea 2's VAE: the Qwen-Image VAE (diffusers AutoencoderKLQwenImage, the Wan 2.1 causal 3D conv VAE: 16 latent
// channels, 8x), loaded by krea-ai/krea-2 autoencoder.py from Qwen/Qwen-Image's vae/ folder. Not the 64-channel
// Qwen-Image-2.1 VAE (src/models/qwen_image21/vae): that one has residual up blocks with DupUp shortcuts and 16x; this
// decoder reuses its building blocks (resnets, the mid block with its one attention, RMS norms, convs), whose key
// names are the same.
//
// Decode of one image (a single frame: every causal conv meets only its last time slice, the upsample3d time_conv is
// skipped on the first chunk, so the decoder is 2D; shared/spec/krea2.md §3), channels-last:
//   z = latent * latents_std + latents_mean (autoencoder.py decode) -> post_quant_conv (1x1; the two folded at load)
//   -> decoder.conv_in -> decoder.mid_block -> decoder.up_blocks.i: resnets (num_res_blocks + 1), then for all but
//      the last level upsamplers.0.resample.1 (nearest 2x, Conv2d halving the channels) -> norm_out, SiLU, conv_out
//   -> clamp to [-1, 1] (_decode)
// Level widths (QwenImageDecoder3d): dims = base_dim * [m_last, reversed(dim_mult)...]; level i reads dims[i] (halved
// for i > 0: the previous upsampler halved it) and writes dims[i + 1].
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Engine } from '../../engine/engine';
import { Checkpoint } from '../../engine/safetensors';
import type { Tensor } from '../../engine/tensor';
import { decodeRowStrips, planRowStrips, stripHaloRows, stripRowElements } from '../common/row-strips';
import { keyOf, newWeightLoader, type ComputeDType, type WeightLoader } from '../common/weights';
import { normSilu, runResnets, upsample2x, VaeConv2d, VaeMidBlock, VaeResidualBlock, VaeRmsNorm } from '../qwen_image21/vae/modules';

export class Krea2VaeConfigError extends Error {
  override readonly name = 'Krea2VaeConfigError';
}

export interface Krea2VaeConfig {
  baseDim: number;
  zDim: number;
  dimMult: number[];
  numResBlocks: number;
  temporalDownsample: boolean[];
  inputChannels: number;
  latentsMean: number[];
  latentsStd: number[];
  /** 2 ** (levels - 1): 8. */
  spatialRatio: number;
}

/** AutoencoderKLQwenImage.__init__ defaults (= Qwen/Qwen-Image vae/config.json as reported, shared/spec/krea2.md U7). */
export const QWEN_IMAGE_VAE_DEFAULTS = {
  base_dim: 96,
  z_dim: 16,
  dim_mult: [1, 2, 4, 4],
  num_res_blocks: 2,
  attn_scales: [],
  temperal_downsample: [false, true, true],
  dropout: 0.0,
  input_channels: 3,
  latents_mean: [-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508, 0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921],
  latents_std: [2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743, 3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.916],
} as const;

const KNOWN = new Set([...Object.keys(QWEN_IMAGE_VAE_DEFAULTS), '_class_name', '_diffusers_version', '_name_or_path']);

export function parseQwenImageVaeConfig(raw: Record<string, unknown>, where = 'vae config'): Krea2VaeConfig {
  const bad = (why: string) => new Krea2VaeConfigError(`${where}: ${why}`);
  for (const k of Object.keys(raw)) if (!KNOWN.has(k)) throw bad(`unknown key "${k}"`);
  const cls = raw._class_name;
  if (cls !== undefined && cls !== 'AutoencoderKLQwenImage') throw bad(`_class_name ${JSON.stringify(cls)} is not AutoencoderKLQwenImage`);
  const get = (k: keyof typeof QWEN_IMAGE_VAE_DEFAULTS): unknown => (k in raw ? raw[k] : QWEN_IMAGE_VAE_DEFAULTS[k]);
  const int = (k: keyof typeof QWEN_IMAGE_VAE_DEFAULTS): number => {
    const v = get(k);
    if (!Number.isInteger(v) || (v as number) < 1) throw bad(`${k} must be a positive integer (got ${JSON.stringify(v)})`);
    return v as number;
  };
  const dimMult = get('dim_mult');
  if (!Array.isArray(dimMult) || dimMult.length < 2 || !dimMult.every((m) => Number.isInteger(m) && m >= 1)) throw bad('dim_mult must be 2+ positive integers');
  const temporal = get('temperal_downsample');
  if (!Array.isArray(temporal) || temporal.length !== dimMult.length - 1 || !temporal.every((t) => typeof t === 'boolean')) throw bad(`temperal_downsample needs ${dimMult.length - 1} booleans`);
  const attn = get('attn_scales');
  if (!Array.isArray(attn) || attn.length !== 0) throw bad('attn_scales must be [] (no attention inside the levels)');
  const zDim = int('z_dim');
  const stats = (k: 'latents_mean' | 'latents_std'): number[] => {
    const v = get(k);
    if (!Array.isArray(v) || v.length !== zDim || !v.every((x) => typeof x === 'number' && Number.isFinite(x))) throw bad(`${k} must be ${zDim} numbers`);
    return v as number[];
  };
  const baseDim = int('base_dim');
  const dims = decoderDims(baseDim, dimMult as number[]);
  if (dims.slice(1, -1).some((d) => d % 2 !== 0)) throw bad(`decoder widths [${dims}] must be even where an upsampler halves them`);
  const latentsStd = stats('latents_std');
  if (latentsStd.some((s) => !(s > 0))) throw bad('latents_std must be > 0');
  return {
    baseDim, zDim, dimMult: dimMult as number[], numResBlocks: int('num_res_blocks'), temporalDownsample: temporal as boolean[],
    inputChannels: int('input_channels'), latentsMean: stats('latents_mean'), latentsStd, spatialRatio: 2 ** (dimMult.length - 1),
  };
}

/** QwenImageDecoder3d's dims. */
export function decoderDims(baseDim: number, dimMult: readonly number[]): number[] {
  return [dimMult.at(-1)!, ...[...dimMult].reverse()].map((m) => m * baseDim);
}

/** One decoder level: in -> out channels, and whether an upsampler (out -> out / 2, 2x) follows. */
export function qwenImageDecoderLevels(c: Krea2VaeConfig): { inDim: number; outDim: number; up: boolean }[] {
  const dims = decoderDims(c.baseDim, c.dimMult);
  return c.dimMult.map((_, i) => ({ inDim: i > 0 ? dims[i]! / 2 : dims[i]!, outDim: dims[i + 1]!, up: i !== c.dimMult.length - 1 }));
}

/** QwenImageUpBlock on one frame. */
class UpBlock {
  constructor(
    readonly resnets: VaeResidualBlock[],
    /** upsamplers.0.resample = Sequential(Upsample, Conv2d): index 1 holds the weights (time_conv unused on one frame). */
    readonly upsamplers: [{ resample: [null, VaeConv2d] }] | null,
  ) {}

  static async load(w: WeightLoader, p: string, c: Krea2VaeConfig, l: { inDim: number; outDim: number; up: boolean }): Promise<UpBlock> {
    const resnets: VaeResidualBlock[] = [];
    for (let i = 0; i <= c.numResBlocks; i++) resnets.push(await VaeResidualBlock.load(w, `${p}resnets.${i}.`, i === 0 ? l.inDim : l.outDim, l.outDim));
    const up = l.up ? ([{ resample: [null, await VaeConv2d.load(w, `${p}upsamplers.0.resample.1.`, l.outDim, l.outDim / 2, 3)] }] as [{ resample: [null, VaeConv2d] }]) : null;
    return new UpBlock(resnets, up);
  }

  forward(e: Engine, x: Tensor): Tensor {
    const up = this.upsamplers?.[0].resample[1];
    return e.chain(() => runResnets(e, this.resnets, x), ...(up ? [(h: Tensor) => upsample2x(e, up, h)] : []));
  }

  free(): void {
    this.resnets.forEach((r) => r.free());
    this.upsamplers?.[0].resample[1].free();
  }
}

/** Tests: intermediates by upstream module name (post_quant_conv, conv_in, mid_block, up_block.<i>, decoder). */
export type Krea2VaeCapture = (name: string, t: Tensor) => void;

export const QWEN_IMAGE_VAE_WEIGHTS = 'diffusion_pytorch_model.safetensors';

export class Krea2Vae {
  private constructor(
    private readonly e: Engine,
    readonly config: Krea2VaeConfig,
    readonly dtype: ComputeDType,
    /** post_quant_conv with z * std + mean folded in. */
    private readonly postQuant: VaeConv2d,
    readonly decoder: { conv_in: VaeConv2d; mid_block: VaeMidBlock; up_blocks: UpBlock[]; norm_out: VaeRmsNorm; conv_out: VaeConv2d },
  ) {}

  /** The decoder half from a checkpoint (`prefix`: fixtures' "weight."). */
  static async load(e: Engine, ckpt: Checkpoint, config: Krea2VaeConfig, o: { dtype?: ComputeDType; prefix?: string } = {}): Promise<Krea2Vae> {
    const dtype = o.dtype ?? 'f32';
    const w = newWeightLoader(e, ckpt, dtype, { prefix: o.prefix });
    try {
      const postQuant = await foldedPostQuant(w, config);
      const dims = decoderDims(config.baseDim, config.dimMult);
      const conv_in = await VaeConv2d.load(w, 'decoder.conv_in.', config.zDim, dims[0]!, 3);
      const mid_block = await VaeMidBlock.load(w, 'decoder.mid_block.', dims[0]!);
      const up_blocks: UpBlock[] = [];
      for (const [i, l] of qwenImageDecoderLevels(config).entries()) up_blocks.push(await UpBlock.load(w, `decoder.up_blocks.${i}.`, config, l));
      const last = dims.at(-1)!;
      const norm_out = await VaeRmsNorm.load(w, 'decoder.norm_out.', last);
      const conv_out = await VaeConv2d.load(w, 'decoder.conv_out.', last, config.inputChannels, 3);
      return new Krea2Vae(e, config, dtype, postQuant, { conv_in, mid_block, up_blocks, norm_out, conv_out });
    } catch (err) {
      w.loaded.forEach((t) => t.free());
      throw err;
    }
  }

  /** A vae/ folder: config.json + diffusion_pytorch_model.safetensors. */
  static async fromDir(e: Engine, dir: string, o: { dtype?: ComputeDType } = {}): Promise<Krea2Vae> {
    const cfgPath = join(dir, 'config.json');
    const config = parseQwenImageVaeConfig(JSON.parse(readFileSync(cfgPath, 'utf8')) as Record<string, unknown>, cfgPath);
    const file = join(dir, QWEN_IMAGE_VAE_WEIGHTS);
    if (!existsSync(file)) throw new Error(`Qwen-Image VAE: no ${QWEN_IMAGE_VAE_WEIGHTS} in ${dir}`);
    const ckpt = await Checkpoint.open(file);
    try {
      return await Krea2Vae.load(e, ckpt, config, o);
    } finally {
      await ckpt.close();
    }
  }

  /**
   * latents [N, h, w, zDim] channels-last, as the sampler leaves them -> pixels [N, 8h, 8w, 3] in [-1, 1].
   * Everything after the mid block is local (3x3 convs, per-pixel norms, nearest upsampling), so it runs in row strips
   * of the latent grid with a halo of krea2VaeHaloRows() rows each side, keeping each strip's centre: the same pixels
   * as one piece, while the biggest tensor is one strip's (at the real widths a 2048 x 2048 picture's last upsample is
   * 1.6 GB of f16 in one piece; larger explicit sizes would pass the 2 GiB binding limit). `stripRows` forces the
   * strip height (tests); by default as few strips as fit `stripBytes` (default: the binding limit).
   */
  decode(z: Tensor, take?: Krea2VaeCapture, o: { stripRows?: number; stripBytes?: number } = {}): Tensor {
    const e = this.e;
    const capture = take && ((name: string, t: Tensor) => e.unscoped(() => take(name, t))); // what it copies is its own
    const c = this.config;
    if (z.rank !== 4 || z.shape[3] !== c.zDim || z.dtype !== this.dtype) throw new RangeError(`Qwen-Image VAE decode: latents ${z} must be ${this.dtype}[N, h, w, ${c.zDim}]`);
    const [N, h, w] = z.shape as [number, number, number, number];
    const r = c.spatialRatio;
    const halo = krea2VaeHaloRows(c);
    const budget = Math.min(o.stripBytes ?? e.pool.maxBindingBytes, e.pool.maxBindingBytes);
    const strips = planRowStrips(h, w, halo, qwenImageDecoderRowElements(c, w) * N * z.bytesPerElement, budget, o.stripRows, 'Qwen-Image VAE decode');
    const d = this.decoder;
    // each step's input freed once its output exists (engine/scope.ts)
    const mid = e.chain(
      () => this.postQuant.forward(e, z),
      (p) => {
        capture?.('post_quant_conv', p);
        return d.conv_in.forward(e, p);
      },
      (a) => {
        capture?.('conv_in', a);
        return d.mid_block.forward(e, a);
      },
    );
    capture?.('mid_block', mid);
    return decodeRowStrips(e, mid, {
      strips, halo, spatialRatio: r, outChannels: c.inputChannels, dtype: z.dtype, label: 'krea2 vae decode',
      tail: (x, whole) => this.tail(x, whole ? capture : undefined),
    });
  }

  /** The up levels and the head on rows of the mid block's output -> [N, 8 rows, 8w, 3], unclamped. */
  private tail(x: Tensor, capture?: Krea2VaeCapture): Tensor {
    const e = this.e;
    const d = this.decoder;
    const out = e.chain(
      () => x,
      ...d.up_blocks.map((b, i) => (h: Tensor) => {
        const next = b.forward(e, h);
        capture?.(`up_block.${i}`, next);
        return next;
      }),
      (h) => normSilu(e, d.norm_out, h),
      (s) => d.conv_out.forward(e, s),
    );
    capture?.('decoder', out);
    return out;
  }

  free(): void {
    this.postQuant.free();
    const d = this.decoder;
    [d.conv_in, d.mid_block, ...d.up_blocks, d.norm_out, d.conv_out].forEach((m) => m.free());
  }
}

/** post_quant_conv (1x1x1, zDim -> zDim) applied to z * std + mean: W' = W diag(std), b' = b + W mean. */
async function foldedPostQuant(w: WeightLoader, c: Krea2VaeConfig): Promise<VaeConv2d> {
  const z = c.zDim;
  const shape = w.ckpt.entry(keyOf(w, 'post_quant_conv.weight')).shape;
  if (shape.length !== 5 || shape[0] !== z || shape[1] !== z || shape.slice(2).some((n) => n !== 1)) throw new RangeError(`Qwen-Image VAE: post_quant_conv.weight ${JSON.stringify(shape)} must be [${z}, ${z}, 1, 1, 1]`);
  return VaeConv2d.foldedPostQuant(w, 'post_quant_conv.', z, c.latentsMean, c.latentsStd, 'post_quant_conv (folded)');
}

/**
 * The decoder half's state-dict keys (and post_quant_conv) with their PyTorch shapes: causal Conv3d weights 5-D
 * (3x3x3, shortcuts 1x1x1), the attention's and the upsamplers' Conv2d 4-D, RMS gammas [C, 1, 1, 1] ([C, 1, 1] in the
 * attention), the upsample3d time_conv listed as the real file has it though one frame never reads it. The encoder
 * half is left out (text-to-image decodes only).
 */
export function qwenImageVaeDecoderShapes(c: Krea2VaeConfig): Map<string, number[]> {
  const m = new Map<string, number[]>();
  const conv = (p: string, cin: number, cout: number, k: number[]) => {
    m.set(`${p}weight`, [cout, cin, ...k]);
    m.set(`${p}bias`, [cout]);
  };
  const norm = (p: string, ch: number, images = false) => m.set(`${p}gamma`, images ? [ch, 1, 1] : [ch, 1, 1, 1]);
  const resnet = (p: string, cin: number, cout: number) => {
    norm(`${p}norm1.`, cin);
    conv(`${p}conv1.`, cin, cout, [3, 3, 3]);
    norm(`${p}norm2.`, cout);
    conv(`${p}conv2.`, cout, cout, [3, 3, 3]);
    if (cin !== cout) conv(`${p}conv_shortcut.`, cin, cout, [1, 1, 1]);
  };
  conv('post_quant_conv.', c.zDim, c.zDim, [1, 1, 1]);
  const dims = decoderDims(c.baseDim, c.dimMult);
  conv('decoder.conv_in.', c.zDim, dims[0]!, [3, 3, 3]);
  resnet('decoder.mid_block.resnets.0.', dims[0]!, dims[0]!);
  norm('decoder.mid_block.attentions.0.norm.', dims[0]!, true);
  conv('decoder.mid_block.attentions.0.to_qkv.', dims[0]!, 3 * dims[0]!, [1, 1]);
  conv('decoder.mid_block.attentions.0.proj.', dims[0]!, dims[0]!, [1, 1]);
  resnet('decoder.mid_block.resnets.1.', dims[0]!, dims[0]!);
  const temporalUp = [...c.temporalDownsample].reverse();
  for (const [i, l] of qwenImageDecoderLevels(c).entries()) {
    const p = `decoder.up_blocks.${i}.`;
    for (let r = 0; r <= c.numResBlocks; r++) resnet(`${p}resnets.${r}.`, r === 0 ? l.inDim : l.outDim, l.outDim);
    if (l.up) {
      conv(`${p}upsamplers.0.resample.1.`, l.outDim, l.outDim / 2, [3, 3]);
      if (temporalUp[i]) conv(`${p}upsamplers.0.time_conv.`, l.outDim, 2 * l.outDim, [3, 1, 1]);
    }
  }
  norm('decoder.norm_out.', dims.at(-1)!);
  conv('decoder.conv_out.', dims.at(-1)!, c.inputChannels, [3, 3, 3]);
  return m;
}

/**
 * Latent rows a strip needs on each side so its centre is exact: the reach of everything after the mid block (each
 * 3x3 conv one row at its own scale; nearest upsampling and the norms are per pixel), in latent rows, rounded up.
 * 13 for the released VAE.
 */
export function krea2VaeHaloRows(c: Krea2VaeConfig): number {
  return stripHaloRows(qwenImageDecoderLevels(c), c.numResBlocks, c.spatialRatio);
}

/** Elements per latent row (per image, width w) of the biggest tensor after the mid block. */
export function qwenImageDecoderRowElements(c: Krea2VaeConfig, w: number): number {
  return stripRowElements(decoderDims(c.baseDim, c.dimMult)[0]!, qwenImageDecoderLevels(c), w);
}
