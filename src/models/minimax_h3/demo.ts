// The demo MiniMax H3 checkpoint: what the video profiles run when WEIGHTS_DIR has no real one. A tiny random model
// of every part in the published diffusers format (weights/minimax-h3.json), run through the same code as the real
// weights; its video and sound are noise, and /api/config says "demo".
//   model_index.json, scheduler/ + audio_scheduler/scheduler_config.json   the released files (shifts 12 / 3)
//   transformer/config.json + diffusion_pytorch_model-0000i-of-0000n.safetensors + .index.json   BF16, with
//       proj_in / audio_proj_in / time_embedder / proj_out / audio_proj_out F32 as released; sharded
//   text_encoder/config.json (qwen3_vl, 51 text layers so hidden_states[50] exists) + model-*.safetensors + index
//   tokenizer/{vocab.json, merges.txt, tokenizer_config.json}              writeDemoTokenizer
//   vae/config.json + diffusion_pytorch_model-*.safetensors + index        F16; the real compression (16 x 16 x 4)
//       and latent statistics, a 2-layer 32-wide decoder
//   audio_vae/config.json + diffusion_pytorch_model.safetensors            F32 weight-norm pairs; the real rates
//       (hop 800 at 32 kHz), 128 wide
//   Minimax-h3-Turbo/{8step,4step}/*.safetensors                           random turbo adapters (adapter.ts writeDemoAdapter)
//   transformer_ref/ as transformer/ (other random weights)                    the Ref2VA partition (reference pictures)
// The real compression ratios keep every geometry rule (frames 17k + 5, latents 5k + 2, audio round(frames / 24 x 40),
// pixels / 16) identical to the released model, so a job's sizes and lengths are the real ones.
// Which tensors exist is not written down here: each part's loader runs against a SyntheticCheckpoint
// (src/models/common/synthetic-checkpoint.ts) that records every key and shape it asks for, and exactly those are
// written; the version stamp hashes that list, so a loader that starts reading another key regenerates the demo. The
// text encoder holds only what H3 reads (embed_tokens, layers 0..49), the VAEs both sides (the encoders turn keyframes,
// references and soundtracks into conditioning latents: issue 15), the audio VAE no resampling filters (the loader
// checks them only when present).
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { writeJsonFile } from '../../common/json-file';
import type { Engine } from '../../engine/engine';
import { type SafeDType } from '../../engine/safetensors';
import { shardBytesFor, writeSafetensors, writeShardedSafetensors } from '../../engine/safetensors-writer';
import { demoDigest, demoMeta } from '../common/demo-checkpoint';
import { WeightSynth } from '../common/random-weights';
import { SyntheticCheckpoint, zeroFill } from '../common/synthetic-checkpoint';
import { parseQwen3Config } from '../qwen3';
import { parseQwen3VlVisionConfig, Qwen3VlVisionModel } from '../qwen3_vl_vision';
import { demoTokenizerInfo, writeDemoTokenizer } from '../tokenizer';
import { AudioVaeDecoder, AudioVaeEncoder, parseAudioVaeConfig } from './vae/audio';
import { writeDemoAdapter } from './transformer/adapter';
import { parseH3Config } from './transformer/config';
import type { H3AdapterComponent, H3RefAdapterComponent } from './variants';
import { H3TextEncoder, H3_TEXT_ENCODER_LAYER } from './text-encoder/encoder';
import { MiniMaxH3Transformer } from './transformer/transformer';
import { VideoVaeDecoder, VideoVaeEncoder } from './vae/video';

/** Bump when the generator's values change (configs and key lists are hashed into the version by themselves). */
const DEMO_FORMAT = 2;
const DEMO_SEED = 20261121;
/** The DiT partitions the demo holds (a new one regenerates existing demo folders through the version). */
const DEMO_PARTITIONS = 'fl2va+ref2va+ref-adapters';
/** The sharded parts are cut into about this many shards (the real ones have 14, 14 and 3). */
const DEMO_SHARDS = 3;
/** diffusers' shard names: diffusion_pytorch_model-0000i-of-0000n.safetensors behind transformer.ts DIFFUSERS_INDEX. */
const DIFFUSERS_STEM = 'diffusion_pytorch_model';

