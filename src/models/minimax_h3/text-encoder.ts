// MiniMax H3's text encoder: the Qwen3-VL-32B decoder (checkpoint text_encoder/, keys under
// "model.language_model."), read at transformers' hidden_states[50] of 64 = the output of decoder layer 49, not
// normed. For a text-only (T2VA) request upstream (diffusers minimax_h3 encoders.py, MiniMaxH3TextEncoderStep +
// get_qwen3vl_prompt_embeds) tokenizes the prompt verbatim: no chat template, no system prompt, no special tokens;
// every row is kept (no prefix dropped) and every row is text, so the interleaved MRoPE positions are t = h = w
// = 0..L-1 (Qwen3Model's default). Only embed_tokens and layers 0..layer-1 are read from disk: never the later
// layers, the final norm, the vision tower or lm_head.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Engine } from '../../engine/engine';
import { Checkpoint } from '../../engine/safetensors';
import type { Tensor } from '../../engine/tensor';
import { parseQwen3Config, Qwen3Model, type Qwen3Config } from '../qwen3';
import type { ComputeDType } from '../qwen3/weights';

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
  ) {}

  static async load(e: Engine, ckpt: Checkpoint, config: Qwen3Config, o: H3TextEncoderOptions = {}): Promise<H3TextEncoder> {
    const layer = o.layer ?? H3_TEXT_ENCODER_LAYER;
    if (!Number.isInteger(layer) || layer < 1 || layer >= config.numLayers) {
      throw new RangeError(`H3TextEncoder: layer ${layer} must be in 1..${config.numLayers - 1} (the state after layer ${config.numLayers} is post-norm)`);
    }
    const model = await Qwen3Model.load(e, ckpt, config, { dtype: o.dtype, int8: o.int8, prefix: o.prefix, layers: layer, norm: false, embedTokens: true });
    return new H3TextEncoder(model, layer);
  }

  /** Loads from the checkpoint's text_encoder/ folder (config.json with the qwen3_vl text_config). */
  static async fromDir(e: Engine, dir: string, o: H3TextEncoderOptions = {}): Promise<H3TextEncoder> {
    const path = join(dir, 'config.json');
    const config = parseQwen3Config(JSON.parse(await readFile(path, 'utf8')), 'text', path);
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
    const { hidden } = this.model.forward({ ids, hiddenStates: [this.layer], final: false });
    return hidden.get(this.layer)!;
  }

  /** Tokenizes and encodes a T2VA prompt. */
  encodePrompt(tokenizer: PromptTokenizer, prompt: string): Tensor {
    return this.encode(H3TextEncoder.promptIds(tokenizer, prompt));
  }

  free(): void {
    this.model.free();
  }
}
