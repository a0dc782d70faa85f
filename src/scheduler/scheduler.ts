// The GPU queue, API side: jobs by priority then arrival, a lane of their own for interactive requests (speech), the
// routing of each to a GPU worker, and the watchdog over each task a worker holds. No Nest code in here, and nothing
// of the engine or the models: the work itself happens in the worker processes (WorkerLink, in a WorkerPool).
//
// Order: interactive requests go to a worker as soon as one that serves them is ready (it runs them at its running
// job's next safe point when the model fits beside it, else after the job). A job goes to a ready worker that serves
// its profile and holds nothing, preferring one that has its model loaded; a job no free worker serves waits while
// later jobs of other profiles go (first come first served within a profile). A job goes only once the previous
// task's end is saved (`settle`), so a crash between two jobs never finds both running.
import { EventEmitter } from 'node:events';
import { DEFAULT_PRIORITY, STAGE, type TaskKind } from '../catalog';
import type { ServedSummary, WorkerTask } from '../worker/protocol';
import { EtaModel, fleetEtas, profileKey, nextSeries, runningLeftS, seriesRate } from './eta';
import { Lanes, type Waiting } from './lanes';
import { armTimeout, lostOutcome, type Outcome, type Running } from './running';
import type { TaskEvent, WorkerLink, WorkerPool, WorkerStatus } from './worker-link';

/** A running job's latest live preview (issue 46): a webp of where sampling is going after step `step` of `max`. */
export interface LivePreview {
  step: number;
  max: number;
  width: number;
  height: number;
  webp: Buffer;
}

export interface SchedulerEvents {
  /** A task left the queue and went to a worker (its name): positions of all queued tasks moved. */
  started: (task: WorkerTask, started: number, worker: string) => void;
  progress: (task: WorkerTask) => void;
  /** A live preview of the running task (a webp). */
  preview: (task: WorkerTask, frame: LivePreview) => void;
  /** A task ended (`started` is when it went to the worker). */
  finished: (task: WorkerTask, outcome: Outcome) => void;
  /** A queued task was removed before it ran. */
  cancelled: (task: WorkerTask) => void;
  /** A job sent to a worker that never began it (lost, or the send failed) is queued again, first in its lane. */
  requeued: (task: WorkerTask) => void;
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

export type { Outcome, Running } from './running';

export class Scheduler extends EventEmitter {
  /** Jobs and interactive requests waiting, in the order they will go. */
  private readonly lanes: Lanes;
  /** Sent to the worker, not ended. */
  private readonly inHand = new Map<string, Running>();
  /** Ends being saved: the next job waits for them. */
  private settling = 0;
  private settle: (task: WorkerTask, outcome: Outcome) => Promise<void> = async () => {};
  private stopped = false;
  private readonly eta: EtaModel;
  private readonly now: () => number;
  /** Per worker, the profile (kind/profile) of the last job sent to it: the model it holds for jobs. */
  private readonly lastKey = new WeakMap<WorkerLink, string>();
  /** ETAs of the jobs in hand and queued, until the queue or the measurements change. */
  private etaCache: { at: number; etas: Map<string, number> } | undefined;

  /** `pool` undefined: no worker (WORKERS=none, QUEUE=local): tasks wait. */
  constructor(
    private readonly pool: WorkerPool | undefined,
    private readonly o: SchedulerOptions,
  ) {
    super();
    this.lanes = new Lanes(o.interactive);
    this.eta = o.eta ?? new EtaModel({ get: () => undefined, add: () => {} });
    this.now = o.clock ?? (() => Date.now() / 1000);
    const watch = (link: WorkerLink) => {
      link.on('ready', () => this.pump());
      link.on('event', (e: TaskEvent) => this.onEvent(e));
      link.on('lost', (reason: string) => void this.onLost(link, reason));
      link.on('bounced', (id: string) => this.bounced(id));
    };
    pool?.links().forEach(watch);
    pool?.on('added', (link: WorkerLink) => {
      watch(link);
      this.pump();
    });
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
    this.lanes.add(task, priority);
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
      const links = this.pool?.links().filter((l) => l.ready || this.jobOn(l)) ?? [];
      const workers = links.map((l) => {
        const r = this.jobOn(l);
        return {
          running: r && { id: r.task.id, key: profileKey(r.task), started: r.started, expectedS: r.expectedS, leftS: runningLeftS(now, { ...r, postS: this.eta.postS(r.task) }) },
          key: this.lastKey.get(l),
          serves: (t: WorkerTask) => this.pool!.fixed || l.profiles.some((p) => p.kind === t.kind && p.profile === t.profile),
        };
      });
      this.etaCache = { at: now, etas: fleetEtas(now, workers, this.lanes.jobs(), this.eta) };
    }
    const eta = this.etaCache.etas.get(id);
    return eta === undefined ? undefined : Math.round(eta * 10) / 10;
  }

