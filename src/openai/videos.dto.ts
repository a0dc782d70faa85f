// /v1/videos as the official `openai` SDK sends it (videos.create, list, remix, downloadContent): OpenAI's fields, of
// which Kiln honours prompt, model, seconds, size and input_reference (a picture file part, or {"image_url"}: the
// first frame, Kiln's keyframe mode). seed, steps and loras are Kiln's extensions. The SDK sends a create as a form, so
// the numbers come as strings (validation.ts coerces a form's numeric fields).
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { LORAS_DESCRIPTION, LoraRequestDto } from '../image/image.dto';
import { IsDefined, IsIn, IsInt, IsObject, IsString, Max, Min } from 'class-validator';
import { MAX_STEPS, VIDEO_DEFAULTS, VIDEO_PROFILES, VIDEO_SECONDS } from '../catalog';
import { Optional } from '../http/validation';
import { OPENAI_VIDEO_MODELS } from './models';

export const VIDEO_VARIANTS = ['video', 'thumbnail', 'spritesheet'] as const;
export const MAX_VIDEO_PAGE = 100;

export class OpenAiVideoCreateDto {
  static multipart = true;

  @ApiProperty({ description: 'What happens in the video' })
  @IsDefined() @IsString()
  prompt!: string;

  @ApiPropertyOptional({ description: `A Kiln video profile (${VIDEO_PROFILES.map((p) => p.profile).join(', ')}), or an OpenAI video model name (${OPENAI_VIDEO_MODELS.join(', ')}: the default profile, ${VIDEO_DEFAULTS.profile})`, default: VIDEO_DEFAULTS.profile })
  @Optional() @IsString()
  model?: string;

  @ApiPropertyOptional({ description: `Whole seconds as a string, ${VIDEO_SECONDS.min} to ${VIDEO_SECONDS.max} (OpenAI's 4, 8 and 12 among them)`, default: String(VIDEO_DEFAULTS.seconds) })
  @Optional() @IsString()
  seconds?: string;

  @ApiPropertyOptional({ description: "<width>x<height>: one of Kiln's video sizes, or OpenAI's (1280x720, 720x1280, 1792x1024, 1024x1792: the same aspect at 768p)", default: '864x480' })
  @Optional() @IsString()
  size?: string;

  @ApiPropertyOptional({
    description: 'The first frame: a picture as a file part (multipart), or {"image_url": "https://..." or a data URI} (file_id: there is no files API here)',
    oneOf: [{ type: 'string', format: 'binary' }, { type: 'object', properties: { image_url: { type: 'string' }, file_id: { type: 'string' } } }],
  })
  @Optional() @IsObject()
  input_reference?: { image_url?: string; file_id?: string };

  @ApiPropertyOptional({ description: 'Kiln extension: the seed (absent: random)' })
  @Optional() @IsInt() @Min(0)
  seed?: number;

  @ApiPropertyOptional({ description: "Kiln extension: sampling steps (0: the profile's default)", maximum: MAX_STEPS })
  @Optional() @IsInt() @Min(0) @Max(MAX_STEPS)
  steps?: number;

  // typed by drafting (jobs/job-requests.ts resolveLoras), which takes the array or, from a multipart form, its JSON text
  @ApiPropertyOptional({ type: [LoraRequestDto], description: `Kiln extension: ${LORAS_DESCRIPTION}. In a multipart form: the array as JSON text` })
  loras?: LoraRequestDto[] | string;
}

export class OpenAiVideoRemixDto {
  static multipart = true;

  @ApiProperty({ description: 'The new prompt: the video is made again with it, with the same settings and seed' })
  @IsDefined() @IsString()
  prompt!: string;
}

export class OpenAiVideoListQuery {
  static multipart = true;

  @ApiPropertyOptional({ description: 'The id of the last video of the previous page' })
  @Optional() @IsString()
  after?: string;

  @ApiPropertyOptional({ minimum: 1, maximum: MAX_VIDEO_PAGE, default: 20 })
  @Optional() @IsInt() @Min(1) @Max(MAX_VIDEO_PAGE)
  limit?: number;

  @ApiPropertyOptional({ enum: ['asc', 'desc'], default: 'desc', description: 'By creation' })
  @Optional() @IsIn(['asc', 'desc'])
  order?: 'asc' | 'desc';
}

export class OpenAiVideoContentQuery {
  static multipart = true;

  @ApiPropertyOptional({ enum: VIDEO_VARIANTS, default: 'video', description: 'video: the mp4; thumbnail: its first frame (webp); spritesheet: up to 8 frames in a 4 x 2 grid (jpeg)' })
  @Optional() @IsIn(VIDEO_VARIANTS)
  variant?: (typeof VIDEO_VARIANTS)[number];
}
