// Prometheus metrics (GET /metrics, README "Metrics"), on a registry of the service's own (not prom-client's global
// one, so two apps in one test process do not share counters). The API process only: the worker reports through the
// scheduler (model loads, restarts) and its heartbeat (GPU memory).
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Scheduler } from '../scheduler/scheduler';

const SECONDS = [0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600];

export class KilnMetrics {
  readonly registry = new Registry();
  private readonly jobs = new Counter({ name: 'kiln_jobs_total', help: 'Jobs that ended, by kind, profile and status (done or failed)', labelNames: ['kind', 'profile', 'status'], registers: [this.registry] });
  private readonly duration = new Histogram({ name: 'kiln_job_duration_seconds', help: 'Generation seconds of done jobs (exec_s: model load included, queue time not)', labelNames: ['kind', 'profile'], buckets: SECONDS, registers: [this.registry] });
  private readonly wait = new Histogram({ name: 'kiln_queue_wait_seconds', help: 'Seconds jobs waited in the queue before they started', labelNames: ['kind', 'profile'], buckets: SECONDS, registers: [this.registry] });
  private readonly loads = new Counter({ name: 'kiln_model_loads_total', help: 'Model loads by the GPU worker, by profile', labelNames: ['profile'], registers: [this.registry] });
  private readonly loadSeconds = new Histogram({ name: 'kiln_model_load_seconds', help: 'Seconds a model load took, by profile', labelNames: ['profile'], buckets: SECONDS, registers: [this.registry] });
  private readonly restarts = new Counter({ name: 'kiln_worker_restarts_total', help: 'Times the GPU worker process ended and was started again', registers: [this.registry] });
  private readonly callbacks = new Counter({ name: 'kiln_callbacks_total', help: 'Callback attempts by outcome: delivered, retry (failed, tried again later), failed (given up), gone (410)', labelNames: ['outcome'], registers: [this.registry] });

  constructor(scheduler: Scheduler) {
    collectDefaultMetrics({ register: this.registry });
    new Gauge({ name: 'kiln_queue_length', help: 'Jobs waiting in the queue', registers: [this.registry], collect() { this.set(scheduler.queuedCount()); } });
    new Gauge({
      name: 'kiln_gpu_memory_bytes',
      help: 'GPU memory the worker holds, from its last heartbeat: in_use, cached, allocated, budget',
      labelNames: ['state'],
      registers: [this.registry],
      collect() {
        const m = scheduler.gpu()?.memory as Record<string, number> | undefined;
        for (const [state, key] of [['in_use', 'inUseBytes'], ['cached', 'cachedBytes'], ['allocated', 'allocatedBytes'], ['budget', 'budgetBytes']] as const) {
          if (typeof m?.[key] === 'number') this.set({ state }, m[key]);
        }
      },
    });
    scheduler.on('loaded', (task, seconds) => {
      this.loads.inc({ profile: task.profile });
      this.loadSeconds.observe({ profile: task.profile }, seconds);
    });
    scheduler.on('workerLost', () => this.restarts.inc());
  }

  jobStarted(kind: string, profile: string, waitedS: number): void {
    this.wait.observe({ kind, profile }, Math.max(0, waitedS));
  }

  jobEnded(kind: string, profile: string, status: 'done' | 'failed', execS?: number): void {
    this.jobs.inc({ kind, profile, status });
    if (status === 'done' && execS !== undefined) this.duration.observe({ kind, profile }, execS);
  }

  callback(outcome: 'delivered' | 'retry' | 'failed' | 'gone'): void {
    this.callbacks.inc({ outcome });
  }
}
