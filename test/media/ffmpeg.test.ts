// Which ffmpeg runs (issue 47 item 9): one resolver for the API, the worker and the tests, a maintained build.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { FFMPEG_PATH, resolveFfmpeg } from '../../src/media/ffmpeg';

describe('resolveFfmpeg', () => {
  test('the ffmpeg in use is a maintained build (5.x or later), not the 2018 static 4.1, and has libx264', () => {
    const r = spawnSync(FFMPEG_PATH, ['-hide_banner', '-version'], { encoding: 'utf8' });
    assert.equal(r.status, 0, `${FFMPEG_PATH}: ${r.error?.message ?? r.stderr}`);
    const m = /^ffmpeg version \D*(\d+)\.(\d+)/.exec(r.stdout);
    assert.ok(m, r.stdout.split('\n')[0]);
    assert.ok(Number(m[1]) >= 5, `ffmpeg ${m[1]}.${m[2]} at ${FFMPEG_PATH}`);
    assert.match(r.stdout, /--enable-libx264/);
  });

  test('FFMPEG (absolute) wins; else the first executable ffmpeg on PATH; a relative FFMPEG is refused', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kiln-ffmpeg-'));
    try {
      const empty = join(dir, 'empty');
      const bin = join(dir, 'bin');
      for (const d of [empty, bin]) mkdirSync(d);
      writeFileSync(join(empty, 'ffmpeg'), ''); // not executable: skipped
      writeFileSync(join(bin, 'ffmpeg'), '#!/bin/sh\n');
      chmodSync(join(bin, 'ffmpeg'), 0o755);
      assert.equal(resolveFfmpeg({ PATH: `${empty}:${bin}` }), join(bin, 'ffmpeg'));
      assert.equal(resolveFfmpeg({ PATH: `${empty}:${bin}`, FFMPEG: '/opt/ffmpeg/bin/ffmpeg' }), '/opt/ffmpeg/bin/ffmpeg');
      assert.equal(resolveFfmpeg({ PATH: empty }), 'ffmpeg');
      assert.throws(() => resolveFfmpeg({ FFMPEG: 'bin/ffmpeg' }), /absolute path/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
