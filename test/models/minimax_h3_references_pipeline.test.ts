// Reference jobs (image_mode reference, mode i2v) through the MiniMax H3 pipeline on the demo checkpoint: the image
// files are read and put on their own canvases (their aspect, scaled down to at most the frame's area: ComfyUI's
// `match`, the service's choice; the video does not start on them), encoded by the demo's video VAE encoder, packed as Ref2VA image blocks ahead of the target
// (references.ts), and sampled by the Ref2VA partition (transformer_ref/), which the pipeline swaps in for the job
// and out again for the next text job. The conditioning rows are the encoder's rows mixed with Kiln's noise streams
// and the sampler leaves them exactly as uploaded; the prompt gets its <Picture n> definitions where it lacks them.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { referencePrompt, STAGE, type Stage } from '../../src/catalog';
import { BadInputError } from '../../src/common/errors';
import type { Engine } from '../../src/engine/engine';
import type { RunContext } from '../../src/models/common/pipeline';
import { conditionRows } from '../../src/models/minimax_h3/conditioning/condition-rows';
import { prepareReferenceMatch } from '../../src/models/minimax_h3/conditioning/image-prep';
import { encodeKeyframes } from '../../src/models/minimax_h3/conditioning/keyframe-inputs';
import { h3DirsFromRoot, keyframeNoises, MiniMaxH3Pipeline, type H3PipelineOptions, type H3Task } from '../../src/models/minimax_h3/pipeline';
import { loadH3Transformer, type H3Partition } from '../../src/models/minimax_h3/variants';
import { H3TextEncoder } from '../../src/models/minimax_h3/text-encoder/encoder';
import { TextTokenizer } from '../../src/models/tokenizer';
import { decodeImageRgb8 } from '../../src/media';
import { demoH3Root } from './minimax_h3-demo-root';
import { testEngine } from '../engine/helpers';
import { recordingContext } from './run-context';
import { countVideoFrames, probe } from '../media/helpers';

const W = 96;
const H = 64;
const FRAMES = 22; // 7 latent frames

const dir = mkdtempSync(join(tmpdir(), 'kiln-h3-references-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function context(): { ctx: RunContext; stages: Stage[] } {
  const stages: Stage[] = [];
  return { ctx: recordingContext({ stages, distinct: true }), stages };
}

/** A w x h png: a colour gradient with a dark disc. */
async function picture(path: string, w: number, h: number, hue: number): Promise<void> {
  const px = Buffer.alloc(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const disc = (x - w / 2) ** 2 + (y - h / 2) ** 2 < (h / 3) ** 2;
      const v = disc ? 20 : (x + y) * 1.2;
      px.set([Math.min(255, v + hue) % 256, Math.min(255, 255 - v), (hue * 3 + x) % 256], (y * w + x) * 3);
    }
  }
  writeFileSync(path, await sharp(px, { raw: { width: w, height: h, channels: 3 } }).png().toBuffer());
}

type Refs = Parameters<NonNullable<H3PipelineOptions['onReferences']>>[0];

