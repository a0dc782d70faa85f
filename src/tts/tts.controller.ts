import { Body, Controller, HttpCode, Post, Res, UploadedFiles, UseInterceptors } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiExtraModels, getSchemaPath, ApiOkResponse, ApiOperation, ApiServiceUnavailableResponse, ApiTags, ApiTooManyRequestsResponse } from '@nestjs/swagger';
import { JobPlanDto } from '../jobs/plan.schema';
import type { Response } from 'express';
import { ApiCommon, ApiCreateErrors } from '../http/api-docs';
import { clientGone } from '../http/request-signal';
import { ErrorDetailDto } from '../http/error-bodies';
import { filesOf, uploadFields, UploadedFiles as Files } from '../jobs/upload';
import { SpeechResultDto, TtsDto, TtsFormDto } from './tts.dto';
import { TtsService } from './tts.service';

@ApiTags('speech')
@ApiCommon()
@ApiExtraModels(TtsFormDto)
@Controller('api')
export class TtsController {
  constructor(private readonly tts: TtsService) {}

  @Post('v1/tts')
  @HttpCode(200)
  @ApiOperation({ summary: 'Voice-clone speech (JSON), answered when the wav is written' })
  @ApiExtraModels(SpeechResultDto, JobPlanDto)
  @ApiOkResponse({ description: 'The speech; with "dry_run": true its plan (JobPlanDto), and nothing spoken', schema: { oneOf: [{ $ref: getSchemaPath(SpeechResultDto) }, { $ref: getSchemaPath(JobPlanDto) }] } })
  @ApiServiceUnavailableResponse({ description: 'The speech model is not available; with dry_run, the plan took longer than its time limit', type: ErrorDetailDto })
  @ApiTooManyRequestsResponse({ description: 'dry_run: the planner is busy', type: ErrorDetailDto })
  @ApiCreateErrors(false)
  speak(@Body() dto: TtsDto, @Res({ passthrough: true }) res: Response) {
    return this.tts.speakFromRef(dto, clientGone(res));
  }

  @Post('tts')
  @HttpCode(200)
  @UseInterceptors(uploadFields('ref_audio'))
  @ApiOperation({ summary: 'Voice-clone speech (multipart); answers with the same speech result as the JSON form' })
  @ApiConsumes('multipart/form-data')
  @ApiBody({ schema: { allOf: [{ $ref: getSchemaPath(TtsFormDto) }, { type: 'object', properties: { ref_audio: { type: 'string', format: 'binary', description: 'The reference clip; required unless voice names a saved voice' } } }] } })
  @ApiOkResponse({ type: SpeechResultDto })
  @ApiServiceUnavailableResponse({ description: 'The speech model is not available', type: ErrorDetailDto })
  @ApiCreateErrors(false)
  speakForm(@Body() dto: TtsFormDto, @UploadedFiles() files: Files, @Res({ passthrough: true }) res: Response) {
    return this.tts.speakFromForm(dto, filesOf(files, 'ref_audio').map((f) => ({ ...f, label: 'ref_audio' }))[0], clientGone(res));
  }
}
