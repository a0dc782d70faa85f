// The demo Qwen3-TTS checkpoint: what the service runs when WEIGHTS_DIR has no real one. A tiny random model in the
// published folder format (docs/models/qwen3-tts.md), run through the same code as the real weights; its speech is
// noise, and /api/config says "demo".
//   config.json, generation_config.json, preprocessor_config.json   the real files' structure at tiny sizes: codec
//       ids moved down into a 32-code band as in tools/golden/qwen3_tts.py, text ids from the demo tokenizer
//   vocab.json, merges.txt, tokenizer_config.json                   writeDemoTokenizer (+ "assistant" as one token)
//   model.safetensors (BF16, as released)                           talker.*, speaker_encoder.*
//   speech_tokenizer/{config.json, preprocessor_config.json, model.safetensors (F32)}   decoder.*, encoder.*
// Which tensors exist is not written down here: loadQwen3TtsParts (pipeline.ts) is run against a SyntheticCheckpoint
// (src/models/common/synthetic-checkpoint.ts) that records every key and shape the loaders ask for, and exactly those
// are written (common/random-weights.ts values). The version stamp hashes that list, so a loader that starts reading
// another key regenerates the demo instead of failing on it.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Engine } from '../../engine/engine';
import { writeSafetensors } from '../../engine/safetensors-writer';
import { demoDigest, demoMeta, demoTokenId } from '../common/demo-checkpoint';
import { WeightSynth } from '../common/random-weights';
import { SyntheticCheckpoint, zeroFill, type SyntheticCheckpointOptions } from '../common/synthetic-checkpoint';
import { DEMO_SPECIAL_TOKENS, demoTokenizerInfo, writeDemoTokenizer, type DemoTokenizerInfo } from '../tokenizer';
import { parseGenerationConfig, parseQwen3TtsConfig, parseSpeechTokenizerConfig } from './config';
import { loadQwen3TtsParts, type Qwen3TtsConfigs } from './pipeline';

/** Named in the safetensors metadata; the folder under DEMO_WEIGHTS_DIR is the manifest's profile "demo" field. */
const DEMO_TTS_NAME = 'qwen3-tts';
/** Bump when the generator's values change (the key list is hashed into the version by itself). */
const DEMO_FORMAT = 1;
const DEMO_SEED = 20260317;

/** How Qwen3-TTS checkpoints answer the two questions a loader may ask without a shape. */
export function qwen3TtsCheckpointHints(cfg: Qwen3TtsConfigs): { model: Pick<SyntheticCheckpointOptions, 'has'>; speech: Pick<SyntheticCheckpointOptions, 'shapeOf'> } {
  const enc = cfg.speechTokenizer.encoder;
  return {
    // The released 0.6B has no small_to_mtp_projection (talker and predictor both 1024 wide); the 1.7B has one.
    model: { has: (name) => !name.endsWith('small_to_mtp_projection.weight') || cfg.model.codePredictor.hiddenSize !== cfg.model.talker.hiddenSize },
    // Mimi's input_proj: Conv1d(hidden, vector_quantization_hidden_dimension = codebook_dim, 1).
    speech: { shapeOf: (name) => (name.endsWith('input_proj.weight') ? [enc.codebookDim, enc.hiddenSize, 1] : undefined) },
  };
}

/** Every key and shape loadQwen3TtsParts reads, per weight file, found by running it on `e` against synthetic
 * checkpoints (zeros; at the demo's size this takes a moment). */
export async function recordQwen3TtsKeys(e: Engine, cfg: Qwen3TtsConfigs): Promise<{ model: Map<string, number[]>; speech: Map<string, number[]> }> {
  const hints = qwen3TtsCheckpointHints(cfg);
  const model = new SyntheticCheckpoint({ label: 'model.safetensors', dtype: 'F32', fill: zeroFill, ...hints.model });
  const speech = new SyntheticCheckpoint({ label: 'speech_tokenizer/model.safetensors', dtype: 'F32', fill: zeroFill, ...hints.speech });
  const parts = await loadQwen3TtsParts(e, model.checkpoint, speech.checkpoint, cfg, { dtype: 'f32' });
  parts.free();
  return { model: model.shapes(), speech: speech.shapes() };
}

// ---- the demo's configs ----

/** Codec ids of the real checkpoints move down by this much, so codes are [0, 32) and the specials keep their
 * offsets in the 1024-wide band above (tools/golden/qwen3_tts.py does the same). */
const CODEBOOK = 32;
const SHIFT = 2048 - CODEBOOK;
const REAL_LANGUAGE_IDS: Record<string, number> = {
  chinese: 2055, english: 2050, german: 2053, italian: 2070, portuguese: 2071,
  spanish: 2054, japanese: 2058, korean: 2064, french: 2061, russian: 2069,
};

/** The tokenizer's special tokens plus "assistant" (one token in the real vocabulary, id 77091; the prompt
 * template needs it whole). */
export const DEMO_TTS_TOKENS = [...DEMO_SPECIAL_TOKENS, 'assistant'];

