// Krea 2's prompt encoder (krea-ai/krea-2 encoder.py, Qwen3VLConditioner) on our Qwen3Model: Qwen3-VL-4B-Instruct's
// language model, text only. Its decoder lives under "model.language_model." (Qwen3VLForConditionalGeneration's keys).
//
//   template   "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, text,
//              spatial relationships of the objects and background:<|im_end|>\n<|im_start|>user\n" + prompt, tokenized
//              as one string and cut to max_length + 34 - 5 tokens (512 -> 541: the prompt keeps at most 507 tokens
//              after the 34 of the prefix, the rest is silently dropped, as upstream does), then the suffix
//              "<|im_end|>\n<|im_start|>assistant\n" tokenized on its own (5 tokens). No BOS.
//   taps       hidden_states[i] for i in select_layers (2, 5, ..., 35): the residual stream after decoder layer i, before
//              the final norm (layer 36 and the norm are never needed, so they are not loaded). Any index transformers'
//              tuple takes is accepted: hidden_states[numLayers] (or -1) is the last layer's output after the final
//              norm (transformers replaces the last entry with last_hidden_state), and a negative i counts from the end
//              (i + numLayers + 1); then every layer and the norm are loaded.
//   output     (1, L - 34, n, hidden): the first 34 rows (the prefix) dropped, the rest in order.
// Upstream pads [prefix + prompt] on the right to 541 tokens before appending the suffix and runs the model with the
// attention mask and the positions transformers 4.57 derives from it (pads take no position); the real rows equal
// this unpadded run with positions 0..L-1, and the pad rows are masked out of everything downstream (text-fusion.ts),
// so they are never computed here. The prefix count 34 is upstream's constant (not measured on the tokenizer): the
// tokens dropped are the first 34 of the joint encoding, whatever they are.
//
// Style references (Kiln's own; the release conditions on text only: docs/models/krea-2.md "Style references"): the
// images go to the same Qwen3-VL-4B as images, in the user turn before the prompt,
//   prefix | "Style reference 1: <|vision_start|><|image_pad|>...<|vision_end|>\n" ... | prompt | suffix
// each at about 384 x 384 px (sides multiples of 32: 144 vision tokens), with the tower's merged tokens spliced in,
// its deepstack features added after the first layers and Qwen3-VL's 3-D positions, as transformers runs an image
// prompt. Only the prompt's and the suffix's rows are handed on (the rows the text-only path gives): the references
// shape those states through the language model's attention, while the DiT sees the same kind and number of rows it
// was trained on, whatever the reference count. The parts are tokenized one by one (the prompt cut at max_length - 5
// tokens, as upstream's budget for it), so the kept rows are known exactly.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Engine } from '../../engine/engine';
import { existsSync } from 'node:fs';
import { copyInto } from '../../engine/ops/layout';
import { Checkpoint } from '../../engine/safetensors';
import type { Tensor } from '../../engine/tensor';
import type { ImageTensor } from '../../media/types';
import { parseQwen3Config, Qwen3Model, type Qwen3Config, type Qwen3ForwardInput, type Qwen3LoadOptions } from '../qwen3';
import {
  imagePatches, parseQwen3VlImageProcessorConfig, parseQwen3VlVisionConfig, QWEN3_VL_IMAGE_PROCESSOR, qwen3VlRopeIndex, Qwen3VlVisionModel,
  type Qwen3VlImageProcessorConfig, type Qwen3VlVisionConfig, type VisionInput,
} from '../qwen3_vl_vision';
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

/** Pixels a style reference is brought to (about 384 x 384; aspect kept, sides multiples of 32). */
export const KREA2_STYLE_AREA = 384 * 384;
/** The label before reference i (1-based). */
export const krea2StyleBlock = (i: number): string => `Style reference ${i}: <|vision_start|><|image_pad|><|vision_end|>\n`;

export interface Krea2StyleTokens {
  /** [prefix | style blocks (one <|image_pad|> each) | prompt (cut) | suffix], not yet expanded. */
  ids: number[];
  /** The first row handed on: where the prompt starts (in the expanded sequence: add the extra image rows). */
  promptStart: number;
  truncated: number;
}

/** The style-reference template's tokens, part by part (see the header). */
export function krea2StyleTokens(tok: Pick<TextTokenizer, 'encode'>, prompt: string, references: number, maxLength = KREA2_MAX_LENGTH): Krea2StyleTokens {
  if (!Number.isInteger(references) || references < 1) throw new RangeError(`krea2StyleTokens: ${references} references`);
  const head = [...tok.encode(KREA2_TEMPLATE_PREFIX)];
  for (let i = 1; i <= references; i++) head.push(...tok.encode(krea2StyleBlock(i)));
  const p = tok.encode(prompt);
  const kept = p.slice(0, maxLength - KREA2_SUFFIX_TOKENS);
  return { ids: [...head, ...kept, ...tok.encode(KREA2_TEMPLATE_SUFFIX)], promptStart: head.length, truncated: p.length - kept.length };
}

