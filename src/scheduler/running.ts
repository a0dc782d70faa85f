// A task in a worker's hands, as the Scheduler keeps it: where it went, how far it got, why it must stop, and the
// timers that stop it. Also how it ends: its Outcome, and the error of one whose worker died under it.
import { STAGE_WORDS, type Stage } from '../catalog';
import type { FailCode, WorkerTask } from '../worker/protocol';
import type { ProgressSeries } from './eta';
import type { WorkerLink } from './worker-link';

export interface Running {
  task: WorkerTask;
  /** The worker it was sent to. */
  link: WorkerLink;
  /** Its queue priority (a job put back in the queue keeps it). */
  priority: number;
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
  /** Its sampling steps as reported (the ETA's own-progress rate), and a later progress series (frames decoded). */
  steps?: ProgressSeries;
  after?: ProgressSeries;
}

export type Outcome =
  | { status: 'done'; started: number; finished: number; exec_s: number }
  | { status: 'failed'; code: FailCode | 'crashed' | 'timeout'; error: string; started: number; finished: number };

/** Arms MAX_JOB_S (`limitS`) for the task, counted from when it was sent: past it the worker is killed and the task
 * ends as a timeout. */
export function armTimeout(r: Running, limitS: number, now: number): void {
  const left = Math.max(0, limitS - (now - r.started));
  const t = setTimeout(() => {
    r.stopping ??= 'timeout';
    r.link.kill(`${r.task.id} ran past MAX_JOB_S (${limitS} s for ${r.task.kind})`);
  }, left * 1000);
  t.unref();
  r.timers.push(t);
}

/** The error of a task whose worker died under it. */
export function lostOutcome(r: Running, reason: string, stopping: boolean, limitS: number): Pick<Extract<Outcome, { status: 'failed' }>, 'code' | 'error'> {
  if (stopping) return { code: 'shutdown', error: 'shutdown' };
  if (r.stopping === 'interrupted') return { code: 'interrupted', error: 'interrupted' };
  if (r.stopping === 'timeout') return { code: 'timeout', error: `timed out after ${limitS} s` };
  return { code: 'crashed', error: r.link.lostText(reason, STAGE_WORDS[r.stage], r.task.kind === 'tts' ? 'request' : 'job') };
}