  /** A job's place in the job queue, 1 = next job to run; undefined when not queued. Interactive requests are
   * not counted: they take seconds and never wait behind a job. */
  position(id: string): number | undefined {
    return this.lanes.position(id);
  }

  queuedCount(): number {
    return this.lanes.jobs().length;
  }

  /** A running job (the first; an interactive request beside it does not replace it). */
  current(): Readonly<Running> | undefined {
    for (const r of this.inHand.values()) if (!this.o.interactive(r.task)) return r;
    return undefined;
  }

  /** The running job of `id`, if it runs. */
  running(id: string): Readonly<Running> | undefined {
    return this.inHand.get(id);
  }

  /** The job a worker runs now. */
  private jobOn(link: WorkerLink): Running | undefined {
    for (const r of this.inHand.values()) if (r.link === link && !this.o.interactive(r.task)) return r;
    return undefined;
  }

  /** Whether a worker serves (kind, profile): undefined while no worker has said what it serves. */
  serves(kind: TaskKind, profile: string): boolean | undefined {
    const p = this.served(kind, profile);
    return p === undefined ? undefined : p !== null;
  }

  /** The worker's word on (kind, profile): what it accepts, null if it does not serve it, undefined while no worker
   * has said what it serves (none on this host, or it is starting). */
  served(kind: TaskKind, profile: string): ServedSummary | null | undefined {
    if (!this.pool || this.pool.links().every((l) => !l.ready && l.profiles.length === 0)) return undefined;
    return this.profiles().find((p) => p.kind === kind && p.profile === profile) ?? null;
  }

  /** What the workers serve (their last reports; the first worker's word on a profile several serve). */
  profiles(): readonly ServedSummary[] {
    const seen = new Map<string, ServedSummary>();
    for (const l of this.pool?.links() ?? []) for (const p of l.profiles) if (!seen.has(`${p.kind}/${p.profile}`)) seen.set(`${p.kind}/${p.profile}`, p);
    return [...seen.values()];
  }

  /** The first worker's status (one host: the worker). */
  worker(): WorkerStatus | undefined {
    return this.pool?.links()[0]?.status();
  }

  /** Every worker's status, with the job it runs. */
  workers(): (WorkerStatus & { current_job: string | null })[] {
    return (this.pool?.links() ?? []).map((l) => ({ ...l.status(), current_job: this.jobOn(l)?.task.id ?? null }));
  }

  /** The first worker's GPU. */
  gpu(): Record<string, unknown> | undefined {
    return this.pool?.links()[0]?.gpu();
  }

  hasWorker(): boolean {
    return this.pool !== undefined;
  }

  /** What the pool itself says for /api/health (Redis up or down), if anything. */
  poolHealth(): Record<string, unknown> | undefined {
    return this.pool?.health();
  }

  /**
   * After an API restart, a job the store says was running on worker `name`: 'adopted' if it still runs there (its
   * events and end will land here), its outcome if it ended while the API was away, undefined if that cannot be
   * known (one host: the API's own worker went with it).
   */
  async recover(task: WorkerTask, name: string | undefined, started: number): Promise<'adopted' | Outcome | undefined> {
    if (!name || !this.pool?.reconcile) return undefined;
    const r = await this.pool.reconcile(name, task.id).catch(() => undefined);
    if (!r || r.state === 'gone') return undefined;
    if (r.state === 'running') return this.adopt(task, name, started) ? 'adopted' : undefined;
    const finished = this.now();
    if (r.state === 'done') return { status: 'done', started, finished, exec_s: r.result.exec_s };
    return { status: 'failed', code: r.reason.code, error: r.reason.message, started, finished };
  }

