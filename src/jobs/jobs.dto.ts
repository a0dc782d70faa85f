import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, IsInt, IsString, Max, Min } from 'class-validator';
import { Optional } from '../http/validation';
import { MAX_WAIT_S, WAIT_DEFAULT_S } from '../catalog';

/** GET /api/jobs/{job_id} query. */
export class GetJobQueryDto {
  static multipart = true; // query values arrive as strings
  @ApiPropertyOptional({ default: false, description: 'Block until the job finishes or the timeout passes' })
  @Optional() @IsBoolean()
  wait?: boolean;

  @ApiPropertyOptional({ default: WAIT_DEFAULT_S.job, maximum: MAX_WAIT_S, description: `Seconds to wait at most (over ${MAX_WAIT_S} gives 400)` })
  @Optional() @IsInt()
  timeout?: number;
}

/** GET /api/jobs/{job_id}/events and GET /api/events query. */
export class EventsQueryDto {
  static multipart = true;
  @ApiPropertyOptional({ type: 'integer', minimum: 0, description: 'Resume after this event id (Last-Event-ID wins when both are sent)' })
  @Optional() @IsInt() @Min(0) @Max(Number.MAX_SAFE_INTEGER)
  after?: number;
}

/** GET /api/jobs query: newest first, paged. */
export class ListJobsQueryDto {
  static multipart = true;
  @ApiPropertyOptional({ default: 100, minimum: 1, maximum: 1000 })
  @Optional() @IsInt()
  limit?: number;

  @ApiPropertyOptional({ default: 0, minimum: 0, maximum: Number.MAX_SAFE_INTEGER })
  @Optional() @IsInt()
  offset?: number;

  @ApiPropertyOptional({ enum: ['video', 'image'] })
  @Optional() @IsString()
  kind?: string;

  @ApiPropertyOptional({ enum: ['queued', 'running', 'done', 'failed'] })
  @Optional() @IsString()
  status?: string;
}
