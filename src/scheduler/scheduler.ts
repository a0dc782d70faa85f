// The single-GPU queue, API side: strict FIFO for jobs, a lane of their own for interactive requests (speech), and
// the watchdog over each task the GPU worker holds. No Nest code in here, and nothing of the engine or the models:
// the work itself happens in the worker process (WorkerLink).
//
// Order: interactive requests go to the worker as soon as it is ready (it runs them at the running job's next safe
// point when the model fits beside it, else after the job); the next job goes only when the worker holds nothing,
// and only once the previous task's end is saved (`settle`), so a crash between two jobs never finds both running.
import { EventEmitter } from 'node:events';
import { DEFAULT_PRIORITY, STAGE, STAGE_WORDS, type Stage, type TaskKind } from '../catalog';
import type { FailCode, ServedProfile, WorkerTask } from '../worker/protocol';
import { EtaModel, profileKey, queueEtas } from './eta';
import type { TaskEvent, WorkerLink, WorkerStatus } from './worker-link';

export interface Running {
  task: WorkerTask;
  /** Unix seconds it was sent to the worker. */
  started: number;
  stage: Stage;
  progress: { value: number; max: number };
  /** The worker began it (an interactive request may wait there for a safe point). */
  begun: boolean;
  /** Why it must stop: a DELETE (interrupted), or its time limit (timeout); set once. */
  stopping?: 'interrupted' | 'timeout';
  timers: NodeJS.Timeout[];
  /** Seconds it was expected to take when sent (its model's load included if the GPU had to switch). */
  expectedS: number;
  /** Seconds its model took to load, if it had to be loaded. */
  loadS?: number;
}

export type Outcome =
  | { status: 'done'; started: number; finished: number; exec_s: number }
  | { status: 'failed'; code: FailCode | 'crashed' | 'timeout'; error: string; started: number; finished: number };

export interface SchedulerEvents {
  /** A task left the queue and went to the worker: positions of all queued tasks moved. */
  started: (task: WorkerTask, started: number) => void;
  progress: (task: WorkerTask) => void;
  /** A task ended (`started` is when it went to the worker). */
  finished: (task: WorkerTask, outcome: Outcome) => void;
  /** A queued task was removed before it ran. */
  cancelled: (task: WorkerTask) => void;
  /** The worker loaded the task's model (seconds it took). */
  loaded: (task: WorkerTask, seconds: number) => void;
  /** The worker process ended while the service runs (it is started again). */
  workerLost: (reason: string) => void;
}

export interface SchedulerOptions {
  /** Which kinds are interactive (speech). */
  interactive: (task: WorkerTask) => boolean;
  /** Seconds a task may take to stop after its DELETE before the worker is killed (INTERRUPT_GRACE_S). */
  interruptGraceS: number;
  /** Longest run per kind, seconds (MAX_JOB_S). */
  maxJobS: Record<TaskKind, number>;
  /** What the ETA learns from (measured runtimes); default: first guesses only, nothing kept. */
  eta?: EtaModel;
  /** Unix seconds now (tests give a fake clock). */
  clock?: () => number;
  log?: (msg: string, extra?: object) => void;
}

export class Scheduler extends EventEmitter {
  /** Jobs waiting, in the order they will run: priority (higher first), then arrival. */
  private readonly queue: WorkerTask[] = [];
  private readonly priorities = new Map<string, number>();
  private readonly interactive: WorkerTask[] = [];
  /** Sent to the worker, not ended. */
  private readonly inHand = new Map<string, Running>();
  /** Ends being saved: the next job waits for them. */
  private settling = 0;
  private settle: (task: WorkerTask, outcome: Outcome) => Promise<void> = async () => {};
  private stopped = false;
  private readonly eta: EtaModel;
  private readonly now: () => number;
  /** The profile (kind/profile) the last job sent used: the model the GPU holds for jobs. */
  private lastKey: string | undefined;
  /** ETAs of the jobs in hand and queued, until the queue or the measurements change. */
  private etaCache: { at: number; etas: Map<string, number> } | undefined;

  /** `link` undefined: no worker on this host (WORKERS=none): tasks wait. */
  constructor(
    private readonly link: WorkerLink | undefined,
    private readonly o: SchedulerOptions,
  ) {
    super();
    this.eta = o.eta ?? new EtaModel({ get: () => undefined, add: () => {} });
    this.now = o.clock ?? (() => Date.now() / 1000);
    link?.on('ready', () => this.pump());
    link?.on('event', (e: TaskEvent) => this.onEvent(e));
    link?.on('lost', (reason: string) => this.onLost(reason));
  }

  override on<E extends keyof SchedulerEvents>(event: E, listener: SchedulerEvents[E]): this {
    return super.on(event, listener);
  }

