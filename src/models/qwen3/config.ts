// Qwen3 decoder hyper-parameters, read from the real config.json files. One shape serves every variant:
//   model_type qwen3                           Qwen3Model (1D RoPE)                     keys under "model."
//   model_type qwen3_vl (text_config nested)   Qwen3VLTextModel (interleaved MRoPE)     keys under "model.language_model."
//   model_type qwen3_vl_text                   the text config on its own               keys under "model.language_model."
//   model_type qwen3_tts (talker_config)       Qwen3-TTS talker (MRoPE, embeds in)     keys under "talker.model."
//   model_type qwen3_tts_talker                the talker config on its own             keys under "talker.model."
//   model_type qwen3_tts_talker_code_predictor the code predictor (1D RoPE)             keys under "talker.code_predictor.model."
// RoPE settings come either as transformers 4.x `rope_theta` + `rope_scaling` (the checkpoints' files) or as 5.x
// `rope_parameters` (what the golden fixtures record).

export type Qwen3Rope =
  | { kind: '1d'; theta: number }
  /** Qwen-VL multimodal RoPE: section = rotated pairs per axis (t, h, w), sum = headDim / 2. */
  | { kind: 'mrope'; theta: number; section: [number, number, number]; mode: 'interleaved' | 'sectioned' };

export interface Qwen3Config {
  modelType: string;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsNormEps: number;
  attentionBias: boolean;
  rope: Qwen3Rope;
  /** Where the decoder's keys live in the model's own checkpoint (ends with "."). */
  keyPrefix: string;
}

export class Qwen3ConfigError extends Error {
  override readonly name = 'Qwen3ConfigError';
}

type Json = Record<string, unknown>;

const PREFIX: Record<string, string> = {
  qwen3: 'model.',
  qwen3_vl_text: 'model.language_model.',
  qwen3_tts_talker: 'talker.model.',
  qwen3_tts_talker_code_predictor: 'talker.code_predictor.model.',
};

/**
 * Parses a config.json object (any variant above). `part` picks a nested decoder of a composite config:
 * 'text' (default for qwen3_vl), 'talker' (default for qwen3_tts) or 'code_predictor' (the TTS code predictor).
 */
export function parseQwen3Config(json: unknown, part?: 'text' | 'talker' | 'code_predictor', source = 'config'): Qwen3Config {
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new Qwen3ConfigError(`${source}: not a JSON object`);
  let c = json as Json;
  let where = source;
  const nested = (key: string): Json => {
    const v = c[key];
    if (!v || typeof v !== 'object') throw new Qwen3ConfigError(`${where}: model_type ${String(c.model_type)} has no ${key}`);
    where += `.${key}`;
    return v as Json;
  };
  if (c.model_type === 'qwen3_vl') c = nested('text_config');
  if (c.model_type === 'qwen3_tts') c = nested('talker_config');
  if (part === 'code_predictor' && c.model_type === 'qwen3_tts_talker') c = nested('code_predictor_config');
  const modelType = String(c.model_type);
  if (part === 'code_predictor' && modelType !== 'qwen3_tts_talker_code_predictor') throw new Qwen3ConfigError(`${where}: no code predictor in model_type ${modelType}`);
  if (!(modelType in PREFIX)) {
    throw new Qwen3ConfigError(`${where}: model_type ${JSON.stringify(c.model_type)} is not a Qwen3 decoder (${['qwen3_vl', 'qwen3_tts', ...Object.keys(PREFIX)].join(', ')})`);
  }

  const int = (key: string, fallback?: number): number => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw new Qwen3ConfigError(`${where}: ${key} = ${JSON.stringify(v)} must be a positive integer`);
    return v;
  };
  const hiddenSize = int('hidden_size');
  const numHeads = int('num_attention_heads');
  const numKvHeads = int('num_key_value_heads', numHeads);
  const headDim = int('head_dim', hiddenSize / numHeads);
  if (numHeads % numKvHeads) throw new Qwen3ConfigError(`${where}: ${numHeads} heads are not a multiple of ${numKvHeads} KV heads`);
  const act = c.hidden_act ?? 'silu';
  if (act !== 'silu') throw new Qwen3ConfigError(`${where}: hidden_act ${JSON.stringify(act)} (only silu)`);
  if (c.use_sliding_window === true) throw new Qwen3ConfigError(`${where}: use_sliding_window is not supported`);
  const layerTypes = c.layer_types;
  if (Array.isArray(layerTypes) && layerTypes.some((t) => t !== 'full_attention')) {
    throw new Qwen3ConfigError(`${where}: layer_types ${JSON.stringify(layerTypes)}: only full_attention layers are supported`);
  }
  const eps = c.rms_norm_eps ?? 1e-6;
  if (typeof eps !== 'number' || !(eps > 0)) throw new Qwen3ConfigError(`${where}: rms_norm_eps ${JSON.stringify(eps)}`);

  return {
    modelType,
    vocabSize: int('vocab_size'),
    hiddenSize,
    intermediateSize: int('intermediate_size'),
    numLayers: int('num_hidden_layers'),
    numHeads,
    numKvHeads,
    headDim,
    rmsNormEps: eps,
    attentionBias: c.attention_bias === true,
    rope: parseRope(c, modelType, headDim, where),
    keyPrefix: PREFIX[modelType]!,
  };
}

