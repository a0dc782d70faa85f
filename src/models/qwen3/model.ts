// The Qwen3 decoder (transformers Qwen3Model) and the Qwen3-VL text model (Qwen3VLTextModel) in one class: they
// differ only in RoPE (1D vs interleaved MRoPE over (t, h, w) position rows) and in the VL model's deepstack
// adds. Field names mirror the checkpoint's key paths under the config's prefix ("model.",
// "model.language_model.", "talker.model."): embed_tokens, layers.N.*, norm. Loading may stop after N layers
// (MiniMax H3 reads layer 50 of 64: later layers are never read from disk).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Engine } from '../../engine/engine';
import { add } from '../../engine/ops/elementwise';
import { copy, copyInto } from '../../engine/ops/layout';
import { rmsNorm } from '../../engine/ops/norm';
import { mrope, rope1d, uploadRope } from '../../engine/rope-tables';
import { RowTable, type RowTablePlacement } from '../../engine/row-table';
import { Checkpoint } from '../../engine/safetensors';
import { fmtShape, Tensor } from '../../engine/tensor';
import { PAD_BLOCK, Qwen3KvCache, type KvCacheOptions } from './cache';
import { parseQwen3Config, type Qwen3Config } from './config';
import { Qwen3DecoderLayer, type LayerContext } from './layer';
import { loadPlain, type ComputeDType, type WeightLoader } from '../common/weights';
import { releaseToHost, type HostHeld } from '../../engine/host-held';

export interface Qwen3LoadOptions {
  /** Compute dtype of activations, norms, embeddings (and linears unless int8). Default f16. */
  dtype?: ComputeDType;
  /** Linear weights as weight-only int8 with per-channel scales, quantised at load. */
  int8?: boolean;
  /** Key prefix of the decoder in the checkpoint (default: the config's, e.g. "model.language_model."). */
  prefix?: string;
  /** Load only the first N decoder layers (default all). */
  layers?: number;
  /** Load the final norm (default: when every layer is loaded). */
  norm?: boolean;
  /** Load embed_tokens (default: when the checkpoint has it; the TTS talker has none and takes embeddings). */
  embedTokens?: boolean;
  /** Where embed_tokens lives (RowTable): default 'auto', the host when it exceeds one GPU binding. */
  embedPlacement?: RowTablePlacement;
  /** Layer streaming: each decoder layer moves to host memory as soon as it is loaded (one on the GPU at a time; the
   * host copy kept), and every forward uploads the layers in turn (streamLayers). */
  layersOnHost?: boolean;
}

/** Positions of the L new tokens, shared by the batch: one row (1D RoPE, or text under MRoPE: t = h = w), or
 * the MRoPE (t, h, w) rows. Default: cache.length + 0..L-1. */
export type Qwen3Positions = ArrayLike<number> | readonly [ArrayLike<number>, ArrayLike<number>, ArrayLike<number>];

export interface Qwen3ForwardInput {
  /** Token ids (B * L, row-major); needs embed_tokens. */
  ids?: ArrayLike<number>;
  /** Batch size B of `ids` (default 1). */
  batch?: number;
  /** Input embeddings (B, L, hidden) in the model's dtype, instead of ids (left to the caller). */
  embeds?: Tensor;
  positions?: Qwen3Positions;
  /** (L) flags for the new tokens, shared by the batch: 0 = padding, hidden from every query. */
  padMask?: ArrayLike<number>;
  /** Prefill or decode through a cache: the new tokens' keys and values are appended to it. */
  cache?: Qwen3KvCache;
  /** Qwen3-VL deepstack: after layer i (i < embeds.length), rows[j] (flat b * L + l, ascending) += embeds[i][j]. */
  deepstack?: { rows: ArrayLike<number>; embeds: readonly Tensor[] };
  /** Hidden states to return, in transformers' hidden_states numbering: i = after i decoder layers (0 =
   * embeddings), never normed (transformers' hidden_states[numLayers] is the final norm output: ask `final`). */
  hiddenStates?: readonly number[];
  /** Return the final norm's output (default true; needs every layer and the norm). */
  final?: boolean;
}

export interface Qwen3ForwardOutput {
  /** (B, L, hidden) per requested index; the caller frees them. */
  hidden: Map<number, Tensor>;
  /** (B, L, hidden) or null when not requested. */
  final: Tensor | null;
}

