import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import { redactUrl } from '../common/logger';
import { CallbackRefused, OutboundClient } from '../net/outbound';
import type { Delivery, DeliveryStore } from './delivery.store';
import type { JobRecord } from './job.model';
import type { JobStore } from './job.store';

const now = () => Date.now() / 1000;

/**
 * Job-end callbacks, as Standard Webhooks: POST the job object (as it was when the job ended) to its callback_url with
 * webhook-id / webhook-timestamp (and webhook-signature with WEBHOOK_SECRET), signed afresh on each attempt. Anything
 * but a 2xx is tried again on the Standard Webhooks schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), not sooner
 * than a Retry-After asks, until CALLBACK_MAX_AGE_S after the job ended; a 410 stops it. callback_status is the last
 * HTTP status received. Every delivery is a row of the job database before its first attempt, and its attempts and
 * next due time are written as they happen, so one waiting in its back-off when the service is killed goes out after
 * the restart.
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
    private readonly o: { secret?: Buffer; maxAgeS: number; onOutcome?: (outcome: 'delivered' | 'retry' | 'failed' | 'gone') => void } = { maxAgeS: 86_400 },
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
    let retry = true;
    let retryAfterS = 0;
    try {
      const r = await this.outbound.postJson(d.url, d.body, this.signed(d));
      d.last_status = r.status;
      retryAfterS = r.retryAfterS ?? 0;
      // 2xx: delivered; 410 Gone: the target asks for no more; anything else is tried again
      retry = !(r.status >= 200 && r.status < 300) && r.status !== 410;
      if (retry) this.log.warn({ id: d.job_id, attempt: d.attempts, status: r.status }, 'callback attempt failed');
      this.recordStatus(d);
    } catch (err) {
      retry = !(err instanceof CallbackRefused);
      this.log.warn({ id: d.job_id, attempt: d.attempts, err: err instanceof Error ? err.message : String(err) }, 'callback attempt failed');
    }
    const delay = this.outbound.callbackRetryDelaysMs[d.attempts - 1];
    const next = now() + Math.max((delay ?? 0) / 1000, retryAfterS);
    if (retry && delay !== undefined && next <= d.created + this.o.maxAgeS) {
      d.next_at = next;
      this.deliveries.update(d);
      this.o.onOutcome?.('retry');
      return this.schedule(d);
    }
    d.state = d.last_status !== null && d.last_status >= 200 && d.last_status < 300 ? 'delivered' : 'failed';
    this.deliveries.update(d);
    this.o.onOutcome?.(d.state === 'delivered' ? 'delivered' : d.last_status === 410 ? 'gone' : 'failed');
    this.log.info({ id: d.job_id, url: redactUrl(d.url), status: d.last_status, attempts: d.attempts }, d.state === 'delivered' ? 'callback sent' : 'callback given up');
  }

  /** Standard Webhooks headers: webhook-id (the same on every attempt of this delivery), webhook-timestamp (now),
   * and with WEBHOOK_SECRET, webhook-signature: v1,base64(HMAC-SHA256(secret, "id.timestamp.body")). */
  private signed(d: Delivery): Record<string, string> {
    const ts = String(Math.floor(now()));
    const headers: Record<string, string> = { 'webhook-id': d.id, 'webhook-timestamp': ts };
    if (this.o.secret) headers['webhook-signature'] = `v1,${createHmac('sha256', this.o.secret).update(`${d.id}.${ts}.${d.body}`).digest('base64')}`;
    return headers;
  }

  /** callback_status: the last HTTP status the target answered. */
  private recordStatus(d: Delivery): void {
    const job = this.jobs.get(d.job_id);
    if (!job || d.last_status === null) return;
    job.callback_status = d.last_status;
    this.jobs.update(job);
  }
}
