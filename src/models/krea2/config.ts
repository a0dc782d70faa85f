// Krea 2's transformer hyper-parameters: the fields of SingleMMDiTConfig (krea-ai/krea-2 mmdit.py), by their own
// names. The released file is SingleStreamDiT's bare state dict (no config.json beside it), so the real values are
// the preset inference.py builds it with (single_mmdit_large_wide, below); golden fixtures carry tiny ones.
// Derived sizes follow the module constructors:
//   head dim        features / heads
//   RoPE axes       [hd - 12 (hd / 16), 6 (hd / 16), 6 (hd / 16)]     ([32, 48, 48] at hd 128)   SingleStreamDiT
//   SwiGLU width    round_up(floor(2 d / 3) * multiplier, 128)        (16384 at d 6144, 6912 at d 2560)   SwiGLU
//   fusion depth    2 layerwise + 2 refiner blocks (fixed in TextFusionTransformer)

export interface Krea2Config {
  /** Model width (6144). */
  features: number;
  /** Timestep sinusoid width (256). */
  tdim: number;
  /** Width of the text encoder's hidden states (Qwen3-VL-4B: 2560). */
  txtdim: number;
  heads: number;
  kvheads: number;
  /** SwiGLU multiplier (4). */
  multiplier: number;
  layers: number;
  patch: number;
  /** Latent channels (16). */
  channels: number;
  /** RoPE base (1000). */
  theta: number;
  /** Number of encoder hidden states fed to the fusion (12 taps). */
  txtlayers: number;
  txtheads: number;
  txtkvheads: number;
  // derived
  headDim: number;
  txtHeadDim: number;
  axes: [number, number, number];
  mlpDim: number;
  txtMlpDim: number;
  /** Patch token width: channels * patch^2 (64). */
  tokenDim: number;
}

/** RMSNorm eps of every norm (mmdit.RMSNorm default; no module overrides it). */
export const KREA2_EPS = 1e-5;
/** Blocks of each TextFusionTransformer stage (fixed: 2 layerwise, 2 refiner). */
export const KREA2_FUSION_BLOCKS = 2;

/** inference.py single_mmdit_large_wide: the configuration of Krea 2 Raw and Turbo. */
export const KREA2_LARGE_WIDE = {
  features: 6144,
  tdim: 256,
  txtdim: 2560,
  heads: 48,
  kvheads: 12,
  multiplier: 4,
  layers: 28,
  patch: 2,
  channels: 16,
  txtheads: 20,
  txtkvheads: 20,
  txtlayers: 12,
} as const;

/** SingleMMDiTConfig's defaults for the fields the preset leaves out. */
const DEFAULTS: Record<string, unknown> = { bias: false, theta: 1e3, kvheads: null, txtlayers: 1, txtheads: 20, txtkvheads: 20 };
const REQUIRED = ['features', 'tdim', 'txtdim', 'heads', 'multiplier', 'layers', 'patch', 'channels'];
const KNOWN = new Set([...REQUIRED, ...Object.keys(DEFAULTS)]);

export class Krea2ConfigError extends Error {
  override readonly name = 'Krea2ConfigError';
}

/** SwiGLU's hidden width for model width d (mmdit.SwiGLU). */
export function swigluWidth(d: number, multiplier: number, multiple = 128): number {
  const m = Math.floor((2 * d) / 3) * multiplier;
  return multiple * Math.ceil(m / multiple);
}

/** RoPE axis widths for a head dim (SingleStreamDiT.__init__). */
export function ropeAxes(headDim: number): [number, number, number] {
  const u = Math.floor(headDim / 16);
  return [headDim - 12 * u, 6 * u, 6 * u];
}

