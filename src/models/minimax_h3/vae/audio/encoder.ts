// MiniMax H3 audio VAE encoder (diffusers AutoencoderKLMiniMaxH3Audio.encode) and the normalisation the modular
// pipeline's MiniMaxH3Ref2VAReferenceEncoderStep applies to a reference soundtrack. Mono: the two stereo channels are
// two batch items. Activations channels-last [N, L, C] throughout.
//
//   waveform [N, S], right-padded with zeros to a multiple of the hop (prod(encoder_rates) = 800)
//   encoder.block.0              Conv1d(1 -> d, k 7, pad 3)
//   encoder.block.<1..R>         per rate s (d doubles): block.0..2 residual units at dilations 1/3/9 (Snake1d,
//                                Conv1d(k 7, dilation, same length), Snake1d, Conv1d(k 1); x + that), block.3
//                                Snake1d, block.4 Conv1d(d/2 -> d, k 2s, stride s, pad ceil(s/2))
//   encoder.block.<R+1>, <R+2>   Snake1d, Conv1d(-> latent_dim, k 3, pad 1)                     [N, T, latent_dim]
//   pre_block                    h = proj(norm3(x)) + attn(norm1(x)); h + mlp(norm2(h))         [N, T, latent_channels]
//                                (causal attention, pooled and folded at load: attn-projection.ts)
//   mean_proj, logs_proj         Conv1d(k 1): the posterior's mean (its mode, what H3 uses) and log standard deviation
// Every conv of the DAC encoder is weight-normed in the checkpoint (weight_g / weight_v, folded at load: weights.ts);
// Snake1d's alpha is stored raw ([1, C, 1]), x + 1/(alpha + 1e-9) sin^2(alpha x).
// The config (parseAudioVaeEncoderConfig, encoderHop) is read in config.ts.
import type { Engine } from '../../../../engine/engine';
import { snake } from '../../../../engine/ops/activation';
import { conv1d, type PreparedConvWeight } from '../../../../engine/ops/conv';
import { add } from '../../../../engine/ops/elementwise';
import { linear } from '../../../../engine/ops/linear';
import type { Checkpoint } from '../../../../engine/safetensors';
import type { Tensor } from '../../../../engine/tensor';
import { loadPlain, newWeightLoader, type ComputeDType, type WeightLoader } from '../../../common/weights';
import { AttnProjection } from './attn-projection';
import { encoderHop, parseAudioVaeEncoderConfig, type AudioVaeEncoderConfig } from './config';
import { loadWeightNormConv } from './weights';

/** Intermediates (channels-last [N, L, C]), by upstream module name: encoder.block.<i>, encoder, attn, pre_block. */
export type AudioEncoderCapture = (name: string, t: Tensor) => void;

interface Conv {
  w: PreparedConvWeight;
  bias: Tensor;
}

async function loadConv(w: WeightLoader, p: string, cout: number, cin: number, k: number): Promise<Conv> {
  return { w: await loadWeightNormConv(w, p, [cout, cin, k]), bias: await loadPlain(w, `${p}bias`, [cout]) };
}

/** Snake1d's alpha, stored [1, C, 1]. */
async function loadAlpha(w: WeightLoader, p: string, c: number): Promise<Tensor> {
  return (await loadPlain(w, `${p}alpha`, [1, c, 1])).reshape([c]);
}

class ResidualUnit {
  constructor(readonly dilation: number, readonly alpha0: Tensor, readonly conv1: Conv, readonly alpha2: Tensor, readonly conv3: Conv) {}

  static async load(w: WeightLoader, p: string, dim: number, dilation: number): Promise<ResidualUnit> {
    return new ResidualUnit(
      dilation,
      await loadAlpha(w, `${p}block.0.`, dim),
      await loadConv(w, `${p}block.1.`, dim, dim, 7),
      await loadAlpha(w, `${p}block.2.`, dim),
      await loadConv(w, `${p}block.3.`, dim, dim, 1),
    );
  }

  /** x [N, L, dim] (not consumed) -> x + block(x). The dilated conv keeps the length, so nothing is cropped. */
  forward(e: Engine, x: Tensor): Tensor {
    // each step's input freed once its output exists, the block's output once the sum does
    return e.scope(() => add(e, x, e.chain(
      () => snake(e, x, this.alpha0),
      (a) => conv1d(e, a, this.conv1.w, { dilation: this.dilation, padding: 3 * this.dilation, bias: this.conv1.bias }),
      (h) => snake(e, h, this.alpha2),
      (b) => conv1d(e, b, this.conv3.w, { bias: this.conv3.bias }),
    )));
  }

