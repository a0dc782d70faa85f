// Inside the GPU worker: runs the tasks the API sends, one on the GPU at a time, and reports what happens as
// protocol events. The API decides the order (it sends the next job only when the worker holds nothing); this
// keeps the models: at most one loaded for jobs, and one speech model beside it when memory allows.
import { BadInputError, CancelledError } from '../common/errors';
import { stat } from 'node:fs/promises';
import { notBuilt, STAGE } from '../catalog';
import { kernelCompileS } from '../engine/kernels';
import type { Pipeline, PreviewFrame, RunContext } from '../models/common/pipeline';
import type { FailCode, FromWorker, WorkerTask } from './protocol';
import type { ProfileRegistry } from './registry';

interface Running {
  task: WorkerTask;
  started: number; // ms, performance.now()
  abort: AbortController;
  /** kernelCompileS() as it started. */
  compiled: number;
  /** Milliseconds of the pipeline's own one-off work (ctx.oneOff), shaders compiled inside it left out. */
  oneOffMs: number;
  /** oneOffS() at its latest progress report. */
  oneOffAtProgress: number;
}

/** Seconds of one-off work in the run so far: shaders compiled, and work the loaded model does once (ctx.oneOff). */
const oneOffS = (r: Running) => kernelCompileS() - r.compiled + r.oneOffMs / 1000;

type Loaded = { key: string; pipeline: Pipeline<WorkerTask> };

export interface RunnerOptions {
  /** Whether `bytes` more GPU memory fits now (the engine's canFit). Default: never, so interactive requests wait
   * for the running job to end instead of loading a second model beside it. */
  fitsBeside?: (bytes: number) => boolean;
  log?: (msg: string, extra?: object) => void;
  /** Called as a task starts with its signal; returns what undoes it when the task ends (the worker makes GPU waits
   * give up when the signal fires: EngineHolder.interruptOn). */
  bindSignal?: (signal: AbortSignal) => () => void;
  /** Live previews (PREVIEWS): pipelines get ctx.preview and their previews are reported. Default off. */
  previews?: boolean;
}

/**
 * Interactive requests (speech: entries with `interactive`) have their own lane. They run before the next job, and
 * while a job runs they run at its next `safePoint()` (between two sampling steps) when their pipeline is already
 * loaded beside it or `fitsBeside(residentBytes)` says it fits in GPU memory next to the loaded model. Otherwise they
 * wait for the running job to end. Their pipeline then stays loaded in the side slot until a job needs another model.
 * So a speech request waits at most one sampling step when memory allows, and at most the rest of the running job
 * when it does not.
 */
export class Runner {
  private readonly jobs: WorkerTask[] = [];
  private readonly interactive: WorkerTask[] = [];
  private running: Running | undefined;
  /** An interactive task running at a safe point of `running`. */
  private interjected: Running | undefined;
  private loaded: Loaded | undefined;
  /** The interactive pipeline kept beside `loaded`. */
  private side: Loaded | undefined;
  private stopped = false;
  private idle: Promise<void> = Promise.resolve();
  private readonly fitsBeside: (bytes: number) => boolean;
  private readonly log: (msg: string, extra?: object) => void;
  private readonly bindSignal: (signal: AbortSignal) => () => void;
  private readonly previews: boolean;

  constructor(
    private readonly registry: ProfileRegistry,
    private readonly report: (event: FromWorker) => void,
    o: RunnerOptions = {},
  ) {
    this.fitsBeside = o.fitsBeside ?? (() => false);
    this.log = o.log ?? (() => {});
    this.bindSignal = o.bindSignal ?? (() => () => {});
    this.previews = o.previews ?? false;
  }

  enqueue(task: WorkerTask): void {
    if (this.stopped) return this.report({ type: 'failed', id: task.id, code: 'shutdown', message: 'the GPU worker is stopping' });
    (this.isInteractive(task) ? this.interactive : this.jobs).push(task);
    queueMicrotask(() => this.pump());
  }

