// What chaos and fuzz testing found (issue 20), one test per finding: request shapes that answered 500, a
// compressed body inflated before the token was checked, inputs the model cannot take accepted at creation,
// orphaned inputs, and a WAV whose header lies about its size.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { deflateSync, gzipSync } from 'node:zlib';
import * as jobIds from '../../src/jobs/job-id';
import { JobStore } from '../../src/jobs/job.store';
import { auth, startApp, TestApp, TOKEN, until } from './harness';
import { dataUri, pngBytes, wavBytes } from './inputs';
import { silentSpeech, testPipeline } from './test-pipelines';

/** A raw request (supertest would not send some of these shapes), answered or cut off. */
function raw(t: TestApp, method: string, path: string, headers: Record<string, string>, body?: Buffer, agent: http.Agent | false = false): Promise<{ status: number; json: any; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const u = new URL(t.url + path);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, agent, headers: { ...headers, ...(body ? { 'content-length': String(body.length) } : {}) } }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: text ? JSON.parse(text) : undefined, ms: performance.now() - t0 }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const bearer = { authorization: `Bearer ${TOKEN}` };
const json = { ...bearer, 'content-type': 'application/json' };

function deepJson(levels: number): Buffer {
  return Buffer.from(`${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`);
}

describe('request shapes that answered 500', () => {
  let t: TestApp;
  before(async () => (t = await startApp({ builtinPipelines: false, env: { MAX_QUEUE: '5000' }, pipelines: [testPipeline('image', 'imgmain'), testPipeline('video', 'fastvid'), silentSpeech()] })));
  after(() => t.close(true));

  // issue 47 item 8: the spec says a create "returns a job object at once, with status queued"
  test('a job created on an idle service is answered as created: queued, with its position', async () => {
    const first = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'warm up', steps: 1, size: '256x256' });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    await until(t, first.body.id, (j) => j.status === 'done', 20_000);
    for (const path of ['/api/v1/image', '/api/v1/generate']) {
      const res = await t.http.post(path).set(auth).send({ prompt: 'a red kite over the sea', steps: 1, ...(path.endsWith('image') ? { size: '256x256' } : { seconds: 1, res: '352p' }) });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual([res.body.status, res.body.position], ['queued', 1], `${path}: ${JSON.stringify(res.body)}`);
      await until(t, res.body.id, (j) => j.status === 'done', 20_000);
    }
  });

  // issue 47 item 1: ids were the second plus a random suffix; concurrent creates collided (500 from the store).
  // Multipart with an image: saving the input holds each new id a while before the store takes it.
  test('a burst of parallel creates: no 5xx, ids unique and in the spec\'s form', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    const b = 'burstboundary';
    const png = await pngBytes(8, 8);
    const body = Buffer.concat([
      Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nidc\r\n--${b}\r\nContent-Disposition: form-data; name="size"\r\n\r\n256x256\r\n`),
      Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="images"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n`), png, Buffer.from(`\r\n--${b}--\r\n`),
    ]);
    const headers = { ...bearer, 'content-type': `multipart/form-data; boundary=${b}` };
    const ids: string[] = [];
    const statuses = new Map<number, number>();
    const t0 = Date.now();
    await Promise.all(Array.from({ length: 64 }, async () => {
      for (let i = 0; i < 8; i++) {
        const res = await raw(t, 'POST', '/api/images', headers, body, agent);
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 200) ids.push(res.json.id);
      }
    }));
    agent.destroy();
    assert.deepEqual([...statuses], [[200, 512]], `statuses: ${JSON.stringify([...statuses])}`);
    assert.equal(new Set(ids).size, ids.length, 'ids are unique');
    for (const id of ids) assert.match(id, /^\d{8}_\d{6}_\d{4}$/);
    assert.ok(Date.now() - t0 < 60_000, `took ${Date.now() - t0} ms`);
    for (const id of ids) await t.http.delete(`/api/jobs/${id}`).set(auth); // leave the queue empty for the next tests
  });

  // issue 47 item 1: another process on the same database (here a second JobStore on DATA_DIR, as a second API process
  // opens it) has reserved the id this one draws next and is saving its inputs under it. The create takes the next
  // id and never writes into the other's folder. (Before: it saved its inputs there, overwriting the other job's
  // image-0.png, and only then found the id taken at insert.)
  test('an id another process has reserved: the create takes the next, and the other\'s inputs are untouched', async () => {
    const other = new JobStore(t.dataDir);
    const ids = jobIds as { newJobId: typeof jobIds.newJobId };
    const draw = ids.newJobId;
    const theirs = '20991231_235959_9999'; // not one this process hands out meanwhile
    assert.equal(other.reserveId(theirs), true);
    mkdirSync(join(t.dataDir, 'inputs', theirs), { recursive: true });
    writeFileSync(join(t.dataDir, 'inputs', theirs, 'image-0.png'), 'theirs');
    let drawn = 0;
    ids.newJobId = (now?: Date) => (drawn++ === 0 ? theirs : draw(now));
    try {
      const res = await t.http.post('/api/images').set(auth).field('prompt', 'mine').field('size', '256x256').field('steps', '1').attach('images', await pngBytes(8, 8), 'a.png');
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.ok(drawn >= 2 && res.body.id !== theirs, `${theirs} then ${res.body.id}`);
      assert.match(res.body.id, /^\d{8}_\d{6}_\d{4}$/);
      assert.equal(readFileSync(join(t.dataDir, 'inputs', theirs, 'image-0.png'), 'utf8'), 'theirs', 'the other process\'s input is untouched');
      assert.equal((await until(t, res.body.id, (j) => j.status === 'done', 20_000)).image_count, 1);
    } finally {
      ids.newJobId = draw;
      rmSync(join(t.dataDir, 'inputs', theirs), { recursive: true, force: true });
      other.close();
    }
  });

  // issue 47 item 2: the form endpoints do not wait (spec); wait=0 was truthy and the request hung
  test('multipart with a wait field: a 400 at once naming GET ?wait=true, nothing created', async () => {
    const before = Number((await t.http.get('/api/jobs?limit=1').set(auth)).headers['x-total-count']);
    for (const [path, fields] of [['/api/images', { prompt: 'x', steps: '1' }], ['/api/jobs', { prompt: 'x', res: '352p', seconds: '1', steps: '1' }]] as const) {
      for (const wait of ['0', 'true', 'false']) {
        const t0 = Date.now();
        let req = t.http.post(path).set(auth).timeout(1000);
        for (const [k, v] of Object.entries(fields)) req = req.field(k, v);
        const res = await req.field('wait', wait);
        assert.ok(Date.now() - t0 < 1000, `${path} wait=${wait}: answered in ${Date.now() - t0} ms`);
        assert.equal(res.status, 400, `${path} wait=${wait}: ${JSON.stringify(res.body)}`);
        assert.match(res.body.detail, /^wait is not supported on multipart forms .*GET \/api\/jobs\/\{job_id\}\?wait=true/);
      }
    }
    assert.equal(Number((await t.http.get('/api/jobs?limit=1').set(auth)).headers['x-total-count']), before, 'no job was created');
  });

  // issue 47 item 4: a file part with filename="" was dropped and the job ran without it
  test('a file part with an empty filename is refused with a 400 naming the field, never dropped', async () => {
    const png = await pngBytes();
    for (const [path, field, extra] of [['/api/images', 'images', ''], ['/api/jobs', 'images', ''], ['/api/jobs', 'audios', '']] as const) {
      for (const type of ['image/png', 'application/octet-stream', '']) {
        const b = 'kilnboundary';
        const parts = [
          `--${b}\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nx${extra}\r\n`,
          `--${b}\r\nContent-Disposition: form-data; name="steps"\r\n\r\n1\r\n`,
          `--${b}\r\nContent-Disposition: form-data; name="${field}"; filename=""\r\n${type ? `Content-Type: ${type}\r\n` : ''}\r\n`,
        ];
        const body = Buffer.concat([Buffer.from(parts.join('')), png, Buffer.from(`\r\n--${b}--\r\n`)]);
        const res = await raw(t, 'POST', path, { ...bearer, 'content-type': `multipart/form-data; boundary=${b}` }, body);
        assert.equal(res.status, 400, `${path} ${field} ${type || '(no type)'}: ${res.status} ${JSON.stringify(res.json)}`);
        assert.match(res.json.detail, new RegExp(`^${field}: a part arrived without a filename`));
      }
    }
  });

  // issue 47 item 5: ref_text and tts_ref_text had no limit (100,000 characters ran 55 s of worker time)
  test('ref_text (speech) and tts_ref_text (video) past 2,000 characters: 400 naming the limit', async () => {
    const long = 'a'.repeat(2001);
    const wav = dataUri('audio/wav', wavBytes(4));
    let res = await t.http.post('/api/v1/tts').set(auth).send({ text: 'hello', ref_audio: wav, ref_text: long });
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.equal(res.body.detail, 'ref_text is 2001 characters long; the limit is 2000 (the transcript of a reference clip of at most 30 s)');
    res = await t.http.post('/api/tts').set(auth).field('text', 'hello').field('ref_text', long).attach('ref_audio', wavBytes(4), 'ref.wav');
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.match(res.body.detail, /^ref_text is 2001 characters long/);
    res = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'x', tts_text: 'hi', tts_ref_text: long, audios: [wav] });
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.match(res.body.detail, /^tts_ref_text is 2001 characters long; the limit is 2000/);
    res = await t.http.post('/api/v1/tts').set(auth).send({ text: 'hello', ref_audio: wav, ref_text: 'a'.repeat(2000) });
    assert.equal(res.status, 200, `2,000 is within the limit: ${JSON.stringify(res.body)}`);
  });

  // issue 47 item 6: gif is taken (its first frame), and the refusal of other formats says so
  test('a gif input is accepted; a tiff is refused naming png, jpeg, webp and gif', async () => {
    const sharp = (await import('sharp')).default;
    const gif = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#468' } }).gif().toBuffer();
    const ok = await t.http.post('/api/images').set(auth).field('prompt', 'x').field('steps', '1').attach('images', gif, 'a.gif');
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.image_count, 1);
    const tiff = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#468' } }).tiff().toBuffer();
    const bad = await t.http.post('/api/images').set(auth).field('prompt', 'x').field('steps', '1').attach('images', tiff, 'a.tiff');
    assert.equal(bad.status, 400);
    assert.match(bad.body.detail, /tiff images are not accepted; use png, jpeg, webp or gif/);
  });

  test('JSON nested 1,500+ levels, on every JSON endpoint: 400 naming the nesting', async () => {
    for (const path of ['/api/v1/generate', '/api/v1/image', '/api/v1/tts']) {
      for (const body of [deepJson(1500), Buffer.from(`{"prompt":${'['.repeat(3000)}${']'.repeat(3000)}}`)]) {
        const res = await raw(t, 'POST', path, json, body);
        assert.equal(res.status, 400, `${path}: ${JSON.stringify(res.json)}`);
        assert.match(res.json.detail, /nested more than 16 levels deep/);
      }
    }
  });

  test('multipart field names nested 3,000 levels (prompt[a][a]...): 400', async () => {
    const res = await t.http.post('/api/images').set(auth).field(`prompt${'[a]'.repeat(3000)}`, 'x').field('steps', '1');
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.match(res.body.detail, /nested more than 16 levels deep/);
  });

  test('Content-Encoding gzip, deflate or br on a plain body, or a truncated gzip body: 415 naming the header', async () => {
    const plain = Buffer.from(JSON.stringify({ prompt: 'x', steps: 1 }));
    const gz = gzipSync(plain);
    const cases: [string, Buffer][] = [['gzip', plain], ['deflate', plain], ['br', plain], ['gzip', gz.subarray(0, gz.length - 8)], ['gzip', gz], ['deflate', deflateSync(plain)]];
    for (const [encoding, body] of cases) {
      for (const path of ['/api/v1/image', '/api/images', '/api/tts']) {
        const res = await raw(t, 'POST', path, { ...json, 'content-encoding': encoding }, body);
        assert.equal(res.status, 415, `${encoding} on ${path}`);
        assert.equal(res.json.detail, `request bodies are not accepted compressed (Content-Encoding: ${encoding}); send the body uncompressed`);
      }
    }
  });

  test('GET /api/jobs?offset= past 2^53 (99999999999999999999, 2^63-1): 400', async () => {
    for (const offset of ['99999999999999999999', '9223372036854775807', '9007199254740992']) {
      const res = await t.http.get(`/api/jobs?offset=${offset}`).set(auth);
      assert.equal(res.status, 400, offset);
      assert.match(res.body.detail, /^offset must be from 0 to 9007199254740991/);
    }
    assert.equal((await t.http.get('/api/jobs?offset=9007199254740991').set(auth)).status, 200);
  });

  test('Content-Type multipart/mixed on the form endpoints: 415', async () => {
    for (const path of ['/api/images', '/api/tts', '/api/jobs']) {
      const res = await raw(t, 'POST', path, { ...bearer, 'content-type': 'multipart/mixed; boundary=x' }, Buffer.from('--x\r\n\r\nhello\r\n--x--\r\n'));
      assert.equal(res.status, 415, path);
      assert.match(res.json.detail, /multipart\/mixed is not accepted; send forms as multipart\/form-data/);
    }
  });
});

