// Keyframe jobs (image_mode keyframe, mode i2v) through the MiniMax H3 pipeline on the demo checkpoint: the image
// files are read, cover-cropped onto the frame, encoded by the demo's video VAE encoder and packed as conditioning rows
// (FL2VA for 1-2 images, guides from 3); the sampler leaves those rows exactly as uploaded; the mp4 has the job's
// frames; the same seed gives the same file; what is not taken (voices without reference pictures), a soundtrack that is not audio and a file that is not
// an image are BadInputErrors. Whether the first frame follows image 1 is printed, not asserted: the demo's weights are
// random, so their output follows nothing (docs/models/minimax-h3.md "Keyframes in the service").
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { STAGE, type Stage } from '../../src/catalog';
import { BadInputError } from '../../src/common/errors';
import type { Engine } from '../../src/engine/engine';
import type { RunContext } from '../../src/models/common/pipeline';
import { conditionRows } from '../../src/models/minimax_h3/conditioning/condition-rows';
import { encodeKeyframes } from '../../src/models/minimax_h3/conditioning/keyframe-inputs';
import { h3DirsFromRoot, keyframeNoises, MiniMaxH3Pipeline, type H3Task } from '../../src/models/minimax_h3/pipeline';
import { loadH3Transformer } from '../../src/models/minimax_h3/variants';
import type { VideoLatents } from '../../src/models/minimax_h3/vae/video';
import { demoH3Root } from './minimax_h3-demo-root';
import { testEngine } from '../engine/helpers';
import { recordingContext } from './run-context';
import { countVideoFrames, probe } from '../media/helpers';

const W = 96;
const H = 64;
const FRAMES = 22; // 7 latent frames
const ROWS_PER_FRAME = (H / 32) * (W / 32);

