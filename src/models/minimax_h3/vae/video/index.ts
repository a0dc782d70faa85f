// MiniMax H3 video VAE (docs/models/minimax-h3.md "Video VAE decoder", "Part 2 status"): ViT3D decode of normalised
// latents into RGB frames, chunked in time and tiled in space as upstream; the causal 3D CNN encoder (cnn.ts, walked
// by encoder.ts; encode_vae_condition's host steps in condition.ts).
export {
  decodePlan, parseVideoVaeConfig, parseVideoVaeEncoderConfig, RELEASED_TILING, splitTiles, temporalGeometry, vaeDim, VideoVaeConfigError,
  type DecodePlan, type TemporalGeometry, type TilingOptions, type VideoVaeConfig, type VideoVaeEncoderConfig,
} from './config';
export { tileRope, VaeViTDecoder, type Capture, type TileRope } from './vit';
export {
  openVideoVaeCheckpoint, PIXEL_MEAN, PIXEL_STD, stitchTiles, toRgb, unpatchify, VideoVaeDecoder, VIDEO_VAE_INDEX,
  type DecodedVideo, type VideoLatents, type VideoVaeDecodeOptions, type VideoVaeLoadOptions,
} from './decoder';
export { type EncoderCapture } from './cnn';
export {
  stitchLatentTiles, VideoVaeEncoder, type HostVideo, type VideoVaeEncodeOptions, type VideoVaeEncoderLoadOptions,
} from './encoder';
export { conditionLatents, conditionNoise, KEYFRAME_ENCODE_SEED, normalizePixels, normalizeSample, posteriorSample } from './condition';
