// The Qwen3-TTS speaker encoder (upstream Qwen3TTSSpeakerEncoder, ECAPA-TDNN; keys under "speaker_encoder."):
// log mel [B, T, 128] -> x-vector [B, enc_dim]. Fields mirror the checkpoint:
//   blocks.0.conv                          TDNN: conv k5 mel -> C0, ReLU
//   blocks.{1..3}.tdnn1.conv               SE-Res2Net: conv k1, ReLU
//   blocks.{i}.res2net_block.blocks.{0..6}.conv   dilated conv k3 per channel chunk (+ ReLU), chained
//   blocks.{i}.tdnn2.conv                  conv k1, ReLU
//   blocks.{i}.se_block.{conv1,conv2}      squeeze-excitation: time mean -> conv1, ReLU -> conv2, sigmoid -> scale
//   mfa.conv                               conv k1 + ReLU on the concat of blocks 1..3
//   asp.tdnn.conv, asp.conv                attentive statistics pooling
//   fc                                     conv k1 -> enc_dim
// Every conv is Conv1d(padding="same", padding_mode="reflect") with a bias. This ECAPA variant has no BatchNorm
// (TimeDelayNetBlock is conv + ReLU; the checkpoint holds no norm keys), so there is nothing to fold.
//
// Layout: activations are channels-last [B, T, C] (the engine's conv layout; upstream works on (B, C, T), so the
// golden intermediates are compared transposed). Reflect "same" padding is a pad() copy before the conv (the conv op
// pads with zeros or edge values only); k = 1 convs need none. Weights are re-laid once at load
// (prepareConvWeight). Dtype: f32 or f16 for weights and activations; the mel front end stays f32 and is cast.
import type { Engine } from '../../engine/engine';
import { conv1d, type PreparedConvWeight } from '../../engine/ops/conv';
import { add, mul, sub } from '../../engine/ops/elementwise';
import { cast, concat, pad } from '../../engine/ops/layout';
import { mean, sum } from '../../engine/ops/reduce';
import { softmax } from '../../engine/ops/softmax';
import { relu, sigmoid, sqrt, square, tanh } from '../../engine/ops/unary';
import type { Checkpoint } from '../../engine/safetensors';
import type { Tensor } from '../../engine/tensor';
import { loadConvWeight } from '../common/conv-weights';
import { loadPlain, newWeightLoader, type ComputeDType, type WeightLoader } from '../common/weights';
import type { SpeakerEncoderConfig } from './config';
import { MelFrontEnd, melMinSamples, SPEAKER_MEL } from './mel';
import { resampleAudio } from './speaker-resample';

/** AttentiveStatisticsPooling's floor under the variance before the square root. */
const STD_EPS = 1e-12;

/** nn.Conv1d(padding="same", padding_mode="reflect") with bias: `weight` prepared for the engine's conv. */
export class ReflectConv1d {
  constructor(
    readonly weight: PreparedConvWeight,
    readonly bias: Tensor,
    readonly kernelSize: number,
    readonly dilation: number,
  ) {}

  static async load(l: WeightLoader, key: string, cout: number, cin: number, k: number, dilation = 1): Promise<ReflectConv1d> {
    const weight = await loadConvWeight(l, `${key}.weight`, [cout, cin, k]);
    return new ReflectConv1d(weight, await loadPlain(l, `${key}.bias`, [cout]), k, dilation);
  }

  /** PyTorch's "same" split of dilation * (k - 1): the odd sample goes behind. */
  get padding(): [number, number] {
    const total = this.dilation * (this.kernelSize - 1);
    return [Math.floor(total / 2), total - Math.floor(total / 2)];
  }

  /** x [B, T, Cin] (any view) -> [B, T, Cout]. */
  forward(e: Engine, x: Tensor): Tensor {
    const [front, back] = this.padding;
    if (front + back === 0) return conv1d(e, x, this.weight, { bias: this.bias });
    const T = x.shape[1]!;
    if (Math.max(front, back) >= T) {
      throw new RangeError(`speaker encoder: ${T} frames are too few for reflect padding ${front}+${back} (kernel ${this.kernelSize}, dilation ${this.dilation})`);
    }
    // each step's input freed once its output exists (engine/scope.ts)
    return e.chain(() => pad(e, x, [[front, back], [0, 0]], 'reflect'), (xp) => conv1d(e, xp, this.weight, { bias: this.bias, dilation: this.dilation }));
  }

