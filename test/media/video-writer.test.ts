import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { CancelledError } from '../../src/common/errors';
import { openVideoWriter } from '../../src/media/video-writer';
import type { PcmAudio } from '../../src/media/types';
import { countVideoFrames, decodeAudioTrack, listDir, mp4Boxes, near, pixel, probe, rms, tempDir, videoFrameRgb } from './helpers';

const W = 160;
const H = 96;
const FRAMES = 22; // 17k+5 with k=1: 0.9167 s
const CLIP_S = FRAMES / 24;
const AAC_FRAME_S = 1024 / 32000; // the encoder pads the last AAC frame

function sine(seconds: number, rate: number, channels: 1 | 2, layout: 'planar' | 'interleaved' = 'planar', hz = 440): PcmAudio {
  const n = Math.round(seconds * rate);
  const data = new Float32Array(n * channels);
  for (let c = 0; c < channels; c++) {
    for (let i = 0; i < n; i++) {
      const v = 0.5 * Math.sin((2 * Math.PI * hz * (c + 1) * i) / rate);
      if (layout === 'planar') data[c * n + i] = v;
      else data[i * channels + c] = v;
    }
  }
  return { data, sampleRate: rate, channels, layout };
}

/** A moving gradient frame, HWC rgb24. */
function gradientFrame(i: number): Buffer {
  const b = Buffer.alloc(W * H * 3);
  for (let y = 0; y < H; y++)
    for (let x = 0; x < W; x++) {
      const o = (y * W + x) * 3;
      b[o] = (x * 255) / W;
      b[o + 1] = (y * 255) / H;
      b[o + 2] = (i * 10) & 255;
    }
  return b;
}

