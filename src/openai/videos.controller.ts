// OpenAI's videos API under /v1/videos (README "Using Kiln from OpenAI clients"): create, retrieve, list, delete,
// the content (mp4, thumbnail, spritesheet) and remix, each a thin mapping onto Kiln's video jobs.
import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, Res, StreamableFile, UploadedFiles, UseInterceptors } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiExtraModels, ApiOkResponse, ApiOperation, ApiTags, getSchemaPath } from '@nestjs/swagger';
import type { Response } from 'express';
import { filesOf, uploadFields, type UploadedFiles as Files } from '../jobs/upload';
import { clientGone } from '../http/request-signal';
import { ApiOpenAi, ApiOpenAiBadQuery, ApiOpenAiCreateErrors, ApiOpenAiNotFound, OpenAiVideoDeletedDto, OpenAiVideoDto, OpenAiVideoListDto } from './openai.schema';
import { OpenAiVideoContentQuery, OpenAiVideoCreateDto, OpenAiVideoListQuery, OpenAiVideoRemixDto } from './videos.dto';
import { OpenAiVideosService } from './videos.service';
import { BadInputError } from '../common/errors';

const NO_VIDEO = 'No such video (or not a video job)';

@ApiTags('openai')
@ApiOpenAi()
@ApiExtraModels(OpenAiVideoCreateDto)
@Controller('v1/videos')
export class OpenAiVideosController {
  constructor(private readonly videos: OpenAiVideosService) {}

  @Post()
  @HttpCode(200)
  @UseInterceptors(uploadFields('input_reference'))
  @ApiOperation({ summary: 'OpenAI: create a video (a Kiln video job; answered at once, queued)' })
  @ApiConsumes('multipart/form-data', 'application/json')
  @ApiBody({ schema: { $ref: getSchemaPath(OpenAiVideoCreateDto) } })
  @ApiOkResponse({ type: OpenAiVideoDto })
  @ApiOpenAiCreateErrors()
  create(@Body() dto: OpenAiVideoCreateDto, @UploadedFiles() files: Files) {
    const pictures = filesOf(files, 'input_reference');
    if (pictures.length > 1) throw new BadInputError(`input_reference: ${pictures.length} pictures; a video starts from one`);
    return this.videos.create(dto, pictures[0]);
  }

  @Get()
  @ApiOperation({ summary: 'OpenAI: video jobs, newest first, a cursor page at a time' })
  @ApiOkResponse({ type: OpenAiVideoListDto })
  @ApiOpenAiBadQuery()
  list(@Query() q: OpenAiVideoListQuery) {
    return this.videos.list(q);
  }

  @Get(':id')
  @ApiOperation({ summary: 'OpenAI: one video (its status and progress)' })
  @ApiOkResponse({ type: OpenAiVideoDto })
  @ApiOpenAiNotFound(NO_VIDEO)
  retrieve(@Param('id') id: string) {
    return this.videos.retrieve(id);
  }

  @Delete(':id')
  @ApiOperation({ summary: 'OpenAI: delete a video and its files (a queued or running one is cancelled first)' })
  @ApiOkResponse({ type: OpenAiVideoDeletedDto })
  @ApiOpenAiNotFound(NO_VIDEO)
  remove(@Param('id') id: string) {
    return this.videos.remove(id);
  }

  @Get(':id/content')
  @ApiOperation({ summary: 'OpenAI: the finished mp4, or its thumbnail or spritesheet' })
  // the media types on the 200 alone (ApiProduces would give the JSON errors these types too)
  @ApiOkResponse({ description: 'The bytes of the variant', content: Object.fromEntries(['video/mp4', 'image/webp', 'image/jpeg'].map((t) => [t, { schema: { type: 'string', format: 'binary' } }])) })
  @ApiOpenAiNotFound(`${NO_VIDEO}, or not completed yet`)
  @ApiOpenAiBadQuery()
  async content(@Param('id') id: string, @Query() q: OpenAiVideoContentQuery, @Res({ passthrough: true }) res: Response) {
    const { body, type } = await this.videos.content(id, q.variant, clientGone(res));
    return Buffer.isBuffer(body) ? new StreamableFile(body, { type, length: body.length }) : new StreamableFile(body, { type });
  }

  @Post(':id/remix')
  @HttpCode(200)
  @ApiOperation({ summary: 'OpenAI: make the video again with a new prompt (same settings and seed)' })
  @ApiOkResponse({ type: OpenAiVideoDto })
  @ApiOpenAiCreateErrors()
  @ApiOpenAiNotFound(NO_VIDEO)
  remix(@Param('id') id: string, @Body() dto: OpenAiVideoRemixDto) {
    return this.videos.remix(id, dto.prompt);
  }
}
