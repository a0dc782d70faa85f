// The S3-compatible object store (STORAGE=s3: MinIO, Ceph, R2, AWS S3) that inputs and outputs travel through when
// workers run on other hosts. Keys: jobs/<id>/inputs/<name> (a job's inputs), jobs/<id>/<id>.<ext> (its output),
// tts/tts_<id>/... (a speech request's clip and wav). A task names an object as s3://<bucket>/<key>.
import { DeleteObjectsCommand, GetObjectCommand, HeadBucketCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client, CreateBucketCommand } from '@aws-sdk/client-s3';
import { createReadStream, createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { S3Settings } from '../config/cluster-settings';

export interface OpenedObject {
  body: Readable;
  /** Bytes in `body` (the span's, for a range). */
  size?: number;
  type?: string;
  /** A range's Content-Range (`bytes a-b/total`). */
  range?: string;
}

export class S3Store {
  private readonly client: S3Client;

  constructor(readonly s: S3Settings) {
    this.client = new S3Client({
      region: s.region,
      endpoint: s.endpoint,
      forcePathStyle: s.forcePathStyle,
      credentials: s.accessKeyId && s.secretAccessKey ? { accessKeyId: s.accessKeyId, secretAccessKey: s.secretAccessKey } : undefined,
      // checksums only where the operation requires them: by default the SDK (since 3.729) uploads a stream as
      // aws-chunked with a CRC32 trailer, which S3-compatible stores that predate it (s3rver, older MinIO and Ceph)
      // store with the chunk framing inside the object ("10000\r\n" before the png's signature)
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  /** How a task names an object. */
  url(key: string): string {
    return `s3://${this.s.bucket}/${key}`;
  }

  /** The key of an s3:// URL of this bucket, or undefined for anything else (a local path). */
  keyOf(ref: string): string | undefined {
    const prefix = `s3://${this.s.bucket}/`;
    return ref.startsWith(prefix) ? ref.slice(prefix.length) : undefined;
  }

  /** Creates the bucket if it is not there (the API at start: a fresh MinIO has none). */
  async ensureBucket(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.s.bucket }));
    } catch {
      await this.client.send(new CreateBucketCommand({ Bucket: this.s.bucket }));
    }
  }

  async put(key: string, body: Buffer | string, contentType = 'application/octet-stream'): Promise<void> {
    const data = typeof body === 'string' ? createReadStream(body) : body;
    const length = typeof body === 'string' ? (await stat(body)).size : body.length;
    await this.client.send(new PutObjectCommand({ Bucket: this.s.bucket, Key: key, Body: data, ContentLength: length, ContentType: contentType }));
  }

  async download(key: string, path: string): Promise<void> {
    const res = await this.client.send(new GetObjectCommand({ Bucket: this.s.bucket, Key: key }));
    await pipeline(res.Body as Readable, createWriteStream(path));
  }

  /** The object as a stream with its size and type, or undefined if there is none. With `range` (an HTTP Range
   * header of one `bytes=a-b` span) only that span: `range` then gives its Content-Range; a span past the end is
   * `{ unsatisfiable: size }`. */
  async open(key: string): Promise<OpenedObject | undefined>;
  async open(key: string, range: string | undefined): Promise<OpenedObject | { unsatisfiable: number } | undefined>;
  async open(key: string, range?: string): Promise<OpenedObject | { unsatisfiable: number } | undefined> {
    try {
      const res = await this.client.send(new GetObjectCommand({ Bucket: this.s.bucket, Key: key, Range: range }));
      return { body: res.Body as Readable, size: res.ContentLength, type: res.ContentType, range: res.ContentRange };
    } catch (err) {
      const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
      if (e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404) return undefined;
      if (range && (e.name === 'InvalidRange' || e.$metadata?.httpStatusCode === 416)) {
        const head = await this.client.send(new HeadObjectCommand({ Bucket: this.s.bucket, Key: key })).catch(() => undefined);
        return head ? { unsatisfiable: head.ContentLength ?? 0 } : undefined;
      }
      throw err;
    }
  }

  /** Deletes every object under `prefix`. */
  async deletePrefix(prefix: string): Promise<void> {
    for (;;) {
      const list = await this.client.send(new ListObjectsV2Command({ Bucket: this.s.bucket, Prefix: prefix }));
      const keys = (list.Contents ?? []).map((o) => ({ Key: o.Key! }));
      if (keys.length === 0) return;
      await this.client.send(new DeleteObjectsCommand({ Bucket: this.s.bucket, Delete: { Objects: keys } }));
      if (!list.IsTruncated) return;
    }
  }

  destroy(): void {
    this.client.destroy();
  }
}

/** The object keys of a job's files, and of a speech request's. */
export const objectKeys = {
  jobInput: (id: string, name: string) => `jobs/${id}/inputs/${name}`,
  jobOutput: (id: string, file: string) => `jobs/${id}/${file}`,
  jobPrefix: (id: string) => `jobs/${id}/`,
  speech: (id: string, file: string) => `tts/${id}/${file}`,
  /** The object of a file served at /out/<file>: a job's output or a speech wav. */
  ofOutFile: (file: string) => (file.startsWith('tts_') ? `tts/${file.replace(/\.wav$/, '')}/${file}` : `jobs/${file.replace(/\.\w+$/, '')}/${file}`),
};
