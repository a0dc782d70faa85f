// Krea 2's prompt encoder (krea-ai/krea-2 encoder.py, Qwen3VLConditioner) on our Qwen3Model: Qwen3-VL-4B-Instruct's
// language model, text only. Its decoder lives under "model.language_model." (Qwen3VLForConditionalGeneration's keys).
//
//   template   "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, text,
//              spatial relationships of the objects and background:<|im_end|>\n<|im_start|>user\n" + prompt, tokenized
//              as one string and cut to max_length + 34 - 5 tokens (512 -> 541: the prompt keeps at most 507 tokens
//              after the 34 of the prefix, the rest is silently dropped, as upstream does), then the suffix
//              "<|im_end|>\n<|im_start|>assistant\n" tokenized on its own (5 tokens). No BOS.
//   taps       hidden_states[i] for i in select_layers (2, 5, ..., 35): the residual stream after decoder layer i, before
//              the final norm (layer 36 and the norm are never needed, so they are not loaded)
//   output     (1, L - 34, n, hidden): the first 34 rows (the prefix) dropped, the rest in order.
// Upstream pads [prefix + prompt] on the right to 541 tokens before appending the suffix and runs the model with the
// attention mask and the positions transformers 4.57 derives from it (pads take no position); the real rows equal
// this unpadded run with positions 0..L-1, and the pad rows are masked out of everything downstream (text-fusion.ts),
// so they are never computed here. The prefix count 34 is upstream's constant (not measured on the tokenizer): the
// tokens dropped are the first 34 of the joint encoding, whatever they are.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Engine } from '../../engine/engine';
import { copyInto } from '../../engine/ops/layout';
import { Checkpoint } from '../../engine/safetensors';
import type { Tensor } from '../../engine/tensor';
import { parseQwen3Config, Qwen3Model, type Qwen3Config, type Qwen3LoadOptions } from '../qwen3';
import { TextTokenizer } from '../tokenizer';

export const KREA2_TEMPLATE_PREFIX =
  '<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, text, spatial relationships of the objects and background:<|im_end|>\n<|im_start|>user\n';
export const KREA2_TEMPLATE_SUFFIX = '<|im_end|>\n<|im_start|>assistant\n';
/** Rows dropped from the front (encoder.py prompt_template_encode_start_idx). */
export const KREA2_PREFIX_TOKENS = 34;
/** encoder.py prompt_template_encode_suffix_start_idx: the suffix's length as the padding arithmetic counts it. */
export const KREA2_SUFFIX_TOKENS = 5;
/** TextEncoderConfig.max_length. */
export const KREA2_MAX_LENGTH = 512;
/** TextEncoderConfig.select_layers: every third hidden state from 2 to 35. */
export const KREA2_SELECT_LAYERS: readonly number[] = [2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35];

export interface Krea2PromptTokens {
  /** The real tokens: [prefix + prompt (truncated) | suffix]. */
  ids: number[];
  /** Leading rows dropped from the output (34). */
  drop: number;
  /** Prompt tokens cut by the length limit (0 when it fits). */
  truncated: number;
}

/** Tokenizes the template as encoder.py does (see the header). */
export function krea2PromptTokens(tok: Pick<TextTokenizer, 'encode'>, prompt: string, maxLength = KREA2_MAX_LENGTH): Krea2PromptTokens {
  const limit = maxLength + KREA2_PREFIX_TOKENS - KREA2_SUFFIX_TOKENS;
  const head = tok.encode(KREA2_TEMPLATE_PREFIX + prompt);
  const suffix = tok.encode(KREA2_TEMPLATE_SUFFIX);
  const kept = head.slice(0, limit);
  if (kept.length + suffix.length <= KREA2_PREFIX_TOKENS) throw new RangeError(`krea2: the template has ${kept.length + suffix.length} tokens, no more than the ${KREA2_PREFIX_TOKENS} dropped`);
  return { ids: [...kept, ...suffix], drop: KREA2_PREFIX_TOKENS, truncated: head.length - kept.length };
}

