// The Qwen3-TTS talker (upstream Qwen3TTSTalkerForConditionalGeneration, checkpoint keys under "talker."): a Qwen3
// decoder over summed text + codec embeddings with interleaved 3-axis RoPE, and a codec head that scores codebook 0
// (plus the special codec ids). Fields mirror the checkpoint:
//   talker.model.{layers.N.*, norm}     the decoder (src/models/qwen3)
//   talker.model.codec_embedding        [vocab, hidden]: codebook 0 and the special codec ids
//   talker.model.text_embedding         [text_vocab, text_hidden]
//   talker.text_projection.linear_fc{1,2}  text_hidden -> text_hidden -> hidden (SiLU between, biases)
//   talker.codec_head                   [vocab, hidden], no bias
//   talker.code_predictor.*             codebooks 1..15 (code-predictor.ts)
import type { Engine } from '../../engine/engine';
import { gather } from '../../engine/ops/layout';
import { linear } from '../../engine/ops/linear';
import { RowTable, type RowTablePlacement } from '../../engine/row-table';
import type { Checkpoint } from '../../engine/safetensors';
import { Tensor } from '../../engine/tensor';
import { Qwen3KvCache, Qwen3Model, type Qwen3Positions } from '../qwen3';
import { freeLinear, loadLinear, loadPlain, type ComputeDType, type LinearWeight, type WeightLoader } from '../common/weights';
import { checkIds, Qwen3TtsCodePredictor } from './code-predictor';
import type { Qwen3TtsConfig } from './config';

/** What the talker and the code predictor read from config.json (parseQwen3TtsConfig). */
export type TalkerConfig = Pick<Qwen3TtsConfig, 'talker' | 'codePredictor' | 'codebookSize'>;

export interface TalkerLoadOptions {
  /** Compute dtype (activations, norms, embeddings; linears unless int8). Default f16. */
  dtype?: ComputeDType;
  /** Decoder and head linears as weight-only int8 (per-channel scales). */
  int8?: boolean;
  /** Prepended to every checkpoint key ("weight." in golden fixtures). Default "". */
  prefix?: string;
  /** Parts to load (default all): a golden fixture of one component holds only its tensors. */
  codecEmbedding?: boolean;
  text?: boolean;
  codePredictor?: boolean;
  /** Where text_embedding lives (RowTable): default 'auto', the host when it exceeds one GPU binding (its
   * 151936 x 2048 rows are 593 MiB in f16, over lavapipe's 128 MiB). */
  textEmbeddingPlacement?: RowTablePlacement;
}

/** talker.text_projection (Qwen3TTSTalkerResizeMLP): linear_fc2(silu(linear_fc1(x))), both with bias. */
export class TextProjection {
  constructor(
    readonly linear_fc1: { weight: LinearWeight; bias: Tensor },
    readonly linear_fc2: { weight: LinearWeight; bias: Tensor },
  ) {}

  static async load(w: WeightLoader, p: string, textHidden: number, hidden: number): Promise<TextProjection> {
    return new TextProjection(
      { weight: await loadLinear(w, `${p}linear_fc1.weight`, [textHidden, textHidden]), bias: await loadPlain(w, `${p}linear_fc1.bias`, [textHidden]) },
      { weight: await loadLinear(w, `${p}linear_fc2.weight`, [hidden, textHidden]), bias: await loadPlain(w, `${p}linear_fc2.bias`, [hidden]) },
    );
  }

  /** x (..., text_hidden) -> (..., hidden). */
  forward(e: Engine, x: Tensor): Tensor {
    return e.chain(
      () => linear(e, x, this.linear_fc1.weight, this.linear_fc1.bias, { act: 'silu' }),
      (h) => linear(e, h, this.linear_fc2.weight, this.linear_fc2.bias), // h freed once this exists (engine/scope.ts)
    );
  }

  free(): void {
    freeLinear(this.linear_fc1.weight);
    this.linear_fc1.bias.free();
    freeLinear(this.linear_fc2.weight);
    this.linear_fc2.bias.free();
  }
}

/** talker.model: the decoder's layers and norm (a Qwen3Model without embed_tokens) and the two embedding tables. */
export class TalkerModel {
  constructor(
    /** layers.N.*, norm. */
    readonly decoder: Qwen3Model,
    /** codec_embedding.weight [vocab, hidden], or null when not loaded. */
    readonly codec_embedding: Tensor | null,
    /** text_embedding.weight [text_vocab, text_hidden] (GPU or file-backed, see RowTable), or null when not loaded. */
    readonly text_embedding: RowTable | null,
  ) {}

  get layers() {
    return this.decoder.layers;
  }

  get norm() {
    return this.decoder.norm;
  }

  free(): void {
    this.decoder.free();
    this.codec_embedding?.free();
    this.text_embedding?.free();
  }
}

export interface TalkerForwardInput {
  /** (1, L, hidden) in the talker's dtype: summed text + codec embeddings (left to the caller). */
  embeds: Tensor;
  /** Prefill or decode through a KV cache (createCache). */
  cache?: Qwen3KvCache;
  /** (t, h, w) rows or one row for all three; default cache.length + 0..L-1 on every axis (what upstream does). */
  positions?: Qwen3Positions;
  /** Codec-head logits for the last position only (decoding); default every position. */
  lastOnly?: boolean;
  /** Hidden states to return as well (0 = the embeddings, i = after i layers). */
  hiddenStates?: readonly number[];
}

