// Qwen3-TTS-12Hz configs, read from the checkpoint's own files (docs/models/qwen3-tts.md):
//   config.json                       Qwen3TTSConfig: text-side ids, talker (+ code predictor), speaker encoder
//   generation_config.json            sampling defaults for the talker and the code predictor ("sub-talker")
//   speech_tokenizer/config.json      Qwen3TTSTokenizerV2Config: codec encoder (Mimi) and decoder
// The two decoders (talker, code predictor) are parsed by the shared Qwen3 parser; this file adds what is
// specific to TTS and checks the invariants the prompt and the generation loop rely on.
import { parseQwen3Config, type Qwen3Config } from '../qwen3/config';

export class Qwen3TtsConfigError extends Error {
  override readonly name = 'Qwen3TtsConfigError';
}

/** Special codec ids of the talker's vocabulary (codes of codebook 0 are [0, codebookSize)). */
export interface CodecIds {
  pad: number;
  bos: number;
  eos: number;
  think: number;
  nothink: number;
  thinkBos: number;
  thinkEos: number;
}

/** Text-side ids (Qwen BPE vocabulary plus the TTS tokens). */
export interface TextIds {
  imStart: number;
  imEnd: number;
  assistant: number;
  ttsPad: number;
  ttsBos: number;
  ttsEos: number;
}

export interface SpeakerEncoderConfig {
  melDim: number;
  /** Embedding width; equals the talker's hidden size (the vector is a prompt row as is). */
  encDim: number;
  channels: number[];
  kernelSizes: number[];
  dilations: number[];
  attentionChannels: number;
  res2netScale: number;
  seChannels: number;
  sampleRate: number;
}

export interface Qwen3TtsConfig {
  /** "0b6", "1b7" (or whatever a generated checkpoint says). */
  modelSize: string;
  /** "base" for the voice-clone checkpoints (the only kind with a speaker encoder). */
  modelType: string;
  text: TextIds;
  talker: Qwen3Config & {
    textVocabSize: number;
    textHiddenSize: number;
    numCodeGroups: number;
    codec: CodecIds;
    /** Lower-case language name -> codec id, as in config.json (keys like "english"). */
    languageIds: Record<string, number>;
  };
  codePredictor: Qwen3Config & { numCodeGroups: number };
  /** Codes of codebook 0 are [0, codebookSize); the talker vocab is codebookSize + 1024 (specials on top). */
  codebookSize: number;
  speakerEncoder: SpeakerEncoderConfig;
}

type Json = Record<string, unknown>;

function obj(v: unknown, where: string): Json {
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Qwen3TtsConfigError(`${where}: not a JSON object`);
  return v as Json;
}

function int(c: Json, key: string, where: string, fallback?: number, min = 0): number {
  const v = c[key] ?? fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) {
    throw new Qwen3TtsConfigError(`${where}: ${key} = ${JSON.stringify(v)} must be an integer >= ${min}`);
  }
  return v;
}

function intList(c: Json, key: string, where: string, fallback: number[]): number[] {
  const v = c[key] ?? fallback;
  if (!Array.isArray(v) || !v.every((x) => Number.isInteger(x) && x > 0)) {
    throw new Qwen3TtsConfigError(`${where}: ${key} = ${JSON.stringify(v)} must be a list of positive integers`);
  }
  return v as number[];
}

/**
 * Parses config.json of a Qwen3-TTS checkpoint (model_type "qwen3_tts"). Defaults are upstream's
 * (configuration_qwen3_tts.py) where the file may omit a field; where the special ids sit is checked:
 * every special codec id must sit in the top 1024 ids of the talker vocabulary (upstream suppresses that band
 * except eos while generating, and feeds codes below it to the code predictor).
 */