  /** Saves a task's end (the job store); the next job is sent only after it resolves. */
  settleWith(fn: (task: WorkerTask, outcome: Outcome) => Promise<void>): void {
    this.settle = fn;
  }

  /** Queues a task; a job goes after every job of its priority or higher (default 5). */
  enqueue(task: WorkerTask, priority = DEFAULT_PRIORITY): void {
    if (this.stopped) throw new Error('scheduler is stopped');
    this.etaCache = undefined;
    if (this.o.interactive(task)) this.interactive.push(task);
    else {
      this.priorities.set(task.id, priority);
      const after = this.queue.findIndex((t) => (this.priorities.get(t.id) ?? DEFAULT_PRIORITY) < priority);
      this.queue.splice(after < 0 ? this.queue.length : after, 0, task);
    }
    queueMicrotask(() => this.pump());
  }

  /** Enqueues and resolves with the outcome (synchronous endpoints: speech). */
  runToEnd(task: WorkerTask): Promise<Outcome> {
    return new Promise((resolve) => {
      const onFinished = (t: WorkerTask, outcome: Outcome) => t.id === task.id && (off(), resolve(outcome));
      const onCancelled = (t: WorkerTask) => t.id === task.id && (off(), resolve({ status: 'failed', code: 'cancelled', error: 'cancelled', started: 0, finished: this.now() }));
      const off = () => {
        this.off('finished', onFinished);
        this.off('cancelled', onCancelled);
      };
      this.on('finished', onFinished);
      this.on('cancelled', onCancelled);
      this.enqueue(task);
    });
  }

