// Keyframe jobs on a checkpoint whose text encoder has the Qwen3-VL vision tower (as the released 32B does): the
// demo checkpoint with its text_encoder/ rebuilt at the same tiny size plus a 2-block tower and its tokenizer with
// the vision tokens. With 1 or 2 keyframes the text encoder reads upstream's FL2VA presentation ("<Picture i>: " +
// a vision block of (H/32)(W/32) pads per picture, then the prompt; the block's rows tagged video) with the tower's
// tokens over the pads, and the job runs to its mp4; with 3 keyframes (guides, not shown to the text encoder
// upstream) and on the plain demo checkpoint (no tower) the prompt is encoded alone.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { writeJsonFile } from '../../src/common/json-file';
import type { Engine } from '../../src/engine/engine';
import { Checkpoint } from '../../src/engine/safetensors';
import { writeShardedSafetensors, shardBytesFor } from '../../src/engine/safetensors-writer';
import type { RunContext } from '../../src/models/common/pipeline';
import { WeightSynth } from '../../src/models/common/random-weights';
import { SyntheticCheckpoint, zeroFill } from '../../src/models/common/synthetic-checkpoint';
import { demoTextEncoderConfig, planDemoH3 } from '../../src/models/minimax_h3/demo';
import { keyframeTextPlan, visionTower } from '../../src/models/minimax_h3/text-encoder/keyframe-text';
import { h3DirsFromRoot, MiniMaxH3Pipeline, type H3Task } from '../../src/models/minimax_h3/pipeline';
import { fl2vaPresentation } from '../../src/models/minimax_h3/text-encoder/presentation';
import { loadH3Transformer } from '../../src/models/minimax_h3/variants';
import { TEXT_TAG, VIDEO_TAG } from '../../src/models/minimax_h3/sequence/packed-sequence';
import { H3TextEncoderHost } from '../../src/models/minimax_h3/text-encoder/encoder';
import { H3VisionTextEncoder } from '../../src/models/minimax_h3/text-encoder/vision';
import { TextTokenizer } from '../../src/models/tokenizer';
import { demoTokenizerInfo } from '../../src/models/tokenizer/demo';
import { testEngine } from '../engine/helpers';
import { countVideoFrames } from '../media/helpers';
import { PRESENTATION_SPECIAL_TOKENS, writePresentationTokenizer } from './minimax_h3-presentation-tokenizer';

// the smallest 16:9-ish frame the Qwen3-VL processor takes unresized: 352 x 192 = 67 584 >= 65 536 pixels
const W = 352;
const H = 192;
const FRAMES = 22;
const PADS = (W / 32) * (H / 32); // 66 merged vision tokens per picture

