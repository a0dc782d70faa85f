// The 12 Hz speech tokenizer's decoder, codes -> 24 kHz waveform (upstream Qwen3TTSTokenizerV2Decoder, keys under
// "decoder." in speech_tokenizer/model.safetensors). Field names follow the keys. Activations are channels-last
// (1, T, C) throughout; shapes below are the real config's (T frames, 1920 samples per frame).
//   quantizer        SplitRvqDecoder                      codes (T, 16) -> (1, T, 512)
//   pre_conv         causal conv k3 512 -> 1024          (1, T, 1024)
//   pre_transformer  CodecDecoderTransformer              (1, T, 1024)
//   upsample.{0,1}   [causal ConvTranspose k2 s2, ConvNeXt block]   (1, 2T, 1024), (1, 4T, 1024)
//   decoder.0        causal conv k7 1024 -> 1536         (1, 4T, 1536)
//   decoder.{1..4}   DecoderBlock: SnakeBeta, causal ConvTranspose k 2r stride r (C -> C/2), 3 residual units
//                    (dilation 1, 3, 9); r = 8, 5, 4, 3                (1, 1920T, 96) after the last
//   decoder.5, .6    SnakeBeta, causal conv k7 96 -> 1; then clamp to [-1, 1]
// decode() runs upstream's chunked_decode: chunks of 300 frames, each with up to 25 frames of left context whose
// samples are dropped (so very long inputs fit and the result matches upstream's decode() exactly).
import type { Engine } from '../../../engine/engine';
import { maximum, minimum } from '../../../engine/ops/elementwise';
import { linear } from '../../../engine/ops/linear';
import { layerNorm } from '../../../engine/ops/norm';
import type { Checkpoint } from '../../../engine/safetensors';
import type { TensorScope } from '../../../engine/scope';
import type { Tensor } from '../../../engine/tensor';
import { loadPlain, newWeightLoader, type ComputeDType, type WeightLoader } from '../../common/weights';
import type { CodecDecoderConfig, SpeechTokenizerConfig } from '../config';
import { SnakeBeta } from './activations';
import { CausalConv1d, CausalConvTranspose1d } from './conv';
import { SplitRvqDecoder } from './rvq';
import { CodecDecoderTransformer } from './transformer';
import { loadPointwise } from './weights';

/** Upstream Qwen3TTSTokenizerV2ConvNeXtBlock: x + gamma * pwconv2(gelu(pwconv1(LayerNorm(dwconv(x))))). */
export class ConvNeXtBlock {
  constructor(
    /** Causal depthwise conv k7. */
    readonly dwconv: CausalConv1d,
    readonly norm: { weight: Tensor; bias: Tensor },
    readonly pwconv1: { weight: Tensor; bias: Tensor },
    readonly pwconv2: { weight: Tensor; bias: Tensor },
    readonly gamma: Tensor,
  ) {}

  static async load(w: WeightLoader, p: string, dim: number): Promise<ConvNeXtBlock> {
    const pair = async (name: string, shape: number[]) => ({
      weight: await loadPlain(w, `${p}${name}.weight`, shape),
      bias: await loadPlain(w, `${p}${name}.bias`, [shape[0]!]),
    });
    return new ConvNeXtBlock(
      await CausalConv1d.load(w, `${p}dwconv.`, { cin: dim, cout: dim, k: 7, groups: dim }),
      await pair('norm', [dim]),
      await pair('pwconv1', [4 * dim, dim]),
      await pair('pwconv2', [dim, 4 * dim]),
      await loadPlain(w, `${p}gamma`, [dim]),
    );
  }

  forward(e: Engine, x: Tensor): Tensor {
    // each step's input freed once its output exists (engine/scope.ts)
    return e.chain(
      () => this.dwconv.forward(e, x),
      (d) => layerNorm(e, d, { ...this.norm, eps: 1e-6 }),
      (n) => linear(e, n, this.pwconv1.weight, this.pwconv1.bias, { act: 'gelu_erf' }),
      (h) => linear(e, h, this.pwconv2.weight, this.pwconv2.bias, { gate: this.gamma, residual: x }),
    );
  }

  free(): void {
    this.dwconv.free();
    for (const t of [this.norm.weight, this.norm.bias, this.pwconv1.weight, this.pwconv1.bias, this.pwconv2.weight, this.pwconv2.bias, this.gamma]) t.free();
  }
}

