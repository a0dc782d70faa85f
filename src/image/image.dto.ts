import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsArray, IsBoolean, IsDefined, IsInt, IsNumber, IsString } from 'class-validator';
import { Nullable, Optional } from '../http/validation';
import { DEFAULT_PRIORITY, IMAGE_ASPECTS, IMAGE_PROFILES, IMAGE_RES } from '../catalog';

export class ImageFieldsDto {
  @ApiProperty({ description: 'What to draw, or the edit instruction when images are given. Images are Picture 1, Picture 2, ... in input order.' })
  @IsDefined() @IsString()
  prompt!: string;

  @ApiPropertyOptional({ default: '', description: 'Used only when cfg is greater than 1' })
  @Optional() @IsString()
  negative_prompt?: string;

  @ApiPropertyOptional({ enum: IMAGE_PROFILES.map((p) => p.profile), default: 'imgmain' })
  @Optional() @IsString()
  profile?: string;

  @ApiPropertyOptional({ enum: IMAGE_ASPECTS, default: '1:1' })
  @Optional() @IsString()
  aspect?: string;

  @ApiPropertyOptional({ enum: IMAGE_RES, default: '1K' })
  @Optional() @IsString()
  res?: string;

  @ApiPropertyOptional({ default: '', description: 'Explicit <width>x<height>, multiples of 32 from 256 to 4096; overrides aspect and res' })
  @Optional() @IsString()
  size?: string;

  @ApiPropertyOptional({ default: false, description: 'Editing only: output size follows the first image, scaled to the res tier' })
  @Optional() @IsBoolean()
  size_from_ref?: boolean;

  @ApiPropertyOptional({ default: -1 })
  @Optional() @IsInt()
  seed?: number;

  @ApiPropertyOptional({ default: 0, description: '0 means the profile default (25 for imgmain)' })
  @Optional() @IsInt()
  steps?: number;

  @ApiPropertyOptional({ default: 0, description: '0 means the profile default (1.0)' })
  @Optional() @IsNumber({ allowNaN: false, allowInfinity: false })
  cfg?: number;

  @ApiPropertyOptional({ type: 'integer', default: DEFAULT_PRIORITY, minimum: 0, maximum: 9, description: 'Higher runs first; first come, first served within a priority (an extension of the spec)' })
  @Optional() @IsInt()
  priority?: number;
}

/** POST /api/v1/image */
export class GenerateImageDto extends ImageFieldsDto {
  @ApiPropertyOptional({ type: [String], description: 'imgmain profiles: 0 to 10 (editing); imgart_turbo profiles: 0 to 3 style references' })
  @Optional() @IsArray() @IsString({ each: true })
  images?: string[];

  @ApiPropertyOptional({ default: false })
  @Optional() @IsBoolean()
  wait?: boolean;

  @ApiPropertyOptional({ default: 300, maximum: 1800 })
  @Optional() @IsInt()
  timeout?: number;

  @ApiPropertyOptional({ type: String, nullable: true, default: null })
  @Nullable() @IsString()
  callback_url?: string | null;
}

/** POST /api/images (multipart/form-data) */
export class CreateImageFormDto extends ImageFieldsDto {
  static multipart = true;
}