  /**
   * A job that was running on worker `name` when this API stopped, and still is there (QUEUE=redis): taken back into
   * hand, as begun, so its events and end land as if the API had never gone away.
   */
  adopt(task: WorkerTask, name: string, started: number): boolean {
    const link = this.pool?.link(name);
    if (!link) return false;
    const r: Running = { task, link, priority: DEFAULT_PRIORITY, started, stage: STAGE.sample, progress: { value: 0, max: 0 }, begun: true, timers: [], expectedS: this.eta.runS(task) };
    armTimeout(r, this.o.maxJobS[r.task.kind], this.now());
    this.inHand.set(task.id, r);
    this.lastKey.set(link, profileKey(task));
    this.etaCache = undefined;
    return true;
  }

  /** Queued: removed (returns 'cancelled'). With the worker: it stops at its next check (returns 'interrupted');
   * if it has not ended INTERRUPT_GRACE_S later, the worker is killed and restarted. Otherwise undefined. */
  cancel(id: string): 'cancelled' | 'interrupted' | undefined {
    const queued = this.lanes.remove(id);
    if (queued) {
      this.etaCache = undefined;
      this.emit('cancelled', queued);
      return 'cancelled';
    }
    const r = this.inHand.get(id);
    if (!r) return undefined;
    if (!r.stopping) {
      r.stopping = 'interrupted';
      r.link.cancel(id, 'interrupted');
      const grace = this.o.interruptGraceS;
      r.timers.push(setTimeout(() => r.link.kill(`${id} did not stop within ${grace} s of its DELETE`), grace * 1000));
    }
    return 'interrupted';
  }

  /** Stops taking tasks and stops the worker (its running task ends as `shutdown`). Queued jobs stay where they
   * are (the job store re-queues them at the next start); waiting interactive requests fail as cancelled. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const task of this.lanes.drainRequests()) this.emit('cancelled', task);
    await this.pool?.stop(this.o.interruptGraceS * 1000);
  }

  /** Whether `link` may be sent `task`: it serves the profile (a fixed pool's one worker takes everything). */
  private fits(link: WorkerLink, task: WorkerTask): boolean {
    return this.pool!.fixed || link.profiles.some((p) => p.kind === task.kind && p.profile === task.profile);
  }

  private holds(link: WorkerLink): boolean {
    for (const r of this.inHand.values()) if (r.link === link) return true;
    return false;
  }

  private pump(): void {
    if (this.stopped || !this.pool) return;
    const ready = this.pool.links().filter((l) => l.ready);
    if (ready.length === 0) return;
    const go = (w: Waiting, link: WorkerLink) => this.dispatch(w, link);
    // a request goes to a worker that serves it, a free one first (else beside the job it runs)
    this.lanes.take('requests', (task) => {
      const fit = ready.filter((l) => this.fits(l, task));
      return fit.find((l) => !this.holds(l)) ?? fit[0];
    }, go);
    if (this.settling > 0) return;
    // a job to a free worker that serves it, one with its model loaded first
    this.lanes.take('jobs', (task) => {
      const free = ready.filter((l) => !this.holds(l) && this.fits(l, task));
      const key = profileKey(task);
      return free.find((l) => this.lastKey.get(l) === key || l.status().loaded.includes(key)) ?? free[0];
    }, go);
  }

