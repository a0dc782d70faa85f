// The released MiniMax H3 sizes, for plans (src/plan): what the real checkpoint holds, without it. The configs are
// the diffusers release's, MiniMax-AI/MiniMax-H3 @ 3834811bb92e (shared/upstream/minimax-h3/, MANIFEST.tsv names each
// blob): transformer/config.json (also transformer_ref/ and the 8-step distilled DiT's: the same architecture),
// text_encoder/config.json (Qwen3-VL-32B), vae/config.json, audio_vae/config.json, scheduler shifts 12 / 3.
// Which tensors exist is not written down here either: each part's loader runs against a recording synthetic
// checkpoint at these sizes (demo.ts recordH3Keys), and exactly those keys are written, with their real shapes and no
// bytes (writePlannedH3Checkpoint). Stand-ins, each an upper bound or no difference to a plan:
// - the tokenizer is the demo's byte-level one (the real tokenizer.json is not published): the vision token ids of
//   the text encoder's config are moved to that tokenizer's, the vocabulary size stays the real one, and a prompt
//   takes more tokens than with the real tokenizer;
// - the turbo and Ref2VA adapters are rank-4 pairs of every adapted linear: a plan reads no weights, so it never
//   merges them, and the merged DiT holds what the unmerged one holds.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { writeJsonFile } from '../../common/json-file';
import type { Engine } from '../../engine/engine';
import { type SafeDType } from '../../engine/safetensors';
import { shardBytesFor, writeSafetensors, writeShardedSafetensors, type WriteTensor } from '../../engine/safetensors-writer';
import { QWEN3_VL_DEMO_TOKENS } from '../common/demo-checkpoint';
import { demoTokenizerInfo, writeDemoTokenizer } from '../tokenizer';
import { DEMO_ADAPTERS, DEMO_AUDIO_VAE_CONFIG, DEMO_REF_ADAPTERS, DEMO_VAE_CONFIG, recordH3Keys, type H3CheckpointConfigs, type H3DemoKeys } from './demo';
import { writeDemoAdapter } from './transformer/adapter';
import { parseH3Config } from './transformer/config';

/** transformer/config.json as released. */
export const RELEASED_H3_TRANSFORMER = {
  _class_name: 'MiniMaxH3Transformer3DModel', _diffusers_version: '0.36.0.dev0',
  num_attention_heads: 56, attention_head_dim: 128, hidden_size: 5376, num_layers: 50, num_refiner_layers: 2, ffn_dim: 14336,
  in_channels: 24, audio_in_channels: 32, patch_size: [1, 2, 2], text_dim: 5120, freq_dim: 256, time_embed_hidden_dim: 5376,
  time_embed_dim: 2688, rope_freq_dim: 16, rope_theta: 10000.0, norm_eps: 1e-5, qk_norm_eps: 1e-5, final_norm_eps: 1e-5,
};

/** text_encoder/config.json as released (Qwen3-VL-32B). */
export const RELEASED_H3_TEXT_ENCODER = {
  architectures: ['Qwen3VLForConditionalGeneration'], model_type: 'qwen3_vl', tie_word_embeddings: false,
  image_token_id: 151655, video_token_id: 151656, vision_start_token_id: 151652, vision_end_token_id: 151653,
  text_config: {
    attention_bias: false, attention_dropout: 0.0, bos_token_id: 151643, dtype: 'bfloat16', eos_token_id: 151645, head_dim: 128,
    hidden_act: 'silu', hidden_size: 5120, initializer_range: 0.02, intermediate_size: 25600, max_position_embeddings: 262144,
    model_type: 'qwen3_vl_text', num_attention_heads: 64, num_hidden_layers: 64, num_key_value_heads: 8, rms_norm_eps: 1e-6,
    rope_scaling: { mrope_interleaved: true, mrope_section: [24, 20, 20], rope_type: 'default' }, rope_theta: 5000000,
    use_cache: true, vocab_size: 151936,
  },
  vision_config: {
    deepstack_visual_indexes: [8, 16, 24], depth: 27, hidden_act: 'gelu_pytorch_tanh', hidden_size: 1152, in_channels: 3,
    initializer_range: 0.02, intermediate_size: 4304, model_type: 'qwen3_vl', num_heads: 16, num_position_embeddings: 2304,
    out_hidden_size: 5120, patch_size: 16, spatial_merge_size: 2, temporal_patch_size: 2,
  },
};

