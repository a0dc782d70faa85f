// A bounded fuzz of every endpoint (issue 20): a few thousand requests from a fixed seed, on loopback, in JSON,
// multipart and query form, with the shapes that once answered 500 among the generators (JSON nested 1,500+ levels,
// multipart names nested 3,000 levels, Content-Encoding on plain or truncated bodies, huge offsets, multipart/mixed).
// No answer may be a 5xx, and the service must answer normally afterwards.
import assert from 'node:assert/strict';
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { after, before, test } from 'node:test';
import { startApp, TestApp, TOKEN } from './harness';
import { dataUri, pngBytes, wavBytes } from './inputs';
import { silentSpeech, testPipeline } from './test-pipelines';

const REQUESTS = Number(process.env.KILN_FUZZ_REQUESTS ?? 3000);
const SEED = 20261124;

/** mulberry32: a small, fast, seeded generator (the same requests on every run). */
function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)];
  return { next, int, pick, chance: (p: number) => next() < p };
}
type Rng = ReturnType<typeof rng>;

interface Req {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

const JSON_POSTS = ['/api/v1/generate', '/api/jobs', '/api/v1/image', '/api/v1/tts'];
const FORM_POSTS = ['/api/jobs', '/api/images', '/api/tts'];
const FIELDS = ['prompt', 'text', 'profile', 'aspect', 'res', 'seconds', 'seed', 'steps', 'size', 'size_from_ref', 'cfg', 'negative_prompt', 'image_mode', 'audio_mode', 'tts_text', 'tts_ref_text', 'tts_language', 'language', 'ref_text', 'ref_audio', 'images', 'audios', 'callback_url', 'wait', 'timeout', 'bogus'];

function deep(levels: number, leaf: unknown, asArray: boolean): unknown {
  let v = leaf;
  for (let i = 0; i < levels; i++) v = asArray ? [v] : { a: v };
  return v;
}

function value(r: Rng, field: string, png: string, wav: string): unknown {
  switch (r.int(14)) {
    case 0: return r.pick(['', ' ', 'x', 'a red fox in the snow', '你好', '\u0000', 'x'.repeat(10_001), 'x'.repeat(2_001)]);
    case 1: return r.pick([0, -1, 1, 2, 5, 200, 201, 1e21, -1e21, 0.5, 99999999999999999999, 2 ** 63 - 1, Number.MAX_SAFE_INTEGER + 2]);
    case 2: return r.pick([true, false, null]);
    case 3: return r.pick(['16:9', '1:1', '9:16', '4:3', '480p', '768p', '1K', '2K', '256x256', '4096x4096', '100000x1', 'fastvid', 'imgmain', 'tts', 'nope']);
    case 4: return [r.pick([png, wav, 'https://127.0.0.1/x.png', 'ftp://x', 'data:image/png;base64,@@@', ''])];
    case 5: return field === 'images' ? [png, png] : field === 'audios' || field === 'ref_audio' ? wav : png;
    case 6: return deep(r.pick([2, 20, 1600]), 'x', r.chance(0.5));
    case 7: return { nested: { prompt: 'x' } };
    case 8: return Array.from({ length: r.int(20) }, () => r.int(1000));
    case 9: return r.pick(['http://127.0.0.1:1/cb', 'https://10.0.0.1/cb', 'not a url', 'https://', 'javascript:alert(1)']);
    case 10: return r.pick(['-1', '5', 'true', 'yes', '1e3', 'NaN', 'Infinity']);
    default: return r.pick(['a cat', 'x', 'English', 'Auto', 'keyframe', 'reference', 'voice', 'track']);
  }
}

function jsonBody(r: Rng, png: string, wav: string): unknown {
  if (r.chance(0.05)) return deep(r.pick([1500, 3000]), { prompt: 'x' }, r.chance(0.5));
  if (r.chance(0.05)) return r.pick([[], 'a string', 42, null, [{ prompt: 'x' }]]);
  const o: Record<string, unknown> = {};
  const valid = r.chance(0.4);
  if (valid) Object.assign(o, { prompt: 'a fox', text: 'hello there', ref_audio: wav, steps: r.pick([1, 2]), seconds: 1 });
  for (let i = r.int(6); i > 0; i--) {
    const f = r.pick(FIELDS);
    o[f] = value(r, f, png, wav);
  }
  return o;
}

function multipart(r: Rng, pngBuf: Buffer, wavBuf: Buffer): { type: string; body: Buffer } {
  const boundary = `----kiln${r.int(1e9)}`;
  const parts: Buffer[] = [];
  const field = (name: string, v: string) => parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${v}\r\n`));
  const file = (name: string, filename: string, data: Buffer, type = 'application/octet-stream') =>
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${filename}"\r\nContent-Type: ${type}\r\n\r\n`), data, Buffer.from('\r\n'));
  if (r.chance(0.5)) field('prompt', 'a fox');
  if (r.chance(0.5)) field('text', 'hello');
  if (r.chance(0.08)) field(`prompt${'[a]'.repeat(r.pick([10, 3000]))}`, 'x');
  if (r.chance(0.08)) field('prompt[]', 'x');
  for (let i = r.int(5); i > 0; i--) field(r.pick(FIELDS), String(value(r, 'x', '', '')).slice(0, 2000));
  if (r.chance(0.08)) field('wait', r.pick(['0', 'true', 'false', '']));
  if (r.chance(0.08)) field(r.pick(['ref_text', 'tts_ref_text']), 'x'.repeat(r.pick([2_000, 2_001, 100_000])));
  for (let i = r.int(3); i > 0; i--) {
    const name = r.pick(['images', 'audios', 'ref_audio', 'bogus']);
    file(name, r.pick(['a.png', 'b.wav', '../../etc/passwd', 'x'.repeat(300), 'ü.jpg', '']), r.pick([pngBuf, wavBuf, Buffer.from('garbage'), Buffer.alloc(0)]), r.pick(['application/octet-stream', 'image/png']));
  }
  const body = Buffer.concat([...parts, Buffer.from(r.chance(0.9) ? `--${boundary}--\r\n` : `--${boundary}`)]);
  const type = r.chance(0.9) ? `multipart/form-data; boundary=${boundary}` : r.pick([`multipart/mixed; boundary=${boundary}`, 'multipart/mixed; boundary=x', 'multipart/form-data', 'multipart/form-data; boundary=', 'text/plain']);
  return { type, body };
}

