// A finished video job's mp4 as the API tests check it: fetched from its `video` URL into `dir`, then H.264 608x352
// at 24 fps with `frames` frames and a stereo 32 kHz AAC track (the demo jobs' 352p output). Returns its path.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { countVideoFrames, probe } from '../media/helpers';
import type { TestApp } from './harness';

export async function fetchCheckedMp4(t: TestApp, job: Record<string, any>, frames: number, dir: string): Promise<string> {
  const res = await t.http.get(job.video).buffer(true);
  assert.equal(res.status, 200);
  const path = join(dir, `${job.id}.mp4`);
  writeFileSync(path, res.body);
  const p = probe(path);
  assert.deepEqual([p.video?.codec, p.video?.width, p.video?.height, p.video?.fps], ['h264', 608, 352, 24]);
  assert.deepEqual([p.audio?.codec, p.audio?.sampleRate, p.audio?.layout], ['aac', 32000, 'stereo']);
  assert.equal(countVideoFrames(path), frames);
  return path;
}
