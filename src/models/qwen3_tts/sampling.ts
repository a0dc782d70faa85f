// Token choice for Qwen3-TTS generation, as upstream's generate() processes logits (transformers 4.57 order):
//   talker (codebook 0): repetition penalty over the codebook-0 tokens generated so far, suppress_tokens = every id
//     in [vocab - 1024, vocab) except codec eos (upstream hard-codes the 1024-wide special band), eos masked while
//     fewer than min_new_tokens tokens exist, then temperature / top-k / draw (or argmax when not sampling);
//   code predictor (codebooks 1..15): temperature / top-k / draw only.
// Everything runs on the GPU through the engine's sample() op (seeded PCG keyed by (seed, step, row)). The
// picks land as int32 ids (sample's intIds) in one (maxNewTokens, groups) table owned by the TalkerSampler: row f
// is frame f's codes [c0, c1..c15]. gather() embeds an id straight from its slot, so a frame needs no readback
// until its 16 codes are read at once (readFrame); column 0 is the history the repetition penalty reads. Draw keys: frame f's talker token uses step f * groups, its codebook g uses f * groups + g,
// so every draw of a generation has its own key and the same seed gives the same codes.
// top-p is not implemented (upstream's default top_p is 1.0, i.e. off).
import type { Engine } from '../../engine/engine';
import { add } from '../../engine/ops/elementwise';
import { MAX_TOP_K, readIds, sample } from '../../engine/ops/sampling';
import type { Tensor } from '../../engine/tensor';
import type { ComputeDType } from '../common/weights';

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

/** Picks codebook-0 tokens for one generation; owns its masks, the frames' id table and output buffers (free() them). */
export class TalkerSampler {
  private readonly suppress: Tensor;
  private readonly suppressWithEos: Tensor;
  /** (maxNewTokens, groups) int32 ids: row f = frame f's codes; column 0 = the codebook-0 history. */
  readonly ids: Tensor;
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
    if (!Number.isInteger(o.maxNewTokens) || o.maxNewTokens < 1) throw new RangeError(`talker sampling: maxNewTokens ${o.maxNewTokens} must be a positive integer`);
    this.draw = drawOptions(o, vocab, 'talker sampling');
    const mask = new Float32Array(vocab);
    for (let i = Math.max(0, vocab - SPECIAL_BAND); i < vocab; i++) if (i !== eos) mask[i] = SUPPRESSED[dtype];
    this.suppress = e.upload(mask, [vocab], dtype, 'talker suppress mask');
    mask[eos] = SUPPRESSED[dtype];
    this.suppressWithEos = e.upload(mask, [vocab], dtype, 'talker suppress mask + eos');
    this.ids = e.empty([o.maxNewTokens, o.groups], 'f32', 'talker frame ids (int32)');
  }

  /**
   * logits (1, vocab) raw codec-head scores -> the next token, drawn on the GPU into ids[count, 0] (no readback).
   * Returns that slot as a (1) int32 id view for gather.
   */
  drawNext(logits: Tensor): Tensor {
    const e = this.e;
    const step = this.count;
    if (step >= this.o.maxNewTokens) throw new RangeError(`talker sampling: more than maxNewTokens ${this.o.maxNewTokens} tokens`);
    const G = this.o.groups;
    const slot = this.ids.slice(0, step, step + 1).slice(1, 0, 1).reshape([1]);
    const masked = add(e, logits.reshape([1, this.vocab]), step < this.o.minNewTokens ? this.suppressWithEos : this.suppress);
    try {
      sample(e, masked, {
        ...this.draw,
        repetitionPenalty: this.o.repetitionPenalty,
        // (1, step) view of column 0: the tokens so far, stride G
        prevTokens: step > 0 && this.o.repetitionPenalty !== 1 ? this.ids.slice(0, 0, step).slice(1, 0, 1).permute([1, 0]) : undefined,
        seed: this.o.seed,
        step: step * G,
        out: slot,
        intIds: true,
      });
    } finally {
      masked.free();
    }
    this.count++;
    return slot;
  }

  /** ids[frame, group] as a (1) int32 id view: where the code predictor's draw for that codebook goes. */
  slot(frame: number, group: number): Tensor {
    return this.ids.slice(0, frame, frame + 1).slice(1, group, group + 1).reshape([1]);
  }

  /** Frame `frame`'s ids (codebook 0 first) in one readback; only the first `n` are meaningful when it is partial. */
  async readFrame(frame: number, n = this.o.groups): Promise<number[]> {
    return Array.from(await readIds(this.e, this.ids.slice(0, frame, frame + 1).slice(1, 0, n).reshape([n])));
  }

  /** drawNext and read the token back (one readback): for callers that need the token at once. */
  async pick(logits: Tensor): Promise<number> {
    const step = this.count;
    this.drawNext(logits);
    return (await this.readFrame(step, 1))[0]!;
  }

  free(): void {
    for (const t of [this.suppress, this.suppressWithEos, this.ids]) t.free();
  }
}

/** Picks codebooks 1..15 (no penalty, no suppression). */
export class CodeSampler {
  private readonly draw: { topK: number; temperature: number };

  constructor(
    private readonly e: Engine,
    codebook: number,
    private readonly o: SamplingOptions & { seed: number; groups: number },
  ) {
    this.draw = drawOptions(o, codebook, 'code predictor sampling');
  }

  /** logits (1, codebook) of codebook `group` (1..15) in frame `frame` -> its code as an int32 id written into `out` (a (1) view), returned. */
  drawInto(logits: Tensor, frame: number, group: number, out: Tensor): Tensor {
    return sample(this.e, logits, { ...this.draw, seed: this.o.seed, step: frame * this.o.groups + group, out, intIds: true });
  }

  free(): void {}
}
