// An image pipeline for the page's e2e test: no model, but an honest output derived from the input. It writes the
// colour negative of the first reference image, cover-scaled to the job's size, as a real PNG, with real stages,
// per-step progress and cooperative cancellation, inside the real GPU worker. `gate` (when given) must open before
// each step, so the test can see the job running.
import sharp from 'sharp';
import { STAGE } from '../../src/catalog';
import { throwIfCancelled } from '../../src/common/errors';
import { commitFile, tempSibling } from '../../src/media/files';
import type { Pipeline, RunContext } from '../../src/models/common/pipeline';
import type { PipelineModule, WorkerTask } from '../../src/worker/protocol';
import type { ServedEntry } from '../../src/worker/registry';
import { waitAtGate, type ControlRef, type Gate } from '../api/control';

export function negativeOfReferencePipeline(profile: string, opts: { gate?: Gate; stepMs?: number } = {}): PipelineModule {
  return { module: __filename, export: 'makeNegativeOfReference', args: [profile, { gate: opts.gate?.ref, stepMs: opts.stepMs }] };
}

export function makeNegativeOfReference(profile: string, opts: { gate?: ControlRef; stepMs?: number }): ServedEntry {
  return {
    kind: 'image',
    profile,
    weights: () => 'demo',
    note: () => 'e2e test pipeline: the negative of the first reference image',
    create(): Pipeline<WorkerTask> {
      return {
        async load(ctx: RunContext) {
          ctx.stage(STAGE.loadModel);
          throwIfCancelled(ctx.signal);
        },
        async unload() {},
        async run(task: WorkerTask, ctx: RunContext) {
          if (task.kind !== 'image') throw new Error('this test pipeline makes images');
          if (task.images.length === 0) throw new Error('this test pipeline needs a reference image');
          ctx.stage(STAGE.encode);
          const { width, height, steps } = task.params;
          for (let i = 0; i < steps; i++) {
            ctx.stage(STAGE.sample);
            if (opts.gate) await waitAtGate(opts.gate, ctx.signal);
            await new Promise((r) => setTimeout(r, opts.stepMs ?? 20));
            throwIfCancelled(ctx.signal);
            ctx.progress(i + 1, steps);
          }
          ctx.stage(STAGE.save);
          const tmp = tempSibling(task.output);
          await sharp(task.images[0]).removeAlpha().resize(width, height, { fit: 'cover' }).negate().png().toFile(tmp);
          await commitFile(tmp, task.output);
        },
      };
    },
  };
}
