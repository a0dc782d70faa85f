// Errors on the OpenAI-compatible face (/v1/*) in OpenAI's shape, so the official SDKs raise their own error types
// (BadRequestError, AuthenticationError, ...) with Kiln's message: {"error": {"message", "type", "param", "code"}}.
// The status is Kiln's, except a validation failure (Kiln's 422) which OpenAI answers with 400.
import type { ValidationEntry } from './validation';

export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

const TYPES: Record<number, [type: string, code: string | null]> = {
  400: ['invalid_request_error', null],
  401: ['invalid_request_error', 'invalid_api_key'],
  404: ['invalid_request_error', 'not_found'],
  409: ['invalid_request_error', 'conflict'],
  413: ['invalid_request_error', 'request_too_large'],
  415: ['invalid_request_error', 'unsupported_media_type'],
  429: ['rate_limit_error', 'queue_full'],
};

/** The status OpenAI would answer with for Kiln's `status`. */
export function openAiStatus(status: number): number {
  return status === 422 ? 400 : status;
}

/** `detail` (a Kiln error body's: a message, or the 422's validation entries) as OpenAI's error body. */
export function openAiErrorBody(status: number, detail: unknown): OpenAiErrorBody {
  const [type, code] = TYPES[openAiStatus(status)] ?? (status >= 500 ? ['server_error', null] : ['invalid_request_error', null]);
  if (Array.isArray(detail)) {
    const entries = detail as ValidationEntry[];
    const field = (e: ValidationEntry) => e.loc.filter((l) => l !== 'body').join('.');
    return {
      error: { message: entries.map((e) => `${field(e)}: ${e.msg}`).join('; '), type, param: entries[0] ? field(entries[0]) || null : null, code: 'invalid_value' },
    };
  }
  return { error: { message: typeof detail === 'string' ? detail : JSON.stringify(detail), type, param: null, code } };
}