  /** Ids of the tasks running now (a job, and an interactive request at its safe point). */
  runningIds(): string[] {
    return [this.running, this.interjected].filter((r): r is Running => r !== undefined).map((r) => r.task.id);
  }

  /** The profiles whose pipelines are loaded, as kind/profile. */
  loadedKeys(): string[] {
    return [this.loaded, this.side].filter((l): l is Loaded => l !== undefined).map((l) => l.key);
  }

  /** A waiting task is dropped (failed `cancelled`); a running one's signal fires and it stops at its next check. */
  cancel(id: string, reason: 'cancelled' | 'interrupted'): void {
    for (const lane of [this.jobs, this.interactive]) {
      const i = lane.findIndex((t) => t.id === id);
      if (i < 0) continue;
      lane.splice(i, 1);
      return this.report({ type: 'failed', id, code: 'cancelled', message: 'cancelled' });
    }
    for (const r of [this.interjected, this.running]) if (r?.task.id === id) r.abort.abort(reason);
  }

  /** Stops taking tasks, stops the running one (failed `shutdown`), fails the waiting ones and unloads the models. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.interjected?.abort.abort('shutdown');
    this.running?.abort.abort('shutdown');
    for (const task of [...this.interactive.splice(0), ...this.jobs.splice(0)]) {
      this.report({ type: 'failed', id: task.id, code: 'shutdown', message: 'the GPU worker is stopping' });
    }
    await this.idle;
    await this.unloadSide();
    await this.unloadMain();
  }

  private isInteractive(task: WorkerTask): boolean {
    return this.registry.get(task.kind, task.profile)?.interactive === true;
  }

  private pump(): void {
    if (this.running || this.stopped) return;
    const task = this.interactive.shift() ?? this.jobs.shift();
    if (!task) return;
    const running = newRunning(task);
    this.running = running;
    this.idle = this.execute(running, false).then((end) => {
      this.running = undefined;
      this.report(end);
      setImmediate(() => this.pump());
    });
  }

  /** Runs waiting interactive requests at a safe point of the running job, while their model fits beside it. */
  private async serveInteractive(): Promise<void> {
    while (!this.stopped && this.interactive.length > 0 && !this.running?.abort.signal.aborted) {
      const task = this.interactive[0];
      const entry = this.registry.get(task.kind, task.profile);
      const ready = this.side?.key === keyOf(task) || this.loaded?.key === keyOf(task);
      // No entry: it fails at once with the missing-model reason, touching no GPU memory.
      if (entry && !ready && !this.fitsBeside(entry.residentBytes?.() ?? Number.POSITIVE_INFINITY)) return;
      this.interactive.shift();
      const r = newRunning(task);
      this.interjected = r;
      const end = await this.execute(r, true);
      this.interjected = undefined;
      this.report(end);
    }
  }

  /** Runs the task; resolves with its end event (never rejects), which the caller reports once it is not running. */
  private async execute(r: Running, beside: boolean): Promise<Extract<FromWorker, { type: 'done' | 'failed' }>> {
    const id = r.task.id;
    this.report({ type: 'started', id });
    const ctx: RunContext = {
      signal: r.abort.signal,
      stage: (stage) => this.report({ type: 'stage', id, stage }),
      progress: (value, max) => {
        r.oneOffAtProgress = oneOffS(r);
        this.report({ type: 'progress', id, value, max, one_off_s: r.oneOffAtProgress });
      },
      oneOff: async (work) => {
        const t0 = performance.now();
        const c0 = kernelCompileS();
        try {
          return await work();
        } finally {
          r.oneOffMs += performance.now() - t0 - (kernelCompileS() - c0) * 1000;
        }
      },
      ...(this.previews
        ? { preview: (p: PreviewFrame) => this.report({ type: 'preview', id, step: p.step, max: p.max, width: p.width, height: p.height, webp: p.webp.toString('base64') }) }
        : {}),
      // Interactive requests have no safe points of their own: nothing runs inside them.
      safePoint: beside || this.isInteractive(r.task) ? async () => {} : () => this.serveInteractive(),
    };
    const unbind = this.bindSignal(r.abort.signal);
    try {
      const pipeline = await this.pipelineFor(r.task, ctx, beside);
      r.abort.signal.throwIfAborted();
      await pipeline.run(r.task, ctx);
      r.abort.signal.throwIfAborted();
      await stat(r.task.output).catch(() => {
        throw new Error('the pipeline finished without writing its output file');
      });
      const once = oneOffS(r);
      return { type: 'done', id, output: r.task.output, exec_s: (performance.now() - r.started) / 1000, compile_s: once, compile_tail_s: once - r.oneOffAtProgress };
    } catch (err) {
      const { code, message } = failure(err, r.abort.signal);
      if (code === 'error') this.log('task failed', { id, error: message, stack: err instanceof Error ? err.stack : undefined });
      return { type: 'failed', id, code, message };
    } finally {
      unbind();
    }
  }

