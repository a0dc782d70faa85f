// The 12 Hz speech tokenizer's encoder, 24 kHz waveform -> codes (upstream Qwen3TTSTokenizerV2Encoder = transformers'
// MimiModel without its decoder parts; keys under "encoder." in speech_tokenizer/model.safetensors). Used for the
// reference codes of in-context voice cloning. Activations channels-last (1, L, C); real-config shapes:
//   encoder.layers   SEANet: layers.0 conv k7 1 -> 64; per stride s in 4, 5, 6, 8 (the config's upsampling_ratios
//                    reversed): a residual block (ELU, conv k3 C -> C/2, ELU, conv k1 C/2 -> C, + x), ELU, conv
//                    k 2s stride s C -> 2C; then ELU, conv k3 1024 -> 512. Causal MimiConv1d padding (zeros).
//                    (1, ceil(N / 960), 512) at 25 Hz
//   encoder_transformer  MimiTransformer (8 layers, window 250)      (1, L25, 512)
//   downsample       conv k4 stride 2, no bias, replicate padding     (1, L12.5, 512)
//   quantizer        semantic RVQ (1 layer) + acoustic RVQ (31): nearest codebook vector per layer
// encode() keeps the first encoder_valid_num_quantizers (16) codebooks and ceil(N / 1920) frames, as upstream's
// Qwen3TTSTokenizerV2Model.encode. Runs in f32 only: codes are argmins, and f16 rounding could flip close calls.
import type { Engine } from '../../../engine/engine';
import { add } from '../../../engine/ops/elementwise';
import type { Checkpoint } from '../../../engine/safetensors';
import type { TensorScope } from '../../../engine/scope';
import type { Tensor } from '../../../engine/tensor';
import { newWeightLoader, type WeightLoader } from '../../common/weights';
import type { CodecEncoderConfig, SpeechTokenizerConfig } from '../config';
import { elu } from './activations';
import { CausalConv1d } from './conv';
import { MimiRvqEncoder } from './rvq';
import { MimiTransformer } from './transformer';

/** MimiResnetBlock with one dilation pair [1, 1] (num_residual_layers 1, as every Qwen3-TTS checkpoint): block.1, block.3. */
export class MimiResnetBlock {
  constructor(
    readonly conv1: CausalConv1d,
    readonly conv2: CausalConv1d,
  ) {}

  static async load(w: WeightLoader, p: string, c: CodecEncoderConfig, dim: number): Promise<MimiResnetBlock> {
    const hidden = dim / c.compress;
    return new MimiResnetBlock(
      await CausalConv1d.load(w, `${p}block.1.`, { cin: dim, cout: hidden, k: c.residualKernelSize }),
      await CausalConv1d.load(w, `${p}block.3.`, { cin: hidden, cout: dim, k: 1 }),
    );
  }

  forward(e: Engine, x: Tensor): Tensor {
    // each step's input freed once its output exists (engine/scope.ts)
    return e.chain(
      () => elu(e, x),
      (a) => this.conv1.forward(e, a),
      (h) => elu(e, h),
      (b) => this.conv2.forward(e, b),
      (y) => add(e, x, y),
    );
  }

  free(): void {
    this.conv1.free();
    this.conv2.free();
  }
}

/** Named intermediates for golden tests: conv (SEANet output), transformer, downsample; all channels-last. */
export type CodecEncoderTrace = Map<string, Tensor>;

export class CodecEncoder {
  private constructor(
    private readonly e: Engine,
    readonly config: SpeechTokenizerConfig,
    /** encoder.layers: layers.0, then per stride [resblock, conv], then the last conv (ELUs have no weights). */
    readonly encoder: { first: CausalConv1d; stages: [MimiResnetBlock, CausalConv1d][]; last: CausalConv1d },
    readonly encoder_transformer: MimiTransformer,
    readonly downsample: CausalConv1d,
    readonly quantizer: { semantic: MimiRvqEncoder; acoustic: MimiRvqEncoder },
    /** Owns every tensor the load made: free() is its free(). */
    private readonly owner: TensorScope,
  ) {}

