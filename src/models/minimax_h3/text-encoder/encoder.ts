// MiniMax H3's text encoder: the Qwen3-VL-32B decoder (checkpoint text_encoder/, keys under
// "model.language_model."), read at transformers' hidden_states[50] of 64 = the output of decoder layer 49, not
// normed. For a text-only (T2VA) request upstream (diffusers minimax_h3 encoders.py, MiniMaxH3TextEncoderStep +
// get_qwen3vl_prompt_embeds) tokenizes the prompt verbatim: no chat template, no system prompt, no special tokens;
// every row is kept (no prefix dropped) and every row is text, so the interleaved MRoPE positions are t = h = w
// = 0..L-1 (Qwen3Model's default). Only embed_tokens and layers 0..layer-1 are read from disk: never the later
// layers, the final norm, the vision tower or lm_head.
// A pipeline that loads the encoder for every job (and frees it before sampling) keeps its prepared weights in host
// memory (H3TextEncoderHost): the first load reads and converts / quantises them once, later loads upload that
// copy and read no checkpoint file.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Engine } from '../../../engine/engine';
import { adapterProfileOf } from '../../../engine/plan-device';
import { RowTable } from '../../../engine/row-table';
import { Checkpoint } from '../../../engine/safetensors';
import type { Tensor } from '../../../engine/tensor';
import { parseQwen3Config, Qwen3Model, type Qwen3Config } from '../../qwen3';
import { attachHostWeights, detachHostWeights, HostWeights } from '../../common/host-weights';
import type { ComputeDType } from '../../common/weights';

/** components.text_encoder_layer upstream: the hidden state that conditions the transformer. */
export const H3_TEXT_ENCODER_LAYER = 50;

/** What tokenizes a prompt the way Qwen2TokenizerFast does with add_special_tokens=False (TextTokenizer). */
export interface PromptTokenizer {
  encode(text: string): number[];
}

export interface H3TextEncoderOptions {
  /** Compute dtype (default f16). */
  dtype?: ComputeDType;
  /** Linears as weight-only int8. */
  int8?: boolean;
  /** H3TextEncoderHost: the decoder layers held in host memory and uploaded in turn while encoding (one or two on the
   * GPU at a time), for a budget the whole encoder does not fit. */
  streamLayers?: boolean;
  /** Key prefix of the decoder (default the config's, "model.language_model."). */
  prefix?: string;
  /** Which hidden state to return, transformers' numbering (default 50); must be < the config's layer count,
   * as upstream requires (hidden_states[numLayers] would be the final norm's output). */
  layer?: number;
}

export class H3TextEncoder {
  private constructor(
    readonly model: Qwen3Model,
    /** hidden_states index returned by encode(); the model holds exactly this many layers. */
    readonly layer: number,
    /** Borrowed embed_tokens (H3TextEncoderHost's, read from the file row by row) when the model has none. */
    private readonly embedTokens: RowTable | null = null,
    /** The model is H3TextEncoderHost's streamed one, kept between jobs: free() leaves it. */
    private readonly borrowed = false,
  ) {}

  static async load(e: Engine, ckpt: Checkpoint, config: Qwen3Config, o: H3TextEncoderOptions = {}): Promise<H3TextEncoder> {
    const layer = checkLayer(o.layer ?? H3_TEXT_ENCODER_LAYER, config);
    const model = await Qwen3Model.load(e, ckpt, config, { dtype: o.dtype, int8: o.int8, prefix: o.prefix, layers: layer, norm: false, embedTokens: true });
    return new H3TextEncoder(model, layer);
  }

  /** A model loaded without embed_tokens plus a borrowed host embed table (H3TextEncoderHost). */
  static withEmbedTable(model: Qwen3Model, layer: number, embed: RowTable, borrowed = false): H3TextEncoder {
    return new H3TextEncoder(model, layer, embed, borrowed);
  }

  /** Loads from the checkpoint's text_encoder/ folder (config.json with the qwen3_vl text_config). */
  static async fromDir(e: Engine, dir: string, o: H3TextEncoderOptions = {}): Promise<H3TextEncoder> {
    const config = await readTextConfig(dir);
    const ckpt = await Checkpoint.open(dir);
    try {
      return await H3TextEncoder.load(e, ckpt, config, o);
    } finally {
      await ckpt.close();
    }
  }

  /** The T2VA presentation: the prompt verbatim, no template and no special tokens added. */
  static promptIds(tokenizer: PromptTokenizer, prompt: string): number[] {
    if (typeof prompt !== 'string') throw new TypeError('H3TextEncoder: the prompt must be one string');
    const ids = tokenizer.encode(prompt);
    if (ids.length === 0) throw new RangeError('H3TextEncoder: the prompt has no tokens');
    return ids;
  }

