import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus } from '@nestjs/common';
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import { BadInputError, CancelledError, NotFoundError, QueueFullError, UnavailableError } from '../common/errors';
import { redactUrl } from '../common/logger';
import { openAiErrorBody, openAiStatus } from './openai-error';
import { ValidationFailed } from './validation';

/** Maps every error to the spec's bodies: `{"detail": ...}` (OpenAI's `{"error": ...}` under /v1/). Bad input is never a 500. */
@Catch()
export class HttpExceptionFilter implements ExceptionFilter {
  constructor(private readonly log: Logger) {}

  catch(err: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    const req = host.switchToHttp().getRequest<Request>();
    // the client went away while it waited (a dry run's plan is stopped with it): no one to answer, nothing went wrong
    if (err instanceof CancelledError && (res.destroyed || req.socket?.destroyed)) return;
    const [status, body] = this.map(err);
    if (status >= 500) this.log.error({ err, method: req.method, url: redactUrl(req.originalUrl ?? req.url) }, 'request failed');
    if (res.headersSent) {
      res.end();
      return;
    }
    // the OpenAI-compatible face answers in OpenAI's error shape (src/openai/)
    if (req.path.startsWith('/v1/')) res.status(openAiStatus(status)).json(openAiErrorBody(status, (body as { detail?: unknown }).detail));
    else res.status(status).json(body);
  }

  private map(err: unknown): [number, unknown] {
    if (err instanceof ValidationFailed) return [422, { detail: err.entries }];
    if (err instanceof BadInputError) return [400, { detail: err.message }];
    if (err instanceof NotFoundError) return [404, { detail: err.message }];
    if (err instanceof QueueFullError) return [429, { detail: err.message }];
    if (err instanceof UnavailableError) return [503, { detail: err.message }];
    if (err instanceof HttpException) {
      const status = err.getStatus();
      const r = err.getResponse() as { detail?: unknown; message?: unknown } | string;
      if (typeof r === 'object' && r && 'detail' in r) return [status, r];
      let message = typeof r === 'string' ? r : Array.isArray(r?.message) ? r.message.join('; ') : String(r?.message ?? err.message);
      // Multer (multipart) limits: say which limit in words a user can act on.
      if (status === HttpStatus.PAYLOAD_TOO_LARGE && /file too large/i.test(message)) {
        return [400, { detail: 'an uploaded file is larger than the 64 MB upload limit (images may be at most 25 MB)' }];
      }
      const field = /^Unexpected (?:file )?field - (.*)$/i.exec(message);
      if (field) message = `unexpected file field "${field[1]}": this form takes files only in the fields the API names (images, audios; ref_audio for speech)`;
      if (/^Too many files$/i.test(message)) message = 'too many files in one form (at most 40)';
      if (status === 404 && /^Cannot (GET|POST|PUT|DELETE|PATCH)/.test(message)) message = `no such endpoint: ${message.replace(/^Cannot /, '')}`;
      return [status, { detail: message }];
    }
    return [500, { detail: 'internal error; the service log has the details' }];
  }
}
