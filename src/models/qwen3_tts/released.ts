// The released Qwen3-TTS-12Hz-1.7B-Base sizes (the tts profile's preferred variant, weights/qwen3-tts.json), for plans
// (src/plan): config.json, generation_config.json and speech_tokenizer/config.json as Qflyaaa/Qwen3-TTS-Desktop-App
// @ 85b9ea0fe843 ships them (shared/upstream/qwen3-tts/Qwen3-TTS-12Hz-1.7B-Base/, MANIFEST.tsv names each blob), the
// fields the loaders read (transformers' bookkeeping fields left out). The tokenizer is the demo's byte-level one (the
// real vocab.json is not needed to size anything): the config's special-token ids are moved to that tokenizer's, the
// text vocabulary stays the real size, and a text takes more tokens than with the real tokenizer (an upper bound).
import { demoTokenizerInfo } from '../tokenizer';
import { demoTokenId } from '../common/demo-checkpoint';
import { DEMO_TTS_TOKENS } from './demo';

const decoder = (o: Record<string, unknown>) => ({
  attention_bias: false, attention_dropout: 0, head_dim: 128, hidden_act: 'silu', rms_norm_eps: 1e-6, rope_theta: 1000000,
  sliding_window: null, use_sliding_window: false, num_code_groups: 16, ...o,
});

/** config.json of Qwen3-TTS-12Hz-1.7B-Base, its token ids on the demo tokenizer. */
export function releasedQwen3TtsConfig(): Record<string, unknown> {
  const tok = demoTokenizerInfo({ specialTokens: DEMO_TTS_TOKENS });
  const id = (t: string) => demoTokenId(tok, t);
  return {
    architectures: ['Qwen3TTSForConditionalGeneration'],
    assistant_token_id: id('assistant'), im_end_token_id: id('<|im_end|>'), im_start_token_id: id('<|im_start|>'),
    tts_bos_token_id: id('<tts_text_bos>'), tts_eos_token_id: id('<tts_text_eod>'), tts_pad_token_id: id('<tts_pad>'),
    model_type: 'qwen3_tts', tokenizer_type: 'qwen3_tts_tokenizer_12hz', tts_model_size: '1b7', tts_model_type: 'base',
    speaker_encoder_config: { enc_dim: 2048, sample_rate: 24000 },
    talker_config: decoder({
      code_predictor_config: decoder({
        model_type: 'qwen3_tts_talker_code_predictor', vocab_size: 2048, hidden_size: 1024, intermediate_size: 3072, num_hidden_layers: 5,
        num_attention_heads: 16, num_key_value_heads: 8, max_position_embeddings: 65536, rope_scaling: null,
        layer_types: ['full_attention', 'full_attention', 'full_attention', 'full_attention', 'full_attention'], tie_word_embeddings: false,
      }),
      model_type: 'qwen3_tts_talker', vocab_size: 3072, hidden_size: 2048, intermediate_size: 6144, num_hidden_layers: 28,
      num_attention_heads: 16, num_key_value_heads: 8, max_position_embeddings: 32768,
      rope_scaling: { interleaved: true, mrope_section: [24, 20, 20], rope_type: 'default', type: 'default' },
      text_hidden_size: 2048, text_vocab_size: 151936, position_id_per_seconds: 13,
      codec_pad_id: 2148, codec_bos_id: 2149, codec_eos_token_id: 2150, codec_think_id: 2154, codec_nothink_id: 2155,
      codec_think_bos_id: 2156, codec_think_eos_id: 2157,
      codec_language_id: { chinese: 2055, english: 2050, german: 2053, italian: 2070, portuguese: 2071, spanish: 2054, japanese: 2058, korean: 2064, french: 2061, russian: 2069 },
      spk_id: {}, spk_is_dialect: {},
    }),
  };
}

/** speech_tokenizer/config.json as released (the 12 Hz codec: Mimi-style encoder, the decoder). */
export const RELEASED_SPEECH_TOKENIZER_CONFIG = {
  architectures: ['Qwen3TTSTokenizerV2Model'], model_type: 'qwen3_tts_tokenizer_12hz', encoder_valid_num_quantizers: 16,
  input_sample_rate: 24000, output_sample_rate: 24000, decode_upsample_rate: 1920, encode_downsample_rate: 1920,
  decoder_config: {
    attention_bias: false, attention_dropout: 0.0, latent_dim: 1024, codebook_dim: 512, codebook_size: 2048, decoder_dim: 1536,
    hidden_act: 'silu', hidden_size: 512, intermediate_size: 1024, layer_scale_initial_scale: 0.01, max_position_embeddings: 8000,
    head_dim: 64, num_attention_heads: 16, num_hidden_layers: 8, num_key_value_heads: 16, num_quantizers: 16, num_semantic_quantizers: 1,
    rms_norm_eps: 1e-5, rope_theta: 10000, semantic_codebook_size: 4096, sliding_window: 72, upsample_rates: [8, 5, 4, 3],
    upsampling_ratios: [2, 2], vector_quantization_hidden_dimension: 512,
  },
  encoder_config: {
    _frame_rate: 12.5, attention_bias: false, attention_dropout: 0.0, audio_channels: 1, codebook_dim: 256, codebook_size: 2048,
    compress: 2, dilation_growth_rate: 2, dtype: 'float32', head_dim: 64, hidden_act: 'gelu', hidden_size: 512, initializer_range: 0.02,
    intermediate_size: 2048, kernel_size: 7, last_kernel_size: 3, layer_scale_initial_scale: 0.01, max_position_embeddings: 8000,
    norm_eps: 1e-5, normalize: false, num_attention_heads: 8, num_filters: 64, num_hidden_layers: 8, num_key_value_heads: 8,
    num_quantizers: 32, num_residual_layers: 1, num_semantic_quantizers: 1, pad_mode: 'constant', residual_kernel_size: 3,
    rope_theta: 10000.0, sampling_rate: 24000, sliding_window: 250, trim_right_ratio: 1.0, upsample_groups: 512,
    upsampling_ratios: [8, 6, 5, 4], use_cache: false, use_causal_conv: true, use_conv_shortcut: false, use_streaming: false,
    vector_quantization_hidden_dimension: 256,
  },
};