const dir = mkdtempSync(join(tmpdir(), 'kiln-h3-keyframes-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A run context recording each stage once (test/models/run-context.ts). */
function context(): { ctx: RunContext; stages: Stage[] } {
  const stages: Stage[] = [];
  return { ctx: recordingContext({ stages, distinct: true }), stages };
}

/** A 150x100 png: a diagonal colour gradient with a dark disc (so a crop and the frame's structure are visible). */
async function picture(path: string, hue: number): Promise<void> {
  const w = 150;
  const h = 100;
  const px = Buffer.alloc(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const disc = (x - 60) ** 2 + (y - 50) ** 2 < 30 ** 2;
      const v = disc ? 20 : (x + y) * 1.2;
      px.set([Math.min(255, v + hue) % 256, Math.min(255, 255 - v), (hue * 3 + x) % 256], (y * w + x) * 3);
    }
  }
  writeFileSync(path, await sharp(px, { raw: { width: w, height: h, channels: 3 } }).png().toBuffer());
}

/** Pearson correlation of a decoded frame [H, W, 3] in [0, 1] and a picture [H, W, 3] in 0..255. */
function correlation(frame: Float32Array, pic: Uint8Array): number {
  let sa = 0, sb = 0, sab = 0, saa = 0, sbb = 0;
  const n = frame.length;
  for (let i = 0; i < n; i++) {
    const a = frame[i]!;
    const b = pic[i]! / 255;
    sa += a; sb += b; sab += a * b; saa += a * a; sbb += b * b;
  }
  const cov = sab / n - (sa / n) * (sb / n);
  return cov / Math.sqrt((saa / n - (sa / n) ** 2) * (sbb / n - (sb / n) ** 2));
}

const sha = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');

describe('MiniMax H3 keyframe jobs on the demo checkpoint', () => {
  let e: Engine;
  let root: string;
  let out: string;
  const images: string[] = [];
  let pipeline: MiniMaxH3Pipeline;
  let seen: { frames: Float32Array[]; latents: VideoLatents | null; keyframes: Parameters<NonNullable<ConstructorParameters<typeof MiniMaxH3Pipeline>[0]['onKeyframes']>>[0] | null };
  const reset = () => (seen = { frames: [], latents: null, keyframes: null });
  const task = (id: string, over: Partial<H3Task> = {}): H3Task => ({
    prompt: 'a red kite over a beach', seed: 5, steps: 2, width: W, height: H, frames: FRAMES, images: [], audios: [], outputPath: join(out, `${id}.mp4`), ...over,
  });

  before(async () => {
    e = await testEngine();
    root = await demoH3Root(e, join(dir, 'demo'));
    out = join(dir, 'out');
    mkdirSync(out);
    for (let i = 0; i < 3; i++) {
      images.push(join(dir, `k${i}.png`));
      await picture(images[i]!, 70 * i);
    }
    reset();
    pipeline = new MiniMaxH3Pipeline({
      engine: async () => e,
      dirs: async () => h3DirsFromRoot(root),
      loadTransformer: (eng, dirs, o) => loadH3Transformer(eng, 'fastvid', { transformer: dirs.transformer }, { dtype: o.dtype }),
      onFrame: (f, i) => i === 0 && seen.frames.push(f.slice()),
      onSampled: (v) => (seen.latents = v),
      onKeyframes: (k) => (seen.keyframes = k),
    });
  });

  test('1 keyframe: FL2VA rows from the encoder reach the sampler and stay unchanged; an mp4 of the job frames; deterministic', async () => {
    const { ctx, stages } = context();
    const t = task('one', { images: images.slice(0, 1) });
    await pipeline.run(t, ctx);
    assert.deepEqual(stages, [STAGE.loadModel, STAGE.loadTextEncoder, STAGE.encode, STAGE.sample, STAGE.videoDecode, STAGE.audioDecode, STAGE.package, STAGE.save]);
    const k = seen.keyframes!;
    assert.ok(k, 'the job had keyframe rows');
    assert.deepEqual([k.pictures.length, k.pictures[0]!.width, k.pictures[0]!.height], [1, W, H], 'the picture cover-cropped onto the frame');
    assert.deepEqual(k.latents[0]!.shape, [24, 1, H / 16, W / 16]);
    // the rows are encode_vae_condition's latents of the prepared picture mixed with Kiln's stream-2 noise
    const again = await encodeKeyframes(e, h3DirsFromRoot(root).vae, k.pictures);
    assert.deepEqual(again[0]!.data, k.latents[0]!.data, 'the encoding is deterministic (seed-42 posterior)');
    assert.deepEqual(k.rows, conditionRows(k.latents, keyframeNoises(t.seed, k.latents)));
    assert.equal(k.rows.length, ROWS_PER_FRAME * 96);
    assert.deepEqual(k.after, k.rows, 'the sampler never wrote a conditioning row');
    const p = probe(t.outputPath);
    assert.deepEqual([p.video?.codec, p.video?.width, p.video?.height, p.video?.fps], ['h264', W, H, 24]);
    assert.deepEqual([p.audio?.codec, p.audio?.sampleRate, p.audio?.layout], ['aac', 32000, 'stereo']);
    assert.equal(countVideoFrames(t.outputPath), FRAMES);
    const keyed = { frame: seen.frames[0]!, latents: seen.latents! };

    // the same task again: the same file
    reset();
    const t2 = task('one-again', { images: images.slice(0, 1) });
    await pipeline.run(t2, context().ctx);
    assert.equal(sha(t2.outputPath), sha(t.outputPath));

    // the same seed without the keyframe: the same starting noise (separate streams), another result
    reset();
    const plain = task('plain');
    await pipeline.run(plain, context().ctx);
    assert.equal(seen.keyframes, null);
    const differ = keyed.latents.data.some((v, i) => v !== seen.latents!.data[i]);
    assert.ok(differ, 'the keyframe rows change what the transformer generates');
    const pic = k.pictures[0]!.data;
    const rKey = correlation(keyed.frame, pic);
    const rPlain = correlation(seen.frames[0]!, pic);
    // random demo weights: the first frame follows nothing, so this is reported, not asserted
    console.log(`# first frame vs prepared image 1, Pearson r: with the keyframe ${rKey.toFixed(4)}, without ${rPlain.toFixed(4)} (demo weights)`);
  });

  test('2 and 3 keyframes: FL2VA first + last, then guides; one latent frame of rows each, unchanged by sampling', async () => {
    for (const n of [2, 3]) {
      reset();
      const t = task(`k${n}`, { images: images.slice(0, n), seed: 9 });
      await pipeline.run(t, context().ctx);
      const k = seen.keyframes!;
      assert.equal(k.latents.length, n);
      assert.equal(k.rows.length, n * ROWS_PER_FRAME * 96);
      assert.deepEqual(k.rows, conditionRows(k.latents, keyframeNoises(t.seed, k.latents)));
      assert.deepEqual(k.after, k.rows, `${n} keyframes: rows unchanged`);
      assert.equal(countVideoFrames(t.outputPath), FRAMES, `${n} keyframes`);
    }
  });

  test('not built yet or not an image: BadInputError before sampling', async () => {
    const bad = join(dir, 'not-an-image.png');
    writeFileSync(bad, 'plain text, not a picture');
    const cases: [Partial<H3Task>, RegExp][] = [
      [{ audios: [bad] }, /voices \(audio_mode voice\) need at least one reference picture/],
      [{ images: images.slice(0, 1), imageMode: 'reference', audios: [bad], audioMode: 'track' }, /^audios\[0\]: /],
      [{ images: Array(7).fill(images[0]) }, /7 keyframes given, at most 6/],
      [{ images: [images[0]!, bad] }, /^images\[1\]: /],
    ];
    for (const [over, re] of cases) {
      const { ctx, stages } = context();
      await assert.rejects(pipeline.run(task('bad', over), ctx), (err: unknown) => err instanceof BadInputError && re.test(err.message));
      assert.ok(!stages.includes(STAGE.sample), `${re}: stopped before sampling`);
    }
    await pipeline.unload();
  });
});