  free(): void {
    this.weight.free();
    this.bias.free();
  }
}

/** TimeDelayNetBlock: ReLU(conv(x)). */
export class TimeDelayNetBlock {
  constructor(readonly conv: ReflectConv1d) {}

  static async load(l: WeightLoader, key: string, cout: number, cin: number, k: number, dilation = 1): Promise<TimeDelayNetBlock> {
    return new TimeDelayNetBlock(await ReflectConv1d.load(l, `${key}.conv`, cout, cin, k, dilation));
  }

  forward(e: Engine, x: Tensor): Tensor {
    return e.chain(() => this.conv.forward(e, x), (y) => relu(e, y));
  }

  free(): void {
    this.conv.free();
  }
}

/** Res2NetBlock: `scale` channel chunks; chunk 0 passes, chunk 1 -> block 0, chunk i -> block i-1(chunk i + out i-1). */
export class Res2NetBlock {
  constructor(readonly blocks: TimeDelayNetBlock[], readonly scale: number) {}

  static async load(l: WeightLoader, key: string, channels: number, scale: number, k: number, dilation: number): Promise<Res2NetBlock> {
    if (channels % scale) throw new RangeError(`${key}: ${channels} channels do not split into ${scale} chunks`);
    const w = channels / scale;
    const blocks: TimeDelayNetBlock[] = [];
    for (let i = 0; i < scale - 1; i++) blocks.push(await TimeDelayNetBlock.load(l, `${key}.blocks.${i}`, w, w, k, dilation));
    return new Res2NetBlock(blocks, scale);
  }

  /** x [B, T, C] -> [B, T, C]. */
  forward(e: Engine, x: Tensor): Tensor {
    const w = x.shape[2]! / this.scale;
    const chunk = (i: number) => x.slice(2, i * w, (i + 1) * w);
    return e.scope(() => {
      // the block outputs freed once concatenated, each sum once its block has read it
      const outs: Tensor[] = [chunk(0)];
      for (let i = 1; i < this.scale; i++) {
        const block = this.blocks[i - 1]!;
        outs.push(i === 1 ? block.forward(e, chunk(1)) : e.chain(() => add(e, chunk(i), outs[i - 1]!), (input) => block.forward(e, input)));
      }
      return concat(e, outs, 2);
    });
  }

  free(): void {
    for (const b of this.blocks) b.free();
  }
}

/** SqueezeExcitationBlock: x * sigmoid(conv2(ReLU(conv1(mean_t x)))). */
export class SqueezeExcitationBlock {
  constructor(readonly conv1: ReflectConv1d, readonly conv2: ReflectConv1d) {}

  static async load(l: WeightLoader, key: string, channels: number, se: number): Promise<SqueezeExcitationBlock> {
    return new SqueezeExcitationBlock(await ReflectConv1d.load(l, `${key}.conv1`, se, channels, 1), await ReflectConv1d.load(l, `${key}.conv2`, channels, se, 1));
  }

  forward(e: Engine, x: Tensor): Tensor {
    const [B, , C] = x.shape as [number, number, number];
    return e.chain(
      () => mean(e, x.transpose(1, 2)), // [B, C]
      (m) => this.conv1.forward(e, m.reshape([B, 1, C])),
      (h) => relu(e, h),
      (hr) => this.conv2.forward(e, hr),
      (g) => sigmoid(e, g), // [B, 1, C]
      (s) => mul(e, x, s),
    );
  }

  free(): void {
    this.conv1.free();
    this.conv2.free();
  }
}

/** SqueezeExcitationRes2NetBlock: tdnn1 -> res2net -> tdnn2 -> SE, plus the input. */
export class SqueezeExcitationRes2NetBlock {
  constructor(
    readonly tdnn1: TimeDelayNetBlock,
    readonly res2net_block: Res2NetBlock,
    readonly tdnn2: TimeDelayNetBlock,
    readonly se_block: SqueezeExcitationBlock,
  ) {}

