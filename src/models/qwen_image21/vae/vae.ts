// QwenImage21Vae: the pipeline-facing VAE (diffusers AutoencoderKLQwenImage21 + the VAE steps of
// QwenImage21Pipeline), on one frame, channels-last.
//
//   encode(pixels [N, H, W, 4] RGBA in [-1, 1], H and W multiples of 16)
//       -> latents [N, H/16, W/16, 64]: (latent_dist.mode() - latents_mean) / latents_std, what the transformer reads
//   decode(latents [N, h, w, 64], normalised as the sampler leaves them)
//       -> pixels [N, 16h, 16w, 4] RGBA in [-1, 1] (clamped as upstream _decode; the image processor's postprocess
//          then maps (x + 1) / 2 to [0, 1])
//
// [N, h, w, 64] is the transformer's token layout: its (N, h*w, 64) rows are row-major over (h, w) (upstream
// _pack_latents is a plain flatten, no 2x2 patching), so `latents.reshape([N, h, w, 64])` is the hand-over and
// needs no copy. The de-normalisation (z * std + mean) is folded into post_quant_conv and the normalisation into
// quant_conv at load.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Engine } from '../../../engine/engine';
import { Checkpoint } from '../../../engine/safetensors';
import type { Tensor } from '../../../engine/tensor';
import { parseQwenImage21VaeConfig, type QwenImage21VaeConfig } from './config';
import { decodeLatents, VaeDecoder, type DecodeOptions, type VaeCapture } from './decoder';
import { VaeEncoder } from './encoder';
import { keyOf, newWeightLoader, type ComputeDType, type WeightLoader } from '../../common/weights';
import { VaeConv2d } from './modules';

export const VAE_WEIGHTS = 'diffusion_pytorch_model.safetensors';
export const VAE_INDEX = 'diffusion_pytorch_model.safetensors.index.json';

export interface QwenImage21VaeLoadOptions {
  /** Compute dtype (default f32). Weights convert on upload (bf16 checkpoints included). */
  dtype?: ComputeDType;
  /** Key prefix (fixtures: "weight."). */
  prefix?: string;
  /** Which halves to load (default both); the other's keys are never read. */
  encoder?: boolean;
  decoder?: boolean;
}

/** Opens a vae/ folder's weights: the single file, or a sharded index. */
export function openVaeCheckpoint(dir: string): Promise<Checkpoint> {
  for (const f of [VAE_INDEX, VAE_WEIGHTS]) if (existsSync(join(dir, f))) return Checkpoint.open(join(dir, f));
  throw new Error(`Qwen-Image-2.1 VAE: no ${VAE_WEIGHTS} (or ${VAE_INDEX}) in ${dir}`);
}

export class QwenImage21Vae {
  private constructor(
    readonly e: Engine,
    readonly config: QwenImage21VaeConfig,
    readonly dtype: ComputeDType,
    /** post_quant_conv with z * std + mean folded in (decoder side). */
    private readonly postQuant: VaeConv2d | null,
    readonly decoder: VaeDecoder | null,
    readonly encoder: VaeEncoder | null,
    /** quant_conv's mean half with (mode - mean) / std folded in (encoder side). */
    private readonly quantMode: VaeConv2d | null,
  ) {}

  /** The checkpoint's vae/ folder: config.json + diffusion_pytorch_model.safetensors (or its index). */
  static async load(e: Engine, dir: string, opts: QwenImage21VaeLoadOptions = {}): Promise<QwenImage21Vae> {
    const raw = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
    const ckpt = await openVaeCheckpoint(dir);
    try {
      return await QwenImage21Vae.fromCheckpoint(e, ckpt, raw, opts);
    } finally {
      await ckpt.close();
    }
  }

  /** From an open checkpoint and its config object (tests: golden fixtures with prefix "weight."). */
  static async fromCheckpoint(e: Engine, ckpt: Checkpoint, rawConfig: Record<string, unknown>, opts: QwenImage21VaeLoadOptions = {}): Promise<QwenImage21Vae> {
    const c = parseQwenImage21VaeConfig(rawConfig, `${ckpt.path} config`);
    const dtype = opts.dtype ?? 'f32';
    const w = newWeightLoader(e, ckpt, dtype, { prefix: opts.prefix });
    try {
      const wantDec = opts.decoder ?? true;
      const wantEnc = opts.encoder ?? true;
      const postQuant = wantDec ? await foldedPostQuant(w, c) : null;
      const decoder = wantDec ? await VaeDecoder.load(w, 'decoder.', c) : null;
      const encoder = wantEnc ? await VaeEncoder.load(w, 'encoder.', c) : null;
      const quantMode = wantEnc ? await foldedQuantMode(w, c) : null;
      return new QwenImage21Vae(e, c, dtype, postQuant, decoder, encoder, quantMode);
    } catch (err) {
      w.loaded.forEach((t) => t.free());
      throw err;
    }
  }

