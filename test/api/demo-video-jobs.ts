// One video job on the trained video demo through the real API, and what its clip shows: shared by the test
// (test/api/demo-video-draws: one prompt, the i2v path, same seed same bytes) and the bench that scores the
// grammar (bench/video/demo-draws: 8 prompts, minutes each on lavapipe).
import assert from 'node:assert/strict';
import { decodeAudioTrack, ffmpeg } from '../media/helpers';
import { judgeClip, videoPromptText, type ClipJudgement, type VideoDemoPrompt } from './demo-video-grammar';
import { auth, until, type TestApp } from './harness';
import { fetchCheckedMp4 } from './video-output';

/** The demo's 352p 1 s clip: 608 x 352, 39 frames at 24 fps. */
export const W = 608, H = 352, FRAMES = 39;

/** Every frame of an mp4 as rgb24 HWC. */
export function allFrames(path: string): Buffer[] {
  const { stdout } = ffmpeg(['-i', path, '-map', '0:v:0', '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-']);
  const size = W * H * 3;
  assert.equal(stdout.length % size, 0);
  return Array.from({ length: stdout.length / size }, (_, i) => stdout.subarray(i * size, (i + 1) * size));
}

/** POST /api/v1/generate with `body` (352p, 1 s added), wait for it to end, check and fetch its mp4 into `dir`. */
export async function runDemoVideoJob(t: TestApp, body: Record<string, unknown>, dir: string): Promise<{ path: string; job: Record<string, any> }> {
  const res = await t.http.post('/api/v1/generate').set(auth).send({ res: '352p', seconds: 1, ...body });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const job = await until(t, res.body.id, (j) => j.status === 'done' || j.status === 'failed', 900_000);
  assert.equal(job.status, 'done', JSON.stringify(job));
  return { path: await fetchCheckedMp4(t, job, FRAMES, dir), job };
}

/** A prompt's clip judged: the ball's color, its direction, the beep's band, and whether all three match the prompt. */
export function judgePromptClip(p: VideoDemoPrompt, path: string): { got: ClipJudgement; ok: boolean; line: string } {
  const got = judgeClip(allFrames(path), W, H, decodeAudioTrack(path, 32000, 2), 32000);
  const ok = got.ball === p.color && got.direction === p.direction && got.beep === p.beep;
  const line = `${ok ? 'ok' : 'WRONG'} "${videoPromptText(p)}": ball ${got.ball}, ${got.direction}, background ${got.background}, ${got.beep} beep (band ratio ${got.bandRatio.toFixed(2)})`;
  return { got, ok, line };
}