describe('openVideoWriter', () => {
  test('uint8 frames and stereo audio given at close: H.264 yuv420p, 24 fps, exact frames, AAC stereo 32 kHz, faststart', async () => {
    const dir = tempDir();
    const path = join(dir, 'job.mp4');
    const w = await openVideoWriter({ path, width: W, height: H, frames: FRAMES });
    // a view with a non-zero byteOffset must be read correctly
    const backing = Buffer.alloc(W * H * 3 + 16);
    for (let i = 0; i < FRAMES; i++) {
      gradientFrame(i).copy(backing, 16);
      await w.writeFrame(new Uint8Array(backing.buffer, backing.byteOffset + 16, W * H * 3));
    }
    assert.equal(w.framesWritten, FRAMES);
    // 2 s of 48 kHz audio: longer than the clip, so it is trimmed
    const res = await w.close(sine(2, 48000, 2, 'interleaved'));
    assert.equal(res.path, path);
    assert.deepEqual(listDir(dir), ['job.mp4'], 'temp files are gone');

    const p = probe(path);
    assert.match(p.container, /mp4/);
    assert.equal(p.video?.codec, 'h264');
    assert.equal(p.video?.pixFmt, 'yuv420p');
    assert.equal(p.video?.colour.includes('bt709'), true);
    assert.equal(p.video?.width, W);
    assert.equal(p.video?.height, H);
    assert.equal(p.video?.fps, 24);
    assert.equal(p.audio?.codec, 'aac');
    assert.equal(p.audio?.sampleRate, 32000);
    assert.equal(p.audio?.layout, 'stereo');
    assert.equal(countVideoFrames(path), FRAMES);
    const audio = decodeAudioTrack(path, 32000, 2);
    const audioS = audio.length / 2 / 32000;
    assert.ok(Math.abs(audioS - CLIP_S) <= AAC_FRAME_S, `audio ${audioS} s vs video ${CLIP_S} s`);
    assert.ok(p.durationS <= CLIP_S + AAC_FRAME_S + 0.01, `container duration ${p.durationS}`);
    const boxes = mp4Boxes(readFileSync(path));
    assert.ok(boxes.indexOf('moov') >= 0 && boxes.indexOf('moov') < boxes.indexOf('mdat'), `boxes ${boxes.join(',')}`);
    assert.equal(res.bytes, readFileSync(path).length);

    // first frame matches what was written (lossy: a tolerance)
    const f0 = videoFrameRgb(path, W, H, 0);
    const want = gradientFrame(0);
    for (const [x, y] of [[10, 10], [80, 48], [150, 90]]) assert.ok(near(pixel(f0, W, x, y), pixel(want, W, x, y), 12), `pixel ${x},${y}`);
  });

  test('float frames: [-1, 1] HWC and [0, 1] CHW give the right colours; audio given at open', async () => {
    const dir = tempDir();
    // left half red, right half blue
    const hwc = new Float32Array(W * H * 3);
    const chw = new Float32Array(W * H * 3);
    const n = W * H;
    for (let y = 0; y < H; y++)
      for (let x = 0; x < W; x++) {
        const red = x < W / 2;
        const o = (y * W + x) * 3;
        hwc.set(red ? [1, -1, -1] : [-1, -1, 1], o);
        chw[y * W + x] = red ? 1 : 0;
        chw[2 * n + y * W + x] = red ? 0 : 1;
      }
    for (const [name, frame, floatRange, frameLayout] of [
      ['hwc', hwc, 'signed', 'hwc'],
      ['chw', chw, 'unit', 'chw'],
    ] as const) {
      const path = join(dir, `${name}.mp4`);
      const w = await openVideoWriter({ path, width: W, height: H, frames: FRAMES, floatRange, frameLayout, audio: sine(1, 32000, 2) });
      for (let i = 0; i < FRAMES; i++) await w.writeFrame(frame);
      await w.close();
      const f = videoFrameRgb(path, W, H, FRAMES - 1);
      assert.ok(near(pixel(f, W, 20, 48), [255, 0, 0], 24), `${name} left ${pixel(f, W, 20, 48)}`);
      assert.ok(near(pixel(f, W, 140, 48), [0, 0, 255], 24), `${name} right ${pixel(f, W, 140, 48)}`);
    }
  });

  test('short mono 24 kHz audio is duplicated to both channels and padded with silence', async () => {
    const dir = tempDir();
    const path = join(dir, 'mono.mp4');
    const w = await openVideoWriter({ path, width: W, height: H, frames: FRAMES });
    for (let i = 0; i < FRAMES; i++) await w.writeFrame(gradientFrame(i));
    await w.close(sine(0.4, 24000, 1));
    const p = probe(path);
    assert.equal(p.audio?.layout, 'stereo');
    assert.equal(p.audio?.sampleRate, 32000);
    const a = decodeAudioTrack(path, 32000, 2);
    const n = a.length / 2;
    assert.ok(Math.abs(n / 32000 - CLIP_S) <= AAC_FRAME_S, `audio ${n / 32000} s`);
    const toneEnd = Math.round(0.35 * 32000);
    const left = rms(a, { start: 0, stride: 2, from: 1000, to: toneEnd });
    const right = rms(a, { start: 1, stride: 2, from: 1000, to: toneEnd });
    assert.ok(Math.abs(left - 0.5 / Math.SQRT2) < 0.05, `left rms ${left}`);
    assert.ok(Math.abs(left - right) < 0.01, `left ${left} right ${right}`);
    assert.ok(rms(a, { stride: 2, from: Math.round(0.5 * 32000), to: n - 100 }) < 0.01, 'padding is silent');
  });

  test('no audio at all gives a silent stereo AAC track of the clip length', async () => {
    const dir = tempDir();
    const path = join(dir, 'silent.mp4');
    const w = await openVideoWriter({ path, width: W, height: H, frames: FRAMES });
    for (let i = 0; i < FRAMES; i++) await w.writeFrame(gradientFrame(i));
    await w.close();
    const p = probe(path);
    assert.equal(p.audio?.codec, 'aac');
    assert.equal(p.audio?.layout, 'stereo');
    const a = decodeAudioTrack(path, 32000, 2);
    assert.ok(Math.abs(a.length / 2 / 32000 - CLIP_S) <= AAC_FRAME_S);
    assert.ok(rms(a) < 1e-3);
  });

  test('frame count is enforced; a failed close leaves no files', async () => {
    const dir = tempDir();
    const w = await openVideoWriter({ path: join(dir, 'a.mp4'), width: W, height: H, frames: 2 });
    await assert.rejects(w.writeFrame(Buffer.alloc(10)), /expected 160x96x3/);
    await w.writeFrame(gradientFrame(0));
    await assert.rejects(w.close(), /1 of 2 frames/);
    assert.deepEqual(listDir(dir), []);

    const w2 = await openVideoWriter({ path: join(dir, 'b.mp4'), width: W, height: H, frames: 1 });
    await w2.writeFrame(gradientFrame(0));
    await assert.rejects(w2.writeFrame(gradientFrame(1)), /already written/);
    await w2.close();
    assert.deepEqual(listDir(dir), ['b.mp4']);
    await assert.rejects(openVideoWriter({ path: join(dir, 'c.mp4'), width: 161, height: H, frames: 1 }), /even/);
  });

  test('abort mid-stream kills ffmpeg, removes temp files and throws CancelledError', async () => {
    const dir = tempDir();
    const ac = new AbortController();
    const w = await openVideoWriter({ path: join(dir, 'x.mp4'), width: W, height: H, frames: FRAMES, signal: ac.signal });
    for (let i = 0; i < 5; i++) await w.writeFrame(gradientFrame(i));
    ac.abort('job cancelled');
    await assert.rejects(w.writeFrame(gradientFrame(5)), (e) => e instanceof CancelledError && e.message === 'job cancelled');
    await assert.rejects(w.close(), CancelledError);
    // fail() removes temps asynchronously after the kill; wait for it
    for (let i = 0; i < 50 && listDir(dir).length; i++) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(listDir(dir), []);

    const pre = new AbortController();
    pre.abort();
    await assert.rejects(openVideoWriter({ path: join(dir, 'y.mp4'), width: W, height: H, frames: 1, signal: pre.signal }), CancelledError);
    assert.deepEqual(listDir(dir), []);
  });

  test('abort while close() drains and muxes: CancelledError, nothing left', async () => {
    const dir = tempDir();
    const ac = new AbortController();
    const w = await openVideoWriter({ path: join(dir, 'z.mp4'), width: W, height: H, frames: FRAMES, signal: ac.signal });
    for (let i = 0; i < FRAMES; i++) await w.writeFrame(gradientFrame(i));
    const closing = w.close(sine(1, 48000, 2));
    setImmediate(() => ac.abort());
    await assert.rejects(closing, CancelledError);
    for (let i = 0; i < 50 && listDir(dir).length; i++) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(listDir(dir), []);
  });

  test('abort() by the caller cleans up, and an idle writer is killed by its deadline', async () => {
    const dir = tempDir();
    const w = await openVideoWriter({ path: join(dir, 'x.mp4'), width: W, height: H, frames: FRAMES });
    await w.writeFrame(gradientFrame(0));
    await w.abort();
    assert.deepEqual(listDir(dir), []);

    const idle = await openVideoWriter({ path: join(dir, 'idle.mp4'), width: W, height: H, frames: FRAMES, idleTimeoutMs: 200 });
    await idle.writeFrame(gradientFrame(0));
    await new Promise((r) => setTimeout(r, 600));
    await assert.rejects(idle.writeFrame(gradientFrame(1)), /killed/);
    for (let i = 0; i < 50 && listDir(dir).length; i++) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(listDir(dir), []);
  });
});
