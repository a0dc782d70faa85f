// MiniMax H3 video VAE hyper-parameters, read from the diffusers vae/config.json (AutoencoderKLMiniMaxH3): the
// decoder side and the decode geometry upstream derives from it (temporal chunks, spatial tiles), then the encoder
// side (parseVideoVaeEncoderConfig, at the end).

export interface VideoVaeConfig {
  latentChannels: number;
  outChannels: number;
  /** Spatial and temporal compression: one latent voxel -> a patchT x patch x patch pixel block. */
  patch: number;
  patchT: number;
  numLayers: number;
  numHeads: number;
  headDim: number;
  numRegisterTokens: number;
  ffnMult: number;
  ropeTheta: number;
  /** int(headDim * ropeDimRatio) head dims are rotated (48 of 64), a third per axis (t, h, w). */
  ropeDim: number;
  normEps: number;
  /** Encoder chunk length in pixel frames (17) and trailing latent frames dropped per chunk (3). */
  clipLength: number;
  tokenDrop: number;
  latentsMean: number[];
  latentsStd: number[];
}

export class VideoVaeConfigError extends Error {
  override readonly name = 'VideoVaeConfigError';
}

/** Parses the diffusers config object; `where` names it in errors. */
export function parseVideoVaeConfig(raw: Record<string, unknown>, where = 'video VAE config'): VideoVaeConfig {
  const bad = (why: string) => new VideoVaeConfigError(`${where}: ${why}`);
  const int = (k: string): number => {
    const v = raw[k];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw bad(`"${k}" must be a non-negative integer (got ${JSON.stringify(v)})`);
    return v;
  };
  const num = (k: string): number => {
    const v = raw[k];
    if (typeof v !== 'number' || !Number.isFinite(v)) throw bad(`"${k}" must be a number (got ${JSON.stringify(v)})`);
    return v;
  };
  const ints = (k: string): number[] => {
    const v = raw[k];
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'number' || !Number.isInteger(x) || x < 1)) throw bad(`"${k}" must be a list of positive integers`);
    return v as number[];
  };
  const floats = (k: string, n: number): number[] => {
    const v = raw[k];
    if (!Array.isArray(v) || v.length !== n || v.some((x) => typeof x !== 'number' || !Number.isFinite(x))) throw bad(`"${k}" must be ${n} numbers`);
    return v as number[];
  };
  const latentChannels = int('latent_channels');
  const headDim = int('decoder_attention_head_dim');
  const ratio = num('decoder_rope_dim_ratio');
  const ropeDim = Math.trunc(headDim * ratio);
  if (ropeDim % 6 !== 0) throw bad(`rotated dims ${ropeDim} (head dim ${headDim} x ${ratio}) must be divisible by 6 (3 axes, pairs)`);
  const cfg: VideoVaeConfig = {
    latentChannels,
    outChannels: int('out_channels'),
    patch: ints('spatial_downsample_factors').reduce((a, b) => a * b, 1),
    patchT: ints('temporal_downsample_factors').reduce((a, b) => a * b, 1),
    numLayers: int('decoder_num_layers'),
    numHeads: int('decoder_num_attention_heads'),
    headDim,
    numRegisterTokens: int('decoder_num_register_tokens'),
    ffnMult: int('decoder_ffn_mult'),
    ropeTheta: num('decoder_rope_theta'),
    ropeDim,
    normEps: num('decoder_norm_eps'),
    clipLength: int('clip_length'),
    tokenDrop: int('token_drop'),
    latentsMean: floats('latents_mean', latentChannels),
    latentsStd: floats('latents_std', latentChannels),
  };
  if (cfg.latentsStd.some((s) => s <= 0)) throw bad('latents_std must be positive');
  return cfg;
}

/** Model width: heads x head dim (2048 in the released decoder). */
export const vaeDim = (c: VideoVaeConfig): number => c.numHeads * c.headDim;

/** Python's a % m for m > 0 (non-negative for negative a). */
const pmod = (a: number, m: number): number => ((a % m) + m) % m;

