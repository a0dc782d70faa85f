// The Qwen3-TTS code predictor (upstream Qwen3TTSTalkerCodePredictorModelForConditionalGeneration, keys under
// "talker.code_predictor."): per frame, from the talker's last hidden state and codebook 0, it fills codebooks
// 1..15 one at a time with its own small Qwen3 decoder (1-D RoPE, positions 0.. restarting every frame).
//   model.{layers.N.*, norm}          the decoder (src/models/qwen3), hidden h (1024 real)
//   model.codec_embedding.{0..14}     [codebook, talker hidden]: codebook i+1's embedding, in the *talker's* width
//   lm_head.{0..14}                   [codebook, h]: step j scores codebook j+1
//   small_to_mtp_projection           talker hidden -> h with bias (absent when the widths agree: 0.6B)
// A frame: prefill [past_hidden, codec_embedding_talker(c0)] (2 rows) -> lm_head[0] on the last row -> c1; then
// step j = 1..14 feeds codec_embedding[j-1](c_j) -> lm_head[j] -> c_{j+1}. Every input row is projected first.
import type { Engine } from '../../engine/engine';
import { add } from '../../engine/ops/elementwise';
import { concat, gather } from '../../engine/ops/layout';
import { linear } from '../../engine/ops/linear';
import type { Checkpoint } from '../../engine/safetensors';
import { Tensor } from '../../engine/tensor';
import { Qwen3KvCache, Qwen3Model } from '../qwen3';
import { freeLinear, loadLinear, loadPlain, type ComputeDType, type LinearWeight, type WeightLoader } from '../common/weights';
import type { TalkerConfig } from './talker';

/**
 * Chooses codebook `group`'s code (1..15) from its logits (1, codebook) on the GPU (see sampling.ts) and returns
 * it as a (1) int32 id tensor (sample's intIds) for the next embedding lookup; it must stay valid for the frame.
 */
export type CodePicker = (logits: Tensor, group: number) => Promise<Tensor> | Tensor;

/** talker.code_predictor.model: decoder layers + norm, and the 15 codebook embeddings (talker width). */
export class CodePredictorModel {
  constructor(
    readonly decoder: Qwen3Model,
    readonly codec_embedding: Tensor[],
  ) {}

  get layers() {
    return this.decoder.layers;
  }

  get norm() {
    return this.decoder.norm;
  }

  free(): void {
    this.decoder.free();
    for (const t of this.codec_embedding) t.free();
  }
}

export class Qwen3TtsCodePredictor {
  private constructor(
    private readonly e: Engine,
    readonly config: TalkerConfig,
    readonly model: CodePredictorModel,
    readonly lm_head: LinearWeight[],
    readonly small_to_mtp_projection: { weight: LinearWeight; bias: Tensor } | null,
  ) {}

  /** `prefix` is prepended to the checkpoint keys (talker.code_predictor.*). */
  static async load(e: Engine, ckpt: Checkpoint, config: TalkerConfig, o: { dtype?: ComputeDType; int8?: boolean; prefix?: string } = {}): Promise<Qwen3TtsCodePredictor> {
    const dtype = o.dtype ?? 'f16';
    const root = o.prefix ?? '';
    const p = `${root}talker.code_predictor.`;
    const w: WeightLoader = { e, ckpt, dtype, int8: !!o.int8, loaded: [] };
    let decoder: Qwen3Model | null = null;
    try {
      const cfg = config.codePredictor;
      const H = config.talker.hiddenSize;
      const groups = cfg.numCodeGroups - 1;
      decoder = await Qwen3Model.load(e, ckpt, cfg, { dtype, int8: o.int8, prefix: `${root}${cfg.keyPrefix}`, embedTokens: false });
      const embeddings: Tensor[] = [];
      for (let i = 0; i < groups; i++) embeddings.push(await loadPlain(w, `${p}model.codec_embedding.${i}.weight`, [config.codebookSize, H]));
      const heads: LinearWeight[] = [];
      for (let i = 0; i < groups; i++) heads.push(await loadLinear(w, `${p}lm_head.${i}.weight`, [config.codebookSize, cfg.hiddenSize]));
      const hasProjection = ckpt.has(`${p}small_to_mtp_projection.weight`);
      if (!hasProjection && cfg.hiddenSize !== H) throw new Error(`Qwen3TtsCodePredictor: ${p}small_to_mtp_projection.weight is missing (talker hidden ${H}, predictor ${cfg.hiddenSize})`);
      const projection = hasProjection
        ? { weight: await loadLinear(w, `${p}small_to_mtp_projection.weight`, [cfg.hiddenSize, H]), bias: await loadPlain(w, `${p}small_to_mtp_projection.bias`, [cfg.hiddenSize]) }
        : null;
      return new Qwen3TtsCodePredictor(e, config, new CodePredictorModel(decoder, embeddings), heads, projection);
    } catch (err) {
      for (const t of w.loaded) t.free();
      decoder?.free();
      throw err;
    }
  }