/** Tensors of the transformer stored as F32 in the release (the rest is BF16). */
const F32_PREFIXES = ['proj_in.', 'audio_proj_in.', 'time_embedder.', 'proj_out.', 'audio_proj_out.'];

export const DEMO_TRANSFORMER_CONFIG = {
  _class_name: 'MiniMaxH3Transformer3DModel',
  _diffusers_version: '0.36.0.dev0',
  // the released structure at a tiny size: heads x head_dim (16) > hidden (12), 12 of 16 head dims rotated; one head
  // only, because attention over the real sequence (2.6k rows at 352p 1 s) is most of a step on a CPU
  num_attention_heads: 1, attention_head_dim: 16, hidden_size: 12, num_layers: 2, num_refiner_layers: 2, ffn_dim: 32,
  in_channels: 24, audio_in_channels: 32, patch_size: [1, 2, 2], text_dim: 32, freq_dim: 32, time_embed_hidden_dim: 24,
  time_embed_dim: 16, rope_freq_dim: 2, rope_theta: 10000.0, norm_eps: 1e-5, qk_norm_eps: 1e-5, final_norm_eps: 1e-5,
};

export function demoTextEncoderConfig(vocab: number): Record<string, unknown> {
  return {
    architectures: ['Qwen3VLForConditionalGeneration'],
    model_type: 'qwen3_vl',
    tie_word_embeddings: false,
    text_config: {
      model_type: 'qwen3_vl_text', vocab_size: vocab, hidden_size: 32, intermediate_size: 64,
      num_hidden_layers: H3_TEXT_ENCODER_LAYER + 1, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 8,
      hidden_act: 'silu', rms_norm_eps: 1e-6, rope_theta: 5000000, max_position_embeddings: 4096, attention_bias: false,
      rope_scaling: { rope_type: 'default', mrope_section: [2, 1, 1], mrope_interleaved: true },
    },
  };
}

/** The released vae/config.json (compression, chunking, latent statistics) with a tiny decoder (16 wide). */
export const DEMO_VAE_CONFIG = {
  _class_name: 'AutoencoderKLMiniMaxH3',
  _diffusers_version: '0.36.0.dev0',
  in_channels: 3, out_channels: 3, latent_channels: 24, block_out_channels: [8, 8, 8, 8, 8, 8], layers_per_block: 1,
  spatial_downsample_factors: [2, 2, 2, 2, 1, 1], temporal_downsample_factors: [1, 2, 2, 1, 1, 1], norm_num_groups: 4,
  // one layer of one head: a tile is 1.8k tokens (7 latent frames x 16 x 16), so its attention dominates the decode
  norm_eps: 1e-6, spatial_padding_mode: 'reflect', decoder_num_layers: 1, decoder_num_attention_heads: 1,
  decoder_attention_head_dim: 16, decoder_num_register_tokens: 4, decoder_ffn_mult: 4, decoder_rope_theta: 100.0,
  decoder_rope_dim_ratio: 0.75, decoder_norm_eps: 1e-5, clip_length: 17, token_drop: 3,
  latents_mean: [
    0.858090341091156, -0.9606591463088989, 1.0661640167236328, -0.5090325474739075, -0.2727581858634949, -1.3675414323806763,
    -0.2553254961967468, -0.26907554268836975, -0.5376840829849243, -0.0464097298681736, 0.6657370328903198, 0.19690127670764923,
    -0.5460608005523682, -0.4035342037677765, -0.23683024942874908, 0.25928452610969543, -0.30133944749832153, 0.211341992020607,
    -1.1206848621368408, 0.3581933379173279, -0.04225143790245056, 0.2604829967021942, 0.22864092886447906, 0.7056031823158264,
  ],
  latents_std: [
    1.2223774194717407, 1.2767263650894165, 1.6831774711608887, 1.7549455165863037, 1.5636216402053833, 2.194143533706665,
    0.9653137922286987, 1.0569885969161987, 0.841948926448822, 0.7729952931404114, 1.8955937623977661, 0.946841835975647,
    0.7996809482574463, 0.44988900423049927, 0.7197399735450745, 0.6936293244361877, 2.961095094680786, 2.7694199085235596,
    3.0496184825897217, 2.1088054180145264, 3.276226282119751, 3.1627357006073, 2.2816812992095947, 2.6127843856811523,
  ],
};

