// Qwen3-VL vision tower (reference images of Qwen-Image-2.1; the same family serves the speech and video models).
export { parseQwen3VlImageProcessorConfig, parseQwen3VlVisionConfig, QWEN3_VL_IMAGE_PROCESSOR, Qwen3VlVisionConfigError, type Qwen3VlImageProcessorConfig, type Qwen3VlVisionConfig } from './config';
export { imagePatches, smartResize, visionTokenCount, type VisionInput } from './preprocess';
export { interpolatePositions, patchRowCol, positionCorners, qwen3VlRopeIndex, visionRotaryTable, type PositionCorners } from './positions';
export { qwen3VlVisionShapes } from './keys';
export { Qwen3VlPatchMerger, Qwen3VlVisionBlock, Qwen3VlVisionModel, type Qwen3VlVisionLoadOptions, type Qwen3VlVisionOutput } from './model';
