import { FileFieldsInterceptor } from '@nestjs/platform-express';
import type { InputFile } from './input-probe';
import 'multer'; // the Express.Multer.File type

/** Multipart files are held in memory: at most 64 MB each (image size rules are checked per file after, with
 * a reason naming the file), at most 16 per field so the count check can say how many were sent. */
export const UPLOAD_LIMITS = { fileSize: 64 * 1024 * 1024, files: 40, fields: 64, fieldSize: 1024 * 1024 };

export const uploadFields = (...fields: string[]) =>
  FileFieldsInterceptor(fields.map((name) => ({ name, maxCount: 16 })), { limits: UPLOAD_LIMITS });

export type UploadedFiles = Record<string, Express.Multer.File[] | undefined>;

export function filesOf(files: UploadedFiles | undefined, field: string): InputFile[] {
  return (files?.[field] ?? []).map((f, i) => ({ label: `${field}[${i}] (${f.originalname})`, data: f.buffer, name: f.originalname }));
}
