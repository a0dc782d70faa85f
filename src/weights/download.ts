// One file from the Hugging Face hub: probe (HEAD, redirects not followed, to read the hub's size, sha256 and
// commit headers), then a streamed GET into <dest>.part, resumed with Range after a cut connection, checked for
// size and sha256, fsynced and renamed into place. Transient failures (network, 5xx, 429, a stall) are retried
// with back-off; the .part survives every failure except a wrong size or checksum, so a rerun resumes.
import axios, { type AxiosResponse } from 'axios';
import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, rename, rm, stat, statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { IncomingMessage } from 'node:http';
import { fmtBytes } from './progress';

export type DownloadErrorKind = 'not-found' | 'auth' | 'http' | 'network' | 'size' | 'checksum' | 'conflict' | 'no-space' | 'interrupted';

export class DownloadError extends Error {
  override readonly name = 'DownloadError';
  constructor(
    readonly kind: DownloadErrorKind,
    message: string,
    /** Worth another attempt (network trouble, 5xx, 429, a connection closed early). */
    readonly transient = false,
  ) {
    super(message);
  }
}

/** `${endpoint}/${repo}/resolve/${revision}/${path}`, each part escaped as the hub expects. */
export function resolveUrl(endpoint: string, repo: string, revision: string, path: string): string {
  const e = endpoint.replace(/\/+$/, '');
  return `${e}/${repo}/resolve/${encodeURIComponent(revision)}/${path.split('/').map(encodeURIComponent).join('/')}`;
}

export interface Probe {
  /** Where the bytes are (the CDN for LFS files, the resolve URL itself for small files). */
  location: string;
  size?: number;
  /** sha256 from X-Linked-Etag / ETag when the hub sends one (LFS files); small files' ETag is a git sha1. */
  sha256?: string;
  /** X-Repo-Commit: the commit the revision resolved to. */
  commit?: string;
}

export interface DownloadOptions {
  /** The hub's resolve URL (resolveUrl). */
  url: string;
  dest: string;
  /** Names the file in messages, e.g. "Qwen/Qwen3-TTS-12Hz-1.7B-Base@main: model.safetensors". */
  label: string;
  /** Manifest values; the hub's headers fill what these lack, and must agree where both exist. */
  size?: number;
  sha256?: string;
  /** HF_TOKEN: sent as a bearer token to the hub's origin only, never to the CDN it redirects to. */
  token?: string;
  /** Retries after the first attempt for transient failures. Default 5. */
  retries?: number;
  /** First back-off; doubles per retry. Default 2000 ms. */
  retryDelayMs?: number;
  /** A transfer with no bytes for this long is cut and retried. Default 60 s. */
  stallMs?: number;
  signal?: AbortSignal;
  onProbe?(p: Probe): void;
  onProgress?(done: number, total: number | undefined): void;
  /** Retries and resumes, one line each. */
  onEvent?(line: string): void;
}

export interface DownloadResult {
  size: number;
  sha256: string;
  /** Which expected sha256 the file was checked against; undefined when none was known. */
  sha256From?: 'manifest' | 'hub';
  commit?: string;
  /** Bytes kept from an earlier .part. */
  resumedFrom: number;
}

const HEX64 = /^[0-9a-f]{64}$/;