export class Qwen3Model {
  /** Layer streaming (Qwen3LoadOptions.layersOnHost): every layer's weights in host memory, uploaded in turn. */
  private stream: { held: HostHeld[]; prefetch: number } | null = null;

  private constructor(
    private readonly e: Engine,
    readonly config: Qwen3Config,
    readonly dtype: ComputeDType,
    /** [vocab, hidden] on the GPU, or read from the checkpoint file row by row when too big for one binding. */
    readonly embed_tokens: RowTable | null,
    readonly layers: Qwen3DecoderLayer[],
    readonly norm: Tensor | null,
  ) {}

  static async load(e: Engine, ckpt: Checkpoint, config: Qwen3Config, o: Qwen3LoadOptions = {}): Promise<Qwen3Model> {
    const dtype = o.dtype ?? 'f16';
    const p = o.prefix ?? config.keyPrefix;
    const n = o.layers ?? config.numLayers;
    if (!Number.isInteger(n) || n < 0 || n > config.numLayers) throw new RangeError(`Qwen3Model.load: layers ${n} not in 0..${config.numLayers}`);
    const w: WeightLoader = { e, ckpt, dtype, int8: !!o.int8, loaded: [] };
    let embed: RowTable | null = null;
    try {
      if (o.embedTokens ?? ckpt.has(`${p}embed_tokens.weight`)) {
        embed = await RowTable.load(e, ckpt, `${p}embed_tokens.weight`, { dtype, shape: [config.vocabSize, config.hiddenSize], placement: o.embedPlacement });
      }
      const layers: Qwen3DecoderLayer[] = [];
      const held: HostHeld[] = [];
      for (let i = 0; i < n; i++) {
        const first = w.loaded.length;
        layers.push(await Qwen3DecoderLayer.load(w, config, `${p}layers.${i}.`));
        // to the host before the next layer loads: the whole decoder is never on the GPU
        if (o.layersOnHost) held.push(await releaseToHost(e, w.loaded.slice(first).filter((t): t is Tensor => t instanceof Tensor), { keep: true }));
      }
      const norm = (o.norm ?? n === config.numLayers) ? await loadPlain(w, `${p}norm.weight`, [config.hiddenSize]) : null;
      const model = new Qwen3Model(e, config, dtype, embed, layers, norm);
      if (o.layersOnHost) model.stream = { held, prefetch: 1 };
      return model;
    } catch (err) {
      embed?.free();
      for (const t of w.loaded) t.free();
      throw err;
    }
  }

  /** Loads from a checkpoint folder with its config.json (`part` picks a nested decoder, see parseQwen3Config). */
  static async fromDir(e: Engine, dir: string, o: Qwen3LoadOptions & { part?: 'text' | 'talker' | 'code_predictor' } = {}): Promise<Qwen3Model> {
    const path = join(dir, 'config.json');
    const config = parseQwen3Config(JSON.parse(await readFile(path, 'utf8')), o.part, path);
    const ckpt = await Checkpoint.open(dir);
    try {
      return await Qwen3Model.load(e, ckpt, config, o);
    } finally {
      await ckpt.close();
    }
  }

  /** A KV cache for this model's loaded layers, in its dtype. */
  createCache(o: Omit<KvCacheOptions, 'dtype' | 'layers'>): Qwen3KvCache {
    return new Qwen3KvCache(this.e, this.config, { ...o, dtype: this.dtype, layers: this.layers.length });
  }

  /** Embedding rows for token ids (B * L) -> (B, L, hidden). */
  embed(ids: ArrayLike<number>, batch = 1): Tensor {
    return this.embed_tokens!.lookup(ids, [batch, this.checkIds(ids, batch)]);
  }

