// Planned checkpoints: each model's folder at its released sizes, every header real and no weight bytes (sparse files
// of the real length, see writeSafetensors' null data), made once into a cache folder and reused. The pipelines open
// them with their ordinary loaders; on the shape-only engine they read no weight bytes (what host code reads is zeros).
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine } from '../engine/engine';
import { recordKrea2Keys, releasedKrea2Sizes, writeKrea2Checkpoint } from '../models/krea2';
import { readQwenImage21Configs } from '../models/qwen_image21/checkpoint';
import { recordQwenImage21Keys, writeQwenImage21Checkpoint, writeQwenImage21ConfigFiles } from '../models/qwen_image21/demo';
import { releasedQwenImage21Files } from '../models/qwen_image21/released';
import { recordReleasedH3Keys, releasedH3Configs, writePlannedH3Checkpoint } from '../models/minimax_h3/released';
import { qwen3TtsConfigsOf, recordQwen3TtsKeys, writeQwen3TtsCheckpoint } from '../models/qwen3_tts/demo';
import { RELEASED_SPEECH_TOKENIZER_CONFIG, releasedQwen3TtsConfig } from '../models/qwen3_tts/released';

/** Where planned checkpoints are kept: KILN_PLAN_CACHE, else a folder in the system's temp dir. */
export function planCacheDir(): string {
  return process.env.KILN_PLAN_CACHE || join(tmpdir(), 'kiln-plan-checkpoints');
}

/** Makes `name` once (into a temp folder, renamed when whole), keyed by a digest of what it is made from. */
async function cached(name: string, what: unknown, make: (dir: string) => Promise<void>): Promise<string> {
  const digest = createHash('sha256').update(JSON.stringify(what)).digest('hex').slice(0, 12);
  const dir = join(planCacheDir(), `${name}-${digest}`);
  if (existsSync(join(dir, '.complete'))) return dir;
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    await make(tmp);
    writeFileSync(join(tmp, '.complete'), '');
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  return dir;
}

/** The released Krea 2 Turbo checkpoint root (transformer/, text_encoder/, vae/), planned. */
export async function plannedKrea2Root(): Promise<string> {
  const sizes = releasedKrea2Sizes();
  return cached('krea-2-turbo', [1, sizes], async (dir) => {
    const e = Engine.createShapeOnly('h200'); // records the key lists at released sizes without holding them
    try {
      const keys = await recordKrea2Keys(e, sizes);
      await writeKrea2Checkpoint(dir, sizes, keys, null, { format: 'pt', kiln_plan: 'released Krea 2 Turbo sizes, no weights (a plan)' });
    } finally {
      e.destroy();
    }
  });
}

/** The Qwen-Image-2.1 checkpoint folder at the reported sizes (models/qwen_image21/released.ts), planned. */
export async function plannedQwenImage21Root(): Promise<string> {
  const files = releasedQwenImage21Files();
  return cached('qwen-image-2.1', [1, files], async (dir) => {
    // the configs first (the key lists are what the loaders ask for at these sizes), then the weights' headers
    await writeQwenImage21ConfigFiles(dir, files);
    const e = Engine.createShapeOnly('h200');
    try {
      // f16, as the plans run: the 8B's embedding table then fits one binding (in f32 it would be read from the file)
      const keys = await recordQwenImage21Keys(e, await readQwenImage21Configs(dir), 'f16');
      await writeQwenImage21Checkpoint(dir, files, keys, null, { format: 'pt', kiln_plan: 'reported Qwen-Image-2.1 sizes, no weights (a plan)' });
    } finally {
      e.destroy();
    }
  });
}

/** The released MiniMax H3 checkpoint root in the diffusers layout (models/minimax_h3/released.ts), planned: every
 * video profile loads its parts from it (the distilled DiT and the int8 builds have the base DiT's shapes). */
export async function plannedH3Root(): Promise<string> {
  const configs = releasedH3Configs();
  return cached('minimax-h3', [2, configs], async (dir) => {
    const e = Engine.createShapeOnly('h200');
    try {
      const keys = await recordReleasedH3Keys(e, configs);
      await writePlannedH3Checkpoint(dir, configs, keys, { format: 'pt', kiln_plan: 'released MiniMax H3 sizes, no weights (a plan)' });
    } finally {
      e.destroy();
    }
  });
}

/** The released Qwen3-TTS-12Hz-1.7B-Base folder (models/qwen3_tts/released.ts), planned: the tts profile's model and
 * the speech of a video job's tts_text. */
export async function plannedQwen3TtsRoot(): Promise<string> {
  const config = releasedQwen3TtsConfig();
  return cached('qwen3-tts-1.7b', [1, config, RELEASED_SPEECH_TOKENIZER_CONFIG], async (dir) => {
    const e = Engine.createShapeOnly('h200');
    try {
      const keys = await recordQwen3TtsKeys(e, qwen3TtsConfigsOf(config, RELEASED_SPEECH_TOKENIZER_CONFIG));
      await writeQwen3TtsCheckpoint(dir, { config, speechTokenizer: RELEASED_SPEECH_TOKENIZER_CONFIG }, keys, null, { format: 'pt', kiln_plan: 'released Qwen3-TTS-12Hz-1.7B-Base sizes, no weights (a plan)' });
    } finally {
      e.destroy();
    }
  });
}
