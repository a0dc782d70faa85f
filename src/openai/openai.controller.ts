// Kiln's OpenAI-compatible face, under /v1/ (README "Using Kiln from OpenAI clients"): the official SDKs pointed at
// Kiln's base URL with its token. A thin mapping onto the same request path and jobs as /api/*: every job made here
// shows in /api/jobs, the page, events and metrics. Errors come in OpenAI's shape (http/openai-error.ts).
import { Body, Controller, Delete, Get, HttpCode, NotFoundException, Param, Post, Req, Res, StreamableFile, UploadedFiles, UseInterceptors } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiExtraModels, ApiOkResponse, ApiOperation, ApiTags, getSchemaPath } from '@nestjs/swagger';
import { BadInputError } from '../common/errors';
import { filesOf, uploadFields, type UploadedFiles as Files } from '../jobs/upload';
import type { Request, Response } from 'express';
import { clientGone } from '../http/request-signal';
import { OpenAiImageEditFormDto, OpenAiImageGenerateDto } from './images.dto';
import { OpenAiImagesService } from './images.service';
import { kilnModels } from './models';
import { ApiOpenAi, ApiOpenAiCreateErrors, ApiOpenAiNotFound, OpenAiImagesResponseDto, OpenAiModelDto, OpenAiModelListDto, OpenAiVoiceDeletedDto, OpenAiVoiceDto, OpenAiVoiceListDto } from './openai.schema';
import { OpenAiSpeechDto, OpenAiVoiceFormDto } from './speech.dto';
import { OpenAiSpeechService, voiceObject } from './speech.service';

/** Models' `created`: when this service started (the profiles exist as long as it runs). */
const STARTED = Math.floor(Date.now() / 1000);

/** Scheme and host the client reached, for the absolute file URLs OpenAI's answers carry. */
const baseUrlOf = (req: Request) => `${req.protocol}://${req.get('host')}`;

const modelObject = (m: { id: string; kind: string }) => ({ id: m.id, object: 'model', created: STARTED, owned_by: 'kiln', kind: m.kind });

@ApiTags('openai')
@ApiOpenAi()
@ApiExtraModels(OpenAiImageEditFormDto, OpenAiVoiceFormDto)
@Controller('v1')
export class OpenAiController {
  constructor(private readonly images: OpenAiImagesService, private readonly speech: OpenAiSpeechService) {}

  @Get('models')
  @ApiOperation({ summary: 'OpenAI: every model (Kiln profile) served, with its kind' })
  @ApiOkResponse({ type: OpenAiModelListDto })
  listModels() {
    return { object: 'list', data: kilnModels().map(modelObject) };
  }

  @Get('models/:id')
  @ApiOperation({ summary: 'OpenAI: one model' })
  @ApiOkResponse({ type: OpenAiModelDto })
  @ApiOpenAiNotFound()
  getModel(@Param('id') id: string) {
    const m = kilnModels().find((x) => x.id === id);
    if (!m) throw new NotFoundException({ detail: `no model ${JSON.stringify(id)}; models here: ${kilnModels().map((x) => x.id).join(', ')}` });
    return modelObject(m);
  }

  @Post('images/generations')
  @HttpCode(200)
  @ApiOperation({ summary: 'OpenAI: generate images (n jobs, answered when done)' })
  @ApiOkResponse({ type: OpenAiImagesResponseDto })
  @ApiOpenAiCreateErrors()
  generate(@Body() dto: OpenAiImageGenerateDto, @Req() req: Request, @Res({ passthrough: true }) res: Response) {
    return this.images.generate(dto, baseUrlOf(req), clientGone(res));
  }

  @Post('images/edits')
  @HttpCode(200)
  @UseInterceptors(uploadFields('image', 'image[]', 'mask'))
  @ApiOperation({ summary: 'OpenAI: edit pictures (multipart; n jobs, answered when done)' })
  @ApiConsumes('multipart/form-data')
  @ApiBody({ schema: { allOf: [{ $ref: getSchemaPath(OpenAiImageEditFormDto) }, { type: 'object', required: ['image'], properties: { image: { type: 'array', items: { type: 'string', format: 'binary' } } } }] } })
  @ApiOkResponse({ type: OpenAiImagesResponseDto })
  @ApiOpenAiCreateErrors()
  edit(@Body() dto: OpenAiImageEditFormDto, @UploadedFiles() files: Files, @Req() req: Request, @Res({ passthrough: true }) res: Response) {
    if (files?.mask?.length) throw new BadInputError('mask: masks are not supported; Kiln\'s editing models change the whole picture as the prompt says (name the part to change in it); send the form without a mask');
    const pictures = [...filesOf(files, 'image'), ...filesOf(files, 'image[]')];
    return this.images.generate(dto, baseUrlOf(req), clientGone(res), pictures);
  }

  @Post('audio/speech')
  @HttpCode(200)
  @ApiOperation({ summary: 'OpenAI: speak the input in a saved voice (answered with the audio)' })
  // the audio types on the 200 alone (ApiProduces would give the JSON errors these types too)
  @ApiOkResponse({ description: 'The audio, in response_format', content: Object.fromEntries(['audio/mpeg', 'audio/ogg', 'audio/aac', 'audio/flac', 'audio/wav', 'audio/pcm'].map((t) => [t, { schema: { type: 'string', format: 'binary' } }])) })
  @ApiOpenAiCreateErrors()
  async speak(@Body() dto: OpenAiSpeechDto, @Res({ passthrough: true }) res: Response) {
    const { body, type } = await this.speech.speak(dto, clientGone(res));
    return new StreamableFile(body, { type, length: body.length });
  }

  @Post('audio/voices')
  @HttpCode(200)
  @UseInterceptors(uploadFields('audio_sample'))
  @ApiOperation({ summary: 'OpenAI: save a voice from a clip (multipart)' })
  @ApiConsumes('multipart/form-data')
  @ApiBody({ schema: { allOf: [{ $ref: getSchemaPath(OpenAiVoiceFormDto) }, { type: 'object', required: ['audio_sample'], properties: { audio_sample: { type: 'string', format: 'binary' } } }] } })
  @ApiOkResponse({ type: OpenAiVoiceDto })
  @ApiOpenAiCreateErrors()
  async createVoice(@Body() dto: OpenAiVoiceFormDto, @UploadedFiles() files: Files) {
    const clip = filesOf(files, 'audio_sample')[0];
    return voiceObject(await this.speech.saveVoice(dto.name, dto.consent, clip, dto.ref_text));
  }

  @Get('audio/voices')
  @ApiOperation({ summary: 'Every saved voice, oldest first' })
  @ApiOkResponse({ type: OpenAiVoiceListDto })
  listVoices() {
    return { object: 'list', data: this.speech.voices.list().map(voiceObject) };
  }

  @Delete('audio/voices/:id')
  @ApiOperation({ summary: 'OpenAI: delete a saved voice' })
  @ApiOkResponse({ type: OpenAiVoiceDeletedDto })
  @ApiOpenAiNotFound()
  deleteVoice(@Param('id') id: string) {
    this.speech.removeVoice(id);
    return { id, deleted: true, object: 'audio.voice.deleted' };
  }
}
