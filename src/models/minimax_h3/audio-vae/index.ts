// MiniMax H3 audio VAE, decoder side (docs/models/minimax-h3.md "Audio VAE decoder"): BigVGAN on de-normalised
// latents, the two stereo channels as two batch items, 32 kHz out. The DAC encoder (reference audio) is part 2.
export { parseAudioVaeConfig, hopLength, AudioVaeConfigError, type AudioVaeConfig } from './config';
export {
  AudioVaeDecoder, interleave, receptiveFieldFrames,
  type AudioVaeDecodeOptions, type AudioVaeLoadOptions, type AudioVaeTrace, type DecodedAudio,
} from './decoder';
export { foldWeightNorm } from './weights';