export function parseQwen3TtsConfig(json: unknown, source = 'config.json'): Qwen3TtsConfig {
  const c = obj(json, source);
  if (c.model_type !== 'qwen3_tts') throw new Qwen3TtsConfigError(`${source}: model_type ${JSON.stringify(c.model_type)} is not qwen3_tts`);
  const tw = `${source}.talker_config`;
  const t = obj(c.talker_config, tw);
  const cpw = `${tw}.code_predictor_config`;
  const cp = obj(t.code_predictor_config, cpw);

  const talkerBase = parseQwen3Config(c, 'talker', source);
  const cpBase = parseQwen3Config(c, 'code_predictor', source);
  if (talkerBase.rope.kind !== 'mrope') throw new Qwen3TtsConfigError(`${tw}: the talker needs rope_scaling.mrope_section`);

  const codec: CodecIds = {
    pad: int(t, 'codec_pad_id', tw),
    bos: int(t, 'codec_bos_id', tw),
    eos: int(t, 'codec_eos_token_id', tw),
    think: int(t, 'codec_think_id', tw),
    nothink: int(t, 'codec_nothink_id', tw),
    thinkBos: int(t, 'codec_think_bos_id', tw),
    thinkEos: int(t, 'codec_think_eos_id', tw),
  };
  const langJson = obj(t.codec_language_id ?? {}, `${tw}.codec_language_id`);
  const languageIds: Record<string, number> = {};
  for (const [name, id] of Object.entries(langJson)) {
    if (!Number.isInteger(id)) throw new Qwen3TtsConfigError(`${tw}.codec_language_id.${name} = ${JSON.stringify(id)} is not an id`);
    languageIds[name.toLowerCase()] = id as number;
  }

  const vocab = talkerBase.vocabSize;
  const codebookSize = cpBase.vocabSize;
  if (vocab - 1024 !== codebookSize) {
    throw new Qwen3TtsConfigError(`${source}: talker vocab_size ${vocab} must be the code predictor's ${codebookSize} + 1024 (specials on top)`);
  }
  for (const [name, id] of [...Object.entries(codec), ...Object.entries(languageIds)]) {
    if (id < codebookSize || id >= vocab) {
      throw new Qwen3TtsConfigError(`${tw}: codec id ${name} = ${id} is outside the special band [${codebookSize}, ${vocab})`);
    }
  }

  const numCodeGroups = int(t, 'num_code_groups', tw, 32, 2);
  const cpGroups = int(cp, 'num_code_groups', cpw, 32, 2);
  if (cpGroups !== numCodeGroups) throw new Qwen3TtsConfigError(`${source}: talker has ${numCodeGroups} code groups, code predictor ${cpGroups}`);

  const sw = `${source}.speaker_encoder_config`;
  const s = obj(c.speaker_encoder_config ?? {}, sw);
  const speakerEncoder: SpeakerEncoderConfig = {
    melDim: int(s, 'mel_dim', sw, 128, 1),
    encDim: int(s, 'enc_dim', sw, 1024, 1),
    channels: intList(s, 'enc_channels', sw, [512, 512, 512, 512, 1536]),
    kernelSizes: intList(s, 'enc_kernel_sizes', sw, [5, 3, 3, 3, 1]),
    dilations: intList(s, 'enc_dilations', sw, [1, 2, 3, 4, 1]),
    attentionChannels: int(s, 'enc_attention_channels', sw, 128, 1),
    res2netScale: int(s, 'enc_res2net_scale', sw, 8, 1),
    seChannels: int(s, 'enc_se_channels', sw, 128, 1),
    sampleRate: int(s, 'sample_rate', sw, 24000, 1),
  };
  const se = speakerEncoder;
  if (se.channels.length !== se.kernelSizes.length || se.channels.length !== se.dilations.length) {
    throw new Qwen3TtsConfigError(`${sw}: enc_channels, enc_kernel_sizes and enc_dilations differ in length`);
  }
  const modelType = String(c.tts_model_type ?? '');
  if (modelType === 'base' && se.encDim !== talkerBase.hiddenSize) {
    throw new Qwen3TtsConfigError(`${sw}: enc_dim ${se.encDim} must equal the talker hidden size ${talkerBase.hiddenSize}`);
  }

  return {
    modelSize: String(c.tts_model_size ?? ''),
    modelType,
    text: {
      imStart: int(c, 'im_start_token_id', source, 151644),
      imEnd: int(c, 'im_end_token_id', source, 151645),
      assistant: int(c, 'assistant_token_id', source, 77091),
      ttsPad: int(c, 'tts_pad_token_id', source, 151671),
      ttsBos: int(c, 'tts_bos_token_id', source, 151672),
      ttsEos: int(c, 'tts_eos_token_id', source, 151673),
    },
    talker: {
      ...talkerBase,
      textVocabSize: int(t, 'text_vocab_size', tw, 151936, 1),
      textHiddenSize: int(t, 'text_hidden_size', tw, 2048, 1),
      numCodeGroups,
      codec,
      languageIds,
    },
    codePredictor: { ...cpBase, numCodeGroups: cpGroups },
    codebookSize,
    speakerEncoder,
  };
}