  private dispatch({ task, priority }: Waiting, link: WorkerLink): void {
    this.etaCache = undefined;
    const key = profileKey(task);
    const interactive = this.o.interactive(task);
    const expectedS = this.eta.runS(task) + (!interactive && key !== this.lastKey.get(link) ? this.eta.loadS(key) : 0);
    if (!interactive) this.lastKey.set(link, key);
    const r: Running = { task, link, priority, started: this.now(), stage: STAGE.loadModel, progress: { value: 0, max: 0 }, begun: false, timers: [], expectedS };
    armTimeout(r, this.o.maxJobS[r.task.kind], this.now());
    this.inHand.set(task.id, r);
    link.run(task);
    // an interactive request is running once the worker begins it; a job from now (its worker holds nothing else)
    if (!interactive) this.emit('started', task, r.started, link.name);
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
      case 'progress': {
        r.progress = { value: e.value, max: e.max };
        // the first series, and any while sampling, are the steps; a later one (frames decoded) comes after them
        const at = { at: this.now(), value: e.value, off: e.one_off_s };
        const which = !r.steps || r.stage === STAGE.sample ? 'steps' : 'after';
        r[which] = nextSeries(r[which], e.max, at);
        return void this.emit('progress', r.task);
      }
      case 'preview':
        return void this.emit('preview', r.task, { step: e.step, max: e.max, width: e.width, height: e.height, webp: Buffer.from(e.webp, 'base64') });
      case 'loaded':
        r.loadS = e.load_s;
        this.eta.recordLoad(profileKey(r.task), e.load_s);
        this.etaCache = undefined;
        return void this.emit('loaded', r.task, e.load_s);
      case 'done': {
        // the class's time leaves out the model's load and the one-off work on the way (shaders compiled, a preview
        // projection fitted): work a later run of the class does not repeat (on a software GPU it doubled a first run)
        const runS = e.exec_s - (r.loadS ?? 0) - (e.compile_s ?? 0);
        this.eta.recordRun(r.task, runS);
        const stepS = seriesRate(r.steps);
        // steps timed from their first report to their last: the split of this run, for sizes not run yet (the time
        // after the last step less the shaders compiled there: the decoder's, one-off as the rest; a class of another
        // size finds them compiled, as measured on lavapipe, where a first run's decode compiled for 1.3 s)
        if (r.steps && stepS !== undefined && r.steps.last.value === r.steps.max) this.eta.recordSplit(r.task, runS, { stepS, postS: this.now() - r.steps.last.at - (e.compile_tail_s ?? 0) });
        return this.end(r, { status: 'done', started: r.started, finished: this.now(), exec_s: e.exec_s });
      }
      case 'failed': {
        const interrupted = r.stopping === 'interrupted' && (e.code === 'interrupted' || e.code === 'cancelled');
        return this.end(r, { status: 'failed', code: interrupted ? 'interrupted' : e.code, error: interrupted ? 'interrupted' : e.message, started: r.started, finished: this.now() });
      }
    }
  }

  /** A task its worker never received (the send failed): back to the front of its lane. */
  private bounced(id: string): void {
    const r = this.inHand.get(id);
    if (!r || r.begun) return;
    this.inHand.delete(id);
    r.timers.forEach(clearTimeout);
    this.lanes.putBack([r]);
    if (!this.o.interactive(r.task)) this.emit('requeued', r.task);
    this.etaCache = undefined;
    setTimeout(() => this.pump(), 1000).unref();
  }

  /** A worker ended or was lost: every task it held ends with the reason, except those it had not begun, which go
   * back to the front of their lanes for another worker (once the lost worker can no longer take them up). */
  private async onLost(link: WorkerLink, reason: string): Promise<void> {
    this.lastKey.delete(link); // a new worker holds no model
    if (!this.stopped) this.emit('workerLost', reason);
    const held = [...this.inHand.values()].filter((r) => r.link === link);
    // the tasks it had not begun are taken back first, in one go, so nothing else is sent to it meanwhile
    const back = await Promise.all(held.map((r) => (!r.begun && !r.stopping && !this.stopped ? r.link.withdraw(r.task.id) : Promise.resolve(false))));
    const requeue: Running[] = [];
    held.forEach((r, i) => {
      if (!this.inHand.has(r.task.id)) return; // it ended meanwhile
      if (back[i]) {
        // it was next: it goes first again (queued, no worker, until another takes it)
        this.inHand.delete(r.task.id);
        r.timers.forEach(clearTimeout);
        requeue.push(r);
        return;
      }
      this.end(r, { status: 'failed', ...lostOutcome(r, reason, this.stopped, this.o.maxJobS[r.task.kind]), started: r.started, finished: this.now() });
    });
    this.lanes.putBack(requeue);
    for (const r of requeue) if (!this.o.interactive(r.task)) this.emit('requeued', r.task);
    this.etaCache = undefined;
    this.pump();
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
