// The demo Krea 2 Turbo checkpoint: what imgart_turbo / imgart_turbo_int8 run when WEIGHTS_DIR has no real one. A
// tiny random model in the layout the real weights are read from (the three sources krea-ai/krea-2 inference.py
// loads: the DiT's single safetensors, Qwen3-VL-4B-Instruct, Qwen-Image's vae/), run through the same code; its
// pictures are noise, and /api/config says "demo".
//   transformer/krea-2-turbo-demo.safetensors     SingleStreamDiT's bare state dict (native keys, BF16, no config:
//                                                 the loader reads the config off the shapes, inferKrea2Config)
//   text_encoder/config.json (qwen3_vl: a 36-layer text model as the real one, so the 12 taps 2..35 exist, and a
//                 2-block vision tower) + model-0000{1,2}-of-00002.safetensors + .index.json, the tokenizer files
//                 (writeDemoTokenizer) and preprocessor_config.json, as in the Qwen3-VL-4B-Instruct repo
//   vae/config.json + diffusion_pytorch_model.safetensors   AutoencoderKLQwenImage at base width 4 (decoder keys)
// The real interface is kept where it matters to the code: 16 latent channels with the released latent statistics,
// patch 2, 12 taps, head dims whose RoPE axes all rotate. Which DiT and text-encoder tensors exist is found by running
// the loaders against SyntheticCheckpoints; the version stamp hashes those key lists.
import { join } from 'node:path';
import { writeJsonFile } from '../../common/json-file';
import type { Engine } from '../../engine/engine';
import { shardBytesFor, writeSafetensors, writeShardedSafetensors } from '../../engine/safetensors-writer';
import { demoDigest, demoMeta, demoQwen3VlConfig, QWEN3_VL_DEMO_TOKENS, QWEN3_VL_PREPROCESSOR } from '../common/demo-checkpoint';
import { checkpointTensors, WeightSynth } from '../common/random-weights';
import { SyntheticCheckpoint, zeroFill } from '../common/synthetic-checkpoint';
import { parseQwen3Config } from '../qwen3/config';
import { parseQwen3VlImageProcessorConfig, parseQwen3VlVisionConfig } from '../qwen3_vl_vision';
import { demoTokenizerInfo, writeDemoTokenizer, type DemoTokenizerInfo } from '../tokenizer';
import { Krea2Conditioner } from './conditioner';
import { parseKrea2Config } from './config';
import { Krea2Transformer } from './transformer';
import { parseQwenImageVaeConfig, QWEN_IMAGE_VAE_DEFAULTS, QWEN_IMAGE_VAE_WEIGHTS, qwenImageVaeDecoderShapes } from './vae';

/** The folder under DEMO_WEIGHTS_DIR (the manifest's profile "demo" field). */
export const DEMO_KREA2_NAME = 'krea-2-turbo';
export const DEMO_KREA2_TRANSFORMER_FILE = 'krea-2-turbo-demo.safetensors';
/** Bump when the generator's values change (the key lists are hashed into the version by themselves). */
const DEMO_FORMAT = 1;
const DEMO_SEED = 20261125;

export const DEMO_KREA2_TOKENS = QWEN3_VL_DEMO_TOKENS;

/** SingleMMDiTConfig of the demo DiT: head dim 32 (RoPE axes [8, 12, 12]), GQA 2:1, 12 taps of a 32-wide encoder. */
export const DEMO_KREA2_DIT = {
  features: 64, tdim: 256, txtdim: 32, heads: 2, kvheads: 1, multiplier: 4, layers: 2, patch: 2, channels: 16,
  theta: 1e3, txtlayers: 12, txtheads: 1, txtkvheads: 1,
};

export const DEMO_KREA2_VAE = { _class_name: 'AutoencoderKLQwenImage', ...QWEN_IMAGE_VAE_DEFAULTS, base_dim: 4 };

const PREPROCESSOR = QWEN3_VL_PREPROCESSOR;

/** A Qwen3-VL config of the real file's shape with a tiny 36-layer text model and a 2-block tower. */
export function demoKrea2TextEncoderConfig(tok: DemoTokenizerInfo): Record<string, unknown> {
  return demoQwen3VlConfig(tok, { hidden: DEMO_KREA2_DIT.txtdim, intermediate: 64, heads: 2, kvHeads: 1, layers: 36, tieWordEmbeddings: true, deepstack: [0, 1] });
}

export interface Krea2DemoPlan {
  version: string;
  write(dir: string): Promise<void>;
}

