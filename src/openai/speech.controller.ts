// OpenAI's speech and saved voices under /v1/audio (openai.controller.ts says what the face is).
import { Body, Controller, Delete, Get, HttpCode, Param, Post, Res, StreamableFile, UploadedFiles, UseInterceptors } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiExtraModels, ApiOkResponse, ApiOperation, ApiTags, getSchemaPath } from '@nestjs/swagger';
import type { Response } from 'express';
import { Readable } from 'node:stream';
import { clientGone } from '../http/request-signal';
import { filesOf, uploadFields, type UploadedFiles as Files } from '../jobs/upload';
import { ApiOpenAi, ApiOpenAiCreateErrors, ApiOpenAiNotFound, OpenAiVoiceDeletedDto, OpenAiVoiceDto, OpenAiVoiceListDto } from './openai.schema';
import { OpenAiSpeechDto, OpenAiVoiceFormDto } from './speech.dto';
import { OpenAiSpeechService, voiceObject } from './speech.service';

@ApiTags('openai')
@ApiOpenAi()
@ApiExtraModels(OpenAiVoiceFormDto)
@Controller('v1')
export class OpenAiSpeechController {
  constructor(private readonly speech: OpenAiSpeechService) {}

  @Post('audio/speech')
  @HttpCode(200)
  @ApiOperation({ summary: 'OpenAI: speak the input in a saved voice (answered with the audio)' })
  // the audio types on the 200 alone (ApiProduces would give the JSON errors these types too)
  @ApiOkResponse({
    description: 'The audio, in response_format; with stream_format sse, text/event-stream: data: lines of {"type": "speech.audio.delta", "audio": <base64>} '
      + 'and a last {"type": "speech.audio.done", "usage": {input_tokens, output_tokens, total_tokens}} (sent once the speech is made; the audio concatenated is the file)',
    content: {
      ...Object.fromEntries(['audio/mpeg', 'audio/ogg', 'audio/aac', 'audio/flac', 'audio/wav', 'audio/pcm'].map((t) => [t, { schema: { type: 'string', format: 'binary' } }])),
      'text/event-stream': { schema: { type: 'string' } },
    },
  })
  @ApiOpenAiCreateErrors()
  async speak(@Body() dto: OpenAiSpeechDto, @Res({ passthrough: true }) res: Response) {
    const { body, type, seconds } = await this.speech.speak(dto, clientGone(res));
    if (dto.stream_format !== 'sse') return new StreamableFile(body, { type, length: body.length });
    // refusals and failures came before this point as JSON errors; the stream carries the finished audio
    res.setHeader('Cache-Control', 'no-cache, no-transform');
    return new StreamableFile(Readable.from(OpenAiSpeechService.sseEvents(body, dto.input, seconds)), { type: 'text/event-stream; charset=utf-8' });
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
