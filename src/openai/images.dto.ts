// POST /v1/images/generations (JSON) and /v1/images/edits (multipart) as the official `openai` SDK sends them
// (images.generate, images.edit): OpenAI's fields, of which Kiln honours prompt, model, n, size, response_format and
// output_format, and takes quality, style, moderation, input_fidelity and user as the SDK may send them (nothing to do
// with them here). seed, steps, negative_prompt and loras are Kiln's extensions.
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsDefined, IsIn, IsInt, IsString, Max, Min } from 'class-validator';
import { IMAGE_DEFAULTS, IMAGE_PROFILES, MAX_STEPS } from '../catalog';
import { LORAS_DESCRIPTION, LoraRequestDto } from '../image/image.dto';
import { Optional } from '../http/validation';
import { OPENAI_IMAGE_MODELS } from './models';

export const MAX_N = 10;
export const RESPONSE_FORMATS = ['url', 'b64_json'] as const;
export const OUTPUT_FORMATS = ['png', 'jpeg', 'webp'] as const;

export class OpenAiImageGenerateDto {
  @ApiProperty({ description: 'What to draw' })
  @IsDefined() @IsString()
  prompt!: string;

  @ApiPropertyOptional({ description: `A Kiln image profile (${IMAGE_PROFILES.map((p) => p.profile).join(', ')}), or an OpenAI image model name (${OPENAI_IMAGE_MODELS.join(', ')}: the default profile, ${IMAGE_DEFAULTS.profile})`, default: IMAGE_DEFAULTS.profile })
  @Optional() @IsString()
  model?: string;

  @ApiPropertyOptional({ minimum: 1, maximum: MAX_N, default: 1, description: 'n jobs, with consecutive seeds' })
  @Optional() @IsInt() @Min(1) @Max(MAX_N)
  n?: number;

  @ApiPropertyOptional({ description: "OpenAI's sizes (1024x1024, 1536x1024, 1792x1024, ...), auto (the profile's default, 1:1 at 1K), or any <width>x<height> Kiln takes", default: 'auto' })
  @Optional() @IsString()
  size?: string;

  @ApiPropertyOptional({ enum: RESPONSE_FORMATS, description: 'Default: b64_json for gpt-image-* models (as OpenAI), url otherwise' })
  @Optional() @IsIn(RESPONSE_FORMATS)
  response_format?: (typeof RESPONSE_FORMATS)[number];

  @ApiPropertyOptional({ enum: OUTPUT_FORMATS, default: 'png', description: 'jpeg and webp: with response_format b64_json (a url serves the job\'s png)' })
  @Optional() @IsIn(OUTPUT_FORMATS)
  output_format?: (typeof OUTPUT_FORMATS)[number];

  @ApiPropertyOptional({ description: 'Accepted and ignored' }) @Optional() @IsString() quality?: string;
  @ApiPropertyOptional({ description: 'Accepted and ignored' }) @Optional() @IsString() style?: string;
  @ApiPropertyOptional({ description: 'Accepted and ignored' }) @Optional() @IsString() moderation?: string;
  @ApiPropertyOptional({ description: 'Accepted and ignored' }) @Optional() @IsString() user?: string;

  @ApiPropertyOptional({ description: 'Kiln extension: the first job\'s seed (the others count up from it); absent: random' })
  @Optional() @IsInt() @Min(0)
  seed?: number;

  @ApiPropertyOptional({ description: "Kiln extension: sampling steps (0: the profile's default)", maximum: MAX_STEPS })
  @Optional() @IsInt() @Min(0) @Max(MAX_STEPS)
  steps?: number;

  @ApiPropertyOptional({ description: 'Kiln extension' })
  @Optional() @IsString()
  negative_prompt?: string;

  // typed by drafting (jobs/job-requests.ts resolveLoras), which takes the array or, from the edit form, its JSON text
  @ApiPropertyOptional({ type: [LoraRequestDto], description: `${LORAS_DESCRIPTION}. In the edit form: the array as JSON text` })
  loras?: LoraRequestDto[] | string;
}

/** POST /v1/images/edits: the same fields as a form; the pictures come as `image` or `image[]` file parts. */
export class OpenAiImageEditFormDto extends OpenAiImageGenerateDto {
  static multipart = true;

  @ApiPropertyOptional({ description: 'Accepted and ignored' }) @Optional() @IsString() input_fidelity?: string;
}