  /** Throws unless `ids` are B * L token ids in the vocabulary and embed_tokens is loaded; returns L. */
  private checkIds(ids: ArrayLike<number>, batch: number): number {
    if (!this.embed_tokens) throw new Error('Qwen3Model: embed_tokens was not loaded; pass embeds instead of ids');
    const L = ids.length / batch;
    if (!Number.isInteger(L) || L < 1) throw new RangeError(`Qwen3Model: ${ids.length} ids for batch ${batch}`);
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (!Number.isInteger(id) || id < 0 || id >= this.config.vocabSize) throw new RangeError(`Qwen3Model: token id ${id} at ${i} outside 0..${this.config.vocabSize - 1}`);
    }
    return L;
  }

  /** Records the forward pass (nothing waits); see Qwen3ForwardInput. */
  forward(input: Qwen3ForwardInput): Qwen3ForwardOutput {
    const e = this.e;
    const cfg = this.config;
    const wantFinal = input.final ?? true;
    const wanted = [...new Set(input.hiddenStates ?? [])];
    const lastNeeded = wantFinal ? cfg.numLayers : Math.max(0, ...wanted);
    for (const i of wanted) if (!Number.isInteger(i) || i < 0 || i > cfg.numLayers) throw new RangeError(`Qwen3Model: hidden state ${i} not in 0..${cfg.numLayers}`);
    if (lastNeeded > this.layers.length) throw new RangeError(`Qwen3Model: output after layer ${lastNeeded} needs ${lastNeeded} layers, ${this.layers.length} loaded`);
    if (wantFinal && !this.norm) throw new Error('Qwen3Model: the final norm was not loaded (final: false, or load norm: true)');
    if (input.cache && lastNeeded < this.layers.length) throw new RangeError(`Qwen3Model: a cached forward runs every loaded layer (${this.layers.length}); ${lastNeeded} requested`);
    if (input.cache && input.cache.layers.length !== this.layers.length) throw new RangeError(`Qwen3Model: cache has ${input.cache.layers.length} layers, model ${this.layers.length}`);

    const embeds = input.embeds;
    let B: number;
    let L: number;
    if (embeds) {
      const s = embeds.shape;
      if (input.ids) throw new RangeError('Qwen3Model: pass ids or embeds, not both');
      if (s.length !== 3 || s[2] !== cfg.hiddenSize || embeds.dtype !== this.dtype) {
        throw new RangeError(`Qwen3Model: embeds ${embeds} must be ${this.dtype}[B, L, ${cfg.hiddenSize}]`);
      }
      [B, L] = s as [number, number, number];
    } else if (input.ids) {
      B = input.batch ?? 1;
      L = this.checkIds(input.ids, B);
    } else throw new RangeError('Qwen3Model: pass ids or embeds');
    if (input.cache && input.cache.batch !== B) throw new RangeError(`Qwen3Model: cache batch ${input.cache.batch} vs input batch ${B}`);
    if (input.padMask && input.padMask.length !== L) throw new RangeError(`Qwen3Model: padMask has ${input.padMask.length} flags for ${L} tokens`);

    // the tables below are freed when this scope ends; the hidden states asked for and the final norm are returned
    return e.scope(() => {
      // slots, mask and RoPE tables shared by every layer
      let start = 0;
      let blockIds: Tensor | undefined;
      if (input.cache) ({ start, blockIds } = input.cache.append(L, input.padMask));
      else if (input.padMask && Array.from(input.padMask).some((f) => f === 0)) {
        let real = 0;
        const ids = Array.from(input.padMask, (f) => (f !== 0 ? real++ : PAD_BLOCK));
        blockIds = e.upload(ids, [L], 'f32', 'pad block ids');
      }
      const { cos, sin } = uploadRope(e, this.ropeTable(input.positions, start, L));
      const ctx: LayerContext = { cos, sin, start, blockIds };

      // A chain of layers whose links carry the hidden states asked for: layer i runs in a scope that owns its input
      // x, which it frees once the layer's output exists unless x is one of those states (the order of the frees by
      // hand). The embeddings' lookup is the first link, so they too go once layer 0 has read them; input embeds are
      // the caller's and never freed here.
      type Carry = { x: Tensor; hidden: Map<number, Tensor> };
      let run = (): Carry => {
        const x = embeds ?? this.embed_tokens!.lookup(input.ids!, [B, L]);
        return { x, hidden: new Map(wanted.includes(0) ? [[0, embeds ? copy(e, x) : x]] : []) };
      };
      for (let i = 0; i < lastNeeded; i++) {
        const inner = run;
        run = () => {
          const { x, hidden } = e.scope(inner, 'qwen3 layer input');
          const next = this.withLayer(i, lastNeeded, () => this.layers[i]!.forward(e, cfg, x, ctx, input.cache?.layers[i]));
          if (input.deepstack && i < input.deepstack.embeds.length) addRows(e, next, input.deepstack.rows, input.deepstack.embeds[i]!, i);
          if (wanted.includes(i + 1)) hidden.set(i + 1, next);
          return { x: next, hidden };
        };
      }
      const { x, hidden } = e.scope(run, 'qwen3 layers'); // x: freed with this scope unless a hidden state
      const final = wantFinal ? rmsNorm(e, x, { weight: this.norm!, eps: cfg.rmsNormEps }) : null;
      return { hidden, final };
    }, 'qwen3 forward');
  }

  /** Streamed layers: host bytes of them all, their pool bytes when on the GPU, and the uploads so far. */
  get layerOffload(): { layers: number; hostBytes: number; gpuBytes: number; uploadedBytes: number } | null {
    const s = this.stream;
    if (!s) return null;
    const sum = (f: (h: HostHeld) => number) => s.held.reduce((a, h) => a + f(h), 0);
    return { layers: s.held.length, hostBytes: sum((h) => h.bytes), gpuBytes: sum((h) => h.gpuBytes), uploadedBytes: sum((h) => h.uploadedBytes) };
  }

  /** Layer i's weights on the GPU (and `prefetch` more after it, below `end`) while `fn` records its work, given back
   * after (WebGPU's one queue orders the uploads with the work; the pool orders a buffer's reuse after its readers). */
  private withLayer<T>(i: number, end: number, fn: () => T): T {
    const s = this.stream;
    if (!s) return fn();
    for (let k = i; k <= Math.min(i + s.prefetch, end - 1); k++) s.held[k]!.restore();
    try {
      return fn();
    } finally {
      s.held[i]!.evict();
    }
  }

  private ropeTable(positions: Qwen3Positions | undefined, start: number, L: number) {
    const cfg = this.config;
    const rows = positions === undefined ? [Float64Array.from({ length: L }, (_, i) => start + i)] : isRows(positions) ? [...positions] : [positions];
    for (const r of rows) if (r.length !== L) throw new RangeError(`Qwen3Model: ${r.length} positions for ${L} tokens`);
    if (cfg.rope.kind === '1d') {
      if (rows.length !== 1) throw new RangeError('Qwen3Model: 1D RoPE takes one position row, not (t, h, w)');
      return rope1d(rows[0]!, cfg.headDim, cfg.rope.theta);
    }
    const [t, h, w] = rows.length === 3 ? rows : [rows[0]!, rows[0]!, rows[0]!];
    return mrope([t!, h!, w!], cfg.rope.section, cfg.rope.theta, cfg.rope.mode);
  }

  free(): void {
    this.embed_tokens?.free();
    for (const l of this.layers) l.free();
    this.norm?.free();
  }
}

