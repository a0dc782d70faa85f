// MiniMax H3 audio VAE decoder: de-normalised latents [N, 32, T] -> mono waveforms [N, 1, T * 800] at 32 kHz,
// the two stereo channels as two batch items (upstream AutoencoderKLMiniMaxH3Audio.decode; the pipeline's
// MiniMaxH3AudioDecodeStep de-normalises first). Activations are channels-last [N, L, C] throughout.
//
//   dec_in_proj        Conv1d(32 -> latent_dim, k 1)                       [N, T, latent_dim]
//   decoder.conv_pre   Conv1d(latent_dim -> D, k 7, pad 3)                 [N, T, D]
//   per stage i        ups.i.0: ConvTranspose1d(D/2^i -> D/2^(i+1), k_i, stride r_i, pad (k_i - r_i)/2): x r_i
//                      then the mean of the AMP blocks resblocks.(i*K + j) (kernels 3/7/11, dilations 1/3/5)
//   activation_post    Activation1d(SnakeBeta): upsample 2x, snake-beta, downsample 2x
//   conv_post          Conv1d(-> 1, k 7, pad 3, no bias), clamp to [-1, 1] (no tanh)
// AMP block (BigVGAN AMPBlock1), per dilation d: x += conv2(act2(conv1_d(act1(x)))), every act an Activation1d
// with its own SnakeBeta (alpha, beta stored as logs). Every conv is weight-normed in the checkpoint (weights.ts).
import type { Engine } from '../../../../engine/engine';
import { conv1d, convTranspose1d, type PreparedConvWeight } from '../../../../engine/ops/conv';
import { add, div, maximum, minimum } from '../../../../engine/ops/elementwise';
import { copy } from '../../../../engine/ops/layout';
import { Activation1d } from '../../../../engine/ops/resample_alias_free';
import type { Checkpoint } from '../../../../engine/safetensors';
import type { Tensor } from '../../../../engine/tensor';
import { loadPlain, newWeightLoader, type ComputeDType, type WeightLoader } from '../../../common/weights';
import { hopLength, type AudioVaeConfig } from './config';
import { checkFilter, loadWeightNormConv, storedTaps } from './weights';

/** Stage outputs kept by forward() when asked (copies, channels-last; the caller frees them). */
export type AudioVaeTrace = Map<string, Tensor>;

interface Conv {
  w: PreparedConvWeight;
  bias?: Tensor;
}

/** One Activation1d's SnakeBeta parameters ([C] each, log values). */
interface Snake {
  alpha: Tensor;
  beta: Tensor;
}

async function loadConv(w: WeightLoader, p: string, shape: [number, number, number], bias: boolean, transposed = false): Promise<Conv> {
  const weight = await loadWeightNormConv(w, p, shape, transposed);
  return { w: weight, bias: bias ? await loadPlain(w, `${p}bias`, [transposed ? shape[1] : shape[0]]) : undefined };
}

async function loadSnake(w: WeightLoader, act: Activation1d, p: string, channels: number): Promise<Snake> {
  await checkFilter(w, `${p}upsample.filter`, act.up);
  await checkFilter(w, `${p}downsample.lowpass.filter`, act.down);
  return { alpha: await loadPlain(w, `${p}act.alpha`, [channels]), beta: await loadPlain(w, `${p}act.beta`, [channels]) };
}

class AmpBlock {
  private constructor(
    readonly kernel: number,
    readonly dilations: number[],
    readonly convs1: Conv[],
    readonly convs2: Conv[],
    /** activations.(2i) before convs1.i, activations.(2i+1) before convs2.i. */
    readonly acts: Snake[],
  ) {}

  static async load(w: WeightLoader, act: Activation1d, p: string, channels: number, kernel: number, dilations: number[]): Promise<AmpBlock> {
    const shape: [number, number, number] = [channels, channels, kernel];
    const convs1: Conv[] = [];
    const convs2: Conv[] = [];
    const acts: Snake[] = [];
    for (let i = 0; i < dilations.length; i++) {
      convs1.push(await loadConv(w, `${p}convs1.${i}.`, shape, true));
      convs2.push(await loadConv(w, `${p}convs2.${i}.`, shape, true));
    }
    for (let i = 0; i < 2 * dilations.length; i++) acts.push(await loadSnake(w, act, `${p}activations.${i}.`, channels));
    return new AmpBlock(kernel, dilations, convs1, convs2, acts);
  }