  free(): void {
    [this.alpha0, this.conv1.w, this.conv1.bias, this.alpha2, this.conv3.w, this.conv3.bias].forEach((t) => t.free());
  }
}

class EncoderBlock {
  constructor(readonly units: ResidualUnit[], readonly alpha: Tensor, readonly conv: Conv, readonly stride: number) {}

  static async load(w: WeightLoader, p: string, dim: number, stride: number): Promise<EncoderBlock> {
    const units: ResidualUnit[] = [];
    for (const [i, d] of [1, 3, 9].entries()) units.push(await ResidualUnit.load(w, `${p}block.${i}.`, dim / 2, d));
    return new EncoderBlock(units, await loadAlpha(w, `${p}block.3.`, dim / 2), await loadConv(w, `${p}block.4.`, dim, dim / 2, 2 * stride), stride);
  }

  forward(e: Engine, x: Tensor): Tensor {
    // each step's input freed once its output exists (x is the caller's)
    return e.chain(
      () => x,
      ...this.units.map((u) => (h: Tensor) => u.forward(e, h)),
      (h) => snake(e, h, this.alpha),
      (a) => conv1d(e, a, this.conv.w, { stride: this.stride, padding: Math.ceil(this.stride / 2), bias: this.conv.bias }),
    );
  }

  free(): void {
    this.units.forEach((u) => u.free());
    [this.alpha, this.conv.w, this.conv.bias].forEach((t) => t.free());
  }
}

/** A reference soundtrack's posterior: mean (the mode) and log std, [N, latent_channels, T] each (upstream's layout). */
export interface AudioPosterior {
  channels: number;
  frames: number;
  mean: Float32Array[];
  logs: Float32Array[];
}

export interface AudioVaeEncoderLoadOptions {
  /** Compute dtype (default f32: upstream pins the audio VAE to float32). */
  dtype?: ComputeDType;
  /** Key prefix (fixtures: "weight."). */
  prefix?: string;
}

export class AudioVaeEncoder {
  private constructor(
    readonly e: Engine,
    readonly cfg: AudioVaeEncoderConfig,
    readonly dtype: ComputeDType,
    readonly conv_in: Conv,
    readonly blocks: EncoderBlock[],
    readonly alpha_out: Tensor,
    readonly conv_out: Conv,
    readonly pre_block: AttnProjection,
    readonly mean_proj: [Tensor, Tensor],
    readonly logs_proj: [Tensor, Tensor],
  ) {}

  /** cfg: the diffusers audio_vae/config.json object (or an already parsed encoder config). */
  static async load(e: Engine, ckpt: Checkpoint, cfg: unknown, opts: AudioVaeEncoderLoadOptions = {}): Promise<AudioVaeEncoder> {
    const c = cfg && typeof cfg === 'object' && 'encoderRates' in cfg ? (cfg as AudioVaeEncoderConfig) : parseAudioVaeEncoderConfig(cfg, `${ckpt.path} config`);
    const dtype = opts.dtype ?? 'f32';
    const w = newWeightLoader(e, ckpt, dtype, { prefix: opts.prefix });
    try {
      const p = 'encoder.block.';
      let d = c.encoderDim;
      const conv_in = await loadConv(w, `${p}0.`, d, 1, 7);
      const blocks: EncoderBlock[] = [];
      for (const [i, s] of c.encoderRates.entries()) {
        d *= 2;
        blocks.push(await EncoderBlock.load(w, `${p}${i + 1}.`, d, s));
      }
      const R = c.encoderRates.length;
      const alpha_out = await loadAlpha(w, `${p}${R + 1}.`, d);
      const conv_out = await loadConv(w, `${p}${R + 2}.`, c.latentDim, d, 3);
      const pre = await AttnProjection.load(w, 'pre_block.', c);
      const C = c.latentChannels;
      const head = async (k: string): Promise<[Tensor, Tensor]> => [(await loadPlain(w, `${k}.weight`, [C, C, 1])).reshape([C, C]), await loadPlain(w, `${k}.bias`, [C])];
      return new AudioVaeEncoder(e, c, dtype, conv_in, blocks, alpha_out, conv_out, pre, await head('mean_proj'), await head('logs_proj'));
    } catch (err) {
      w.loaded.forEach((t) => t.free());
      throw err;
    }
  }

