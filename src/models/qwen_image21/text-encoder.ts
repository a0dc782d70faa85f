// Qwen-Image-2.1's prompt encoder: diffusers' QwenImage21Pipeline._get_qwen_prompt_embeds (pipeline_qwenimage21.py
// at 0a1f3676, as merged with huggingface/diffusers#14804) on our Qwen3Model, plus the Qwen3-VL vision tower for
// reference images. Qwen3-VL-8B's text decoder lives under "model.language_model.", the tower under "model.visual."
// (Qwen3VLForConditionalGeneration's keys).
//
//   text-to-image: "<|im_start|>system\n{SYS}<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
//   N references:  ... user\n<image1><|vision_start|><|image_pad|><|vision_end|> <image2><|vision_start|><|image_pad|>
//                  <|vision_end|>{prompt}<|im_end|>\n ...        (blocks joined by one space; ComfyUI's form too)
//   an empty prompt is " " (Qwen has no bos token: an empty string would leave the encoder nothing to read)
//   -> ids, each <|image_pad|> expanded to its image's merged-token count (H/32)(W/32) (the processor's job)
//   -> embed_tokens, the tower's merged tokens written over the image rows, deepstack features added to the image
//      rows after the first decoder layers, 3D MRoPE positions (get_rope_index)
//   -> the last decoder layer's output *before* the final norm (L, hidden)
//   -> drop the system turn's tokens -> conditioning (L - drop, hidden), image rows kept   (hidden = 4096 for 8B)
//
// Upstream takes `hidden_states[-1]` with a forward hook that returns the final norm's input (transformers 4.57, which
// the checkpoint is tuned to, returns it un-normed; 5.x norms it). drop = the token count of the system turn alone
// (upstream: apply_chat_template on the system message, which renders the same string: 14 tokens). The template is a
// raw string, not the chat template (they tokenize differently, per upstream). Upstream pads a batch on the left and
// keeps each prompt's unpadded rows; the decoder is causal and text positions count real tokens only, so encoding
// each prompt on its own gives the same rows (the golden batch case checks that).
// The prompt goes in verbatim after the reference blocks: the service's "Picture N" is the user's own wording for the
// N-th reference, whose block the model sees labelled <imageN> (docs/models/qwen-image-2.1.md, "Prompt template").
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Engine } from '../../engine/engine';
import { copy, copyInto } from '../../engine/ops/layout';
import { Checkpoint } from '../../engine/safetensors';
import type { Tensor } from '../../engine/tensor';
import type { ImageTensor } from '../../media/types';
import { parseQwen3Config, Qwen3Model, type Qwen3Config, type Qwen3ForwardInput, type Qwen3LoadOptions } from '../qwen3';
import {
  imagePatches,
  parseQwen3VlImageProcessorConfig,
  parseQwen3VlVisionConfig,
  QWEN3_VL_IMAGE_PROCESSOR,
  qwen3VlRopeIndex,
  Qwen3VlVisionModel,
  type Qwen3VlImageProcessorConfig,
  type Qwen3VlVisionConfig,
  type VisionInput,
} from '../qwen3_vl_vision';
import type { TextTokenizer } from '../tokenizer';

export const QWEN_IMAGE21_SYSTEM_PROMPT = 'Comprehend and analyze the provided prompt.';
/** VAE / transformer pixels per latent token side: a reference's img_shapes entry is (1, H/16, W/16). */
const LATENT_SCALE = 16;

/** The system turn whose tokens are dropped from the hidden states. */
export function qwenImage21SystemTurn(): string {
  return `<|im_start|>system\n${QWEN_IMAGE21_SYSTEM_PROMPT}<|im_end|>\n`;
}

/** The vision blocks before the prompt for `references` images ('' for none). */
export function qwenImage21ReferenceBlocks(references: number): string {
  if (!Number.isInteger(references) || references < 0) throw new RangeError(`qwenImage21ReferenceBlocks: ${references} references`);
  return Array.from({ length: references }, (_, i) => `<image${i + 1}><|vision_start|><|image_pad|><|vision_end|>`).join(' ');
}