  static async load(l: WeightLoader, key: string, cin: number, cout: number, c: SpeakerEncoderConfig, i: number): Promise<SqueezeExcitationRes2NetBlock> {
    if (cin !== cout) throw new RangeError(`${key}: the residual needs ${cin} in = ${cout} out channels`);
    return new SqueezeExcitationRes2NetBlock(
      await TimeDelayNetBlock.load(l, `${key}.tdnn1`, cout, cin, 1),
      await Res2NetBlock.load(l, `${key}.res2net_block`, cout, c.res2netScale, c.kernelSizes[i]!, c.dilations[i]!),
      await TimeDelayNetBlock.load(l, `${key}.tdnn2`, cout, cout, 1),
      await SqueezeExcitationBlock.load(l, `${key}.se_block`, cout, c.seChannels),
    );
  }

  forward(e: Engine, x: Tensor): Tensor {
    return e.chain(
      () => this.tdnn1.forward(e, x),
      (a) => this.res2net_block.forward(e, a),
      (b) => this.tdnn2.forward(e, b),
      (c) => this.se_block.forward(e, c),
      (d) => add(e, d, x),
    );
  }

  free(): void {
    this.tdnn1.free();
    this.res2net_block.free();
    this.tdnn2.free();
    this.se_block.free();
  }
}

/**
 * AttentiveStatisticsPooling over all T frames (upstream's mask is all ones for one clip): per channel the mean and
 * std over time as global context, attention logits conv(tanh(tdnn([x, mean, std]))), softmax over time, then the
 * attention-weighted mean and std, concatenated: [B, T, C] -> [B, 2C].
 */
export class AttentiveStatisticsPooling {
  constructor(readonly tdnn: TimeDelayNetBlock, readonly conv: ReflectConv1d) {}

  static async load(l: WeightLoader, key: string, channels: number, attention: number): Promise<AttentiveStatisticsPooling> {
    return new AttentiveStatisticsPooling(
      await TimeDelayNetBlock.load(l, `${key}.tdnn`, attention, 3 * channels, 1),
      await ReflectConv1d.load(l, `${key}.conv`, channels, attention, 1),
    );
  }

  forward(e: Engine, x: Tensor): Tensor {
    const [B, T, C] = x.shape as [number, number, number];
    const xt = x.transpose(1, 2); // [B, C, T] view
    // Global context: uniform weights 1/T.
    return e.chain(
      () => {
        const m = mean(e, xt); // [B, C]; m and s freed once concatenated
        const s = stdAround(e, xt, m, null);
        return concat(e, [x, m.reshape([B, 1, C]).expand([B, T, C]), s.reshape([B, 1, C]).expand([B, T, C])], 2);
      },
      (ctx) => this.tdnn.forward(e, ctx),
      (h) => tanh(e, h),
      (ht) => this.conv.forward(e, ht), // logits [B, T, C]
      (logits) => softmax(e, logits.transpose(1, 2)), // w [B, C, T], softmax over time
      (w) => {
        const wm = e.chain(() => mul(e, w, xt), (wx) => sum(e, wx)); // [B, C]; wm and ws freed once concatenated
        return concat(e, [wm, stdAround(e, xt, wm, w)], 1); // [B, 2C]
      },
    );
  }

  free(): void {
    this.tdnn.free();
    this.conv.free();
  }
}

/** sqrt(max(sum_t w (x - m)^2, 1e-12)) for xt [B, C, T], m [B, C]; w [B, C, T] or null for 1/T. */
function stdAround(e: Engine, xt: Tensor, m: Tensor, w: Tensor | null): Tensor {
  return e.chain(
    () => sub(e, xt, m.unsqueeze(2)),
    (d) => square(e, d),
    (d2) => (w ? e.chain(() => mul(e, w, d2), (wd2) => sum(e, wd2)) : mean(e, d2)),
    (v) => sqrt(e, v, { min: STD_EPS }),
  );
}