/** The released audio_vae/config.json (rates, kernels, 32 kHz) at decoder width 128 (one channel after 7 halvings). */
export const DEMO_AUDIO_VAE_CONFIG = {
  _class_name: 'AutoencoderKLMiniMaxH3Audio',
  _diffusers_version: '0.36.0.dev0',
  encoder_dim: 8, encoder_rates: [2, 4, 4, 5, 5], latent_dim: 64, latent_channels: 32, decoder_dim: 128,
  decoder_rates: [5, 5, 2, 2, 2, 2, 2], decoder_kernel_sizes: [9, 9, 4, 4, 4, 4, 4], num_attention_heads: 2,
  resblock_kernel_sizes: [3, 7, 11], resblock_dilation_sizes: [[1, 3, 5], [1, 3, 5], [1, 3, 5]], sampling_rate: 32000,
  latents_mean: Array.from({ length: 32 }, (_, i) => Math.round(100 * Math.sin(i + 1)) / 400),
  latents_std: Array.from({ length: 32 }, (_, i) => 1.5 + ((i * 7) % 10) / 10),
};

/** Where the demo checkpoint keeps each turbo adapter (relative to its root). */
export const DEMO_ADAPTERS: Record<H3AdapterComponent, string> = {
  adapter_8step: 'Minimax-h3-Turbo/8step/demo_turbo_8step.safetensors',
  adapter_4step: 'Minimax-h3-Turbo/4step/demo_turbo_4step.safetensors',
};

/** Where the demo checkpoint keeps each Ref2VA adapter (relative to its root), merged into transformer_ref/ for the
 * distilled and turbo profiles' reference jobs (variants.ts H3ReferenceRun). */
export const DEMO_REF_ADAPTERS: Record<H3RefAdapterComponent, string> = {
  ref_adapter_8step: 'Minimax-h3-Turbo/ref2va-8step/demo_ref2va_8step.safetensors',
  ref_adapter_4step: 'Minimax-h3-Turbo/ref2va-4step/demo_ref2va_4step.safetensors',
};

const SCHEDULER = (shift: number) => ({ _class_name: 'MiniMaxH3Scheduler', _diffusers_version: '0.36.0.dev0', shift });

const MODEL_INDEX = {
  _class_name: 'MiniMaxH3ModularPipeline',
  _diffusers_version: '0.36.0.dev0',
  text_encoder: ['transformers', 'Qwen3VLForConditionalGeneration'],
  tokenizer: ['transformers', 'Qwen2TokenizerFast'],
  vae: ['diffusers', 'AutoencoderKLMiniMaxH3'],
  audio_vae: ['diffusers', 'AutoencoderKLMiniMaxH3Audio'],
  transformer: ['diffusers', 'MiniMaxH3Transformer3DModel'],
  scheduler: ['diffusers', 'MiniMaxH3Scheduler'],
  audio_scheduler: ['diffusers', 'MiniMaxH3Scheduler'],
};

/** Weights scaled down from the generic random rule. The video VAE's last projection: at full scale every pixel is
 * independent white noise, which x264 at the writer's CRF 18 encodes at ~20 Mbit/s and several times slower than
 * real footage; damped, frames are a faint texture moving with the latents (cheap to encode, still the model's output). */
const DAMPED: Record<string, number> = { 'decoder.proj_out.weight': 0.05 };
/** The audio VAE's attention key bias is a zero buffer upstream (stored, never trained). */
const ZEROED = new Set(['pre_block.attn.zero_k_bias']);

type Keys = Map<string, number[]>;

