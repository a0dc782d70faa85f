// Signed webhooks (issue 14): with WEBHOOK_SECRET every callback carries the Standard Webhooks headers, verified here
// with the `standardwebhooks` package; the webhook-id stays the same on every attempt, each attempt is signed afresh;
// Retry-After is honoured, a 410 stops the retries, CALLBACK_MAX_AGE_S caps them.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { auth, startApp, TestApp, until } from './harness';
import { testPipeline } from './test-pipelines';

interface Hit {
  at: number;
  headers: Record<string, string>;
  body: string;
}

/** A receiver that records every POST and answers what `answer(n)` says for the n-th (from 0). */
async function receiver(answer: (n: number) => { status: number; headers?: Record<string, string> }) {
  const hits: Hit[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const a = answer(hits.length);
      hits.push({ at: Date.now(), headers: req.headers as Record<string, string>, body });
      res.writeHead(a.status, a.headers).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { hits, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, close: () => server.close() };
}

const secret = `whsec_${randomBytes(32).toString('base64')}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('signed webhooks', () => {
  let t: TestApp;
  before(async () => {
    t = await startApp({
      builtinPipelines: false,
      env: { ALLOW_PRIVATE_URLS: '1', WEBHOOK_SECRET: secret, CALLBACK_MAX_AGE_S: '4' },
      outbound: { callbackRetryDelaysMs: [1100, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300] },
      pipelines: [testPipeline('image', 'imgmain')],
    });
  });
  after(() => t.close(true));
  const run = async (url: string) => (await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', steps: 1, callback_url: url })).body.id as string;

  test('every attempt verifies with standardwebhooks; the same webhook-id, a fresh timestamp and signature each time', async () => {
    const hook = await receiver((n) => ({ status: n === 0 ? 503 : 200 }));
    try {
      const id = await run(hook.url);
      await until(t, id, (j) => j.callback_status === 200, 10_000);
      assert.equal(hook.hits.length, 2);
      const wh = new Webhook(secret);
      for (const h of hook.hits) {
        const payload = wh.verify(h.body, h.headers) as Record<string, unknown>;
        assert.deepEqual([payload.id, payload.status], [id, 'done'], 'the body is the job object');
      }
      const [a, b] = hook.hits;
      assert.equal(a.headers['webhook-id'], b.headers['webhook-id']);
      assert.ok(Number(b.headers['webhook-timestamp']) > Number(a.headers['webhook-timestamp']), 're-signed with a fresh timestamp');
      assert.notEqual(a.headers['webhook-signature'], b.headers['webhook-signature']);
      assert.equal(a.body, b.body, 'the same body on every attempt');
      assert.throws(() => new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify(a.body, a.headers), 'another secret does not verify');
    } finally {
      hook.close();
    }
  });

  test('Retry-After is honoured: the next attempt waits at least that long', async () => {
    const hook = await receiver((n) => (n === 0 ? { status: 429, headers: { 'Retry-After': '2' } } : { status: 204 }));
    try {
      const id = await run(hook.url);
      await until(t, id, (j) => j.callback_status === 204, 10_000);
      assert.ok(hook.hits[1].at - hook.hits[0].at >= 1900, `${hook.hits[1].at - hook.hits[0].at} ms between the attempts`);
    } finally {
      hook.close();
    }
  });

  test('a 410 stops the retries; otherwise they stop CALLBACK_MAX_AGE_S after the job ended', async () => {
    const gone = await receiver(() => ({ status: 410 }));
    const down = await receiver(() => ({ status: 500 }));
    try {
      const a = await run(gone.url);
      const b = await run(down.url);
      await sleep(5500);
      assert.equal(gone.hits.length, 1, '410: one attempt only');
      assert.equal((await t.http.get(`/api/jobs/${a}`).set(auth)).body.callback_status, 410);
      const attempts = down.hits.length;
      assert.ok(attempts >= 3 && attempts <= 12, `${attempts} attempts within the 4 s age`);
      const last = down.hits.at(-1)!.at;
      const ended = ((await t.http.get(`/api/jobs/${b}`).set(auth)).body.finished as number) * 1000;
      assert.ok(last - ended <= 4500, 'no attempt after CALLBACK_MAX_AGE_S');
      await sleep(800);
      assert.equal(down.hits.length, attempts, 'given up');
    } finally {
      gone.close();
      down.close();
    }
  });
});

test('a WEBHOOK_SECRET that is not whsec_ + base64 of 24 to 64 bytes stops startup naming it', async () => {
  const { loadSettings, SettingsError } = await import('../../src/config/settings');
  for (const bad of ['secret', 'whsec_', `whsec_${randomBytes(8).toString('base64')}`, 'whsec_not base64!']) {
    assert.throws(() => loadSettings({ WEBHOOK_SECRET: bad }), (e: Error) => e instanceof SettingsError && e.message.startsWith('WEBHOOK_SECRET'));
  }
  assert.equal(loadSettings({ WEBHOOK_SECRET: secret }).webhookSecret?.length, 32);
});