  /** Loads "encoder.*" (with `prefix` prepended) in f32; only the quantizer layers encode() uses are read. */
  static async load(e: Engine, ckpt: Checkpoint, cfg: SpeechTokenizerConfig, o: { prefix?: string; quantizers?: number } = {}): Promise<CodecEncoder> {
    const c = cfg.encoder;
    const p = `${o.prefix ?? ''}encoder.`;
    const nq = o.quantizers ?? cfg.encoderValidNumQuantizers;
    const nSem = c.numSemanticQuantizers;
    if (!Number.isInteger(nq) || nq < nSem || nq > c.numQuantizers) {
      throw new RangeError(`CodecEncoder.load: quantizers ${nq} not in ${nSem}..${c.numQuantizers}`);
    }
    // one owner for all the load makes (engine/scope.ts): free() frees it in one call, a failed load at once
    const { value: m, owner } = await e.owned(async () => {
      const w = newWeightLoader(e, ckpt, 'f32');
      const L = `${p}encoder.layers.`;
      const first = await CausalConv1d.load(w, `${L}0.`, { cin: 1, cout: c.numFilters, k: c.kernelSize });
      const stages: [MimiResnetBlock, CausalConv1d][] = [];
      let dim = c.numFilters;
      let idx = 1;
      for (const s of [...c.upsamplingRatios].reverse()) {
        const res = await MimiResnetBlock.load(w, `${L}${idx}.`, c, dim);
        const down = await CausalConv1d.load(w, `${L}${idx + 2}.`, { cin: dim, cout: 2 * dim, k: 2 * s, stride: s });
        stages.push([res, down]);
        dim *= 2;
        idx += 3; // resblock, ELU, conv
      }
      const last = await CausalConv1d.load(w, `${L}${idx + 1}.`, { cin: dim, cout: c.hiddenSize, k: c.lastKernelSize });
      const encoder_transformer = await MimiTransformer.load(w, c, `${p}encoder_transformer.`);
      const seanetRate = cfg.inputSampleRate / [...c.upsamplingRatios].reduce((a, b) => a * b, 1);
      // MimiModel: kernel 2 * (SEANet rate / frame rate), stride 2 (fixed upstream)
      const ratio = Math.round(seanetRate / c.frameRate);
      const downsample = await CausalConv1d.load(w, `${p}downsample.`, { cin: c.hiddenSize, cout: c.hiddenSize, k: 2 * ratio, stride: 2, bias: false, padMode: 'replicate' });
      const q = `${p}quantizer.`;
      const vqDim = ckpt.entry(`${q}semantic_residual_vector_quantizer.input_proj.weight`).shape[0]!;
      const quantizer = {
        semantic: await MimiRvqEncoder.load(w, `${q}semantic_residual_vector_quantizer.`, nSem, c.hiddenSize, c.codebookSize, vqDim),
        acoustic: await MimiRvqEncoder.load(w, `${q}acoustic_residual_vector_quantizer.`, nq - nSem, c.hiddenSize, c.codebookSize, vqDim),
      };
      return { encoder: { first, stages, last }, encoder_transformer, downsample, quantizer };
    }, 'codec encoder');
    return new CodecEncoder(e, cfg, m.encoder, m.encoder_transformer, m.downsample, m.quantizer, owner);
  }

  /** Codebooks encode() returns (the loaded quantizer layers). */
  get numQuantizers(): number {
    return this.quantizer.semantic.layers.length + this.quantizer.acoustic.layers.length;
  }

  /** waveform (1, N, 1) -> embeddings (1, frames, hidden) at 12.5 Hz; stage outputs kept in `trace`. */
  embed(wav: Tensor, trace?: CodecEncoderTrace): Tensor {
    const e = this.e;
    const { first, stages, last } = this.encoder;
    // each stage's input freed once its output exists, unless traced: a traced output is kept for the caller
    const traced = (name: string, t: Tensor) => (trace?.set(name, e.keep(t)), t);
    return e.chain(
      () => first.forward(e, wav),
      ...stages.flatMap(([res, down]) => [(h: Tensor) => res.forward(e, h), (h: Tensor) => down.forward(e, elu(e, h))]), // the ELU freed with its link
      (h) => traced('conv', last.forward(e, elu(e, h))),
      (h) => traced('transformer', this.encoder_transformer.forward(e, h)),
      (t) => traced('downsample', this.downsample.forward(e, t)),
    );
  }

  /**
   * 24 kHz mono samples -> codes, frames x numQuantizers (16) row-major, frames = ceil(N / 1920) (upstream
   * Qwen3TTSTokenizerV2Model.encode; resample other rates first).
   */
  async encode(wav: Float32Array | readonly number[], trace?: CodecEncoderTrace): Promise<{ codes: Int32Array; frames: number }> {
    if (wav.length < 1) throw new RangeError('codec encode: empty waveform');
    const e = this.e;
    // the embeddings freed when the scope ends (unless traced); its awaits are the quantizers' reads
    const { available, perLayer } = await e.scope(async () => {
      const emb = e.chain(() => e.upload(wav, [1, wav.length, 1], 'f32', 'codec encode waveform'), (x) => this.embed(x, trace));
      const rows = emb.reshape([emb.shape[1]!, emb.shape[2]!]); // (T, hidden)
      return { available: rows.shape[0]!, perLayer: [...(await this.quantizer.semantic.encode(e, rows)), ...(await this.quantizer.acoustic.encode(e, rows))] };
    });
    const frames = Math.min(available, Math.ceil(wav.length / this.config.encodeDownsampleRate));
    const nq = perLayer.length;
    const codes = new Int32Array(frames * nq);
    for (let t = 0; t < frames; t++) for (let q = 0; q < nq; q++) codes[t * nq + q] = perLayer[q]![t]!;
    return { codes, frames };
  }

  free(): void {
    this.owner.free();
  }
}
