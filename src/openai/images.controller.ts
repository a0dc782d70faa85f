// OpenAI's image generation and edits under /v1/images (openai.controller.ts says what the face is).
import { Body, Controller, HttpCode, Post, Req, Res, UploadedFiles, UseInterceptors } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiExtraModels, ApiOkResponse, ApiOperation, ApiTags, getSchemaPath } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { BadInputError } from '../common/errors';
import { clientGone } from '../http/request-signal';
import { filesOf, uploadFields, type UploadedFiles as Files } from '../jobs/upload';
import { OpenAiImageEditFormDto, OpenAiImageGenerateDto } from './images.dto';
import { OpenAiImagesService } from './images.service';
import { ApiOpenAi, ApiOpenAiCreateErrors, OpenAiImagesResponseDto } from './openai.schema';

/** Scheme and host the client reached, for the absolute file URLs OpenAI's answers carry. */
const baseUrlOf = (req: Request) => `${req.protocol}://${req.get('host')}`;

@ApiTags('openai')
@ApiOpenAi()
@ApiExtraModels(OpenAiImageEditFormDto)
@Controller('v1')
export class OpenAiImagesController {
  constructor(private readonly images: OpenAiImagesService) {}

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
}
