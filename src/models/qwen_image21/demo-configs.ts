// The demo checkpoint's configs (demo.ts writes the checkpoint): kept apart from demo.ts, which imports the loaders
// (checkpoint.ts), so that what the loaders themselves need of them (comfy-parts.ts: the known layouts a ComfyUI file
// may have) imports no cycle.
import { demoQwen3VlConfig, QWEN3_VL_DEMO_TOKENS } from '../common/demo-checkpoint';
import type { DemoTokenizerInfo } from '../tokenizer';
import { DEMO_VAE_CONFIG, parseQwenImage21VaeConfig } from './vae';

/** Special tokens of Qwen3-VL the prompt templates use (ids follow the learned vocabulary, in this order). */
export const DEMO_QWEN_IMAGE21_TOKENS = QWEN3_VL_DEMO_TOKENS;

/** Latent channels of the demo (the real model's 64: the transformer and VAE keep the real interface). */
const Z = parseQwenImage21VaeConfig(DEMO_VAE_CONFIG).zDim;

export const DEMO_TRANSFORMER_CONFIG = {
  _class_name: 'QwenImage21Transformer2DModel',
  _diffusers_version: '0.37.0.dev0',
  attention_head_dim: 32,
  axes_dims_rope: [8, 12, 12],
  in_channels: Z,
  out_channels: Z,
  num_attention_heads: 2,
  num_layers: 2,
  patch_size: 1,
  context_in_dim: 64,
  mlp_ratio: 3,
  eps: 1e-6,
  causal_condition: true,
};

/** A Qwen3-VL config of the real file's shape (Qwen3VLForConditionalGeneration) with a tiny text decoder. */
export function demoTextEncoderConfig(tok: DemoTokenizerInfo): Record<string, unknown> {
  return demoQwen3VlConfig(tok, { hidden: DEMO_TRANSFORMER_CONFIG.context_in_dim, intermediate: 128, heads: 4, kvHeads: 2, layers: 2, tieWordEmbeddings: false, deepstack: [0] });
}
