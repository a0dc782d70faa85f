// The cluster bench's pipeline: no model, a fixed duration, and its own clock readings as the output file, so the
// bench can split a job's time into dispatch (accepted by the API -> run begins in the worker), the run itself,
// and return (run ends -> the API records the job done). Built inside the GPU worker from KILN_WORKER_PIPELINES.
import { writeFile } from 'node:fs/promises';
import { STAGE } from '../../src/catalog';
import { commitFile, tempSibling } from '../../src/media/files';
import type { Pipeline } from '../../src/models/common/pipeline';
import type { PipelineModule, WorkerTask } from '../../src/worker/protocol';
import type { ServedEntry } from '../../src/worker/registry';

/** What the output file holds: Unix milliseconds of the worker's clock (the bench runs every process on one host). */
export interface RunClock {
  start: number;
  end: number;
}

/** A video profile whose run sleeps `ms` and writes its RunClock. */
export function noopPipeline(profile: string, ms: number): PipelineModule {
  return { module: __filename, export: 'makeNoopPipeline', args: [profile, ms] };
}

export function makeNoopPipeline(profile: string, ms: number): ServedEntry {
  return {
    kind: 'video',
    profile,
    weights: () => 'demo',
    note: () => 'bench: no-op pipeline',
    create: (): Pipeline<WorkerTask> => ({
      load: async () => {},
      unload: async () => {},
      async run(task, ctx) {
        const start = Date.now();
        ctx.stage(STAGE.sample);
        if (ms > 0) await new Promise((r) => setTimeout(r, ms));
        ctx.progress(1, 1);
        const tmp = tempSibling(task.output);
        await writeFile(tmp, JSON.stringify({ start, end: Date.now() } satisfies RunClock));
        await commitFile(tmp, task.output);
      },
    }),
  };
}