function etagSha256(v: unknown): string | undefined {
  if (typeof v !== 'string') return undefined;
  const s = v.replace(/^W\//, '').replace(/"/g, '').trim().toLowerCase();
  return HEX64.test(s) ? s : undefined;
}

function num(v: unknown): number | undefined {
  const n = typeof v === 'string' ? Number(v) : typeof v === 'number' ? v : NaN;
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

function statusError(label: string, url: string, res: AxiosResponse): DownloadError {
  const code = String(res.headers['x-error-code'] ?? '');
  const hubMsg = res.headers['x-error-message'] ? ` (hub: ${String(res.headers['x-error-message'])})` : '';
  const s = res.status;
  if (s === 404) {
    const what = code === 'RevisionNotFound' ? 'the revision does not exist in the repo'
      : code === 'RepoNotFound' ? 'the repo does not exist, or is private (set HF_TOKEN)'
      : 'the file is not in the repo at this revision';
    return new DownloadError('not-found', `${label}: 404 Not Found: ${what}${hubMsg} [${url}]`);
  }
  if (s === 401 || s === 403) {
    return new DownloadError('auth', `${label}: ${s} ${s === 401 ? 'Unauthorized' : 'Forbidden'}: the repo is gated or private; accept its terms on the hub and set HF_TOKEN${hubMsg} [${url}]`);
  }
  return new DownloadError('http', `${label}: HTTP ${s}${hubMsg} [${url}]`, s >= 500 || s === 429 || s === 408);
}

function authHeaders(url: string, hubOrigin: string, token: string | undefined): Record<string, string> {
  return token && new URL(url).origin === hubOrigin ? { Authorization: `Bearer ${token}` } : {};
}

/** HEAD the resolve URL without following the CDN redirect (its headers carry X-Linked-Size/-Etag); relative or
 * same-origin redirects (renamed repos) are followed. */
export async function probe(url: string, label: string, opts: { token?: string; signal?: AbortSignal; timeoutMs?: number } = {}): Promise<Probe> {
  const hubOrigin = new URL(url).origin;
  let cur = url;
  const out: Probe = { location: url };
  for (let hop = 0; hop < 6; hop++) {
    const res = await axios.head(cur, {
      maxRedirects: 0,
      validateStatus: () => true,
      headers: { 'Accept-Encoding': 'identity', ...authHeaders(cur, hubOrigin, opts.token) },
      timeout: opts.timeoutMs ?? 30_000,
      signal: opts.signal,
    });
    const h = res.headers;
    out.commit = (h['x-repo-commit'] as string | undefined) ?? out.commit;
    out.sha256 = etagSha256(h['x-linked-etag']) ?? etagSha256(h['etag']) ?? out.sha256;
    out.size = num(h['x-linked-size']) ?? out.size;
    if (res.status >= 300 && res.status < 400 && h['location']) {
      const next = new URL(String(h['location']), cur).toString();
      if (new URL(next).origin === hubOrigin && !h['x-linked-size']) {
        cur = next;
        continue;
      }
      out.location = next;
      return out;
    }
    if (res.status !== 200) throw statusError(label, cur, res);
    out.location = cur;
    out.size ??= num(h['content-length']);
    return out;
  }
  throw new DownloadError('http', `${label}: too many redirects from ${url}`);
}

async function hashFile(path: string, hash: Hash, signal?: AbortSignal): Promise<void> {
  for await (const chunk of createReadStream(path, { signal })) hash.update(chunk as Buffer);
}

async function sizeOf(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch {
    return 0;
  }
}

/** Fails early, before a transfer that cannot fit. */
export async function checkFreeSpace(dir: string, needed: number, label: string): Promise<void> {
  const s = await statfs(dir);
  const free = s.bavail * s.bsize;
  if (free < needed) throw new DownloadError('no-space', `${label}: not enough disk space in ${dir}: needs ${fmtBytes(needed)} more, ${fmtBytes(free)} free`);
}

/** Downloads one file as described at the top of this file. */
export async function downloadFile(o: DownloadOptions): Promise<DownloadResult> {
  const retries = o.retries ?? 5;
  const delay0 = o.retryDelayMs ?? 2000;
  const part = `${o.dest}.part`;
  await mkdir(dirname(o.dest), { recursive: true });
  for (let attempt = 0; ; attempt++) {
    try {
      return await attemptOnce(o, part);
    } catch (e) {
      if (o.signal?.aborted) {
        const kept = await sizeOf(part);
        throw new DownloadError('interrupted', `${o.label}: interrupted; ${kept > 0 ? `${fmtBytes(kept)} kept in ${part}, run the same command again to resume` : 'nothing of this file downloaded yet'}`);
      }
      if ((e as NodeJS.ErrnoException).code === 'ENOSPC') {
        throw new DownloadError('no-space', `${o.label}: no space left on device writing ${part} (${fmtBytes(await sizeOf(part))} written, kept for resuming)`);
      }
      const err = e instanceof DownloadError ? e : new DownloadError('network', `${o.label}: ${(e as Error).message || String(e)}`, true);
      if (!err.transient) throw err;
      if (attempt >= retries) {
        throw new DownloadError(err.kind, `${err.message} (gave up after ${attempt + 1} attempts; ${fmtBytes(await sizeOf(part))} kept in ${part}, run again to resume)`);
      }
      const wait = delay0 * 2 ** attempt;
      o.onEvent?.(`${err.message}; retry ${attempt + 1} of ${retries} in ${(wait / 1000).toFixed(wait < 1000 ? 1 : 0)} s`);
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, wait);
        o.signal?.addEventListener('abort', () => {
          clearTimeout(t);
          reject(new DownloadError('interrupted', `${o.label}: interrupted while waiting to retry; run again to resume`));
        }, { once: true });
      });
    }
  }
}