export interface Krea2VisionParts {
  model: Qwen3VlVisionModel;
  processor: Qwen3VlImageProcessorConfig;
}

export interface Krea2ConditionerOptions extends Omit<Qwen3LoadOptions, 'layers' | 'norm'> {
  tokenizer?: TextTokenizer;
  selectLayers?: readonly number[];
  maxLength?: number;
  /** The vision tower, for style references. */
  vision?: { config: Qwen3VlVisionConfig; prefix?: string; processor?: Qwen3VlImageProcessorConfig };
}

export class Krea2Conditioner {
  constructor(
    private readonly e: Engine,
    /** The decoder up to the last selected layer; the final norm only when hidden_states[numLayers] is tapped. */
    readonly model: Qwen3Model,
    readonly tokenizer: TextTokenizer | null,
    readonly selectLayers: readonly number[] = KREA2_SELECT_LAYERS,
    readonly maxLength = KREA2_MAX_LENGTH,
    readonly vision: Krea2VisionParts | null = null,
  ) {}

  static async load(e: Engine, ckpt: Checkpoint, config: Qwen3Config, o: Krea2ConditionerOptions = {}): Promise<Krea2Conditioner> {
    const { tokenizer, selectLayers: given = KREA2_SELECT_LAYERS, maxLength = KREA2_MAX_LENGTH, vision, ...load } = o;
    const n = config.numLayers;
    if (given.length === 0 || given.some((i) => !Number.isInteger(i) || i < -(n + 1) || i > n)) {
      throw new RangeError(`Krea2Conditioner: select_layers [${given}] must index hidden_states: ${-(n + 1)}..${n} (${n}: after the final norm)`);
    }
    // transformers' numbering: i < 0 counts from the end of the n + 1 states
    const selectLayers = given.map((i) => (i < 0 ? i + n + 1 : i));
    const layers = Math.max(...selectLayers);
    const model = await Qwen3Model.load(e, ckpt, config, { ...load, layers, norm: layers === n });
    if (!vision) return new Krea2Conditioner(e, model, tokenizer ?? null, selectLayers, maxLength);
    try {
      if (vision.config.outHiddenSize !== config.hiddenSize) throw new RangeError(`Krea2Conditioner: vision out_hidden_size ${vision.config.outHiddenSize} vs text hidden ${config.hiddenSize}`);
      const tower = await Qwen3VlVisionModel.load(e, ckpt, vision.config, { dtype: load.dtype, int8: load.int8, prefix: vision.prefix });
      return new Krea2Conditioner(e, model, tokenizer ?? null, selectLayers, maxLength, { model: tower, processor: vision.processor ?? QWEN3_VL_IMAGE_PROCESSOR });
    } catch (err) {
      model.free();
      throw err;
    }
  }

  /**
   * `dir`: the text encoder folder (Qwen3-VL-4B-Instruct: config.json of qwen3_vl, weights, tokenizer files,
   * preprocessor_config.json); the tokenizer from `tokenizerDir` (default dir). `styles: true` also loads the
   * vision tower.
   */
  static async fromDir(e: Engine, dir: string, o: Omit<Krea2ConditionerOptions, 'tokenizer' | 'vision'> & { tokenizerDir?: string; styles?: boolean } = {}): Promise<Krea2Conditioner> {
    const { tokenizerDir, styles, ...rest } = o;
    const path = join(dir, 'config.json');
    const json = JSON.parse(await readFile(path, 'utf8')) as unknown;
    const config = parseQwen3Config(json, 'text', path);
    const tokenizer = await TextTokenizer.fromDir(tokenizerDir ?? dir);
    let vision: Krea2ConditionerOptions['vision'];
    if (styles) {
      const procPath = join(dir, 'preprocessor_config.json');
      vision = {
        config: parseQwen3VlVisionConfig(json, path),
        processor: existsSync(procPath) ? parseQwen3VlImageProcessorConfig(JSON.parse(await readFile(procPath, 'utf8')), procPath) : QWEN3_VL_IMAGE_PROCESSOR,
      };
    }
    const ckpt = await Checkpoint.open(dir);
    try {
      return await Krea2Conditioner.load(e, ckpt, config, { ...rest, tokenizer, vision });
    } finally {
      await ckpt.close();
    }
  }

  get hiddenSize(): number {
    return this.model.config.hiddenSize;
  }