export interface H3DemoKeys {
  transformer: Keys;
  textEncoder: Keys;
  vae: Keys;
  audioVae: Keys;
}

/** The configs of a checkpoint's parts (config.json of transformer/, text_encoder/, vae/, audio_vae/). */
export interface H3CheckpointConfigs {
  transformer: Record<string, unknown>;
  textEncoder: Record<string, unknown>;
  vae: Record<string, unknown>;
  audioVae: Record<string, unknown>;
}

/** Runs each part's loader on `e` against a recording synthetic checkpoint (zeros) and returns what it read: the demo's
 * parts, or those of `configs` (released.ts), with the text encoder's vision tower where its config has one. */
export async function recordH3Keys(e: Engine, textEncoderConfig: Record<string, unknown>, configs?: Omit<H3CheckpointConfigs, 'textEncoder'>, dtype: 'f32' | 'f16' = 'f32'): Promise<H3DemoKeys> {
  const synth = (label: string, has?: (n: string) => boolean) => new SyntheticCheckpoint({ label, dtype: 'F32', fill: zeroFill, has });
  const trConfig = configs?.transformer ?? DEMO_TRANSFORMER_CONFIG;
  const vaeConfig = configs?.vae ?? (DEMO_VAE_CONFIG as unknown as Record<string, unknown>);
  const audioConfig = configs?.audioVae ?? DEMO_AUDIO_VAE_CONFIG;

  const tr = synth('transformer');
  (await MiniMaxH3Transformer.load(e, tr.checkpoint, parseH3Config(trConfig, 'transformer config'), { dtype })).free();
  const te = synth('text_encoder');
  (await H3TextEncoder.load(e, te.checkpoint, parseQwen3Config(textEncoderConfig, 'text', 'text_encoder config'), { dtype })).free();
  if (textEncoderConfig.vision_config) {
    const vision = parseQwen3VlVisionConfig(textEncoderConfig, 'text_encoder config');
    (await Qwen3VlVisionModel.load(e, te.checkpoint, vision, { dtype, prefix: vision.keyPrefix })).free();
  }
  const vae = synth('vae');
  (await VideoVaeDecoder.load(e, vae.checkpoint, vaeConfig, { dtype })).free();
  (await VideoVaeEncoder.load(e, vae.checkpoint, vaeConfig, { dtype })).free();
  // as released: the convs as weight-norm pairs, plain weights for dec_in_proj, the encoder's attention projection and
  // its mean / logs heads; no resampling filters (checked only when present)
  const plain = ['dec_in_proj.', 'pre_block.', 'mean_proj.', 'logs_proj.'];
  const audio = synth('audio_vae', (n) => !n.endsWith('.filter') && !n.startsWith('dec_in_proj.weight_') && !(n.endsWith('.weight') && !plain.some((p) => n.startsWith(p))));
  (await AudioVaeDecoder.load(e, audio.checkpoint, parseAudioVaeConfig(audioConfig, 'audio_vae config'), { dtype })).free();
  (await AudioVaeEncoder.load(e, audio.checkpoint, audioConfig, { dtype })).free();
  return { transformer: tr.shapes(), textEncoder: te.shapes(), vae: vae.shapes(), audioVae: audio.shapes() };
}

export interface H3DemoPlan {
  /** For ensureDemoCheckpoint: changes with the generator format, the configs and the loaders' key lists. */
  version: string;
  keys: H3DemoKeys;
  /** Writes the whole checkpoint folder into `dir`. */
  write(dir: string): Promise<void>;
}

