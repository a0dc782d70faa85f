// The contract between a model pipeline and whatever runs it: the GPU worker's runner (src/worker/runner.ts) in
// the service, a RunContext of their own in the model tests and benches. A model pipeline takes its own task type
// (VideoTask, ImageTask, SpeechTask), never a job record: the worker maps its protocol's task at its edge.
import type { Stage } from '../../catalog';

/** What a running pipeline reports and checks. `signal` fires on cancel/interrupt: check it (throwIfCancelled)
 * at least between sampling steps and between stages. */
export interface RunContext {
  readonly signal: AbortSignal;
  stage(stage: Stage): void;
  progress(value: number, max: number): void;
  /** A safe point between two sampling steps: the runner may run waiting interactive requests (speech) here,
   * beside this pipeline, when their model fits in GPU memory next to it. Call it where no GPU work of this job
   * is pending that the interactive request could disturb (tensors stay allocated; that is fine). */
  safePoint(): Promise<void>;
}

/** One model, loaded once and run for many tasks. The runner keeps at most one loaded per slot: a task for
 * another profile unloads the current pipeline, then loads the next (stage 加载模型). */
export interface Pipeline<Task> {
  load(ctx: RunContext): Promise<void>;
  run(task: Task, ctx: RunContext): Promise<void>;
  unload(): Promise<void>;
}

/** A sampler's onStep for a pipeline run: reports the step as progress, then offers the runner its safe point. */
export function stepReporter(ctx: RunContext): (done: number, total: number) => Promise<void> {
  return async (done, total) => {
    ctx.progress(done, total);
    await ctx.safePoint();
  };
}