/** Qwen3TTSTokenizerV2DecoderDecoderResidualUnit: x + conv2(act2(conv1(act1(x)))), conv1 causal k7 dilated, conv2 k1
 * (a linear over channels, so the residual add rides in its GEMM epilogue). */
export class DecoderResidualUnit {
  constructor(
    readonly act1: SnakeBeta,
    readonly conv1: CausalConv1d,
    readonly act2: SnakeBeta,
    /** conv2.conv.weight [C, C, 1] as a linear weight [C, C], conv2.conv.bias [C]. */
    readonly conv2: { weight: Tensor; bias: Tensor },
  ) {}

  static async load(w: WeightLoader, p: string, dim: number, dilation: number): Promise<DecoderResidualUnit> {
    return new DecoderResidualUnit(
      await SnakeBeta.load(w, `${p}act1.`, dim),
      await CausalConv1d.load(w, `${p}conv1.`, { cin: dim, cout: dim, k: 7, dilation }),
      await SnakeBeta.load(w, `${p}act2.`, dim),
      { weight: await loadPointwise(w, `${p}conv2.conv.weight`, dim, dim), bias: await loadPlain(w, `${p}conv2.conv.bias`, [dim]) },
    );
  }

  forward(e: Engine, x: Tensor): Tensor {
    return e.chain(
      () => this.act1.forward(e, x),
      (a) => this.conv1.forward(e, a),
      (c) => this.act2.forward(e, c),
      (b) => linear(e, b, this.conv2.weight, this.conv2.bias, { residual: x }),
    );
  }

  free(): void {
    for (const m of [this.act1, this.conv1, this.act2]) m.free();
    this.conv2.weight.free();
    this.conv2.bias.free();
  }
}

/** Qwen3TTSTokenizerV2DecoderDecoderBlock: block.0 SnakeBeta, block.1 causal ConvTranspose, block.2..4 residual units. */
export class DecoderBlock {
  constructor(readonly block: [SnakeBeta, CausalConvTranspose1d, DecoderResidualUnit, DecoderResidualUnit, DecoderResidualUnit]) {}

  static async load(w: WeightLoader, p: string, inDim: number, outDim: number, rate: number): Promise<DecoderBlock> {
    return new DecoderBlock([
      await SnakeBeta.load(w, `${p}block.0.`, inDim),
      await CausalConvTranspose1d.load(w, `${p}block.1.`, inDim, outDim, 2 * rate, rate),
      await DecoderResidualUnit.load(w, `${p}block.2.`, outDim, 1),
      await DecoderResidualUnit.load(w, `${p}block.3.`, outDim, 3),
      await DecoderResidualUnit.load(w, `${p}block.4.`, outDim, 9),
    ]);
  }

  forward(e: Engine, x: Tensor): Tensor {
    const [act, up, ...units] = this.block;
    return e.chain(
      () => act.forward(e, x),
      (a) => up.forward(e, a),
      ...units.map((u) => (h: Tensor) => u.forward(e, h)),
    );
  }

  free(): void {
    for (const m of this.block) m.free();
  }
}

export interface CodecDecodeOptions {
  /** Frames per forward (upstream chunked_decode: 300). */
  chunkSize?: number;
  /** Frames of left context recomputed before each chunk and dropped (upstream: 25). */
  leftContext?: number;
}

/** Named intermediates of one forward, channels-last, for golden tests: rvq, pre_conv, transformer, upsample.i,
 * decoder.i (the last before the clamp). */
export type CodecDecoderTrace = Map<string, Tensor>;

export class CodecDecoder {
  private constructor(
    private readonly e: Engine,
    readonly config: CodecDecoderConfig,
    readonly samplesPerFrame: number,
    readonly dtype: ComputeDType,
    readonly quantizer: SplitRvqDecoder,
    readonly pre_conv: CausalConv1d,
    readonly pre_transformer: CodecDecoderTransformer,
    readonly upsample: [CausalConvTranspose1d, ConvNeXtBlock][],
    /** decoder.0 conv, decoder.1..n blocks, decoder.n+1 SnakeBeta, decoder.n+2 conv. */
    readonly decoder: { conv_in: CausalConv1d; blocks: DecoderBlock[]; act_out: SnakeBeta; conv_out: CausalConv1d },
    /** Owns every tensor the load made (weights, prepared convs): free() is its free(). */
    private readonly owner: TensorScope,
  ) {}