function query(r: Rng): string {
  const q: string[] = [];
  const vals = ['0', '1', '-1', '100', '1000', '1001', 'ten', '', '99999999999999999999', '9223372036854775807', '1e3', '0x10', 'true', 'maybe', '1800', '1801', 'video', 'image', 'audio', 'done', 'queued'];
  for (const k of ['limit', 'offset', 'kind', 'status', 'wait', 'timeout', 'token']) if (r.chance(0.3)) q.push(`${k}=${encodeURIComponent(r.pick(vals))}`);
  if (r.chance(0.05)) q.push('limit=1&limit=2');
  if (r.chance(0.05)) q.push('offset[a][b]=1');
  return q.length ? `?${q.join('&')}` : '';
}

function request(r: Rng, pngBuf: Buffer, wavBuf: Buffer, png: string, wav: string, ids: string[]): Req {
  const auth: Record<string, string> = r.chance(0.95) ? { authorization: `Bearer ${TOKEN}` } : r.chance(0.5) ? { authorization: 'Bearer wrong' } : {};
  const kind = r.int(10);
  if (kind < 4) {
    const body = Buffer.from(JSON.stringify(jsonBody(r, png, wav)) ?? 'null');
    const headers: Record<string, string> = { ...auth, 'content-type': r.chance(0.95) ? 'application/json' : r.pick(['application/json; charset=latin9', 'text/plain', 'application/x-www-form-urlencoded']) };
    return { method: 'POST', path: r.pick(JSON_POSTS), headers, body: r.chance(0.03) ? body.subarray(0, r.int(body.length)) : body };
  }
  if (kind < 6) {
    const m = multipart(r, pngBuf, wavBuf);
    return { method: 'POST', path: r.pick(FORM_POSTS), headers: { ...auth, 'content-type': m.type }, body: m.body };
  }
  if (kind < 7) {
    // Content-Encoding on a body that is not compressed, or a truncated gzip stream
    const plain = Buffer.from(JSON.stringify({ prompt: 'x', steps: 1 }));
    const gz = gzipSync(plain);
    const body = r.chance(0.5) ? plain : gz.subarray(0, r.int(gz.length));
    return { method: 'POST', path: r.pick([...JSON_POSTS, ...FORM_POSTS]), headers: { ...auth, 'content-type': 'application/json', 'content-encoding': r.pick(['gzip', 'deflate', 'br', 'x-unknown']) }, body };
  }
  const id = r.chance(0.5) && ids.length ? r.pick(ids) : r.pick(['19990101_000000_0000', '..%2F..%2Fetc%2Fpasswd', 'x'.repeat(500), '%00', 'ü', '']);
  const path = r.pick(['/api/jobs', `/api/jobs/${id}`, `/api/jobs/${id}/video`, `/api/jobs/${id}/image`, '/api/status', '/api/config', '/api/health', `/out/${id}.png`, '/api/nope']);
  const method = path.startsWith('/api/jobs/') && r.chance(0.3) ? 'DELETE' : 'GET';
  // waits are short: the fuzz is about answers, not waiting
  const q = method === 'GET' ? query(r).replace(/timeout=\d+/, 'timeout=0') : '';
  return { method, path: path + (q.includes('wait=') && !q.includes('timeout=') ? `${q}&timeout=0` : q), headers: auth };
}