/** vae/config.json as released (the latent statistics are the demo's, which copies them from this file). */
const RELEASED_H3_VAE_SIZES = {
  block_out_channels: [128, 256, 256, 512, 512, 1024], layers_per_block: 2, norm_num_groups: 32, decoder_num_layers: 36,
  decoder_num_attention_heads: 32, decoder_attention_head_dim: 64,
};

/** audio_vae/config.json's sizes as released (rates, kernels and 32 kHz are the demo's, copied from this file). */
const RELEASED_H3_AUDIO_VAE_SIZES = {
  encoder_dim: 64, latent_dim: 2048, decoder_dim: 1024, num_attention_heads: 8,
  latents_mean: [
    -0.020211687488382354, 0.3876466479950502, -0.04398279799186767, -0.28591514936373, 0.08179686214561671, -0.35782641352446604,
    0.040623809960919084, -0.01552534501956604, -0.223362481667332, 0.1821006842509091, 0.2941778783780663, -0.07901167601970885,
    -0.056815072777201, -0.3699028221860095, -0.31616315591624855, 0.5905951377425391, -0.052139568068853864, 0.013673160263486295,
    -0.03691647864630577, 0.09732660653298163, -0.3394662328788498, -0.30685677538541667, -0.24504598907458763, -0.034698524462007344,
    0.02868032184767538, -0.21217779266454084, -0.1678263169941987, 0.3221287889040614, -0.1223055851554907, 0.4356604928128464,
    -0.0502599202236253, 0.3979258376211797,
  ],
  latents_std: [
    1.6895524230479284, 2.76263727217653, 1.7945344281264435, 1.6801681847309828, 1.6390226546605453, 2.7788298348882177,
    1.7659090095747236, 1.6199757612137327, 2.6336525640336896, 1.8539356672817833, 2.5056497896915633, 1.811019237886178,
    1.9579657790720237, 1.6685498243529284, 1.4922469314453364, 3.298670198067373, 1.9491804496832168, 1.8720003270431442,
    1.8334080103291832, 1.6488070416529093, 1.6176957696319716, 1.9131449234774398, 1.5695245398428617, 1.6943659940415912,
    1.8318420762504692, 1.5540637421583379, 1.9344930328968526, 1.599198216109855, 1.718045989838149, 1.6307219190837705,
    1.8661226051202384, 1.5613768203168363,
  ],
};

/** The released configs, the text encoder's vision token ids on the demo tokenizer (see the header). */
export function releasedH3Configs(): H3CheckpointConfigs {
  const ids = demoTokenizerInfo({ specialTokens: QWEN3_VL_DEMO_TOKENS }).specialTokens;
  const id = (t: string) => ids[t] ?? (() => { throw new Error(`demo tokenizer has no ${t}`); })();
  const textEncoder = {
    ...RELEASED_H3_TEXT_ENCODER,
    image_token_id: id('<|image_pad|>'), video_token_id: id('<|video_pad|>'),
    vision_start_token_id: id('<|vision_start|>'), vision_end_token_id: id('<|vision_end|>'),
    text_config: { ...RELEASED_H3_TEXT_ENCODER.text_config, bos_token_id: id('<|endoftext|>'), eos_token_id: id('<|im_end|>') },
  };
  return {
    transformer: RELEASED_H3_TRANSFORMER,
    textEncoder,
    vae: { ...DEMO_VAE_CONFIG, ...RELEASED_H3_VAE_SIZES },
    audioVae: { ...DEMO_AUDIO_VAE_CONFIG, ...RELEASED_H3_AUDIO_VAE_SIZES },
  };
}