describe('a compressed body is refused before it is read', () => {
  let t: TestApp;
  before(async () => (t = await startApp({ builtinPipelines: false })));
  after(() => t.close(true));

  test('a 1 MB gzip bomb (1 GB inflated) without a token: a fast 401, ten at once, memory flat', async () => {
    const bomb = gzipSync(Buffer.alloc(1024 ** 3), { level: 9 }); // about 1 MB
    assert.ok(bomb.length < 2 * 1024 ** 2);
    const rss0 = process.memoryUsage().rss; // the API runs in this test process
    const answers = await Promise.all(Array.from({ length: 10 }, () => raw(t, 'POST', '/api/v1/image', { 'content-type': 'application/json', 'content-encoding': 'gzip' }, bomb)));
    for (const a of answers) {
      assert.equal(a.status, 401);
      assert.ok(a.ms < 1000, `answered in ${Math.round(a.ms)} ms`);
    }
    const grew = (process.memoryUsage().rss - rss0) / 1024 ** 2;
    assert.ok(grew < 100, `RSS grew ${Math.round(grew)} MB`);
    // with the token, the encoding itself is refused, as fast
    const withToken = await raw(t, 'POST', '/api/v1/image', { ...json, 'content-encoding': 'gzip' }, bomb);
    assert.deepEqual([withToken.status, withToken.ms < 1000], [415, true]);
  });

  test('a body to /api without the token is refused unread; a GET without it still gets the guard\'s 401', async () => {
    const res = await raw(t, 'POST', '/api/v1/image', { 'content-type': 'application/json' }, Buffer.from('{"prompt": not json'));
    assert.deepEqual([res.status, res.json.detail], [401, 'bad token'], 'the token is checked before the body is parsed');
    assert.equal((await raw(t, 'GET', '/api/status', {})).status, 401);
  });
});