  /** prompt_embeds (1, L, hidden) in the model's dtype: hidden_states[layer] of the token ids; the caller frees it. */
  encode(ids: ArrayLike<number>): Tensor {
    if (ids.length === 0) throw new RangeError('H3TextEncoder: no token ids');
    if (!this.embedTokens) {
      const { hidden } = this.model.forward({ ids, hiddenStates: [this.layer], final: false });
      return hidden.get(this.layer)!;
    }
    const embeds = this.embedTokens.lookup(ids, [1, ids.length]);
    try {
      const { hidden } = this.model.forward({ embeds, hiddenStates: [this.layer], final: false });
      return hidden.get(this.layer)!;
    } finally {
      embeds.free();
    }
  }

  /** The token embeddings (1, L, hidden) of `ids`: the model's embed_tokens, or the borrowed host table's rows. */
  embed(ids: ArrayLike<number>): Tensor {
    return this.embedTokens ? this.embedTokens.lookup(ids, [1, ids.length]) : this.model.embed(ids);
  }

  /** Tokenizes and encodes a T2VA prompt. */
  encodePrompt(tokenizer: PromptTokenizer, prompt: string): Tensor {
    return this.encode(H3TextEncoder.promptIds(tokenizer, prompt));
  }

  /** Frees the GPU weights (a borrowed embed table, or streamed model, stays with its H3TextEncoderHost). */
  free(): void {
    if (!this.borrowed) this.model.free();
  }
}

/** hidden_states index `layer` must come from a decoder layer, not the final norm. */
function checkLayer(layer: number, config: Qwen3Config): number {
  if (!Number.isInteger(layer) || layer < 1 || layer >= config.numLayers) {
    throw new RangeError(`H3TextEncoder: layer ${layer} must be in 1..${config.numLayers - 1} (the state after layer ${config.numLayers} is post-norm)`);
  }
  return layer;
}

/** text_encoder/config.json: the qwen3_vl text_config. */
async function readTextConfig(dir: string): Promise<Qwen3Config> {
  const path = join(dir, 'config.json');
  return parseQwen3Config(JSON.parse(await readFile(path, 'utf8')), 'text', path);
}

/** What one host copy was prepared for: a load with other options or another engine starts over. */
interface HostKept {
  e: Engine;
  dir: string;
  options: string;
  config: Qwen3Config;
  layer: number;
  /** The checkpoint of the first load, closed: its entries (names, shapes) stay, its files are shut. */
  ckpt: Checkpoint;
  host: HostWeights;
  /** embed_tokens on the host path: each lookup reads the prompt's rows through its own open descriptor. */
  embed: RowTable;
  /** streamLayers: the decoder with every layer in host memory (its kept copies stand for `host`, which stays empty). */
  streamed: Qwen3Model | null;
}

/**
 * The text encoder's prepared weights in host memory between jobs (docs/models/minimax-h3.md "Pipeline", GPU memory).
 * load() gives a fresh H3TextEncoder on the GPU each time: the first reads the checkpoint and keeps every layer
 * tensor as uploaded (compute dtype, or int8 q + f32 scales); later ones upload that copy, one write per tensor,
 * with no file read and no re-quantisation. embed_tokens (3.1 GB in f32 for the 32B) is not copied: it stays a
 * host RowTable reading only the prompt's rows from the file it opened on the first load, so it never takes GPU
 * memory and survives the folder being renamed. drop() releases the copy and that descriptor.
 */
export class H3TextEncoderHost {
  private kept: HostKept | null = null;
  /** gpuBytes() answers by options. */
  private readonly sizes = new Map<string, { bytes: number; layers: number }>();
  private droppedUploads = 0;

  /** Host bytes held by the copy (0 before the first load and after drop()). */
  get bytes(): number {
    return (this.kept?.host.bytes ?? 0) + (this.kept?.streamed?.layerOffload?.hostBytes ?? 0);
  }

  /** Streamed layers: host-to-GPU bytes uploaded by the encodings so far, dropped copies' included (a running total). */
  get streamedUploadBytes(): number {
    return this.droppedUploads + (this.kept?.streamed?.layerOffload?.uploadedBytes ?? 0);
  }

  /**
   * GPU bytes (pool size classes) load() will take with these options: the decoder layers, never embed_tokens (a host
   * table). Counted by loading on a shape-only engine standing for `e` (headers read, no bytes), once per options.
   */
  async gpuBytes(e: Engine, dir: string, o: H3TextEncoderOptions = {}): Promise<number> {
    return (await this.sized(e, dir, o)).bytes;
  }