export interface TalkerForwardOutput {
  /** (1, L, hidden) after the final norm (upstream's past_hidden is its last row). */
  hidden: Tensor;
  /** (1, L, vocab), or (1, 1, vocab) with lastOnly. */
  logits: Tensor;
  /** The requested hidden states (caller frees). */
  states: Map<number, Tensor>;
}

export class Qwen3TtsTalker {
  private constructor(
    /** The engine the weights live on. */
    readonly engine: Engine,
    readonly config: TalkerConfig,
    readonly dtype: ComputeDType,
    readonly model: TalkerModel,
    readonly text_projection: TextProjection | null,
    readonly codec_head: LinearWeight,
    readonly code_predictor: Qwen3TtsCodePredictor | null,
  ) {}

  /** Loads the talker from a checkpoint holding the upstream keys (talker.*), with a parsed or raw config. */
  static async load(e: Engine, ckpt: Checkpoint, config: TalkerConfig, o: TalkerLoadOptions = {}): Promise<Qwen3TtsTalker> {
    const t = config.talker;
    const dtype = o.dtype ?? 'f16';
    const root = o.prefix ?? '';
    const p = `${root}talker.`;
    const w: WeightLoader = { e, ckpt, dtype, int8: !!o.int8, loaded: [] };
    const owned: { free(): void }[] = [];
    let textEmbedding: RowTable | null = null;
    try {
      const H = t.hiddenSize;
      const decoder = await Qwen3Model.load(e, ckpt, t, { dtype, int8: o.int8, prefix: `${root}${t.keyPrefix}`, embedTokens: false });
      owned.push(decoder);
      const codecEmbedding = (o.codecEmbedding ?? true) ? await loadPlain(w, `${p}model.codec_embedding.weight`, [t.vocabSize, H]) : null;
      const text = o.text ?? true;
      if (text) {
        textEmbedding = await RowTable.load(e, ckpt, `${p}model.text_embedding.weight`, { dtype, shape: [t.textVocabSize, t.textHiddenSize], placement: o.textEmbeddingPlacement });
      }
      const projection = text ? await TextProjection.load(w, `${p}text_projection.`, t.textHiddenSize, H) : null;
      const head = await loadLinear(w, `${p}codec_head.weight`, [t.vocabSize, H]);
      const predictor = (o.codePredictor ?? true) ? await Qwen3TtsCodePredictor.load(e, ckpt, config, { dtype, int8: o.int8, prefix: root }) : null;
      return new Qwen3TtsTalker(e, config, dtype, new TalkerModel(decoder, codecEmbedding, textEmbedding), projection, head, predictor);
    } catch (err) {
      textEmbedding?.free();
      for (const t of w.loaded) t.free();
      for (const m of owned) m.free();
      throw err;
    }
  }

  /** A KV cache for the talker decoder holding `capacity` positions (prompt + generated frames). */
  createCache(capacity: number): Qwen3KvCache {
    return this.model.decoder.createCache({ capacity });
  }

  /** Records the decoder and the codec head (nothing waits). */
  forward(input: TalkerForwardInput): TalkerForwardOutput {
    const e = this.engine;
    const s = input.embeds.shape;
    if (s.length !== 3 || s[0] !== 1) throw new RangeError(`Qwen3TtsTalker: embeds ${input.embeds} must be (1, L, ${this.config.talker.hiddenSize})`);
    const out = this.model.decoder.forward({ embeds: input.embeds, cache: input.cache, positions: input.positions, hiddenStates: input.hiddenStates, final: true });
    const hidden = out.final!;
    const L = s[1]!;
    const rows = input.lastOnly ? hidden.slice(1, L - 1, L) : hidden;
    const logits = linear(e, rows, this.codec_head);
    return { hidden, logits, states: out.hidden };
  }

  /** codec_embedding rows for codec ids -> (n, hidden). */
  embedCodec(ids: ArrayLike<number> | Tensor): Tensor {
    if (!this.model.codec_embedding) throw new Error('Qwen3TtsTalker: codec_embedding was not loaded');
    if (!(ids instanceof Tensor)) checkIds('codec id', ids, this.config.talker.vocabSize); // GPU ids: sampled in range
    return gather(this.engine, this.model.codec_embedding, ids);
  }

  /** text_projection(text_embedding(ids)) -> (n, hidden): the text part of a prompt row. */
  embedText(ids: ArrayLike<number>): Tensor {
    if (!this.model.text_embedding || !this.text_projection) throw new Error('Qwen3TtsTalker: the text embedding was not loaded');
    checkIds('text id', ids, this.config.talker.textVocabSize);
    const projection = this.text_projection;
    return this.engine.chain(() => this.model.text_embedding!.lookup(ids), (x) => projection.forward(this.engine, x));
  }

  free(): void {
    this.model.free();
    this.text_projection?.free();
    freeLinear(this.codec_head);
    this.code_predictor?.free();
  }
}
