// POST /v1/audio/speech and POST /v1/audio/voices as the official `openai` SDK sends them (audio.speech.create,
// audio.voices.create). language and (for a voice) ref_text are Kiln's extensions.
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsDefined, IsIn, IsNumber, IsString, Max, Min } from 'class-validator';
import { TTS_DEFAULTS, TTS_LANGUAGES } from '../catalog';
import { Optional } from '../http/validation';

export const SPEECH_FORMATS = ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const;
export type SpeechFormat = (typeof SPEECH_FORMATS)[number];

export class OpenAiSpeechDto {
  @ApiProperty({ description: 'The text to speak' })
  @IsDefined() @IsString()
  input!: string;

  @ApiPropertyOptional({ description: 'tts, or one of OpenAI\'s speech models (tts-1, tts-1-hd, gpt-4o-mini-tts), which run it', default: 'tts' })
  @Optional() @IsString()
  model?: string;

  @ApiProperty({ description: 'A saved voice (POST /v1/audio/voices): its id or name, as a string or as {"id": ...}', oneOf: [{ type: 'string' }, { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] }] })
  @IsDefined()
  voice!: string | { id: string };

  @ApiPropertyOptional({ enum: SPEECH_FORMATS, default: 'mp3', description: 'pcm: raw 16-bit little-endian mono at the model\'s 24 kHz' })
  @Optional() @IsIn(SPEECH_FORMATS)
  response_format?: SpeechFormat;

  @ApiPropertyOptional({ minimum: 0.25, maximum: 4, default: 1, description: 'Tempo, pitch kept' })
  @Optional() @IsNumber() @Min(0.25) @Max(4)
  speed?: number;

  @ApiPropertyOptional({
    enum: ['audio', 'sse'], default: 'audio',
    description: 'audio: the file; sse: server-sent speech.audio.delta events (base64 pieces of the same file) and a speech.audio.done with usage. '
      + 'The speech model writes its audio at the end, so both come once the speech is made, not as it is generated',
  })
  @Optional() @IsIn(['audio', 'sse'])
  stream_format?: 'audio' | 'sse';

  @ApiPropertyOptional({ description: 'Accepted and ignored: the Base speech model clones the voice and takes no style instructions' })
  @Optional() @IsString()
  instructions?: string;

  @ApiPropertyOptional({ enum: TTS_LANGUAGES, default: TTS_DEFAULTS.language, description: 'Kiln extension' })
  @Optional() @IsString()
  language?: string;
}

/** POST /v1/audio/voices (multipart): the clip comes as the `audio_sample` file part. */
export class OpenAiVoiceFormDto {
  static multipart = true;

  @ApiProperty() @IsDefined() @IsString() name!: string;
  @ApiProperty({ description: 'Kept as given (OpenAI: the id of a consent recording)' }) @IsDefined() @IsString() consent!: string;
  @ApiPropertyOptional({ description: 'Accepted: audio_sample is the only type Kiln saves' }) @Optional() @IsString() type?: string;
  @ApiPropertyOptional({ description: 'Kiln extension: the clip\'s transcript, used by the speech model when given' }) @Optional() @IsString() ref_text?: string;
}
