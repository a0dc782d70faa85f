import type { Logger } from 'pino';
import { redactUrl } from '../common/logger';
import { CallbackRefused, OutboundClient } from '../net/outbound';
import type { Delivery, DeliveryStore } from './delivery.store';
import type { JobRecord } from './job.model';
import type { JobStore } from './job.store';

const now = () => Date.now() / 1000;

/**
 * Job-end callbacks: POST the job object (as it was when the job ended) to its callback_url, retried on network
 * errors and 5xx after each of the retry delays (1 s, 4 s), then given up; callback_status gets the last HTTP status
 * received. Every delivery is a row of the job database before its first attempt, and its attempts and next due time
 * are written as they happen, so one waiting in its back-off when the service is killed goes out after the restart.
 */
export class CallbackSender {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly inFlight = new Set<Promise<void>>();
  private stopped = false;

  constructor(
    private readonly outbound: OutboundClient,
    private readonly jobs: JobStore,
    private readonly deliveries: DeliveryStore,
    private readonly log: Logger,
  ) {}

  /** Resumes the deliveries a previous run left pending, each at its due time (or now, if that has passed). */
  resume(): void {
    const pending = this.deliveries.pending();
    if (pending.length) this.log.info({ count: pending.length }, 'resuming callback deliveries');
    for (const d of pending) this.schedule(d);
  }

  /** Stores the job's end delivery, then makes its first attempt. */
  send(job: JobRecord, body: Record<string, unknown>): void {
    const d: Delivery = {
      id: `${job.id}.${job.status}`,
      job_id: job.id,
      url: job.callback_url!,
      body: JSON.stringify(body),
      attempts: 0,
      next_at: now(),
      created: now(),
      state: 'pending',
      last_status: null,
    };
    if (this.deliveries.insert(d)) this.schedule(d);
  }

  /** Stops scheduling and waits for the attempts in flight; waiting deliveries stay stored for the next start. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    await this.drain();
  }

  /** Waits until no attempt is in flight or due (tests). */
  async drain(): Promise<void> {
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
  }

  private schedule(d: Delivery): void {
    if (this.stopped) return;
    const delay = Math.max(0, d.next_at - now()) * 1000;
    const timer = setTimeout(() => {
      this.timers.delete(d.id);
      const p = this.attempt(d).finally(() => this.inFlight.delete(p));
      this.inFlight.add(p);
    }, delay);
    this.timers.set(d.id, timer);
  }

  private async attempt(d: Delivery): Promise<void> {
    d.attempts++;
    let retry = false;
    try {
      d.last_status = await this.outbound.postJson(d.url, d.body);
      retry = d.last_status >= 500;
      if (retry) this.log.warn({ id: d.job_id, attempt: d.attempts, status: d.last_status }, 'callback attempt failed');
    } catch (err) {
      retry = !(err instanceof CallbackRefused);
      this.log.warn({ id: d.job_id, attempt: d.attempts, err: err instanceof Error ? err.message : String(err) }, 'callback attempt failed');
    }
    const delays = this.outbound.callbackRetryDelaysMs;
    if (retry && d.attempts <= delays.length) {
      d.next_at = now() + delays[d.attempts - 1] / 1000;
      this.deliveries.update(d);
      return this.schedule(d);
    }
    d.state = d.last_status !== null && d.last_status < 500 ? 'delivered' : 'failed';
    this.deliveries.update(d);
    this.log.info({ id: d.job_id, url: redactUrl(d.url), status: d.last_status, attempts: d.attempts }, d.state === 'delivered' ? 'callback sent' : 'callback given up');
    if (d.last_status === null) return;
    const job = this.jobs.get(d.job_id);
    if (!job) return;
    job.callback_status = d.last_status;
    this.jobs.update(job);
  }
}
