import { Body, Controller, HttpCode, Post, Res, UploadedFiles, UseInterceptors } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiExtraModels, getSchemaPath, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { ApiCommon, ApiCreateErrors, ApiIdempotency } from '../http/api-docs';
import { ApiJobOrPlan } from '../jobs/plan.schema';
import { IdempotencyInterceptor } from '../jobs/idempotency.interceptor';
import { clientGone } from '../http/request-signal';
import { JobObjectDto } from '../jobs/job.schema';
import { filesOf, refuseFormWait, uploadFields, UploadedFiles as Files } from '../jobs/upload';
import { CreateVideoFormDto, GenerateVideoDto } from './video.dto';
import { VideoService } from './video.service';

@ApiTags('video')
@ApiCommon()
@ApiExtraModels(CreateVideoFormDto)
@Controller('api')
export class VideoController {
  constructor(private readonly video: VideoService) {}

  @Post('v1/generate')
  @HttpCode(200)
  @UseInterceptors(IdempotencyInterceptor)
  @ApiIdempotency()
  @ApiOperation({ summary: 'Create a video job (JSON)' })
  @ApiJobOrPlan()
  @ApiCreateErrors()
  generate(@Body() dto: GenerateVideoDto, @Res({ passthrough: true }) res: Response) {
    return this.video.createFromRefs(dto, clientGone(res));
  }

  @Post('jobs')
  @HttpCode(200)
  @UseInterceptors(uploadFields('images', 'audios'), IdempotencyInterceptor)
  @ApiIdempotency()
  @ApiOperation({ summary: 'Create a video job (multipart); wait and callback_url are not supported here' })
  @ApiConsumes('multipart/form-data')
  @ApiBody({ schema: { allOf: [{ $ref: getSchemaPath(CreateVideoFormDto) }, { type: 'object', properties: { images: { type: 'array', items: { type: 'string', format: 'binary' } }, audios: { type: 'array', items: { type: 'string', format: 'binary' } } } }] } })
  @ApiOkResponse({ type: JobObjectDto })
  @ApiCreateErrors()
  createForm(@Body() dto: CreateVideoFormDto, @UploadedFiles() files: Files) {
    refuseFormWait(dto);
    const images = filesOf(files, 'images');
    const audios = filesOf(files, 'audios');
    return this.video.create(dto, { images: images.length, audios: audios.length, load: async () => [images, audios] });
  }
}
