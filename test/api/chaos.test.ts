// Chaos (issue 20): the service process is killed with SIGKILL at chosen points (in the hand-over between two
// jobs, while a callback waits in its retry back-off, during a speech request) and at random moments of a mixed
// load, then reopened on the same data dir. Nothing accepted may be lost, no finished output deleted, no partial
// file served, callbacks must arrive, and inputs nobody owns must be swept.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { makeGate } from './control';
import { auth, startApp, TestApp, TOKEN } from './harness';
import { dataUri, wavBytes } from './inputs';
import { startServiceProcess, type ServiceProcess } from './service-process';
import { silentSpeech, testPipeline } from './test-pipelines';

const PNG = '89504e470d0a1a0a';
type Job = Record<string, any>;

async function call(base: string, method: string, path: string, body?: object): Promise<{ status: number; body: any; bytes: Buffer }> {
  const res = await fetch(base + path, { method, headers: { Authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { status: res.status, bytes, body: (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(bytes.toString()) : undefined };
}

/** A callback receiver: answers `status()` and records every POST, with whether its Standard Webhooks signature
 * verifies with `secret`. */
async function receiver(status: () => number, secret?: string) {
  const got: { id: string; status: string; verified?: boolean }[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const job = JSON.parse(body);
      let verified: boolean | undefined;
      if (secret) {
        try {
          new Webhook(secret).verify(body, req.headers as Record<string, string>);
          verified = true;
        } catch {
          verified = false;
        }
      }
      got.push({ id: job.id, status: job.status, verified });
      res.writeHead(status()).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { got, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, close: () => server.close() };
}

/** After a restart: every accepted job is there, each done one serves a whole png, queued ones run to the end. */
async function checkNothingLost(t: TestApp, accepted: string[], doneBefore: Map<string, Buffer>): Promise<void> {
  const listed = new Set(((await call(t.url, 'GET', '/api/jobs?limit=1000')).body as Job[]).map((j) => j.id));
  for (const id of accepted) assert.ok(listed.has(id), `accepted job ${id} is listed after the restart`);
  for (const id of accepted) {
    const j = (await call(t.url, 'GET', `/api/jobs/${id}?wait=true&timeout=30`)).body as Job;
    assert.ok(j.status === 'done' || j.status === 'failed', `${id} ended: ${JSON.stringify(j)}`);
    if (j.status === 'failed') assert.ok(['interrupted by restart', 'test pipeline failure'].includes(j.error), `${id}: ${j.error}`);
    if (j.status !== 'done') continue;
    const file = await call(t.url, 'GET', `/out/${id}.png`);
    assert.equal(file.status, 200, `${id}'s png is served`);
    assert.equal(file.bytes.subarray(0, 8).toString('hex'), PNG, `${id}'s png is whole`);
    const before = doneBefore.get(id);
    if (before) assert.ok(file.bytes.equals(before), `${id}: the output finished before the kill is the same file`);
  }
  const out = readdirSync(join(t.dataDir, 'out'));
  assert.deepEqual(out.filter((n) => n.includes('.tmp') || n.startsWith('.')), [], 'no temp files left in out/');
}

describe('chaos: SIGKILL of the service at chosen points and at random', () => {
  const dirs: string[] = [];
  const services: ServiceProcess[] = [];
  const apps: TestApp[] = [];
  const dataDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'kiln-chaos-'));
    dirs.push(d);
    return d;
  };
  after(async () => {
    for (const s of services) await s.kill();
    for (const a of apps) await a.close().catch(() => {});
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const pipelines = (stepMs: number) => [testPipeline('image', 'imgmain', { stepMs }), testPipeline('image', 'imgart_turbo', { stepMs, fail: 'test pipeline failure' })];

  test('in the hand-over between two jobs: the first stays done with its file, the second is failed by the restart', { timeout: 60_000 }, async () => {
    const dir = dataDir();
    const s = await startServiceProcess(dir, { pipelines: pipelines(150) });
    services.push(s);
    const ids: string[] = [];
    // kill the moment the second job is recorded as started: the first job's end must be saved already
    const killed = new Promise<void>((resolve) => s.onLog((l) => l.msg === 'job started' && l.id === ids[1] && void s.kill().then(() => resolve())));
    ids.push((await call(s.url, 'POST', '/api/v1/image', { prompt: 'a', steps: 2 })).body.id);
    ids.push((await call(s.url, 'POST', '/api/v1/image', { prompt: 'b', steps: 20 })).body.id);
    await killed;
    const ended = s.logs.filter((l) => l.msg === 'job ended').map((l) => l.id);
    assert.deepEqual(ended, [ids[0]], 'the first job ended before the second started');

    const t = await startApp({ dataDir: dir, builtinPipelines: false, pipelines: pipelines(1) });
    apps.push(t);
    const [a, b] = [(await call(t.url, 'GET', `/api/jobs/${ids[0]}`)).body, (await call(t.url, 'GET', `/api/jobs/${ids[1]}`)).body];
    assert.deepEqual([a.status, b.status, b.error], ['done', 'failed', 'interrupted by restart']);
    await checkNothingLost(t, ids, new Map());
    await t.close();
  });

  test('while a callback waits in its back-off: it goes out after the restart, signed afresh', { timeout: 60_000 }, async () => {
    const dir = dataDir();
    let answer = 503;
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const hook = await receiver(() => answer, secret);
    try {
      const s = await startServiceProcess(dir, { pipelines: pipelines(1), env: { ALLOW_PRIVATE_URLS: '1', WEBHOOK_SECRET: secret } });
      services.push(s);
      const job = (await call(s.url, 'POST', '/api/v1/image', { prompt: 'x', steps: 1, callback_url: hook.url })).body;
      while (!hook.got.some((g) => g.id === job.id)) await new Promise((r) => setTimeout(r, 10));
      await s.kill(); // the first attempt got a 503: the delivery is in its 1 s back-off
      answer = 204;
      const t = await startApp({ dataDir: dir, builtinPipelines: false, pipelines: pipelines(1), env: { ALLOW_PRIVATE_URLS: '1', WEBHOOK_SECRET: secret } });
      apps.push(t);
      const end = Date.now() + 15_000;
      let j: Job = {};
      while (j.callback_status !== 204 && Date.now() < end) {
        await new Promise((r) => setTimeout(r, 50));
        j = (await call(t.url, 'GET', `/api/jobs/${job.id}`)).body;
      }
      assert.equal(j.callback_status, 204, 'the delivery resumed after the restart');
      const deliveries = hook.got.filter((g) => g.id === job.id);
      assert.ok(deliveries.length >= 2 && deliveries.every((d) => d.status === 'done' && d.verified), JSON.stringify(deliveries));
      await t.close();
    } finally {
      hook.close();
    }
  });

  test('during a speech request: its reference clip is swept at the next start', { timeout: 60_000 }, async () => {
    const dir = dataDir();
    const gate = makeGate();
    const s = await startServiceProcess(dir, { pipelines: [silentSpeech({ gate })] });
    services.push(s);
    const speaking = call(s.url, 'POST', '/api/v1/tts', { text: 'hello', ref_audio: dataUri('audio/wav', wavBytes(4)) }).catch(() => undefined);
    while (gate.waiting === 0) await new Promise((r) => setTimeout(r, 10));
    assert.ok(readdirSync(join(dir, 'inputs')).some((n) => n.startsWith('tts_')), 'the clip is on disk while the request runs');
    await s.kill();
    await speaking;
    const t = await startApp({ dataDir: dir, env: { WORKERS: 'none' } });
    apps.push(t);
    assert.deepEqual(readdirSync(join(dir, 'inputs')), [], 'swept');
    await t.close();
  });

  test('random kills under a mixed load (3 rounds): nothing accepted lost, finished files intact', { timeout: 120_000 }, async () => {
    const dir = dataDir();
    const accepted: string[] = [];
    const done = new Map<string, Buffer>();
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let round = 0; round < 3; round++) {
      const s = await startServiceProcess(dir, { pipelines: pipelines(20) });
      services.push(s);
      for (const [id, bytes] of done) {
        const file = await call(s.url, 'GET', `/out/${id}.png`);
        assert.ok(file.bytes.equals(bytes), `round ${round}: ${id} still served whole`);
      }
      const posting = (async () => {
        for (let i = 0; i < 8; i++) {
          const res = await call(s.url, 'POST', '/api/v1/image', { prompt: `r${round} ${i}`, steps: 1 + Math.floor(random() * 6), profile: random() < 0.2 ? 'imgart_turbo' : 'imgmain' }).catch(() => undefined);
          if (res?.status === 200) accepted.push(res.body.id);
          await new Promise((r) => setTimeout(r, random() * 80));
          if (i === 2) {
            // a burst of parallel creates (ids once collided, a 500), cut by the kill or not: no 5xx, ids unique
            const burst = await Promise.all(Array.from({ length: 12 }, (_, k) => call(s.url, 'POST', '/api/v1/image', { prompt: `r${round} burst ${k}`, steps: 1 }).catch(() => undefined)));
            assert.deepEqual(burst.filter((b) => b && b.status >= 500).map((b) => b!.body), [], `round ${round}: a burst create answered 5xx`);
            const ids = burst.filter((b) => b?.status === 200).map((b) => b!.body.id as string);
            assert.equal(new Set([...accepted, ...ids]).size, accepted.length + ids.length, 'burst ids are new');
            accepted.push(...ids);
            // a form with wait: answered at once with a 400 (unless the kill cut it), never left hanging
            const form = new FormData();
            form.set('prompt', 'x');
            form.set('wait', '0');
            const waited = await fetch(`${s.url}/api/images`, { method: 'POST', headers: { Authorization: `Bearer ${TOKEN}` }, body: form, signal: AbortSignal.timeout(1000) }).catch((err) => err as Error);
            if (!(waited instanceof Error) || waited.name === 'TimeoutError') assert.equal(waited instanceof Error ? waited.name : waited.status, 400, `round ${round}: multipart wait`);
          }
        }
      })();
      await new Promise((r) => setTimeout(r, 100 + random() * 700));
      await s.kill();
      await posting;
      // what was done before this kill must stay done, byte for byte
      const t = await startApp({ dataDir: dir, env: { WORKERS: 'none' } });
      for (const id of accepted) {
        const j = (await call(t.url, 'GET', `/api/jobs/${id}`)).body;
        if (j.status === 'done' && !done.has(id)) done.set(id, (await call(t.url, 'GET', `/out/${id}.png`)).bytes);
      }
      await t.close();
    }
    const t = await startApp({ dataDir: dir, builtinPipelines: false, pipelines: pipelines(1) });
    apps.push(t);
    await checkNothingLost(t, accepted, done);
    assert.ok(existsSync(join(dir, 'inputs')) && readdirSync(join(dir, 'inputs')).length === 0, 'every input removed once its job ended');
    await t.close();
  });
});
