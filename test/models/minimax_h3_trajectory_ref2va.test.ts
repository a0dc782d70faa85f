// A 2-step reference-mode trajectory (golden minimax_h3/trajectory_ref2va, tools/golden/minimax_h3_ref2va_trajectory.py):
// the tiny transformer on the Ref2VA layout (two images and a voice, references.ts) through sampleH3 from upstream's
// noise, the reference rows given; every step's row timesteps, velocities and latents against diffusers' loop in f32,
// f16 and int8, and the reference rows (image rows at 0.999, voice rows clean at 1.0) never written.
import assert from 'node:assert/strict';
import { copyInto } from '../../src/engine/ops/layout';
import { parseH3Config } from '../../src/models/minimax_h3/transformer/config';
import { patchify } from '../../src/models/minimax_h3/transformer/patchify';
import { buildReferenceSequence, type ReferenceBlock } from '../../src/models/minimax_h3/sequence/references';
import { resolveGeometry } from '../../src/models/minimax_h3/sequence/packed-sequence';
import { MiniMaxH3Transformer } from '../../src/models/minimax_h3/transformer/transformer';
import { testEngine } from '../engine/helpers';
import { goldenTests, WEIGHT_PREFIX } from './golden';
import { VARIANTS } from './minimax_h3-golden';
import { expectTrajectory } from './minimax_h3-trajectory';

for (const v of VARIANTS) {
  goldenTests('minimax_h3', 'trajectory_ref2va', async (c) => {
    const e = await testEngine();
    const cfg = parseH3Config(c.config, `${c.path} config`);
    const steps = (await c.ints('num_inference_steps')).data[0]!;
    const one = async (n: string) => (await c.ints(n)).data[0]!;
    const g = resolveGeometry(await one('num_frames'), await one('height'), await one('width'));
    const table = await c.ints('references');
    const references: ReferenceBlock[] = [];
    for (let i = 0; i < table.shape[0]!; i++) {
      const [kind, , h, w, audio] = table.data.slice(5 * i, 5 * i + 5) as [number, number, number, number, number];
      references.push(kind === 0 ? { kind: 'image', latentHeight: h, latentWidth: w } : { kind: 'audio', audioLatents: audio });
    }
    const packed = buildReferenceSequence({ ...g, textTags: (await c.ints('text_token_tags')).data, references });
    const model = await MiniMaxH3Transformer.load(e, c.ckpt, cfg, { dtype: v.dtype, int8: v.int8, prefix: WEIGHT_PREFIX });
    const cond = await c.input('condition_rows');
    const acond = await c.input('audio_condition_rows');
    const nc = packed.numConditionVideoRows;
    const nca = packed.numConditionAudioRows;
    assert.deepEqual([cond.shape[0], acond.shape[0]], [nc, nca], 'reference rows');
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
    const audio = e.empty([packed.audioIndices.length, an.shape[1]!], 'f32');
    const acondT = e.upload(acond.data, acond.shape, 'f32');
    const anT = e.upload(an.data, an.shape, 'f32');
    copyInto(e, acondT, audio.slice(0, 0, nca));
    copyInto(e, anT, audio.slice(0, nca, packed.audioIndices.length));
    acondT.free();
    anT.free();
    await expectTrajectory({
      e, c, v, model, packed, video, audio, steps,
      kept: [
        { stream: video, rows: cond, count: nc, label: 'image reference value' },
        { stream: audio, rows: acond, count: nca, label: 'voice value' },
      ],
    });
  }, v.name);
}
