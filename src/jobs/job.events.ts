import { BeforeApplicationShutdown, Injectable } from '@nestjs/common';
import { EventEmitter } from 'node:events';
import type { JobEventType, StoredEvent } from './event.store';
import { JobStore } from './job.store';

/**
 * Job events, stored then told to the live streams (src/jobs/events.controller.ts). Besides the stored events it
 * tells `moved` (the queue moved: queued jobs' positions and ETAs changed; not stored, a stream sends its job's new
 * place without an id), `deleted` (a job's record is gone) and `closing` (the service stops: streams end).
 */
@Injectable()
export class JobEvents extends EventEmitter implements BeforeApplicationShutdown {
  constructor(private readonly store: JobStore) {
    super();
    this.setMaxListeners(0); // one listener per open stream
  }

  publish(jobId: string, type: JobEventType, data: object): StoredEvent {
    const ev = this.store.events.append(jobId, type, data);
    this.emit('event', ev);
    return ev;
  }

  forJob(jobId: string, afterN: number): StoredEvent[] {
    return this.store.events.forJob(jobId, afterN);
  }

  since(afterSeq: number, limit: number): StoredEvent[] {
    return this.store.events.since(afterSeq, limit);
  }

  lastSeq(): number {
    return this.store.events.lastSeq();
  }

  moved(): void {
    this.emit('moved');
  }

  deleted(jobId: string): void {
    this.store.events.deleteJob(jobId);
    this.emit('deleted', jobId);
  }

  /** Before Nest closes the HTTP server (which waits for open requests): event streams end, so shutdown is prompt. */
  beforeApplicationShutdown(): void {
    this.emit('closing');
  }
}
