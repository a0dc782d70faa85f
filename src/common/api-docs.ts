import { applyDecorators } from '@nestjs/common';
import { ApiBadRequestResponse, ApiBearerAuth, ApiSecurity, ApiUnauthorizedResponse, ApiUnprocessableEntityResponse } from '@nestjs/swagger';
import { ErrorDetailDto, ValidationErrorDto } from '../jobs/job.schema';

/** The auth schemes and error bodies every /api route shares. */
export const ApiCommon = () =>
  applyDecorators(
    ApiBearerAuth('bearer'),
    ApiSecurity('x-token'),
    ApiSecurity('token-query'),
    ApiUnauthorizedResponse({ description: 'Token missing or wrong: {"detail":"bad token"}', type: ErrorDetailDto }),
  );

export const ApiCreateErrors = () =>
  applyDecorators(
    ApiBadRequestResponse({ description: 'A value a user can fix (the reason is in detail)', type: ErrorDetailDto }),
    ApiUnprocessableEntityResponse({ description: 'A field of the wrong type', type: ValidationErrorDto }),
  );