const dir = mkdtempSync(join(tmpdir(), 'kiln-h3-kf-vision-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** demo text_encoder/ + tokenizer/ replaced by the same decoder with a 2-block tower, and the vision tokens. */
async function addVisionTower(e: Engine, root: string): Promise<void> {
  await writePresentationTokenizer(join(root, 'tokenizer'));
  const info = demoTokenizerInfo({ specialTokens: PRESENTATION_SPECIAL_TOKENS });
  const id = (t: string) => info.specialTokens[t]!;
  const config = {
    ...demoTextEncoderConfig(info.size),
    image_token_id: id('<|image_pad|>'), video_token_id: id('<|video_pad|>'),
    vision_start_token_id: id('<|vision_start|>'), vision_end_token_id: id('<|vision_end|>'),
    vision_config: {
      model_type: 'qwen3_vl', depth: 2, hidden_size: 16, num_heads: 2, intermediate_size: 32, out_hidden_size: 32, in_channels: 3,
      patch_size: 16, temporal_patch_size: 2, spatial_merge_size: 2, num_position_embeddings: 16, deepstack_visual_indexes: [0], hidden_act: 'gelu_pytorch_tanh',
    },
  };
  const synth = new SyntheticCheckpoint({ label: 'text_encoder', dtype: 'F32', fill: zeroFill });
  (await H3VisionTextEncoder.load(e, synth.checkpoint, config, { dtype: 'f32' })).free();
  const te = join(root, 'text_encoder');
  rmSync(te, { recursive: true, force: true });
  mkdirSync(te);
  const tensors = new WeightSynth(99).tensors(synth.shapes(), 'BF16');
  await writeShardedSafetensors(te, tensors, shardBytesFor(tensors, 2), { format: 'pt' });
  await writeJsonFile(join(te, 'config.json'), config);
}

async function picture(path: string, shade: number): Promise<void> {
  const px = Buffer.alloc(400 * 240 * 3);
  for (let i = 0; i < 400 * 240; i++) px.set([shade, (i % 400) % 256, Math.floor(i / 400)], i * 3);
  writeFileSync(path, await sharp(px, { raw: { width: 400, height: 240, channels: 3 } }).png().toBuffer());
}

const ctx = (): RunContext => ({ signal: new AbortController().signal, stage: () => undefined, progress: () => undefined, safePoint: async () => undefined });

describe('MiniMax H3 keyframes with a text encoder that has the vision tower', () => {
  let e: Engine;
  let plain: string;
  let vision: string;
  const images: string[] = [];
  let seenText: { ids: readonly number[]; tags: Uint8Array; pictures: number } | null = null;
  let rowsSeen = 0;
  const pipelineOn = (root: string) => new MiniMaxH3Pipeline({
    engine: async () => e,
    dirs: async () => h3DirsFromRoot(root),
    loadTransformer: (eng, dirs, o) => loadH3Transformer(eng, 'fastvid', { transformer: dirs.transformer }, { dtype: o.dtype }),
    onText: (t) => (seenText = t),
    onKeyframes: (k) => {
      assert.deepEqual(k.after, k.rows, 'conditioning rows unchanged');
      rowsSeen = k.rows.length / 96;
    },
  });
  const task = (id: string, n: number): H3Task => ({
    prompt: 'a boat at dawn', seed: 2, steps: 2, width: W, height: H, frames: FRAMES, images: images.slice(0, n), audios: [], outputPath: join(dir, `${id}.mp4`),
  });

  before(async () => {
    e = await testEngine();
    const plan = await planDemoH3(e);
    plain = join(dir, 'plain');
    vision = join(dir, 'vision');
    await plan.write(plain);
    await plan.write(vision);
    await addVisionTower(e, vision);
    for (let i = 0; i < 3; i++) {
      images.push(join(dir, `k${i}.png`));
      await picture(images[i]!, 60 * i + 20);
    }
  });

  test('the tower is found where it is, not in the plain demo', async () => {
    assert.equal(await visionTower(h3DirsFromRoot(plain).textEncoder), null);
    assert.ok(await visionTower(h3DirsFromRoot(vision).textEncoder));
  });

  test('1 and 2 keyframes: the FL2VA presentation with the pictures; 3 keyframes: the prompt alone', async () => {
    const p = pipelineOn(vision);
    const tok = await TextTokenizer.fromDir(h3DirsFromRoot(vision).tokenizer);
    try {
      for (const n of [1, 2]) {
        seenText = null;
        const t = task(`v${n}`, n);
        await p.run(t, ctx());
        const want = fl2vaPresentation(tok, t.prompt, Array(n).fill(PADS));
        assert.deepEqual(seenText!.ids, want.ids, `${n}: the ids of upstream's presentation`);
        assert.deepEqual([...seenText!.tags], want.tags);
        assert.equal(seenText!.pictures, n);
        assert.equal([...seenText!.tags].filter((x) => x === VIDEO_TAG).length, n * (PADS + 2), 'each vision block (start, pads, end) is tagged video');
        assert.equal(rowsSeen, n * (H / 32) * (W / 32));
        assert.equal(countVideoFrames(t.outputPath), FRAMES);
        assert.ok(p.textEncoderHostBytes > 0, 'the decoder came from the host copy');
      }
      seenText = null;
      await p.run(task('v3', 3), ctx());
      assert.equal(seenText!.pictures, 0);
      assert.deepEqual(seenText!.ids, tok.encode('a boat at dawn'));
      assert.ok([...seenText!.tags].every((x) => x === TEXT_TAG));
    } finally {
      await p.unload();
    }
  });

  test('the decoder from the host copy plus the tower (withText) encodes a presentation as a load from the file does', async () => {
    const te = h3DirsFromRoot(vision).textEncoder;
    const config = JSON.parse(readFileSync(join(te, 'config.json'), 'utf8')) as Record<string, unknown>;
    const tok = await TextTokenizer.fromDir(h3DirsFromRoot(vision).tokenizer);
    const pic = { width: W, height: H, channels: 3, data: Uint8Array.from({ length: W * H * 3 }, (_, i) => (i * 31) % 251) };
    const plan = (await keyframeTextPlan(te, tok, 'a boat at dawn', [pic, pic]))!;
    const ckpt = await Checkpoint.open(te);
    const host = new H3TextEncoderHost();
    const fromFile = await H3VisionTextEncoder.load(e, ckpt, config, { dtype: 'f32' });
    const fromHost = await H3VisionTextEncoder.withText(e, await host.load(e, te, { dtype: 'f32' }), ckpt, config, { dtype: 'f32' });
    try {
      const a = fromFile.encode(plan.ids, plan.images);
      const b = fromHost.encode(plan.ids, plan.images);
      const [x, y] = [await e.read(a), await e.read(b)];
      a.free();
      b.free();
      assert.equal(x.length, plan.ids.length * 32);
      assert.deepEqual(y, x, 'the same weights, the same embeddings');
    } finally {
      fromFile.free();
      fromHost.free();
      host.drop();
      await ckpt.close();
    }
  });

  test('the plain demo (no tower): the prompt alone, the job still runs', async () => {
    const p = pipelineOn(plain);
    try {
      seenText = null;
      const t = task('plain1', 1);
      await p.run(t, ctx());
      assert.equal(seenText!.pictures, 0);
      assert.ok([...seenText!.tags].every((x) => x === TEXT_TAG));
      assert.equal(countVideoFrames(t.outputPath), FRAMES);
    } finally {
      await p.unload();
    }
  });
});