/** Sampling settings (generation_config.json; Qwen3TTSModel._merge_generate_kwargs fills gaps with these). */
export interface Qwen3TtsSampling {
  doSample: boolean;
  temperature: number;
  topK: number;
  topP: number;
  repetitionPenalty: number;
  subtalkerDoSample: boolean;
  subtalkerTemperature: number;
  subtalkerTopK: number;
  subtalkerTopP: number;
  maxNewTokens: number;
}

export const DEFAULT_SAMPLING: Readonly<Qwen3TtsSampling> = {
  doSample: true,
  temperature: 0.9,
  topK: 50,
  topP: 1.0,
  repetitionPenalty: 1.05,
  subtalkerDoSample: true,
  subtalkerTemperature: 0.9,
  subtalkerTopK: 50,
  subtalkerTopP: 1.0,
  maxNewTokens: 2048,
};

export function parseGenerationConfig(json: unknown, source = 'generation_config.json'): Qwen3TtsSampling {
  const c = obj(json, source);
  const num = (key: string, fallback: number, ok: (v: number) => boolean): number => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'number' || !ok(v)) throw new Qwen3TtsConfigError(`${source}: ${key} = ${JSON.stringify(v)} is out of range`);
    return v;
  };
  const bool = (key: string, fallback: boolean): boolean => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'boolean') throw new Qwen3TtsConfigError(`${source}: ${key} = ${JSON.stringify(v)} is not a boolean`);
    return v;
  };
  const d = DEFAULT_SAMPLING;
  const positive = (v: number) => v > 0;
  const prob = (v: number) => v > 0 && v <= 1;
  const count = (v: number) => Number.isInteger(v) && v >= 0;
  return {
    doSample: bool('do_sample', d.doSample),
    temperature: num('temperature', d.temperature, positive),
    topK: num('top_k', d.topK, count),
    topP: num('top_p', d.topP, prob),
    repetitionPenalty: num('repetition_penalty', d.repetitionPenalty, positive),
    subtalkerDoSample: bool('subtalker_dosample', d.subtalkerDoSample),
    subtalkerTemperature: num('subtalker_temperature', d.subtalkerTemperature, positive),
    subtalkerTopK: num('subtalker_top_k', d.subtalkerTopK, count),
    subtalkerTopP: num('subtalker_top_p', d.subtalkerTopP, prob),
    maxNewTokens: num('max_new_tokens', d.maxNewTokens, (v) => Number.isInteger(v) && v > 0),
  };
}

/** The 12 Hz codec decoder (Qwen3TTSTokenizerV2DecoderConfig). */
export interface CodecDecoderConfig {
  codebookSize: number;
  /** RVQ output width; each codebook vector is codebookDim / 2 wide. */
  codebookDim: number;
  latentDim: number;
  decoderDim: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  slidingWindow: number;
  numQuantizers: number;
  /** Transformer-side upsampling (ConvTranspose + ConvNeXt), then the conv stack's rates. */
  upsamplingRatios: number[];
  upsampleRates: number[];
}

