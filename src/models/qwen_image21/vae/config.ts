// vae/config.json of Qwen-Image-2.1 (diffusers AutoencoderKLQwenImage21) and the geometry derived from it.
// Only the single-frame image path is built: every "3D" piece upstream runs on one frame, where its causal
// convolutions are plain Conv2d and its temporal flags only change how the residual shortcuts group channels.

export class QwenImage21VaeConfigError extends Error {}

export interface QwenImage21VaeConfig {
  baseDim: number;
  decoderBaseDim: number;
  zDim: number;
  dimMult: number[];
  numResBlocks: number;
  /** Per encoder level (the decoder reads it reversed). */
  temporalDownsample: boolean[];
  inChannels: number;
  outChannels: number;
  latentsMean: number[];
  latentsStd: number[];
  /** 2 ** (levels - 1): 16 for the released model. */
  spatialRatio: number;
}

/** The released model's config.json (the class defaults; the checkpoint's own file was not reachable). */
export const QWEN_IMAGE21_VAE_DEFAULTS = {
  base_dim: 96,
  decoder_base_dim: 144,
  z_dim: 64,
  dim_mult: [1, 2, 4, 8, 8],
  num_res_blocks: 2,
  attn_scales: [],
  temperal_downsample: [false, true, true, true],
  dropout: 0.0,
  is_residual: true,
  in_channels: 4,
  out_channels: 4,
  patch_size: null,
  scale_factor_temporal: 8,
  scale_factor_spatial: 16,
} as const;

const KNOWN = new Set([
  ...Object.keys(QWEN_IMAGE21_VAE_DEFAULTS), 'latents_mean', 'latents_std', '_class_name', '_diffusers_version', '_name_or_path', '_use_default_values',
]);

/** Parses a diffusers config object; refuses what this implementation does not build (patching, non-residual, attn_scales). */
export function parseQwenImage21VaeConfig(raw: Record<string, unknown>, where = 'vae config'): QwenImage21VaeConfig {
  const bad = (why: string) => new QwenImage21VaeConfigError(`${where}: ${why}`);
  for (const k of Object.keys(raw)) if (!KNOWN.has(k)) throw bad(`unknown key "${k}"`);
  const get = <T>(k: keyof typeof QWEN_IMAGE21_VAE_DEFAULTS): T => (k in raw ? raw[k] : QWEN_IMAGE21_VAE_DEFAULTS[k]) as T;
  const int = (k: keyof typeof QWEN_IMAGE21_VAE_DEFAULTS, v = get<unknown>(k)): number => {
    if (!Number.isInteger(v) || (v as number) < 1) throw bad(`${k} must be a positive integer (got ${JSON.stringify(v)})`);
    return v as number;
  };
  const baseDim = int('base_dim');
  const dec = get<unknown>('decoder_base_dim');
  const decoderBaseDim = dec === null ? baseDim : int('decoder_base_dim', dec);
  const zDim = int('z_dim');
  const dimMult = get<unknown>('dim_mult');
  if (!Array.isArray(dimMult) || dimMult.length < 1 || !dimMult.every((m) => Number.isInteger(m) && m >= 1)) throw bad('dim_mult must be positive integers');
  const temporal = get<unknown>('temperal_downsample');
  if (!Array.isArray(temporal) || temporal.length !== dimMult.length - 1 || !temporal.every((t) => typeof t === 'boolean')) {
    throw bad(`temperal_downsample needs ${dimMult.length - 1} booleans`);
  }
  if (get<unknown>('is_residual') !== true) throw bad('only is_residual: true (the Qwen-Image-2.1 variant) is built');
  const attn = get<unknown>('attn_scales');
  if (!Array.isArray(attn) || attn.length !== 0) throw bad('attn_scales must be [] (no attention inside the levels)');
  if (get<unknown>('patch_size') !== null) throw bad('patch_size must be null (no patchify)');
  const ratio = 2 ** (dimMult.length - 1);
  if (get<unknown>('scale_factor_spatial') !== ratio) throw bad(`scale_factor_spatial ${JSON.stringify(get('scale_factor_spatial'))} != 2 ** levels = ${ratio}`);
  const stats = (k: string): number[] => {
    const v = raw[k];
    if (!Array.isArray(v) || v.length !== zDim || !v.every((x) => typeof x === 'number' && Number.isFinite(x))) throw bad(`${k} must be ${zDim} numbers`);
    return v as number[];
  };
  const latentsStd = stats('latents_std');
  if (latentsStd.some((s) => !(s > 0))) throw bad('latents_std must be > 0');
  return {
    baseDim,
    decoderBaseDim,
    zDim,
    dimMult: dimMult as number[],
    numResBlocks: int('num_res_blocks'),
    temporalDownsample: temporal as boolean[],
    inChannels: int('in_channels'),
    outChannels: int('out_channels'),
    latentsMean: stats('latents_mean'),
    latentsStd,
    spatialRatio: ratio,
  };
}

/** One encoder level: ResidualDownBlock(inDim -> outDim) with its shortcut's grouping (upstream AvgDown3D). */
export interface DownLevel { inDim: number; outDim: number; down: boolean; temporal: boolean }
/** One decoder level: ResidualUpBlock(inDim -> outDim), numResBlocks + 1 resnets, then 2x up (DupUp3D shortcut). */
export interface UpLevel { inDim: number; outDim: number; up: boolean; temporal: boolean }

export function encoderLevels(c: QwenImage21VaeConfig): DownLevel[] {
  const dims = [1, ...c.dimMult].map((m) => m * c.baseDim);
  const last = c.dimMult.length - 1;
  return c.dimMult.map((_, i) => ({ inDim: dims[i]!, outDim: dims[i + 1]!, down: i !== last, temporal: i !== last && c.temporalDownsample[i]! }));
}

export function decoderLevels(c: QwenImage21VaeConfig): UpLevel[] {
  const dims = [c.dimMult.at(-1)!, ...[...c.dimMult].reverse()].map((m) => m * c.decoderBaseDim);
  const temporalUp = [...c.temporalDownsample].reverse();
  const last = c.dimMult.length - 1;
  return c.dimMult.map((_, i) => ({ inDim: dims[i]!, outDim: dims[i + 1]!, up: i !== last, temporal: i !== last && temporalUp[i]! }));
}

/** Channels of the decoder's mid block (conv_in's output). */
export const decoderMidDim = (c: QwenImage21VaeConfig) => c.dimMult.at(-1)! * c.decoderBaseDim;
export const encoderMidDim = (c: QwenImage21VaeConfig) => c.dimMult.at(-1)! * c.baseDim;