  /** Expected seconds until the job finishes (queued or running), undefined for any other. */
  etaS(id: string): number | undefined {
    const running = this.current();
    const now = this.now();
    // kept until the queue or the measurements change; with a job running (its part counts down) for 0.1 s at most,
    // so a listing computes the queue's ETAs once, not once per job
    if (!this.etaCache || (running && now - this.etaCache.at > 0.1)) {
      const r = running && { id: running.task.id, key: profileKey(running.task), started: running.started, expectedS: running.expectedS };
      this.etaCache = { at: now, etas: queueEtas(now, r, this.queue, this.eta, this.lastKey) };
    }
    const eta = this.etaCache.etas.get(id);
    return eta === undefined ? undefined : Math.round(eta * 10) / 10;
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

  /** The running job (an interactive request beside it does not replace it). */
  current(): Readonly<Running> | undefined {
    for (const r of this.inHand.values()) if (!this.o.interactive(r.task)) return r;
    return undefined;
  }

  /** Whether a worker serves (kind, profile): undefined while no worker has said what it serves. */
  serves(kind: TaskKind, profile: string): boolean | undefined {
    const p = this.served(kind, profile);
    return p === undefined ? undefined : p !== null;
  }

  /** The worker's word on (kind, profile): what it accepts, null if it does not serve it, undefined while no worker
   * has said what it serves (none on this host, or it is starting). */
  served(kind: TaskKind, profile: string): ServedProfile | null | undefined {
    if (!this.link || (!this.link.ready && this.link.profiles.length === 0)) return undefined;
    return this.profiles().find((p) => p.kind === kind && p.profile === profile) ?? null;
  }

  /** What the worker serves (its last report). */
  profiles(): readonly ServedProfile[] {
    return this.link?.profiles ?? [];
  }

  worker(): WorkerStatus | undefined {
    return this.link?.status();
  }

  gpu(): Record<string, unknown> | undefined {
    return this.link?.gpu();
  }

  hasWorker(): boolean {
    return this.link !== undefined;
  }

  /** Queued: removed (returns 'cancelled'). With the worker: it stops at its next check (returns 'interrupted');
   * if it has not ended INTERRUPT_GRACE_S later, the worker is killed and restarted. Otherwise undefined. */
  cancel(id: string): 'cancelled' | 'interrupted' | undefined {
    for (const lane of [this.queue, this.interactive]) {
      const i = lane.findIndex((t) => t.id === id);
      if (i < 0) continue;
      const [task] = lane.splice(i, 1);
      this.priorities.delete(id);
      this.etaCache = undefined;
      this.emit('cancelled', task);
      return 'cancelled';
    }
    const r = this.inHand.get(id);
    if (!r) return undefined;
    if (!r.stopping) {
      r.stopping = 'interrupted';
      this.link?.cancel(id, 'interrupted');
      const grace = this.o.interruptGraceS;
      r.timers.push(setTimeout(() => this.link?.kill(`${id} did not stop within ${grace} s of its DELETE`), grace * 1000));
    }
    return 'interrupted';
  }

  /** Stops taking tasks and stops the worker (its running task ends as `shutdown`). Queued jobs stay where they
   * are (the job store re-queues them at the next start); waiting interactive requests fail as cancelled. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const task of this.interactive.splice(0)) this.emit('cancelled', task);
    await this.link?.stop(this.o.interruptGraceS * 1000);
  }

  private pump(): void {
    if (this.stopped || !this.link?.ready) return;
    while (this.interactive.length > 0) this.dispatch(this.interactive.shift()!);
    if (this.inHand.size > 0 || this.settling > 0) return;
    const job = this.queue.shift();
    if (!job) return;
    this.priorities.delete(job.id);
    this.dispatch(job);
  }

  private dispatch(task: WorkerTask): void {
    this.etaCache = undefined;
    const key = profileKey(task);
    const interactive = this.o.interactive(task);
    const expectedS = this.eta.runS(task) + (!interactive && key !== this.lastKey ? this.eta.loadS(key) : 0);
    if (!interactive) this.lastKey = key;
    const r: Running = { task, started: this.now(), stage: STAGE.loadModel, progress: { value: 0, max: 0 }, begun: false, timers: [], expectedS };
    const limit = this.o.maxJobS[task.kind];
    r.timers.push(setTimeout(() => {
      r.stopping ??= 'timeout';
      this.link?.kill(`${task.id} ran past MAX_JOB_S (${limit} s for ${task.kind})`);
    }, limit * 1000));
    for (const t of r.timers) t.unref();
    this.inHand.set(task.id, r);
    this.link!.run(task);
    // an interactive request is running once the worker begins it; a job from now (it holds nothing else)
    if (!this.o.interactive(task)) this.emit('started', task, r.started);
  }

  private onEvent(e: TaskEvent): void {
    const r = this.inHand.get(e.id);
    if (!r) return;
    switch (e.type) {
      case 'started':
        r.begun = true;
        if (this.o.interactive(r.task)) this.emit('started', r.task, this.now());
        return;
      case 'stage':
        r.stage = e.stage;
        return void this.emit('progress', r.task);
      case 'progress':
        r.progress = { value: e.value, max: e.max };
        return void this.emit('progress', r.task);
      case 'loaded':
        r.loadS = e.load_s;
        this.eta.recordLoad(profileKey(r.task), e.load_s);
        this.etaCache = undefined;
        return void this.emit('loaded', r.task, e.load_s);
      case 'done':
        this.eta.recordRun(r.task, e.exec_s - (r.loadS ?? 0));
        return this.end(r, { status: 'done', started: r.started, finished: this.now(), exec_s: e.exec_s });
      case 'failed': {
        const interrupted = r.stopping === 'interrupted' && (e.code === 'interrupted' || e.code === 'cancelled');
        return this.end(r, { status: 'failed', code: interrupted ? 'interrupted' : e.code, error: interrupted ? 'interrupted' : e.message, started: r.started, finished: this.now() });
      }
    }
  }

  /** The worker process ended: every task it held ends with the reason, except interactive requests it had not
   * begun, which go back to the front of their lane for the next worker. */
  private onLost(reason: string): void {
    const requeue: WorkerTask[] = [];
    this.lastKey = undefined; // a new worker holds no model
    if (!this.stopped) this.emit('workerLost', reason);
    for (const r of [...this.inHand.values()]) {
      if (!r.begun && !r.stopping && this.o.interactive(r.task) && !this.stopped) {
        this.inHand.delete(r.task.id);
        r.timers.forEach(clearTimeout);
        requeue.push(r.task);
        continue;
      }
      this.end(r, { status: 'failed', ...lostOutcome(r, reason, this.stopped, this.o.maxJobS[r.task.kind]), started: r.started, finished: this.now() });
    }
    this.interactive.unshift(...requeue);
  }

  private end(r: Running, outcome: Outcome): void {
    this.etaCache = undefined;
    r.timers.forEach(clearTimeout);
    this.inHand.delete(r.task.id);
    this.settling++;
    this.emit('finished', r.task, outcome);
    this.settle(r.task, outcome)
      .catch((err) => this.o.log?.('saving a task end failed', { id: r.task.id, error: String(err) }))
      .finally(() => {
        this.settling--;
        this.pump();
      });
  }
}

/** The error of a task whose worker died under it. */
function lostOutcome(r: Running, reason: string, stopping: boolean, limitS: number): Pick<Extract<Outcome, { status: 'failed' }>, 'code' | 'error'> {
  if (stopping) return { code: 'shutdown', error: 'shutdown' };
  if (r.stopping === 'interrupted') return { code: 'interrupted', error: 'interrupted' };
  if (r.stopping === 'timeout') return { code: 'timeout', error: `timed out after ${limitS} s` };
  const what = r.task.kind === 'tts' ? 'request' : 'job';
  return { code: 'crashed', error: `GPU worker ${reason} while ${STAGE_WORDS[r.stage]}; the ${what} was not finished` };
}
