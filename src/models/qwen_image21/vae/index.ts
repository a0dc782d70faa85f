// Qwen-Image-2.1's VAE (diffusers AutoencoderKLQwenImage21, 64 latent channels, 16x): encode for references,
// decode for the result, on one frame, channels-last. Layouts and conventions: vae.ts; docs/models/qwen-image-2.1.md "VAE".
export {
  decoderLevels, encoderLevels, parseQwenImage21VaeConfig, QWEN_IMAGE21_VAE_DEFAULTS, QwenImage21VaeConfigError,
  type QwenImage21VaeConfig,
} from './config';
export { decoderHaloRows, DEFAULT_STRIP_BYTES, planStrips, type DecodeOptions, type VaeCapture } from './decoder';
export { openVaeCheckpoint, QwenImage21Vae, VAE_INDEX, VAE_WEIGHTS, type QwenImage21VaeLoadOptions } from './vae';
export { DEMO_VAE_CONFIG, QWEN_IMAGE21_LATENTS_MEAN, QWEN_IMAGE21_LATENTS_STD, vaeCheckpointShapes, writeDemoVae, type DemoVaeOptions } from './demo';