  /**
   * Loads "decoder.*" from speech_tokenizer/model.safetensors (`prefix` is prepended: a golden fixture's "weight.").
   * dtype: compute dtype (default f32; f16 halves memory and bandwidth).
   */
  static async load(e: Engine, ckpt: Checkpoint, cfg: SpeechTokenizerConfig | CodecDecoderConfig, o: { dtype?: ComputeDType; prefix?: string } = {}): Promise<CodecDecoder> {
    const c = 'decoder' in cfg ? cfg.decoder : cfg;
    const samplesPerFrame = [...c.upsamplingRatios, ...c.upsampleRates].reduce((a, b) => a * b, 1);
    const p = `${o.prefix ?? ''}decoder.`;
    // one owner for all the load makes (engine/scope.ts): free() frees it in one call, a failed load at once
    const { value: m, owner } = await e.owned(async () => {
      const w = newWeightLoader(e, ckpt, o.dtype ?? 'f32');
      const quantizer = await SplitRvqDecoder.load(w, c, `${p}quantizer.`);
      const pre_conv = await CausalConv1d.load(w, `${p}pre_conv.`, { cin: c.codebookDim, cout: c.latentDim, k: 3 });
      const pre_transformer = await CodecDecoderTransformer.load(w, c, `${p}pre_transformer.`);
      const upsample: [CausalConvTranspose1d, ConvNeXtBlock][] = [];
      for (const [i, r] of c.upsamplingRatios.entries()) {
        upsample.push([
          await CausalConvTranspose1d.load(w, `${p}upsample.${i}.0.`, c.latentDim, c.latentDim, r, r),
          await ConvNeXtBlock.load(w, `${p}upsample.${i}.1.`, c.latentDim),
        ]);
      }
      const conv_in = await CausalConv1d.load(w, `${p}decoder.0.`, { cin: c.latentDim, cout: c.decoderDim, k: 7 });
      const blocks: DecoderBlock[] = [];
      for (const [i, r] of c.upsampleRates.entries()) {
        blocks.push(await DecoderBlock.load(w, `${p}decoder.${i + 1}.`, c.decoderDim >> i, c.decoderDim >> (i + 1), r));
      }
      const n = c.upsampleRates.length;
      const outDim = c.decoderDim >> n;
      const act_out = await SnakeBeta.load(w, `${p}decoder.${n + 1}.`, outDim);
      const conv_out = await CausalConv1d.load(w, `${p}decoder.${n + 2}.`, { cin: outDim, cout: 1, k: 7 });
      return { dtype: w.dtype, quantizer, pre_conv, pre_transformer, upsample, decoder: { conv_in, blocks, act_out, conv_out } };
    }, 'codec decoder');
    return new CodecDecoder(e, c, samplesPerFrame, m.dtype, m.quantizer, m.pre_conv, m.pre_transformer, m.upsample, m.decoder, owner);
  }

  /**
   * One forward on codes (T, numQuantizers) row-major (all in range) -> waveform (1, T * samplesPerFrame, 1) in
   * [-1, 1]. With `trace`, the stage outputs are kept there (the caller frees them).
   */
  forward(codes: ArrayLike<number>, frames: number, trace?: CodecDecoderTrace): Tensor {
    const e = this.e;
    // each stage's input freed once its output exists, unless traced: a traced output is kept for the caller
    const traced = (name: string, t: Tensor) => (trace?.set(name, e.keep(t)), t);
    const n = this.decoder.blocks.length;
    return e.chain(
      () => traced('rvq', this.quantizer.decode(e, codes, frames).unsqueeze(0)), // (1, T, codebook_dim)
      (h) => traced('pre_conv', this.pre_conv.forward(e, h)),
      (h) => traced('transformer', this.pre_transformer.forward(e, h)),
      ...this.upsample.flatMap(([up, block], i) => [(h: Tensor) => up.forward(e, h), (h: Tensor) => traced(`upsample.${i}`, block.forward(e, h))]),
      (h) => traced('decoder.0', this.decoder.conv_in.forward(e, h)),
      ...this.decoder.blocks.map((block, i) => (h: Tensor) => traced(`decoder.${i + 1}`, block.forward(e, h))),
      (h) => traced(`decoder.${n + 2}`, this.decoder.conv_out.forward(e, this.decoder.act_out.forward(e, h))), // the activation freed with the link
      (h) => maximum(e, h, -1),
      (lo) => minimum(e, lo, 1),
    );
  }

