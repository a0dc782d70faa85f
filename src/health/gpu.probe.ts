import type { Scheduler } from '../scheduler/scheduler';

/** The GPU section of /api/health. The API never touches the GPU: by default (app.module) it is what the GPU worker
 * reported. Tests provide their own where no adapter should be needed. */
export abstract class GpuProbe {
  abstract describe(): Promise<Record<string, unknown>>;
}

/** The adapter the GPU worker reported at its start, with its latest memory figures. */
export class WorkerGpuProbe extends GpuProbe {
  constructor(private readonly scheduler: Scheduler) {
    super();
  }

  async describe(): Promise<Record<string, unknown>> {
    if (!this.scheduler.hasWorker()) return { available: false, error: 'no GPU worker on this host (WORKERS=none)' };
    return this.scheduler.gpu() ?? { available: false, error: 'the GPU worker has not reported its adapter yet' };
  }
}
