// The released Krea 2 Turbo sizes, for plans (src/plan) and benches: what the real checkpoints hold, without them.
//   DiT: inference.py's single_mmdit_large_wide (config.ts KREA2_LARGE_WIDE), 28 blocks of 6144.
//   Text encoder: Qwen/Qwen3-VL-4B-Instruct's config.json, as krea-ai/krea-2 @ db3984fbc6e1 ships it
//     (shared/upstream/krea-2/text_encoder_Qwen3-VL-4B-Instruct/config.json, MANIFEST.tsv names the blob).
//   VAE: the Qwen-Image VAE's class defaults (its config.json was not found upstream; vae.ts).
// A planned checkpoint uses the demo's byte-level tokenizer (the real one is not shipped): the special-token ids
// are moved to that tokenizer's, the vocabulary size stays the real one, and a prompt takes more tokens than with the
// real tokenizer, so a plan's text side is an upper bound.
import { DEMO_KREA2_TOKENS, type Krea2CheckpointSizes } from './demo';
import { KREA2_LARGE_WIDE } from './config';
import { QWEN_IMAGE_VAE_DEFAULTS } from './vae';
import { demoTokenizerInfo } from '../tokenizer';

/** Qwen/Qwen3-VL-4B-Instruct config.json (the fields the loaders and the conditioner read, values as released). */
export const QWEN3_VL_4B = {
  architectures: ['Qwen3VLForConditionalGeneration'],
  model_type: 'qwen3_vl',
  image_token_id: 151655,
  video_token_id: 151656,
  vision_start_token_id: 151652,
  vision_end_token_id: 151653,
  tie_word_embeddings: true,
  text_config: {
    model_type: 'qwen3_vl_text', hidden_size: 2560, intermediate_size: 9728, num_hidden_layers: 36, num_attention_heads: 32, num_key_value_heads: 8,
    head_dim: 128, rms_norm_eps: 1e-6, rope_theta: 5000000, vocab_size: 151936, tie_word_embeddings: true, hidden_act: 'silu',
    bos_token_id: 151643, eos_token_id: 151645, max_position_embeddings: 262144, attention_bias: false, dtype: 'bfloat16',
    rope_scaling: { mrope_interleaved: true, mrope_section: [24, 20, 20], rope_type: 'default' },
  },
  vision_config: {
    deepstack_visual_indexes: [5, 11, 17], depth: 24, hidden_act: 'gelu_pytorch_tanh', hidden_size: 1024, in_channels: 3, intermediate_size: 4096,
    model_type: 'qwen3_vl', num_heads: 16, num_position_embeddings: 2304, out_hidden_size: 2560, patch_size: 16, spatial_merge_size: 2, temporal_patch_size: 2,
  },
};

/** The released sizes, the text config's token ids on the demo tokenizer (see the header). */
export function releasedKrea2Sizes(): Krea2CheckpointSizes {
  const ids = demoTokenizerInfo({ specialTokens: DEMO_KREA2_TOKENS }).specialTokens;
  const id = (t: string) => ids[t] ?? (() => { throw new Error(`demo tokenizer has no ${t}`); })();
  const textJson = {
    ...QWEN3_VL_4B,
    image_token_id: id('<|image_pad|>'),
    video_token_id: id('<|video_pad|>'),
    vision_start_token_id: id('<|vision_start|>'),
    vision_end_token_id: id('<|vision_end|>'),
    text_config: { ...QWEN3_VL_4B.text_config, bos_token_id: id('<|endoftext|>'), eos_token_id: id('<|im_end|>') },
  };
  return { dit: KREA2_LARGE_WIDE, textJson, vae: { _class_name: 'AutoencoderKLQwenImage', ...QWEN_IMAGE_VAE_DEFAULTS } };
}