export interface Krea2ConditionerOptions extends Omit<Qwen3LoadOptions, 'layers' | 'norm'> {
  tokenizer?: TextTokenizer;
  selectLayers?: readonly number[];
  maxLength?: number;
}

export class Krea2Conditioner {
  constructor(
    private readonly e: Engine,
    /** The decoder up to the last selected layer, without the final norm. */
    readonly model: Qwen3Model,
    readonly tokenizer: TextTokenizer | null,
    readonly selectLayers: readonly number[] = KREA2_SELECT_LAYERS,
    readonly maxLength = KREA2_MAX_LENGTH,
  ) {}

  static async load(e: Engine, ckpt: Checkpoint, config: Qwen3Config, o: Krea2ConditionerOptions = {}): Promise<Krea2Conditioner> {
    const { tokenizer, selectLayers = KREA2_SELECT_LAYERS, maxLength = KREA2_MAX_LENGTH, ...load } = o;
    if (selectLayers.length === 0 || selectLayers.some((i) => !Number.isInteger(i) || i < 0 || i >= config.numLayers)) {
      throw new RangeError(`Krea2Conditioner: select_layers [${selectLayers}] must be hidden states 0..${config.numLayers - 1} (before the final norm)`);
    }
    const layers = Math.max(...selectLayers);
    const model = await Qwen3Model.load(e, ckpt, config, { ...load, layers, norm: false });
    return new Krea2Conditioner(e, model, tokenizer ?? null, selectLayers, maxLength);
  }

  /** `dir`: the text encoder folder (config.json of qwen3_vl, weights); the tokenizer from `tokenizerDir` (default dir). */
  static async fromDir(e: Engine, dir: string, o: Omit<Krea2ConditionerOptions, 'tokenizer'> & { tokenizerDir?: string } = {}): Promise<Krea2Conditioner> {
    const { tokenizerDir, ...rest } = o;
    const path = join(dir, 'config.json');
    const config = parseQwen3Config(JSON.parse(await readFile(path, 'utf8')), 'text', path);
    const tokenizer = await TextTokenizer.fromDir(tokenizerDir ?? dir);
    const ckpt = await Checkpoint.open(dir);
    try {
      return await Krea2Conditioner.load(e, ckpt, config, { ...rest, tokenizer });
    } finally {
      await ckpt.close();
    }
  }

  get hiddenSize(): number {
    return this.model.config.hiddenSize;
  }

  /** The fusion's input for a prompt: (1, L - 34, n, hidden) in the model's dtype; the caller frees it. */
  encode(prompt: string): Tensor {
    if (!this.tokenizer) throw new Error('Krea2Conditioner: no tokenizer loaded; use encodeIds');
    const { ids, drop } = krea2PromptTokens(this.tokenizer, prompt, this.maxLength);
    return this.encodeIds(ids, drop);
  }

  /** The taps of the rows drop.. of a tokenized template: (1, L - drop, n, hidden). */
  encodeIds(ids: ArrayLike<number>, drop = KREA2_PREFIX_TOKENS): Tensor {
    const L = ids.length;
    if (!Number.isInteger(drop) || drop < 0 || drop >= L) throw new RangeError(`Krea2Conditioner: drop ${drop} of ${L} tokens`);
    const H = this.hiddenSize;
    const n = this.selectLayers.length;
    const out = this.model.forward({ ids, hiddenStates: [...this.selectLayers], final: false });
    try {
      const taps = this.e.empty([1, L - drop, n, H], this.model.dtype, 'krea2 text taps');
      this.selectLayers.forEach((layer, i) => {
        const h = out.hidden.get(layer)!; // (1, L, H)
        copyInto(this.e, h.slice(1, drop, L).reshape([1, L - drop, 1, H]), taps.slice(2, i, i + 1));
      });
      return taps;
    } finally {
      for (const t of out.hidden.values()) t.free();
    }
  }

  free(): void {
    this.model.free();
  }
}
