// The OpenAPI schemas of the /v1/ face's answers (OpenAI's objects, as far as Kiln fills them).
import { applyDecorators } from '@nestjs/common';
import { ApiBadRequestResponse, ApiExtraModels, ApiNotFoundResponse, ApiProperty, ApiPropertyOptional, ApiSecurity, ApiServiceUnavailableResponse, ApiTooManyRequestsResponse, ApiUnauthorizedResponse } from '@nestjs/swagger';

export class OpenAiErrorDetailDto {
  @ApiProperty() message!: string;
  @ApiProperty({ example: 'invalid_request_error' }) type!: string;
  @ApiProperty({ type: String, nullable: true }) param!: string | null;
  @ApiProperty({ type: String, nullable: true }) code!: string | null;
}

export class OpenAiErrorDto {
  @ApiProperty({ type: OpenAiErrorDetailDto }) error!: OpenAiErrorDetailDto;
}

export class OpenAiModelDto {
  @ApiProperty({ example: 'imgmain' }) id!: string;
  @ApiProperty({ enum: ['model'] }) object!: string;
  @ApiProperty({ type: 'integer' }) created!: number;
  @ApiProperty({ example: 'kiln' }) owned_by!: string;
  @ApiProperty({ enum: ['image', 'video', 'tts'], description: 'Kiln extension: what the model makes' }) kind!: string;
}

export class OpenAiModelListDto {
  @ApiProperty({ enum: ['list'] }) object!: string;
  @ApiProperty({ type: [OpenAiModelDto] }) data!: OpenAiModelDto[];
}

export class OpenAiImageDto {
  @ApiPropertyOptional({ description: 'response_format url: the finished png' }) url?: string;
  @ApiPropertyOptional({ description: 'response_format b64_json' }) b64_json?: string;
}

export class OpenAiImagesResponseDto {
  @ApiProperty({ type: 'integer' }) created!: number;
  @ApiProperty({ type: [OpenAiImageDto] }) data!: OpenAiImageDto[];
  @ApiProperty({ enum: ['png', 'jpeg', 'webp'] }) output_format!: string;
  @ApiProperty({ example: '1024x1024' }) size!: string;
}

/** The /v1/ face's security and refusals, in OpenAI's error shape. */
export const ApiOpenAi = () =>
  applyDecorators(
    ApiExtraModels(OpenAiErrorDto),
    ApiSecurity('bearer'),
    ApiUnauthorizedResponse({ description: 'Token missing or wrong (code invalid_api_key)', type: OpenAiErrorDto }),
  );

/** A /v1/ create's refusals. */
export const ApiOpenAiCreateErrors = () =>
  applyDecorators(
    ApiBadRequestResponse({ description: 'A value a user can fix (OpenAI answers validation errors with 400 too)', type: OpenAiErrorDto }),
    ApiTooManyRequestsResponse({ description: 'The queue is full', type: OpenAiErrorDto }),
    ApiServiceUnavailableResponse({ description: 'No worker serves the profile', type: OpenAiErrorDto }),
  );

export const ApiOpenAiNotFound = (description = 'No such model') => ApiNotFoundResponse({ description, type: OpenAiErrorDto });

export class OpenAiVoiceDto {
  @ApiProperty({ example: 'voice_4f2a...' }) id!: string;
  @ApiProperty({ enum: ['audio.voice'] }) object!: string;
  @ApiProperty({ type: 'integer' }) created_at!: number;
  @ApiProperty() name!: string;
  @ApiProperty({ enum: ['audio_sample'] }) type!: string;
}

export class OpenAiVoiceListDto {
  @ApiProperty({ enum: ['list'] }) object!: string;
  @ApiProperty({ type: [OpenAiVoiceDto] }) data!: OpenAiVoiceDto[];
}

export class OpenAiVoiceDeletedDto {
  @ApiProperty() id!: string;
  @ApiProperty() deleted!: boolean;
  @ApiProperty({ enum: ['audio.voice.deleted'] }) object!: string;
}

export class OpenAiVideoDto {
  @ApiProperty({ description: 'The Kiln job id' }) id!: string;
  @ApiProperty({ enum: ['video'] }) object!: string;
  @ApiProperty({ type: 'integer' }) created_at!: number;
  @ApiProperty({ type: 'integer', nullable: true }) completed_at!: number | null;
  @ApiProperty({ type: 'integer', nullable: true, description: 'When OUTPUT_TTL_S deletes it; null: kept' }) expires_at!: number | null;
  @ApiProperty({ type: 'object', nullable: true, description: 'Why it failed (status failed)', properties: { code: { type: 'string', enum: ['generation_failed', 'cancelled'] }, message: { type: 'string' } }, required: ['code', 'message'] })
  error!: { code: string; message: string } | null;
  @ApiProperty({ description: 'The Kiln profile that makes it' }) model!: string;
  @ApiProperty({ type: 'integer', minimum: 0, maximum: 100 }) progress!: number;
  @ApiProperty({ type: String, nullable: true }) prompt!: string | null;
  @ApiProperty({ type: String, nullable: true }) remixed_from_video_id!: string | null;
  @ApiProperty({ example: '5' }) seconds!: string;
  @ApiProperty({ example: '864x480', description: 'The size made' }) size!: string;
  @ApiProperty({ enum: ['queued', 'in_progress', 'completed', 'failed'] }) status!: string;
}

export class OpenAiVideoListDto {
  @ApiProperty({ enum: ['list'] }) object!: string;
  @ApiProperty({ type: [OpenAiVideoDto] }) data!: OpenAiVideoDto[];
  @ApiProperty({ type: String, nullable: true }) first_id!: string | null;
  @ApiProperty({ type: String, nullable: true }) last_id!: string | null;
  @ApiProperty() has_more!: boolean;
}

export class OpenAiVideoDeletedDto {
  @ApiProperty() id!: string;
  @ApiProperty({ description: 'false: the video was running and did not stop within 10 s' }) deleted!: boolean;
  @ApiProperty({ enum: ['video.deleted'] }) object!: string;
}

/** A read's refusal of a query value (an unknown cursor, a variant or limit out of range). */
export const ApiOpenAiBadQuery = () => ApiBadRequestResponse({ description: 'A query value a user can fix', type: OpenAiErrorDto });
