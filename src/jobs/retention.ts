import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { LOGGER } from '../http/tokens';
import { SETTINGS, Settings } from '../config/settings';
import { JobStore } from './job.store';
import { JobsService } from './jobs.service';

/** How long a deleted job's expiry is remembered (a GET says why it is gone). */
const TOMBSTONE_S = 30 * 86_400;

/** OUTPUT_TTL_S: sweeps finished jobs past it every quarter of it (1 s to 1 min between sweeps); nothing when 0. */
@Injectable()
export class RetentionSweeper implements OnApplicationBootstrap, OnApplicationShutdown {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<unknown> = Promise.resolve();

  constructor(
    @Inject(SETTINGS) private readonly settings: Settings,
    @Inject(LOGGER) private readonly log: Logger,
    private readonly jobs: JobsService,
    private readonly store: JobStore,
  ) {}

  onApplicationBootstrap(): void {
    const ttl = this.settings.outputTtlS;
    if (ttl === 0) return;
    const sweep = () => {
      this.sweeping = this.jobs
        .expireEnded()
        .then(() => this.store.pruneTombstones(Date.now() / 1000 - TOMBSTONE_S))
        .catch((err) => this.log.error({ err }, 'retention sweep failed'));
    };
    sweep();
    this.timer = setInterval(sweep, Math.min(60, Math.max(1, ttl / 4)) * 1000);
    this.timer.unref();
  }

  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.sweeping;
  }
}