  /** x [N, L, C] (not consumed) -> new [N, L, C]. */
  forward(e: Engine, act: Activation1d, x: Tensor): Tensor {
    const k = this.kernel;
    // each step's input freed once its output exists; a dilation's branch and input once their sum does (x is the
    // caller's)
    return e.chain(
      () => x,
      ...this.dilations.map((d, i) => (h: Tensor) => add(e, e.chain(
        () => snakeAct(e, act, h, this.acts[2 * i]!),
        (a1) => conv1d(e, a1, this.convs1[i]!.w, { dilation: d, padding: (k * d - d) / 2, bias: this.convs1[i]!.bias }),
        (r1) => snakeAct(e, act, r1, this.acts[2 * i + 1]!),
        (a2) => conv1d(e, a2, this.convs2[i]!.w, { padding: (k - 1) / 2, bias: this.convs2[i]!.bias }),
      ), h)),
    );
  }
}

function snakeAct(e: Engine, act: Activation1d, x: Tensor, s: Snake): Tensor {
  return act.forward(e, x, s.alpha, { beta: s.beta, logScale: true });
}

/**
 * Latent frames each side that one output frame can depend on (a bound): every layer's one-sided reach in its own
 * input samples, divided by how many samples a latent frame is at that point. A chunk decoded with this much
 * context on both sides matches the full decode (its padded edges lie outside what the kept samples see).
 */
export function receptiveFieldFrames(c: AudioVaeConfig, resamplerTaps = 12, ratio = 2): number {
  const actReach = Math.ceil(resamplerTaps / ratio) + 1; // upsample then downsample, in input samples
  const ampReach = Math.max(...c.resblockKernelSizes.map((k, j) =>
    c.resblockDilationSizes[j]!.reduce((s, d) => s + actReach + (d * (k - 1)) / 2 + actReach + (k - 1) / 2, 0)));
  let frames = 3; // conv_pre (k 7)
  let factor = 1;
  c.decoderRates.forEach((r, i) => {
    frames += (c.decoderKernelSizes[i]! / r + 1) / factor; // transposed conv, in its input samples
    factor *= r;
    frames += ampReach / factor;
  });
  frames += (actReach + 3) / factor; // activation_post + conv_post (k 7)
  return Math.ceil(frames) + 1;
}

export interface AudioVaeLoadOptions {
  /** Compute dtype (default f32; the real checkpoint is fp32 and upstream keeps the VAE in fp32). */
  dtype?: ComputeDType;
  /** Key prefix (fixtures: "weight."). */
  prefix?: string;
}

export interface AudioVaeDecodeOptions {
  /** The latents are already de-normalised (default false: they are the sampler's normalised latents). */
  denormalized?: boolean;
  /** Frames decoded per pass (default 400 = 10 s); longer clips go in chunks with context (bounded memory). */
  chunkFrames?: number;
  /** Context frames each side of a chunk (default receptiveFieldFrames(config)). */
  contextFrames?: number;
}

/** Decoded audio: one Float32Array per channel (latent batch item), each `samples` long, at `sampleRate`. */
export interface DecodedAudio {
  sampleRate: number;
  samples: number;
  channels: Float32Array[];
}

/** Channels -> interleaved frames [s0c0, s0c1, s1c0, ...] (what WAV/AAC encoders take). */
export function interleave(channels: readonly Float32Array[]): Float32Array {
  const n = channels.length;
  const len = channels[0]?.length ?? 0;
  if (channels.some((c) => c.length !== len)) throw new RangeError('interleave: channels differ in length');
  const out = new Float32Array(n * len);
  for (let c = 0; c < n; c++) {
    const ch = channels[c]!;
    for (let i = 0; i < len; i++) out[i * n + c] = ch[i]!;
  }
  return out;
}

