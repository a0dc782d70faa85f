// Track jobs (audio_mode track) through the MiniMax H3 pipeline on the demo checkpoint: the clip is decoded to 32 kHz
// stereo and cut or padded to the video's length; the audio VAE encoder's rows of that clip reach the sampler as the
// audio guide's conditioning rows and come back unchanged after the last step (with and without keyframes); the mp4's
// audio is the prepared clip itself, not the generated sound; voices without pictures, 2 clips and a file that is not audio are
// BadInputErrors before sampling.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { STAGE, type Stage } from '../../src/catalog';
import { BadInputError } from '../../src/common/errors';
import type { Engine } from '../../src/engine/engine';
import type { RunContext } from '../../src/models/common/pipeline';
import { h3DirsFromRoot, MiniMaxH3Pipeline, type H3Task } from '../../src/models/minimax_h3/pipeline';
import { loadH3Transformer } from '../../src/models/minimax_h3/variants';
import { audioLatentFrames } from '../../src/models/minimax_h3/sequence/packed-sequence';
import { cropPosterior, encodeTrack, fitTrack, readTrack, trackSamples, type Track } from '../../src/models/minimax_h3/conditioning/track-inputs';
import { correlation, stereoWavBytes } from '../api/inputs';
import { demoH3Root } from './minimax_h3-demo-root';
import { testEngine } from '../engine/helpers';
import { recordingContext } from './run-context';
import { countVideoFrames, decodeAudioTrack, ffmpeg, probe, rms } from '../media/helpers';

const W = 96;
const H = 64;
const FRAMES = 22; // 0.917 s: 29333 samples at 32 kHz, 37 audio latents per channel

