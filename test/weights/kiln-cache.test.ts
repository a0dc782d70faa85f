// Kiln's cache folder as `npm run weights` shows and clears it (src/weights/kiln-cache.ts): list counts the int8
// entries, clear-cache deletes them (and temp files of writes cut off) and nothing else; off says so.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runCli } from '../../src/weights/cli';
import { clearInt8Cache, int8CacheUsage } from '../../src/weights/kiln-cache';

const root = mkdtempSync(join(tmpdir(), 'kiln-cache-cli-'));
after(() => rmSync(root, { recursive: true, force: true }));

async function cli(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  const out: string[] = [];
  const io = { write: (s: string) => out.push(s) };
  const code = await runCli(args, { env: { WEIGHTS_DIR: join(root, 'w'), DATA_DIR: join(root, 'data'), HF_HUB_CACHE: join(root, 'no-hub'), ...env }, stdout: io, stderr: io });
  return { code, out: out.join('') };
}

test('weights list names the cache and its int8 entries; clear-cache deletes only those', async () => {
  const cache = join(root, 'kiln');
  const int8 = join(cache, 'int8');
  mkdirSync(int8, { recursive: true });
  const entry = (i: number) => `${String(i).repeat(40).slice(0, 40)}.safetensors`;
  writeFileSync(join(int8, entry(1)), Buffer.alloc(1000));
  writeFileSync(join(int8, entry(2)), Buffer.alloc(2000));
  writeFileSync(join(int8, `${entry(3)}.1234.abc.tmp`), Buffer.alloc(10)); // a write cut off
  writeFileSync(join(int8, 'notes.txt'), 'not ours');
  writeFileSync(join(cache, 'other'), 'not the int8 cache');
  assert.deepEqual(int8CacheUsage(cache), { entries: 2, bytes: 3010 });

  const listed = await cli(['list'], { KILN_CACHE_DIR: cache });
  assert.equal(listed.code, 0, listed.out);
  assert.match(listed.out, new RegExp(`Kiln cache ${cache}: 2 int8 weights quantised at a first load \\(0\\.000 GiB in int8/\\).*clear-cache empties it`));

  const cleared = await cli(['clear-cache'], { KILN_CACHE_DIR: cache });
  assert.equal(cleared.code, 0);
  assert.match(cleared.out, /deleted 3 files/);
  assert.deepEqual(readdirSync(int8), ['notes.txt']);
  assert.ok(existsSync(join(cache, 'other')));
  assert.deepEqual(clearInt8Cache(join(root, 'absent')), { files: 0, bytes: 0 }, 'no folder: nothing to do');

  assert.match((await cli(['list'], { KILN_CACHE_DIR: 'off' })).out, /Kiln cache: off/);
  assert.match((await cli(['clear-cache'], { KILN_CACHE_DIR: 'off' })).out, /nothing to clear/);
  const inside = await cli(['list'], { KILN_CACHE_DIR: join(root, 'no-hub', 'kiln') });
  assert.equal(inside.code, 1);
  assert.match(inside.out, /is inside the Hugging Face cache/);
});
