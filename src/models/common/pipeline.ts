// The contract between a model pipeline and whatever runs it: the GPU worker's runner (src/worker/runner.ts) in
// the service, a RunContext of their own in the model tests and benches. A model pipeline takes its own task type
// (H3Task, QwenImageTask, Krea2ImageTask, Qwen3TtsTask), never a job record: the worker maps its protocol's task at its edge.
import type { Stage } from '../../catalog';
import type { Engine } from '../../engine/engine';

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
  /** Live previews (issue 46), absent when they are off: a small webp of where sampling is going, after step `step`
   * of `max`. */
  preview?(p: PreviewFrame): void;
  /** Runs work a loaded model does once, on its first run that needs it (a preview projection fitted against the
   * model's own VAE), and times it: the runner reports it with the shaders compiled as one-off time, which the ETA
   * leaves out of what a run of the class takes (a later run finds it done). Absent: call oneOff(). */
  oneOff?<T>(work: () => Promise<T>): Promise<T>;
}

/** `work` as the run context's one-off work where it times such work, else just `work()`. */
export function oneOff<T>(ctx: RunContext, work: () => Promise<T>): Promise<T> {
  return ctx.oneOff ? ctx.oneOff(work) : work();
}

/** One live preview: a webp whose aspect is the output's. */
export interface PreviewFrame {
  step: number;
  max: number;
  webp: Buffer;
  width: number;
  height: number;
}

/** One model, loaded once and run for many tasks. The runner keeps at most one loaded per slot: a task for
 * another profile unloads the current pipeline, then loads the next (stage 加载模型). */
export interface Pipeline<Task> {
  /** Loads the model. `next`: the task it is loaded for, where known (the runner and a plan load just before running
   * it): a pipeline whose placement depends on a job's size (MiniMax H3's DiT blocks, resident or streamed from host
   * memory) places its weights for that task. */
  load(ctx: RunContext, next?: Task): Promise<void>;
  /** A loaded pipeline made ready for the coming task (the runner calls it before each run on a model it keeps): a
   * placement chosen for the last job's size is changed where `next` needs another (reporting stage 加载模型 when
   * anything moves). Absent: nothing to do. */
  prepare?(ctx: RunContext, next: Task): Promise<void>;
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

/** What a loaded model holds: the engine its weights live on and the GPU bytes they took. */
export interface ResidentModel {
  readonly e: Engine;
  readonly bytes: number;
}

/**
 * The skeleton every model pipeline shares: the weights are loaded once and kept between tasks (residentBytes says
 * what they hold), a lost device (it takes the weights with it) makes the next load or run load them again, and
 * unload frees them unless their device is gone. A model says how it loads its parts (loadModel, which frees what it
 * loaded when it fails) and frees them (freeModel), and runs each task on `await this.loaded(ctx)`.
 */
export abstract class ResidentPipeline<Task, M extends ResidentModel> implements Pipeline<Task> {
  protected m: M | null = null;

  /** GPU bytes held, 0 when unloaded. */
  get residentBytes(): number {
    return this.m?.bytes ?? 0;
  }

  /** Loads where not loaded (placed for `next`); loaded already, it prepares for `next` instead. */
  async load(ctx: RunContext, next?: Task): Promise<void> {
    if (this.m && !this.m.e.lost) {
      if (next !== undefined) await this.placeFor(this.m, next, ctx);
      return;
    }
    this.m = null;
    this.m = await this.loadModel(ctx, next);
    this.afterLoad(this.m);
  }

  /** Re-places the loaded model for `next` (placeFor); not loaded (or its device lost), nothing: run loads it. */
  async prepare(ctx: RunContext, next: Task): Promise<void> {
    if (this.m && !this.m.e.lost) await this.placeFor(this.m, next, ctx);
  }

  async unload(): Promise<void> {
    const m = this.m;
    this.m = null;
    if (m && !m.e.lost) this.freeModel(m);
  }

  abstract run(task: Task, ctx: RunContext): Promise<void>;

  /** The loaded model, loaded first where it is not (or its device was lost), placed for `next` where given (load). */
  protected async loaded(ctx: RunContext, next?: Task): Promise<M> {
    await this.load(ctx, next);
    return this.m!;
  }

  /** Loads the model's parts, placed for `next` where the pipeline places by a job's size (load). */
  protected abstract loadModel(ctx: RunContext, next?: Task): Promise<M>;
  /** A loaded model made ready for `next` (load with a task, the model already loaded): by default nothing moves. */
  protected async placeFor(_m: M, _next: Task, _ctx: RunContext): Promise<void> {}
  protected abstract freeModel(m: M): void;
  /** Called once a load is in place (the model's onLoaded report). */
  protected afterLoad(_m: M): void {}
}
