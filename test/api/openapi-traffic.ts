// The real traffic of a test server checked against its own OpenAPI document (/openapi.json), as a validating proxy
// would: every response's status must be documented for its operation, its media type must be one the document
// names, and a JSON body must match the documented schema. The schema check is openapi-backend's validator (Ajv
// over the document's response schemas, OpenAPI 3.0 `nullable` included); status and media type are checked here
// because it only looks at JSON bodies.
//
// startApp({ traffic: [] }) records every exchange of its server (at the Express layer: whatever client sent it);
// openapiProblems(doc, traffic) lists each disagreement.
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { NextFunction, Request, Response } from 'express';
import OpenAPIBackend from 'openapi-backend';

export interface Exchange {
  method: string;
  /** The path as requested (no query). */
  path: string;
  status: number;
  /** Content-Type sent, '' for none. */
  type: string;
  /** The body (JSON and text only; up to BODY_LIMIT bytes). */
  body?: Buffer;
  truncated?: boolean;
}

const BODY_LIMIT = 4 << 20;
/** Served beside the API, not part of it: the document itself, its viewer, the page's assets. */
const OUTSIDE = /^\/(openapi\.(json|yaml)|docs(\/|$|-)|assets\/)/;

/** Records every exchange of `app`'s server into `into` (install before the app's own middleware). */
export function recordTraffic(app: NestExpressApplication, into: Exchange[]): void {
  app.use((req: Request, res: Response, next: NextFunction) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;
    const textual = () => /json|text\/(plain|html)/.test(String(res.getHeader('content-type') ?? ''));
    const keep = (c: unknown, enc?: unknown) => {
      if (c === undefined || c === null || typeof c === 'function' || !textual()) return;
      const b = Buffer.isBuffer(c) ? c : typeof c === 'string' ? Buffer.from(c, typeof enc === 'string' ? (enc as BufferEncoding) : 'utf8') : Buffer.from(c as Uint8Array);
      if (size + b.length > BODY_LIMIT) truncated = true;
      else (chunks.push(b), (size += b.length));
    };
    const write = res.write.bind(res) as (...a: unknown[]) => boolean;
    const end = res.end.bind(res) as (...a: unknown[]) => Response;
    (res as any).write = (c: unknown, ...rest: unknown[]) => (keep(c, rest[0]), write(c, ...rest));
    (res as any).end = (c?: unknown, ...rest: unknown[]) => (keep(c, rest[0]), end(c, ...rest));
    res.on('close', () => into.push({ method: req.method, path: req.originalUrl.split('?')[0], status: res.statusCode, type: String(res.getHeader('content-type') ?? ''), body: Buffer.concat(chunks), truncated }));
    next();
  });
}

/** Each way the recorded traffic disagrees with the document, one line each (empty: none). */
export async function openapiProblems(doc: object, traffic: readonly Exchange[]): Promise<string[]> {
  // quick: each operation's validators compiled when its first response is checked (precompiling all of them took
  // seconds, paid by every test server at close); the operations listed once, not again for each exchange
  const api = new OpenAPIBackend({ definition: structuredClone(doc) as any, validate: true, quick: true });
  await api.init();
  const ops = api.router.getOperations();
  api.router.getOperations = () => ops;
  const problems = new Set<string>();
  const seen = new Set<string>();
  for (const x of traffic) {
    if (x.method === 'OPTIONS' || OUTSIDE.test(x.path)) continue;
    // an exchange like one already checked (a poll answered the same) is checked once
    const same = `${x.method} ${x.path} ${x.status} ${x.type} ${x.truncated ? 'cut ' : ''}${x.body?.toString('latin1') ?? ''}`;
    if (seen.has(same)) continue;
    seen.add(same);
    const method = x.method === 'HEAD' ? 'get' : x.method.toLowerCase();
    const where = `${x.method} ${x.path} ${x.status}`;
    const op = api.router.matchOperation({ method, path: decodeURI(x.path), headers: {} } as any);
    if (!op) {
      // a route the API does not have, answered "not found" (a fuzzer's guess): as the document says, by leaving it out
      if (x.status !== 404) problems.add(`${where}: no such operation in the document`);
      continue;
    }
    const name = `${x.method} ${op.path} ${x.status}`;
    const documented = (op.responses as Record<string, any> | undefined)?.[String(x.status)] ?? (op.responses as any)?.default;
    if (!documented) {
      problems.add(`${name}: status not documented (documented: ${Object.keys(op.responses ?? {}).join(', ')})`);
      continue;
    }
    const media = x.type.split(';')[0].trim().toLowerCase();
    const content: Record<string, unknown> = documented.content ?? {};
    const sentBody = x.method !== 'HEAD' && x.status !== 204 && x.status !== 304 && media !== '';
    if (sentBody && !Object.keys(content).some((k) => k.toLowerCase() === media || (k.endsWith('/*') && media.startsWith(k.slice(0, -1))) || k === '*/*')) {
      problems.add(`${name}: sent ${media}, documented ${Object.keys(content).join(', ') || 'no body'}`);
      continue;
    }
    if (media === 'application/json' && x.body && x.body.length > 0 && !x.truncated) {
      let body: unknown;
      try {
        body = JSON.parse(x.body.toString('utf8'));
      } catch {
        problems.add(`${name}: sent application/json that does not parse`);
        continue;
      }
      const r = api.validator.validateResponse(body, op, x.status);
      for (const e of r.errors ?? []) problems.add(`${name}: ${e.instancePath || '(body)'} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`);
    }
  }
  return [...problems].sort();
}
