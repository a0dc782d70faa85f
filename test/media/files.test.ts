import assert from 'node:assert/strict';
import { utimesSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { isTempName, removeStaleTemps, tempSibling, writeFileAtomic } from '../../src/media/files';
import { listDir, tempDir } from './helpers';

describe('atomic output files', () => {
  test('temp siblings are hidden, in the target folder, and recognisable', () => {
    const t = tempSibling('/srv/out/20250101_120000_42.mp4');
    assert.equal(dirname(t), '/srv/out');
    assert.match(basename(t), /^\.20250101_120000_42\.mp4\.[0-9a-f]{16}\.part$/);
    assert.ok(isTempName(basename(t)));
    assert.ok(!isTempName('20250101_120000_42.mp4'));
  });

  test('writeFileAtomic replaces the target in one step; removeStaleTemps clears crash leftovers only', async () => {
    const dir = tempDir();
    const target = join(dir, 'a.wav');
    writeFileSync(target, 'old');
    await writeFileAtomic(target, [Buffer.from('new '), Buffer.from('data')]);
    assert.deepEqual(listDir(dir), ['a.wav']);

    const stale = tempSibling(join(dir, 'b.mp4'));
    const fresh = tempSibling(join(dir, 'c.mp4'));
    writeFileSync(stale, 'x');
    writeFileSync(fresh, 'x');
    const old = Date.now() / 1000 - 7200;
    utimesSync(stale, old, old);
    assert.equal(await removeStaleTemps(dir), 1);
    assert.deepEqual(listDir(dir), [basename(fresh), 'a.wav'].sort());
  });
});
