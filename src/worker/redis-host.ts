// One of many GPU workers (QUEUE=redis; docs/deploy.md): it takes its tasks from its own BullMQ queue on Redis
// (REDIS_KEYS.queue(name); the API routes each job to the worker that should run it), reports stage and progress as
// the BullMQ job's progress, ends it with its result or a FailedReason, publishes a heartbeat every second, and
// listens on its control channel for cancels. Files travel through the object store (task-files.ts).
// Redis going away is survived: ioredis and BullMQ reconnect by themselves, and a heartbeat that cannot be written is
// simply written again next second.
import { Job, UnrecoverableError, Worker } from 'bullmq';
import Redis from 'ioredis';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { S3Store } from '../storage/s3-store';
import type { WorkerFacts, WorkerHost } from './host';
import { PROTOCOL_VERSION, REDIS_KEYS, type Control, type FailedReason, type FromWorker, type TaskResult, type WorkerBeat, type WorkerTask } from './protocol';
import type { Runner } from './runner';
import { localizeTask, type LocalTask } from './task-files';

const HEARTBEAT_MS = 1000;
/** Tasks one worker may hold at once: a job and the speech requests the API sends beside it. */
const CONCURRENCY = 8;

interface Pending {
  job: Job;
  files: LocalTask;
  resolve(result: TaskResult): void;
  reject(err: Error): void;
}

export class RedisHost implements WorkerHost {
  private readonly pending = new Map<string, Pending>();
  private readonly redis: Redis;
  private readonly sub: Redis;
  private worker: Worker | undefined;
  private beat: NodeJS.Timeout | undefined;
  private facts: WorkerFacts | undefined;
  private readonly startedAt = Date.now() / 1000;

  constructor(
    private readonly url: string,
    private readonly name: string,
    private readonly store: S3Store | undefined,
    private readonly o: { stallS: number; log: Logger },
  ) {
    this.redis = new Redis(url, { maxRetriesPerRequest: null, lazyConnect: false });
    this.sub = new Redis(url, { maxRetriesPerRequest: null });
    for (const c of [this.redis, this.sub]) c.on('error', (err) => this.o.log.debug({ err: err.message }, 'redis'));
  }

  report(event: FromWorker): void {
    if (!('id' in event)) return;
    const p = this.pending.get(event.id);
    if (!p) return;
    if (event.type === 'done') {
      this.pending.delete(event.id);
      void p.files
        .deliver()
        .then((output) => p.resolve({ output, exec_s: event.exec_s, compile_s: event.compile_s, compile_tail_s: event.compile_tail_s }))
        .catch((err: Error) => p.reject(new UnrecoverableError(JSON.stringify({ code: 'error', message: `the output could not be stored: ${err.message}` } satisfies FailedReason))))
        .finally(() => void p.files.cleanup());
    } else if (event.type === 'failed') {
      this.pending.delete(event.id);
      void p.files.cleanup();
      p.reject(new UnrecoverableError(JSON.stringify({ code: event.code, message: event.message } satisfies FailedReason)));
    } else {
      // started, stage, progress, loaded, preview: the API hears them as the BullMQ job's progress
      p.job.updateProgress(event as unknown as object).catch(() => {});
    }
  }

  async start(runner: Runner, facts: WorkerFacts): Promise<void> {
    this.facts = facts;
    await this.sub.subscribe(REDIS_KEYS.control(this.name));
    this.sub.on('message', (_channel, text) => {
      const m = JSON.parse(text) as Control;
      if (m.type === 'cancel') runner.cancel(m.id, m.reason);
      if (m.type === 'exit') {
        this.o.log.warn({ reason: m.reason }, 'the API asked this worker to exit');
        process.exit(75);
      }
    });
    const beat = () => void this.publishBeat().catch(() => {});
    beat();
    this.beat = setInterval(beat, HEARTBEAT_MS);
    this.worker = new Worker(
      REDIS_KEYS.queue(this.name),
      async (job: Job<WorkerTask>) => {
        const task = job.data;
        // a cancel sent while this worker was away from Redis
        const cancelled = await this.redis.get(REDIS_KEYS.cancel(task.id)).catch(() => null);
        if (cancelled) throw new UnrecoverableError(JSON.stringify({ code: 'interrupted', message: 'interrupted' } satisfies FailedReason));
        const files = await localizeTask(task, this.store);
        return new Promise<TaskResult>((resolve, reject) => {
          this.pending.set(task.id, { job, files, resolve, reject });
          runner.enqueue(files.task);
        });
      },
      {
        // options, not a client: BullMQ then owns the connection and closes it with the worker (a client passed in is
        // "shared" and would live on, reconnecting, after close)
        connection: { url: this.url, maxRetriesPerRequest: null },
        concurrency: CONCURRENCY,
        // a task whose lock lapsed (this worker stalled or lost Redis) is failed, never run a second time
        maxStalledCount: 0,
        lockDuration: Math.max(30, this.o.stallS) * 1000,
      },
    );
    this.worker.on('error', (err) => this.o.log.debug({ err: err.message }, 'bullmq'));
    this.o.log.info({ name: this.name, queue: REDIS_KEYS.queue(this.name) }, 'GPU worker taking tasks from Redis');
  }

  async fatal(message: string): Promise<void> {
    await Promise.race([this.publishBeat(message), new Promise((r) => setTimeout(r, 1000))]).catch(() => {});
  }

  /** Stops taking tasks and leaves Redis (the running task was stopped by the runner first). */
  async close(): Promise<void> {
    clearInterval(this.beat);
    await this.worker?.close(true).catch(() => {});
    // gone from the fleet at once (not after WORKER_STALL_S); Redis being down must not hold the exit (commands queue)
    await Promise.race([this.redis.del(REDIS_KEYS.worker(this.name)).catch(() => {}), new Promise((r) => setTimeout(r, 1000))]);
    this.redis.disconnect();
    this.sub.disconnect();
  }

  private async publishBeat(fatal?: string): Promise<void> {
    const f = this.facts!;
    const beat: WorkerBeat & { fatal?: string } = {
      version: PROTOCOL_VERSION, name: this.name, host: hostname(), pid: f.pid, profiles: f.profiles(), gpu: f.gpu,
      ...f.now(), at: Date.now() / 1000, started_at: this.startedAt, fatal,
    };
    await this.redis
      .multi()
      .set(REDIS_KEYS.worker(this.name), JSON.stringify(beat), 'PX', Math.max(10, this.o.stallS * 3) * 1000)
      .sadd(REDIS_KEYS.workers, this.name)
      .exec();
  }
}
