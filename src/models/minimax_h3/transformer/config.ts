// MiniMax H3 transformer hyper-parameters, read from the real config.json in either naming:
//   diffusers  transformer/config.json         MiniMaxH3Transformer3DModel (num_refiner_layers, ffn_dim, in_channels ...)
//   native     FL2VA|Ref2VA/transformer/config  MiniMaxH3DiTModel (token_refiner_num_layers, ffn_hidden_size,
//                                              latents_dim, adaln_out_features = 18 * hidden, rope_inv_freq_len ...)
// Both describe the same network; only the diffusers key format is loadable as is (the native one
// fuses qkv_proj; native-checkpoint.ts presents it under the diffusers names).

export type H3CheckpointFormat = 'diffusers' | 'native';

export interface H3Config {
  /** Which key names the checkpoint beside this config uses. */
  format: H3CheckpointFormat;
  numHeads: number;
  headDim: number;
  /** Residual width; smaller than numHeads * headDim in the released model (5376 vs 7168). */
  hiddenSize: number;
  numLayers: number;
  numRefinerLayers: number;
  ffnDim: number;
  /** Video latent channels (24) and audio latent channels (32). */
  inChannels: number;
  audioInChannels: number;
  /** (t, h, w) patch of the video latents: one row = inChannels * pt * ph * pw values. */
  patchSize: [number, number, number];
  textDim: number;
  /** Sinusoidal timestep embedding size, then the timestep MLP's hidden and output sizes. */
  freqDim: number;
  timeEmbedHiddenDim: number;
  timeEmbedDim: number;
  /** Frequencies per RoPE axis: 2 * 3 * ropeFreqDim head dims are rotated (96 of 128). */
  ropeFreqDim: number;
  ropeTheta: number;
  normEps: number;
  qkNormEps: number;
  finalNormEps: number;
}

export class H3ConfigError extends Error {
  override readonly name = 'H3ConfigError';
}

/** Rows of one patchified video latent patch: inChannels * pt * ph * pw. */
export function videoPatchDim(c: H3Config): number {
  return c.inChannels * c.patchSize[0] * c.patchSize[1] * c.patchSize[2];
}

type Json = Record<string, unknown>;

export function parseH3Config(json: unknown, source = 'config'): H3Config {
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new H3ConfigError(`${source}: not a JSON object`);
  const c = json as Json;
  const cls = c._class_name;
  const format: H3CheckpointFormat = cls === 'MiniMaxH3DiTModel' ? 'native' : 'diffusers';
  if (cls !== undefined && cls !== 'MiniMaxH3Transformer3DModel' && cls !== 'MiniMaxH3DiTModel') {
    throw new H3ConfigError(`${source}: _class_name ${JSON.stringify(cls)} is not a MiniMax H3 transformer`);
  }
  // diffusers name, native name (same meaning)
  const pick = (d: string, n: string): unknown => (format === 'native' ? c[n] ?? c[d] : c[d]);
  const int = (d: string, n = d): number => {
    const v = pick(d, n);
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw new H3ConfigError(`${source}: ${format === 'native' ? n : d} = ${JSON.stringify(v)} must be a positive integer`);
    return v;
  };
  const num = (d: string, n: string, fallback: number): number => {
    const v = pick(d, n) ?? fallback;
    if (typeof v !== 'number' || !(v > 0)) throw new H3ConfigError(`${source}: ${d} = ${JSON.stringify(v)} must be a positive number`);
    return v;
  };
  const patch = pick('patch_size', 'patch_size') ?? [1, 2, 2];
  if (!Array.isArray(patch) || patch.length !== 3 || patch.some((p) => !Number.isInteger(p) || p < 1)) {
    throw new H3ConfigError(`${source}: patch_size ${JSON.stringify(patch)} must be three positive integers (t, h, w)`);
  }
  const cfg: H3Config = {
    format,
    numHeads: int('num_attention_heads'),
    headDim: int('attention_head_dim'),
    hiddenSize: int('hidden_size'),
    numLayers: int('num_layers'),
    numRefinerLayers: int('num_refiner_layers', 'token_refiner_num_layers'),
    ffnDim: int('ffn_dim', 'ffn_hidden_size'),
    inChannels: int('in_channels', 'latents_dim'),
    audioInChannels: int('audio_in_channels', 'audio_latents_dim'),
    patchSize: patch as [number, number, number],
    textDim: int('text_dim'),
    freqDim: int('freq_dim', 'timestep_input_dim'),
    timeEmbedHiddenDim: int('time_embed_hidden_dim', 'time_embed_hidden_size'),
    timeEmbedDim: int('time_embed_dim'),
    ropeFreqDim: int('rope_freq_dim', 'rope_inv_freq_len'),
    ropeTheta: num('rope_theta', 'rope_theta', 10000),
    normEps: num('norm_eps', 'norm_eps', 1e-5),
    qkNormEps: num('qk_norm_eps', 'qk_norm_eps', 1e-5),
    finalNormEps: num('final_norm_eps', 'final_norm_eps', 1e-5),
  };
  if (cfg.freqDim % 2) throw new H3ConfigError(`${source}: freq_dim ${cfg.freqDim} must be even (cos and sin halves)`);
  if (6 * cfg.ropeFreqDim > cfg.headDim) {
    throw new H3ConfigError(`${source}: 3 axes x 2 x ${cfg.ropeFreqDim} rotated dims exceed attention_head_dim ${cfg.headDim}`);
  }
  if (format === 'native') {
    // The native config states the AdaLN widths; they must agree with 6 parameters x 3 modalities.
    const check = (key: string, want: number) => {
      if (c[key] !== undefined && c[key] !== want) throw new H3ConfigError(`${source}: ${key} = ${JSON.stringify(c[key])}, expected ${want} for hidden_size ${cfg.hiddenSize}`);
    };
    check('adaln_out_features', 18 * cfg.hiddenSize);
    check('final_adaln_out_features', 2 * cfg.hiddenSize);
  }
  return cfg;
}
