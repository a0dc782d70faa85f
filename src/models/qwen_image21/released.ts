// The released Qwen-Image-2.1 sizes, for plans (src/plan): no upstream data file of Qwen/Qwen-Image-2.1 is reachable
// from here, so these are the values shared/upstream/README.md "qwen-image-2.1" lists as reported (third-party code
// that copied them from the checkpoint; not verified), the same the bench runs (bench/image/main.ts):
//   transformer/config.json   attention_head_dim 128, axes_dims_rope [16, 56, 56], 64 channels, 32 heads, 32 layers
//   text_encoder/config.json  Qwen3-VL-8B's text model (hidden 4096, 36 layers); its vision tower's config is not
//                             reported, so the planned checkpoint has none and editing plans are refused
//   vae/config.json           AutoencoderKLQwenImage21 with the class defaults and the released latent statistics
// A planned checkpoint uses the demo's byte-level tokenizer (the real one is not shipped): the special-token ids are
// moved to that tokenizer's, the vocabulary size stays the real one.
import { demoTokenizerInfo } from '../tokenizer';
import { DEMO_QWEN_IMAGE21_TOKENS } from './demo-configs';
import type { QwenImage21ConfigFiles } from './demo';
import { QWEN_IMAGE21_LATENTS_MEAN, QWEN_IMAGE21_LATENTS_STD, QWEN_IMAGE21_VAE_DEFAULTS } from './vae';

export const QWEN_IMAGE21_TRANSFORMER_REPORTED = {
  _class_name: 'QwenImage21Transformer2DModel', _diffusers_version: '0.37.0.dev0', attention_head_dim: 128, axes_dims_rope: [16, 56, 56],
  in_channels: 64, out_channels: 64, num_attention_heads: 32, num_layers: 32, patch_size: 1,
};

/** Qwen3-VL-8B's text config as reported (no vision_config: see the header). */
export const QWEN3_VL_8B_TEXT_REPORTED = {
  model_type: 'qwen3_vl_text', hidden_size: 4096, intermediate_size: 12288, num_hidden_layers: 36, num_attention_heads: 32,
  num_key_value_heads: 8, head_dim: 128, rms_norm_eps: 1e-6, rope_theta: 5000000, vocab_size: 151936, hidden_act: 'silu', tie_word_embeddings: false,
  rope_scaling: { mrope_interleaved: true, mrope_section: [24, 20, 20], rope_type: 'default' },
};

export function releasedQwenImage21Files(): QwenImage21ConfigFiles {
  const ids = demoTokenizerInfo({ specialTokens: DEMO_QWEN_IMAGE21_TOKENS }).specialTokens;
  const id = (t: string) => ids[t] ?? (() => { throw new Error(`demo tokenizer has no ${t}`); })();
  return {
    transformer: QWEN_IMAGE21_TRANSFORMER_REPORTED,
    textEncoder: {
      architectures: ['Qwen3VLForConditionalGeneration'], model_type: 'qwen3_vl', tie_word_embeddings: false,
      image_token_id: id('<|image_pad|>'), video_token_id: id('<|video_pad|>'), vision_start_token_id: id('<|vision_start|>'), vision_end_token_id: id('<|vision_end|>'),
      text_config: { ...QWEN3_VL_8B_TEXT_REPORTED, bos_token_id: id('<|endoftext|>'), eos_token_id: id('<|im_end|>') },
    },
    vae: { _class_name: 'AutoencoderKLQwenImage21', ...QWEN_IMAGE21_VAE_DEFAULTS, latents_mean: QWEN_IMAGE21_LATENTS_MEAN, latents_std: QWEN_IMAGE21_LATENTS_STD },
  };
}
