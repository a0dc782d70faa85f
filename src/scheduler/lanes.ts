// The tasks waiting for a worker, in the order they will go: jobs by priority (higher first), then arrival; and a
// lane of their own for interactive requests (speech), first come first served, which never wait behind a job.
// Only order lives here; which worker takes what is the Scheduler's.
import { DEFAULT_PRIORITY } from '../catalog';
import type { WorkerTask } from '../worker/protocol';

export interface Waiting {
  task: WorkerTask;
  /** Its queue priority (interactive requests: DEFAULT_PRIORITY, unused). */
  priority: number;
}

export class Lanes {
  /** Jobs in the order they will run. */
  private readonly queue: WorkerTask[] = [];
  private readonly priorities = new Map<string, number>();
  private readonly requests: WorkerTask[] = [];

  constructor(private readonly isInteractive: (task: WorkerTask) => boolean) {}

  /** Queues a task; a job goes after every job of its priority or higher. */
  add(task: WorkerTask, priority: number): void {
    if (this.isInteractive(task)) return void this.requests.push(task);
    this.priorities.set(task.id, priority);
    const after = this.queue.findIndex((t) => this.priorityOf(t.id) < priority);
    this.queue.splice(after < 0 ? this.queue.length : after, 0, task);
  }

  /** Tasks sent to a worker that never began them, back at the front of their lanes in the order given (each job
   * keeps its priority: it was next, so it goes first again). */
  putBack(items: readonly Waiting[]): void {
    const requests = items.filter((w) => this.isInteractive(w.task)).map((w) => w.task);
    const jobs = items.filter((w) => !this.isInteractive(w.task));
    for (const w of jobs) this.priorities.set(w.task.id, w.priority);
    this.queue.unshift(...jobs.map((w) => w.task));
    this.requests.unshift(...requests);
  }

  /** Removes a waiting task (either lane). */
  remove(id: string): WorkerTask | undefined {
    for (const lane of [this.queue, this.requests]) {
      const i = lane.findIndex((t) => t.id === id);
      if (i < 0) continue;
      this.priorities.delete(id);
      return lane.splice(i, 1)[0];
    }
    return undefined;
  }

  /** Every waiting interactive request (a Scheduler being stopped fails them). */
  drainRequests(): WorkerTask[] {
    return this.requests.splice(0);
  }

  /**
   * Walks a lane front to back; `pick` names the worker-side choice for each task (undefined: it waits, the walk
   * goes on to the next). Each picked task leaves the lane and is handed to `go` with its priority, in order.
   */
  take<L>(lane: 'jobs' | 'requests', pick: (task: WorkerTask) => L | undefined, go: (w: Waiting, choice: L) => void): void {
    const tasks = lane === 'jobs' ? this.queue : this.requests;
    for (let i = 0; i < tasks.length; ) {
      const task = tasks[i];
      const choice = pick(task);
      if (choice === undefined) {
        i++;
        continue;
      }
      tasks.splice(i, 1);
      const priority = this.priorityOf(task.id);
      this.priorities.delete(task.id);
      go({ task, priority }, choice);
    }
  }

  /** The jobs in order (interactive requests are not counted: they take seconds and never wait behind a job). */
  jobs(): readonly WorkerTask[] {
    return this.queue;
  }

  /** A job's place, 1 = next to run; undefined when not queued. */
  position(id: string): number | undefined {
    const i = this.queue.findIndex((t) => t.id === id);
    return i < 0 ? undefined : i + 1;
  }

  private priorityOf(id: string): number {
    return this.priorities.get(id) ?? DEFAULT_PRIORITY;
  }
}