/** Tensors of the transformer stored as F32 in the release (the rest is BF16). */
const F32_PREFIXES = ['proj_in.', 'audio_proj_in.', 'time_embedder.', 'proj_out.', 'audio_proj_out.'];

const holes = (shapes: Map<string, number[]>, dtype: (k: string) => SafeDType): Record<string, WriteTensor> =>
  Object.fromEntries([...shapes].map(([k, shape]) => [k, { dtype: dtype(k), shape, data: null }]));

const SCHEDULER = (shift: number) => ({ _class_name: 'MiniMaxH3Scheduler', _diffusers_version: '0.36.0.dev0', shift });

/** The keys the loaders read at the released sizes (the vision tower's included), recorded on a shape-only engine; f16,
 * as the pipelines run, so the 32B's embedding table is read as the run reads it (in f32 it would not fit one binding). */
export function recordReleasedH3Keys(e: Engine, configs: H3CheckpointConfigs): Promise<H3DemoKeys> {
  return recordH3Keys(e, configs.textEncoder, configs, 'f16');
}

/**
 * Writes a planned checkpoint in the diffusers layout h3DirsFromRoot reads (transformer/, transformer_ref/,
 * text_encoder/ with the vision tower, tokenizer/, vae/, audio_vae/, the turbo and Ref2VA adapters where
 * DEMO_ADAPTERS and DEMO_REF_ADAPTERS keep them): real headers, no weight bytes (sparse files). Stored dtypes as released: the DiT BF16 with its F32 in/out
 * projections, the text encoder BF16, the video VAE F32 (its index's total_size is 4 bytes a parameter), the audio
 * VAE F32.
 */
export async function writePlannedH3Checkpoint(dir: string, configs: H3CheckpointConfigs, keys: H3DemoKeys, meta: Record<string, string>): Promise<void> {
  const json = (path: string, v: unknown) => writeJsonFile(join(dir, path), v);
  await json('scheduler/scheduler_config.json', SCHEDULER(12));
  await json('audio_scheduler/scheduler_config.json', SCHEDULER(3));
  await mkdir(join(dir, 'tokenizer'), { recursive: true });
  await writeDemoTokenizer(join(dir, 'tokenizer'), { specialTokens: QWEN3_VL_DEMO_TOKENS });
  const tr = holes(keys.transformer, (k) => (F32_PREFIXES.some((p) => k.startsWith(p)) ? 'F32' : 'BF16'));
  for (const part of ['transformer', 'transformer_ref']) {
    await json(`${part}/config.json`, configs.transformer);
    await writeShardedSafetensors(join(dir, part), tr, shardBytesFor(tr, 14), meta, 'diffusion_pytorch_model');
  }
  await json('text_encoder/config.json', configs.textEncoder);
  const te = holes(keys.textEncoder, () => 'BF16');
  await writeShardedSafetensors(join(dir, 'text_encoder'), te, shardBytesFor(te, 14), meta);
  await json('vae/config.json', configs.vae);
  const vae = holes(keys.vae, () => 'F32');
  await writeShardedSafetensors(join(dir, 'vae'), vae, shardBytesFor(vae, 3), meta, 'diffusion_pytorch_model');
  await json('audio_vae/config.json', configs.audioVae);
  await writeSafetensors(join(dir, 'audio_vae', 'diffusion_pytorch_model.safetensors'), holes(keys.audioVae, () => 'F32'), meta);
  const adapters = [...Object.values(DEMO_ADAPTERS), ...Object.values(DEMO_REF_ADAPTERS)];
  for (const path of adapters) {
    await mkdir(join(dir, path, '..'), { recursive: true });
    await writeDemoAdapter(join(dir, path), parseH3Config(configs.transformer), { holes: true });
  }
}