const dir = mkdtempSync(join(tmpdir(), 'kiln-h3-track-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A run context recording each stage once (test/models/run-context.ts). */
function context(): { ctx: RunContext; stages: Stage[] } {
  const stages: Stage[] = [];
  return { ctx: recordingContext({ stages, distinct: true }), stages };
}

test('fitTrack cuts or pads each channel with silence; trackSamples is the writer\'s length; cropPosterior keeps the first frames', () => {
  const planar = Float32Array.from([1, 2, 3, 10, 20, 30]);
  assert.deepEqual(fitTrack(planar, 3, 2).map((c) => Array.from(c)), [[1, 2], [10, 20]]);
  assert.deepEqual(fitTrack(planar, 3, 5).map((c) => Array.from(c)), [[1, 2, 3, 0, 0], [10, 20, 30, 0, 0]]);
  assert.equal(trackSamples(39), 52000);
  assert.equal(trackSamples(56), 74667); // 2.333 s: the encoder's 94 latents are cropped to the target's 93
  assert.equal(audioLatentFrames(56), 93);
  const p = { channels: 1, frames: 3, mean: [Float32Array.from([1, 2, 3, 4, 5, 6])], logs: [Float32Array.from([0, 0, 0, 1, 1, 1])] };
  assert.deepEqual(Array.from(cropPosterior(p, 2).mean[0]!), [1, 2, 4, 5]);
});

test('readTrack: a mono mp3 at 22.05 kHz becomes 32 kHz stereo (both channels the clip) of the video\'s length', async () => {
  const mp3 = join(dir, 'mono.mp3');
  ffmpeg(['-f', 'lavfi', '-i', 'sine=f=440:r=22050:d=2.5', '-c:a', 'libmp3lame', mp3]);
  const t = await readTrack(mp3, 39);
  assert.equal(t.sampleRate, 32000);
  assert.deepEqual([t.channels[0].length, t.channels[1].length], [52000, 52000], 'cut to 39 frames = 1.625 s');
  assert.ok(Math.abs(t.clipSamples - 80000) < 2400, `the clip decoded at 32 kHz: ${t.clipSamples} samples`);
  assert.deepEqual(t.channels[0], t.channels[1], 'mono duplicated');
  assert.ok(rms(t.channels[0], { from: 8000 }) > 0.05, 'sound, not silence');
});

describe('MiniMax H3 track jobs on the demo checkpoint', () => {
  let e: Engine;
  let root: string;
  let out: string;
  let pipeline: MiniMaxH3Pipeline;
  let seen: { track: { track: Track; rows: Float32Array; after: Float32Array } | null; keyframes: { rows: Float32Array; after: Float32Array } | null; decoded: boolean };
  const reset = () => (seen = { track: null, keyframes: null, decoded: false });
  const clip = (name: string, seconds: number) => {
    const p = join(dir, name);
    writeFileSync(p, stereoWavBytes(seconds));
    return p;
  };
  const task = (id: string, over: Partial<H3Task> = {}): H3Task => ({
    prompt: 'a singer on a stage', seed: 7, steps: 2, width: W, height: H, frames: FRAMES, images: [], audios: [], audioMode: 'track', outputPath: join(out, `${id}.mp4`), ...over,
  });

  before(async () => {
    e = await testEngine();
    root = await demoH3Root(e, join(dir, 'demo'));
    out = join(dir, 'out');
    mkdirSync(out);
    reset();
    pipeline = new MiniMaxH3Pipeline({
      engine: async () => e,
      dirs: async () => h3DirsFromRoot(root),
      loadTransformer: (eng, dirs, o) => loadH3Transformer(eng, 'fastvid', { transformer: dirs.transformer }, { dtype: o.dtype }),
      onTrack: (t) => (seen.track = t),
      onKeyframes: (k) => (seen.keyframes = k),
      onAudio: () => (seen.decoded = true),
    });
  });

  test('a track longer than the video: cut; its encoder rows reach the sampler and stay unchanged; the mp4 carries the clip', async () => {
    reset();
    const { ctx, stages } = context();
    const path = clip('long.wav', 1.5);
    const t = task('long', { audios: [path] });
    await pipeline.run(t, ctx);
    assert.deepEqual(stages, [STAGE.loadModel, STAGE.loadTextEncoder, STAGE.encode, STAGE.sample, STAGE.videoDecode, STAGE.audioDecode, STAGE.package, STAGE.save]);
    const s = seen.track!;
    assert.ok(s, 'the job had track rows');
    const n = trackSamples(FRAMES);
    assert.deepEqual([s.track.sampleRate, s.track.channels[0].length, s.track.channels[1].length, s.track.clipSamples], [32000, n, n, 48000]);
    const Na = audioLatentFrames(FRAMES);
    assert.equal(s.rows.length, 2 * Na * 32, 'rows: the target\'s audio latents per channel, 32 wide');
    // the rows are the audio VAE encoder's normalised posterior mean of the prepared clip, exactly
    const again = await encodeTrack(e, h3DirsFromRoot(root).audioVae, await readTrack(path, FRAMES), Na);
    assert.deepEqual(again, s.rows);
    assert.deepEqual(s.after, s.rows, 'the sampler never wrote a track row');
    assert.equal(seen.decoded, false, 'the generated audio is not decoded: the clip is the soundtrack');

    const p = probe(t.outputPath);
    assert.deepEqual([p.video?.codec, p.video?.width, p.video?.height, p.video?.fps], ['h264', W, H, 24]);
    assert.deepEqual([p.audio?.codec, p.audio?.sampleRate, p.audio?.layout], ['aac', 32000, 'stereo']);
    assert.equal(countVideoFrames(t.outputPath), FRAMES);
    const got = decodeAudioTrack(t.outputPath, 32000, 2);
    const want = decodeAudioTrack(path, 32000, 2);
    const r = correlation(got, want, Math.min(got.length, 2 * n));
    console.log(`# track cut to ${FRAMES} frames: mp4 audio vs the clip at 32 kHz, Pearson r ${r.toFixed(6)} over ${Math.min(got.length, 2 * n) / 2} samples per channel`);
    assert.ok(r > 0.99, `r ${r}`);
  });

  test('a track shorter than the video, with a keyframe: padded with silence; both kinds of rows held', async () => {
    reset();
    const path = clip('short.wav', 0.5);
    const img = join(dir, 'k.png');
    writeFileSync(img, await sharp({ create: { width: 120, height: 80, channels: 3, background: { r: 200, g: 90, b: 30 } } }).png().toBuffer());
    const t = task('short', { audios: [path], images: [img], seed: 8 });
    await pipeline.run(t, context().ctx);
    const s = seen.track!;
    assert.equal(s.track.clipSamples, 16000);
    assert.ok(s.track.channels.every((c) => c.subarray(16000).every((v) => v === 0)), 'silence after the clip');
    assert.deepEqual(s.after, s.rows, 'track rows unchanged');
    assert.ok(seen.keyframes, 'the keyframe rows too');
    assert.deepEqual(seen.keyframes.after, seen.keyframes.rows, 'keyframe rows unchanged');
    assert.equal(countVideoFrames(t.outputPath), FRAMES);
    const got = decodeAudioTrack(t.outputPath, 32000, 2);
    const want = decodeAudioTrack(path, 32000, 2);
    const r = correlation(got, want, want.length);
    console.log(`# track padded to ${FRAMES} frames: r ${r.toFixed(6)} over the clip's ${want.length / 2} samples per channel`);
    assert.ok(r > 0.99, `r ${r}`);
    assert.ok(rms(got, { from: 2 * (16000 + 1600) }) < 1e-3, 'silence after the clip (from 50 ms past its end)');
  });

  test('voices, 2 clips in track mode and a file that is not audio: BadInputError before sampling', async () => {
    const bad = join(dir, 'not-audio.wav');
    writeFileSync(bad, 'plain text, not a sound');
    const ok = clip('ok.wav', 1);
    const cases: [Partial<H3Task>, RegExp][] = [
      [{ audios: [ok], audioMode: 'voice' }, /voices \(audio_mode voice\) need at least one reference picture/],
      [{ audios: [ok, ok] }, /audio_mode track takes 1 clip \(the soundtrack\), 2 given/],
      [{ audios: [bad] }, /^audios\[0\]: /],
    ];
    for (const [over, re] of cases) {
      const { ctx, stages } = context();
      await assert.rejects(pipeline.run(task('bad', over), ctx), (err: unknown) => err instanceof BadInputError && re.test(err.message));
      assert.ok(!stages.includes(STAGE.sample), `${re}: stopped before sampling`);
    }
    await pipeline.unload();
  });
});