export class AudioVaeDecoder {
  private constructor(
    readonly config: AudioVaeConfig,
    readonly dtype: ComputeDType,
    private readonly act: Activation1d,
    private readonly inProj: Conv,
    private readonly convPre: Conv,
    private readonly ups: Conv[],
    /** resblocks, stage-major: stage i's blocks are [i * K, (i + 1) * K). */
    private readonly resblocks: AmpBlock[],
    private readonly actPost: Snake,
    private readonly convPost: Conv,
    private readonly owned: { free(): void }[],
  ) {}

  /** Waveform samples per latent frame (800). */
  get hop(): number {
    return hopLength(this.config);
  }

  static async load(e: Engine, ckpt: Checkpoint, cfg: AudioVaeConfig, opts: AudioVaeLoadOptions = {}): Promise<AudioVaeDecoder> {
    const dtype = opts.dtype ?? 'f32';
    const w = newWeightLoader(e, ckpt, dtype, { prefix: opts.prefix });
    // ratio 2, 12 taps (upstream's defaults); the stored filters' own float32 taps when the checkpoint has them (every
    // stored filter is then checked against the taps in use)
    let act: Activation1d | undefined;
    try {
      act = Activation1d.create(e, { upTaps: await storedTaps(w, 'upsample.filter', 2, 12), downTaps: await storedTaps(w, 'downsample.lowpass.filter', 2, 12) });
      w.loaded.push(act);
      const D = cfg.decoderDim;
      const inProj = await loadConv(w, 'dec_in_proj.', [cfg.latentDim, cfg.latentChannels, 1], true);
      const convPre = await loadConv(w, 'decoder.conv_pre.', [D, cfg.latentDim, 7], true);
      const ups: Conv[] = [];
      const resblocks: AmpBlock[] = [];
      let ch = D;
      for (let i = 0; i < cfg.decoderRates.length; i++) {
        ups.push(await loadConv(w, `decoder.ups.${i}.0.`, [ch, ch / 2, cfg.decoderKernelSizes[i]!], true, true));
        ch /= 2;
      }
      ch = D;
      let b = 0;
      for (let i = 0; i < cfg.decoderRates.length; i++) {
        ch /= 2;
        for (let j = 0; j < cfg.resblockKernelSizes.length; j++, b++) {
          resblocks.push(await AmpBlock.load(w, act, `decoder.resblocks.${b}.`, ch, cfg.resblockKernelSizes[j]!, cfg.resblockDilationSizes[j]!));
        }
      }
      const actPost = await loadSnake(w, act, 'decoder.activation_post.', ch);
      const convPost = await loadConv(w, 'decoder.conv_post.', [1, ch, 7], false);
      return new AudioVaeDecoder(cfg, dtype, act, inProj, convPre, ups, resblocks, actPost, convPost, w.loaded);
    } catch (err) {
      for (const t of w.loaded) t.free();
      throw err;
    }
  }

  /**
   * Upstream decode on de-normalised latents x [N, T, latent_channels] (channels-last, any view, compute dtype;
   * not consumed) -> clamped waveform [N, T * hop, 1]. With `trace`, copies of dec_in_proj, conv_pre, ups.i,
   * stage.i, activation_post and conv_post (before the clamp) are added to it.
   */
  forward(e: Engine, x: Tensor, trace?: AudioVaeTrace): Tensor {
    const cfg = this.config;
    if (x.rank !== 3 || x.shape[2] !== cfg.latentChannels) throw new RangeError(`AudioVaeDecoder: latents ${x} must be [N, T, ${cfg.latentChannels}]`);
    if (x.dtype !== this.dtype) throw new TypeError(`AudioVaeDecoder: latents ${x} are not ${this.dtype}`);
    // the trace's copies are the caller's: made outside the scopes
    const keep = (name: string, t: Tensor) => {
      if (trace) trace.set(name, e.unscoped(() => copy(e, t)));
      return t;
    };
    const K = cfg.resblockKernelSizes.length;
    // one chain: each step's input freed once its output exists, as the hand-placed frees did
    return e.chain(
      () => keep('dec_in_proj', conv1d(e, x, this.inProj.w, { bias: this.inProj.bias })),
      (h0) => keep('conv_pre', conv1d(e, h0, this.convPre.w, { padding: 3, bias: this.convPre.bias })),
      ...this.ups.flatMap((up, i) => {
        const r = cfg.decoderRates[i]!;
        const blocks = this.resblocks.slice(i * K, (i + 1) * K);
        return [
          (h: Tensor) => keep(`ups.${i}`, convTranspose1d(e, h, up.w, { stride: r, padding: (cfg.decoderKernelSizes[i]! - r) / 2, bias: up.bias })),
          // the resblocks' sum, each partial sum and block output freed once the next sum exists
          (u: Tensor) => e.chain(() => blocks[0]!.forward(e, this.act, u), ...blocks.slice(1).map((b) => (sum: Tensor) => add(e, sum, b.forward(e, this.act, u)))),
          (sum: Tensor) => keep(`stage.${i}`, div(e, sum, K)), // upstream: residual / num_kernels
        ];
      }),
      (h) => keep('activation_post', snakeAct(e, this.act, h, this.actPost)),
      (a) => keep('conv_post', conv1d(e, a, this.convPost.w, { padding: 3 })),
      (y) => maximum(e, y, -1),
      (lo) => minimum(e, lo, 1),
    );
  }

