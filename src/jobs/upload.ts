import { CallHandler, ExecutionContext, mixin } from '@nestjs/common';
import { FileFieldsInterceptor } from '@nestjs/platform-express';
import type { MulterOptions } from '@nestjs/platform-express/multer/interfaces/multer-options.interface';
import type { Request } from 'express';
import type { Observable } from 'rxjs';
import { BadInputError } from '../common/errors';
import type { InputFile } from './input-probe';
import 'multer'; // the Express.Multer.File type

/** Multipart files are held in memory: at most 64 MB each (image size rules are checked per file after, with
 * a reason naming the file), at most 16 per field so the count check can say how many were sent. */
export const UPLOAD_LIMITS = { fileSize: 64 * 1024 * 1024, files: 40, fields: 64, fieldSize: 1024 * 1024 };

/** Multer drops a file part without a filename (filename="", or none with type application/octet-stream) without
 * a trace; this notes each one's field on the request, so that it is refused instead (see uploadFields). */
const NAMELESS = Symbol('nameless file parts');
type Noted = Request & { [NAMELESS]?: string[]; body?: Record<string, unknown> };
function streamHandler(req: Noted, busboy: NodeJS.WritableStream & { on(e: 'file', l: (name: string, s: unknown, info: { filename?: string }) => void): unknown }): void {
  busboy.on('file', (name, _s, info) => {
    if (!info.filename) (req[NAMELESS] ??= []).push(name);
  });
  (req as unknown as NodeJS.ReadableStream).pipe(busboy);
}

/** A part the user sent is read or refused, never ignored: a file part with an empty filename is a 400 naming the
 * field, and so is a file field that arrived as text (filename="" with a type other than application/octet-stream
 * makes the part a plain field to the parser). Bracketed names (input_reference[image_url]) make an object, never a
 * file: a field that takes either (/v1/videos' input_reference) reads it. */
function refuseNamelessParts(req: Noted, fields: string[]): void {
  const named = [...(req[NAMELESS] ?? []), ...fields.filter((f) => req.body && Object.prototype.hasOwnProperty.call(req.body, f) && typeof req.body[f] === 'string')];
  if (named.length) {
    const field = named[0]!;
    throw new BadInputError(`${field}: a part arrived without a filename, so it was not read as a file; send each file with one (Content-Disposition: form-data; name="${field}"; filename="a.png")`);
  }
}

export const uploadFields = (...fields: string[]) => {
  const Multer = FileFieldsInterceptor(fields.map((name) => ({ name, maxCount: 16 })), { limits: UPLOAD_LIMITS, streamHandler } as MulterOptions);
  class Upload extends Multer {
    override async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
      return super.intercept(context, {
        handle: () => {
          refuseNamelessParts(context.switchToHttp().getRequest<Noted>(), fields);
          return next.handle();
        },
      });
    }
  }
  return mixin(Upload);
};

export type UploadedFiles = Record<string, Express.Multer.File[] | undefined>;

export function filesOf(files: UploadedFiles | undefined, field: string): InputFile[] {
  return (files?.[field] ?? []).map((f, i) => ({ label: `${field}[${i}] (${f.originalname})`, data: f.buffer, name: f.originalname }));
}

/** The multipart forms do not wait (the spec: use GET /api/jobs/{job_id}?wait=true): a `wait` field is refused at
 * once rather than ignored, since a client that sent it expects to be answered only when the job has ended. */
export function refuseFormWait(body: object | undefined): void {
  if (body && Object.prototype.hasOwnProperty.call(body, 'wait')) {
    throw new BadInputError('wait is not supported on multipart forms (nothing was created); send the form without it, then wait with GET /api/jobs/{job_id}?wait=true, or use the JSON form (/api/v1/...), which takes wait');
  }
}