export function parseKrea2Config(json: unknown, source = 'SingleMMDiTConfig'): Krea2Config {
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new Krea2ConfigError(`${source}: not a JSON object`);
  const c = json as Record<string, unknown>;
  const unknown = Object.keys(c).filter((k) => !KNOWN.has(k));
  if (unknown.length) throw new Krea2ConfigError(`${source}: unknown keys ${unknown.join(', ')} (the model would not be what the config describes)`);
  const get = (k: string): unknown => (c[k] === undefined ? DEFAULTS[k] : c[k]);
  const int = (k: string, v = get(k)): number => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw new Krea2ConfigError(`${source}: ${k} = ${JSON.stringify(v)} must be a positive integer`);
    return v;
  };
  for (const k of REQUIRED) if (c[k] === undefined) throw new Krea2ConfigError(`${source}: ${k} is missing`);
  if (get('bias') !== false) throw new Krea2ConfigError(`${source}: bias ${JSON.stringify(get('bias'))}: only the bias-free blocks of the release are supported`);
  const features = int('features');
  const heads = int('heads');
  const kvheads = get('kvheads') === null ? heads : int('kvheads');
  const txtdim = int('txtdim');
  const txtheads = int('txtheads');
  const txtkvheads = get('txtkvheads') === null ? txtheads : int('txtkvheads');
  const tdim = int('tdim');
  if (tdim % 2 !== 0) throw new Krea2ConfigError(`${source}: tdim ${tdim} must be even (cos and sin halves)`);
  if (features % heads !== 0) throw new Krea2ConfigError(`${source}: features ${features} is not a multiple of heads ${heads}`);
  if (heads % kvheads !== 0) throw new Krea2ConfigError(`${source}: heads ${heads} is not a multiple of kvheads ${kvheads}`);
  if (txtdim % txtheads !== 0) throw new Krea2ConfigError(`${source}: txtdim ${txtdim} is not a multiple of txtheads ${txtheads}`);
  if (txtheads % txtkvheads !== 0) throw new Krea2ConfigError(`${source}: txtheads ${txtheads} is not a multiple of txtkvheads ${txtkvheads}`);
  const headDim = features / heads;
  const axes = ropeAxes(headDim);
  if (axes.some((a) => a % 2 !== 0)) throw new Krea2ConfigError(`${source}: head dim ${headDim} gives odd RoPE axes [${axes}]`);
  const theta = get('theta');
  if (typeof theta !== 'number' || !(theta > 0)) throw new Krea2ConfigError(`${source}: theta ${JSON.stringify(theta)} must be > 0`);
  const multiplier = int('multiplier');
  const patch = int('patch');
  const channels = int('channels');
  return {
    features, tdim, txtdim, heads, kvheads, multiplier, layers: int('layers'), patch, channels, theta,
    txtlayers: int('txtlayers'), txtheads, txtkvheads,
    headDim, txtHeadDim: txtdim / txtheads, axes,
    mlpDim: swigluWidth(features, multiplier),
    txtMlpDim: swigluWidth(txtdim, multiplier),
    tokenDim: channels * patch * patch,
  };
}

/** What a checkpoint can answer: tensor shapes by key (Checkpoint, SyntheticCheckpoint). */
export interface ShapeSource {
  has(key: string): boolean;
  entry(key: string): { shape: readonly number[] };
}

/**
 * The config of a released-format checkpoint (SingleStreamDiT's bare state dict, which ships without one), read off
 * its tensor shapes: widths from `first`, `tmlp`, `txtmlp`; head dims from the QK-norm scales; block counts by key;
 * the SwiGLU multiplier as the one whose rounded width is the stored one. `channels` (the VAE's latent channels) splits
 * the patch token width into channels x patch^2. theta is not stored: SingleMMDiTConfig's default (1e3), which the
 * release uses. The result goes through parseKrea2Config, so it is checked like any config.
 */
export function inferKrea2Config(ckpt: ShapeSource, channels: number, prefix = '', source = 'checkpoint'): Krea2Config {
  const shape = (k: string): readonly number[] => {
    if (!ckpt.has(prefix + k)) throw new Krea2ConfigError(`${source}: no tensor ${prefix + k} (not a Krea 2 SingleStreamDiT state dict)`);
    return ckpt.entry(prefix + k).shape;
  };
  const [features, tokenDim] = shape('first.weight') as [number, number];
  const tdim = shape('tmlp.0.weight')[1]!;
  const txtdim = shape('txtmlp.1.weight')[1]!;
  const txtlayers = shape('txtfusion.projector.weight')[1]!;
  let layers = 0;
  while (ckpt.has(`${prefix}blocks.${layers}.mod.lin`)) layers++;
  if (layers === 0) throw new Krea2ConfigError(`${source}: no blocks.0.mod.lin`);
  const headDim = shape('blocks.0.attn.qknorm.qnorm.scale')[0]!;
  const txtHeadDim = shape('txtfusion.layerwise_blocks.0.attn.qknorm.qnorm.scale')[0]!;
  const kv = shape('blocks.0.attn.wk.weight')[0]!;
  const txtKv = shape('txtfusion.layerwise_blocks.0.attn.wk.weight')[0]!;
  const multiplierOf = (d: number, hidden: number, what: string): number => {
    for (let m = 1; m <= 64; m++) if (swigluWidth(d, m) === hidden) return m;
    throw new Krea2ConfigError(`${source}: ${what} SwiGLU width ${hidden} is round_up(floor(2 x ${d} / 3) x m, 128) for no multiplier m`);
  };
  const multiplier = multiplierOf(features, shape('blocks.0.mlp.gate.weight')[0]!, 'block');
  const txtMultiplier = multiplierOf(txtdim, shape('txtfusion.layerwise_blocks.0.mlp.gate.weight')[0]!, 'text fusion');
  if (swigluWidth(txtdim, multiplier) !== swigluWidth(txtdim, txtMultiplier)) throw new Krea2ConfigError(`${source}: the blocks and the text fusion use different SwiGLU multipliers (${multiplier}, ${txtMultiplier})`);
  const patch = Math.round(Math.sqrt(tokenDim / channels));
  if (channels * patch * patch !== tokenDim) throw new Krea2ConfigError(`${source}: patch tokens of ${tokenDim} are not ${channels} channels x patch^2`);
  return parseKrea2Config(
    { features, tdim, txtdim, heads: features / headDim, kvheads: kv / headDim, multiplier, layers, patch, channels, txtlayers, txtheads: txtdim / txtHeadDim, txtkvheads: txtKv / txtHeadDim },
    source,
  );
}