  /** A KV cache for one frame (2 prefill rows + 14 steps); predict() resets it. */
  createCache(): Qwen3KvCache {
    return this.model.decoder.createCache({ capacity: this.config.codePredictor.numCodeGroups });
  }

  /** codec_embedding[group - 1] rows of `codes` (host ids, or int32 ids on the GPU) -> (n, talker hidden), group 1..15. */
  embedCodes(group: number, codes: ArrayLike<number> | Tensor): Tensor {
    const table = this.model.codec_embedding[group - 1];
    if (!table) throw new RangeError(`Qwen3TtsCodePredictor: codebook ${group} not in 1..${this.model.codec_embedding.length}`);
    if (!(codes instanceof Tensor)) checkIds(`codebook ${group} code`, codes, this.config.codebookSize); // GPU ids: sampled in range
    return gather(this.e, table, codes);
  }

  /** One code's embedding as a (1, 1, talker hidden) row (code: a host id or a (1) int32 id tensor). */
  embedCode(group: number, code: number | Tensor): Tensor {
    return this.embedCodes(group, code instanceof Tensor ? code : [code]).reshape([1, 1, this.config.talker.hiddenSize]);
  }

  /** small_to_mtp_projection (or the identity): (1, L, talker hidden) -> (1, L, h). A new tensor either way. */
  project(x: Tensor): Tensor {
    if (!this.small_to_mtp_projection) return add(this.e, x, 0);
    return linear(this.e, x, this.small_to_mtp_projection.weight, this.small_to_mtp_projection.bias);
  }

  /**
   * Fills codebooks 1..15 of one frame. pastHidden: the talker's last normed hidden state (1, 1, H); code0Embed:
   * codec_embedding(c0) (1, 1, H); `pick` turns each step's logits (1, codebook) into a code id on the GPU, which
   * the next step embeds there: no readback (the caller reads the codes where pick wrote them). With `sum`
   * (1, 1, H), returns sum + the 15 new codes' embeddings (the talker's next input needs them; `sum` is left to the
   * caller). codes: the id tensors pick returned, codebook 1 first.
   */
  async predict(pastHidden: Tensor, code0Embed: Tensor, cache: Qwen3KvCache, pick: CodePicker, sum?: Tensor): Promise<{ codes: Tensor[]; sum: Tensor | null }> {
    const e = this.e;
    const groups = this.config.codePredictor.numCodeGroups - 1;
    const h = this.config.codePredictor.hiddenSize;
    cache.reset();
    const codes: Tensor[] = [];
    let acc: Tensor | null = null;
    let input: Tensor | null = concat(e, [pastHidden, code0Embed], 1); // (1, 2, H), then (1, 1, H)
    try {
      for (let j = 0; j < groups; j++) {
        // the step's projection and decoder output freed once the logits exist (a synchronous scope: the loop that
        // awaits pick stays unscoped, engine/scope.ts)
        const logits = e.scope(() => {
          const x = this.project(input!);
          input!.free();
          input = null;
          const { final } = this.model.decoder.forward({ embeds: x, cache });
          const L = x.shape[1]!;
          return linear(e, final!.slice(1, L - 1, L).reshape([1, h]), this.lm_head[j]!);
        });
        let code: Tensor;
        try {
          code = await pick(logits, j + 1);
        } finally {
          logits.free();
        }
        codes.push(code);
        const emb = this.embedCode(j + 1, code);
        if (sum) {
          const next: Tensor = add(e, acc ?? sum, emb);
          acc?.free();
          acc = next;
        }
        if (j + 1 < groups) input = emb;
        else emb.free();
      }
      return { codes, sum: acc };
    } catch (err) {
      acc?.free();
      throw err;
    } finally {
      input?.free();
    }
  }

  free(): void {
    this.model.free();
    for (const h of this.lm_head) freeLinear(h);
    if (this.small_to_mtp_projection) {
      freeLinear(this.small_to_mtp_projection.weight);
      this.small_to_mtp_projection.bias.free();
    }
  }
}

/** Throws unless every id is an integer in [0, size). */
export function checkIds(what: string, ids: ArrayLike<number>, size: number): void {
  if (ids.length === 0) throw new RangeError(`Qwen3-TTS: no ${what}s`);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (!Number.isInteger(id) || id < 0 || id >= size) throw new RangeError(`Qwen3-TTS: ${what} ${id} at ${i} outside 0..${size - 1}`);
  }
}
