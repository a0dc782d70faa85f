// The demo Qwen-Image-2.1 checkpoint: what imgmain / imgmain_bf16 run when WEIGHTS_DIR has no real one. A tiny
// random model in the published diffusers format (docs/models/qwen-image-2.1.md "Pipeline"), run through the same
// code as the real weights; its pictures are noise, and /api/config says "demo".
//   model_index.json                              QwenImage21Pipeline and its five components, as reported
//   transformer/config.json + diffusion_pytorch_model-0000{1,2}-of-00002.safetensors + .index.json (BF16)
//   text_encoder/config.json (qwen3_vl, tiny text_config) + model-0000{1,2}-of-00002.safetensors + .index.json
//   processor/ vocab.json, merges.txt, tokenizer_config.json (writeDemoTokenizer), preprocessor_config.json
//   vae/ (the VAE module's own demo writer)       scheduler/scheduler_config.json (the reported real one)
// Which transformer and text-encoder tensors exist is not written down here: loadQwenImage21Parts (pipeline.ts) runs
// against SyntheticCheckpoints that record every key and shape the loaders ask for, and exactly those are written.
// The version stamp hashes that list, so a loader that starts reading another key regenerates the demo.
import { join } from 'node:path';
import { writeJsonFile } from '../../common/json-file';
import type { Engine } from '../../engine/engine';
import { shardBytesFor, writeSafetensors, writeShardedSafetensors, type WriteTensor } from '../../engine/safetensors-writer';
import { demoDigest, demoMeta, QWEN3_VL_PREPROCESSOR } from '../common/demo-checkpoint';
import { checkpointTensors, WeightSynth } from '../common/random-weights';
import { SyntheticCheckpoint, zeroFill } from '../common/synthetic-checkpoint';
import { parseQwen3Config } from '../qwen3/config';
import { parseQwen3VlImageProcessorConfig, parseQwen3VlVisionConfig } from '../qwen3_vl_vision';
import { demoTokenizerInfo, writeDemoTokenizer } from '../tokenizer';
import { parseQwenImage21Config } from './config';
import { loadQwenImage21Parts, QWEN_IMAGE21_COMPONENTS, type QwenImage21Configs } from './checkpoint';
import { parseFlowMatchConfig, QWEN_IMAGE21_SCHEDULER } from './sigmas';
import { DEMO_QWEN_IMAGE21_TOKENS, DEMO_TRANSFORMER_CONFIG, demoTextEncoderConfig } from './demo-configs';
import { DEMO_VAE_CONFIG, VAE_WEIGHTS, vaeCheckpointShapes, writeDemoVae } from './vae';

/** The folder under DEMO_WEIGHTS_DIR (the manifest's profile "demo" field). */
export const DEMO_QWEN_IMAGE21_NAME = 'qwen-image-2.1';
/** Bump when the generator's values change (the key lists are hashed into the version by themselves). */
const DEMO_FORMAT = 1;
const DEMO_SEED = 20261121;

// the demo's configs live in demo-configs.ts (comfy-parts.ts reads them without importing this file's loaders)
export { DEMO_QWEN_IMAGE21_TOKENS, DEMO_TRANSFORMER_CONFIG, demoTextEncoderConfig } from './demo-configs';

// a function, not a constant: checkpoint.ts -> comfy-parts.ts -> demo.ts -> checkpoint.ts is a cycle, so
// QWEN_IMAGE21_COMPONENTS may not be defined yet while this module loads (npm run plan loads checkpoint.ts first)
const modelIndex = () => ({
  _class_name: 'QwenImage21Pipeline',
  _diffusers_version: '0.37.0.dev0',
  processor: ['transformers', QWEN_IMAGE21_COMPONENTS.processor],
  scheduler: ['diffusers', QWEN_IMAGE21_COMPONENTS.scheduler],
  text_encoder: ['transformers', QWEN_IMAGE21_COMPONENTS.text_encoder],
  transformer: ['diffusers', QWEN_IMAGE21_COMPONENTS.transformer],
  vae: ['diffusers', QWEN_IMAGE21_COMPONENTS.vae],
});

const PREPROCESSOR = QWEN3_VL_PREPROCESSOR;

/** Every key and shape loadQwenImage21Parts reads, per component, found by running it against synthetic checkpoints. */
export async function recordQwenImage21Keys(e: Engine, cfg: QwenImage21Configs, dtype: 'f32' | 'f16' = 'f32'): Promise<{ transformer: Map<string, number[]>; textEncoder: Map<string, number[]> }> {
  const transformer = new SyntheticCheckpoint({ label: 'transformer', dtype: 'F32', fill: zeroFill });
  const textEncoder = new SyntheticCheckpoint({ label: 'text_encoder', dtype: 'F32', fill: zeroFill });
  const parts = await loadQwenImage21Parts(e, { transformer: transformer.checkpoint, textEncoder: textEncoder.checkpoint }, cfg, { dtype, int8: false }, null);
  parts.free();
  return { transformer: transformer.shapes(), textEncoder: textEncoder.shapes() };
}

