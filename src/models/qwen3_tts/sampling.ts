// Token choice for Qwen3-TTS generation, as upstream's generate() processes logits (transformers 4.57 order):
//   talker (codebook 0): repetition penalty over the codebook-0 tokens generated so far, suppress_tokens = every id
//     in [vocab - 1024, vocab) except codec eos (upstream hard-codes the 1024-wide special band), eos masked while
//     fewer than min_new_tokens tokens exist, then temperature / top-k / draw (or argmax when not sampling);
//   code predictor (codebooks 1..15): temperature / top-k / draw only.
// Everything runs on the GPU through the engine's sample() op (seeded PCG keyed by (seed, step, row)); one f32
// readback per token. Draw keys: frame f's talker token uses step f * groups, its codebook g uses f * groups + g,
// so every draw of a generation has its own key and the same seed gives the same codes.
// top-p is not implemented (upstream's default top_p is 1.0, i.e. off).
import type { Engine } from '../../engine/engine';
import { add } from '../../engine/ops/elementwise';
import { MAX_TOP_K, sample } from '../../engine/ops/sampling';
import type { Tensor } from '../../engine/tensor';
import type { ComputeDType } from '../qwen3/weights';

export interface SamplingOptions {
  /** false: greedy argmax (upstream do_sample / subtalker_dosample). */
  doSample: boolean;
  temperature: number;
  /** 1..64 (capped at the vocabulary size, which means no cut). */
  topK: number;
}

export interface TalkerSamplingOptions extends SamplingOptions {
  /** HF repetition penalty on the codebook-0 tokens generated so far (1 = none). */
  repetitionPenalty: number;
}

/** generation_config.json of the released checkpoints. */
export const UPSTREAM_SAMPLING: { talker: TalkerSamplingOptions; subtalker: SamplingOptions } = {
  talker: { doSample: true, temperature: 0.9, topK: 50, repetitionPenalty: 1.05 },
  subtalker: { doSample: true, temperature: 0.9, topK: 50 },
};

/** Width of the special-id band at the top of the talker vocabulary that upstream suppresses (all but eos). */
export const SPECIAL_BAND = 1024;

/** A suppressed logit: far below any real logit, yet finite so sums and the penalty stay finite in f16. */
const SUPPRESSED = { f32: -1e30, f16: -30000 } as const;

function drawOptions(o: SamplingOptions, vocab: number, what: string): { topK: number; temperature: number } {
  if (!o.doSample) return { topK: 1, temperature: 0 };
  if (!(o.temperature > 0)) throw new RangeError(`${what}: temperature ${o.temperature} must be > 0 when sampling`);
  if (!Number.isInteger(o.topK) || o.topK < 1) throw new RangeError(`${what}: top_k ${o.topK} must be a positive integer`);
  const topK = Math.min(o.topK, vocab);
  if (topK > MAX_TOP_K) throw new RangeError(`${what}: top_k ${o.topK} over the engine's limit ${MAX_TOP_K}`);
  return { topK, temperature: o.temperature };
}

/** Picks codebook-0 tokens for one generation; owns its masks, history and output buffers (free() them). */
export class TalkerSampler {
  private readonly suppress: Tensor;
  private readonly suppressWithEos: Tensor;
  /** f32 ids of the tokens generated so far (history for the repetition penalty). */
  private readonly history: Tensor;
  private readonly token: Tensor;
  private readonly draw: { topK: number; temperature: number };
  /** Tokens picked so far. */
  count = 0;

  constructor(
    private readonly e: Engine,
    dtype: ComputeDType,
    private readonly vocab: number,
    private readonly eos: number,
    private readonly o: TalkerSamplingOptions & { seed: number; groups: number; minNewTokens: number; maxNewTokens: number },
  ) {
    if (!(o.repetitionPenalty > 0)) throw new RangeError(`talker sampling: repetition_penalty ${o.repetitionPenalty} must be > 0`);
    this.draw = drawOptions(o, vocab, 'talker sampling');
    const mask = new Float32Array(vocab);
    for (let i = Math.max(0, vocab - SPECIAL_BAND); i < vocab; i++) if (i !== eos) mask[i] = SUPPRESSED[dtype];
    this.suppress = e.upload(mask, [vocab], dtype, 'talker suppress mask');
    mask[eos] = SUPPRESSED[dtype];
    this.suppressWithEos = e.upload(mask, [vocab], dtype, 'talker suppress mask + eos');
    this.history = e.empty([Math.max(1, o.maxNewTokens)], 'f32', 'talker token history');
    this.token = e.empty([1], 'f32', 'talker token');
  }

  /** logits (1, vocab) raw codec-head scores -> the next token (also recorded in the history). */
  async pick(logits: Tensor): Promise<number> {
    const e = this.e;
    const step = this.count;
    const masked = add(e, logits.reshape([1, this.vocab]), step < this.o.minNewTokens ? this.suppressWithEos : this.suppress);
    try {
      sample(e, masked, {
        ...this.draw,
        repetitionPenalty: this.o.repetitionPenalty,
        prevTokens: step > 0 && this.o.repetitionPenalty !== 1 ? this.history.slice(0, 0, step) : undefined,
        seed: this.o.seed,
        step: step * this.o.groups,
        out: this.token,
      });
    } finally {
      masked.free();
    }
    const token = (await e.read(this.token))[0]!;
    if (step < this.history.shape[0]!) e.writeBytes(this.history, step * 4, new Uint8Array(Float32Array.of(token).buffer));
    this.count++;
    return token;
  }

  free(): void {
    for (const t of [this.suppress, this.suppressWithEos, this.history, this.token]) t.free();
  }
}

/** Picks codebooks 1..15 (no penalty, no suppression). */
export class CodeSampler {
  private readonly token: Tensor;
  private readonly draw: { topK: number; temperature: number };

  constructor(
    private readonly e: Engine,
    codebook: number,
    private readonly o: SamplingOptions & { seed: number; groups: number },
  ) {
    this.draw = drawOptions(o, codebook, 'code predictor sampling');
    this.token = e.empty([1], 'f32', 'code token');
  }

  /** logits (1, codebook) of codebook `group` (1..15) in frame `frame` -> its code. */
  async pick(logits: Tensor, frame: number, group: number): Promise<number> {
    sample(this.e, logits, { ...this.draw, seed: this.o.seed, step: frame * this.o.groups + group, out: this.token });
    return (await this.e.read(this.token))[0]!;
  }

  free(): void {
    this.token.free();
  }
}
