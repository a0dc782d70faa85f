import axios, { AxiosError } from 'axios';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { MAX_INPUT_BYTES } from '../catalog';
import { BadInputError } from '../common/errors';
import { BlockedAddressError, guardedLookup, isBlockedAddress } from './address-policy';

export interface OutboundOptions {
  allowPrivate: boolean;
  /** Whole-download timeout for input URLs, ms. */
  fetchTimeoutMs: number;
  /** Extra CA certificates for https (tests use a self-signed local server). */
  ca?: string | Buffer;
  /** Callback retry delays in ms; attempts = delays.length + 1. */
  callbackRetryDelaysMs?: number[];
}

/** All of the service's outbound HTTP: input downloads (images, audio) and job-finished callbacks. */
export class OutboundClient {
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;

  constructor(readonly opts: OutboundOptions) {
    const lookup = guardedLookup(opts.allowPrivate) as unknown as http.AgentOptions['lookup'];
    this.httpAgent = new http.Agent({ lookup, keepAlive: false });
    this.httpsAgent = new https.Agent({ lookup, keepAlive: false, ca: opts.ca });
  }

  /** A user's input as bytes: an https URL (streamed, aborted past `maxBytes`) or a base64 data URI.
   * `label` names the input in errors ("images[2]"); `media` is the data-URI type it must carry. */
  async fetchInput(ref: string, label: string, media: 'image' | 'audio', maxBytes = MAX_INPUT_BYTES): Promise<Buffer> {
    if (typeof ref !== 'string' || ref.trim() === '') throw new BadInputError(`${label}: empty; give an https URL or a data:${media}/...;base64 string`);
    if (ref.startsWith('data:')) return decodeDataUri(ref, label, media, maxBytes);
    const url = this.checkUrl(ref, label, ['https:']);
    return this.download(url, label, maxBytes);
  }

  /** Validates a URL's form and scheme and, when private targets are refused, a literal IP host. */
  checkUrl(ref: string, label: string, schemes: string[]): URL {
    let url: URL;
    try {
      url = new URL(ref);
    } catch {
      throw new BadInputError(`${label}: not a valid URL`);
    }
    if (!schemes.includes(url.protocol)) {
      throw new BadInputError(`${label}: must be an ${schemes.map((s) => s.replace(':', '')).join(' or ')} URL${label.startsWith('callback') ? '' : ' or a base64 data URI'} (got ${url.protocol.replace(':', '')})`);
    }
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (!this.opts.allowPrivate && isIP(host) && isBlockedAddress(host)) {
      throw new BadInputError(`${label}: ${host} is a loopback, private, link-local or unspecified address, which this service does not fetch`);
    }
    if (!this.opts.allowPrivate && /^localhost$/i.test(host)) {
      throw new BadInputError(`${label}: localhost is not fetched by this service`);
    }
    return url;
  }