/** The template around a prompt (inserted verbatim; an empty one as " "), with one vision block per reference image. */
export function qwenImage21PromptText(prompt: string, references = 0): string {
  return `${qwenImage21SystemTurn()}<|im_start|>user\n${qwenImage21ReferenceBlocks(references)}${prompt || ' '}<|im_end|>\n<|im_start|>assistant\n`;
}

export interface QwenImage21PromptTokens {
  /** Ids of the whole template (L), one <|image_pad|> per reference (not yet expanded). */
  ids: number[];
  /** Leading tokens (the system turn) left out of the conditioning. */
  drop: number;
}

/** Tokenizes the template; the system turn must tokenize to a prefix of it (it ends at a special token). */
export function qwenImage21PromptTokens(tok: TextTokenizer, prompt: string, references = 0): QwenImage21PromptTokens {
  const ids = tok.encode(qwenImage21PromptText(prompt, references));
  const sys = tok.encode(qwenImage21SystemTurn());
  if (sys.length >= ids.length || sys.some((id, i) => ids[i] !== id)) {
    throw new Error('QwenImage21TextEncoder: the system turn does not tokenize to a prefix of the template');
  }
  return { ids, drop: sys.length };
}

/** Each of the N image tokens in `ids` becomes counts[i] copies (the processor's placeholder expansion). */
export function expandImagePads(ids: ArrayLike<number>, imageTokenId: number, counts: readonly number[]): number[] {
  const out: number[] = [];
  let image = 0;
  for (let i = 0; i < ids.length; i++) {
    if (ids[i] !== imageTokenId) {
      out.push(ids[i]!);
      continue;
    }
    const n = counts[image++];
    if (n === undefined) throw new RangeError(`QwenImage21TextEncoder: more <|image_pad|> tokens in the prompt than the ${counts.length} reference images`);
    for (let k = 0; k < n; k++) out.push(imageTokenId);
  }
  if (image !== counts.length) throw new RangeError(`QwenImage21TextEncoder: ${counts.length} reference images but ${image} <|image_pad|> tokens in the prompt`);
  return out;
}

/** What the transformer and its joint sequence need from one prompt. */
export interface QwenImage21Conditioning {
  /** (L, hidden) in the model's dtype (text rows and one row per reference slot); the caller frees it. */
  embeds: Tensor;
  /** (L) true where the row is an <|image_pad|> slot: upstream's image_pad_mask (imageMaskWithTarget's encoderSlots). */
  imagePadMask: boolean[];
  /** Per reference: its img_shapes entry (1, H/16, W/16), latent tokens = 4 per slot. */
  referenceShapes: [number, number, number][];
}

export interface QwenImage21VisionParts {
  model: Qwen3VlVisionModel;
  processor: Qwen3VlImageProcessorConfig;
}

type EncoderLoadOptions = Omit<Qwen3LoadOptions, 'layers' | 'norm'> & { tokenizer?: TextTokenizer };

export class QwenImage21TextEncoder {
  constructor(
    private readonly e: Engine,
    /** The decoder; its final norm is never used (load with norm: false). */
    readonly model: Qwen3Model,
    readonly tokenizer: TextTokenizer | null = null,
    /** The vision tower for reference images (null: text-to-image only). */
    readonly vision: QwenImage21VisionParts | null = null,
  ) {}

