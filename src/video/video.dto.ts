import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsArray, IsBoolean, IsDefined, IsInt, IsNumber, IsString } from 'class-validator';
import { Nullable, Optional } from '../http/validation';
import { DRY_RUN_DESCRIPTION } from '../jobs/plan.schema';
import { LoraRequestDto, LORAS_DESCRIPTION } from '../image/image.dto';
import { CLIP_SECONDS, FPS, FRAME_GRID, MAX_PRIORITY, MAX_WAIT_S, TTS_LANGUAGES, VIDEO_ASPECTS, VIDEO_AUDIO_MODES, VIDEO_DEFAULTS as DEF, VIDEO_IMAGE_MODES, VIDEO_MAX_AUDIOS, VIDEO_MAX_IMAGES, VIDEO_PROFILES, VIDEO_RES, VIDEO_SECONDS, LORA_LIMITS, snapFrames } from '../catalog';

/** Fields shared by the JSON and multipart video forms. Defaults, enums and bounds: the capability table's
 * (catalog/capabilities.ts), which drafting applies. */
export class VideoFieldsDto {
  @ApiProperty({ description: 'Scene, camera and sound, in Chinese or English. Quoted dialogue is lip-synced. Empty gives 400.' })
  @IsDefined() @IsString()
  prompt!: string;

  @ApiPropertyOptional({ enum: VIDEO_PROFILES.map((p) => p.profile), default: DEF.profile })
  @Optional() @IsString()
  profile?: string;

  @ApiPropertyOptional({ enum: VIDEO_ASPECTS, default: DEF.aspect })
  @Optional() @IsString()
  aspect?: string;

  @ApiPropertyOptional({ enum: VIDEO_RES, default: DEF.res })
  @Optional() @IsString()
  res?: string;

  @ApiPropertyOptional({ default: DEF.seconds, minimum: VIDEO_SECONDS.min, maximum: VIDEO_SECONDS.max, description: `Rounded up to the ${FRAME_GRID.period}k+${FRAME_GRID.offset} frame grid at ${FPS} fps (${DEF.seconds} s gives ${snapFrames(DEF.seconds)} frames)` })
  @Optional() @IsNumber({ allowNaN: false, allowInfinity: false })
  seconds?: number;

  @ApiPropertyOptional({ default: DEF.seed, description: '-1 means random; the seed used is returned' })
  @Optional() @IsInt()
  seed?: number;

  @ApiPropertyOptional({ default: DEF.steps, description: '0 means the profile default' })
  @Optional() @IsInt()
  steps?: number;

  @ApiPropertyOptional({ enum: VIDEO_IMAGE_MODES, default: DEF.image_mode })
  @Optional() @IsString()
  image_mode?: string;

  @ApiPropertyOptional({ enum: VIDEO_AUDIO_MODES, default: DEF.audio_mode })
  @Optional() @IsString()
  audio_mode?: string;

  @ApiPropertyOptional({ default: DEF.tts_text, description: 'Speech synthesised in the voice of audios[0] and used as the soundtrack' })
  @Optional() @IsString()
  tts_text?: string;

  @ApiPropertyOptional({
    description: 'Kiln extension: a saved voice\'s id or name (GET /v1/audio/voices lists them, POST /v1/audio/voices saves one) in place of '
      + 'audios[0] as the voice tts_text is spoken in (or, with no pictures, the prompt\'s quoted dialogue): its clip is audios[0], its ref_text the '
      + 'tts_ref_text when that is not given. With clips in audios, or on a job with no speech to speak, a 400. Empty: none',
  })
  @Optional() @IsString()
  voice?: string;

  @ApiPropertyOptional({ default: DEF.tts_ref_text, description: 'Optional transcript of audios[0]' })
  @Optional() @IsString()
  tts_ref_text?: string;

  @ApiPropertyOptional({ enum: TTS_LANGUAGES, default: DEF.tts_language })
  @Optional() @IsString()
  tts_language?: string;

  @ApiPropertyOptional({ type: 'integer', default: DEF.priority, minimum: 0, maximum: MAX_PRIORITY, description: 'Higher runs first; first come, first served within a priority (an extension of the spec)' })
  @Optional() @IsInt()
  priority?: number;
}

/** POST /api/v1/generate */
export class GenerateVideoDto extends VideoFieldsDto {
  @ApiPropertyOptional({ type: [String], description: `0 to ${VIDEO_MAX_IMAGES} images: https URLs or data:image/...;base64 strings` })
  @Optional() @IsArray() @IsString({ each: true })
  images?: string[];

  @ApiPropertyOptional({ type: [String], description: `0 to ${VIDEO_MAX_AUDIOS} clips of ${CLIP_SECONDS.video.minS} to ${CLIP_SECONDS.video.maxS} s: https URLs or data:audio/...;base64 strings` })
  @Optional() @IsArray() @IsString({ each: true })
  audios?: string[];

  @ApiPropertyOptional({ default: DEF.wait, description: 'Block until the job finishes or timeout passes' })
  @Optional() @IsBoolean()
  wait?: boolean;

  @ApiPropertyOptional({ default: DEF.timeout, maximum: MAX_WAIT_S, description: 'Seconds to wait at most; the job continues after' })
  @Optional() @IsInt()
  timeout?: number;

  @ApiPropertyOptional({ type: String, nullable: true, default: DEF.callback_url, description: 'Receives the job object as a JSON POST when the job ends' })
  @Nullable() @IsString()
  callback_url?: string | null;

  @ApiPropertyOptional({ type: [LoraRequestDto], maxItems: LORA_LIMITS.max, description: LORAS_DESCRIPTION })
  @Optional() @IsArray()
  loras?: LoraRequestDto[];

  @ApiPropertyOptional({ default: false, description: DRY_RUN_DESCRIPTION })
  @Optional() @IsBoolean()
  dry_run?: boolean;
}

/** POST /api/jobs (multipart/form-data); files arrive separately in `images` and `audios`. */
export class CreateVideoFormDto extends VideoFieldsDto {
  static multipart = true;

  @ApiPropertyOptional({ description: `${LORAS_DESCRIPTION}. In a form: the array as JSON text`, example: '[{"name": "motion/pan", "scale": 0.8}]' })
  @Optional() @IsString()
  loras?: string;
}
