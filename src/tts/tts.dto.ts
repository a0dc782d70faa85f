import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, IsDefined, IsString, ValidateIf } from 'class-validator';
import { Optional } from '../http/validation';
import { CLIP_SECONDS, TTS_DEFAULTS, TTS_LANGUAGES } from '../catalog';
import { DRY_RUN_DESCRIPTION } from '../jobs/plan.schema';

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

  @ApiPropertyOptional({
    description: 'Kiln extension: a saved voice\'s id or name (GET /v1/audio/voices lists them, POST /v1/audio/voices saves one), in place of '
      + 'ref_audio: its clip is the reference, and its ref_text the transcript when ref_text is not given. Not with ref_audio (400); empty: none',
  })
  @Optional() @IsString()
  voice?: string;
}

/** POST /api/v1/tts */
export class TtsDto extends TtsFieldsDto {
  @ApiPropertyOptional({ description: `Reference clip of ${CLIP_SECONDS.speech.minS} to ${CLIP_SECONDS.speech.maxS} s: an https URL or a data:audio/...;base64 string. Required unless voice names a saved voice` })
  // required (422) only when no voice stands in for it; a value is type-checked either way
  @ValidateIf((o: { voice?: unknown }, v: unknown) => v !== undefined || o.voice === undefined) @IsDefined() @IsString()
  ref_audio?: string;

  @ApiPropertyOptional({ default: false, description: DRY_RUN_DESCRIPTION.replace('(what npm', '(speech: the reference clip counts by its length; what npm') })
  @Optional() @IsBoolean()
  dry_run?: boolean;
}

/** POST /api/tts (multipart/form-data); the clip arrives as the file field ref_audio (or `voice` names a saved one). */
export class TtsFormDto extends TtsFieldsDto {
  static multipart = true;
}

export class SpeechResultDto {
  @ApiProperty({ example: '/out/tts_20261121_101530_4821.wav', description: 'Relative static path of the wav' })
  audio!: string;
}
