// The OpenAPI document checked two ways: read against the spec (endpoints, auth schemes, error responses, job
// object), and used: an SDK generated from it by @hey-api/openapi-ts, compiled, loaded, creates, polls and
// downloads an image job against the real app.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { compileSdk, compileStrictNode, generateOpenapiTypes, generateSdk, sdkExports, sdkName, writeTs } from './fixtures/sdk';
import { auth, startApp, TestApp, TOKEN } from './harness';
import { makeGate } from './control';
import { silentSpeech, testPipeline } from './test-pipelines';
import { dataUri, wavBytes } from './inputs';
import { Exchange, openapiProblems } from './openapi-traffic';

type Doc = { openapi: string; paths: Record<string, Record<string, any>>; components: { schemas: Record<string, any>; securitySchemes: Record<string, any> } };

/** The spec's endpoint table (service-api.md "Endpoints"), /api part. */
const API_ENDPOINTS: [string, string][] = [
  ['post', '/api/v1/generate'], ['post', '/api/jobs'], ['post', '/api/v1/image'], ['post', '/api/images'],
  ['post', '/api/v1/tts'], ['post', '/api/tts'], ['get', '/api/jobs'], ['get', '/api/jobs/{job_id}'],
  ['get', '/api/jobs/{job_id}/video'], ['get', '/api/jobs/{job_id}/image'], ['delete', '/api/jobs/{job_id}'],
  ['get', '/api/status'], ['get', '/api/config'], ['get', '/api/health'],
];

/** The job object table: field -> OpenAPI type, and whether the spec says "always". */
const JOB_FIELDS: Record<string, [string, boolean]> = {
  id: ['string', true], kind: ['string', true], status: ['string', true], prompt: ['string', true], profile: ['string', true],
  mode: ['string', true], aspect: ['string', true], res: ['string', true], size: ['string', true], seconds: ['number', false],
  frames: ['integer', false], seed: ['integer', true], steps: ['integer', true], image_count: ['integer', true],
  created: ['number', true], position: ['integer', false], progress: ['object', false], stage: ['string', false],
  elapsed: ['number', false], exec_s: ['number', false], video: ['string', false], video_download: ['string', false],
  image: ['string', false], image_download: ['string', false], negative: ['string', false], cfg: ['number', false],
  size_from_ref: ['boolean', false], finished: ['number', false], error: ['string', false], callback_status: ['integer', false],
};