export function demoConfigJson(tok: DemoTokenizerInfo): Record<string, unknown> {
  const id = (t: string) => demoTokenId(tok, t);
  const decoder = (o: Record<string, unknown>) => ({
    hidden_act: 'silu', max_position_embeddings: 32768, rms_norm_eps: 1e-6, rope_theta: 1000000, attention_bias: false,
    attention_dropout: 0, use_sliding_window: false, sliding_window: null, num_code_groups: 16, ...o,
  });
  return {
    architectures: ['Qwen3TTSForConditionalGeneration'],
    assistant_token_id: id('assistant'),
    im_end_token_id: id('<|im_end|>'),
    im_start_token_id: id('<|im_start|>'),
    tts_bos_token_id: id('<tts_text_bos>'),
    tts_eos_token_id: id('<tts_text_eod>'),
    tts_pad_token_id: id('<tts_pad>'),
    model_type: 'qwen3_tts',
    tokenizer_type: 'qwen3_tts_tokenizer_12hz',
    tts_model_size: 'demo',
    tts_model_type: 'base',
    speaker_encoder_config: {
      mel_dim: 128, enc_dim: 32, enc_channels: [32, 32, 32, 32, 96], enc_kernel_sizes: [5, 3, 3, 3, 1], enc_dilations: [1, 2, 3, 4, 1],
      enc_attention_channels: 16, enc_res2net_scale: 8, enc_se_channels: 16, sample_rate: 24000,
    },
    talker_config: decoder({
      code_predictor_config: decoder({
        model_type: 'qwen3_tts_talker_code_predictor', vocab_size: CODEBOOK, hidden_size: 16, intermediate_size: 32, num_hidden_layers: 2,
        num_attention_heads: 2, num_key_value_heads: 1, head_dim: 16, max_position_embeddings: 65536, rope_scaling: null,
        layer_types: ['full_attention', 'full_attention'], tie_word_embeddings: false,
      }),
      model_type: 'qwen3_tts_talker', vocab_size: CODEBOOK + 1024, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
      num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16,
      rope_scaling: { interleaved: true, mrope_section: [4, 2, 2], rope_type: 'default', type: 'default' },
      text_hidden_size: 32, text_vocab_size: tok.size, position_id_per_seconds: 13,
      codec_pad_id: 2148 - SHIFT, codec_bos_id: 2149 - SHIFT, codec_eos_token_id: 2150 - SHIFT,
      codec_think_id: 2154 - SHIFT, codec_nothink_id: 2155 - SHIFT, codec_think_bos_id: 2156 - SHIFT, codec_think_eos_id: 2157 - SHIFT,
      codec_language_id: Object.fromEntries(Object.entries(REAL_LANGUAGE_IDS).map(([k, v]) => [k, v - SHIFT])),
      spk_id: {}, spk_is_dialect: {},
    }),
  };
}

export const DEMO_SPEECH_TOKENIZER_CONFIG = {
  architectures: ['Qwen3TTSTokenizerV2Model'],
  model_type: 'qwen3_tts_tokenizer_12hz',
  encoder_valid_num_quantizers: 16,
  input_sample_rate: 24000, output_sample_rate: 24000, decode_upsample_rate: 1920, encode_downsample_rate: 1920,
  decoder_config: {
    attention_bias: false, attention_dropout: 0.0, latent_dim: 24, codebook_dim: 16, codebook_size: CODEBOOK, decoder_dim: 32,
    hidden_act: 'silu', hidden_size: 32, intermediate_size: 64, layer_scale_initial_scale: 0.01, max_position_embeddings: 8000,
    head_dim: 8, num_attention_heads: 4, num_hidden_layers: 2, num_key_value_heads: 4, num_quantizers: 16, num_semantic_quantizers: 1,
    rms_norm_eps: 1e-5, rope_theta: 10000, semantic_codebook_size: 64, sliding_window: 8, upsample_rates: [8, 5, 4, 3],
    upsampling_ratios: [2, 2], vector_quantization_hidden_dimension: 8,
  },
  encoder_config: {
    _frame_rate: 12.5, attention_bias: false, attention_dropout: 0.0, audio_channels: 1, codebook_dim: 16, codebook_size: CODEBOOK,
    compress: 2, dilation_growth_rate: 2, head_dim: 8, hidden_act: 'gelu', hidden_size: 32, intermediate_size: 64, kernel_size: 7,
    last_kernel_size: 3, layer_scale_initial_scale: 0.01, max_position_embeddings: 8000, norm_eps: 1e-5, normalize: false,
    num_attention_heads: 4, num_filters: 4, num_hidden_layers: 2, num_key_value_heads: 4, num_quantizers: 20, num_residual_layers: 1,
    num_semantic_quantizers: 1, pad_mode: 'constant', residual_kernel_size: 3, rope_theta: 10000.0, sampling_rate: 24000,
    sliding_window: 16, trim_right_ratio: 1.0, upsample_groups: 32, upsampling_ratios: [8, 6, 5, 4], use_cache: false,
    use_causal_conv: true, use_conv_shortcut: false, use_streaming: false, vector_quantization_hidden_dimension: 16,
  },
};