  /**
   * Codes -> mono float waveform at the output rate (24 kHz), as upstream Qwen3TTSTokenizerV2Model.decode: codes
   * are frames x numQuantizers (an Int32Array/number[] row-major, or one array per frame); negative codes count as
   * padding (clamped to 0 for the forward; frames whose codebook-0 code is negative are cut from the end).
   */
  async decode(codes: ArrayLike<number> | readonly (readonly number[])[], frames?: number, o: CodecDecodeOptions = {}): Promise<Float32Array> {
    const parts: Float32Array[] = [];
    for await (const part of this.decodeChunks(codes, frames, o)) parts.push(part);
    const out = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }

  /** decode() one chunk at a time (streaming): yields each chunk's samples as soon as it is computed. */
  async *decodeChunks(codes: ArrayLike<number> | readonly (readonly number[])[], frames?: number, o: CodecDecodeOptions = {}): AsyncGenerator<Float32Array> {
    const nq = this.config.numQuantizers;
    const flat = flatCodes(codes, nq, frames);
    const T = flat.length / nq;
    let valid = 0;
    for (let t = 0; t < T; t++) if (flat[t * nq]! > -1) valid++;
    const samples = valid * this.samplesPerFrame;
    for (let i = 0; i < flat.length; i++) if (flat[i]! < 0) flat[i] = 0;
    const context = o.leftContext ?? 25;
    const chunk = Math.min(o.chunkSize ?? 300, this.maxFramesPerForward() - context);
    if (!Number.isInteger(chunk) || chunk < 1 || !Number.isInteger(context) || context < 0) {
      throw new RangeError(`codec decode: chunkSize ${o.chunkSize ?? 300} must be >= 1 and leftContext ${context} >= 0, and ` +
        `a chunk plus its context must fit the adapter's binding limit (${this.maxFramesPerForward()} frames)`);
    }
    let emitted = 0;
    for (let start = 0; start < T && emitted < samples; ) {
      const end = Math.min(start + chunk, T);
      const ctx = start - context > 0 ? context : start; // upstream's rule
      // the chunk's waveform freed once read back (a scope whose one await is that read)
      const all = await this.e.scope(async () => this.e.read(this.forward(flat.subarray((start - ctx) * nq, end * nq), end - start + ctx)));
      const piece = all.subarray(ctx * this.samplesPerFrame, Math.min(all.length, ctx * this.samplesPerFrame + samples - emitted));
      emitted += piece.length;
      yield piece;
      start = end;
    }
  }

  /** The most frames one forward can take: its largest activation (a conv-stack stage, samples x channels) must
   * fit one binding (128 MiB on lavapipe, 2 GiB on real GPUs). decode() shrinks its chunks to this. */
  maxFramesPerForward(): number {
    const c = this.config;
    const bytes = this.dtype === 'f16' ? 2 : 4;
    let rate = c.upsamplingRatios.reduce((a, b) => a * b, 1);
    let perFrame = rate * Math.max(4 * c.latentDim, c.decoderDim) * bytes; // ConvNeXt MLP, decoder.0
    c.upsampleRates.forEach((r, i) => {
      rate *= r;
      perFrame = Math.max(perFrame, rate * (c.decoderDim >> (i + 1)) * bytes);
    });
    return Math.max(1, Math.floor(this.e.pool.maxBindingBytes / perFrame) - 1);
  }

  free(): void {
    this.owner.free();
  }
}

/** Codes as a fresh Int32Array (frames x nq), from flat values or one array per frame. */
function flatCodes(codes: ArrayLike<number> | readonly (readonly number[])[], nq: number, frames?: number): Int32Array {
  let flat: Int32Array;
  if (codes.length > 0 && Array.isArray(codes[0])) {
    const rows = codes as readonly (readonly number[])[];
    rows.forEach((r, t) => {
      if (r.length !== nq) throw new RangeError(`codec decode: frame ${t} has ${r.length} codes, expected ${nq}`);
    });
    flat = Int32Array.from(rows.flat());
  } else flat = Int32Array.from(codes as ArrayLike<number>);
  const T = flat.length / nq;
  if (!Number.isInteger(T) || T < 1) throw new RangeError(`codec decode: ${flat.length} codes are not a whole number (>= 1) of ${nq}-code frames`);
  if (frames !== undefined && frames !== T) throw new RangeError(`codec decode: ${flat.length} codes for ${frames} frames of ${nq}`);
  return flat;
}
