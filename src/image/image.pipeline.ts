// The 'image' pipeline entries imgmain (int8 transformer linears) and imgmain_bf16 (16-bit): Qwen-Image-2.1 on the
// engine, from the real checkpoint in WEIGHTS_DIR when it is complete (npm run weights -- pull imgmain), else from
// the demo checkpoint generated once into DEMO_WEIGHTS_DIR (shared by both profiles: same files, the int8 happens
// at load). Registered while the module is built, like the speech entry (tests may register their own over them).
import type { FactoryProvider } from '@nestjs/common';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { LOGGER } from '../common/tokens';
import { SETTINGS, Settings } from '../config/settings';
import { EngineHolder } from '../engine/engine';
import type { JobTaskPayload } from '../jobs/jobs.service';
import { planDemoQwenImage21 } from '../models/qwen_image21/demo';
import { QwenImage21Pipeline, type ImageTask } from '../models/qwen_image21/pipeline';
import type { Pipeline, PipelineEntry, RunContext } from '../scheduler/pipeline';
import { PipelineRegistry } from '../scheduler/pipeline';
import { checkProfile, componentRoot, demoCheckpointVersion, ensureDemoCheckpoint, profileChecker, weightsNote, weightsState, type ProfileWeights } from '../weights';

export const IMAGE_PIPELINES = Symbol('IMAGE_PIPELINES');

/** The Qwen-Image-2.1 profiles: whether the transformer's linears are quantised to int8 at load. */
export const QWEN_IMAGE21_PROFILES = { imgmain: { int8: true }, imgmain_bf16: { int8: false } } as const;

/** GPU working set on top of the weights (prefix K/V caches, activations at 2K, VAE decode), for the fits-beside estimate. */
const WORKING_BYTES = 6 * 2 ** 30;

/**
 * Pixels a reference image is scaled to: the res tier's area (spec: "in editing, reference images are scaled to this
 * tier too"; upstream's output_resolution^2); for an explicit size the output's own area, at least 512^2 (so the
 * vision processor's 256^2 minimum holds at any aspect) and at most 2K's.
 */
export function referenceArea(res: string, width: number, height: number): number {
  if (res === '2K') return 2048 * 2048;
  if (res === '1K') return 1024 * 1024;
  return Math.min(2048 * 2048, Math.max(512 * 512, width * height));
}

/** The job record as the pipeline's task. */
export function imageTaskOf(p: JobTaskPayload): ImageTask {
  const j = p.job;
  return {
    prompt: j.prompt,
    negative: j.negative ?? '',
    cfg: j.cfg ?? 1,
    seed: j.seed,
    steps: j.steps,
    width: j.params.width,
    height: j.params.height,
    references: p.images,
    referenceArea: referenceArea(j.res, j.params.width, j.params.height),
    outputPath: p.outputPath,
    png: { prompt: j.prompt, profile: j.profile, seed: j.seed, steps: j.steps, negative_prompt: j.negative ?? '', cfg: j.cfg ?? 1, mode: j.mode },
  };
}

/** Takes the service's JobTaskPayload and runs the model pipeline on its ImageTask. */
class ImageJobPipeline implements Pipeline<JobTaskPayload> {
  constructor(private readonly inner: QwenImage21Pipeline) {}
  load(ctx: RunContext): Promise<void> {
    return this.inner.load(ctx);
  }
  run(task: JobTaskPayload, ctx: RunContext): Promise<void> {
    return this.inner.run(imageTaskOf(task), ctx);
  }
  unload(): Promise<void> {
    return this.inner.unload();
  }
}

export function imagePipelineEntry(profile: keyof typeof QWEN_IMAGE21_PROFILES, settings: Pick<Settings, 'weightsDir' | 'demoWeightsDir'>, holder: EngineHolder, log?: Pick<Logger, 'info'>): PipelineEntry {
  const { int8 } = QWEN_IMAGE21_PROFILES[profile];
  const weights = profileChecker(profile, settings.weightsDir); // one folder check per second for config/health
  let measured: number | undefined;
  const precision = int8 ? 'int8 transformer linears' : '16-bit weights';
  return {
    kind: 'image',
    profile,
    weights: () => weightsState(weights(), true),
    note: () => {
      const w = weights();
      if (w.state === 'real') return `Qwen-Image-2.1, ${precision}, ${weightsNote(w)}`;
      const made = demoCheckpointVersion(settings.demoWeightsDir, w.demo) ? 'generated' : 'generated at the first image job';
      return `demo: a tiny random Qwen-Image-2.1 checkpoint (${made}, ${join(settings.demoWeightsDir, w.demo)}); the pictures are noise. Real weights: ${weightsNote(w)}`;
    },
    residentBytes: () => measured ?? estimateBytes(weights(), int8) + WORKING_BYTES,
    create: () =>
      new ImageJobPipeline(
        new QwenImage21Pipeline({
          int8,
          engine: () => holder.get(),
          checkpoint: async (e) => {
            const w = checkProfile(profile, settings.weightsDir);
            if (w.state === 'real') return componentRoot(w, 'transformer');
            const plan = await planDemoQwenImage21(e);
            return ensureDemoCheckpoint({ name: w.demo, version: plan.version, root: settings.demoWeightsDir, generate: plan.write });
          },
          onLoaded: (bytes, dir) => {
            measured = bytes + WORKING_BYTES;
            log?.info({ dir, profile, gpu_bytes: bytes }, 'image model loaded');
          },
        }),
      ),
  };
}

/** Before a first load: the weight files' sizes (bf16 -> f16 on the GPU; int8 halves the transformer). */
function estimateBytes(w: ProfileWeights, int8: boolean): number {
  if (w.state !== 'real') return 64 * 2 ** 20; // the demo checkpoint is a few MB
  const root = componentRoot(w, 'transformer');
  const folderBytes = (sub: string) => {
    const dir = join(root, sub);
    if (!existsSync(dir)) return 0;
    return readdirSync(dir).filter((f) => f.endsWith('.safetensors')).reduce((a, f) => a + statSync(join(dir, f)).size, 0);
  };
  return folderBytes('transformer') * (int8 ? 0.5 : 1) + folderBytes('text_encoder') + folderBytes('vae');
}

/** Registers imgmain and imgmain_bf16 in the app's registry (app.module.ts lists this provider). */
export const imagePipelinesProvider: FactoryProvider = {
  provide: IMAGE_PIPELINES,
  useFactory: (settings: Settings, registry: PipelineRegistry, holder: EngineHolder, log: Logger) => {
    const entries = (Object.keys(QWEN_IMAGE21_PROFILES) as (keyof typeof QWEN_IMAGE21_PROFILES)[]).map((p) => imagePipelineEntry(p, settings, holder, log));
    for (const entry of entries) registry.register(entry);
    return entries;
  },
  inject: [SETTINGS, PipelineRegistry, EngineHolder, LOGGER],
};