/** Works out the demo checkpoint (tokenizer, configs, the loaders' key lists) without writing it. */
export async function planDemoH3(e: Engine): Promise<H3DemoPlan> {
  const textConfig = demoTextEncoderConfig(demoTokenizerInfo().size);
  const keys = await recordH3Keys(e, textConfig);
  const digest = demoDigest([DEMO_FORMAT, DEMO_SEED, DAMPED, [...ZEROED], DEMO_TRANSFORMER_CONFIG, textConfig, DEMO_VAE_CONFIG, DEMO_AUDIO_VAE_CONFIG, ...Object.values(keys).map((k) => [...k])]);
  const write = async (dir: string) => {
    const json = (path: string, v: unknown) => writeJsonFile(join(dir, path), v);
    const meta = demoMeta(`random MiniMax H3 weights (${digest}); the video and sound are noise`);
    const synth = new WeightSynth(DEMO_SEED);
    const tensors = (shapes: Keys, dtype: SafeDType | ((k: string) => SafeDType)) => synth.tensors(shapes, dtype, (k) => (ZEROED.has(k) ? 0 : DAMPED[k]));

    await json('model_index.json', MODEL_INDEX);
    await json('scheduler/scheduler_config.json', SCHEDULER(12));
    await json('audio_scheduler/scheduler_config.json', SCHEDULER(3));
    await mkdir(join(dir, 'tokenizer'), { recursive: true });
    await writeDemoTokenizer(join(dir, 'tokenizer'));

    await json('transformer/config.json', DEMO_TRANSFORMER_CONFIG);
    const trDtype = (k: string): SafeDType => (F32_PREFIXES.some((p) => k.startsWith(p)) ? 'F32' : 'BF16');
    const tr = tensors(keys.transformer, trDtype);
    await writeShardedSafetensors(join(dir, 'transformer'), tr, shardBytesFor(tr, DEMO_SHARDS), meta, DIFFUSERS_STEM);

    await json('text_encoder/config.json', textConfig);
    const te = tensors(keys.textEncoder, 'BF16');
    await writeShardedSafetensors(join(dir, 'text_encoder'), te, shardBytesFor(te, DEMO_SHARDS), meta);

    await json('vae/config.json', DEMO_VAE_CONFIG);
    const vae = tensors(keys.vae, 'F16');
    await writeShardedSafetensors(join(dir, 'vae'), vae, shardBytesFor(vae, DEMO_SHARDS), meta, DIFFUSERS_STEM);

    // the turbo adapters of turbo_int8 / fastvid_4step_int8, in their own repo's folders (weights/minimax-h3.json)
    for (const [component, seed] of [['adapter_8step', 8], ['adapter_4step', 4]] as const) {
      await mkdir(join(dir, DEMO_ADAPTERS[component], '..'), { recursive: true });
      await writeDemoAdapter(join(dir, DEMO_ADAPTERS[component]), parseH3Config(DEMO_TRANSFORMER_CONFIG), { seed: DEMO_SEED + seed });
    }

    await json('audio_vae/config.json', DEMO_AUDIO_VAE_CONFIG);
    await writeSafetensors(join(dir, 'audio_vae', 'diffusion_pytorch_model.safetensors'), tensors(keys.audioVae, 'F32'), meta);

    // the Ref2VA partition (reference pictures) as the diffusers release publishes it: transformer_ref/ beside
    // transformer/, the same config and key list with weights of its own (drawn last, so every file above keeps its
    // bytes: the t2va end-to-end golden's checkpoint is unchanged)
    await json('transformer_ref/config.json', DEMO_TRANSFORMER_CONFIG);
    const ref = tensors(keys.transformer, trDtype);
    await writeShardedSafetensors(join(dir, 'transformer_ref'), ref, shardBytesFor(ref, DEMO_SHARDS), meta, DIFFUSERS_STEM);
    // the Ref2VA adapters the distilled and turbo profiles merge into it (own seeds: nothing above changes)
    for (const [component, seed] of [['ref_adapter_8step', 18], ['ref_adapter_4step', 14]] as const) {
      await mkdir(join(dir, DEMO_REF_ADAPTERS[component], '..'), { recursive: true });
      await writeDemoAdapter(join(dir, DEMO_REF_ADAPTERS[component]), parseH3Config(DEMO_TRANSFORMER_CONFIG), { seed: DEMO_SEED + seed });
    }
  };
  // the parts written are named in the version (not in the digest, which every file's metadata carries)
  return { version: `${DEMO_FORMAT}-${digest}-${DEMO_PARTITIONS}`, keys, write };
}