/** The Mimi encoder (transformers MimiConfig, the fields Qwen3-TTS's checkpoints set). */
export interface CodecEncoderConfig {
  hiddenSize: number;
  numFilters: number;
  /** Strides of the SEANet encoder, listed as in the config (applied in reverse order). */
  upsamplingRatios: number[];
  kernelSize: number;
  lastKernelSize: number;
  residualKernelSize: number;
  dilationGrowthRate: number;
  /** Channel reduction inside the SEANet residual blocks (C -> C / compress -> C). */
  compress: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  intermediateSize: number;
  normEps: number;
  ropeTheta: number;
  slidingWindow: number;
  codebookSize: number;
  codebookDim: number;
  numQuantizers: number;
  numSemanticQuantizers: number;
  frameRate: number;
}

export interface SpeechTokenizerConfig {
  inputSampleRate: number;
  outputSampleRate: number;
  /** Samples per code frame (1920 at 24 kHz = 12.5 Hz). */
  decodeUpsampleRate: number;
  encodeDownsampleRate: number;
  /** Codebooks kept from the encoder (16 of its 32). */
  encoderValidNumQuantizers: number;
  encoder: CodecEncoderConfig;
  decoder: CodecDecoderConfig;
}

const product = (xs: number[]) => xs.reduce((a, b) => a * b, 1);

