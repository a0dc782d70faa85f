import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

// The error bodies of the spec, as the exception filter (http-exception.filter.ts) writes them: their OpenAPI schemas.

export class ErrorDetailDto {
  @ApiProperty({ example: 'seconds must be from 1 to 15 (got 20)' }) detail!: string;
}

class ValidationEntryDto {
  @ApiProperty({ type: 'array', items: { oneOf: [{ type: 'string' }, { type: 'integer' }] }, example: ['body', 'seconds'] }) loc!: (string | number)[];
  @ApiProperty({ example: 'Input should be a valid number, unable to parse string as a number' }) msg!: string;
  @ApiProperty({ example: 'float_parsing' }) type!: string;
  // any JSON value (the spec): OpenAPI 3.0 has no "any" a generator keeps, so each JSON type (null for a missing field)
  @ApiPropertyOptional({ anyOf: [{ type: 'string', nullable: true }, { type: 'number' }, { type: 'boolean' }, { type: 'object', additionalProperties: true }, { type: 'array', items: {} }], description: 'The value refused, as sent (null for a missing field)', example: 'five' }) input?: unknown;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true }) ctx?: Record<string, unknown>;
}

export class ValidationErrorDto {
  @ApiPropertyOptional({ type: [ValidationEntryDto] }) detail?: ValidationEntryDto[];
}
