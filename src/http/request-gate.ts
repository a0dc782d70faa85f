// What every request body must pass before a byte of it is read (README "Request bodies"):
// - a body sent to /api without the right token is refused (401) before it is read, so an unauthenticated client
//   cannot make the service parse, buffer or decode anything;
// - no Content-Encoding: request bodies are taken as sent, never inflated (a 1 MB gzip body can expand to gigabytes,
//   and no client of this API needs to compress what it posts); 415 names the header;
// - multipart bodies are multipart/form-data (the forms' encoding); multipart/mixed and the like get a 415.
// Every refusal closes the connection: the unread body is dropped with it.
import type { NextFunction, Request, Response } from 'express';
import { openAiErrorBody } from './openai-error';
import { guardedPath, presentedToken, tokenMatches } from '../auth/token';

function refuse(res: Response, status: number, detail: string, path: string): void {
  res.setHeader('Connection', 'close');
  res.status(status).json(path.startsWith('/v1/') ? openAiErrorBody(status, detail) : { detail });
}

const hasBody = (req: Request) => req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;

export function requestGate(token: string) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (hasBody(req) && guardedPath(req.path)) {
      const given = presentedToken(req.headers, req.query as Record<string, unknown>);
      if (given === undefined || !tokenMatches(given, token)) return refuse(res, 401, 'bad token', req.path);
    }
    const encoding = req.headers['content-encoding']?.trim().toLowerCase();
    if (encoding && encoding !== 'identity') {
      return refuse(res, 415, `request bodies are not accepted compressed (Content-Encoding: ${encoding}); send the body uncompressed`, req.path);
    }
    const type = req.headers['content-type']?.split(';')[0].trim().toLowerCase() ?? '';
    if (type.startsWith('multipart/') && type !== 'multipart/form-data') {
      return refuse(res, 415, `Content-Type ${type} is not accepted; send forms as multipart/form-data`, req.path);
    }
    next();
  };
}