/** The sizes a Krea 2 checkpoint folder is made at: the demo's, or the released ones for a plan (released.ts). */
export interface Krea2CheckpointSizes {
  /** SingleMMDiTConfig. */
  dit: Record<string, number>;
  /** text_encoder/config.json (qwen3_vl); its special-token ids must be the demo tokenizer's. */
  textJson: Record<string, unknown>;
  /** vae/config.json. */
  vae: Record<string, unknown>;
}

/** The demo's sizes, with the text config's token ids taken from the demo tokenizer. */
export function demoKrea2Sizes(): Krea2CheckpointSizes {
  return { dit: DEMO_KREA2_DIT, textJson: demoKrea2TextEncoderConfig(demoTokenizerInfo({ specialTokens: DEMO_KREA2_TOKENS })), vae: DEMO_KREA2_VAE };
}

/** The key lists (and shapes) the loaders read from a checkpoint of `sizes`, recorded on engine e (use the
 * shape-only engine at released sizes: nothing is allocated then). */
export async function recordKrea2Keys(e: Engine, sizes: Krea2CheckpointSizes): Promise<{ dit: Map<string, number[]>; text: Map<string, number[]>; vae: Map<string, number[]> }> {
  const dit = new SyntheticCheckpoint({ label: 'transformer', dtype: 'F32', fill: zeroFill });
  const text = new SyntheticCheckpoint({ label: 'text_encoder', dtype: 'F32', fill: zeroFill });
  const m = await Krea2Transformer.load(e, dit.checkpoint, parseKrea2Config(sizes.dit, 'DiT'), { dtype: 'f32' });
  m.free();
  const tcfg = parseQwen3Config(sizes.textJson, 'text', 'text_encoder/config.json');
  const vcfg = parseQwen3VlVisionConfig(sizes.textJson, 'text_encoder/config.json');
  const c = await Krea2Conditioner.load(e, text.checkpoint, tcfg, { dtype: 'f32', vision: { config: vcfg, processor: parseQwen3VlImageProcessorConfig(PREPROCESSOR, 'preprocessor') } });
  c.free();
  // what the conditioner reads: layers up to the last tap (35 of 36) and the tower; layer 36 and the final norm,
  // which the real file has but nothing reads, are left out
  return { dit: dit.shapes(), text: text.shapes(), vae: qwenImageVaeDecoderShapes(parseQwenImageVaeConfig(sizes.vae, 'vae/config.json')) };
}

/**
 * Writes a Krea 2 checkpoint folder of `sizes` in the layout krea2DemoLayout reads (transformer/, text_encoder/ with
 * the demo tokenizer, vae/): random BF16 values from `synth`, or none (holes: sparse files of the real sizes whose
 * headers are the real ones, for the shape-only engine, which reads no weight bytes; what host code reads is zeros).
 */
export async function writeKrea2Checkpoint(dir: string, sizes: Krea2CheckpointSizes, keys: Awaited<ReturnType<typeof recordKrea2Keys>>, synth: WeightSynth | null, meta: Record<string, string>): Promise<void> {
  const tensors = (shapes: Map<string, number[]>) => checkpointTensors(shapes, synth);
  await writeSafetensors(join(dir, 'transformer', DEMO_KREA2_TRANSFORMER_FILE), tensors(keys.dit), meta);
  const te = tensors(keys.text);
  await writeShardedSafetensors(join(dir, 'text_encoder'), te, shardBytesFor(te, 2), meta, 'model');
  await writeJsonFile(join(dir, 'text_encoder', 'config.json'), sizes.textJson);
  await writeJsonFile(join(dir, 'text_encoder', 'preprocessor_config.json'), PREPROCESSOR);
  await writeDemoTokenizer(join(dir, 'text_encoder'), { specialTokens: DEMO_KREA2_TOKENS });
  await writeJsonFile(join(dir, 'vae', 'config.json'), sizes.vae);
  await writeSafetensors(join(dir, 'vae', QWEN_IMAGE_VAE_WEIGHTS), tensors(keys.vae), meta);
}

/** Works out the demo checkpoint (configs, the loaders' key lists) without writing it. */
export async function planDemoKrea2(e: Engine): Promise<Krea2DemoPlan> {
  const sizes = demoKrea2Sizes();
  const keys = await recordKrea2Keys(e, sizes);
  const digest = demoDigest([DEMO_FORMAT, DEMO_SEED, DEMO_KREA2_DIT, sizes.textJson, DEMO_KREA2_VAE, [...keys.dit], [...keys.text], [...keys.vae]]);
  const write = (dir: string) =>
    writeKrea2Checkpoint(dir, sizes, keys, new WeightSynth(DEMO_SEED), demoMeta(`random Krea 2 weights (${DEMO_KREA2_NAME} ${digest}); the pictures are noise`));
  return { version: `${DEMO_FORMAT}-${digest}`, write };
}
