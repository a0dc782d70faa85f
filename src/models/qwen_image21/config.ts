// Qwen-Image-2.1 transformer hyper-parameters from transformer/config.json (diffusers
// QwenImage21Transformer2DModel). The real file was not reachable here; the reported one carries
// attention_head_dim 128, axes_dims_rope [16, 56, 56], in/out_channels 64, num_attention_heads 32,
// num_layers 32, patch_size 1, and maybe context_in_dim 4096, mlp_ratio 3, eps 1e-6, causal_condition true.
// Missing keys take the class defaults (below), so both reported variants parse to the same model.

export interface QwenImage21Config {
  /** Latent channels in (64) and out (64; out_channels null falls back to in_channels). */
  inChannels: number;
  outChannels: number;
  numLayers: number;
  numHeads: number;
  headDim: number;
  /** numHeads * headDim (4096). */
  dim: number;
  /** Width of the text encoder's hidden states (Qwen3-VL-8B: 4096). */
  contextInDim: number;
  /** SwiGLU width = dim * mlpRatio. */
  mlpRatio: number;
  /** Rotated dims per axis (frame, height, width); sum = headDim. */
  axesDimsRope: [number, number, number];
  /** RoPE base (fixed in the upstream class, not a config key). */
  ropeTheta: number;
  eps: number;
  /** Text and reference tokens are modulated from t = 0 (their keys and values can then be cached across steps). */
  causalCondition: boolean;
}

export class QwenImage21ConfigError extends Error {
  override readonly name = 'QwenImage21ConfigError';
}

/** The class defaults of QwenImage21Transformer2DModel.__init__ (the real model). */
export const QWEN_IMAGE21_DEFAULTS = {
  patch_size: 1,
  in_channels: 64,
  out_channels: 64,
  num_layers: 32,
  attention_head_dim: 128,
  num_attention_heads: 32,
  context_in_dim: 4096,
  mlp_ratio: 3,
  axes_dims_rope: [16, 56, 56],
  eps: 1e-6,
  causal_condition: true,
} as const;

const KNOWN = new Set([...Object.keys(QWEN_IMAGE21_DEFAULTS), '_class_name', '_diffusers_version', '_name_or_path']);

export function parseQwenImage21Config(json: unknown, source = 'transformer/config.json'): QwenImage21Config {
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new QwenImage21ConfigError(`${source}: not a JSON object`);
  const c = json as Record<string, unknown>;
  const cls = c._class_name;
  if (cls !== undefined && cls !== 'QwenImage21Transformer2DModel') {
    throw new QwenImage21ConfigError(`${source}: _class_name ${JSON.stringify(cls)} is not QwenImage21Transformer2DModel`);
  }
  const unknown = Object.keys(c).filter((k) => !KNOWN.has(k));
  if (unknown.length) throw new QwenImage21ConfigError(`${source}: unknown keys ${unknown.join(', ')} (the model would not be what the file describes)`);
  const d = QWEN_IMAGE21_DEFAULTS as Record<string, unknown>;
  const get = (k: string): unknown => (c[k] === undefined ? d[k] : c[k]);
  const int = (k: string): number => {
    const v = get(k);
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw new QwenImage21ConfigError(`${source}: ${k} = ${JSON.stringify(v)} must be a positive integer`);
    return v;
  };
  const patch = int('patch_size');
  if (patch !== 1) throw new QwenImage21ConfigError(`${source}: patch_size ${patch}: Qwen-Image-2.1 reads latents unpatched (only 1 is supported)`);
  const inChannels = int('in_channels');
  const outRaw = c.out_channels === null ? inChannels : get('out_channels');
  const outChannels = typeof outRaw === 'number' && Number.isInteger(outRaw) && outRaw > 0 ? outRaw : Number.NaN;
  if (Number.isNaN(outChannels)) throw new QwenImage21ConfigError(`${source}: out_channels = ${JSON.stringify(outRaw)} must be a positive integer or null`);
  const numHeads = int('num_attention_heads');
  const headDim = int('attention_head_dim');
  const axes = get('axes_dims_rope');
  if (!Array.isArray(axes) || axes.length !== 3 || !axes.every((n) => Number.isInteger(n) && n > 0 && n % 2 === 0)) {
    throw new QwenImage21ConfigError(`${source}: axes_dims_rope ${JSON.stringify(axes)} must be 3 even positive integers`);
  }
  const rotated = axes.reduce((a: number, n: number) => a + n, 0);
  if (rotated !== headDim) throw new QwenImage21ConfigError(`${source}: axes_dims_rope [${axes}] rotate ${rotated} dims, attention_head_dim is ${headDim}`);
  const eps = get('eps');
  if (typeof eps !== 'number' || !(eps > 0)) throw new QwenImage21ConfigError(`${source}: eps ${JSON.stringify(eps)} must be > 0`);
  const causal = get('causal_condition');
  if (typeof causal !== 'boolean') throw new QwenImage21ConfigError(`${source}: causal_condition ${JSON.stringify(causal)} must be true or false`);
  return {
    inChannels,
    outChannels,
    numLayers: int('num_layers'),
    numHeads,
    headDim,
    dim: numHeads * headDim,
    contextInDim: int('context_in_dim'),
    mlpRatio: int('mlp_ratio'),
    axesDimsRope: axes as [number, number, number],
    ropeTheta: 10000,
    eps,
    causalCondition: causal,
  };
}
