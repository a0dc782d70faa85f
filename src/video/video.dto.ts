import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsArray, IsBoolean, IsDefined, IsInt, IsNumber, IsString } from 'class-validator';
import { Nullable, Optional } from '../http/validation';
import { CLIP_SECONDS, DEFAULT_PRIORITY, FPS, TTS_LANGUAGES, VIDEO_ASPECTS, VIDEO_MAX_AUDIOS, VIDEO_MAX_IMAGES, VIDEO_PROFILES, VIDEO_RES, VIDEO_SECONDS, snapFrames } from '../catalog';

/** Fields shared by the JSON and multipart video forms. */
export class VideoFieldsDto {
  @ApiProperty({ description: 'Scene, camera and sound, in Chinese or English. Quoted dialogue is lip-synced. Empty gives 400.' })
  @IsDefined() @IsString()
  prompt!: string;

  @ApiPropertyOptional({ enum: VIDEO_PROFILES.map((p) => p.profile), default: 'fastvid' })
  @Optional() @IsString()
  profile?: string;

  @ApiPropertyOptional({ enum: VIDEO_ASPECTS, default: '16:9' })
  @Optional() @IsString()
  aspect?: string;

  @ApiPropertyOptional({ enum: VIDEO_RES, default: '480p' })
  @Optional() @IsString()
  res?: string;

  @ApiPropertyOptional({ default: VIDEO_SECONDS.default, minimum: VIDEO_SECONDS.min, maximum: VIDEO_SECONDS.max, description: `Rounded up to the 17k+5 frame grid at ${FPS} fps (5 s gives ${snapFrames(5)} frames)` })
  @Optional() @IsNumber({ allowNaN: false, allowInfinity: false })
  seconds?: number;

  @ApiPropertyOptional({ default: -1, description: '-1 means random; the seed used is returned' })
  @Optional() @IsInt()
  seed?: number;

  @ApiPropertyOptional({ default: 0, description: '0 means the profile default' })
  @Optional() @IsInt()
  steps?: number;

  @ApiPropertyOptional({ enum: ['keyframe', 'reference'], default: 'keyframe' })
  @Optional() @IsString()
  image_mode?: string;

  @ApiPropertyOptional({ enum: ['voice', 'track'], default: 'voice' })
  @Optional() @IsString()
  audio_mode?: string;

  @ApiPropertyOptional({ default: '', description: 'Speech synthesised in the voice of audios[0] and used as the soundtrack' })
  @Optional() @IsString()
  tts_text?: string;

  @ApiPropertyOptional({ default: '', description: 'Optional transcript of audios[0]' })
  @Optional() @IsString()
  tts_ref_text?: string;

  @ApiPropertyOptional({ enum: TTS_LANGUAGES, default: 'Auto' })
  @Optional() @IsString()
  tts_language?: string;

  @ApiPropertyOptional({ type: 'integer', default: DEFAULT_PRIORITY, minimum: 0, maximum: 9, description: 'Higher runs first; first come, first served within a priority (an extension of the spec)' })
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

  @ApiPropertyOptional({ default: false, description: 'Block until the job finishes or timeout passes' })
  @Optional() @IsBoolean()
  wait?: boolean;

  @ApiPropertyOptional({ default: 600, maximum: 1800, description: 'Seconds to wait at most; the job continues after' })
  @Optional() @IsInt()
  timeout?: number;

  @ApiPropertyOptional({ type: String, nullable: true, default: null, description: 'Receives the job object as a JSON POST when the job ends' })
  @Nullable() @IsString()
  callback_url?: string | null;
}

/** POST /api/jobs (multipart/form-data); files arrive separately in `images` and `audios`. */
export class CreateVideoFormDto extends VideoFieldsDto {
  static multipart = true;
}
