// The GPU workers on any host (QUEUE=redis; docs/deploy.md), as the scheduler's pool. Each worker publishes a
// heartbeat key every second; the fleet reads them every second and keeps one RemoteWorker link per worker: ready
// while its heartbeat is fresh, lost once it is older than WORKER_STALL_S. A task goes into the worker's own BullMQ
// queue; its progress events and its end come back through BullMQ's queue events; cancels go on the worker's control
// channel. While Redis is unreachable nothing is counted lost (nothing can be told): the API keeps answering, jobs
// wait in its store, and dispatch resumes when Redis is back.
import { Queue, QueueEvents } from 'bullmq';
import Redis from 'ioredis';
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { PROTOCOL_VERSION, REDIS_KEYS, type Control, type FailedReason, type FromWorker, type ServedSummary, type TaskResult, type WorkerBeat, type WorkerTask } from '../worker/protocol';
import type { WorkerKeeper } from './worker-keeper';
import type { Reconciled, TaskEvent, WorkerLink, WorkerPool, WorkerStatus } from './worker-link';

const POLL_MS = 1000;
/** How long a finished task's BullMQ record stays (the API reconciles its jobs from them after a restart). */
const KEEP_S = 7 * 86_400;

export interface FleetOptions {
  url: string;
  /** Seconds without a heartbeat before a worker counts as lost (WORKER_STALL_S). */
  stallS: number;
  log: Logger;
}


export class RedisFleet extends EventEmitter implements WorkerPool {
  readonly fixed = false;
  private readonly redis: Redis;
  private readonly workers = new Map<string, RemoteWorker>();
  private readonly timer: NodeJS.Timeout;
  private up = false;
  /** When Redis last came back: heartbeats older than that are not held against the workers for WORKER_STALL_S. */
  private upSince = 0;

  constructor(private readonly o: FleetOptions) {
    super();
    this.redis = new Redis(o.url, { maxRetriesPerRequest: null });
    this.redis.on('ready', () => {
      this.up = true;
      this.upSince = Date.now() / 1000;
      // dispatch resumes: the workers that were ready before Redis went away are ready again
      setImmediate(() => this.workers.forEach((w) => w.ready && w.emit('ready')));
    });
    this.redis.on('end', () => (this.up = false));
    this.redis.on('close', () => (this.up = false));
    this.redis.on('error', (err) => o.log.debug({ err: err.message }, 'redis'));
    this.timer = setInterval(() => void this.poll(), POLL_MS);
    this.timer.unref();
  }

  private keeper: WorkerKeeper | undefined;

  /** A worker process of this API's own, stopped with the fleet. */
  keep(keeper: WorkerKeeper): void {
    this.keeper = keeper;
  }

  /** Resolves once the worker list was read (or after `waitMs` if Redis does not answer); starts the own worker. */
  async start(waitMs = 5000): Promise<void> {
    this.keeper?.start();
    await Promise.race([this.poll(), new Promise((r) => setTimeout(r, waitMs))]);
  }

  get redisUp(): boolean {
    return this.up && this.redis.status === 'ready';
  }

  links(): WorkerLink[] {
    return [...this.workers.values()];
  }

  link(name: string): WorkerLink | undefined {
    return this.workers.get(name) ?? this.add(name);
  }

  health(): Record<string, unknown> {
    return { redis: this.redisUp ? 'ok' : 'down', workers: this.workers.size };
  }

  /** After an API restart: where the task `id` stands in worker `name`'s queue. */
  async reconcile(name: string, id: string): Promise<Reconciled> {
    if (!this.redisUp) await new Promise((r) => setTimeout(r, 2000));
    const w = this.workers.get(name) ?? this.add(name);
    const job = await w.queue.getJob(id);
    if (!job) return { state: 'gone' };
    const state = await job.getState();
    if (state === 'completed') return { state: 'done', result: job.returnvalue as TaskResult };
    if (state === 'failed') return { state: 'failed', reason: parseFailed(job.failedReason) };
    return { state: 'running' };
  }

  async stop(graceMs = 10_000): Promise<void> {
    clearInterval(this.timer);
    await this.keeper?.stop(graceMs);
    await Promise.all([...this.workers.values()].map((w) => w.close()));
    this.redis.disconnect();
  }

