import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer as createHttp, IncomingMessage, Server } from 'node:http';
import { createServer as createHttps } from 'node:https';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BlockedAddressError, guardedLookup, isBlockedAddress } from '../../src/net/address-policy';
import { auth, startApp, TestApp, until } from './harness';
import { pngBytes } from './inputs';
import { makeGate } from './control';
import { testPipeline } from './test-pipelines';

/** A self-signed certificate for 127.0.0.1 / localhost, made by openssl for this run. */
function selfSigned(): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-tls-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'k.pem'), '-out', join(dir, 'c.pem'), '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { stdio: 'ignore' });
  return { key: readFileSync(join(dir, 'k.pem'), 'utf8'), cert: readFileSync(join(dir, 'c.pem'), 'utf8') };
}

const listen = (s: Server) => new Promise<number>((r) => s.listen(0, '127.0.0.1', () => r((s.address() as AddressInfo).port)));
const body = (req: IncomingMessage) => new Promise<string>((r) => { let b = ''; req.on('data', (c) => (b += c)); req.on('end', () => r(b)); });

test('address policy: loopback, private, link-local, unspecified, CGNAT, v4-mapped and v6 local are blocked', () => {
  for (const a of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '0.0.0.0', '100.64.0.1', '::1', '::', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', '224.0.0.1']) {
    assert.equal(isBlockedAddress(a), true, a);
  }
  for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '172.32.0.1', '::ffff:8.8.8.8']) assert.equal(isBlockedAddress(a), false, a);
});

describe('outbound URLs refused without ALLOW_PRIVATE_URLS', () => {
  let t: TestApp;
  before(async () => (t = await startApp({ pipelines: [testPipeline('image', 'imgmain')] })));
  after(() => t.close(true));

  test('input URLs: http, loopback literals, names resolving to loopback, malformed', async () => {
    const cases: [string, RegExp][] = [
      ['http://example.com/a.png', /images\[0\]: must be an https URL or a base64 data URI \(got http\)/],
      ['https://127.0.0.1/a.png', /127.0.0.1 is a loopback, private, link-local or unspecified address/],
      ['https://[::1]/a.png', /::1 is a loopback/],
      ['https://169.254.169.254/latest/meta-data', /169.254.169.254 is a loopback/],
      ['https://localhost/a.png', /localhost is not fetched/],
      ['https://localtest.kiln.invalid/a.png', /images\[0\]: download from localtest.kiln.invalid failed/],
      ['ftp://example.com/a.png', /must be an https URL/],
      ['https//no-scheme', /images\[0\]: not a valid URL/],
    ];
    for (const [url, reason] of cases) {
      const res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', images: [url] });
      assert.equal(res.status, 400, url);
      assert.match(res.body.detail, reason);
    }
  });

  test('a name that resolves to a private address is refused at connect time (the resolved address is checked)', async () => {
    // The agents' lookup is what connects: it must refuse what the name resolves to, whatever the name.
    const err = await new Promise<Error | null>((r) => guardedLookup(false)('localhost', {}, (e) => r(e)));
    assert.ok(err instanceof BlockedAddressError);
    assert.match(err.message, /localhost resolves to (127\.0\.0\.1|::1), a loopback/);
    const ok = await new Promise<Error | null>((r) => guardedLookup(true)('localhost', { all: true }, (e) => r(e)));
    assert.equal(ok, null);
    // And through the API, a URL whose host only the resolver can judge: the machine's own name in /etc/hosts.
    const hosts = readFileSync('/etc/hosts', 'utf8').split('\n').map((l) => l.trim().split(/\s+/)).filter((p) => p.length > 1 && !p[0].startsWith('#'));
    const local = hosts.find((p) => isBlockedAddress(p[0]) && p.slice(1).some((n) => n !== 'localhost' && !n.includes(':')));
    if (!local) return;
    const name = local.slice(1).find((n) => n !== 'localhost')!;
    const res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', images: [`https://${name}/a.png`] });
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /resolves to .*, a loopback, private, link-local or unspecified address, which this service does not fetch/);
  });

  test('a callback to a private address is not sent, and the job still finishes', async () => {
    const res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', steps: 1, callback_url: 'http://localhost.:9/cb' });
    assert.equal(res.status, 200);
    const done = await until(t, res.body.id, (j) => j.status === 'done');
    assert.equal(done.callback_status, undefined);
  });
});

