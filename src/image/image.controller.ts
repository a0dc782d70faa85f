import { Body, Controller, HttpCode, Post, Res, UploadedFiles, UseInterceptors } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiExtraModels, getSchemaPath, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { ApiCommon, ApiCreateErrors, ApiIdempotency } from '../http/api-docs';
import { ApiJobOrPlan } from '../jobs/plan.schema';
import { IdempotencyInterceptor } from '../jobs/idempotency.interceptor';
import { clientGone } from '../http/request-signal';
import { JobObjectDto } from '../jobs/job.schema';
import { filesOf, refuseFormWait, uploadFields, UploadedFiles as Files } from '../jobs/upload';
import { CreateImageFormDto, GenerateImageDto } from './image.dto';
import { ImageService } from './image.service';

@ApiTags('image')
@ApiCommon()
@ApiExtraModels(CreateImageFormDto)
@Controller('api')
export class ImageController {
  constructor(private readonly image: ImageService) {}

  @Post('v1/image')
  @HttpCode(200)
  @UseInterceptors(IdempotencyInterceptor)
  @ApiIdempotency()
  @ApiOperation({ summary: 'Create an image job (JSON)' })
  @ApiJobOrPlan()
  @ApiCreateErrors()
  generate(@Body() dto: GenerateImageDto, @Res({ passthrough: true }) res: Response) {
    return this.image.createFromRefs(dto, clientGone(res));
  }

  @Post('images')
  @HttpCode(200)
  @UseInterceptors(uploadFields('images'), IdempotencyInterceptor)
  @ApiIdempotency()
  @ApiOperation({ summary: 'Create an image job (multipart)' })
  @ApiConsumes('multipart/form-data')
  @ApiBody({ schema: { allOf: [{ $ref: getSchemaPath(CreateImageFormDto) }, { type: 'object', properties: { images: { type: 'array', items: { type: 'string', format: 'binary' } } } }] } })
  @ApiOkResponse({ type: JobObjectDto })
  @ApiCreateErrors()
  createForm(@Body() dto: CreateImageFormDto, @UploadedFiles() files: Files) {
    refuseFormWait(dto);
    const images = filesOf(files, 'images');
    return this.image.create(dto, { images: images.length, load: async () => images });
  }
}