  /** GPU bytes (pool size classes) the streamed encoder holds at most: two layers (one running, the next uploaded). */
  async streamedGpuBytes(e: Engine, dir: string, o: H3TextEncoderOptions = {}): Promise<number> {
    const { bytes, layers } = await this.sized(e, dir, o);
    return 2 * Math.ceil(bytes / layers);
  }

  private async sized(e: Engine, dir: string, o: H3TextEncoderOptions): Promise<{ bytes: number; layers: number }> {
    const key = JSON.stringify([dir, o.dtype ?? 'f16', !!o.int8, o.prefix ?? null, o.layer ?? H3_TEXT_ENCODER_LAYER]);
    const known = this.sizes.get(key);
    if (known !== undefined) return known;
    const config = await readTextConfig(dir);
    const layer = checkLayer(o.layer ?? H3_TEXT_ENCODER_LAYER, config);
    const shape = Engine.createShapeOnly(e.gpu.plannedFor ?? adapterProfileOf(e.describe(), Number.MAX_SAFE_INTEGER));
    const ckpt = await Checkpoint.open(dir);
    try {
      const model = await Qwen3Model.load(shape, ckpt, config, { dtype: o.dtype, int8: o.int8, prefix: o.prefix, layers: layer, norm: false, embedTokens: false });
      const sized = { bytes: shape.pool.stats().inUseBytes, layers: layer };
      model.free();
      this.sizes.set(key, sized);
      return sized;
    } finally {
      await ckpt.close();
      shape.destroy();
    }
  }

  /** Tensors read from the checkpoint and uploaded from the copy so far (tests, logs). */
  get counts(): { read: number; replayed: number } {
    return { ...(this.kept?.host.counts ?? { read: 0, replayed: 0 }) };
  }

  async load(e: Engine, dir: string, o: H3TextEncoderOptions = {}): Promise<H3TextEncoder> {
    // streamed and resident keep different copies: a job that switches drops the other and reads the checkpoint again
    const options = JSON.stringify([o.dtype ?? 'f16', !!o.int8, o.prefix ?? null, o.layer ?? H3_TEXT_ENCODER_LAYER, !!o.streamLayers]);
    const k = this.kept;
    if (k && (k.e !== e || k.dir !== dir || k.options !== options)) this.drop();
    if (!this.kept) return this.first(e, dir, o, options);
    const kept = this.kept;
    if (kept.streamed) return H3TextEncoder.withEmbedTable(kept.streamed, kept.layer, kept.embed, true);
    const model = await Qwen3Model.load(e, kept.ckpt, kept.config, { dtype: o.dtype, int8: o.int8, prefix: o.prefix, layers: kept.layer, norm: false, embedTokens: false });
    return H3TextEncoder.withEmbedTable(model, kept.layer, kept.embed);
  }

  /** The first load: reads the checkpoint (closed again after), filling and sealing the copy as it uploads. */
  private async first(e: Engine, dir: string, o: H3TextEncoderOptions, options: string): Promise<H3TextEncoder> {
    const config = await readTextConfig(dir);
    const layer = checkLayer(o.layer ?? H3_TEXT_ENCODER_LAYER, config);
    const ckpt = await Checkpoint.open(dir);
    const host = new HostWeights();
    let embed: RowTable | null = null;
    try {
      const name = `${o.prefix ?? config.keyPrefix}embed_tokens.weight`;
      embed = await RowTable.load(e, ckpt, name, { dtype: o.dtype ?? 'f16', shape: [config.vocabSize, config.hiddenSize], placement: 'host' });
      // streamed: each layer read, uploaded and moved to the host in turn, the model kept (no second host copy)
      if (!o.streamLayers) attachHostWeights(ckpt, host);
      const model = await Qwen3Model.load(e, ckpt, config, { dtype: o.dtype, int8: o.int8, prefix: o.prefix, layers: layer, norm: false, embedTokens: false, layersOnHost: o.streamLayers });
      host.seal();
      this.kept = { e, dir, options, config, layer, ckpt, host, embed, streamed: o.streamLayers ? model : null };
      return H3TextEncoder.withEmbedTable(model, layer, embed, !!o.streamLayers);
    } catch (err) {
      embed?.free();
      detachHostWeights(ckpt);
      host.clear();
      throw err;
    } finally {
      await ckpt.close();
    }
  }

  /** Releases the host copy and the embed table's descriptor (pipeline unload). */
  drop(): void {
    const k = this.kept;
    this.kept = null;
    if (!k) return;
    k.embed.free();
    this.droppedUploads += k.streamed?.layerOffload?.uploadedBytes ?? 0;
    k.streamed?.free();
    detachHostWeights(k.ckpt);
    k.host.clear();
  }
}