describe('inputs: what the model cannot take, orphans, lying headers', () => {
  test('an edit reference the model cannot take (100000x1) is a 400 at creation naming the limit', async () => {
    const t = await startApp({ builtinPipelines: false, pipelines: [testPipeline('image', 'imgmain')] });
    try {
      const thin = await (await import('sharp')).default({ create: { width: 100_000, height: 1, channels: 3, background: '#888' } }).png().toBuffer();
      for (const [w, h] of [[100_000, 1], [1, 100_000]]) {
        const img = w === 1 ? await (await import('sharp')).default(thin).rotate(90).png().toBuffer() : thin;
        const res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', steps: 1, images: [dataUri('image/png', img)] });
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.match(res.body.detail, new RegExp(`^images\\[0\\]: a ${w}x${h} picture .* more than 200 times .*; crop it`));
      }
      const ok = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', steps: 1, images: [dataUri('image/png', await pngBytes(150, 1))] });
      assert.equal(ok.status, 200, '150:1 is within the limit');
    } finally {
      await t.close(true);
    }
  });

  test('inputs no job owns (a speech request cut off by a kill) are swept at start; a queued job keeps its own', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kiln-sweep-'));
    try {
      const first = await startApp({ dataDir: dir, env: { WORKERS: 'none' } });
      const queued = (await first.http.post('/api/images').set(auth).field('prompt', 'x').field('steps', '1').attach('images', await pngBytes(), 'a.png')).body;
      await first.close();
      const orphan = join(dir, 'inputs', 'tts_20261124_120000_0001');
      mkdirSync(orphan, { recursive: true });
      writeFileSync(join(orphan, 'ref.wav'), wavBytes(4));
      const second = await startApp({ dataDir: dir, env: { WORKERS: 'none' } });
      assert.equal(existsSync(orphan), false, 'the orphaned speech input is gone');
      assert.equal(existsSync(join(dir, 'inputs', queued.id, 'image-0.png')), true, "the queued job's input stays");
      await second.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a WAV whose header lies about its data size is taken as what it holds: limits apply to the decoded length', async () => {
    const t = await startApp({ builtinPipelines: false, pipelines: [silentSpeech()] });
    try {
      const claimsMore = wavBytes(4);
      claimsMore.writeUInt32LE(0xffffffff, 40); // data chunk "4 GB" (as streaming writers leave it)
      claimsMore.writeUInt32LE(0xffffffff, 4);
      let res = await t.http.post('/api/v1/tts').set(auth).send({ text: 'hello', ref_audio: dataUri('audio/wav', claimsMore) });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const claimsTen = wavBytes(1);
      claimsTen.writeUInt32LE(10 * 16000 * 2, 40); // says 10 s, holds 1 s
      res = await t.http.post('/api/v1/tts').set(auth).send({ text: 'hello', ref_audio: dataUri('audio/wav', claimsTen) });
      assert.equal(res.status, 400);
      assert.match(res.body.detail, /^ref_audio: clip is 1\.00 s long; clips must be 3 to 30 s/);
    } finally {
      await t.close(true);
    }
  });
});
