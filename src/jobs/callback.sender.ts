import type { Logger } from 'pino';
import { redactUrl } from '../common/logger';
import { OutboundClient } from '../net/outbound';
import type { JobRecord } from './job.model';
import type { JobStore } from './job.store';

/** Job-finished callbacks: POST the job object, store the target's last HTTP status in callback_status. */
export class CallbackSender {
  private readonly pending = new Set<Promise<void>>();

  constructor(private readonly outbound: OutboundClient, private readonly store: JobStore, private readonly log: Logger) {}

  send(job: JobRecord, body: () => Record<string, unknown>): void {
    const url = job.callback_url!;
    const p = this.outbound
      .postCallback(url, body(), (n, err) => (err ? this.log.warn({ id: job.id, attempt: n, err }, 'callback attempt failed') : undefined))
      .then((status) => {
        this.log.info({ id: job.id, url: redactUrl(url), status }, 'callback sent');
        if (status === undefined) return;
        const fresh = this.store.get(job.id);
        if (!fresh) return;
        fresh.callback_status = status;
        this.store.update(fresh);
      })
      .catch((err) => this.log.error({ id: job.id, err }, 'callback failed'))
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /** Waits for callbacks in flight (shutdown, tests). */
  async drain(): Promise<void> {
    while (this.pending.size) await Promise.all([...this.pending]);
  }
}