async function attemptOnce(o: DownloadOptions, part: string): Promise<DownloadResult> {
  const p = await probe(o.url, o.label, { token: o.token, signal: o.signal, timeoutMs: o.stallMs });
  o.onProbe?.(p);
  if (o.size !== undefined && p.size !== undefined && o.size !== p.size) {
    throw new DownloadError('conflict', `${o.label}: the manifest says ${o.size} bytes, the hub says ${p.size}: the manifest does not match this revision`);
  }
  if (o.sha256 && p.sha256 && o.sha256 !== p.sha256) {
    throw new DownloadError('conflict', `${o.label}: the manifest's sha256 ${o.sha256} differs from the hub's ${p.sha256}: the manifest does not match this revision`);
  }
  const total = o.size ?? p.size;
  const wantSha = o.sha256 ?? p.sha256;
  const shaFrom = o.sha256 ? 'manifest' : p.sha256 ? 'hub' : undefined;

  let have = await sizeOf(part);
  if (total !== undefined && have > total) {
    await rm(part, { force: true });
    have = 0;
  }
  if (total !== undefined) await checkFreeSpace(dirname(part), total - have, o.label);

  let hash = createHash('sha256');
  if (total === undefined || have < total) {
    // Hash what is kept before asking for the rest, so the connection never idles behind a long read.
    if (have > 0) await hashFile(part, hash, o.signal);
    const hubOrigin = new URL(o.url).origin;
    const res = await axios.get<IncomingMessage>(p.location, {
      responseType: 'stream',
      decompress: false,
      maxRedirects: 5,
      validateStatus: () => true,
      headers: { 'Accept-Encoding': 'identity', ...(have > 0 ? { Range: `bytes=${have}-` } : {}), ...authHeaders(p.location, hubOrigin, o.token) },
      timeout: o.stallMs ?? 60_000,
      signal: o.signal,
    });
    const body = res.data;
    if (res.status === 416) {
      body.destroy();
      await rm(part, { force: true });
      throw new DownloadError('http', `${o.label}: the server refused to resume at byte ${have}; starting over`, true);
    }
    if (res.status !== 200 && res.status !== 206) {
      body.destroy();
      throw statusError(o.label, p.location, res);
    }
    if (res.status === 206) {
      const m = /^bytes (\d+)-\d+\/(\d+|\*)$/.exec(String(res.headers['content-range'] ?? ''));
      if (!m || Number(m[1]) !== have) {
        body.destroy();
        await rm(part, { force: true });
        throw new DownloadError('http', `${o.label}: the server resumed at the wrong place (${String(res.headers['content-range'])}); starting over`, true);
      }
      const whole = m[2] === '*' ? undefined : Number(m[2]);
      if (whole !== undefined && total !== undefined && whole !== total) {
        body.destroy();
        throw new DownloadError('size', `${o.label}: the server sends ${whole} bytes, expected ${total}`);
      }
      o.onEvent?.(`${o.label}: resuming at ${fmtBytes(have)}${total !== undefined ? ` of ${fmtBytes(total)}` : ''}`);
    } else {
      have = 0; // a 200 answers with the whole file
      hash = createHash('sha256');
      const len = num(res.headers['content-length']);
      if (len !== undefined && total !== undefined && len !== total) {
        body.destroy();
        throw new DownloadError('size', `${o.label}: the server sends ${len} bytes, expected ${total}`);
      }
    }
    await streamTo(body, part, have > 0 ? 'a' : 'w', hash, have, total, o);
  } else {
    await hashFile(part, hash, o.signal); // a complete .part from an earlier run: only the checks remain
  }

  const resumedFrom = have; // 0 when the server answered a range request with the whole file
  const got = await sizeOf(part);
  if (total !== undefined && got < total) {
    throw new DownloadError('network', `${o.label}: the connection closed at ${fmtBytes(got)} of ${fmtBytes(total)}`, true);
  }
  if (total !== undefined && got > total) {
    await rm(part, { force: true });
    throw new DownloadError('size', `${o.label}: size mismatch: received ${got} bytes, expected ${total}; the partial file was removed`);
  }
  const sha = hash.digest('hex');
  if (wantSha && sha !== wantSha) {
    await rm(part, { force: true });
    throw new DownloadError('checksum', `${o.label}: sha256 mismatch: got ${sha}, expected ${wantSha} (from the ${shaFrom}); the file was removed`);
  }
  const fh = await open(part, 'r+');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(part, o.dest);
  return { size: got, sha256: sha, sha256From: wantSha ? shaFrom : undefined, commit: p.commit, resumedFrom };
}

async function streamTo(body: IncomingMessage, part: string, flags: 'a' | 'w', hash: Hash, start: number, total: number | undefined, o: DownloadOptions): Promise<void> {
  const stallMs = o.stallMs ?? 60_000;
  let done = start;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => body.destroy(new DownloadError('network', `${o.label}: no data for ${stallMs / 1000} s`, true)), stallMs);
  };
  const meter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      arm();
      hash.update(chunk);
      done += chunk.length;
      o.onProgress?.(done, total);
      cb(null, chunk);
    },
  });
  arm();
  o.onProgress?.(done, total);
  try {
    await pipeline(body, meter, createWriteStream(part, { flags }), { signal: o.signal });
  } finally {
    clearTimeout(timer);
  }
}