  private add(name: string): RemoteWorker {
    const w = new RemoteWorker(name, this.o, this.redis, () => this.redisUp);
    this.workers.set(name, w);
    this.emit('added', w);
    return w;
  }

  /** Reads every worker's heartbeat: new workers join, fresh ones are ready, stale ones lost. */
  private async poll(): Promise<void> {
    if (!this.redisUp) return;
    try {
      const names = await this.redis.smembers(REDIS_KEYS.workers);
      const beats = names.length ? await this.redis.mget(names.map(REDIS_KEYS.worker)) : [];
      const now = Date.now() / 1000;
      names.forEach((name, i) => {
        const raw = beats[i];
        const w = this.workers.get(name) ?? (raw ? this.add(name) : undefined);
        w?.heard(raw ? (JSON.parse(raw) as WorkerBeat & { fatal?: string }) : undefined, now, this.upSince);
      });
      // a worker gone from the list (its key expired, and another API pruned it) is gone here too
      for (const w of this.workers.values()) if (!names.includes(w.name)) w.heard(undefined, now, this.upSince);
      // forget workers whose heartbeat key expired long ago and that hold nothing
      const dead = names.filter((n, i) => !beats[i] && !this.workers.get(n)?.ready);
      if (dead.length) await this.redis.srem(REDIS_KEYS.workers, ...dead);
    } catch (err) {
      this.o.log.debug({ err: (err as Error).message }, 'reading the workers failed');
    }
  }
}

function parseFailed(reason: string | undefined): FailedReason {
  try {
    const r = JSON.parse(reason ?? '') as FailedReason;
    if (typeof r.code === 'string' && typeof r.message === 'string') return r;
  } catch {
    // a reason BullMQ wrote itself (a stalled job, a lost lock)
  }
  return { code: 'error', message: reason?.includes('stalled') ? 'its GPU worker stopped answering while running it' : reason || 'failed' };
}

/** One GPU worker of the fleet. */
export class RemoteWorker extends EventEmitter implements WorkerLink {
  readonly queue: Queue;
  private readonly events: QueueEvents;
  private beat: (WorkerBeat & { fatal?: string }) | undefined;
  private state: WorkerStatus['state'] = 'starting';
  private lastExit: WorkerStatus['last_exit'] = null;
  private restarts = 0;
  private startedAt: number | undefined;

  constructor(
    readonly name: string,
    private readonly o: FleetOptions,
    private readonly redis: Redis,
    private readonly redisUp: () => boolean,
  ) {
    super();
    // connection options, not clients: BullMQ owns (and on close, closes) connections it made itself
    this.queue = new Queue(REDIS_KEYS.queue(name), { connection: { url: o.url, maxRetriesPerRequest: null } });
    this.events = new QueueEvents(REDIS_KEYS.queue(name), { connection: { url: o.url, maxRetriesPerRequest: null } });
    const quiet = (err: Error) => o.log.debug({ err: err.message, worker: name }, 'bullmq');
    this.queue.on('error', quiet);
    this.events.on('error', quiet);
    this.events.on('progress', ({ jobId, data }) => this.emit('event', { ...(data as object), id: jobId } as TaskEvent));
    this.events.on('completed', ({ jobId, returnvalue }) => {
      const r = (typeof returnvalue === 'string' ? JSON.parse(returnvalue) : returnvalue) as TaskResult;
      this.emit('event', { type: 'done', id: jobId, output: r.output, exec_s: r.exec_s, compile_s: r.compile_s, compile_tail_s: r.compile_tail_s } satisfies FromWorker);
    });
    this.events.on('failed', ({ jobId, failedReason }) => {
      const r = parseFailed(failedReason);
      this.emit('event', { type: 'failed', id: jobId, code: r.code, message: r.message } satisfies FromWorker);
    });
  }

  get ready(): boolean {
    return this.state === 'ready' && this.redisUp();
  }

  get profiles(): readonly ServedSummary[] {
    return this.beat?.profiles ?? [];
  }

  gpu(): Record<string, unknown> | undefined {
    if (!this.beat) return undefined;
    return this.beat.memory ? { ...this.beat.gpu, memory: this.beat.memory } : this.beat.gpu;
  }

