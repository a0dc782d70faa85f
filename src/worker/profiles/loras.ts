// A job's LoRAs on the image and video profiles (issue 46, docs/loras.md): what each entry reports of its model for the API's
// checks (ServedSummary.lora: the module table's sizes for the weights it would load now), and the wrapper that reads
// the job's files (kept parsed in host memory between jobs) and attaches them beside the loaded model's linears for
// the one run (withLoras: off again when the run ends, also when it fails).
import { readFileSync } from 'node:fs';
import type { LoraModel, WorkerTask } from '../../catalog';
import { BadInputError } from '../../common/errors';
import type { Krea2Config } from '../../models/krea2/config';
import { KREA2_FUSION_BLOCKS } from '../../models/krea2/config';
import { LoraCache, LoraError } from '../../models/common/lora';
import { withLoras, type LoraTarget } from '../../models/common/lora-linear';
import type { Pipeline, RunContext } from '../../models/common/pipeline';
import { h3LoraDims } from '../../models/common/lora-models';
import type { H3Config } from '../../models/minimax_h3/transformer/config';
import { qwenImage21TransformerConfigOfFileSync } from '../../models/qwen_image21/comfy-parts';
import { parseQwenImage21Config, type QwenImage21Config } from '../../models/qwen_image21/config';

/** Host bytes of parsed LoRA files kept between jobs (f32: a rank-32 LoRA of a 20B DiT is about 0.5 GB). */
const LORA_CACHE_BYTES = 2 * 2 ** 30;
const cache = new LoraCache(LORA_CACHE_BYTES);

export function krea2LoraModel(c: Krea2Config): LoraModel {
  const { features, headDim, tokenDim, tdim, txtdim, txtlayers, layers, heads, kvheads, mlpDim, txtheads, txtkvheads, txtHeadDim, txtMlpDim } = c;
  return { model: 'krea2', dims: { features, headDim, tokenDim, tdim, txtdim, txtlayers, layers, heads, kvheads, mlpDim, txtheads, txtkvheads, txtHeadDim, txtMlpDim, fusionBlocks: KREA2_FUSION_BLOCKS } };
}

export function qwenImage21LoraModel(c: QwenImage21Config): LoraModel {
  const { dim, mlpRatio, contextInDim, inChannels, outChannels, numLayers } = c;
  return { model: 'qwen_image21', dims: { dim, mlpRatio, contextInDim, inChannels, outChannels, numLayers } };
}

export function h3LoraModel(c: H3Config): LoraModel {
  return { model: 'minimax_h3', dims: h3LoraDims(c) };
}

const configs = new Map<string, LoraModel | undefined>();

/** Qwen-Image-2.1's LoRA model from a transformer/config.json (read once per path); undefined when it cannot be read
 * (the API then does not match files, and the worker's reader refuses a file that does not fit). */
export function qwenImage21LoraModelAt(configJson: string): LoraModel | undefined {
  if (!configs.has(configJson)) {
    let m: LoraModel | undefined;
    try {
      m = qwenImage21LoraModel(parseQwenImage21Config(JSON.parse(readFileSync(configJson, 'utf8')), configJson));
    } catch {
      m = undefined;
    }
    configs.set(configJson, m);
  }
  return configs.get(configJson);
}

/** The LoRA model of a transformer given as one ComfyUI file (its config read off the header's shapes), cached per file
 * like qwenImage21LoraModelAt; undefined where the file is unreadable or no Qwen-Image-2.1 transformer. */
export function qwenImage21LoraModelOfFile(file: string): LoraModel | undefined {
  if (!configs.has(file)) {
    let m: LoraModel | undefined;
    try {
      m = qwenImage21LoraModel(qwenImage21TransformerConfigOfFileSync(file));
    } catch {
      m = undefined;
    }
    configs.set(file, m);
  }
  return configs.get(file);
}

/**
 * `inner` with the task's LoRAs (ImageParams.loras, VideoParams.loras) attached around each run: the model is loaded
 * first, each file read against the loaded model's module table (`target`: for a video job, the DiT partition the job
 * runs on), and the terms taken off when the run ends, also when it fails. A file that does not fit is the user's
 * problem (bad_input), named as the reader names it.
 */
export function withTaskLoras(inner: Pipeline<WorkerTask>, target: (task: WorkerTask, ctx: RunContext) => LoraTarget | undefined | Promise<LoraTarget | undefined>): Pipeline<WorkerTask> {
  return {
    load: (ctx, next) => inner.load(ctx, next),
    prepare: async (ctx, next) => inner.prepare?.(ctx, next),
    unload: () => inner.unload(),
    run: async (task, ctx) => {
      const loras = task.kind === 'tts' ? [] : (task.params.loras ?? []);
      if (loras.length === 0) return inner.run(task, ctx);
      await inner.load(ctx, task);
      const t = await target(task, ctx);
      if (!t) throw new Error(`profile ${task.profile}: the model is not loaded, so its LoRAs cannot be attached`);
      const uses = [];
      for (const l of loras) {
        try {
          uses.push({ file: await cache.load(l.path, t.names), scale: l.scale });
        } catch (err) {
          if (err instanceof LoraError) throw new BadInputError(`LoRA ${l.name}: ${err.message}`);
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new BadInputError(`LoRA ${l.name}: ${l.path} is gone`);
          throw err;
        }
      }
      return withLoras(t.e, t.weights, uses, t.dtype, () => inner.run(task, ctx));
    },
  };
}
