// An image pipeline for the page's e2e test: no model, but an honest output derived from the input. It writes the
// colour negative of the first reference image, cover-scaled to the job's size, as a real PNG, with real stages,
// per-step progress and cooperative cancellation. `gate` (when given) must open before each step, so the test
// can see the job running.
import { rename } from 'node:fs/promises';
import sharp from 'sharp';
import { throwIfCancelled } from '../../src/common/errors';
import { STAGE } from '../../src/catalog';
import type { JobTaskPayload } from '../../src/jobs/jobs.service';
import type { Pipeline, PipelineEntry, RunContext } from '../../src/scheduler/pipeline';

export function negativeOfReferencePipeline(profile: string, opts: { gate?: () => Promise<void>; stepMs?: number } = {}): PipelineEntry {
  return {
    kind: 'image',
    profile,
    weights: () => 'demo',
    note: () => 'e2e test pipeline: the negative of the first reference image',
    create(): Pipeline<JobTaskPayload> {
      return {
        async load(ctx: RunContext) {
          ctx.stage(STAGE.loadModel);
          throwIfCancelled(ctx.signal);
        },
        async unload() {},
        async run(task: JobTaskPayload, ctx: RunContext) {
          if (task.images.length === 0) throw new Error('this test pipeline needs a reference image');
          ctx.stage(STAGE.encode);
          const { width, height } = task.job.params as { width: number; height: number };
          for (let i = 0; i < task.job.steps; i++) {
            ctx.stage(STAGE.sample);
            if (opts.gate) await opts.gate();
            await new Promise((r) => setTimeout(r, opts.stepMs ?? 20));
            throwIfCancelled(ctx.signal);
            ctx.progress(i + 1, task.job.steps);
          }
          ctx.stage(STAGE.save);
          const tmp = `${task.outputPath}.tmp`;
          await sharp(task.images[0]).removeAlpha().resize(width, height, { fit: 'cover' }).negate().png().toFile(tmp);
          await rename(tmp, task.outputPath);
        },
      };
    },
  };
}
