import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { auth, startApp, TestApp, TOKEN } from './harness';

describe('auth', () => {
  let t: TestApp;
  before(async () => (t = await startApp()));
  after(() => t.close(true));

  test('every /api path refuses a missing token with 401 bad token', async () => {
    for (const [method, path] of [['get', '/api/status'], ['get', '/api/config'], ['get', '/api/health'], ['get', '/api/jobs'], ['get', '/api/jobs/x'], ['delete', '/api/jobs/x'], ['post', '/api/v1/generate'], ['post', '/api/jobs'], ['post', '/api/v1/image'], ['post', '/api/images'], ['post', '/api/v1/tts'], ['post', '/api/tts'], ['get', '/api/jobs/x/video'], ['get', '/api/jobs/x/image']] as const) {
      const res = await t.http[method](path);
      assert.equal(res.status, 401, `${method} ${path}`);
      assert.deepEqual(res.body, { detail: 'bad token' });
    }
  });

  test('a wrong token is refused in each of the three places', async () => {
    for (const req of [
      t.http.get('/api/status').set('Authorization', 'Bearer wrong-token-xx'),
      t.http.get('/api/status').set('x-token', 'wrong-token-xx'),
      t.http.get('/api/status?token=wrong-token-xx'),
      t.http.get('/api/status').set('Authorization', `Basic ${TOKEN}`),
      t.http.get('/api/status').set('Authorization', `Bearer ${TOKEN}x`),
    ]) {
      const res = await req;
      assert.equal(res.status, 401);
      assert.deepEqual(res.body, { detail: 'bad token' });
    }
  });

  test('the right token is accepted as Bearer, x-token or ?token=', async () => {
    for (const req of [t.http.get('/api/status').set(auth), t.http.get('/api/status').set('authorization', `bearer ${TOKEN}`), t.http.get('/api/status').set('x-token', TOKEN), t.http.get(`/api/status?token=${TOKEN}`)]) {
      const res = await req;
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { online: true, current_job: null, queued: 0 });
    }
  });

  test('several credentials: the first present of Bearer, x-token, query is the one checked', async () => {
    assert.equal((await t.http.get(`/api/status?token=wrong`).set(auth)).status, 200);
    assert.equal((await t.http.get('/api/status').set(auth).set('x-token', 'wrong')).status, 200);
    assert.equal((await t.http.get('/api/status').set('Authorization', 'Bearer wrong').set('x-token', TOKEN)).status, 401);
    assert.equal((await t.http.get(`/api/status?token=${TOKEN}`).set('x-token', 'wrong')).status, 401);
  });

  test('/out, /openapi.json, /docs and / need no token', async () => {
    assert.equal((await t.http.get('/out/nothing.png')).status, 404);
    assert.deepEqual((await t.http.get('/out/nothing.png')).body, { detail: 'no such file' });
    const doc = await t.http.get('/openapi.json');
    assert.equal(doc.status, 200);
    assert.equal(doc.body.info.version, '1.1');
    assert.equal((await t.http.get('/docs/')).status, 200);
    const root = await t.http.get('/');
    assert.equal(root.status, 200);
    assert.match(root.headers['content-type'], /text\/html/);
  });

  test('CORS: preflight answered without a token, and responses carry the allow-origin header', async () => {
    const pre = await t.http.options('/api/v1/generate').set('Origin', 'https://app.example').set('Access-Control-Request-Method', 'POST').set('Access-Control-Request-Headers', 'authorization,content-type');
    assert.equal(pre.status, 204);
    assert.equal(pre.headers['access-control-allow-origin'], 'https://app.example');
    assert.match(pre.headers['access-control-allow-methods'], /POST/);
    assert.match(pre.headers['access-control-allow-headers'], /Authorization/i);
    const res = await t.http.get('/api/status').set(auth).set('Origin', 'https://app.example');
    assert.equal(res.headers['access-control-allow-origin'], 'https://app.example');
    const denied = await t.http.get('/api/status').set('Origin', 'https://app.example');
    assert.equal(denied.status, 401);
    assert.equal(denied.headers['access-control-allow-origin'], 'https://app.example', 'a browser must be able to read the 401 body');
  });
});