export interface QwenImage21DemoPlan {
  /** For ensureDemoCheckpoint: changes with the generator format, the configs and the loaders' key lists. */
  version: string;
  configs: QwenImage21Configs;
  keys: { transformer: Map<string, number[]>; textEncoder: Map<string, number[]> };
  /** Writes the whole checkpoint folder into `dir`. */
  write(dir: string): Promise<void>;
}

/** The raw config.json files of a checkpoint folder: transformer, text encoder, and the VAE's (null: the demo VAE). */
export interface QwenImage21ConfigFiles {
  transformer: Record<string, unknown>;
  textEncoder: Record<string, unknown>;
  vae: Record<string, unknown> | null;
}

/**
 * Writes a Qwen-Image-2.1 folder in the published layout with the demo tokenizer: random BF16 values from `synth`
 * (the demo, its VAE from the VAE module's own demo writer), or, with synth null, none: sparse files of the real
 * sizes with the real headers (a plan's checkpoint, read only by the shape-only engine; host reads give zeros).
 */
export async function writeQwenImage21Checkpoint(dir: string, files: QwenImage21ConfigFiles, keys: { transformer: Map<string, number[]>; textEncoder: Map<string, number[]> }, synth: WeightSynth | null, meta: Record<string, string>): Promise<void> {
  const json = (name: string, v: unknown) => writeJsonFile(join(dir, name), v);
  await writeQwenImage21ConfigFiles(dir, files);
  const tensors = (shapes: Map<string, number[]>) => checkpointTensors(shapes, synth);
  // about two shards per part, in the published file names (diffusers' for the transformer, transformers' for the encoder)
  const sharded = (sub: string, t: Record<string, WriteTensor>, stem: string) => writeShardedSafetensors(join(dir, sub), t, shardBytesFor(t, 2), meta, stem);
  await sharded('transformer', tensors(keys.transformer), 'diffusion_pytorch_model');
  await sharded('text_encoder', tensors(keys.textEncoder), 'model');
  if (synth || !files.vae) await writeDemoVae(join(dir, 'vae'), { dtype: 'BF16', ...(files.vae ? { config: files.vae } : {}) });
  else {
    await json('vae/config.json', files.vae);
    await writeSafetensors(join(dir, 'vae', VAE_WEIGHTS), tensors(vaeCheckpointShapes(files.vae)), meta);
  }
}

/** The folder's JSON files and tokenizer (what readQwenImage21Configs reads), without the weights or the VAE. */
export async function writeQwenImage21ConfigFiles(dir: string, files: QwenImage21ConfigFiles): Promise<void> {
  const json = (name: string, v: unknown) => writeJsonFile(join(dir, name), v);
  await json('model_index.json', modelIndex());
  await json('transformer/config.json', files.transformer);
  await json('text_encoder/config.json', files.textEncoder);
  await json('scheduler/scheduler_config.json', QWEN_IMAGE21_SCHEDULER);
  await writeDemoTokenizer(join(dir, 'processor'), { specialTokens: DEMO_QWEN_IMAGE21_TOKENS });
  await json('processor/preprocessor_config.json', PREPROCESSOR);
}

/** Works out the demo checkpoint (tokenizer ids, configs, the loaders' key lists) without writing it. */
export async function planDemoQwenImage21(e: Engine): Promise<QwenImage21DemoPlan> {
  const textJson = demoTextEncoderConfig(demoTokenizerInfo({ specialTokens: DEMO_QWEN_IMAGE21_TOKENS }));
  const configs: QwenImage21Configs = {
    transformer: parseQwenImage21Config(DEMO_TRANSFORMER_CONFIG, 'demo transformer/config.json'),
    textEncoder: parseQwen3Config(textJson, 'text', 'demo text_encoder/config.json'),
    scheduler: parseFlowMatchConfig(QWEN_IMAGE21_SCHEDULER, 'demo scheduler/scheduler_config.json'),
    vision: parseQwen3VlVisionConfig(textJson, 'demo text_encoder/config.json'),
    processor: parseQwen3VlImageProcessorConfig(PREPROCESSOR, 'demo processor/preprocessor_config.json'),
  };
  const keys = await recordQwenImage21Keys(e, configs);
  const digest = demoDigest([DEMO_FORMAT, DEMO_SEED, DEMO_TRANSFORMER_CONFIG, textJson, DEMO_VAE_CONFIG, [...vaeCheckpointShapes(DEMO_VAE_CONFIG)], [...keys.transformer], [...keys.textEncoder]]);
  const meta = demoMeta(`random Qwen-Image-2.1 weights (${DEMO_QWEN_IMAGE21_NAME} ${digest}); the pictures are noise`);
  const write = (dir: string) => writeQwenImage21Checkpoint(dir, { transformer: DEMO_TRANSFORMER_CONFIG, textEncoder: textJson, vae: null }, keys, new WeightSynth(DEMO_SEED), meta);
  return { version: `${DEMO_FORMAT}-${digest}`, configs, keys, write };
}
