import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsDefined, IsString } from 'class-validator';
import { Optional } from '../http/validation';
import { CLIP_SECONDS, TTS_DEFAULTS, TTS_LANGUAGES } from '../catalog';

export class TtsFieldsDto {
  @ApiProperty({ description: 'What the cloned voice says' })
  @IsDefined() @IsString()
  text!: string;

  @ApiPropertyOptional({ default: TTS_DEFAULTS.ref_text, description: 'Transcript of the reference clip; improves quality' })
  @Optional() @IsString()
  ref_text?: string;

  @ApiPropertyOptional({ enum: TTS_LANGUAGES, default: TTS_DEFAULTS.language })
  @Optional() @IsString()
  language?: string;
}

/** POST /api/v1/tts */
export class TtsDto extends TtsFieldsDto {
  @ApiProperty({ description: `Reference clip of ${CLIP_SECONDS.speech.minS} to ${CLIP_SECONDS.speech.maxS} s: an https URL or a data:audio/...;base64 string` })
  @IsDefined() @IsString()
  ref_audio!: string;
}

/** POST /api/tts (multipart/form-data); the clip arrives as the file field ref_audio. */
export class TtsFormDto extends TtsFieldsDto {
  static multipart = true;
}

export class SpeechResultDto {
  @ApiProperty({ example: '/out/tts_20261121_101530_4821.wav', description: 'Relative static path of the wav' })
  audio!: string;
}