/** The released generation_config.json. */
export const DEMO_GENERATION_CONFIG = {
  do_sample: true, repetition_penalty: 1.05, temperature: 0.9, top_p: 1.0, top_k: 50,
  subtalker_dosample: true, subtalker_temperature: 0.9, subtalker_top_p: 1.0, subtalker_top_k: 50, max_new_tokens: 8192,
};

const PREPROCESSOR = { padding_side: 'left', padding_value: 0.0, processor_class: 'Qwen3TTSProcessor', return_attention_mask: true };
const SPEECH_PREPROCESSOR = {
  chunk_length_s: null, feature_extractor_type: 'EncodecFeatureExtractor', feature_size: 1, overlap: null,
  padding_side: 'right', padding_value: 0.0, return_attention_mask: true, sampling_rate: 24000,
};

export interface DemoPlan {
  /** For ensureDemoCheckpoint: changes with the generator format, the configs and the loaders' key list. */
  version: string;
  configs: Qwen3TtsConfigs;
  keys: { model: Map<string, number[]>; speech: Map<string, number[]> };
  /** Writes the whole checkpoint folder into `dir`. */
  write(dir: string): Promise<void>;
}

/** Works out the demo checkpoint (tokenizer ids, configs, the loaders' key list) without writing it. */
export async function planDemoQwen3Tts(e: Engine): Promise<DemoPlan> {
  const configJson = demoConfigJson(demoTokenizerInfo({ specialTokens: DEMO_TTS_TOKENS }));
  const configs: Qwen3TtsConfigs = {
    model: parseQwen3TtsConfig(configJson, 'demo config.json'),
    generation: parseGenerationConfig(DEMO_GENERATION_CONFIG, 'demo generation_config.json'),
    speechTokenizer: parseSpeechTokenizerConfig(DEMO_SPEECH_TOKENIZER_CONFIG, 'demo speech_tokenizer/config.json'),
  };
  const keys = await recordQwen3TtsKeys(e, configs);
  const digest = demoDigest([DEMO_FORMAT, DEMO_SEED, configJson, DEMO_SPEECH_TOKENIZER_CONFIG, [...keys.model], [...keys.speech]]);
  const write = (dir: string) =>
    writeQwen3TtsCheckpoint(dir, { config: configJson, speechTokenizer: DEMO_SPEECH_TOKENIZER_CONFIG }, keys, new WeightSynth(DEMO_SEED), demoMeta(`random Qwen3-TTS weights (${DEMO_TTS_NAME} ${digest}); the speech is noise`));
  return { version: `${DEMO_FORMAT}-${digest}`, configs, keys, write };
}

/** Parses the three config files a checkpoint folder holds (the demo's or the released ones, released.ts). */
export function qwen3TtsConfigsOf(config: Record<string, unknown>, speechTokenizer: Record<string, unknown>): Qwen3TtsConfigs {
  return {
    model: parseQwen3TtsConfig(config, 'config.json'),
    generation: parseGenerationConfig(DEMO_GENERATION_CONFIG, 'generation_config.json'),
    speechTokenizer: parseSpeechTokenizerConfig(speechTokenizer, 'speech_tokenizer/config.json'),
  };
}

/** Writes a checkpoint folder in the published format: the demo tokenizer, the configs, and the recorded keys with
 * random values (synth) or with no bytes at all (null: a planned checkpoint, src/plan). */
export async function writeQwen3TtsCheckpoint(
  dir: string,
  c: { config: Record<string, unknown>; speechTokenizer: Record<string, unknown> },
  keys: { model: Map<string, number[]>; speech: Map<string, number[]> },
  synth: WeightSynth | null,
  meta: Record<string, string>,
): Promise<void> {
  await writeDemoTokenizer(dir, { specialTokens: DEMO_TTS_TOKENS });
  const json = (name: string, v: unknown) => writeFile(join(dir, name), `${JSON.stringify(v, null, 2)}\n`);
  await json('config.json', c.config);
  await json('generation_config.json', DEMO_GENERATION_CONFIG);
  await json('preprocessor_config.json', PREPROCESSOR);
  await mkdir(join(dir, 'speech_tokenizer'), { recursive: true });
  await json('speech_tokenizer/config.json', c.speechTokenizer);
  await json('speech_tokenizer/preprocessor_config.json', SPEECH_PREPROCESSOR);
  const tensors = (shapes: Map<string, number[]>, dtype: 'BF16' | 'F32') =>
    synth ? synth.tensors(shapes, dtype) : Object.fromEntries([...shapes].map(([k, shape]) => [k, { dtype, shape, data: null }]));
  await writeSafetensors(join(dir, 'model.safetensors'), tensors(keys.model, 'BF16'), meta);
  await writeSafetensors(join(dir, 'speech_tokenizer', 'model.safetensors'), tensors(keys.speech, 'F32'), meta);
}