  /** The task's pipeline, loading it if needed. An interactive pipeline goes into the side slot when a model is
   * loaded and it fits beside it (always, when `beside`: serveInteractive checked the fit); anything else
   * empties both slots first. */
  private async pipelineFor(task: WorkerTask, ctx: RunContext, beside: boolean): Promise<Pipeline<WorkerTask>> {
    const key = keyOf(task);
    const kept = this.loaded?.key === key ? this.loaded.pipeline : this.side?.key === key ? this.side.pipeline : undefined;
    if (kept) {
      // kept loaded: made ready for this task (the video DiT's blocks follow the job's size; 加载模型 when they move)
      await kept.prepare?.(ctx, task);
      return kept;
    }
    const entry = this.registry.get(task.kind, task.profile);
    if (!entry) throw new UnservedError(notBuilt(task.kind, task.profile));
    ctx.stage(STAGE.loadModel);
    const intoSide = beside || (entry.interactive === true && this.loaded !== undefined && this.fitsBeside(entry.residentBytes?.() ?? Number.POSITIVE_INFINITY));
    await this.unloadSide();
    if (!intoSide) await this.unloadMain();
    const t0 = performance.now();
    const pipeline = entry.create();
    try {
      await pipeline.load(ctx, task);
    } catch (err) {
      await pipeline.unload().catch(() => {});
      throw err;
    }
    if (intoSide) this.side = { key, pipeline };
    else this.loaded = { key, pipeline };
    this.report({ type: 'loaded', id: task.id, profile: task.profile, load_s: (performance.now() - t0) / 1000, gpu_bytes: entry.residentBytes?.() ?? 0 });
    return pipeline;
  }

  private async unloadMain(): Promise<void> {
    const old = this.loaded;
    this.loaded = undefined;
    if (old) await old.pipeline.unload().catch((err) => this.log('unload failed', { error: errorText(err) }));
  }

  private async unloadSide(): Promise<void> {
    const old = this.side;
    this.side = undefined;
    if (old) await old.pipeline.unload().catch((err) => this.log('unload failed', { error: errorText(err) }));
  }
}

/** No entry serves the task's profile. */
class UnservedError extends Error {}

const newRunning = (task: WorkerTask): Running => {
  return { task, started: performance.now(), abort: new AbortController(), compiled: kernelCompileS(), oneOffMs: 0, oneOffAtProgress: 0 };
};
const keyOf = (task: WorkerTask) => `${task.kind}/${task.profile}`;

/** A failed run as the protocol reports it: an abort wins over the error it caused. */
function failure(err: unknown, signal: AbortSignal): { code: FailCode; message: string } {
  if (signal.aborted) {
    const reason = String(signal.reason ?? 'interrupted');
    return { code: reason === 'shutdown' ? 'shutdown' : reason === 'cancelled' ? 'cancelled' : 'interrupted', message: reason };
  }
  if (err instanceof CancelledError) return { code: 'interrupted', message: err.message };
  if (err instanceof BadInputError) return { code: 'bad_input', message: err.message };
  if (err instanceof UnservedError) return { code: 'unavailable', message: err.message };
  return { code: 'error', message: errorText(err) };
}

function errorText(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