  /** Pixel size for a latent grid (16x). */
  pixelSize(h: number, w: number): { height: number; width: number } {
    return { height: h * this.config.spatialRatio, width: w * this.config.spatialRatio };
  }

  /**
   * latents [N, h, w, zDim] (normalised, the transformer's layout; any dtype is cast by the caller to this VAE's)
   * -> a new tensor [N, 16h, 16w, outChannels] (RGBA) in [-1, 1]. Row strips bound the memory (see decoder.ts).
   */
  decode(latents: Tensor, opts: DecodeOptions = {}): Tensor {
    if (!this.decoder || !this.postQuant) throw new Error('Qwen-Image-2.1 VAE: loaded without the decoder');
    this.checkDtype(latents, 'decode');
    return decodeLatents(this.e, this.config, this.postQuant, this.decoder, latents, opts);
  }

  /**
   * pixels [N, H, W, inChannels] (RGBA in [-1, 1], H and W multiples of 16) -> a new tensor [N, H/16, W/16, zDim]:
   * the posterior's mode, normalised (the pipeline's _encode_vae_image with sample_mode "argmax").
   */
  encode(pixels: Tensor, opts: { capture?: VaeCapture } = {}): Tensor {
    if (!this.encoder || !this.quantMode) throw new Error('Qwen-Image-2.1 VAE: loaded without the encoder');
    this.checkDtype(pixels, 'encode');
    const c = this.config;
    const [, H, W, C] = pixels.shape as [number, number, number, number];
    if (pixels.rank !== 4 || C !== c.inChannels) throw new RangeError(`VAE encode: pixels ${pixels} must be [N, H, W, ${c.inChannels}]`);
    if (H % c.spatialRatio || W % c.spatialRatio) throw new RangeError(`VAE encode: ${H}x${W} pixels are not multiples of ${c.spatialRatio}`);
    const moments = this.encoder.forward(this.e, pixels, opts.capture);
    try {
      return this.quantMode.forward(this.e, moments);
    } finally {
      moments.free();
    }
  }

  free(): void {
    for (const m of [this.postQuant, this.decoder, this.encoder, this.quantMode]) m?.free();
  }

  private checkDtype(t: Tensor, op: string): void {
    if (t.dtype !== this.dtype) throw new TypeError(`VAE ${op}: ${t} is not ${this.dtype} (cast it first)`);
  }
}

/** post_quant_conv(z * std + mean) = (W diag(std)) z + (W mean + b), in float64 on the host. */
async function foldedPostQuant(w: WeightLoader, c: QwenImage21VaeConfig): Promise<VaeConv2d> {
  w.ckpt.entry(keyOf(w, 'post_quant_conv.weight'), [c.zDim, c.zDim, 1, 1]);
  return VaeConv2d.foldedPostQuant(w, 'post_quant_conv.', c.zDim, c.latentsMean, c.latentsStd, 'post_quant_conv');
}

/** The first zDim rows of quant_conv (the mean), then (mode - mean) / std, in float64 on the host. */
async function foldedQuantMode(w: WeightLoader, c: QwenImage21VaeConfig): Promise<VaeConv2d> {
  const z = c.zDim;
  const key = (k: string) => keyOf(w, `quant_conv.${k}`);
  w.ckpt.entry(key('weight'), [2 * z, 2 * z, 1, 1]);
  w.ckpt.entry(key('bias'), [2 * z]);
  const W = await w.ckpt.readFloat32(key('weight'));
  const b = await w.ckpt.readFloat32(key('bias'));
  const wf = new Float64Array(z * 2 * z);
  const bf = new Float64Array(z);
  for (let o = 0; o < z; o++) {
    const s = c.latentsStd[o]!;
    for (let i = 0; i < 2 * z; i++) wf[o * 2 * z + i] = W[o * 2 * z + i]! / s;
    bf[o] = (b[o]! - c.latentsMean[o]!) / s;
  }
  return VaeConv2d.fromHost(w, wf, bf, 2 * z, z, 1, 'quant_conv');
}