function isRows(p: Qwen3Positions): p is readonly [ArrayLike<number>, ArrayLike<number>, ArrayLike<number>] {
  return p.length === 3 && typeof p[0] === 'object';
}

/** x (B, L, hidden) rows[j] += add[j], by runs of consecutive rows (images are contiguous token runs). */
function addRows(e: Engine, x: Tensor, rows: ArrayLike<number>, addend: Tensor, layer: number): void {
  const width = x.shape[2]!;
  const flat = x.reshape([x.shape[0]! * x.shape[1]!, width]);
  if (addend.rank !== 2 || addend.shape[0] !== rows.length || addend.shape[1] !== width || addend.dtype !== x.dtype) {
    throw new RangeError(`Qwen3Model: deepstack embeds ${addend} for layer ${layer} must be ${x.dtype}${fmtShape([rows.length, width])}`);
  }
  for (let j = 0; j < rows.length; ) {
    let n = 1;
    while (j + n < rows.length && rows[j + n] === rows[j]! + n) n++;
    const r0 = rows[j]!;
    if (!Number.isInteger(r0) || r0 < 0 || r0 + n > flat.shape[0]!) throw new RangeError(`Qwen3Model: deepstack row ${r0} outside 0..${flat.shape[0]! - 1}`);
    const dst = flat.slice(0, r0, r0 + n);
    e.scope(() => copyInto(e, add(e, dst, addend.slice(0, j, j + n)), dst)); // the sum freed once copied
    j += n;
  }
}
