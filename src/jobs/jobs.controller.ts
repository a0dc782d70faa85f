import { Controller, Delete, Get, Param, Query, Res, StreamableFile } from '@nestjs/common';
import { ApiNotFoundResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { ApiCommon, ApiDownload, ApiQueryErrors } from '../http/api-docs';
import { BadInputError } from '../common/errors';
import { clientGone } from '../http/request-signal';
import { checkTimeout } from './job-requests';
import { ErrorDetailDto } from '../http/error-bodies';
import { WAIT_DEFAULT_S } from '../catalog';
import { DeleteResultDto, JobObjectDto } from './job.schema';
import { GetJobQueryDto, ListJobsQueryDto } from './jobs.dto';
import { JobsService } from './jobs.service';

@ApiTags('jobs')
@ApiCommon()
@Controller('api/jobs')
export class JobsController {
  constructor(private readonly jobs: JobsService) {}

  @Get()
  @ApiOperation({ summary: 'List jobs, video and image mixed, newest first (a JSON array; X-Total-Count holds the total)' })
  @ApiOkResponse({ type: [JobObjectDto] })
  @ApiQueryErrors()
  list(@Query() q: ListJobsQueryDto, @Res({ passthrough: true }) res: Response) {
    const limit = q.limit ?? 100;
    const offset = q.offset ?? 0;
    if (limit < 1 || limit > 1000) throw new BadInputError(`limit must be from 1 to 1000 (got ${limit})`);
    // past 2^53 a number no longer holds every integer (and SQLite takes such a value as REAL, not an offset)
    if (offset < 0 || offset > Number.MAX_SAFE_INTEGER) throw new BadInputError(`offset must be from 0 to ${Number.MAX_SAFE_INTEGER} (got ${q.offset})`);
    if (q.kind !== undefined && !['video', 'image'].includes(q.kind)) throw new BadInputError(`unknown kind ${JSON.stringify(q.kind)}; use video or image`);
    if (q.status !== undefined && !['queued', 'running', 'done', 'failed'].includes(q.status)) throw new BadInputError(`unknown status ${JSON.stringify(q.status)}; use queued, running, done or failed`);
    const { total, jobs } = this.jobs.list({ kind: q.kind, status: q.status, limit, offset });
    res.setHeader('X-Total-Count', String(total));
    return jobs;
  }

  @Get(':job_id')
  @ApiOperation({ summary: 'Get one job, optionally waiting until it finishes' })
  @ApiOkResponse({ type: JobObjectDto })
  @ApiNotFoundResponse({ type: ErrorDetailDto })
  @ApiQueryErrors()
  async get(@Param('job_id') id: string, @Query() q: GetJobQueryDto, @Res({ passthrough: true }) res: Response) {
    if (!q.wait) return this.jobs.get(id);
    return this.jobs.waitFor(id, checkTimeout(q.timeout, WAIT_DEFAULT_S.job), clientGone(res));
  }

  @Get(':job_id/video')
  @ApiOperation({ summary: 'Download the finished mp4 (404 until it is finished)' })
  @ApiDownload('video/mp4', 'mp4')
  async video(@Param('job_id') id: string, @Res({ passthrough: true }) res: Response) {
    const f = await this.jobs.outputFile(id, 'video');
    return new StreamableFile(f.body, { type: 'video/mp4', disposition: `attachment; filename="${f.name}"` });
  }

  @Get(':job_id/image')
  @ApiOperation({ summary: 'Download the finished png (404 until it is finished)' })
  @ApiDownload('image/png', 'png')
  async image(@Param('job_id') id: string) {
    const f = await this.jobs.outputFile(id, 'image');
    return new StreamableFile(f.body, { type: 'image/png', disposition: `attachment; filename="${f.name}"` });
  }

  @Get(':job_id/preview')
  @ApiOperation({ summary: 'Extension: the running job\'s latest live preview, a small webp of where sampling is going (the job\'s events announce each one). 404 for an unknown job or when it has none now: before its first preview, after it ends, or with PREVIEWS=off' })
  @ApiOkResponse({
    description: 'The preview (webp, longer side 256 px, the output\'s aspect); X-Preview-Step says after which sampling step',
    content: { 'image/webp': { schema: { type: 'string', format: 'binary' } } },
    headers: { 'X-Preview-Step': { description: 'The sampling step it shows, of the job\'s steps', schema: { type: 'integer' } } },
  })
  @ApiNotFoundResponse({ description: 'Unknown job, or no preview now', type: ErrorDetailDto })
  preview(@Param('job_id') id: string, @Res({ passthrough: true }) res: Response) {
    const p = this.jobs.latestPreview(id);
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Preview-Step', String(p.step));
    return new StreamableFile(p.webp, { type: 'image/webp' });
  }

  @Delete(':job_id')
  @ApiOperation({ summary: 'Cancel (queued), interrupt (running) or delete (done/failed) a job' })
  @ApiOkResponse({ type: DeleteResultDto })
  @ApiNotFoundResponse({ type: ErrorDetailDto })
  remove(@Param('job_id') id: string) {
    return this.jobs.remove(id);
  }
}
