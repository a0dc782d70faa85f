// Pipelines for API tests: real files out, real progress and stages, real cooperative cancellation, but no
// model. They stand in for models only in tests (injected into the registry), never in the service.
import { writeFile, rename } from 'node:fs/promises';
import sharp from 'sharp';
import { throwIfCancelled } from '../../src/common/errors';
import { STAGE } from '../../src/catalog';
import type { JobTaskPayload } from '../../src/jobs/jobs.service';
import type { Pipeline, PipelineEntry, RunContext } from '../../src/scheduler/pipeline';

export interface StepLog {
  events: string[];
}

/** Steps `job.steps` times, `stepMs` each, then writes a small png (image) or a byte file (video). `gate`, when
 * given, must resolve before each step: tests hold a job in `running` with it. */
export function testPipeline(kind: 'video' | 'image', profile: string, opts: { stepMs?: number; log?: StepLog; gate?: () => Promise<void>; fail?: string } = {}): PipelineEntry {
  const log = opts.log ?? { events: [] };
  return {
    kind,
    profile,
    weights: () => 'demo',
    note: () => 'test pipeline',
    create(): Pipeline<JobTaskPayload> {
      return {
        async load(ctx: RunContext) {
          log.events.push(`load ${profile}`);
          throwIfCancelled(ctx.signal);
        },
        async unload() {
          log.events.push(`unload ${profile}`);
        },
        async run(task: JobTaskPayload, ctx: RunContext) {
          log.events.push(`run ${task.job.id}`);
          ctx.stage(STAGE.encode);
          for (let i = 0; i < task.job.steps; i++) {
            ctx.stage(STAGE.sample);
            if (opts.gate) await opts.gate();
            await new Promise((r) => setTimeout(r, opts.stepMs ?? 2));
            throwIfCancelled(ctx.signal);
            ctx.progress(i + 1, task.job.steps);
          }
          if (opts.fail) throw new Error(opts.fail);
          ctx.stage(STAGE.save);
          const tmp = `${task.outputPath}.tmp`;
          if (kind === 'image') {
            const { width, height } = task.job.params;
            await sharp({ create: { width: Math.min(width, 64), height: Math.min(height, 64), channels: 3, background: { r: task.job.seed % 256, g: 0, b: 0 } } }).png().toFile(tmp);
          } else {
            await writeFile(tmp, Buffer.from(`test video ${task.job.id}`));
          }
          await rename(tmp, task.outputPath);
        },
      };
    },
  };
}

/** A gate tests open step by step: `await gate.wait()` blocks until `open()` (or forever until `openAll()`). */
export function makeGate() {
  let waiters: (() => void)[] = [];
  let all = false;
  return {
    wait: () => (all ? Promise.resolve() : new Promise<void>((r) => waiters.push(r))),
    open() {
      const w = waiters;
      waiters = [];
      w.forEach((r) => r());
    },
    openAll() {
      all = true;
      this.open();
    },
    /** Blocks steps again. */
    close() {
      all = false;
    },
    get waiting() {
      return waiters.length;
    },
  };
}
