// Qwen3-VL vision tower hyper-parameters: config.json's `vision_config` (model_type qwen3_vl) plus the top-level
// token ids the text side needs (image_token_id, vision_start/end), and the image processor's settings
// (preprocessor_config.json: size bounds, mean/std). Qwen3-VL-8B: depth 27, hidden 1152, 16 heads (head dim 72),
// intermediate 4304, out 4096, patch 16, temporal 2, merge 2, 2304 (48 x 48) learned positions, deepstack at
// blocks [8, 16, 24]; processor 65536..16777216 pixels, mean = std = 0.5.

export interface Qwen3VlVisionConfig {
  depth: number;
  hiddenSize: number;
  intermediateSize: number;
  numHeads: number;
  /** Width of the merged tokens = the text decoder's hidden size. */
  outHiddenSize: number;
  inChannels: number;
  patchSize: number;
  temporalPatchSize: number;
  spatialMergeSize: number;
  /** Learned position table rows: a square grid of side sqrt(n), bilinearly resampled to each image's grid. */
  numPositionEmbeddings: number;
  /** Blocks whose output feeds deepstack_merger_list[k] (in this order). */
  deepstackVisualIndexes: number[];
  /** Block MLP activation: gelu_pytorch_tanh (the mergers use exact GELU, fixed in the class). */
  hiddenAct: 'gelu_tanh' | 'gelu_erf';
  /** Token whose rows the merged image tokens replace (<|image_pad|>). */
  imageTokenId: number;
  visionStartTokenId: number;
  visionEndTokenId: number;
  keyPrefix: string;
}

export interface Qwen3VlImageProcessorConfig {
  /** smart_resize bounds on H * W (size.shortest_edge / longest_edge, or min_pixels / max_pixels). */
  minPixels: number;
  maxPixels: number;
  imageMean: [number, number, number];
  imageStd: [number, number, number];
}

/** Qwen3-VL's preprocessor_config.json. */
export const QWEN3_VL_IMAGE_PROCESSOR: Qwen3VlImageProcessorConfig = {
  minPixels: 65536,
  maxPixels: 16777216,
  imageMean: [0.5, 0.5, 0.5],
  imageStd: [0.5, 0.5, 0.5],
};

export class Qwen3VlVisionConfigError extends Error {
  override readonly name = 'Qwen3VlVisionConfigError';
}

type Json = Record<string, unknown>;

const ACT: Record<string, Qwen3VlVisionConfig['hiddenAct']> = { gelu_pytorch_tanh: 'gelu_tanh', gelu: 'gelu_erf' };

/** Parses a qwen3_vl config.json object (the whole file: vision_config and the top-level token ids). */
export function parseQwen3VlVisionConfig(json: unknown, source = 'config'): Qwen3VlVisionConfig {
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new Qwen3VlVisionConfigError(`${source}: not a JSON object`);
  const top = json as Json;
  if (top.model_type !== 'qwen3_vl') throw new Qwen3VlVisionConfigError(`${source}: model_type ${JSON.stringify(top.model_type)} is not qwen3_vl`);
  const v = top.vision_config as Json | undefined;
  if (!v || typeof v !== 'object') throw new Qwen3VlVisionConfigError(`${source}: no vision_config`);
  const where = `${source}.vision_config`;
  const int = (c: Json, key: string, at: string, fallback?: number): number => {
    const x = c[key] ?? fallback;
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0) throw new Qwen3VlVisionConfigError(`${at}: ${key} = ${JSON.stringify(x)} must be an integer >= 0`);
    return x;
  };
  const depth = int(v, 'depth', where);
  const hiddenSize = int(v, 'hidden_size', where);
  const numHeads = int(v, 'num_heads', where);
  if (numHeads < 1 || hiddenSize % numHeads) throw new Qwen3VlVisionConfigError(`${where}: hidden_size ${hiddenSize} is not a multiple of num_heads ${numHeads}`);
  const headDim = hiddenSize / numHeads;
  // the rotary table covers head_dim / 2 dims split over (row, col): head_dim must be a multiple of 4
  if (headDim % 4) throw new Qwen3VlVisionConfigError(`${where}: head dim ${headDim} must be a multiple of 4 (2D rotary)`);
  const numPos = int(v, 'num_position_embeddings', where);
  if (!Number.isInteger(Math.sqrt(numPos)) || numPos < 1) throw new Qwen3VlVisionConfigError(`${where}: num_position_embeddings ${numPos} is not a square`);
  const ds = v.deepstack_visual_indexes ?? [];
  if (!Array.isArray(ds) || !ds.every((i) => Number.isInteger(i) && i >= 0 && i < depth)) {
    throw new Qwen3VlVisionConfigError(`${where}: deepstack_visual_indexes ${JSON.stringify(ds)} must be block indexes < ${depth}`);
  }
  const act = ACT[String(v.hidden_act ?? 'gelu_pytorch_tanh')];
  if (!act) throw new Qwen3VlVisionConfigError(`${where}: hidden_act ${JSON.stringify(v.hidden_act)} (gelu_pytorch_tanh or gelu)`);
  return {
    depth,
    hiddenSize,
    intermediateSize: int(v, 'intermediate_size', where),
    numHeads,
    outHiddenSize: int(v, 'out_hidden_size', where),
    inChannels: int(v, 'in_channels', where, 3),
    patchSize: int(v, 'patch_size', where, 16),
    temporalPatchSize: int(v, 'temporal_patch_size', where, 2),
    spatialMergeSize: int(v, 'spatial_merge_size', where, 2),
    numPositionEmbeddings: numPos,
    deepstackVisualIndexes: ds as number[],
    hiddenAct: act,
    imageTokenId: int(top, 'image_token_id', source, 151655),
    visionStartTokenId: int(top, 'vision_start_token_id', source, 151652),
    visionEndTokenId: int(top, 'vision_end_token_id', source, 151653),
    keyPrefix: 'model.visual.',
  };
}

/** preprocessor_config.json (size {shortest_edge, longest_edge} or min_pixels / max_pixels, image_mean, image_std). */
export function parseQwen3VlImageProcessorConfig(json: unknown, source = 'preprocessor_config'): Qwen3VlImageProcessorConfig {
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new Qwen3VlVisionConfigError(`${source}: not a JSON object`);
  const c = json as Json;
  const size = (c.size ?? {}) as Json;
  const d = QWEN3_VL_IMAGE_PROCESSOR;
  const num = (x: unknown, fallback: number, key: string): number => {
    const y = x ?? fallback;
    if (typeof y !== 'number' || !(y > 0)) throw new Qwen3VlVisionConfigError(`${source}: ${key} = ${JSON.stringify(y)}`);
    return y;
  };
  const triple = (x: unknown, fallback: [number, number, number], key: string): [number, number, number] => {
    const y = x ?? fallback;
    if (!Array.isArray(y) || y.length !== 3 || !y.every((n) => typeof n === 'number')) throw new Qwen3VlVisionConfigError(`${source}: ${key} = ${JSON.stringify(y)}`);
    return y as [number, number, number];
  };
  const minPixels = num(c.min_pixels ?? size.shortest_edge, d.minPixels, 'size.shortest_edge');
  const maxPixels = num(c.max_pixels ?? size.longest_edge, d.maxPixels, 'size.longest_edge');
  if (minPixels > maxPixels) throw new Qwen3VlVisionConfigError(`${source}: min pixels ${minPixels} > max pixels ${maxPixels}`);
  return { minPixels, maxPixels, imageMean: triple(c.image_mean, d.imageMean, 'image_mean'), imageStd: triple(c.image_std, d.imageStd, 'image_std') };
}
