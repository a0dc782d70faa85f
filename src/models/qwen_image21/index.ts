// Qwen-Image-2.1 (profiles imgmain, imgmain_bf16): transformer, joint sequence + RoPE, flow-matching schedule.
// Data flow and key names: docs/models/qwen-image-2.1.md.
export { parseQwenImage21Config, QwenImage21ConfigError, QWEN_IMAGE21_DEFAULTS, type QwenImage21Config } from './config';
export { imageMaskWithTarget, jointSequence, ropeRows, TOKENS_PER_SLOT, type ImageShape, type JointSequence, type PrefixRun, type RopeRows } from './joint-sequence';
export { modRow, tanhGates, timestepSinusoid, TIMESTEP_DIM, type ModRow } from './modulation';
export { QwenImage21Attention, QwenImage21Block, QwenImage21SwiGLU, type BlockPart, type LayerKv } from './block';
export {
  QwenImage21PrefixCache,
  QwenImage21Transformer,
  type QwenImage21Input,
  type QwenImage21LoadOptions,
  type QwenImage21Output,
  type TimeEmbedding,
} from './transformer';
export {
  calculateShift,
  eulerDt,
  flowMatchSchedule,
  imageSeqLen,
  modelTimestep,
  parseFlowMatchConfig,
  QWEN_IMAGE21_SCHEDULER,
  FlowMatchConfigError,
  type FlowMatchConfig,
  type Schedule,
} from './sigmas';
export { eulerStep } from '../common/guided-euler';
export * from './text-encoder';