  /**
   * Loads every decoder layer without the final norm (the conditioning is taken before it), and with `vision` the
   * tower (same dtype / int8 choice) for reference images.
   */
  static async load(
    e: Engine,
    ckpt: Checkpoint,
    config: Qwen3Config,
    o: EncoderLoadOptions & { vision?: { config: Qwen3VlVisionConfig; prefix?: string; processor?: Qwen3VlImageProcessorConfig } } = {},
  ): Promise<QwenImage21TextEncoder> {
    const { tokenizer, vision, ...load } = o;
    const model = await Qwen3Model.load(e, ckpt, config, { ...load, norm: false });
    if (!vision) return new QwenImage21TextEncoder(e, model, tokenizer ?? null);
    try {
      if (vision.config.outHiddenSize !== config.hiddenSize) throw new RangeError(`QwenImage21TextEncoder: vision out_hidden_size ${vision.config.outHiddenSize} vs text hidden ${config.hiddenSize}`);
      const tower = await Qwen3VlVisionModel.load(e, ckpt, vision.config, { dtype: load.dtype, int8: load.int8, prefix: vision.prefix });
      return new QwenImage21TextEncoder(e, model, tokenizer ?? null, { model: tower, processor: vision.processor ?? QWEN3_VL_IMAGE_PROCESSOR });
    } catch (err) {
      model.free();
      throw err;
    }
  }

  /**
   * `dir` holds config.json (qwen3_vl) and the weights; the tokenizer comes from its own folder. `references: true`
   * also loads the vision tower; the processor settings come from `processorDir`'s preprocessor_config.json (the
   * repo's processor/ folder) when given, else Qwen3-VL's defaults.
   */
  static async fromDir(e: Engine, dir: string, o: EncoderLoadOptions & { references?: boolean; processorDir?: string } = {}): Promise<QwenImage21TextEncoder> {
    const { references, processorDir, ...load } = o;
    const path = join(dir, 'config.json');
    const json = JSON.parse(await readFile(path, 'utf8')) as unknown;
    const config = parseQwen3Config(json, 'text', path);
    let vision: { config: Qwen3VlVisionConfig; processor: Qwen3VlImageProcessorConfig } | undefined;
    if (references) {
      const procPath = processorDir && join(processorDir, 'preprocessor_config.json');
      vision = {
        config: parseQwen3VlVisionConfig(json, path),
        processor: procPath ? parseQwen3VlImageProcessorConfig(JSON.parse(await readFile(procPath, 'utf8')), procPath) : QWEN3_VL_IMAGE_PROCESSOR,
      };
    }
    const ckpt = await Checkpoint.open(dir);
    try {
      return await QwenImage21TextEncoder.load(e, ckpt, config, { ...load, vision });
    } finally {
      await ckpt.close();
    }
  }

  get hiddenSize(): number {
    return this.model.config.hiddenSize;
  }

  /** The processor on one decoded reference (sides multiples of 32, within the processor's pixel bounds). */
  referenceInput(image: ImageTensor, label = 'reference'): VisionInput {
    const v = this.requireVision();
    return imagePatches(image, v.model.config, v.processor, label);
  }

  /**
   * Conditioning of one templated sequence: (expanded length - drop, hidden) in the model's dtype; the caller frees
   * it. `ids` has one <|image_pad|> per reference (expanded here); with no references this is the text-only path.
   */
  encodeIds(ids: ArrayLike<number>, drop: number, references: readonly VisionInput[] = []): Tensor {
    return this.run(ids, drop, references).embeds;
  }

  /** Conditioning of a prompt (L, hidden), with reference images (decoded RGB, see referenceInput); needs the tokenizer. */
  encode(prompt: string, references: readonly ImageTensor[] = []): Tensor {
    return this.encodePrompt(prompt, references).embeds;
  }

  /** encode plus the image-row mask and the references' latent shapes (what jointSequence takes). */
  encodePrompt(prompt: string, references: readonly ImageTensor[] = []): QwenImage21Conditioning {
    if (!this.tokenizer) throw new Error('QwenImage21TextEncoder: no tokenizer loaded; use encodeIds');
    const inputs = references.map((im, i) => this.referenceInput(im, `Picture ${i + 1}`));
    const { ids, drop } = qwenImage21PromptTokens(this.tokenizer, prompt, references.length);
    if (inputs.length > 0) {
      const imageId = this.requireVision().model.config.imageTokenId;
      if (!this.tokenizer.hasToken('<|image_pad|>') || this.tokenizer.tokenId('<|image_pad|>') !== imageId) {
        throw new Error(`QwenImage21TextEncoder: the tokenizer's <|image_pad|> is not the config's image_token_id ${imageId}`);
      }
    }
    const { embeds, imagePadMask } = this.run(ids, drop, inputs);
    return {
      embeds,
      imagePadMask,
      referenceShapes: references.map((im) => [1, im.shape[1] / LATENT_SCALE, im.shape[2] / LATENT_SCALE]),
    };
  }