/** The temporal chunking upstream derives from clip_length / token_drop (AutoencoderKLMiniMaxH3.__init__). */
export interface TemporalGeometry {
  /** Latent frames per chunk: ceil(clip_length / patchT) (5). */
  tokensChunk: number;
  /** Leading pixel frames of a decoded chunk that the encoder never had: (-clip_length) mod patchT (3). */
  framePrePadding: number;
  /** Latent frames a clip reads past its chunk (2) and the pixel frames two chunks share (5). */
  tokenOverlap: number;
  frameOverlap: number;
}

export function temporalGeometry(c: VideoVaeConfig): TemporalGeometry {
  const framePrePadding = pmod(-c.clipLength, c.patchT);
  const tokensChunk = Math.ceil(c.clipLength / c.patchT);
  const tokenOverlap = pmod(-c.tokenDrop, tokensChunk);
  return { tokensChunk, framePrePadding, tokenOverlap, frameOverlap: Math.max(tokenOverlap * c.patchT - framePrePadding, 0) };
}

/** One temporal clip of the decode: latent frames [start, start + length) of the (tail-padded) latents. */
export interface ClipPlan {
  start: number;
  length: number;
}

export interface DecodePlan {
  /** Latent frames appended by repeating the last one (a length that is not 5k + 2). */
  padTokens: number;
  clips: ClipPlan[];
  /** Pixel frames of the result (17k + 5 for 5k + 2 latent frames). */
  frames: number;
}

/** The chunk plan of upstream's `_decode` for T latent frames, and how many pixel frames survive the tail cut. */
export function decodePlan(c: VideoVaeConfig, T: number): DecodePlan {
  if (!Number.isInteger(T) || T < 1) throw new RangeError(`video VAE: ${T} latent frames`);
  const g = temporalGeometry(c);
  const drop = c.tokenDrop > 0 ? 1 : 0;
  const numTokens = T + c.tokenDrop;
  const padTokens = pmod(-numTokens, g.tokensChunk);
  const numChunks = (numTokens + padTokens) / g.tokensChunk - drop;
  const padded = T + padTokens;
  const chunkFrames = g.tokensChunk * c.patchT;
  const clips: ClipPlan[] = [];
  let frames = 0;
  for (let i = 0; i < numChunks; i++) {
    const start = i * g.tokensChunk;
    const length = Math.min(g.tokensChunk + g.tokenOverlap, padded - start);
    clips.push({ start, length });
    const clipFrames = length * c.patchT;
    frames += Math.max(Math.min(chunkFrames, clipFrames) - g.framePrePadding, 0);
    if (drop && i === numChunks - 1) frames += Math.max(Math.min(chunkFrames, clipFrames - chunkFrames) - g.framePrePadding, 0);
  }
  if (numChunks < 1) throw new RangeError(`video VAE: ${T} latent frames make no chunk`);
  // a chunk's last latent frame covers clip_length % patchT pixel frames, the others patchT
  const intraTail = c.clipLength % c.patchT;
  for (let k = 0; k < padTokens; k++) frames -= intraTail && (T + k) % g.tokensChunk === 0 ? intraTail : c.patchT;
  return { padTokens, clips, frames };
}

/** Spatial tiling in pixels (upstream enable_tiling; vae_tile_size 256 / vae_tile_overlap_min 64 when released). */
export interface TilingOptions {
  tileHeight: number;
  tileWidth: number;
  minOverlapHeight: number;
  minOverlapWidth: number;
}

export const RELEASED_TILING: TilingOptions = { tileHeight: 256, tileWidth: 256, minOverlapHeight: 64, minOverlapWidth: 64 };

/**
 * Upstream `_split_tiles`: the fewest `tile`-wide tiles covering `length` pixels with every overlap >= minOverlap,
 * the slack spread round-robin over the overlaps in whole `ratio` steps (tile edges stay on the latent grid).
 */