/** Intermediate results upstream's golden vectors hold (channels-last; caller frees). */
export interface SpeakerEncoderTrace {
  blocks: Tensor[];
  mfa: Tensor;
  /** [B, 2C] pooled statistics. */
  asp: Tensor;
}

export interface SpeakerEncoderLoadOptions {
  /** Weights and activations (default f32). */
  dtype?: ComputeDType;
  /** Prepended to every key ("weight." in golden fixtures). Default "". */
  prefix?: string;
}

export class SpeakerEncoder {
  private constructor(
    readonly config: SpeakerEncoderConfig,
    readonly dtype: ComputeDType,
    /** blocks.0 (TDNN) then the SE-Res2Net blocks. */
    readonly blocks: readonly [TimeDelayNetBlock, ...SqueezeExcitationRes2NetBlock[]],
    readonly mfa: TimeDelayNetBlock,
    readonly asp: AttentiveStatisticsPooling,
    readonly fc: ReflectConv1d,
    /** The log-mel front end extract_speaker_embedding uses (f32 matrices on the GPU). */
    readonly mel: MelFrontEnd,
  ) {}

  static async load(e: Engine, ckpt: Checkpoint, config: SpeakerEncoderConfig, o: SpeakerEncoderLoadOptions = {}): Promise<SpeakerEncoder> {
    const c = config;
    const n = c.channels.length;
    if (n < 3 || c.kernelSizes.length !== n || c.dilations.length !== n) {
      throw new RangeError(`speaker encoder: enc_channels ${JSON.stringify(c.channels)}, kernel sizes and dilations must have the same length >= 3`);
    }
    const mfaIn = c.channels.slice(1, -1).reduce((a, b) => a + b, 0);
    if (mfaIn !== c.channels[n - 1]) {
      throw new RangeError(`speaker encoder: mfa takes the concat of blocks 1..${n - 2} (${mfaIn} channels) but enc_channels[-1] is ${c.channels[n - 1]}`);
    }
    const l = newWeightLoader(e, ckpt, o.dtype ?? 'f32');
    const p = `${o.prefix ?? ''}speaker_encoder.`;
    try {
      const first = await TimeDelayNetBlock.load(l, `${p}blocks.0`, c.channels[0]!, c.melDim, c.kernelSizes[0]!, c.dilations[0]!);
      const se: SqueezeExcitationRes2NetBlock[] = [];
      for (let i = 1; i < n - 1; i++) se.push(await SqueezeExcitationRes2NetBlock.load(l, `${p}blocks.${i}`, c.channels[i - 1]!, c.channels[i]!, c, i));
      const last = c.channels[n - 1]!;
      const mfa = await TimeDelayNetBlock.load(l, `${p}mfa`, last, last, c.kernelSizes[n - 1]!, c.dilations[n - 1]!);
      const asp = await AttentiveStatisticsPooling.load(l, `${p}asp`, last, c.attentionChannels);
      const fc = await ReflectConv1d.load(l, `${p}fc`, c.encDim, 2 * last, 1);
      return new SpeakerEncoder(c, l.dtype, [first, ...se], mfa, asp, fc, MelFrontEnd.create(e));
    } catch (err) {
      for (const t of l.loaded) t.free();
      throw err;
    }
  }

  /** Log mel [B, T, melDim] (f32 or this dtype, any view) -> embedding [B, encDim] in this dtype. */
  forward(e: Engine, mel: Tensor): Tensor {
    return e.scope(() => this.trace(e, mel).embedding); // the trace's other tensors freed with the scope
  }