function parseRope(c: Json, modelType: string, headDim: number, where: string): Qwen3Rope {
  // 5.x: rope_parameters {rope_type, rope_theta, mrope_section?, mrope_interleaved?}; 4.x: rope_theta + rope_scaling
  const params = (c.rope_parameters ?? c.rope_scaling ?? {}) as Json;
  const type = params.rope_type ?? params.type ?? 'default';
  if (type !== 'default') throw new Qwen3ConfigError(`${where}: rope_type ${JSON.stringify(type)} is not supported (only default)`);
  const theta = params.rope_theta ?? c.rope_theta ?? 10000;
  if (typeof theta !== 'number' || !(theta > 0)) throw new Qwen3ConfigError(`${where}: rope_theta ${JSON.stringify(theta)}`);
  if (headDim % 2) throw new Qwen3ConfigError(`${where}: head_dim ${headDim} must be even for RoPE`);
  const section = params.mrope_section;
  const wantsMrope = modelType === 'qwen3_vl_text' || modelType === 'qwen3_tts_talker';
  if (!wantsMrope) {
    if (section !== undefined && section !== null) throw new Qwen3ConfigError(`${where}: mrope_section on a 1D-RoPE model_type ${modelType}`);
    return { kind: '1d', theta };
  }
  const sec = (section ?? [24, 20, 20]) as unknown;
  if (!Array.isArray(sec) || sec.length !== 3 || !sec.every((n) => Number.isInteger(n) && n >= 0)) {
    throw new Qwen3ConfigError(`${where}: mrope_section ${JSON.stringify(sec)} must be 3 integers`);
  }
  const [t, h, w] = sec as [number, number, number];
  if (t + h + w !== headDim / 2) throw new Qwen3ConfigError(`${where}: mrope_section [${sec}] sums to ${t + h + w}, head_dim/2 is ${headDim / 2}`);
  // Qwen3VLTextRotaryEmbedding always interleaves; the TTS talker follows rope_scaling.interleaved.
  const interleaved = modelType === 'qwen3_vl_text' ? true : (params.interleaved ?? params.mrope_interleaved) === true;
  if (interleaved && (3 * h > headDim / 2 + 1 || 3 * w > headDim / 2)) {
    throw new Qwen3ConfigError(`${where}: interleaved mrope_section [${sec}] does not fit ${headDim / 2} pairs`);
  }
  return { kind: 'mrope', theta, section: [t, h, w], mode: interleaved ? 'interleaved' : 'sectioned' };
}
