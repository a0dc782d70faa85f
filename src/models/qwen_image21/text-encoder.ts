// Qwen-Image-2.1's prompt encoder: diffusers' QwenImage21Pipeline._get_qwen_prompt_embeds (text-to-image path,
// pipeline_qwenimage21.py at c245e42d) on our Qwen3Model. Qwen3-VL-8B's text decoder lives under
// "model.language_model." (Qwen3VLForConditionalGeneration's keys).
//
//   prompt -> "<|im_start|>system\n{SYS}<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
//          -> ids (L) -> decoder -> the last decoder layer's output *before* the final norm (L, hidden)
//          -> drop the system turn's tokens -> conditioning (L - drop, hidden)          (hidden = 4096 for 8B)
//
// Upstream takes `hidden_states[-1]`, which transformers 4.57 (what the checkpoint is tuned to) returns un-normed;
// 5.x norms it. drop = the token count of the system turn alone (upstream: apply_chat_template on the system
// message, which renders the same string). The template is a raw string, not the chat template (they tokenize
// differently, per upstream). Upstream pads a batch on the right and keeps each prompt's unpadded rows; the
// decoder is causal and text positions count real tokens only, so encoding each prompt on its own gives the same
// rows (the golden batch case checks that). Reference images (vision tower, <|image_pad|> slots) are not built.
import type { Engine } from '../../engine/engine';
import { copy } from '../../engine/ops/layout';
import type { Checkpoint } from '../../engine/safetensors';
import type { Tensor } from '../../engine/tensor';
import { Qwen3Model, type Qwen3Config, type Qwen3LoadOptions } from '../qwen3';
import type { TextTokenizer } from '../tokenizer';

export const QWEN_IMAGE21_SYSTEM_PROMPT = 'Comprehend and analyze the provided prompt.';

/** The system turn whose tokens are dropped from the hidden states. */
export function qwenImage21SystemTurn(): string {
  return `<|im_start|>system\n${QWEN_IMAGE21_SYSTEM_PROMPT}<|im_end|>\n`;
}

/** The text-to-image template around a prompt (the prompt is inserted verbatim). */
export function qwenImage21PromptText(prompt: string): string {
  return `${qwenImage21SystemTurn()}<|im_start|>user\n${prompt}<|im_end|>\n<|im_start|>assistant\n`;
}

export interface QwenImage21PromptTokens {
  /** Ids of the whole template (L). */
  ids: number[];
  /** Leading tokens (the system turn) left out of the conditioning. */
  drop: number;
}

/** Tokenizes the template; the system turn must tokenize to a prefix of it (it ends at a special token). */
export function qwenImage21PromptTokens(tok: TextTokenizer, prompt: string): QwenImage21PromptTokens {
  const ids = tok.encode(qwenImage21PromptText(prompt));
  const sys = tok.encode(qwenImage21SystemTurn());
  if (sys.length >= ids.length || sys.some((id, i) => ids[i] !== id)) {
    throw new Error('QwenImage21TextEncoder: the system turn does not tokenize to a prefix of the template');
  }
  return { ids, drop: sys.length };
}

export class QwenImage21TextEncoder {
  constructor(
    private readonly e: Engine,
    /** The decoder; its final norm is never used (load with norm: false). */
    readonly model: Qwen3Model,
    readonly tokenizer: TextTokenizer | null = null,
  ) {}

  /** Loads every decoder layer without the final norm (the conditioning is taken before it). */
  static async load(e: Engine, ckpt: Checkpoint, config: Qwen3Config, o: Omit<Qwen3LoadOptions, 'layers' | 'norm'> & { tokenizer?: TextTokenizer } = {}): Promise<QwenImage21TextEncoder> {
    const { tokenizer, ...load } = o;
    const model = await Qwen3Model.load(e, ckpt, config, { ...load, norm: false });
    return new QwenImage21TextEncoder(e, model, tokenizer ?? null);
  }

  /** `dir` holds config.json (qwen3_vl) and the weights; the tokenizer comes from its own folder. */
  static async fromDir(e: Engine, dir: string, o: Omit<Qwen3LoadOptions, 'layers' | 'norm'> & { tokenizer?: TextTokenizer } = {}): Promise<QwenImage21TextEncoder> {
    const { tokenizer, ...load } = o;
    const model = await Qwen3Model.fromDir(e, dir, { ...load, norm: false, part: 'text' });
    return new QwenImage21TextEncoder(e, model, tokenizer ?? null);
  }

  get hiddenSize(): number {
    return this.model.config.hiddenSize;
  }

  /** Conditioning of one templated sequence: (ids.length - drop, hidden) in the model's dtype; the caller frees it. */
  encodeIds(ids: ArrayLike<number>, drop: number): Tensor {
    const L = ids.length;
    if (!Number.isInteger(drop) || drop < 0 || drop >= L) throw new RangeError(`QwenImage21TextEncoder: drop ${drop} of ${L} tokens`);
    const n = this.model.config.numLayers;
    const out = this.model.forward({ ids, hiddenStates: [n], final: false });
    const h = out.hidden.get(n)!; // (1, L, hidden), before the final norm
    try {
      return copy(this.e, h.reshape([L, this.hiddenSize]).slice(0, drop, L));
    } finally {
      h.free();
    }
  }

  /** Conditioning of a prompt (L, hidden); needs the tokenizer. */
  encode(prompt: string): Tensor {
    if (!this.tokenizer) throw new Error('QwenImage21TextEncoder: no tokenizer loaded; use encodeIds');
    const { ids, drop } = qwenImage21PromptTokens(this.tokenizer, prompt);
    return this.encodeIds(ids, drop);
  }

  free(): void {
    this.model.free();
  }
}