describe('MiniMax H3 reference jobs on the demo checkpoint', () => {
  let e: Engine;
  let root: string;
  let out: string;
  let tok: TextTokenizer;
  const images: string[] = [];
  const loads: H3Partition[] = [];
  let seen: { refs: Refs | null; ids: readonly number[] | null; keyframes: boolean };
  let pipeline: MiniMaxH3Pipeline;
  const reset = () => (seen = { refs: null, ids: null, keyframes: false });
  const task = (id: string, over: Partial<H3Task> = {}): H3Task => ({
    prompt: 'a red kite over a beach', seed: 5, steps: 2, width: W, height: H, frames: FRAMES, images: [], audios: [], outputPath: join(out, `${id}.mp4`), ...over,
  });

  before(async () => {
    e = await testEngine();
    root = await demoH3Root(e, join(dir, 'demo'));
    out = join(dir, 'out');
    mkdirSync(out);
    images.push(join(dir, 'r0.png'), join(dir, 'r1.png'));
    await picture(images[0]!, 100, 100, 0);
    await picture(images[1]!, 150, 100, 90);
    tok = await TextTokenizer.fromDir(h3DirsFromRoot(root).tokenizer);
    reset();
    pipeline = new MiniMaxH3Pipeline({
      engine: async () => e,
      dirs: async () => h3DirsFromRoot(root),
      loadTransformer: (eng, dirs, o) => {
        loads.push(o.partition);
        return loadH3Transformer(eng, 'basevid50', { transformer: dirs.transformer, transformerRef: dirs.transformerRef }, { dtype: o.dtype, partition: o.partition });
      },
      onReferences: (r) => (seen.refs = r),
      onKeyframes: () => (seen.keyframes = true),
      onText: (t) => (seen.ids = t.ids),
    });
  });

  test('1 reference: its own canvas, the encoder\'s rows held by the Ref2VA partition, the prompt prefixed; an mp4 of the job frames', async () => {
    const { ctx, stages } = context();
    const t = task('one', { images: images.slice(0, 1), imageMode: 'reference' });
    const t0 = Date.now();
    await pipeline.run(t, ctx);
    console.log(`# 1 reference (64 x 64) on a 96x64 22-frame job, 2 steps: ${((Date.now() - t0) / 1000).toFixed(1)} s with the demo's loads`);
    assert.deepEqual(stages, [STAGE.loadModel, STAGE.loadTextEncoder, STAGE.encode, STAGE.sample, STAGE.videoDecode, STAGE.audioDecode, STAGE.package, STAGE.save]);
    assert.deepEqual(loads, ['fl2va', 'ref2va'], 'the profile loads FL2VA, the reference job swaps in Ref2VA');
    const r = seen.refs!;
    assert.ok(r && !seen.keyframes, 'reference rows, no keyframe rows');
    // its own aspect scaled down to at most the frame's 96 x 64 area, sides on 32, Pillow's LANCZOS: not the frame
    const decoded = await decodeImageRgb8(readFileSync(images[0]!), { label: 'images[0]' });
    assert.deepEqual(r.pictures[0], prepareReferenceMatch({ width: decoded.width, height: decoded.height, data: decoded.data, channels: 3 }, W, H));
    assert.deepEqual([r.pictures[0]!.width, r.pictures[0]!.height], [64, 64]);
    assert.deepEqual(r.latents[0]!.shape, [24, 1, 4, 4]);
    // the rows are the encoder's rows of that picture, mixed with Kiln's stream-2 noise, and never written by sampling
    const again = await encodeKeyframes(e, h3DirsFromRoot(root).vae, r.pictures);
    assert.deepEqual(again[0]!.data, r.latents[0]!.data, 'the encoder\'s latents (seed-42 posterior, deterministic)');
    assert.deepEqual(r.rows, conditionRows(r.latents, keyframeNoises(t.seed, r.latents)));
    assert.equal(r.rows.length, 2 * 2 * 96, 'one latent frame of 2 x 2 patches');
    assert.deepEqual(r.after, r.rows, 'the sampler never wrote a reference row');
    // the prompt named no picture: the model is given the definition line first (the demo has no vision tower, so
    // the text encoder reads the prompt alone)
    assert.equal(r.prompt, `<Picture 1> is a reference image: follow its subjects and style; the video does not start on it.\n${t.prompt}`);
    assert.equal(r.prompt, referencePrompt(t.prompt, 1));
    assert.deepEqual(seen.ids, H3TextEncoder.promptIds(tok, r.prompt));
    const p = probe(t.outputPath);
    assert.deepEqual([p.video?.codec, p.video?.width, p.video?.height, p.video?.fps], ['h264', W, H, 24]);
    assert.deepEqual([p.audio?.codec, p.audio?.sampleRate, p.audio?.layout], ['aac', 32000, 'stereo']);
    assert.equal(countVideoFrames(t.outputPath), FRAMES);
  });

  test('2 references of different aspects in request order, a prompt that names them kept as it is; the next text job swaps FL2VA back', async () => {
    reset();
    const prompt = '<Picture 2> walks past <Picture 1> on a beach';
    const t = task('two', { images: images.slice(0, 2), imageMode: 'reference', prompt, seed: 9 });
    await pipeline.run(t, context().ctx);
    const r = seen.refs!;
    assert.deepEqual(r.pictures.map((p) => [p.width, p.height]), [[64, 64], [96, 64]], 'each on its own canvas, in request order');
    assert.deepEqual(r.latents.map((l) => l.shape), [[24, 1, 4, 4], [24, 1, 4, 6]]);
    assert.equal(r.rows.length, (2 * 2 + 2 * 3) * 96);
    assert.deepEqual(r.rows, conditionRows(r.latents, keyframeNoises(t.seed, r.latents)));
    assert.deepEqual(r.after, r.rows, 'both pictures\' rows unchanged');
    assert.equal(r.prompt, prompt, 'a prompt naming every picture is given as it is');
    assert.equal(countVideoFrames(t.outputPath), FRAMES);
    assert.deepEqual(loads, ['fl2va', 'ref2va'], 'Ref2VA stays loaded between reference jobs');

    reset();
    await pipeline.run(task('text'), context().ctx);
    assert.equal(seen.refs, null);
    assert.deepEqual(loads, ['fl2va', 'ref2va', 'fl2va'], 'a text job swaps FL2VA back in');
  });

  test('not built or not takeable: BadInputError before sampling', async () => {
    const wide = join(dir, 'wide.png');
    await picture(wide, 500, 100, 30);
    const clip = join(dir, 'clip.wav');
    writeFileSync(clip, 'not a sound: refused when the voices are read, before the text encoder');
    const cases: [Partial<H3Task>, RegExp][] = [
      [{ images: [images[0]!], imageMode: 'reference', audios: [clip] }, /^audios\[0\]: not a decodable audio file/],
      [{ images: [images[0]!], imageMode: 'reference', audios: [clip], audioMode: 'track' }, /^audios\[0\]: not a decodable audio file/],
      [{ images: Array(7).fill(images[0]), imageMode: 'reference' }, /7 reference pictures given, at most 6/],
      [{ images: [wide], imageMode: 'reference' }, /^images\[0\]: a 500x100 reference picture is outside .* \(1:4 to 4:1\)/],
    ];
    for (const [over, re] of cases) {
      const { ctx, stages } = context();
      await assert.rejects(pipeline.run(task('bad', over), ctx), (err: unknown) => err instanceof BadInputError && re.test(err.message));
      assert.ok(!stages.includes(STAGE.sample), `${re}: stopped before sampling`);
    }
    await pipeline.unload();
  });
});
