// The API's view of a GPU worker: what the scheduler sends it and hears from it. LocalWorker (local-worker.ts) is
// the worker process this API starts and supervises (WORKERS=local, QUEUE=local); RemoteWorker (redis-fleet.ts) one
// of many on any host (QUEUE=redis). A WorkerPool is the set the scheduler routes among.
import type { EventEmitter } from 'node:events';
import type { FailedReason, FromWorker, ServedSummary, TaskResult, WorkerTask } from '../worker/protocol';

/** Where a task the API thought running stands on its worker, after an API restart. */
export type Reconciled = { state: 'done'; result: TaskResult } | { state: 'failed'; reason: FailedReason } | { state: 'running' } | { state: 'gone' };

/** The events of one task. */
export type TaskEvent = Extract<FromWorker, { id: string }>;

/** /api/health's worker section. */
export interface WorkerStatus {
  mode: 'local' | 'redis';
  /** starting: spawned, no hello yet; ready: takes tasks; restarting: died, a new one is due; stopped: shut down. */
  state: 'starting' | 'ready' | 'restarting' | 'stopped';
  pid: number | null;
  name: string | null;
  /** Worker processes started after the first. */
  restarts: number;
  /** Unix seconds the current process said hello. */
  ready_since: number | null;
  /** Why the last worker process ended, and when. */
  last_exit: { at: number; reason: string } | null;
  /** Profiles loaded on the GPU (kind/profile) and tasks running, from the last heartbeat. */
  loaded: string[];
  running: string[];
  /** Seconds since the worker last said anything (its heartbeat is every second). */
  heartbeat_age_s: number | null;
  /** The watchdog: no heartbeat for this long and the worker is killed and restarted (or, remote, counted lost). */
  stalled_after_s: number;
  /** Local worker: silent but using the CPU (working, or starved by a busy machine), it is killed after this long. */
  busy_stalled_after_s?: number;
  /** Remote workers: the host they run on. */
  host?: string;
  /** Profiles it serves (kind/profile). */
  profiles?: string[];
}

export interface WorkerLink extends EventEmitter {
  /** The worker's name (WORKER_NAME). */
  readonly name: string;
  /** Said hello and not gone since: takes tasks. */
  readonly ready: boolean;
  /** What the worker serves (its last report; empty before the first hello). */
  readonly profiles: readonly ServedSummary[];
  /** The adapter the worker reported, with the latest memory figures; undefined until it reports. */
  gpu(): Record<string, unknown> | undefined;
  run(task: WorkerTask): void;
  cancel(id: string, reason: 'cancelled' | 'interrupted'): void;
  /** Kills the worker process now (it is restarted): `reason` becomes its exit reason. */
  kill(reason: string): void;
  /** Asks the worker to stop (its running task fails `shutdown`), kills it after `graceMs`; no restart. */
  stop(graceMs: number): Promise<void>;
  status(): WorkerStatus;
  /** The error of a task this worker held when it was lost (`reason` as the 'lost' event gave it). */
  lostText(reason: string, doing: string, what: 'job' | 'request'): string;
  /** Takes back a task the worker has not begun: true if it will certainly never run there. */
  withdraw(id: string): Promise<boolean>;
  // events: 'ready' (hello, also after each restart), 'event' (TaskEvent), 'lost' (reason: the process ended and
  // every task it held is gone)
}

/** The workers a scheduler routes tasks among: the one this API started, or a fleet that changes as hosts come
 * and go. */
export interface WorkerPool extends EventEmitter {
  links(): WorkerLink[];
  /** A fleet waits for a worker that serves a job's profile to join; a single local worker is sent everything (it
   * fails what it does not serve, naming the missing model). */
  readonly fixed: boolean;
  /** The link of a worker by name (a fleet makes one for a worker it has not heard yet: a job adopted at start). */
  link(name: string): WorkerLink | undefined;
  stop(graceMs: number): Promise<void>;
  /** Anything /api/health should show of the pool itself (Redis up or down). */
  health(): Record<string, unknown>;
  /** A fleet, after an API restart: where a task the API thought running on worker `name` stands. */
  reconcile?(name: string, id: string): Promise<Reconciled>;
  // events: 'added' (link)
}