describe('OpenAPI document and a generated SDK', () => {
  let t: TestApp;
  let doc: Doc;
  const gate = makeGate();
  const tmp = mkdtempSync(join(tmpdir(), 'kiln-sdk-'));
  const traffic: Exchange[] = [];

  before(async () => {
    t = await startApp({ traffic, pipelines: [testPipeline('image', 'imgmain', { stepMs: 1, gate })] });
    const res = await fetch(`${t.url}/openapi.json`); // no token: the document is public
    assert.equal(res.status, 200);
    doc = (await res.json()) as Doc;
  });
  after(async () => {
    gate.openAll();
    await t.close(true);
    rmSync(tmp, { recursive: true, force: true });
  });

  const op = (method: string, path: string) => doc.paths[path]?.[method];

  test('every /api endpoint of the spec is documented with its method', () => {
    const missing = API_ENDPOINTS.filter(([m, p]) => !op(m, p)).map(([m, p]) => `${m.toUpperCase()} ${p}`);
    assert.deepEqual(missing, []);
  });

  test('the credential-free endpoints of the spec are documented too: GET / and GET /out/{file}', () => {
    const paths = Object.keys(doc.paths);
    const missing = [['/', paths.includes('/') && op('get', '/')], ['/out/{file}', paths.some((p) => p.startsWith('/out/') && doc.paths[p].get)]]
      .filter(([, ok]) => !ok)
      .map(([p]) => `GET ${p}`);
    assert.deepEqual(missing, [], 'the spec lists them as endpoints; /openapi.json leaves them out');
  });

  test('every $ref points at a schema the document has (hey-api refuses dangling refs)', () => {
    const dangling = new Set<string>();
    const visit = (v: unknown) => {
      if (Array.isArray(v)) v.forEach(visit);
      else if (v && typeof v === 'object') {
        for (const [k, x] of Object.entries(v)) {
          if (k === '$ref' && typeof x === 'string' && !resolves(doc, x)) dangling.add(x);
          else visit(x);
        }
      }
    };
    visit(doc.paths);
    visit(doc.components);
    assert.deepEqual([...dangling].sort(), []);
  });

  test('three security schemes: Authorization Bearer, x-token header, token query; any one suffices on /api', () => {
    const schemes = Object.entries(doc.components.securitySchemes);
    const find = (pred: (s: any) => boolean) => schemes.find(([, s]) => pred(s))?.[0];
    const bearer = find((s) => s.type === 'http' && String(s.scheme).toLowerCase() === 'bearer');
    const header = find((s) => s.type === 'apiKey' && s.in === 'header' && s.name === 'x-token');
    const query = find((s) => s.type === 'apiKey' && s.in === 'query' && s.name === 'token');
    assert.ok(bearer && header && query, JSON.stringify(doc.components.securitySchemes));
    for (const [m, p] of API_ENDPOINTS) {
      // Alternatives are separate requirement objects; one object naming all three would demand all three.
      const reqs = (op(m, p)?.security ?? []).map((r: object) => Object.keys(r).sort().join('+')).sort();
      assert.deepEqual(reqs, [bearer, header, query].sort(), `${m} ${p}`);
    }
  });

  test('400/401/404/422 are documented wherever the server gives them', async () => {
    const png = Buffer.from('89504e470d0a1a0a', 'hex');
    // [method, documented path, request, status it must give]
    const probes: [string, string, () => Promise<{ status: number }>, number][] = [];
    for (const [m, p] of API_ENDPOINTS) probes.push([m, p, () => (t.http as any)[m](p.replace('{job_id}', 'x')), 401]);
    probes.push(
      ['post', '/api/v1/generate', () => t.http.post('/api/v1/generate').set(auth).send({ prompt: ' ' }), 400],
      ['post', '/api/v1/generate', () => t.http.post('/api/v1/generate').set(auth).send({ prompt: 'a', seconds: 'five' }), 422],
      ['post', '/api/jobs', () => t.http.post('/api/jobs').set(auth).field('prompt', 'a').field('res', '9000p'), 400],
      ['post', '/api/jobs', () => t.http.post('/api/jobs').set(auth).field('prompt', 'a').field('seconds', 'five'), 422],
      ['post', '/api/v1/image', () => t.http.post('/api/v1/image').set(auth).send({ prompt: 'a', aspect: '7:1' }), 400],
      ['post', '/api/v1/image', () => t.http.post('/api/v1/image').set(auth).send({ prompt: 'a', steps: 'many' }), 422],
      ['post', '/api/images', () => t.http.post('/api/images').set(auth).field('prompt', ''), 400],
      ['post', '/api/images', () => t.http.post('/api/images').set(auth).field('prompt', 'a').field('cfg', 'high'), 422],
      ['post', '/api/v1/tts', () => t.http.post('/api/v1/tts').set(auth).send({ text: 'hi', ref_audio: 'data:audio/wav;base64,AAAA', language: 'Klingon' }), 400],
      ['post', '/api/v1/tts', () => t.http.post('/api/v1/tts').set(auth).send({ text: 5, ref_audio: 'x' }), 422],
      ['post', '/api/tts', () => t.http.post('/api/tts').set(auth).field('text', 'hi').field('language', 'Klingon').attach('ref_audio', png, 'a.wav'), 400],
      ['get', '/api/jobs', () => t.http.get('/api/jobs?limit=5000').set(auth), 400],
      ['get', '/api/jobs', () => t.http.get('/api/jobs?limit=many').set(auth), 422],
      ['get', '/api/jobs/{job_id}', () => t.http.get('/api/jobs/nope').set(auth), 404],
      ['get', '/api/jobs/{job_id}', () => t.http.get('/api/jobs/nope?wait=true&timeout=5000').set(auth), 400],
      ['get', '/api/jobs/{job_id}', () => t.http.get('/api/jobs/nope?wait=maybe').set(auth), 422],
      ['get', '/api/jobs/{job_id}/video', () => t.http.get('/api/jobs/nope/video').set(auth), 404],
      ['get', '/api/jobs/{job_id}/image', () => t.http.get('/api/jobs/nope/image').set(auth), 404],
      ['delete', '/api/jobs/{job_id}', () => t.http.delete('/api/jobs/nope').set(auth), 404],
    );
    const undocumented: string[] = [];
    for (const [m, p, send, want] of probes) {
      const res = await send();
      assert.equal(res.status, want, `probe ${m.toUpperCase()} ${p} should give ${want}`);
      if (!op(m, p)?.responses?.[String(want)]) undocumented.push(`${m.toUpperCase()} ${p} ${want}`);
    }
    assert.deepEqual([...new Set(undocumented)], []);
  });

  test('error bodies are documented as JSON, downloads as their file type', () => {
    const wrong: string[] = [];
    for (const [m, p] of API_ENDPOINTS) {
      for (const [code, r] of Object.entries<any>(op(m, p)?.responses ?? {})) {
        if (Number(code) >= 400 && !r.content?.['application/json']) wrong.push(`${m.toUpperCase()} ${p} ${code}: ${Object.keys(r.content ?? {}).join(',') || 'no body'}`);
      }
    }
    for (const [p, type] of [['/api/jobs/{job_id}/video', 'video/mp4'], ['/api/jobs/{job_id}/image', 'image/png']]) {
      if (!op('get', p)?.responses?.['200']?.content?.[type]) wrong.push(`GET ${p} 200: not documented as ${type}`);
    }
    assert.deepEqual(wrong, []);
  });

  const jobSchema = () => {
    const ref = op('get', '/api/jobs/{job_id}')?.responses?.['200']?.content?.['application/json']?.schema?.$ref;
    assert.ok(ref, 'GET /api/jobs/{job_id} 200 has a schema $ref');
    return resolves(doc, ref)!;
  };

  test('the job object schema has every field of the spec, the "always" ones required', () => {
    const s = jobSchema();
    assert.deepEqual(Object.keys(JOB_FIELDS).filter((f) => !s.properties?.[f]), []);
    assert.deepEqual(Object.entries(JOB_FIELDS).filter(([f, [, always]]) => always && !s.required?.includes(f)).map(([f]) => f), []);
    assert.deepEqual([...s.properties.status.enum].sort(), ['done', 'failed', 'queued', 'running']);
    assert.deepEqual([...s.properties.kind.enum].sort(), ['image', 'video']);
  });

  test('the job object fields have the spec types (integer where the spec says integer)', () => {
    const s = jobSchema();
    const typeOf = (p: any) => p.type ?? (p.allOf || p.$ref ? 'object' : undefined);
    const wrong = Object.entries(JOB_FIELDS).filter(([f, [type]]) => s.properties?.[f] && typeOf(s.properties[f]) !== type).map(([f, [type]]) => `${f}: ${typeOf(s.properties[f])}, spec ${type}`);
    assert.deepEqual(wrong, []);
  });

  test('a generated SDK creates, polls and downloads an image job', { timeout: 60_000 }, async () => {
    const src = join(tmp, 'src');
    await generateSdk(doc, src);
    // The generated names follow the operationIds; look them up by method and path so only the contract matters.
    const name = (m: string, p: string) => sdkName(op(m, p).operationId);
    const fns = { create: name('post', '/api/v1/image'), get: name('get', '/api/jobs/{job_id}'), image: name('get', '/api/jobs/{job_id}/image'), status: name('get', '/api/status') };
    const have = sdkExports(src);
    assert.deepEqual(Object.values(fns).filter((f) => !have.includes(f)), [], `SDK exports: ${have.join(', ')}`);
    writeTs(src, 'flow.ts', consumer(fns));
    compileSdk(src, join(tmp, 'js'));
    const flow = require(join(tmp, 'js', 'flow.js')) as Flow;

    flow.configure(t.url, TOKEN, 'bearer');
    const created = await flow.create({ prompt: 'a red square', steps: 3, seed: 7 });
    assert.equal(created.status, 200, JSON.stringify(created.error));
    const id = created.job!.id;
    assert.equal(created.job!.kind, 'image');
    assert.ok(['queued', 'running'].includes(created.job!.status));

    // The gate holds the job before its first step: polling must see it unfinished, then finished.
    const statuses: string[] = [];
    const poll = async (until: (s: string) => boolean) => {
      for (let i = 0; i < 500; i++) {
        const r = await flow.get(id);
        assert.equal(r.status, 200);
        statuses.push(r.job!.status);
        if (until(r.job!.status)) return r.job!;
        await new Promise((res) => setTimeout(res, 10));
      }
      throw new Error(`job ${id} stuck: ${statuses.slice(-5).join(',')}`);
    };
    const running = await poll((s) => s === 'running');
    assert.deepEqual(running.progress, { value: 0, max: 3 }, 'a running job shows its step count as max from the start');
    gate.openAll();
    const done = await poll((s) => s === 'done' || s === 'failed');
    assert.equal(done.status, 'done', done.error);
    assert.equal(done.image_download, `/api/jobs/${id}/image`);

    const file = await flow.image(id);
    assert.equal(file.status, 200);
    assert.match(file.contentType ?? '', /^image\/png/);
    assert.deepEqual([...file.bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

    // Errors come back typed as the documented bodies; the other two credential places work through the SDK.
    const missing = await flow.get('20000101_000000_0000');
    assert.deepEqual([missing.status, typeof missing.error?.detail], [404, 'string']);
    for (const place of ['x-token', 'token'] as const) {
      flow.configure(t.url, TOKEN, place);
      assert.equal((await flow.status()).status, 200, place);
    }
    flow.configure(t.url, 'wrong-token-000', 'bearer');
    assert.deepEqual(await flow.status(), { status: 401, error: { detail: 'bad token' } });
  });

  test('all the traffic above (the probes, the SDK\'s calls) is as the document says', async () => {
    assert.ok(traffic.length > 40, String(traffic.length));
    assert.deepEqual(await openapiProblems(doc, traffic), []);
  });
});

describe('openapi-typescript + openapi-fetch: the spec\'s example calls type-check (tsc --strict) and run', () => {
  let t: TestApp;
  // inside the repository, so that the client resolves openapi-fetch from node_modules
  const dir = join(__dirname, '..', '..', 'openapi-fetch-client');
  before(async () => {
    t = await startApp({ builtinPipelines: false, pipelines: [testPipeline('video', 'fastvid', { stepMs: 1 }), testPipeline('image', 'imgmain', { stepMs: 1 }), silentSpeech()] });
  });
  after(async () => {
    await t.close(true);
    rmSync(dir, { recursive: true, force: true });
  });

  test('only prompt (text and ref_audio for speech) is required: the minimal calls compile, and answer 200', { timeout: 60_000 }, async () => {
    const doc = (await (await fetch(`${t.url}/openapi.json`)).json()) as object;
    await generateOpenapiTypes(doc, dir);
    writeTs(dir, 'calls.ts', `import createClient from 'openapi-fetch';
import type { paths } from './schema';

/** The spec's calls, each with only what it requires (plus a field or two), as a user writes them. */
export async function calls(baseUrl: string, token: string, refAudio: string) {
  const api = createClient<paths>({ baseUrl, headers: { Authorization: \`Bearer \${token}\` } });
  const video = await api.POST('/api/v1/generate', { body: { prompt: 'A cat sings "hello" in the rain', seconds: 5 } });
  const image = await api.POST('/api/v1/image', { body: { prompt: 'a red fox in the snow' } });
  const edit = await api.POST('/api/v1/image', { body: { prompt: 'make it blue', res: '2K', wait: true, timeout: 30 } });
  const speech = await api.POST('/api/v1/tts', { body: { text: 'hello there', ref_audio: refAudio } });
  // the JSON creates answer the job, or with dry_run (an extension) its plan: a typed client tells them apart
  const id: string = image.data && !('dry_run' in image.data) ? image.data.id : '';
  const polled = await api.GET('/api/jobs/{job_id}', { params: { path: { job_id: id }, query: { wait: true, timeout: 30 } } });
  const list = await api.GET('/api/jobs', { params: { query: { limit: 10 } } });
  const status = await api.GET('/api/status');
  return [video, image, edit, speech, polled, list, status].map((r) => r.response.status);
}
`);
    compileStrictNode(dir);
    const { calls } = require(join(dir, 'calls.js')) as { calls(base: string, token: string, ref: string): Promise<number[]> };
    assert.deepEqual(await calls(t.url, TOKEN, dataUri('audio/wav', wavBytes(4))), [200, 200, 200, 200, 200, 200, 200]);
  });
});

interface Flow {
  configure(baseUrl: string, token: string, place: 'bearer' | 'x-token' | 'token'): void;
  create(body: object): Promise<{ status: number; job?: Record<string, any>; error?: any }>;
  get(id: string): Promise<{ status: number; job?: Record<string, any>; error?: any }>;
  image(id: string): Promise<{ status: number; contentType: string | null; bytes: Uint8Array }>;
  status(): Promise<{ status: number; error?: any }>;
}

/** A consumer of the SDK, type-checked with it: the field types it relies on must come out of the document. */
function consumer(f: { create: string; get: string; image: string; status: string }): string {
  return `import { client } from './client.gen';
import { ${f.create}, ${f.get}, ${f.image}, ${f.status} } from './index';

// A request that never got a response (network error) comes back with only \`error\`: surface it.
function answered<R extends { response?: Response; error?: unknown }>(r: R): R & { response: Response } {
  if (!r.response) throw r.error instanceof Error ? r.error : new Error(\`no response: \${String(r.error)}\`);
  return r as R & { response: Response };
}

type Body = NonNullable<Parameters<typeof ${f.create}>[0]>['body'];

export function configure(baseUrl: string, token: string, place: 'bearer' | 'x-token' | 'token'): void {
  client.setConfig({ baseUrl, auth: (a) => ((place === 'bearer' ? a.scheme === 'bearer' : place === 'token' ? a.in === 'query' : a.name === 'x-token' && a.in !== 'query') ? token : undefined) });
}

export async function create(body: Body) {
  const r = answered(await ${f.create}({ body }));
  // the job, or with dry_run (an extension) its plan: told apart by dry_run
  const id: string | undefined = r.data && !('dry_run' in r.data) ? r.data.id : undefined;
  void id;
  return { status: r.response.status, job: r.data, error: r.error };
}

export async function get(id: string) {
  const r = answered(await ${f.get}({ path: { job_id: id } }));
  const status: 'queued' | 'running' | 'done' | 'failed' | undefined = r.data?.status;
  const detail: string | undefined = r.error && 'detail' in r.error ? String(r.error.detail) : undefined;
  void status;
  return { status: r.response.status, job: r.data, error: detail === undefined ? undefined : { detail } };
}

export async function image(id: string) {
  const r = answered(await ${f.image}({ path: { job_id: id }, parseAs: 'blob' }));
  const blob = r.data as unknown as Blob;
  return { status: r.response.status, contentType: r.response.headers.get('content-type'), bytes: new Uint8Array(await blob.arrayBuffer()) };
}

export async function status() {
  // An empty query object on purpose: hey-api's fetch client (0.95) drops a query apiKey when the request has
  // no query object of its own (it fills a copy; hey-api/hey-api#3852).
  const r = answered(await ${f.status}<false>({ query: {} } as never));
  return r.error ? { status: r.response.status, error: r.error } : { status: r.response.status };
}
`;
}

function resolves(doc: Doc, ref: string): any {
  if (!ref.startsWith('#/')) return undefined;
  return ref.slice(2).split('/').reduce<any>((o, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
}
