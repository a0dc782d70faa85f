// The streams behind GET /api/jobs/{id}/events and GET /api/events: the job store and the event store read together
// (a job's 404, its queue place, a backlog replayed, then what happens next), so the controller only wires HTTP.
import { Inject, Injectable } from '@nestjs/common';
import type { Response } from 'express';
import { SETTINGS, Settings } from '../config/settings';
import type { StoredEvent } from './event.store';
import { JobEvents } from './job.events';
import { JobsService } from './jobs.service';
import { openSse, type SseStream } from './sse';

const TERMINAL = new Set(['done', 'failed']);
const PAGE = 1000;

@Injectable()
export class EventStreams {
  constructor(
    private readonly jobs: JobsService,
    private readonly events: JobEvents,
    @Inject(SETTINGS) private readonly settings: Settings,
  ) {}

  /** One job's events after event number `resume()` (all of them when undefined) until it ends or the client
   * leaves. `resume` is read once the job is known to exist. */
  async followJob(id: string, resume: () => number | undefined, res: Response): Promise<void> {
    this.jobs.getRecord(id); // 404 before the stream opens
    let last = resume() ?? 0;
    const s = openSse(res, this.settings.sseHeartbeatS);
    const write = (ev: StoredEvent) => {
      if (ev.job_id !== id || ev.n <= last) return;
      last = ev.n;
      s.send({ id: ev.n, event: ev.type, data: ev.data });
      if (TERMINAL.has(ev.type)) s.end();
    };
    // the queue moved: a queued job's new place (not stored, so no id)
    const moved = () => {
      const now = this.jobs.find(id);
      if (now?.status !== 'queued') return;
      const o = this.jobs.view(now);
      s.send({ event: 'queued', data: JSON.stringify({ id, status: 'queued', position: o.position, eta_s: o.eta_s }) });
    };
    const gone = (jobId: string) => jobId === id && s.end();
    await this.follow(s, write, moved, gone, () => {
      // subscribed first, then the backlog read in the same tick: nothing can fall between the two
      for (const ev of this.events.forJob(id, last)) write(ev);
      const now = this.jobs.find(id);
      // a job that ended before it had events (a record older than them): its end, stored now
      if (now && TERMINAL.has(now.status) && !TERMINAL.has(this.events.forJob(id, 0).at(-1)?.type ?? '')) write(this.events.publish(id, now.status as 'done', this.jobs.view(now)));
    });
  }

  /** Every job's events: after global event `resume` when given, else from now on. */
  async followAll(resume: number | undefined, res: Response): Promise<void> {
    const from = resume;
    let last = from ?? this.events.lastSeq();
    const s = openSse(res, this.settings.sseHeartbeatS);
    const write = (ev: StoredEvent) => {
      if (ev.seq <= last) return;
      last = ev.seq;
      s.send({ id: ev.seq, event: ev.type, data: ev.data });
    };
    await this.follow(s, write, () => {}, () => {}, () => {
      if (from === undefined) return;
      for (let batch = this.events.since(last, PAGE); batch.length > 0; batch = batch.length === PAGE ? this.events.since(last, PAGE) : []) batch.forEach(write);
    });
  }

  /** Subscribes, replays, and holds the request until the stream closes (the client left, the job ended, the
   * service stops), then unsubscribes. */
  private async follow(s: SseStream, onEvent: (ev: StoredEvent) => void, onMoved: () => void, onDeleted: (id: string) => void, replay: () => void): Promise<void> {
    const closing = () => s.end();
    this.events.on('event', onEvent);
    this.events.on('moved', onMoved);
    this.events.on('deleted', onDeleted);
    this.events.on('closing', closing);
    try {
      replay();
      await s.closed;
    } finally {
      this.events.off('event', onEvent);
      this.events.off('moved', onMoved);
      this.events.off('deleted', onDeleted);
      this.events.off('closing', closing);
    }
  }
}