  /**
   * Latents [N, latent_channels, T] (row-major host values, the pipeline's layout: N = 2 stereo channels; the
   * sampler's normalised latents unless `denormalized`) -> one waveform per batch item, T * hop samples at
   * sampleRate (32 kHz). Clips longer than `chunkFrames` are decoded in chunks with `contextFrames` of context
   * on each side, so GPU memory is bounded by the chunk size, not the clip length.
   */
  async decode(e: Engine, latents: ArrayLike<number>, shape: readonly [number, number, number], opts: AudioVaeDecodeOptions = {}): Promise<DecodedAudio> {
    const cfg = this.config;
    const [N, C, T] = shape;
    if (C !== cfg.latentChannels || !(N >= 1) || !(T >= 1) || latents.length !== N * C * T) {
      throw new RangeError(`AudioVaeDecoder.decode: latents of shape [${shape.join(', ')}] (${latents.length} values) must be [N, ${cfg.latentChannels}, T]`);
    }
    const chunk = opts.chunkFrames ?? 400;
    const ctx = opts.contextFrames ?? receptiveFieldFrames(cfg);
    if (!Number.isInteger(chunk) || chunk < 1 || !Number.isInteger(ctx) || ctx < 0) throw new RangeError(`AudioVaeDecoder.decode: chunkFrames ${chunk} / contextFrames ${ctx}`);
    // channels-last [N, T, C], de-normalised in float64 (latents * std + mean)
    const host = new Float64Array(N * T * C);
    for (let n = 0; n < N; n++) {
      for (let c = 0; c < C; c++) {
        const [m, s] = opts.denormalized ? [0, 1] : [cfg.latentsMean[c]!, cfg.latentsStd[c]!];
        for (let t = 0; t < T; t++) host[(n * T + t) * C + c] = latents[(n * C + c) * T + t]! * s + m;
      }
    }
    const hop = this.hop;
    const channels = Array.from({ length: N }, () => new Float32Array(T * hop));
    for (let start = 0; start < T; start += chunk) {
      const end = Math.min(T, start + chunk);
      const ws = Math.max(0, start - ctx);
      const we = Math.min(T, end + ctx);
      // the chunk's latents freed once the waveform exists, the waveform once read back
      const wave = await e.scope(async () => e.read(e.chain(() => e.upload(sliceFrames(host, N, T, C, ws, we), [N, we - ws, C], this.dtype, 'audio latents'), (x) => this.forward(e, x))));
      const L = (we - ws) * hop;
      for (let n = 0; n < N; n++) channels[n]!.set(wave.subarray(n * L + (start - ws) * hop, n * L + (end - ws) * hop), start * hop);
    }
    return { sampleRate: cfg.samplingRate, samples: T * hop, channels };
  }

  free(): void {
    for (const t of this.owned) t.free();
    this.owned.length = 0;
  }
}

/** Frames [ws, we) of a channels-last [N, T, C] host array. */
function sliceFrames(host: Float64Array, N: number, T: number, C: number, ws: number, we: number): Float64Array {
  const out = new Float64Array(N * (we - ws) * C);
  for (let n = 0; n < N; n++) out.set(host.subarray((n * T + ws) * C, (n * T + we) * C), n * (we - ws) * C);
  return out;
}
