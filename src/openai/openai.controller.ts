// Kiln's OpenAI-compatible face, under /v1/ (README "Using Kiln from OpenAI clients"): the official SDKs pointed at
// Kiln's base URL with its token. A thin mapping onto the same request path and jobs as /api/*: every job made here
// shows in /api/jobs, the page, events and metrics. Errors come in OpenAI's shape (http/openai-error.ts). One
// controller a part of it, each with its one service: models (here), images, speech and voices, videos.
import { Controller, Get, NotFoundException, Param } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { kilnModels } from './models';
import { ApiOpenAi, ApiOpenAiNotFound, OpenAiModelDto, OpenAiModelListDto } from './openai.schema';

/** Models' `created`: when this service started (the profiles exist as long as it runs). */
const STARTED = Math.floor(Date.now() / 1000);

const modelObject = (m: { id: string; kind: string }) => ({ id: m.id, object: 'model', created: STARTED, owned_by: 'kiln', kind: m.kind });

@ApiTags('openai')
@ApiOpenAi()
@Controller('v1')
export class OpenAiModelsController {
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
}
