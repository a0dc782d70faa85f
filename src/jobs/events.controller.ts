import { Controller, Get, Headers, Param, Query, Res } from '@nestjs/common';
import { ApiHeader, ApiNotFoundResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { ApiCommon, ApiQueryErrors } from '../http/api-docs';
import { BadInputError } from '../common/errors';
import { ErrorDetailDto } from '../http/error-bodies';
import { EventStreams } from './event-streams';
import { EventsQueryDto } from './jobs.dto';

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
  constructor(private readonly streams: EventStreams) {}

  @Get('jobs/:job_id/events')
  @ApiOperation({ summary: 'One job\'s events as server-sent events: queued, running, stage, progress, preview (extension: a live preview to fetch), then done or failed, which ends the stream. id: is the job\'s event number; Last-Event-ID or ?after=N resumes after it' })
  @ApiHeader({ name: 'Last-Event-ID', required: false, description: 'Resume after this event (EventSource sends it when it reconnects)' })
  // the stream on 200 only: its errors (404, 422) are JSON bodies
  @ApiOkResponse({ description: 'text/event-stream; data: is the job object, or for stage and progress {id, status, stage, progress, elapsed, eta_s}, or for preview {id, step, max, width, height, url}', content: { 'text/event-stream': { schema: { type: 'string' } } } })
  @ApiNotFoundResponse({ type: ErrorDetailDto })
  @ApiQueryErrors()
  async jobEvents(@Param('job_id') id: string, @Query() q: EventsQueryDto, @Headers('last-event-id') lastEventId: string | undefined, @Res() res: Response): Promise<void> {
    // the job's 404 comes before a bad Last-Event-ID's 400, as it always has: the resume point is read after it
    return this.streams.followJob(id, () => resumePoint(lastEventId, q.after), res);
  }

  @Get('events')
  @ApiOperation({ summary: 'Every job\'s events as server-sent events (for dashboards). id: is a global event number; with Last-Event-ID or ?after=N the stream first replays what came after it, else it starts with what happens next' })
  @ApiHeader({ name: 'Last-Event-ID', required: false, description: 'Resume after this event' })
  @ApiOkResponse({ description: 'text/event-stream of the job events of all jobs', content: { 'text/event-stream': { schema: { type: 'string' } } } })
  @ApiQueryErrors()
  async allEvents(@Query() q: EventsQueryDto, @Headers('last-event-id') lastEventId: string | undefined, @Res() res: Response): Promise<void> {
    return this.streams.followAll(resumePoint(lastEventId, q.after), res);
  }
}