export function splitTiles(length: number, tile: number, minOverlap: number, ratio: number): { starts: number[]; sizes: number[]; overlaps: number[] } {
  if (tile >= length) return { starts: [0], sizes: [length], overlaps: [] };
  if (tile <= minOverlap) throw new RangeError(`video VAE tiling: tile ${tile} must exceed its overlap ${minOverlap}`);
  let n = Math.ceil(length / tile);
  while (tile * n - minOverlap * (n - 1) - length < 0) n++;
  const overlaps = new Array<number>(n - 1).fill(minOverlap);
  const remaining = tile * n - minOverlap * (n - 1) - length;
  for (let i = 0; i < Math.floor(remaining / ratio); i++) overlaps[i % (n - 1)]! += ratio;
  const starts = [0];
  for (let i = 0; i < n - 1; i++) starts.push(starts[i]! + tile - overlaps[i]!);
  return { starts, sizes: new Array<number>(n).fill(tile), overlaps };
}

// ---- encoder side (the causal 3D CNN, cnn.ts) ----

export interface VideoVaeEncoderConfig {
  inChannels: number;
  latentChannels: number;
  blockOutChannels: number[];
  layersPerBlock: number;
  spatialFactors: number[];
  temporalFactors: number[];
  groups: number;
  eps: number;
  /** Product of the spatial factors (16 released): pixels per latent along h and w. */
  ratio: number;
  clipLength: number;
  tokenDrop: number;
  latentsMean: number[];
  latentsStd: number[];
}

/** The encoder side of the diffusers vae/config.json (AutoencoderKLMiniMaxH3). */
export function parseVideoVaeEncoderConfig(raw: Record<string, unknown>, where = 'video VAE config'): VideoVaeEncoderConfig {
  const bad = (why: string) => new VideoVaeConfigError(`${where}: ${why}`);
  const int = (k: string, min = 1): number => {
    const v = raw[k];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min) throw bad(`"${k}" must be an integer >= ${min} (got ${JSON.stringify(v)})`);
    return v;
  };
  const ints = (k: string): number[] => {
    const v = raw[k];
    if (!Array.isArray(v) || v.length === 0 || v.some((x) => typeof x !== 'number' || !Number.isInteger(x) || x < 1)) throw bad(`"${k}" must be a list of positive integers`);
    return [...(v as number[])];
  };
  const floats = (k: string, n: number): number[] => {
    const v = raw[k];
    if (!Array.isArray(v) || v.length !== n || v.some((x) => typeof x !== 'number' || !Number.isFinite(x))) throw bad(`"${k}" must be ${n} numbers`);
    return [...(v as number[])];
  };
  const latentChannels = int('latent_channels');
  const blockOutChannels = ints('block_out_channels');
  const spatialFactors = ints('spatial_downsample_factors');
  const temporalFactors = ints('temporal_downsample_factors');
  const levels = blockOutChannels.length;
  if (spatialFactors.length !== levels || temporalFactors.length !== levels) throw bad(`one spatial and one temporal factor per level (${levels})`);
  if ([...spatialFactors, ...temporalFactors].some((f) => f > 2)) throw bad('downsample factors must be 1 or 2 (one stride-2 conv per level)');
  const groups = int('norm_num_groups');
  if (blockOutChannels.some((c) => c % groups)) throw bad(`block_out_channels ${JSON.stringify(blockOutChannels)} must split into ${groups} groups`);
  const mode = raw.spatial_padding_mode ?? 'reflect';
  if (mode !== 'reflect') throw bad(`spatial_padding_mode ${JSON.stringify(mode)}: only "reflect" (the released mode) is implemented`);
  const eps = raw.norm_eps;
  if (typeof eps !== 'number' || !(eps > 0)) throw bad('"norm_eps" must be a positive number');
  const cfg: VideoVaeEncoderConfig = {
    inChannels: int('in_channels'),
    latentChannels,
    blockOutChannels,
    layersPerBlock: int('layers_per_block', 0), // 0: conv_in, the downsamplers and conv_out alone (upstream builds it)
    spatialFactors,
    temporalFactors,
    groups,
    eps,
    ratio: spatialFactors.reduce((a, b) => a * b, 1),
    clipLength: int('clip_length'),
    tokenDrop: int('token_drop', 0),
    latentsMean: floats('latents_mean', latentChannels),
    latentsStd: floats('latents_std', latentChannels),
  };
  if (cfg.latentsStd.some((s) => s <= 0)) throw bad('latents_std must be positive');
  return cfg;
}
