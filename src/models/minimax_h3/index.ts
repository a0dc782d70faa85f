// MiniMax H3 video + audio transformer and its sampler (docs/models/minimax-h3.md). Not here: the text encoder
// (src/models/qwen3), the VAEs.
export { parseH3Config, videoPatchDim, H3ConfigError, type H3Config, type H3CheckpointFormat } from './transformer/config';
export {
  alignNumFrames, audioLatentFrames, buildPackedSequence, checkPackedSequence, resolveGeometry, videoLatentFrames,
  AUDIO_CHANNELS, AUDIO_TAG, FPS, KEYFRAME_NOISE_AUG, MODALITIES, TEXT_TAG, VIDEO_TAG,
  type Geometry, type KeyframeAnchor, type PackedSequenceRequest, type PackedSequence,
} from './sequence/packed-sequence';
export { h3InvFreq, h3RopeTable, timestepEmbedding } from './transformer/rope';
export { computeAdaLN, type AdaLNTables, type TimeEmbedder } from './transformer/adaln';
export { H3Attention, H3FeedForward, H3RefinerBlock, H3TransformerBlock, ADALN, type BlockContext, type Linear, type RotaryTables } from './transformer/blocks';
export { RowModulation, rowRuns, MAX_SEGMENTS } from './transformer/modulation';
export { MiniMaxH3Transformer, openH3Checkpoint, DIFFUSERS_INDEX, type H3ForwardInput, type H3ForwardOutput, type H3LoadOptions, type H3Sequence } from './transformer/transformer';
export { patchify, unpatchify } from './transformer/patchify';
export { eulerStep, flowSigmas, FlowSchedule, AUDIO_SHIFT, VIDEO_SHIFT } from './sampler/sigmas';
export { rowTimestepPlan, sampleH3, type H3SampleOptions, type RowTimestepPlan } from './sampler/sampler';
export * from './text-encoder/encoder';