describe('outbound with ALLOW_PRIVATE_URLS=1: https downloads, size cap while streaming, callbacks with retries', () => {
  let t: TestApp;
  let https: Server;
  let cb: Server;
  let httpsPort = 0;
  let cbPort = 0;
  const received: { path: string; body: any }[] = [];
  let failuresLeft = 0;
  const hold = makeGate();
  before(async () => {
    const tls = selfSigned();
    const png = await pngBytes(40, 30);
    https = createHttps(tls, (req, res) => {
      if (req.url === '/ok.png') return res.end(png);
      if (req.url === '/huge.png') {
        // No content-length: the cap must apply while streaming.
        res.writeHead(200, { 'content-type': 'image/png' });
        const chunk = Buffer.alloc(1 << 20, 7);
        let sent = 0;
        const pump = () => { while (sent < 40 && res.write(chunk)) sent++; if (sent < 40) res.once('drain', pump); else res.end(); };
        res.on('error', () => {});
        return pump();
      }
      if (req.url === '/declared-huge.png') { res.writeHead(200, { 'content-length': String(30 * 1024 * 1024) }); return res.end(); }
      res.writeHead(404).end();
    });
    httpsPort = await listen(https);
    cb = createHttp(async (req, res) => {
      received.push({ path: req.url!, body: JSON.parse(await body(req)) });
      if (failuresLeft > 0) { failuresLeft--; return res.writeHead(503).end(); }
      res.writeHead(204).end();
    });
    cbPort = await listen(cb);
    t = await startApp({ env: { ALLOW_PRIVATE_URLS: '1' }, outbound: { ca: tls.cert }, pipelines: [testPipeline('image', 'imgmain'), testPipeline('image', 'imgmain_bf16', { fail: 'boom' }), testPipeline('image', 'imgart_turbo', { gate: hold })] });
  });
  after(async () => {
    await t.close(true);
    https.close();
    cb.close();
  });

  test('an https URL is downloaded and accepted; 404 and oversized ones are refused with reasons', async () => {
    let res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', steps: 1, images: [`https://127.0.0.1:${httpsPort}/ok.png`], size_from_ref: true, wait: true });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual([res.body.mode, res.body.image_count, res.body.size_from_ref, res.body.size, res.body.aspect], ['edit', 1, true, '1184x896', '37:28']);
    res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', images: [`https://127.0.0.1:${httpsPort}/missing.png`] });
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /images\[0\]: download failed: 127.0.0.1:\d+ answered HTTP 404/);
    res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', images: [`https://127.0.0.1:${httpsPort}/huge.png`] });
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /images\[0\]: file is larger than 25 MB/);
    res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', images: [`https://127.0.0.1:${httpsPort}/declared-huge.png`] });
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /images\[0\]: file is 30 MB; the limit is 25 MB/);
  });

  test('callbacks: the job object is POSTed when the job ends, retried on 5xx, callback_status stored', async () => {
    failuresLeft = 2;
    const res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'call me', steps: 1, callback_url: `http://127.0.0.1:${cbPort}/hook?x=1` });
    const done = await until(t, res.body.id, (j) => j.callback_status === 204);
    assert.equal(done.callback_status, 204);
    const calls = received.filter((r) => r.body.id === res.body.id);
    assert.equal(calls.length, 3, 'two 503s, then success');
    assert.equal(calls[2].path, '/hook?x=1');
    assert.equal(calls[2].body.status, 'done');
    assert.equal(calls[2].body.image, `/out/${res.body.id}.png`);
    const f = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', profile: 'imgmain_bf16', steps: 1, callback_url: `http://127.0.0.1:${cbPort}/failed` });
    const failed = await until(t, f.body.id, (j) => j.callback_status !== undefined);
    assert.equal(failed.status, 'failed');
    assert.equal(received.find((r) => r.body.id === f.body.id)!.body.error, 'boom');
  });

  test('callbacks on cancel: a cancelled queued job is delivered as failed "cancelled"', async () => {
    // A gated job holds the GPU, so the callback job is certainly still queued when it is deleted.
    const holder = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', profile: 'imgart_turbo', steps: 1 });
    await until(t, holder.body.id, (j) => j.status === 'running');
    const res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', steps: 1, callback_url: `http://127.0.0.1:${cbPort}/cancel` });
    const del = await t.http.delete(`/api/jobs/${res.body.id}`).set(auth);
    assert.equal(del.body.action, 'cancelled');
    const j = await until(t, res.body.id, (x) => x.callback_status !== undefined);
    assert.deepEqual([j.status, j.error, j.callback_status], ['failed', 'cancelled', 204]);
    hold.openAll();
    await until(t, holder.body.id, (x) => x.status === 'done');
  });
});
