import { applyDecorators } from '@nestjs/common';
import { ApiBadRequestResponse, ApiConflictResponse, ApiHeader, ApiNotFoundResponse, ApiOkResponse, ApiPayloadTooLargeResponse, ApiSecurity, ApiTooManyRequestsResponse, ApiUnauthorizedResponse, ApiUnprocessableEntityResponse, ApiUnsupportedMediaTypeResponse } from '@nestjs/swagger';
import { ErrorDetailDto, ValidationErrorDto } from './error-bodies';

/** The auth schemes and error bodies every /api route shares. */
export const ApiCommon = () =>
  applyDecorators(
    // Separate requirement objects: any one of the three suffices.
    ApiSecurity('bearer'),
    ApiSecurity('x-token'),
    ApiSecurity('token-query'),
    ApiUnauthorizedResponse({ description: 'Token missing or wrong: {"detail":"bad token"}', type: ErrorDetailDto }),
  );

/** A create's refusals; `job` (not speech, which is answered at once): the queue's 429 too. */
export const ApiCreateErrors = (job = true) =>
  applyDecorators(
    ApiBadRequestResponse({ description: 'A value a user can fix (the reason is in detail)', type: ErrorDetailDto }),
    ApiUnprocessableEntityResponse({ description: 'A field of the wrong type', type: ValidationErrorDto }),
    ApiPayloadTooLargeResponse({ description: 'The body, or a file in it, is larger than the limit', type: ErrorDetailDto }),
    ApiUnsupportedMediaTypeResponse({ description: 'A compressed body (Content-Encoding), or a multipart type other than multipart/form-data', type: ErrorDetailDto }),
    ...(job ? [ApiTooManyRequestsResponse({ description: 'The queue is full (MAX_QUEUE jobs waiting)', type: ErrorDetailDto })] : []),
  );

/** The create endpoints' Idempotency-Key header and its 409. */
export const ApiIdempotency = () =>
  applyDecorators(
    ApiHeader({ name: 'Idempotency-Key', required: false, description: 'Extension: the same key with the same request returns the same job (200, same id) for 24 h; with a different request it is a 409' }),
    ApiConflictResponse({ description: 'The Idempotency-Key was used for a different request, or its first request is still being processed', type: ErrorDetailDto }),
  );

/** GET routes with query parameters: 400 for values out of range, 422 for wrong types. */
export const ApiQueryErrors = () =>
  applyDecorators(
    ApiBadRequestResponse({ description: 'A query value out of range (the reason is in detail)', type: ErrorDetailDto }),
    ApiUnprocessableEntityResponse({ description: 'A query parameter of the wrong type', type: ValidationErrorDto }),
  );

/** A file download: the file on 200 (with its own media type), JSON bodies for the errors. */
export const ApiDownload = (mime: string, what: string) =>
  applyDecorators(
    ApiOkResponse({ description: `The ${what}, as a named download`, content: { [mime]: { schema: { type: 'string', format: 'binary' } } } }),
    ApiNotFoundResponse({ description: `Unknown job, or the ${what} is not finished yet`, type: ErrorDetailDto }),
  );
