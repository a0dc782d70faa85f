// OpenAI's image generation (POST /v1/images/generations) as n image jobs through the same path as Kiln's own
// API (ImageService.create: drafting, the capability table, the queue), waited for as OpenAI's answer is
// synchronous, then returned as absolute URLs of the finished files or base64 bytes.
import { HttpException, Injectable } from '@nestjs/common';
import { randomInt } from 'node:crypto';
import { buffer } from 'node:stream/consumers';
import sharp from 'sharp';
import { MAX_SEED, MAX_WAIT_S } from '../catalog';
import { BadInputError } from '../common/errors';
import { ImageService } from '../image/image.service';
import { JobsService } from '../jobs/jobs.service';
import type { InputFile } from '../jobs/input-probe';
import { MAX_N, type OpenAiImageGenerateDto } from './images.dto';
import { editProfileOf, imageProfileOf } from './models';

export interface OpenAiImage {
  url?: string;
  b64_json?: string;
}

@Injectable()
export class OpenAiImagesService {
  constructor(private readonly image: ImageService, private readonly jobs: JobsService) {}

  /** Images from the prompt (`pictures` absent), or edits of `pictures` (Kiln's edit mode: every picture is
   * Picture 1, 2, ... of the instruction). `baseUrl`: scheme and host the client reached, for absolute file URLs. */
  async generate(dto: OpenAiImageGenerateDto, baseUrl: string, signal?: AbortSignal, pictures?: InputFile[]): Promise<Record<string, unknown>> {
    const profile = pictures ? editProfileOf(dto.model) : imageProfileOf(dto.model);
    if (pictures?.length === 0) throw new BadInputError('image: no picture to edit; send one or more as image (or image[]) file parts');
    const format = dto.response_format ?? (dto.model?.startsWith('gpt-image') ? 'b64_json' : 'url');
    const output = dto.output_format ?? 'png';
    if (format === 'url' && output !== 'png') {
      throw new BadInputError(`output_format ${output} comes only with response_format b64_json: a url serves the job's png`);
    }
    const n = dto.n ?? 1;
    const seed = dto.seed ?? randomInt(0, MAX_SEED - MAX_N);
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const job = await this.image.create(
        {
          prompt: dto.prompt, profile, seed: seed + i, steps: dto.steps, negative_prompt: dto.negative_prompt, loras: dto.loras,
          ...(dto.size !== undefined && dto.size !== 'auto' ? { size: dto.size } : {}),
        },
        { images: pictures?.length ?? 0, load: async () => pictures ?? [] },
      );
      ids.push(job.id as string);
    }
    const done = [];
    for (const id of ids) {
      const job = await this.jobs.waitFor(id, MAX_WAIT_S, signal);
      if (job.status === 'failed') throw new HttpException({ detail: `image job ${id} failed: ${String(job.error)}` }, 500);
      if (job.status !== 'done') {
        throw new HttpException({ detail: `the images are not done after ${MAX_WAIT_S} s; they go on as jobs ${ids.join(', ')} (GET /api/jobs/{id})` }, 504);
      }
      done.push(job);
    }
    const data: OpenAiImage[] = [];
    for (const job of done) {
      if (format === 'url') {
        data.push({ url: `${baseUrl}${String(job.image)}` });
        continue;
      }
      const file = await this.jobs.outputFile(job.id as string, 'image');
      const png = await buffer(file.body);
      const bytes = output === 'png' ? png : await sharp(png).toFormat(output).toBuffer();
      data.push({ b64_json: bytes.toString('base64') });
    }
    return { created: Math.floor(Date.now() / 1000), data, output_format: output, size: done[0]!.size };
  }
}