  run(task: WorkerTask): void {
    this.queue
      .add('task', task, { jobId: task.id, attempts: 1, removeOnComplete: { age: KEEP_S }, removeOnFail: { age: KEEP_S } })
      .catch((err: Error) => {
        // Redis went away between the check and the send: the worker never got it; the scheduler takes it back
        this.o.log.warn({ id: task.id, worker: this.name, err: err.message }, 'sending a task failed');
        this.emit('bounced', task.id);
      });
  }

  cancel(id: string, reason: 'cancelled' | 'interrupted'): void {
    this.control({ type: 'cancel', id, reason });
    void this.redis.set(REDIS_KEYS.cancel(id), reason, 'EX', 86_400).catch(() => {});
  }

  /** A remote process cannot be killed from here: it is told to exit (its supervisor starts it again), and its
   * tasks end now. */
  kill(reason: string): void {
    this.control({ type: 'exit', reason });
    this.lose(`was stopped: ${reason}`);
  }

  async withdraw(id: string): Promise<boolean> {
    try {
      const job = await this.queue.getJob(id);
      if (!job) return true;
      const state = await job.getState();
      if (state === 'active' || state === 'completed' || state === 'failed') return false;
      await job.remove();
      return true;
    } catch {
      return false; // it may have begun: better failed than run twice
    }
  }

  lostText(reason: string, doing: string, what: 'job' | 'request'): string {
    if (reason.startsWith('was stopped')) return `GPU worker ${this.name} ${reason} while ${doing}; the ${what} was not finished`;
    return `GPU worker ${this.name} was lost while running this ${what}`;
  }

  async stop(): Promise<void> {
    // the fleet's workers are not this API's to stop
  }

  status(): WorkerStatus {
    const b = this.beat;
    return {
      mode: 'redis',
      state: this.state,
      pid: b?.pid ?? null,
      name: this.name,
      host: b?.host,
      restarts: this.restarts,
      ready_since: this.startedAt ?? null,
      last_exit: this.lastExit,
      loaded: b?.loaded ?? [],
      running: b?.running ?? [],
      profiles: (b?.profiles ?? []).map((p) => `${p.kind}/${p.profile}`),
      heartbeat_age_s: b ? Math.round((Date.now() / 1000 - b.at) * 1000) / 1000 : null,
      stalled_after_s: this.o.stallS,
    };
  }

  /** Its latest heartbeat (undefined: none), read at `now`; Redis has been up since `upSince` (a worker gets
   * WORKER_STALL_S after Redis comes back to write its heartbeat again before it counts as lost). */
  heard(beat: (WorkerBeat & { fatal?: string }) | undefined, now: number, upSince = 0): void {
    const recent = beat !== undefined && (now - beat.at <= this.o.stallS || now - upSince <= this.o.stallS);
    const fresh = recent && beat.version === PROTOCOL_VERSION;
    if (beat && beat.version !== PROTOCOL_VERSION && this.state !== 'stopped') this.o.log.error({ worker: this.name, version: beat.version }, `worker speaks protocol ${beat.version}, this API ${PROTOCOL_VERSION}: not used`);
    // a worker that restarted between two reads (a new process) lost what the old one held
    const restarted = beat !== undefined && this.beat !== undefined && beat.started_at !== this.beat.started_at;
    if (restarted && this.state === 'ready') {
      this.restarts++;
      this.lose(beat.fatal ? `restarted after: ${beat.fatal}` : 'restarted');
    }
    if (beat) this.beat = beat;
    if (fresh && this.state !== 'ready') {
      this.state = 'ready';
      this.startedAt = beat.started_at;
      this.o.log.info({ worker: this.name, host: beat.host }, 'GPU worker ready');
      this.emit('ready');
    } else if (!fresh && this.state === 'ready') {
      this.lose(beat ? `stopped answering (no heartbeat for ${Math.round(now - beat.at)} s)` : 'is gone');
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.events.close(), this.queue.close()].map((p) => p.catch(() => {})));
  }

  private lose(reason: string): void {
    this.state = 'restarting';
    this.lastExit = { at: Date.now() / 1000, reason };
    this.o.log.error({ worker: this.name, reason }, 'GPU worker lost');
    this.emit('lost', reason);
  }

  private control(m: Control): void {
    void this.redis.publish(REDIS_KEYS.control(this.name), JSON.stringify(m)).catch(() => {});
  }
}
