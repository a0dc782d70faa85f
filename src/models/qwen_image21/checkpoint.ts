// Qwen-Image-2.1's checkpoint in the published diffusers format: model_index.json and the config files the pipeline
// needs, and loading the two big parts (transformer/, text_encoder/) from real shards or synthetic weights (demo,
// bench). The VAE reads its own folder (vae/); the pipeline (pipeline.ts) puts the parts together. A part may be
// elsewhere than the folder (QwenImage21Layout): the transformer as a ComfyUI single file (comfy-parts.ts).
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { throwIfCancelled } from '../../common/errors';
import type { Engine } from '../../engine/engine';
import { Checkpoint } from '../../engine/safetensors';
import { parseQwen3Config, type Qwen3Config } from '../qwen3/config';
import {
  parseQwen3VlImageProcessorConfig, parseQwen3VlVisionConfig, QWEN3_VL_IMAGE_PROCESSOR, type Qwen3VlImageProcessorConfig, type Qwen3VlVisionConfig,
} from '../qwen3_vl_vision';
import type { ComputeDType } from '../common/weights';
import { TextTokenizer } from '../tokenizer';
import { parseQwenImage21Config, type QwenImage21Config } from './config';
import { parseFlowMatchConfig, type FlowMatchConfig } from './sigmas';
import { isSingleFile, openQwenImage21TextEncoder, openQwenImage21Transformer, qwenImage21TextEncoderConfigOfFile, qwenImage21TransformerConfigOfFile } from './comfy-parts';
import { QwenImage21TextEncoder } from './text-encoder';
import { QwenImage21Transformer, type QwenImage21LoadOptions } from './transformer';

/** The checkpoint's config files, parsed. */
export interface QwenImage21Configs {
  transformer: QwenImage21Config;
  textEncoder: Qwen3Config;
  scheduler: FlowMatchConfig;
  /** text_encoder/config.json's vision_config (null: a text-only checkpoint, no editing). */
  vision: Qwen3VlVisionConfig | null;
  /** processor/preprocessor_config.json (Qwen3-VL's defaults when the file is absent). */
  processor: Qwen3VlImageProcessorConfig;
}

/** The diffusers folders of the checkpoint (model_index.json names the classes). */
export const QWEN_IMAGE21_COMPONENTS = {
  transformer: 'QwenImage21Transformer2DModel',
  text_encoder: 'Qwen3VLForConditionalGeneration',
  processor: 'Qwen3VLProcessor',
  vae: 'AutoencoderKLQwenImage21',
  scheduler: 'FlowMatchEulerDiscreteScheduler',
} as const;

/** Where each part of a checkpoint is: the diffusers folder's sub-folders, or, where the weights check found a part
 * elsewhere (another place, a ComfyUI file), there. `root` holds model_index.json. */
export interface QwenImage21Layout {
  root: string;
  /** transformer/ (config.json and weights), or a ComfyUI diffusion_models file. */
  transformer: string;
  textEncoder: string;
  vae: string;
  processor: string;
  scheduler: string;
}

/** The layout of one diffusers folder, with `parts` placed elsewhere. */
export function qwenImage21Layout(root: string, parts: Partial<Omit<QwenImage21Layout, 'root'>> = {}): QwenImage21Layout {
  return {
    root, transformer: join(root, 'transformer'), textEncoder: join(root, 'text_encoder'), vae: join(root, 'vae'),
    processor: join(root, 'processor'), scheduler: join(root, 'scheduler'), ...parts,
  };
}

const layoutOf = (at: string | QwenImage21Layout): QwenImage21Layout => (typeof at === 'string' ? qwenImage21Layout(at) : at);

async function readJson(dir: string, name: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(join(dir, name), 'utf8'));
  } catch (e) {
    throw new Error(`Qwen-Image-2.1 checkpoint ${dir}: cannot read ${name} (${(e as Error).message})`);
  }
}

/** text_encoder/config.json's text and vision configs. */
async function textEncoderConfigs(dir: string): Promise<Pick<QwenImage21Configs, 'textEncoder' | 'vision'>> {
  const text = await readJson(dir, 'config.json');
  const textPath = join(dir, 'config.json');
  return {
    textEncoder: parseQwen3Config(text, 'text', textPath),
    vision: (text as { vision_config?: unknown }).vision_config ? parseQwen3VlVisionConfig(text, textPath) : null,
  };
}

/** Reads and checks model_index.json and the config files the pipeline needs (the VAE reads its own); a transformer or
 * text encoder given as a ComfyUI file has its config read off its shapes (comfy-parts.ts; the text encoder's token
 * ids are the processor's tokenizer's). */
