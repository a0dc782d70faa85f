// Qwen3 / Qwen3-VL text decoder shared by the TTS talker, the Krea, Qwen-Image and MiniMax H3 text encoders.
export { parseQwen3Config, Qwen3ConfigError, type Qwen3Config, type Qwen3Rope } from './config';
export { Qwen3Model, type Qwen3ForwardInput, type Qwen3ForwardOutput, type Qwen3LoadOptions, type Qwen3Positions } from './model';
export { Qwen3KvCache, PAD_BLOCK, type KvCacheOptions } from './cache';
export { Qwen3Attention, Qwen3DecoderLayer, Qwen3Mlp, type LayerCache, type LayerContext } from './layer';