export function parseSpeechTokenizerConfig(json: unknown, source = 'speech_tokenizer/config.json'): SpeechTokenizerConfig {
  const c = obj(json, source);
  if (c.model_type !== 'qwen3_tts_tokenizer_12hz') {
    throw new Qwen3TtsConfigError(`${source}: model_type ${JSON.stringify(c.model_type)} is not qwen3_tts_tokenizer_12hz`);
  }
  const dw = `${source}.decoder_config`;
  const d = obj(c.decoder_config, dw);
  const ew = `${source}.encoder_config`;
  const e = obj(c.encoder_config, ew);
  const num = (o: Json, key: string, where: string, fallback?: number): number => {
    const v = o[key] ?? fallback;
    if (typeof v !== 'number' || !(v > 0)) throw new Qwen3TtsConfigError(`${where}: ${key} = ${JSON.stringify(v)} must be a positive number`);
    return v;
  };
  const dHeads = int(d, 'num_attention_heads', dw, 16, 1);
  const dHidden = int(d, 'hidden_size', dw, 1024, 1);
  const decoder: CodecDecoderConfig = {
    codebookSize: int(d, 'codebook_size', dw, 2048, 1),
    codebookDim: int(d, 'codebook_dim', dw, 512, 2),
    latentDim: int(d, 'latent_dim', dw, 1024, 1),
    decoderDim: int(d, 'decoder_dim', dw, 1536, 1),
    hiddenSize: dHidden,
    intermediateSize: int(d, 'intermediate_size', dw, 3072, 1),
    numLayers: int(d, 'num_hidden_layers', dw, 8, 1),
    numHeads: dHeads,
    numKvHeads: int(d, 'num_key_value_heads', dw, 16, 1),
    headDim: int(d, 'head_dim', dw, dHidden / dHeads, 1),
    rmsNormEps: num(d, 'rms_norm_eps', dw, 1e-5),
    ropeTheta: num(d, 'rope_theta', dw, 10000),
    slidingWindow: int(d, 'sliding_window', dw, 72, 1),
    numQuantizers: int(d, 'num_quantizers', dw, 16, 2),
    upsamplingRatios: intList(d, 'upsampling_ratios', dw, [2, 2]),
    upsampleRates: intList(d, 'upsample_rates', dw, [8, 5, 4, 3]),
  };
  if (decoder.codebookDim % 2) throw new Qwen3TtsConfigError(`${dw}: codebook_dim ${decoder.codebookDim} must be even`);
  if (decoder.decoderDim % 2 ** decoder.upsampleRates.length) {
    throw new Qwen3TtsConfigError(`${dw}: decoder_dim ${decoder.decoderDim} must halve ${decoder.upsampleRates.length} times`);
  }
  const eHeads = int(e, 'num_attention_heads', ew, 8, 1);
  const eHidden = int(e, 'hidden_size', ew, 512, 1);
  const encoder: CodecEncoderConfig = {
    hiddenSize: eHidden,
    numFilters: int(e, 'num_filters', ew, 64, 1),
    upsamplingRatios: intList(e, 'upsampling_ratios', ew, [8, 6, 5, 4]),
    kernelSize: int(e, 'kernel_size', ew, 7, 1),
    lastKernelSize: int(e, 'last_kernel_size', ew, 3, 1),
    residualKernelSize: int(e, 'residual_kernel_size', ew, 3, 1),
    dilationGrowthRate: int(e, 'dilation_growth_rate', ew, 2, 1),
    compress: int(e, 'compress', ew, 2, 1),
    numLayers: int(e, 'num_hidden_layers', ew, 8, 1),
    numHeads: eHeads,
    numKvHeads: int(e, 'num_key_value_heads', ew, eHeads, 1),
    headDim: int(e, 'head_dim', ew, eHidden / eHeads, 1),
    intermediateSize: int(e, 'intermediate_size', ew, 2048, 1),
    normEps: num(e, 'norm_eps', ew, 1e-5),
    ropeTheta: num(e, 'rope_theta', ew, 10000),
    slidingWindow: int(e, 'sliding_window', ew, 250, 1),
    codebookSize: int(e, 'codebook_size', ew, 2048, 1),
    codebookDim: int(e, 'codebook_dim', ew, 256, 1),
    numQuantizers: int(e, 'num_quantizers', ew, 32, 2),
    numSemanticQuantizers: int(e, 'num_semantic_quantizers', ew, 1, 1),
    frameRate: num(e, '_frame_rate', ew, 12.5),
  };
  const out: SpeechTokenizerConfig = {
    inputSampleRate: int(c, 'input_sample_rate', source, 24000, 1),
    outputSampleRate: int(c, 'output_sample_rate', source, 24000, 1),
    decodeUpsampleRate: int(c, 'decode_upsample_rate', source, 1920, 1),
    encodeDownsampleRate: int(c, 'encode_downsample_rate', source, 1920, 1),
    encoderValidNumQuantizers: int(c, 'encoder_valid_num_quantizers', source, 16, 1),
    encoder,
    decoder,
  };
  const decodeRate = product(decoder.upsamplingRatios) * product(decoder.upsampleRates);
  if (decodeRate !== out.decodeUpsampleRate) {
    throw new Qwen3TtsConfigError(`${source}: decoder rates multiply to ${decodeRate}, decode_upsample_rate says ${out.decodeUpsampleRate}`);
  }
  // Mimi: the SEANet strides give ceil(sr / prod) Hz; a stride-(that / frame_rate) conv ("downsample") follows.
  const seanetRate = Math.ceil(out.inputSampleRate / product(encoder.upsamplingRatios));
  const encodeRate = product(encoder.upsamplingRatios) * (seanetRate / encoder.frameRate);
  if (encodeRate !== out.encodeDownsampleRate) {
    throw new Qwen3TtsConfigError(`${source}: encoder strides and frame rate give ${encodeRate} samples per frame, encode_downsample_rate says ${out.encodeDownsampleRate}`);
  }
  if (out.encoderValidNumQuantizers !== decoder.numQuantizers || out.encoderValidNumQuantizers > encoder.numQuantizers) {
    throw new Qwen3TtsConfigError(
      `${source}: encoder_valid_num_quantizers ${out.encoderValidNumQuantizers} must equal the decoder's ${decoder.numQuantizers} and fit the encoder's ${encoder.numQuantizers}`,
    );
  }
  return out;
}