  /** Latent frames of S samples: ceil(S / hop). */
  latentFrames(samples: number): number {
    return Math.ceil(samples / encoderHop(this.cfg));
  }

  /**
   * Upstream encode(): mono waveforms (one per stereo channel, same length) -> the posterior, [N, C, T] per tensor.
   * The waveforms are right-padded with zeros to a multiple of the hop, as upstream.
   */
  async encode(channels: readonly Float32Array[], capture?: AudioEncoderCapture): Promise<AudioPosterior> {
    const N = channels.length;
    const S = channels[0]?.length ?? 0;
    if (N < 1 || S < 1 || channels.some((ch) => ch.length !== S)) throw new RangeError(`audio VAE encode: ${N} channels of ${channels.map((c) => c.length).join(', ')} samples (need >= 1, equal lengths)`);
    const T = this.latentFrames(S);
    const Sp = T * encoderHop(this.cfg);
    const host = new Float32Array(N * Sp);
    channels.forEach((ch, n) => host.set(ch, n * Sp));
    const e = this.e;
    // a test's capture runs outside the scopes: the copies it makes are its own
    const cap = capture && ((name: string, t: Tensor) => e.unscoped(() => capture(name, t)));
    // every stage's output is held until the posterior is read back, then freed with the scope (as the hand-placed
    // frees at the end did: the clips are short, the peak is the last stages')
    return e.scope(async () => {
      const x = e.upload(host, [N, Sp, 1], this.dtype, 'audio vae encode waveform');
      let h = conv1d(e, x, this.conv_in.w, { padding: 3, bias: this.conv_in.bias });
      cap?.('encoder.block.0', h);
      for (const [i, b] of this.blocks.entries()) {
        h = b.forward(e, h);
        cap?.(`encoder.block.${i + 1}`, h);
      }
      const R = this.blocks.length;
      h = snake(e, h, this.alpha_out);
      cap?.(`encoder.block.${R + 1}`, h);
      h = conv1d(e, h, this.conv_out.w, { padding: 1, bias: this.conv_out.bias });
      cap?.(`encoder.block.${R + 2}`, h);
      cap?.('encoder', h);
      const z = this.pre_block.forward(e, h, cap); // [N, T, C]
      cap?.('pre_block', z);
      const mean = linear(e, z, this.mean_proj[0], this.mean_proj[1]);
      const logs = linear(e, z, this.logs_proj[0], this.logs_proj[1]);
      const C = this.cfg.latentChannels;
      const split = (flat: Float32Array): Float32Array[] =>
        Array.from({ length: N }, (_, n) => {
          const out = new Float32Array(C * T); // [C, T]
          for (let t = 0; t < T; t++) for (let c = 0; c < C; c++) out[c * T + t] = flat[(n * T + t) * C + c]!;
          return out;
        });
      return { channels: N, frames: T, mean: split(await e.read(mean)), logs: split(await e.read(logs)) };
    });
  }

  free(): void {
    [this.conv_in.w, this.conv_in.bias, this.alpha_out, this.conv_out.w, this.conv_out.bias, ...this.mean_proj, ...this.logs_proj].forEach((t) => t.free());
    this.blocks.forEach((b) => b.free());
    this.pre_block.free();
  }
}

/**
 * MiniMaxH3Ref2VAReferenceEncoderStep's audio rows: the posterior mean (never sampled), (mean - latents_mean) /
 * latents_std per channel in float32, as channel-major rows [N * T, C] (all of the left channel's frames, then the
 * right's): the packed sequence's audio conditioning rows.
 */
export function audioConditionRows(cfg: AudioVaeEncoderConfig, p: AudioPosterior): Float32Array {
  const C = cfg.latentChannels;
  const T = p.frames;
  const rows = new Float32Array(p.channels * T * C);
  for (let n = 0; n < p.channels; n++) {
    for (let c = 0; c < C; c++) {
      const m = Math.fround(cfg.latentsMean[c]!);
      const s = Math.fround(cfg.latentsStd[c]!);
      for (let t = 0; t < T; t++) rows[(n * T + t) * C + c] = Math.fround(Math.fround(p.mean[n]![c * T + t]! - m) / s);
    }
  }
  return rows;
}
