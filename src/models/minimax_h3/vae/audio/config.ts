// MiniMax H3 audio VAE hyper-parameters, read from the diffusers config (audio_vae/config.json,
// AutoencoderKLMiniMaxH3Audio): the decoder side, then the encoder side (parseAudioVaeEncoderConfig). The native
// partition's files (FL2VA/audio_vae/{config.json,config.yaml,metadata.json}) name the rates but not the BigVGAN
// kernel sizes or AMP dilations, so they cannot describe the decoder on their own: only the diffusers config is parsed.

export interface AudioVaeConfig {
  /** Diffusion latent width (32): the input of dec_in_proj. */
  latentChannels: number;
  /** dec_in_proj's output width (2048) = the BigVGAN decoder's input width. */
  latentDim: number;
  /** BigVGAN's initial width (1024), halved by every upsampling stage. */
  decoderDim: number;
  /** Per stage: transposed-conv stride and kernel ((5, 9), (5, 9), (2, 4) x 5 in the real model). */
  decoderRates: number[];
  decoderKernelSizes: number[];
  /** The parallel AMP blocks of every stage: kernel sizes (3, 7, 11) and their dilations ((1, 3, 5) each). */
  resblockKernelSizes: number[];
  resblockDilationSizes: number[][];
  samplingRate: number;
  /** Per latent channel: the pipeline de-normalises latents * std + mean before decoding. */
  latentsMean: number[];
  latentsStd: number[];
}

export class AudioVaeConfigError extends Error {
  override readonly name = 'AudioVaeConfigError';
}

/** Waveform samples per latent frame: prod(decoderRates) (800 = 32 kHz / 40 Hz). */
export const hopLength = (c: AudioVaeConfig): number => c.decoderRates.reduce((a, r) => a * r, 1);

/** The config object and the field readers both parses use; errors name the source, the key and its value. */
function fieldReaders(json: unknown, source: string) {
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new AudioVaeConfigError(`${source}: not a JSON object`);
  const c = json as Record<string, unknown>;
  const bad = (key: string, why: string) => new AudioVaeConfigError(`${source}: ${key} = ${JSON.stringify(c[key])} ${why}`);
  const isPosInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v > 0;
  const int = (key: string): number => {
    if (!isPosInt(c[key])) throw bad(key, 'must be a positive integer');
    return c[key] as number;
  };
  const ints = (key: string): number[] => {
    const v = c[key];
    if (!Array.isArray(v) || v.length === 0 || !v.every(isPosInt)) throw bad(key, 'must be a non-empty list of positive integers');
    return [...v];
  };
  const floats = (key: string, n: number, positive: boolean): number[] => {
    const v = c[key];
    if (!Array.isArray(v) || v.length !== n || !v.every((x) => typeof x === 'number' && Number.isFinite(x) && (!positive || x > 0))) {
      throw bad(key, `must be ${n} finite${positive ? ' positive' : ''} numbers (one per latent channel)`);
    }
    return [...v];
  };
  return { c, bad, isPosInt, int, ints, floats };
}

export function parseAudioVaeConfig(json: unknown, source = 'audio_vae config'): AudioVaeConfig {
  const { c, bad, isPosInt, int, ints, floats } = fieldReaders(json, source);
  if (c._class_name !== undefined && c._class_name !== 'AutoencoderKLMiniMaxH3Audio') {
    throw new AudioVaeConfigError(`${source}: _class_name ${JSON.stringify(c._class_name)} is not AutoencoderKLMiniMaxH3Audio (the diffusers audio VAE config)`);
  }
  const latentChannels = int('latent_channels');
  const dil = c.resblock_dilation_sizes;
  if (!Array.isArray(dil) || dil.length === 0 || !dil.every((d) => Array.isArray(d) && d.length > 0 && d.every(isPosInt))) {
    throw bad('resblock_dilation_sizes', 'must be a non-empty list of non-empty lists of positive integers');
  }
  const cfg: AudioVaeConfig = {
    latentChannels,
    latentDim: int('latent_dim'),
    decoderDim: int('decoder_dim'),
    decoderRates: ints('decoder_rates'),
    decoderKernelSizes: ints('decoder_kernel_sizes'),
    resblockKernelSizes: ints('resblock_kernel_sizes'),
    resblockDilationSizes: (dil as number[][]).map((d) => [...d]),
    samplingRate: int('sampling_rate'),
    latentsMean: floats('latents_mean', latentChannels, false),
    latentsStd: floats('latents_std', latentChannels, true),
  };
  const stages = cfg.decoderRates.length;
  if (cfg.decoderKernelSizes.length !== stages) throw bad('decoder_kernel_sizes', `must have one kernel per rate (${stages})`);
  if (cfg.resblockDilationSizes.length !== cfg.resblockKernelSizes.length) {
    throw bad('resblock_dilation_sizes', `must have one list per resblock kernel (${cfg.resblockKernelSizes.length})`);
  }
  if (cfg.decoderDim % 2 ** stages) throw bad('decoder_dim', `must halve ${stages} times`);
  cfg.decoderRates.forEach((r, i) => {
    const k = cfg.decoderKernelSizes[i]!;
    // padding (k - r) / 2 must be exact for the stage to upsample by exactly r (what chunked decoding relies on)
    if (k < r || (k - r) % 2) throw bad('decoder_kernel_sizes', `: stage ${i} kernel ${k} with rate ${r} does not upsample by exactly ${r} (needs k >= r, k - r even)`);
  });
  for (const k of cfg.resblockKernelSizes) if (k % 2 === 0) throw bad('resblock_kernel_sizes', `: kernel ${k} is even (AMP convs keep the length only with odd kernels)`);
  return cfg;
}

// ---- encoder side (the DAC encoder + attention projection, encoder.ts) ----

export interface AudioVaeEncoderConfig {
  /** Width of the first conv (64 released), doubled by every encoder block. */
  encoderDim: number;
  /** Encoder strides (2, 4, 4, 5, 5): their product is the hop, samples per latent frame (800). */
  encoderRates: number[];
  /** The DAC encoder's output width (2048) = the attention projection's input. */
  latentDim: number;
  latentChannels: number;
  numHeads: number;
  latentsMean: number[];
  latentsStd: number[];
}

/** The encoder side of the diffusers audio_vae/config.json (AutoencoderKLMiniMaxH3Audio). */
export function parseAudioVaeEncoderConfig(json: unknown, source = 'audio_vae config'): AudioVaeEncoderConfig {
  const { bad, int, ints, floats } = fieldReaders(json, source);
  const encoderRates = ints('encoder_rates');
  const latentChannels = int('latent_channels');
  const cfg: AudioVaeEncoderConfig = {
    encoderDim: int('encoder_dim'),
    encoderRates,
    latentDim: int('latent_dim'),
    latentChannels,
    numHeads: int('num_attention_heads'),
    latentsMean: floats('latents_mean', latentChannels, false),
    latentsStd: floats('latents_std', latentChannels, true),
  };
  if (cfg.latentDim % cfg.numHeads) throw bad('num_attention_heads', `must divide latent_dim ${cfg.latentDim}`);
  if (cfg.latentDim % latentChannels) throw bad('latent_dim', `must be a multiple of latent_channels ${latentChannels}`);
  return cfg;
}

/** Samples per latent frame: prod(encoder_rates). */
export const encoderHop = (c: AudioVaeEncoderConfig): number => c.encoderRates.reduce((a, r) => a * r, 1);
