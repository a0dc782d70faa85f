// What every random demo checkpoint (a model's demo.ts: tiny random weights in the published layout, made when
// WEIGHTS_DIR has no real ones) is set up with: its version stamp and the metadata its safetensors carry, the special
// tokens' ids of the demo tokenizer, and for the models whose text encoder is Qwen3-VL (krea2, qwen_image21) that
// encoder's config.json, special tokens and image processor settings at a tiny size.
import { createHash } from 'node:crypto';
import { DEMO_SPECIAL_TOKENS, type DemoTokenizerInfo } from '../tokenizer';

/**
 * A demo's digest: sha256 of everything that shapes its files (generator format, seed, configs, the loaders' key
 * lists), 16 hex digits. It goes into the version ensureDemoCheckpoint compares (`<format>-<digest>`), so a loader
 * that starts reading another key, or a changed config, regenerates the folder.
 */
export function demoDigest(parts: readonly unknown[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 16);
}

/** The metadata of every safetensors file of a demo: `note` says what it is (random weights, which, and that the output is noise). */
export function demoMeta(note: string): Record<string, string> {
  return { format: 'pt', kiln_demo: note };
}

/** The demo tokenizer's id of special token `t` (demoTokenizerInfo), or an error naming it. */
export function demoTokenId(tok: DemoTokenizerInfo, t: string): number {
  const v = tok.specialTokens[t];
  if (v === undefined) throw new Error(`demo tokenizer has no ${t}`);
  return v;
}

/** Special tokens of Qwen3-VL the prompt templates use (ids follow the learned vocabulary, in this order). */
export const QWEN3_VL_DEMO_TOKENS = [
  ...DEMO_SPECIAL_TOKENS.filter((t) => !t.startsWith('<tts') && !t.includes('audio')),
  '<|vision_start|>', '<|vision_end|>', '<|image_pad|>', '<|video_pad|>',
];

/** Qwen3-VL's image processor settings (the stock preprocessor_config.json). */
export const QWEN3_VL_PREPROCESSOR = {
  size: { longest_edge: 16777216, shortest_edge: 65536 }, patch_size: 16, temporal_patch_size: 2, merge_size: 2,
  image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5], processor_class: 'Qwen3VLProcessor', image_processor_type: 'Qwen2VLImageProcessorFast',
};

/** The sizes a demo Qwen3-VL text encoder is made at (the rest of its config is the real file's). */
export interface DemoQwen3VlSizes {
  /** The text model's width = the vision tower's out_hidden_size. */
  hidden: number;
  intermediate: number;
  heads: number;
  kvHeads: number;
  layers: number;
  tieWordEmbeddings: boolean;
  /** The tower's blocks whose features are added to the decoder's first layers. */
  deepstack: number[];
}

/**
 * A Qwen3-VL config.json of the real file's shape (Qwen3VLForConditionalGeneration) with a tiny text model and a
 * 2-block vision tower; the special-token ids are the demo tokenizer's (`tok`).
 */
export function demoQwen3VlConfig(tok: DemoTokenizerInfo, s: DemoQwen3VlSizes): Record<string, unknown> {
  const id = (t: string) => demoTokenId(tok, t);
  return {
    architectures: ['Qwen3VLForConditionalGeneration'],
    image_token_id: id('<|image_pad|>'),
    model_type: 'qwen3_vl',
    text_config: {
      attention_bias: false, attention_dropout: 0.0, bos_token_id: id('<|endoftext|>'), dtype: 'bfloat16', eos_token_id: id('<|im_end|>'),
      head_dim: 16, hidden_act: 'silu', hidden_size: s.hidden, initializer_range: 0.02, intermediate_size: s.intermediate,
      max_position_embeddings: 262144, model_type: 'qwen3_vl_text', num_attention_heads: s.heads, num_hidden_layers: s.layers, num_key_value_heads: s.kvHeads,
      rms_norm_eps: 1e-6, rope_scaling: { mrope_interleaved: true, mrope_section: [4, 2, 2], rope_type: 'default' }, rope_theta: 5000000,
      tie_word_embeddings: s.tieWordEmbeddings, use_cache: true, vocab_size: tok.size,
    },
    tie_word_embeddings: s.tieWordEmbeddings,
    transformers_version: '4.57.0.dev0',
    video_token_id: id('<|video_pad|>'),
    vision_config: {
      deepstack_visual_indexes: s.deepstack, depth: 2, hidden_act: 'gelu_pytorch_tanh', hidden_size: 32, in_channels: 3, initializer_range: 0.02,
      intermediate_size: 64, model_type: 'qwen3_vl', num_heads: 2, num_position_embeddings: 64, out_hidden_size: s.hidden,
      patch_size: 16, spatial_merge_size: 2, temporal_patch_size: 2,
    },
    vision_end_token_id: id('<|vision_end|>'),
    vision_start_token_id: id('<|vision_start|>'),
  };
}