  /** forward() that also returns every block's output, mfa and the pooled statistics (for golden tests). */
  trace(e: Engine, mel: Tensor): { embedding: Tensor } & SpeakerEncoderTrace {
    const c = this.config;
    if (mel.rank !== 3 || mel.shape[2] !== c.melDim) throw new RangeError(`speaker encoder: mel ${mel} must be [B, T, ${c.melDim}]`);
    if (mel.shape[1]! < this.minFrames) throw new RangeError(`speaker encoder: mel ${mel} has fewer than the ${this.minFrames} frames the reflect-padded convs need`);
    const x = mel.dtype === this.dtype ? mel : cast(e, mel, this.dtype);
    const blocks: Tensor[] = [];
    let h = x;
    for (const block of this.blocks) {
      h = block.forward(e, h);
      blocks.push(h);
    }
    if (x !== mel) x.free();
    const B = mel.shape[0]!;
    const cat = concat(e, blocks.slice(1), 2); // multi-layer feature aggregation: blocks 1..n-2
    const mfa = this.mfa.forward(e, cat);
    cat.free();
    const asp = this.asp.forward(e, mfa); // [B, 2C]
    const y = this.fc.forward(e, asp.reshape([B, 1, asp.shape[1]!])); // [B, 1, encDim]
    return { embedding: y.reshape([B, c.encDim]), blocks, mfa, asp };
  }

  free(): void {
    for (const b of this.blocks) b.free();
    this.mfa.free();
    this.asp.free();
    this.fc.free();
    this.mel.free();
  }

  /** Fewest mel frames forward() takes: every reflect padding must be shorter than the sequence. */
  get minFrames(): number {
    const c = this.config;
    const pads = c.kernelSizes.map((k, i) => Math.ceil(((k - 1) * c.dilations[i]!) / 2));
    return Math.max(1, ...pads) + 1;
  }
}

/** Fewest 24 kHz samples speakerEmbedding takes (reflect paddings of the mel and of the encoder's convs). */
export function minSpeakerSamples(enc: SpeakerEncoder): number {
  const s = SPEAKER_MEL;
  const fromFrames = (enc.minFrames - 1) * s.hop + s.nFft - 2 * Math.floor((s.nFft - s.hop) / 2);
  return Math.max(melMinSamples(), fromFrames);
}

export interface SpeakerEmbeddingOptions {
  /** dtype of the returned vector (default: the encoder's). The talker takes it in its own compute dtype. */
  dtype?: ComputeDType;
}

/**
 * The x-vector of a reference clip, as Qwen3TTSModel.create_voice_clone_prompt computes ref_spk_embedding: mono
 * samples (the caller averages channels, as upstream does) at `sampleRate`, resampled to 24 kHz when needed
 * (speaker-resample.ts; upstream uses librosa/soxr), no normalisation, then extract_speaker_embedding: log mel
 * [1, frames, 128] -> encoder -> [encDim], the vector the talker prompt puts in its speaker row.
 */
export function speakerEmbedding(e: Engine, enc: SpeakerEncoder, wav: Float32Array, sampleRate: number, o: SpeakerEmbeddingOptions = {}): Tensor {
  const rate = enc.config.sampleRate;
  if (rate !== SPEAKER_MEL.sampleRate || enc.config.melDim !== SPEAKER_MEL.nMels) {
    // extract_speaker_embedding hard-codes a 24 kHz, 128-band mel whatever the config says.
    throw new RangeError(`speakerEmbedding: the encoder wants ${rate} Hz / ${enc.config.melDim} mel bands; upstream's front end is ${SPEAKER_MEL.sampleRate} Hz / ${SPEAKER_MEL.nMels}`);
  }
  for (let i = 0; i < wav.length; i++) {
    if (!Number.isFinite(wav[i]!)) throw new RangeError(`speakerEmbedding: sample ${i} is ${wav[i]}`);
  }
  const y = sampleRate === rate ? wav : resampleAudio(wav, sampleRate, rate);
  const need = minSpeakerSamples(enc);
  if (y.length < need) {
    throw new RangeError(`speakerEmbedding: ${(y.length / rate).toFixed(3)} s of audio is too short for the speaker encoder (at least ${need} samples at ${rate} Hz)`);
  }
  const want = o.dtype ?? enc.dtype;
  return e.chain(
    () => enc.mel.runHost(e, y), // [1, frames, 128] f32
    (mel) => enc.forward(e, mel), // [1, encDim]
    (emb) => (want === emb.dtype ? emb : cast(e, emb, want)).reshape([enc.config.encDim]),
  );
}
