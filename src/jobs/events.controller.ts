import { Controller, Get, Headers, Inject, Param, Query, Res } from '@nestjs/common';
import { ApiHeader, ApiNotFoundResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { ApiCommon, ApiQueryErrors } from '../http/api-docs';
import { BadInputError } from '../common/errors';
import { SETTINGS, Settings } from '../config/settings';
import type { StoredEvent } from './event.store';
import { JobEvents } from './job.events';
import { ErrorDetailDto } from '../http/error-bodies';
import { EventsQueryDto } from './jobs.dto';
import { JobsService } from './jobs.service';
import { openSse, type SseStream } from './sse';

const TERMINAL = new Set(['done', 'failed']);
const PAGE = 1000;

/** Where a stream resumes: Last-Event-ID (what EventSource sends when it reconnects), else ?after, else undefined. */
function resumePoint(lastEventId: string | undefined, after: number | undefined): number | undefined {
  if (lastEventId === undefined || lastEventId.trim() === '') return after;
  if (!/^\d+$/.test(lastEventId.trim()) || Number(lastEventId) > Number.MAX_SAFE_INTEGER) throw new BadInputError(`Last-Event-ID must be an event id this service sent, a whole number (got ${JSON.stringify(lastEventId)})`);
  return Number(lastEventId);
}

/** Live job events as server-sent events (README "Live job events"). */
@ApiTags('jobs')
@ApiCommon()
@Controller('api')
export class EventsController {
  constructor(
    private readonly jobs: JobsService,
    private readonly events: JobEvents,
    @Inject(SETTINGS) private readonly settings: Settings,
  ) {}

  @Get('jobs/:job_id/events')
  @ApiOperation({ summary: 'One job\'s events as server-sent events: queued, running, stage, progress, then done or failed, which ends the stream. id: is the job\'s event number; Last-Event-ID or ?after=N resumes after it' })
  @ApiHeader({ name: 'Last-Event-ID', required: false, description: 'Resume after this event (EventSource sends it when it reconnects)' })
  // the stream on 200 only: its errors (404, 422) are JSON bodies
  @ApiOkResponse({ description: 'text/event-stream; data: is the job object, or for stage and progress {id, status, stage, progress, elapsed, eta_s}', content: { 'text/event-stream': { schema: { type: 'string' } } } })
  @ApiNotFoundResponse({ type: ErrorDetailDto })
  @ApiQueryErrors()
  async jobEvents(@Param('job_id') id: string, @Query() q: EventsQueryDto, @Headers('last-event-id') lastEventId: string | undefined, @Res() res: Response): Promise<void> {
    this.jobs.getRecord(id); // 404 before the stream opens
    let last = resumePoint(lastEventId, q.after) ?? 0;
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

  @Get('events')
  @ApiOperation({ summary: 'Every job\'s events as server-sent events (for dashboards). id: is a global event number; with Last-Event-ID or ?after=N the stream first replays what came after it, else it starts with what happens next' })
  @ApiHeader({ name: 'Last-Event-ID', required: false, description: 'Resume after this event' })
  @ApiOkResponse({ description: 'text/event-stream of the job events of all jobs', content: { 'text/event-stream': { schema: { type: 'string' } } } })
  @ApiQueryErrors()
  async allEvents(@Query() q: EventsQueryDto, @Headers('last-event-id') lastEventId: string | undefined, @Res() res: Response): Promise<void> {
    const from = resumePoint(lastEventId, q.after);
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
