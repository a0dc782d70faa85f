// Idempotency-Key on the create endpoints (README "Idempotent creates"): the same key with the same request gives the
// same job (200, the same id) for 24 hours; the same key with another request is a 409. The fingerprint is the
// method, path and body (JSON canonicalised with sorted keys; multipart fields and each file's name and SHA-256).
import { CallHandler, ConflictException, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import { createHash } from 'node:crypto';
import type { Request } from 'express';
import { from, Observable, tap } from 'rxjs';
import { BadInputError } from '../common/errors';
import { JobStore } from './job.store';
import { JobsService } from './jobs.service';

const TTL_S = 24 * 3600;
const KEY_RE = /^[\x21-\x7e]{1,255}$/;

/** JSON with object keys sorted at every level: the same body, whatever order its fields came in. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

function fingerprint(req: Request): string {
  const h = createHash('sha256').update(`${req.method} ${req.path}\n`).update(canonical(req.body ?? {}));
  const files = (req.files ?? {}) as Record<string, Express.Multer.File[]>;
  for (const field of Object.keys(files).sort()) {
    for (const f of files[field]) h.update(`\n${field}:${f.originalname}:${createHash('sha256').update(f.buffer).digest('hex')}`);
  }
  return h.digest('hex');
}

@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  constructor(private readonly store: JobStore, private readonly jobs: JobsService) {}

  intercept(ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    const req = ctx.switchToHttp().getRequest<Request>();
    const key = req.headers['idempotency-key'];
    // a dry run creates nothing to be the same again: the key is not claimed (README "Dry runs")
    if (key === undefined || (req.body as { dry_run?: unknown } | undefined)?.dry_run === true) return next.handle();
    if (typeof key !== 'string' || !KEY_RE.test(key)) throw new BadInputError('Idempotency-Key must be 1 to 255 visible ASCII characters (a UUID is a good choice)');
    const keys = this.store.idempotency;
    const now = Date.now() / 1000;
    keys.expire(now - TTL_S);
    const fp = fingerprint(req);
    if (!keys.claim(key, fp, now)) {
      const seen = keys.get(key)!;
      const when = new Date(seen.created * 1000).toISOString();
      if (seen.fingerprint !== fp) throw new ConflictException({ detail: `Idempotency-Key ${JSON.stringify(key)} was used at ${when} for a different request; send this one with a new key` });
      if (seen.job_id === null) throw new ConflictException({ detail: `a request with Idempotency-Key ${JSON.stringify(key)} is still being processed; send it again in a moment` });
      // the same request again: the job it made, as it is now
      return from(Promise.resolve(this.jobs.get(seen.job_id)));
    }
    return next.handle().pipe(
      tap({
        next: (job) => keys.done(key, (job as { id: string }).id),
        error: () => keys.release(key),
      }),
    );
  }
}
