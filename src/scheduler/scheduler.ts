import { EventEmitter } from 'node:events';
import { CancelledError } from '../common/errors';
import { STAGE, Stage } from '../catalog';
import { Pipeline, PipelineRegistry, RunContext } from './pipeline';

/** Something to run on the GPU. `payload` goes to the pipeline untouched. */
export interface Task {
  id: string;
  kind: string;
  profile: string;
  payload: unknown;
}

export interface Running {
  task: Task;
  started: number; // Unix seconds
  stage: Stage;
  progress: { value: number; max: number };
  abort: AbortController;
}

export type Outcome = { status: 'done'; started: number; finished: number } | { status: 'failed'; error: string; started: number; finished: number; cause?: unknown };

export interface SchedulerEvents {
  /** A task left the queue and started: positions of all queued tasks moved. */
  started: (task: Task, started: number) => void;
  progress: (task: Task) => void;
  /** A task ended (`started` is when it began running; a task cancelled while queued never started). */
  finished: (task: Task, outcome: Outcome) => void;
  /** A queued task was removed before it ran. */
  cancelled: (task: Task) => void;
}

const now = () => Date.now() / 1000;

type Loaded = { key: string; pipeline: Pipeline };

/** The single-GPU queue: strict FIFO for jobs, one task on the GPU at a time. No Nest code in here.
 *
 * Interactive requests (speech: entries with `interactive`) have their own lane. They run before the next
 * queued job, and while a job runs they run at its next `safePoint()` (between two sampling steps) when their
 * pipeline is already loaded beside it or `fitsBeside(residentBytes)` says it fits in GPU memory next to the
 * loaded model. Otherwise they wait for the running job to end. Their pipeline then stays loaded in the side
 * slot until a job needs another model. So a speech request waits at most one sampling step when memory
 * allows, and at most the rest of the running job when it does not. */
export class Scheduler extends EventEmitter {
  private readonly queue: Task[] = [];
  private readonly interactive: Task[] = [];
  private running: Running | undefined;
  /** An interactive task running at a safe point of `running`. */
  private interjected: Running | undefined;
  private loaded: Loaded | undefined;
  /** The interactive pipeline kept beside `loaded`. */
  private side: Loaded | undefined;
  private stopped = false;
  private idle: Promise<void> = Promise.resolve();
  private lastBeat = now();
  private readonly beatTimer: NodeJS.Timeout;

  constructor(
    private readonly registry: PipelineRegistry,
    private readonly log: (msg: string, extra?: object) => void = () => {},
    /** The failure reason for a task whose profile has no pipeline; it should name the missing model. */
    private readonly missing: (task: Task) => string = (t) => `profile ${t.profile}: no ${t.kind} pipeline is registered`,
    /** Whether `bytes` more GPU memory fits now (the engine's canFit). Default: never, so interactive requests
     * wait for the running job to end instead of loading a second model beside it. */
    private readonly fitsBeside: (bytes: number) => boolean = () => false,
  ) {
    super();
    // The watchdog's heartbeat: proves the event loop (and so the scheduler loop) is not stuck.
    this.beatTimer = setInterval(() => (this.lastBeat = now()), 1000);
    this.beatTimer.unref();
  }

  override on<E extends keyof SchedulerEvents>(event: E, listener: SchedulerEvents[E]): this {
    return super.on(event, listener);
  }

  enqueue(task: Task): void {
    if (this.stopped) throw new Error('scheduler is stopped');
    (this.isInteractive(task) ? this.interactive : this.queue).push(task);
    queueMicrotask(() => this.pump());
  }

  /** Enqueues and resolves with the outcome (synchronous endpoints: speech). */
  runToEnd(task: Task): Promise<Outcome> {
    return new Promise((resolve) => {
      const onFinished = (t: Task, outcome: Outcome) => {
        if (t.id !== task.id) return;
        off();
        resolve(outcome);
      };
      const onCancelled = (t: Task) => {
        if (t.id !== task.id) return;
        off();
        resolve({ status: 'failed', error: 'cancelled', started: 0, finished: now() });
      };
      const off = () => {
        this.off('finished', onFinished);
        this.off('cancelled', onCancelled);
      };
      this.on('finished', onFinished);
      this.on('cancelled', onCancelled);
      this.enqueue(task);
    });
  }

  /** A job's place in the job queue, 1 = next job to run; undefined when not queued. Interactive requests are
   * not counted: they take seconds and never wait behind a job. */
  position(id: string): number | undefined {
    const i = this.queue.findIndex((t) => t.id === id);
    return i < 0 ? undefined : i + 1;
  }

  queuedCount(): number {
    return this.queue.length;
  }

  /** The running job (an interactive request run at its safe point does not replace it). */
  current(): Readonly<Running> | undefined {
    return this.running;
  }