  private async download(url: URL, label: string, maxBytes: number): Promise<Buffer> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.opts.fetchTimeoutMs);
    try {
      const res = await axios.get(url.toString(), {
        responseType: 'stream',
        httpAgent: this.httpAgent,
        httpsAgent: this.httpsAgent,
        signal: controller.signal,
        maxRedirects: 3,
        beforeRedirect: (o: { protocol?: string }) => {
          if (o.protocol !== 'https:') throw new BadInputError(`${label}: redirected to a non-https URL`);
        },
        validateStatus: () => true,
        proxy: false,
      });
      const stream = res.data as NodeJS.ReadableStream & { destroy(): void };
      if (res.status < 200 || res.status >= 300) {
        stream.destroy();
        throw new BadInputError(`${label}: download failed: ${url.host} answered HTTP ${res.status}`);
      }
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > maxBytes) {
        stream.destroy();
        throw new BadInputError(`${label}: file is ${mb(declared)} MB; the limit is ${mb(maxBytes)} MB`);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > maxBytes) {
          stream.destroy();
          throw new BadInputError(`${label}: file is larger than ${mb(maxBytes)} MB`);
        }
        chunks.push(chunk);
      }
      return Buffer.concat(chunks);
    } catch (err) {
      throw downloadError(err, label, url, controller.signal.aborted, this.opts.fetchTimeoutMs);
    } finally {
      clearTimeout(timer);
    }
  }

  /** One POST of a JSON body to a callback URL: 10 s timeout, no redirects. Resolves with the HTTP status and, when
   * the target sent Retry-After, its seconds; rejects on a network error, and with CallbackRefused when the address
   * is one this service does not reach (retrying cannot help). Retries are the caller's (src/jobs/callback.sender.ts). */
  async postJson(target: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; retryAfterS?: number }> {
    try {
      const res = await axios.post(target, body, {
        timeout: 10_000,
        httpAgent: this.httpAgent,
        httpsAgent: this.httpsAgent,
        maxRedirects: 0,
        validateStatus: () => true,
        proxy: false,
        headers: { 'content-type': 'application/json', 'user-agent': 'kiln-callback/1', ...headers },
        transformRequest: [(d: unknown) => d], // the bytes as given
      });
      return { status: res.status, retryAfterS: retryAfter(res.headers['retry-after']) };
    } catch (err) {
      const inner = unwrap(err);
      if (inner instanceof BlockedAddressError) throw new CallbackRefused(inner.message);
      throw inner instanceof Error ? inner : new Error(String(inner));
    }
  }

  /** Delays between callback attempts (attempts = delays + 1): the Standard Webhooks schedule unless told. */
  get callbackRetryDelaysMs(): number[] {
    return this.opts.callbackRetryDelaysMs ?? STANDARD_WEBHOOKS_DELAYS_MS;
  }
}

/** After the first attempt: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (the Standard Webhooks retry schedule). */
export const STANDARD_WEBHOOKS_DELAYS_MS = [5, 300, 1800, 7200, 18_000, 36_000, 36_000].map((s) => s * 1000);

/** Retry-After as seconds from now: a number of seconds, or an HTTP date. */
function retryAfter(v: unknown): number | undefined {
  if (typeof v !== 'string' || v.trim() === '') return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v);
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - Date.now()) / 1000);
}

/** A callback target this service will not reach (a private address): not retried. */
export class CallbackRefused extends Error {
  override readonly name = 'CallbackRefused';
}

function mb(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(bytes < 10 * 1024 * 1024 ? 1 : 0);
}

function unwrap(err: unknown): unknown {
  return err instanceof AxiosError && err.cause ? err.cause : err;
}

function downloadError(err: unknown, label: string, url: URL, timedOut: boolean, timeoutMs: number): Error {
  if (err instanceof BadInputError) return err;
  const inner = unwrap(err);
  if (inner instanceof BlockedAddressError) return new BadInputError(`${label}: ${inner.message}, which this service does not fetch`);
  if (timedOut) return new BadInputError(`${label}: download from ${url.host} took longer than ${timeoutMs / 1000} s`);
  const code = (inner as NodeJS.ErrnoException)?.code;
  const why = code === 'ENOTFOUND' ? `host ${url.hostname} not found` : code ? `${code}` : inner instanceof Error ? inner.message : String(inner);
  return new BadInputError(`${label}: download from ${url.host} failed (${why})`);
}

function decodeDataUri(ref: string, label: string, media: 'image' | 'audio', maxBytes: number): Buffer {
  const comma = ref.indexOf(',');
  const header = comma < 0 ? ref : ref.slice(0, comma);
  if (comma < 0 || !new RegExp(`^data:${media}/[\\w.+-]+;base64$`, 'i').test(header)) {
    throw new BadInputError(`${label}: data URI must look like data:${media}/<type>;base64,<data>`);
  }
  const payload = ref.slice(comma + 1);
  if (Math.floor((payload.length * 3) / 4) > maxBytes + 3) throw new BadInputError(`${label}: file is larger than ${mb(maxBytes)} MB`);
  if (!/^[A-Za-z0-9+/_-]*={0,2}\s*$/.test(payload)) throw new BadInputError(`${label}: data URI is not valid base64`);
  const buf = Buffer.from(payload, 'base64');
  if (buf.length > maxBytes) throw new BadInputError(`${label}: file is larger than ${mb(maxBytes)} MB`);
  if (buf.length === 0) throw new BadInputError(`${label}: data URI holds no data`);
  return buf;
}
