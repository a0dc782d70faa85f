import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DownloadError, downloadFile, resolveUrl, type DownloadOptions } from '../../src/weights/download';
import { sha256, startHub, type Hub } from './hub-server';

const REPO = 'acme/model';

describe('downloadFile against a local hub', () => {
  let hub: Hub;
  let dir: string;
  before(async () => {
    hub = await startHub();
    dir = mkdtempSync(join(tmpdir(), 'kiln-dl-'));
  });
  after(() => hub.close());

  /** Registers `data` under a fresh path and returns download options for it. */
  function file(name: string, data: Buffer, extra: Partial<import('./hub-server').HubFile> = {}): DownloadOptions {
    hub.files.set(`${REPO}/${name}`, { data, ...extra });
    return { url: resolveUrl(hub.endpoint, REPO, 'main', name), dest: join(dir, name), label: `${REPO}@main: ${name}`, retryDelayMs: 5 };
  }

  test('a whole LFS file: CDN redirect, hub sha256 from X-Linked-Etag checked, token only sent to the hub', async () => {
    const data = randomBytes(300_001);
    const o = file('w/model.safetensors', data);
    const before = hub.log.length;
    const r = await downloadFile({ ...o, token: 'hf_secret' });
    assert.deepEqual(readFileSync(o.dest), data);
    assert.equal(existsSync(`${o.dest}.part`), false);
    assert.equal(r.sha256, sha256(data));
    assert.equal(r.sha256From, 'hub');
    assert.equal(r.commit, hub.commit);
    assert.equal(r.resumedFrom, 0);
    const reqs = hub.log.slice(before);
    assert.deepEqual(reqs.map((q) => `${q.server} ${q.method}`), ['hub HEAD', 'cdn GET']);
    assert.equal(reqs[0]!.auth, 'Bearer hf_secret');
    assert.equal(reqs[1]!.auth, undefined);
  });

  test('a small file is served by the hub itself; its git-sha1 ETag is not taken for a sha256', async () => {
    const data = Buffer.from('{"a": 1}\n');
    const o = file('config.json', data);
    const r = await downloadFile(o);
    assert.deepEqual(readFileSync(o.dest), data);
    assert.equal(r.sha256From, undefined);
    assert.equal(r.sha256, sha256(data));
  });

  test('the connection cut mid-file: the retry resumes with Range from the .part and the result is whole', async () => {
    const data = randomBytes(2_000_000);
    const o = file('cut/a.bin', data, { cutAfter: 700_000 });
    const events: string[] = [];
    const before = hub.log.length;
    const r = await downloadFile({ ...o, onEvent: (e) => events.push(e) });
    assert.deepEqual(readFileSync(o.dest), data);
    assert.equal(r.sha256From, 'hub');
    const gets = hub.log.slice(before).filter((q) => q.method === 'GET');
    assert.equal(gets.length, 2);
    assert.equal(gets[0]!.range, undefined);
    const resumedAt = Number(/^bytes=(\d+)-$/.exec(gets[1]!.range ?? '')?.[1]);
    assert.ok(resumedAt > 0 && resumedAt <= 700_000, `resumed at ${resumedAt}`);
    assert.equal(r.resumedFrom, resumedAt);
    assert.ok(events.some((e) => /retry 1 of 5/.test(e)), events.join('\n'));
    assert.ok(events.some((e) => /resuming at/.test(e)), events.join('\n'));
  });

  test('a server that ignores Range sends the whole file again: the .part is rewritten, not appended to', async () => {
    const data = randomBytes(1_200_000);
    const o = file('cut/norange.bin', data, { cutAfter: 400_000, ignoreRange: true });
    const r = await downloadFile(o);
    assert.equal(r.resumedFrom, 0);
    assert.deepEqual(readFileSync(o.dest), data);
  });

  test('an interrupted run keeps its .part; the next run resumes it', async () => {
    const data = randomBytes(1_500_000);
    const o = file('cut/b.bin', data, { cutAfter: 500_000 });
    await assert.rejects(downloadFile({ ...o, retries: 0 }), (e: DownloadError) => {
      assert.equal(e.kind, 'network');
      assert.match(e.message, /gave up after 1 attempts; .* kept in .*b\.bin\.part, run again to resume/);
      return true;
    });
    const kept = statSync(`${o.dest}.part`).size;
    assert.ok(kept > 0 && kept <= 500_000, `kept ${kept}`);
    const r = await downloadFile(o);
    assert.equal(r.resumedFrom, kept);
    assert.deepEqual(readFileSync(o.dest), data);
  });

  test('abort mid-transfer: an "interrupted" error, the .part kept for the next run', async () => {
    const data = randomBytes(8_000_000);
    const o = file('abort/c.bin', data);
    const ac = new AbortController();
    await assert.rejects(
      downloadFile({ ...o, signal: ac.signal, onProgress: (done) => done > 2_000_000 && ac.abort() }),
      (e: DownloadError) => e.kind === 'interrupted' && /interrupted; .* kept in .*c\.bin\.part, run the same command again to resume/.test(e.message),
    );
    const kept = statSync(`${o.dest}.part`).size;
    assert.ok(kept > 0 && kept < data.length, `kept ${kept}`);
    assert.equal(existsSync(o.dest), false);
    const r = await downloadFile(o);
    assert.equal(r.resumedFrom, kept);
    assert.deepEqual(readFileSync(o.dest), data);
  });

  test('size: the manifest and the hub disagree -> conflict before any transfer', async () => {
    const o = file('size/a.json', Buffer.from('x'.repeat(120)));
    const before = hub.log.length;
    await assert.rejects(downloadFile({ ...o, size: 100 }), (e: DownloadError) => e.kind === 'conflict' && /manifest says 100 bytes, the hub says 120/.test(e.message));
    assert.equal(hub.log.slice(before).filter((q) => q.method === 'GET').length, 0);
  });

  test('size: more bytes arrive than expected -> size error, nothing kept', async () => {
    const o = file('size/b.json', Buffer.from('y'.repeat(120)), { noLength: true });
    await assert.rejects(downloadFile({ ...o, size: 100 }), (e: DownloadError) => e.kind === 'size' && /received 120 bytes, expected 100/.test(e.message));
    assert.equal(existsSync(o.dest), false);
    assert.equal(existsSync(`${o.dest}.part`), false);
  });

  test('size: the CDN announces another length than the hub -> size error', async () => {
    const data = randomBytes(5000);
    const o = file('size/c.bin', data, { serve: Buffer.concat([data, Buffer.from('extra')]) });
    await assert.rejects(downloadFile(o), (e: DownloadError) => e.kind === 'size' && /sends 5005 bytes, expected 5000/.test(e.message));
  });

  test('sha256: a manifest checksum that does not match -> checksum error, file removed', async () => {
    const data = Buffer.from('{"b": 2}\n');
    const o = file('sha/a.json', data);
    const wrong = sha256(Buffer.from('something else'));
    await assert.rejects(downloadFile({ ...o, sha256: wrong }), (e: DownloadError) => {
      assert.equal(e.kind, 'checksum');
      assert.match(e.message, new RegExp(`got ${sha256(data)}, expected ${wrong} \\(from the manifest\\)`));
      return true;
    });
    assert.equal(existsSync(o.dest), false);
    assert.equal(existsSync(`${o.dest}.part`), false);
  });

  test('sha256: corrupt bytes of the right length are caught by the hub ETag', async () => {
    const data = randomBytes(4000);
    const bad = Buffer.from(data);
    bad[1234] ^= 0xff;
    const o = file('sha/b.bin', data, { serve: bad });
    await assert.rejects(downloadFile(o), (e: DownloadError) => e.kind === 'checksum' && /\(from the hub\)/.test(e.message));
    assert.equal(existsSync(o.dest), false);
  });

  test('sha256: the manifest value agrees with the hub -> checked and reported as the manifest one', async () => {
    const data = randomBytes(3000);
    const o = file('sha/c.bin', data);
    const r = await downloadFile({ ...o, sha256: sha256(data), size: data.length });
    assert.equal(r.sha256From, 'manifest');
  });

  test('404 names the file, the repo and the revision; an unknown revision says so', async () => {
    const o = file('present.json', Buffer.from('{}'));
    await assert.rejects(
      downloadFile({ ...o, url: resolveUrl(hub.endpoint, REPO, 'main', 'absent/file.bin'), label: `${REPO}@main: absent/file.bin` }),
      (e: DownloadError) => e.kind === 'not-found' && e.message.startsWith('acme/model@main: absent/file.bin: 404 Not Found: the file is not in the repo at this revision'),
    );
    await assert.rejects(
      downloadFile({ ...o, url: resolveUrl(hub.endpoint, REPO, 'v9', 'present.json'), label: `${REPO}@v9: present.json` }),
      (e: DownloadError) => e.kind === 'not-found' && /acme\/model@v9: present\.json: 404 Not Found: the revision does not exist/.test(e.message),
    );
  });

  test('500s are retried, and give up with the attempt count', async () => {
    const data = randomBytes(2000);
    const ok = file('flaky/a.bin', data, { fail500: 2 });
    await downloadFile(ok);
    assert.deepEqual(readFileSync(ok.dest), data);
    const bad = file('flaky/b.bin', data, { fail500: 10 });
    await assert.rejects(downloadFile({ ...bad, retries: 2 }), (e: DownloadError) => e.kind === 'http' && /HTTP 500 .* \(gave up after 3 attempts/.test(e.message));
  });

  test('not enough disk space is refused before the transfer', async () => {
    const o = file('huge.bin', randomBytes(2000));
    hub.files.get(`${REPO}/huge.bin`)!.noLength = true; // the hub says nothing; the manifest claims 1 PiB
    const before = hub.log.length;
    await assert.rejects(downloadFile({ ...o, size: 2 ** 50 }), (e: DownloadError) => e.kind === 'no-space' && /not enough disk space .* needs 1048576\.00 GiB more/.test(e.message));
    assert.equal(hub.log.slice(before).filter((q) => q.method === 'GET').length, 0);
  });

  test('a complete .part left by a crash before the rename is checked and kept, not fetched again', async () => {
    const data = randomBytes(6000);
    const o = file('leftover.bin', data);
    writeFileSync(`${o.dest}.part`, data);
    const before = hub.log.length;
    const r = await downloadFile(o);
    assert.equal(r.sha256From, 'hub');
    assert.deepEqual(readFileSync(o.dest), data);
    assert.equal(hub.log.slice(before).filter((q) => q.method === 'GET').length, 0);
  });
});
