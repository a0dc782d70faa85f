// How a GPU worker process talks to the API: over the IPC channel of the API that started it (ipc-host.ts), or
// through Redis as one of many workers on any host (redis-host.ts). Both carry the same protocol (protocol.ts).
import type { FromWorker, HostMemory, ServedSummary } from './protocol';
import type { Runner } from './runner';

/** What a host tells the API about this worker when it starts, and keeps telling it. */
export interface WorkerFacts {
  name: string;
  pid: number;
  profiles(): ServedSummary[];
  gpu: Record<string, unknown>;
  /** Models loaded and tasks running now, the GPU memory and the host memory. */
  now(): { loaded: string[]; running: string[]; memory?: Record<string, number>; host_memory?: HostMemory };
}

export interface WorkerHost {
  /** A task's event, from the runner. */
  report(event: FromWorker): void;
  /** Starts taking tasks for `runner`. */
  start(runner: Runner, facts: WorkerFacts): Promise<void>;
  /** The worker is about to exit on its own: tell the API why (best effort, bounded). */
  fatal(message: string): Promise<void>;
}