export async function readQwenImage21Configs(at: string | QwenImage21Layout): Promise<QwenImage21Configs> {
  const l = layoutOf(at);
  const dir = l.root;
  const index = (await readJson(dir, 'model_index.json')) as Record<string, unknown>;
  if (index._class_name !== 'QwenImage21Pipeline') {
    throw new Error(`${join(dir, 'model_index.json')}: _class_name ${JSON.stringify(index._class_name)} is not QwenImage21Pipeline`);
  }
  for (const [folder, cls] of Object.entries(QWEN_IMAGE21_COMPONENTS)) {
    const entry = index[folder];
    if (!Array.isArray(entry) || entry[1] !== cls) throw new Error(`${join(dir, 'model_index.json')}: ${folder} is ${JSON.stringify(entry)}, expected [..., "${cls}"]`);
  }
  const procPath = join(l.processor, 'preprocessor_config.json');
  const text = isSingleFile(l.textEncoder) ? await qwenImage21TextEncoderConfigOfFile(l.textEncoder, await TextTokenizer.fromDir(l.processor)) : await textEncoderConfigs(l.textEncoder);
  return {
    transformer: isSingleFile(l.transformer)
      ? await qwenImage21TransformerConfigOfFile(l.transformer)
      : parseQwenImage21Config(await readJson(l.transformer, 'config.json'), join(l.transformer, 'config.json')),
    ...text,
    scheduler: parseFlowMatchConfig(await readJson(l.scheduler, 'scheduler_config.json'), join(l.scheduler, 'scheduler_config.json')),
    processor: existsSync(procPath) ? parseQwen3VlImageProcessorConfig(await readJson(l.processor, 'preprocessor_config.json'), procPath) : QWEN3_VL_IMAGE_PROCESSOR,
  };
}

export interface PartsOptions {
  /** Compute dtype of every part. */
  dtype: ComputeDType;
  /** Transformer linears as weight-only int8 (imgmain). The text encoder stays 16-bit: it runs once per job, so
   * int8 there would save memory only, and its states condition every step. */
  int8: boolean;
  /** Transformer blocks to load (benchmarks at reduced depth); default all. */
  layers?: number;
  /** Load the vision tower for reference images (default: when the config has one). */
  references?: boolean;
  /** Asked once the transformer is loaded: whether the text encoder's decoder layers load to host memory and stream
   * while encoding (Qwen3LoadOptions.layersOnHost; the residency policy, common/image-residency.ts). Default no. */
  streamTextLayers?: () => Promise<boolean>;
  /** Where the transformer's blocks go as they load (QwenImage21LoadOptions.blocks; the residency policy). */
  blocks?: QwenImage21LoadOptions['blocks'];
}

/** The weight sources of the two big parts: real files (Checkpoint.open) or SyntheticCheckpoints (demo, bench). */
export interface PartSources {
  transformer: Checkpoint;
  textEncoder: Checkpoint;
}

export interface QwenImage21Parts {
  transformer: QwenImage21Transformer;
  textEncoder: QwenImage21TextEncoder;
  /** The text encoder's layers were loaded to host memory (streamed while encoding). */
  textStreamed: boolean;
  free(): void;
}

/** Loads the transformer and the text encoder (the key list the demo writes is recorded by running exactly this). */
export async function loadQwenImage21Parts(
  e: Engine, src: PartSources, cfg: QwenImage21Configs, o: PartsOptions, tokenizer: TextTokenizer | null, signal?: AbortSignal, onTextEncoder?: () => void,
): Promise<QwenImage21Parts> {
  const owned: { free(): void }[] = [];
  try {
    const transformer = await QwenImage21Transformer.load(e, src.transformer, cfg.transformer, { dtype: o.dtype, int8: o.int8, layers: o.layers, blocks: o.blocks });
    owned.push(transformer);
    throwIfCancelled(signal);
    const textStreamed = (await o.streamTextLayers?.()) ?? false;
    onTextEncoder?.();
    const vision = (o.references ?? true) && cfg.vision ? { config: cfg.vision, processor: cfg.processor } : undefined;
    const textEncoder = await QwenImage21TextEncoder.load(e, src.textEncoder, cfg.textEncoder, { dtype: o.dtype, tokenizer: tokenizer ?? undefined, vision, layersOnHost: textStreamed });
    owned.push(textEncoder);
    throwIfCancelled(signal);
    if (textEncoder.hiddenSize !== cfg.transformer.contextInDim) {
      throw new Error(`Qwen-Image-2.1: the text encoder's hidden size ${textEncoder.hiddenSize} is not the transformer's context_in_dim ${cfg.transformer.contextInDim}`);
    }
    return { transformer, textEncoder, textStreamed, free: () => owned.reverse().forEach((p) => p.free()) };
  } catch (err) {
    for (const p of owned.reverse()) p.free();
    throw err;
  }
}


/** Opens the transformer and text encoder weights of a checkpoint (a folder, or a layout of parts) and loads both. */
export async function openAndLoadParts(
  e: Engine, at: string | QwenImage21Layout, cfg: QwenImage21Configs, o: PartsOptions, tokenizer: TextTokenizer | null, signal?: AbortSignal, onTextEncoder?: () => void,
): Promise<QwenImage21Parts> {
  const l = layoutOf(at);
  const transformer = await openQwenImage21Transformer(l.transformer);
  try {
    const textEncoder = await openQwenImage21TextEncoder(l.textEncoder);
    try {
      return await loadQwenImage21Parts(e, { transformer, textEncoder }, cfg, o, tokenizer, signal, onTextEncoder);
    } finally {
      await textEncoder.close();
    }
  } finally {
    await transformer.close();
  }
}

/** The text encoder alone, from wherever the layout puts it (the residency policy sizes it on a shape-only engine). */
export async function loadQwenImage21TextEncoder(e: Engine, at: string | QwenImage21Layout, cfg: QwenImage21Configs, o: { dtype: ComputeDType; references: boolean }): Promise<QwenImage21TextEncoder> {
  const ck = await openQwenImage21TextEncoder(layoutOf(at).textEncoder);
  try {
    const vision = o.references && cfg.vision ? { config: cfg.vision, processor: cfg.processor } : undefined;
    return await QwenImage21TextEncoder.load(e, ck, cfg.textEncoder, { dtype: o.dtype, vision });
  } finally {
    await ck.close();
  }
}
