// WORKERS=local with QUEUE=redis: the API keeps a GPU of its own in the fleet. It starts the same worker process as
// any GPU host runs, which joins through Redis like the others (the fleet routes to it); this only keeps it
// running: started again after it ends, after 1, 2, 4 ... 60 s while it keeps ending within a minute of its start.
import type { ChildProcess } from 'node:child_process';
import type { Logger } from 'pino';
import { spawnWorker, type LocalWorkerOptions } from './local-worker';

export class WorkerKeeper {
  private child: ChildProcess | undefined;
  private stopped = false;
  private quickExits = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly o: Omit<LocalWorkerOptions, 'stallS' | 'busyS'> & { log: Logger }) {}

  start(): void {
    if (this.stopped) return;
    const started = Date.now();
    const child = spawnWorker(this.o);
    this.child = child;
    child.once('exit', (code, signal) => {
      if (this.stopped) return;
      this.quickExits = Date.now() - started < 60_000 ? this.quickExits + 1 : 0;
      const delayS = this.quickExits === 0 ? 0 : Math.min(60, 2 ** (this.quickExits - 1));
      this.o.log.error({ code, signal, restart_in_s: delayS }, 'the local GPU worker ended');
      this.timer = setTimeout(() => this.start(), delayS * 1000);
    });
  }

  /** SIGTERM (the worker stops its task and leaves Redis), SIGKILL after `graceMs`. */
  async stop(graceMs: number): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const kill = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(kill);
  }
}
