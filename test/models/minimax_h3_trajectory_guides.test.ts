// A 2-step trajectory with 4 keyframes (golden minimax_h3/trajectory_guides, tools/golden/minimax_h3_guides_trajectory.py):
// the tiny transformer on the service's keyframe sequence for 4 images (keyframes.ts: ComfyUI's guide layout at
// keyframeFrameIndices) through sampleH3 from upstream's noise, the keyframe rows given; every step's row timesteps,
// velocities and latents against the upstream loop in f32, f16 and int8, and the keyframe rows never written.
import assert from 'node:assert/strict';
import { copyInto } from '../../src/engine/ops/layout';
import { parseH3Config } from '../../src/models/minimax_h3/transformer/config';
import { patchify } from '../../src/models/minimax_h3/transformer/patchify';
import { buildKeyframeSequence, keyframeFrameIndices } from '../../src/models/minimax_h3/sequence/keyframes';
import { resolveGeometry } from '../../src/models/minimax_h3/sequence/packed-sequence';
import { MiniMaxH3Transformer } from '../../src/models/minimax_h3/transformer/transformer';
import { testEngine } from '../engine/helpers';
import { goldenTests, WEIGHT_PREFIX } from './golden';
import { VARIANTS } from './minimax_h3-golden';
import { expectTrajectory } from './minimax_h3-trajectory';

for (const v of VARIANTS) {
  goldenTests('minimax_h3', 'trajectory_guides', async (c) => {
    const e = await testEngine();
    const cfg = parseH3Config(c.config, `${c.path} config`);
    const steps = (await c.ints('num_inference_steps')).data[0]!;
    const one = async (n: string) => (await c.ints(n)).data[0]!;
    const g = resolveGeometry(await one('num_frames'), await one('height'), await one('width'));
    const guides = (await c.ints('guide_frames')).data;
    assert.deepEqual(keyframeFrameIndices(guides.length, g.numFrames), guides, 'the service pins the images at these frames');
    const packed = buildKeyframeSequence({ ...g, textTags: (await c.ints('text_token_tags')).data }, guides.length);
    const model = await MiniMaxH3Transformer.load(e, c.ckpt, cfg, { dtype: v.dtype, int8: v.int8, prefix: WEIGHT_PREFIX });
    const cond = await c.input('condition_rows');
    const nc = packed.numConditionVideoRows;
    assert.equal(packed.numConditionAudioRows, 0);
    assert.equal(cond.shape[0], nc, 'keyframe rows');
    const noise = await c.input('noise');
    const noiseT = e.upload(noise.data, noise.shape, 'f32');
    const rows = patchify(e, noiseT, cfg.patchSize);
    noiseT.free();
    const video = e.empty([packed.videoIndices.length, rows.shape[1]!], 'f32');
    const condT = e.upload(cond.data, cond.shape, 'f32');
    copyInto(e, condT, video.slice(0, 0, nc));
    condT.free();
    copyInto(e, rows, video.slice(0, nc, packed.videoIndices.length));
    rows.free();
    const an = await c.input('audio_noise');
    const audio = e.upload(an.data, an.shape, 'f32');
    await expectTrajectory({ e, c, v, model, packed, video, audio, steps, kept: [{ stream: video, rows: cond, count: nc, label: 'keyframe value' }] });
  }, v.name);
}