function send(base: string, req: Req, limitMs = 0): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    if (limitMs) setTimeout(() => resolve({ status: 599, body: `no answer within ${limitMs} ms` }), limitMs).unref();
    const u = new URL(base + req.path);
    const headers = { ...req.headers, ...(req.body ? { 'content-length': String(req.body.length) } : {}) };
    const r = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: req.method, headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    // the server may answer and close before the body is sent (a refused body): that is an answer too
    r.on('error', (err) => resolve({ status: -1, body: err.message }));
    r.end(req.body);
  });
}

let t: TestApp;
before(async () => {
  t = await startApp({
    env: { MAX_QUEUE: '40' },
    builtinPipelines: false,
    pipelines: [testPipeline('image', 'imgmain', { stepMs: 1 }), testPipeline('image', 'imgmain_bf16', { stepMs: 1 }), testPipeline('video', 'fastvid', { stepMs: 1 }), silentSpeech()],
  });
});
after(() => t.close(true));

test(`fuzz: ${REQUESTS} requests over every endpoint (seed ${SEED}), no 5xx, the service alive after`, { timeout: 120_000 }, async () => {
  const r = rng(SEED);
  const pngBuf = await pngBytes(40, 30);
  const wavBuf = wavBytes(4);
  const png = dataUri('image/png', pngBuf);
  const wav = dataUri('audio/wav', wavBuf);
  const ids: string[] = [];
  const fives: string[] = [];
  const statuses = new Map<number, number>();
  for (let i = 0; i < REQUESTS; i += 4) {
    // four at a time: concurrency without flooding the 2-core box
    const batch = Array.from({ length: Math.min(4, REQUESTS - i) }, () => request(r, pngBuf, wavBuf, png, wav, ids));
    // a form is answered at once (it never waits: a wait field is refused); 599 marks one that was not
    const answers = await Promise.all(batch.map((q) => send(t.url, q, q.headers['content-type']?.startsWith('multipart/') ? 10_000 : 0)));
    answers.forEach((a, k) => {
      statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
      if (a.status >= 500) fives.push(`${batch[k].method} ${batch[k].path.slice(0, 80)} [${batch[k].headers['content-type'] ?? ''} ${batch[k].headers['content-encoding'] ?? ''}] -> ${a.status} ${a.body.slice(0, 200)}`);
      const id = /"id":"(\d{8}_\d{6}_\d{4})"/.exec(a.body)?.[1];
      if (id && ids.length < 200) ids.push(id);
    });
  }
  const seen = [...statuses.entries()].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}: ${n}`).join(', ');
  assert.deepEqual(fives.slice(0, 20), [], `${fives.length} answers were 5xx (statuses: ${seen})`);
  assert.ok((statuses.get(200) ?? 0) > REQUESTS / 20, `few requests succeeded: ${seen}`);
  const status = await send(t.url, { method: 'GET', path: '/api/status', headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(status.status, 200);
  // a burst of parallel creates (ids once collided): none may be a 5xx, the queue cap (429) may answer
  const burst = await Promise.all(Array.from({ length: 48 }, () => send(t.url, { method: 'POST', path: '/api/v1/image', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify({ prompt: 'burst', steps: 1, size: '256x256' })) })));
  assert.deepEqual(burst.filter((a) => a.status >= 500).map((a) => a.body.slice(0, 200)), []);
  const burstIds = burst.filter((a) => a.status === 200).map((a) => JSON.parse(a.body).id as string);
  assert.equal(new Set(burstIds).size, burstIds.length, 'burst ids are unique');
  const job = await send(t.url, { method: 'POST', path: '/api/v1/image', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify({ prompt: 'after the fuzz', steps: 1 })) });
  assert.ok([200, 429].includes(job.status), `a plain create after the fuzz: ${job.status} ${job.body}`);
});
