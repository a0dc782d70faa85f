// MiniMax H3 audio VAE (docs/models/minimax-h3.md "Audio VAE decoder", "Part 2 status"): BigVGAN on de-normalised
// latents, the two stereo channels as two batch items, 32 kHz out; the DAC encoder (encoder.ts) + attention projection
// (attn-projection.ts) that turns a reference soundtrack into conditioning rows.
export {
  parseAudioVaeConfig, hopLength, AudioVaeConfigError, encoderHop, parseAudioVaeEncoderConfig, type AudioVaeConfig, type AudioVaeEncoderConfig,
} from './config';
export {
  AudioVaeDecoder, interleave, receptiveFieldFrames,
  type AudioVaeDecodeOptions, type AudioVaeLoadOptions, type AudioVaeTrace, type DecodedAudio,
} from './decoder';
export { foldWeightNorm } from './weights';
export { adaptivePoolWindows } from './attn-projection';
export {
  AudioVaeEncoder, audioConditionRows, type AudioEncoderCapture, type AudioPosterior, type AudioVaeEncoderLoadOptions,
} from './encoder';