  private requireVision(): QwenImage21VisionParts {
    if (!this.vision) throw new Error('QwenImage21TextEncoder: loaded without the vision tower (fromDir with references: true)');
    return this.vision;
  }

  private run(ids: ArrayLike<number>, drop: number, references: readonly VisionInput[]): { embeds: Tensor; imagePadMask: boolean[] } {
    if (references.length === 0) {
      const L = ids.length;
      if (!Number.isInteger(drop) || drop < 0 || drop >= L) throw new RangeError(`QwenImage21TextEncoder: drop ${drop} of ${L} tokens`);
      const pads = this.vision ? Array.from(ids, (id) => id === this.vision!.model.config.imageTokenId) : [];
      if (pads.some(Boolean)) throw new RangeError('QwenImage21TextEncoder: the prompt has <|image_pad|> tokens but no reference images were given');
      return { embeds: this.forwardRows(ids, drop), imagePadMask: new Array<boolean>(L - drop).fill(false) };
    }
    const { model: tower } = this.requireVision();
    const vc = tower.config;
    const m = vc.spatialMergeSize;
    const counts = references.map((r) => (r.grid[0] * r.grid[1] * r.grid[2]) / (m * m));
    const full = expandImagePads(ids, vc.imageTokenId, counts);
    const L = full.length;
    if (!Number.isInteger(drop) || drop < 0 || drop >= L) throw new RangeError(`QwenImage21TextEncoder: drop ${drop} of ${L} tokens`);
    const rows: number[] = [];
    full.forEach((id, i) => id === vc.imageTokenId && rows.push(i));
    if (rows[0]! < drop) throw new RangeError(`QwenImage21TextEncoder: an image token at ${rows[0]} lies in the dropped system turn (${drop} tokens)`);
    const positions = qwen3VlRopeIndex(full, vc.imageTokenId, references.map((r) => r.grid), m);

    // the tower's outputs and the spliced embeddings are freed when this scope ends; the rows it returns survive
    return this.e.scope(() => {
      const vis = tower.forward(references);
      const x = this.model.embed(full); // (1, L, hidden)
      // the merged tokens replace the image rows, in order (each image is one run of rows)
      const flat = x.reshape([L, this.hiddenSize]);
      let j = 0;
      while (j < rows.length) {
        let n = 1;
        while (j + n < rows.length && rows[j + n] === rows[j]! + n) n++;
        copyInto(this.e, vis.embeds.slice(0, j, j + n), flat.slice(0, rows[j]!, rows[j]! + n));
        j += n;
      }
      const embeds = this.forwardRows(full, drop, { embeds: x, positions, deepstack: { rows, embeds: vis.deepstack } });
      const mask = full.slice(drop).map((id) => id === vc.imageTokenId);
      return { embeds, imagePadMask: mask };
    }, 'qi21 text encoder');
  }

  /** The decoder over the sequence (ids, or embeds + positions + deepstack), rows drop.. of the pre-norm last layer. */
  private forwardRows(ids: ArrayLike<number>, drop: number, mm?: Pick<Qwen3ForwardInput, 'embeds' | 'positions' | 'deepstack'>): Tensor {
    const L = ids.length;
    const n = this.model.config.numLayers;
    return this.e.scope(() => {
      const h = this.model.forward({ ...(mm ?? { ids }), hiddenStates: [n], final: false }).hidden.get(n)!; // (1, L, hidden), before the final norm; freed with the scope
      return copy(this.e, h.reshape([L, this.hiddenSize]).slice(0, drop, L));
    });
  }

  free(): void {
    this.model.free();
    this.vision?.model.free();
  }
}