  /**
   * The fusion's input for a prompt: (1, rows, n, hidden) in the model's dtype; the caller frees it. `styles`: the
   * style references (decoded RGB, brought to size by styleInput), 0 to any number (the service allows 3).
   */
  encode(prompt: string, styles: readonly ImageTensor[] = []): Tensor {
    if (!this.tokenizer) throw new Error('Krea2Conditioner: no tokenizer loaded; use encodeIds');
    if (styles.length === 0) {
      const { ids, drop } = krea2PromptTokens(this.tokenizer, prompt, this.maxLength);
      return this.encodeIds(ids, drop);
    }
    const v = this.requireVision();
    if (!this.tokenizer.hasToken('<|image_pad|>') || this.tokenizer.tokenId('<|image_pad|>') !== v.model.config.imageTokenId) {
      throw new Error(`Krea2Conditioner: the tokenizer's <|image_pad|> is not the config's image_token_id ${v.model.config.imageTokenId}`);
    }
    const t = krea2StyleTokens(this.tokenizer, prompt, styles.length, this.maxLength);
    return this.encodeWithImages(t.ids, t.promptStart, styles.map((im, i) => imagePatches(im, v.model.config, v.processor, `style reference ${i + 1}`)));
  }

  /**
   * The taps of an image template's rows from `keepFrom` (an index into `ids`, before the image pads are expanded):
   * ids hold one <|image_pad|> per image, expanded here to its merged-token count.
   */
  encodeWithImages(ids: ArrayLike<number>, keepFrom: number, images: readonly VisionInput[]): Tensor {
    const { model: tower } = this.requireVision();
    const vc = tower.config;
    const m = vc.spatialMergeSize;
    const counts = images.map((r) => (r.grid[0] * r.grid[1] * r.grid[2]) / (m * m));
    const full: number[] = [];
    let image = 0;
    let start = -1;
    for (let i = 0; i < ids.length; i++) {
      if (i === keepFrom) start = full.length;
      if (ids[i] !== vc.imageTokenId) {
        full.push(ids[i]!);
        continue;
      }
      if (i >= keepFrom) throw new RangeError('Krea2Conditioner: an image token lies in the rows handed on');
      const n = counts[image++];
      if (n === undefined) throw new RangeError(`Krea2Conditioner: more <|image_pad|> tokens than the ${images.length} images`);
      for (let k = 0; k < n; k++) full.push(vc.imageTokenId);
    }
    if (image !== images.length) throw new RangeError(`Krea2Conditioner: ${images.length} images but ${image} <|image_pad|> tokens`);
    if (start < 0) throw new RangeError(`Krea2Conditioner: keepFrom ${keepFrom} of ${ids.length} tokens`);
    const rows: number[] = [];
    full.forEach((id, i) => id === vc.imageTokenId && rows.push(i));
    const positions = qwen3VlRopeIndex(full, vc.imageTokenId, images.map((r) => r.grid), m);
    // the tower's outputs and the spliced embeddings are freed when this scope ends; the taps it returns survive
    return this.e.scope(() => {
      const vis = tower.forward(images);
      const x = this.model.embed(full); // (1, L, hidden)
      const flat = x.reshape([full.length, this.hiddenSize]);
      // the merged tokens replace the image rows, in order (each image is one run of rows)
      let j = 0;
      while (j < rows.length) {
        let n = 1;
        while (j + n < rows.length && rows[j + n] === rows[j]! + n) n++;
        copyInto(this.e, vis.embeds.slice(0, j, j + n), flat.slice(0, rows[j]!, rows[j]! + n));
        j += n;
      }
      return this.taps(full.length, start, { embeds: x, positions, deepstack: { rows, embeds: vis.deepstack } });
    }, 'krea2 style encode');
  }

  private requireVision(): Krea2VisionParts {
    if (!this.vision) throw new Error('Krea2Conditioner: loaded without the vision tower, so style references cannot be read');
    return this.vision;
  }

  /** The taps of the rows drop.. of a tokenized template: (1, L - drop, n, hidden). */
  encodeIds(ids: ArrayLike<number>, drop = KREA2_PREFIX_TOKENS): Tensor {
    return this.taps(ids.length, drop, { ids });
  }

  private taps(L: number, drop: number, input: Pick<Qwen3ForwardInput, 'ids' | 'embeds' | 'positions' | 'deepstack'>): Tensor {
    if (!Number.isInteger(drop) || drop < 0 || drop >= L) throw new RangeError(`Krea2Conditioner: drop ${drop} of ${L} tokens`);
    const H = this.hiddenSize;
    const n = this.selectLayers.length;
    // hidden_states[numLayers] is transformers' last_hidden_state: the final norm's output
    const last = this.model.config.numLayers;
    const final = this.selectLayers.includes(last);
    return this.e.scope(() => {
      // the hidden states and the final norm are freed when this scope ends, once copied into the taps
      const out = this.model.forward({ ...input, hiddenStates: this.selectLayers.filter((i) => i !== last), final });
      const taps = this.e.empty([1, L - drop, n, H], this.model.dtype, 'krea2 text taps');
      this.selectLayers.forEach((layer, i) => {
        const h = layer === last ? out.final! : out.hidden.get(layer)!; // (1, L, H)
        copyInto(this.e, h.slice(1, drop, L).reshape([1, L - drop, 1, H]), taps.slice(2, i, i + 1));
      });
      return taps;
    }, 'krea2 taps');
  }

  free(): void {
    this.model.free();
    this.vision?.model.free();
  }
}