  heartbeat(): { last: number; age_s: number } {
    return { last: this.lastBeat, age_s: Math.max(0, now() - this.lastBeat) };
  }

  /** Queued: removed (returns 'cancelled'). Running: the signal fires, the pipeline stops at its next check
   * (returns 'interrupted'). Otherwise undefined. */
  cancel(id: string): 'cancelled' | 'interrupted' | undefined {
    for (const lane of [this.queue, this.interactive]) {
      const i = lane.findIndex((t) => t.id === id);
      if (i < 0) continue;
      const [task] = lane.splice(i, 1);
      this.emit('cancelled', task);
      return 'cancelled';
    }
    for (const r of [this.interjected, this.running]) {
      if (r?.task.id !== id) continue;
      r.abort.abort('interrupted');
      return 'interrupted';
    }
    return undefined;
  }

  /** Stops taking tasks, interrupts the running one and unloads the models. Queued jobs stay where they are
   * (the job store re-queues them at the next start); waiting interactive requests fail as cancelled. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.beatTimer);
    this.interjected?.abort.abort('shutdown');
    this.running?.abort.abort('shutdown');
    for (const task of this.interactive.splice(0)) this.emit('cancelled', task);
    await this.idle;
    await this.unloadSide();
    await this.unloadMain();
  }

  private isInteractive(task: Task): boolean {
    return this.registry.get(task.kind, task.profile)?.interactive === true;
  }

  private pump(): void {
    if (this.running || this.stopped) return;
    const task = this.interactive.shift() ?? this.queue.shift();
    if (!task) return;
    const running = this.newRunning(task);
    this.running = running;
    this.emit('started', task, running.started);
    this.idle = this.execute(running, false).finally(() => {
      this.running = undefined;
      this.lastBeat = now();
      setImmediate(() => this.pump());
    });
  }

  private newRunning(task: Task): Running {
    return { task, started: now(), stage: STAGE.loadModel, progress: { value: 0, max: 0 }, abort: new AbortController() };
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
      const r = this.newRunning(task);
      this.interjected = r;
      this.emit('started', task, r.started);
      try {
        await this.execute(r, true);
      } finally {
        this.interjected = undefined;
      }
    }
  }

  private async execute(r: Running, beside: boolean): Promise<void> {
    const ctx: RunContext = {
      signal: r.abort.signal,
      stage: (s) => {
        r.stage = s;
        this.lastBeat = now();
        this.emit('progress', r.task);
      },
      progress: (value, max) => {
        r.progress = { value, max };
        this.lastBeat = now();
        this.emit('progress', r.task);
      },
      // Interactive requests have no safe points of their own: nothing runs inside them.
      safePoint: beside || this.isInteractive(r.task) ? async () => {} : () => this.serveInteractive(),
    };
    let outcome: Outcome;
    try {
      const pipeline = await this.pipelineFor(r.task, ctx, beside);
      if (r.abort.signal.aborted) throw new CancelledError(String(r.abort.signal.reason));
      await pipeline.run(r.task.payload, ctx);
      if (r.abort.signal.aborted) throw new CancelledError(String(r.abort.signal.reason));
      outcome = { status: 'done', started: r.started, finished: now() };
    } catch (err) {
      const error = r.abort.signal.aborted ? String(r.abort.signal.reason ?? 'interrupted') : errorText(err);
      if (!r.abort.signal.aborted) this.log('task failed', { id: r.task.id, error, stack: err instanceof Error ? err.stack : undefined });
      outcome = { status: 'failed', error, started: r.started, finished: now(), cause: err };
    }
    this.emit('finished', r.task, outcome);
  }

  /** The task's pipeline, loading it if needed. An interactive pipeline goes into the side slot when a model is
   * loaded and it fits beside it (always, when `beside`: serveInteractive checked the fit); anything else
   * empties both slots first. */
  private async pipelineFor(task: Task, ctx: RunContext, beside: boolean): Promise<Pipeline> {
    const key = keyOf(task);
    if (this.loaded?.key === key) return this.loaded.pipeline;
    if (this.side?.key === key) return this.side.pipeline;
    const entry = this.registry.get(task.kind, task.profile);
    if (!entry) throw new Error(this.missing(task));
    ctx.stage(STAGE.loadModel);
    const intoSide = beside || (entry.interactive === true && this.loaded !== undefined && this.fitsBeside(entry.residentBytes?.() ?? Number.POSITIVE_INFINITY));
    await this.unloadSide();
    if (!intoSide) await this.unloadMain();
    const pipeline = entry.create();
    try {
      await pipeline.load(ctx);
    } catch (err) {
      await pipeline.unload().catch(() => {});
      throw err;
    }
    if (intoSide) this.side = { key, pipeline };
    else this.loaded = { key, pipeline };
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

const keyOf = (task: Task) => `${task.kind}/${task.profile}`;

function errorText(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}
