// S3Store against a real S3-compatible server (s3rver): objects come back byte for byte whether they were put from
// a file (a stream: the SDK's default aws-chunked upload once stored its chunk framing inside the object here) or
// from memory, a missing key opens as undefined, and deletePrefix removes exactly the prefix.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { S3Store } from '../../src/storage/s3-store';
import { startS3, type S3Server } from './services';

async function bytesOf(store: S3Store, key: string): Promise<Buffer | undefined> {
  const o = await store.open(key);
  if (!o) return undefined;
  const parts: Buffer[] = [];
  for await (const c of o.body) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

describe('S3Store on s3rver', () => {
  let s3: S3Server;
  let store: S3Store;
  const dir = mkdtempSync(join(tmpdir(), 'kiln-s3store-'));

  before(async () => {
    s3 = await startS3();
    store = new S3Store({ endpoint: s3.env.S3_ENDPOINT, bucket: s3.env.S3_BUCKET!, region: 'us-east-1', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', forcePathStyle: true });
  });
  after(async () => {
    store?.destroy();
    await s3?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a file of several upload chunks and a buffer come back byte for byte (open and download)', async () => {
    const big = randomBytes(300_000 + Math.floor(Math.random() * 1000));
    const path = join(dir, 'big.bin');
    writeFileSync(path, big);
    await store.put('jobs/a/a.png', path, 'image/png');
    const small = randomBytes(17);
    await store.put('jobs/a/inputs/small', small);
    const o = await store.open('jobs/a/a.png');
    assert.equal(o?.size, big.length);
    assert.equal(o?.type, 'image/png');
    o?.body.destroy();
    assert.ok((await bytesOf(store, 'jobs/a/a.png'))!.equals(big), 'the streamed upload is the file, no chunk framing');
    assert.ok((await bytesOf(store, 'jobs/a/inputs/small'))!.equals(small));
    await store.download('jobs/a/a.png', join(dir, 'back.bin'));
    assert.ok(readFileSync(join(dir, 'back.bin')).equals(big));
  });

  test('a byte range opens as that span with its Content-Range; a span past the end says the size', async () => {
    const data = randomBytes(5000 + Math.floor(Math.random() * 1000));
    await store.put('jobs/r/r.mp4', data, 'video/mp4');
    const a = Math.floor(Math.random() * 4000), b = a + Math.floor(Math.random() * 900);
    const o = await store.open('jobs/r/r.mp4', `bytes=${a}-${b}`);
    assert.ok(o && !('unsatisfiable' in o));
    assert.deepEqual([o.size, o.range], [b - a + 1, `bytes ${a}-${b}/${data.length}`]);
    const parts: Buffer[] = [];
    for await (const c of o.body) parts.push(c as Buffer);
    assert.ok(Buffer.concat(parts).equals(data.subarray(a, b + 1)));
    assert.deepEqual(await store.open('jobs/r/r.mp4', `bytes=${data.length + 1}-`), { unsatisfiable: data.length });
    assert.equal(await store.open('jobs/none/r.mp4', 'bytes=0-9'), undefined);
  });

  test('a missing key opens as undefined; deletePrefix removes that prefix only', async () => {
    assert.equal(await store.open('jobs/none/none.png'), undefined);
    for (const k of ['jobs/b/b.png', 'jobs/b/inputs/x', 'jobs/b2/b2.png']) await store.put(k, Buffer.from(k));
    await store.deletePrefix('jobs/b/');
    assert.equal(await bytesOf(store, 'jobs/b/b.png'), undefined);
    assert.equal(await bytesOf(store, 'jobs/b/inputs/x'), undefined);
    assert.equal((await bytesOf(store, 'jobs/b2/b2.png'))?.toString(), 'jobs/b2/b2.png');
  });
});
