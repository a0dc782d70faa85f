import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsArray, IsBoolean, IsDefined, IsInt, IsNumber, IsString } from 'class-validator';
import { Nullable, Optional } from '../http/validation';
import { DRY_RUN_DESCRIPTION } from '../jobs/plan.schema';
import { EXPLICIT_SIZE, IMAGE_ASPECTS, IMAGE_CAPABILITIES, IMAGE_DEFAULTS as DEF, IMAGE_PROFILES, IMAGE_RES, LORA_LIMITS, MAX_PRIORITY, MAX_WAIT_S } from '../catalog';

const DEFAULT_PROFILE = IMAGE_CAPABILITIES.find((c) => c.profile === DEF.profile)!;

/** "imgmain profiles: 0 to 10 (editing); imgart_turbo profiles: 0 to 3 style references", from the table. */
function imagesRule(): string {
  const family = (edit: boolean) => IMAGE_CAPABILITIES.filter((c) => c.can_edit === edit);
  const rule = (edit: boolean) => `${family(edit)[0]!.profile} profiles: 0 to ${family(edit)[0]!.images.max}${edit ? ' (editing)' : ' style references'}`;
  return `${rule(true)}; ${rule(false)}`;
}

/** Defaults, enums and bounds: the capability table's (catalog/capabilities.ts), which drafting applies. */
export class ImageFieldsDto {
  @ApiProperty({ description: 'What to draw, or the edit instruction when images are given. Images are Picture 1, Picture 2, ... in input order.' })
  @IsDefined() @IsString()
  prompt!: string;

  @ApiPropertyOptional({ default: DEF.negative_prompt, description: 'Used only when cfg is greater than 1' })
  @Optional() @IsString()
  negative_prompt?: string;

  @ApiPropertyOptional({ enum: IMAGE_PROFILES.map((p) => p.profile), default: DEF.profile })
  @Optional() @IsString()
  profile?: string;

  @ApiPropertyOptional({ enum: IMAGE_ASPECTS, default: DEF.aspect })
  @Optional() @IsString()
  aspect?: string;

  @ApiPropertyOptional({ enum: IMAGE_RES, default: DEF.res })
  @Optional() @IsString()
  res?: string;

  @ApiPropertyOptional({ default: DEF.size, description: `Explicit <width>x<height>, multiples of ${EXPLICIT_SIZE.multiple_of} from ${EXPLICIT_SIZE.min} to ${EXPLICIT_SIZE.max}; overrides aspect and res` })
  @Optional() @IsString()
  size?: string;

  @ApiPropertyOptional({ default: DEF.size_from_ref, description: 'Editing only: output size follows the first image, scaled to the res tier' })
  @Optional() @IsBoolean()
  size_from_ref?: boolean;

  @ApiPropertyOptional({ default: DEF.seed })
  @Optional() @IsInt()
  seed?: number;

  @ApiPropertyOptional({ default: DEF.steps, description: `0 means the profile default (${DEFAULT_PROFILE.steps.default} for ${DEFAULT_PROFILE.profile})` })
  @Optional() @IsInt()
  steps?: number;

  @ApiPropertyOptional({ default: DEF.cfg, description: `0 means the profile default (${DEFAULT_PROFILE.cfg.default.toFixed(1)})` })
  @Optional() @IsNumber({ allowNaN: false, allowInfinity: false })
  cfg?: number;

  @ApiPropertyOptional({ type: 'integer', default: DEF.priority, minimum: 0, maximum: MAX_PRIORITY, description: 'Higher runs first; first come, first served within a priority (an extension of the spec)' })
  @Optional() @IsInt()
  priority?: number;
}

/** One LoRA of a request (drafting checks it: jobs/job-requests.ts resolveLoras). */
export class LoraRequestDto {
  @ApiProperty({ description: 'The LoRA\'s name as GET /api/config lists it: its path below LORA_DIR or ComfyUI\'s loras/ without .safetensors, or owner/repo[/file] in the Hugging Face cache' })
  name!: string;

  @ApiPropertyOptional({ default: LORA_LIMITS.scale.default, minimum: LORA_LIMITS.scale.min, maximum: LORA_LIMITS.scale.max, description: '1 as trained, 0 off' })
  scale?: number;
}

/** The `loras` field's description (both forms). */
export const LORAS_DESCRIPTION = `Extension: LoRAs applied to the model for this job, in order: [{"name": ..., "scale": ...}], name as GET /api/config lists it (a file below LORA_DIR or ComfyUI's loras/ without .safetensors), scale ${LORA_LIMITS.scale.min} to ${LORA_LIMITS.scale.max} (default ${LORA_LIMITS.scale.default}; 0: off); at most ${LORA_LIMITS.max}; a file must fit the profile's model (GET /api/config lists the profiles each fits)`;

/** POST /api/v1/image */
export class GenerateImageDto extends ImageFieldsDto {
  @ApiPropertyOptional({ type: [LoraRequestDto], maxItems: LORA_LIMITS.max, description: LORAS_DESCRIPTION })
  @Optional() @IsArray()
  loras?: LoraRequestDto[];

  @ApiPropertyOptional({ type: [String], description: imagesRule() })
  @Optional() @IsArray() @IsString({ each: true })
  images?: string[];

  @ApiPropertyOptional({ default: DEF.wait })
  @Optional() @IsBoolean()
  wait?: boolean;

  @ApiPropertyOptional({ default: DEF.timeout, maximum: MAX_WAIT_S })
  @Optional() @IsInt()
  timeout?: number;

  @ApiPropertyOptional({ type: String, nullable: true, default: DEF.callback_url })
  @Nullable() @IsString()
  callback_url?: string | null;

  @ApiPropertyOptional({ default: false, description: DRY_RUN_DESCRIPTION })
  @Optional() @IsBoolean()
  dry_run?: boolean;
}

/** POST /api/images (multipart/form-data) */
export class CreateImageFormDto extends ImageFieldsDto {
  static multipart = true;

  @ApiPropertyOptional({ description: `${LORAS_DESCRIPTION}. In a form: the array as JSON text`, example: '[{"name": "style/ink", "scale": 0.8}]' })
  @Optional() @IsString()
  loras?: string;
}
