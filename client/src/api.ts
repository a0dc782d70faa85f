// The page's only door to the service: same-origin fetches with the token in the Authorization header.

/** A non-2xx answer: `detail` is the body's detail (a string for 400/401/404/429/503, entries for 422). */
export class ApiError extends Error {
  constructor(readonly status: number, readonly detail: unknown) {
    super(typeof detail === 'string' ? detail : `HTTP ${status}`);
  }
}

/** The server could not be reached at all (stopped, network down). */
export class OfflineError extends Error {}

export class Api {
  constructor(
    private readonly token: () => string,
    /** Called on every 401, before the ApiError is thrown. */
    private readonly onUnauthorized: () => void,
  ) {}

  get<T>(path: string): Promise<T> {
    return this.send<T>('GET', path);
  }

  /** Multipart POST (the forms the spec gives the bundled page). */
  post<T>(path: string, form: FormData): Promise<T> {
    return this.send<T>('POST', path, form);
  }

  /** JSON POST (the JSON creates: a dry run's plan). */
  async postJson<T>(path: string, body: object, signal?: AbortSignal): Promise<T> {
    return (await this.parse(await this.fetch('POST', path, JSON.stringify(body), signal))) as T;
  }

  delete<T>(path: string): Promise<T> {
    return this.send<T>('DELETE', path);
  }

  /** An event stream's URL: EventSource cannot send headers, so the token goes in the query (the server redacts
   * it from its logs). */
  streamUrl(path: string): string {
    return `${path}${path.includes('?') ? '&' : '?'}token=${encodeURIComponent(this.token())}`;
  }

  /** GET returning the parsed body and the response headers (the job list's X-Total-Count). */
  async getWithHeaders<T>(path: string): Promise<{ body: T; headers: Headers }> {
    const res = await this.fetch('GET', path);
    return { body: (await this.parse(res)) as T, headers: res.headers };
  }

  private async send<T>(method: string, path: string, body?: FormData): Promise<T> {
    return (await this.parse(await this.fetch(method, path, body))) as T;
  }

  private async fetch(method: string, path: string, body?: FormData | string, signal?: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.token()}` };
    if (typeof body === 'string') headers['Content-Type'] = 'application/json';
    try {
      return await fetch(path, { method, body, headers, cache: 'no-store', signal });
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new OfflineError(`the service did not answer (${err instanceof Error ? err.message : String(err)})`);
    }
  }

  private async parse(res: Response): Promise<unknown> {
    const text = await res.text();
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      // Not JSON (a proxy's error page): keep the text as the reason.
    }
    if (res.ok) return body;
    if (res.status === 401) this.onUnauthorized();
    const detail = body && typeof body === 'object' && 'detail' in body ? (body as { detail: unknown }).detail : body || res.statusText;
    throw new ApiError(res.status, detail);
  }
}
