import { EventEmitter } from 'node:events';
import { CancelledError } from '../common/errors';
import { STAGE, Stage } from '../jobs/catalog';
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

/** The single-GPU queue: strict FIFO, one task at a time, at most one model loaded. No Nest code in here. */
export class Scheduler extends EventEmitter {
  private readonly queue: Task[] = [];
  private running: Running | undefined;
  private loaded: { key: string; pipeline: Pipeline } | undefined;
  private stopped = false;
  private idle: Promise<void> = Promise.resolve();
  private lastBeat = now();
  private readonly beatTimer: NodeJS.Timeout;

  constructor(
    private readonly registry: PipelineRegistry,
    private readonly log: (msg: string, extra?: object) => void = () => {},
    /** The failure reason for a task whose profile has no pipeline; it should name the missing model. */
    private readonly missing: (task: Task) => string = (t) => `profile ${t.profile}: no ${t.kind} pipeline is registered`,
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
    this.queue.push(task);
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

  /** 1 = next to run; undefined when not queued. */
  position(id: string): number | undefined {
    const i = this.queue.findIndex((t) => t.id === id);
    return i < 0 ? undefined : i + 1;
  }

  queuedCount(): number {
    return this.queue.length;
  }

  current(): Readonly<Running> | undefined {
    return this.running;
  }

  heartbeat(): { last: number; age_s: number } {
    return { last: this.lastBeat, age_s: Math.max(0, now() - this.lastBeat) };
  }

  /** Queued: removed (returns 'cancelled'). Running: the signal fires, the pipeline stops at its next check
   * (returns 'interrupted'). Otherwise undefined. */
  cancel(id: string): 'cancelled' | 'interrupted' | undefined {
    const i = this.queue.findIndex((t) => t.id === id);
    if (i >= 0) {
      const [task] = this.queue.splice(i, 1);
      this.emit('cancelled', task);
      return 'cancelled';
    }
    if (this.running?.task.id === id) {
      this.running.abort.abort('interrupted');
      return 'interrupted';
    }
    return undefined;
  }

  /** Stops taking tasks, interrupts the running one and unloads the model. Queued tasks stay where they are
   * (the job store re-queues them at the next start). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.beatTimer);
    this.running?.abort.abort('shutdown');
    await this.idle;
    await this.unloadCurrent();
  }

  private pump(): void {
    if (this.running || this.stopped) return;
    const task = this.queue.shift();
    if (!task) return;
    const running: Running = { task, started: now(), stage: STAGE.loadModel, progress: { value: 0, max: 0 }, abort: new AbortController() };
    this.running = running;
    this.emit('started', task, running.started);
    this.idle = this.execute(running).finally(() => {
      this.running = undefined;
      this.lastBeat = now();
      setImmediate(() => this.pump());
    });
  }

  private async execute(r: Running): Promise<void> {
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
    };
    let outcome: Outcome;
    try {
      const pipeline = await this.pipelineFor(r.task, ctx);
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

  private async pipelineFor(task: Task, ctx: RunContext): Promise<Pipeline> {
    const key = `${task.kind}/${task.profile}`;
    if (this.loaded?.key === key) return this.loaded.pipeline;
    const entry = this.registry.get(task.kind, task.profile);
    if (!entry) throw new Error(this.missing(task));
    ctx.stage(STAGE.loadModel);
    await this.unloadCurrent();
    const pipeline = entry.create();
    try {
      await pipeline.load(ctx);
    } catch (err) {
      await pipeline.unload().catch(() => {});
      throw err;
    }
    this.loaded = { key, pipeline };
    return pipeline;
  }

  private async unloadCurrent(): Promise<void> {
    const old = this.loaded;
    this.loaded = undefined;
    if (old) await old.pipeline.unload().catch((err) => this.log('unload failed', { error: errorText(err) }));
  }
}

function errorText(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}
