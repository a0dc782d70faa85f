// MiniMax H3 dual-schedule flow-matching Euler sampler against diffusers (minimax_h3/{scheduler,trajectory}):
// both schedules' sigmas and timesteps for 50/8/4/3/2 grid points, Euler chains on the GPU, and a 2-step
// trajectory of the tiny transformer from fixed noise (t2va, and fl2va whose keyframe rows must stay put).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { copyInto } from '../../src/engine/ops/layout';
import { parseH3Config } from '../../src/models/minimax_h3/transformer/config';
import { patchify, unpatchify } from '../../src/models/minimax_h3/transformer/patchify';
import { rowTimestepPlan, sampleH3, tableGroups } from '../../src/models/minimax_h3/sampler/sampler';
import { AUDIO_SHIFT, FlowSchedule, flowSigmas, VIDEO_SHIFT } from '../../src/models/minimax_h3/sampler/sigmas';
import { MiniMaxH3Transformer } from '../../src/models/minimax_h3/transformer/transformer';
import { testEngine, type Tolerance } from '../engine/helpers';
import { expectClose, goldenCaseFiles, goldenDir, GoldenCase, goldenTests, WEIGHT_PREFIX } from './golden';
import { caseSequence, VARIANTS } from './minimax_h3-golden';
import { expectTrajectory } from './minimax_h3-trajectory';

// Sigmas: float32 in upstream's order; torch.linspace's vectorised path may differ from the scalar formula by
// an ulp (see sigmas.ts), which the shift can at most double: 2.5e-7 absolute covers it, an off-by-one grid
// or a wrong shift is off by 1e-2.
const SIGMA_TOL: Tolerance = { atol: 2.5e-7, rtol: 0 };

goldenTests('minimax_h3', 'scheduler', async (c) => {
  const e = await testEngine();
  const steps = c.config.num_inference_steps as number;
  const sample = await c.input('sample');
  for (const name of ['video', 'audio'] as const) {
    const shift = (c.config[name] as { shift: number }).shift;
    assert.equal(shift, name === 'video' ? VIDEO_SHIFT : AUDIO_SHIFT, `${name} shift of the real config`);
    const s = new FlowSchedule(steps, shift);
    expectClose(s.sigmas, await c.output(`${name}.sigmas`), SIGMA_TOL, `${name}.sigmas`);
    expectClose(s.timesteps, await c.output(`${name}.timesteps`), SIGMA_TOL, `${name}.timesteps`);
    const vel = await c.input(`${name}.velocity`);
    let x = e.upload(sample.data, sample.shape, 'f32');
    const chain: number[] = [];
    const n = sample.data.length;
    for (let i = 0; i < s.length; i++) {
      const v = e.upload(vel.data.subarray(i * n, (i + 1) * n), [n], 'f32');
      const next = s.step(e, i, x, v);
      v.free();
      x.free();
      x = next;
      chain.push(...(await e.read(x)));
    }
    x.free();
    expectClose(chain, await c.output(`${name}.samples`), c.tol('f32'), `${name}.samples`);
  }
});

for (const v of VARIANTS) {
  goldenTests('minimax_h3', 'trajectory', async (c) => {
    const e = await testEngine();
    const cfg = parseH3Config(c.config, `${c.path} config`);
    const steps = (await c.ints('num_inference_steps')).data[0]!;
    const model = await MiniMaxH3Transformer.load(e, c.ckpt, cfg, { dtype: v.dtype, int8: v.int8, prefix: WEIGHT_PREFIX });
    const { geometry, packed } = await caseSequence(c);
    const noise = await c.input('noise');
    const noiseT = e.upload(noise.data, noise.shape, 'f32');
    const rows = patchify(e, noiseT, cfg.patchSize);
    expectClose(await e.read(rows), await c.output('video_rows'), { atol: 0, rtol: 0 }, 'patchify');
    const back = unpatchify(e, rows, cfg.inChannels, [geometry.numLatentFrames, geometry.latentHeight, geometry.latentWidth], cfg.patchSize);
    expectClose(await e.read(back), noise, { atol: 0, rtol: 0 }, 'unpatchify');
    back.free();
    noiseT.free();

    // video rows: keyframe conditioning rows first, then the noise; audio rows: the noise (channel-major)
    const cond = await c.input('condition_rows');
    const nc = packed.numConditionVideoRows;
    assert.equal(cond.shape[0], nc);
    const video = e.empty([packed.videoIndices.length, rows.shape[1]!], 'f32');
    if (nc) {
      const condT = e.upload(cond.data, cond.shape, 'f32');
      copyInto(e, condT, video.slice(0, 0, nc));
      condT.free();
    }
    copyInto(e, rows, video.slice(0, nc, packed.videoIndices.length));
    rows.free();
    const an = await c.input('audio_noise');
    const audio = e.upload(an.data, an.shape, 'f32');
    await expectTrajectory({
      e, c, v, model, packed, video, audio, steps, planCheck: 'capture',
      kept: [{ stream: video, rows: cond, count: nc, label: 'condition value' }],
    });
  }, v.name);
}

test('the real scheduler configs: video shift 12, audio shift 3; the grid ends at 0', () => {
  const read = (f: string) => JSON.parse(readFileSync(join(goldenDir('minimax_h3', 'configs'), f), 'utf8')) as { shift: number };
  assert.equal(read('scheduler.json').shift, VIDEO_SHIFT);
  assert.equal(read('audio-scheduler.json').shift, AUDIO_SHIFT);
  for (const n of [2, 4, 8, 50]) {
    const s = flowSigmas(n, VIDEO_SHIFT);
    assert.equal(s.length, n);
    assert.equal(s[0], 1);
    assert.equal(s[n - 1], 0);
    for (let i = 1; i < n; i++) assert.ok(s[i]! < s[i - 1]!, 'strictly decreasing');
  }
  assert.throws(() => flowSigmas(1, 12), /steps 1/);
});

test('an explicit sigma grid (a distilled checkpoint\'s own positions) is used verbatim', () => {
  const s = FlowSchedule.fromSigmas([1, 0.7, 0.4, 0.15, 0]);
  assert.equal(s.length, 4);
  assert.deepEqual(Array.from(s.sigmas), [1, 0.7, 0.4, 0.15, 0].map(Math.fround));
  assert.deepEqual(Array.from(s.timesteps), [0, 0.3, 0.6, 0.85].map((t, i) => Math.fround(1 - Math.fround([1, 0.7, 0.4, 0.15][i]!))));
  assert.throws(() => FlowSchedule.fromSigmas([1, 0.5]), /ending at 0/);
  assert.throws(() => FlowSchedule.fromSigmas([1, 1, 0]), /strictly decreasing/);
  assert.throws(() => FlowSchedule.fromSigmas([0]), /at least two/);
});

test('rowTimestepPlan: text and video at the video t, audio at its own, keyframes at max(t, 0.999)', () => {
  const packed = { length: 6, positions: new Float64Array(18), tags: new Uint8Array(6), textIndices: Int32Array.from([0]), videoIndices: Int32Array.from([1, 4, 5]), audioIndices: Int32Array.from([2, 3]), numConditionVideoRows: 1, numConditionAudioRows: 0 };
  const p = rowTimestepPlan(packed, 0.25, 0.5);
  assert.deepEqual(Array.from(p.timesteps), [0.25, 0.5, Math.fround(0.999)]);
  assert.deepEqual(Array.from(p.indices), [0, 2, 1, 1, 0, 0]);
  const same = rowTimestepPlan({ ...packed, numConditionVideoRows: 0 }, 0, 0);
  assert.deepEqual(Array.from(same.timesteps), [0]);
  assert.deepEqual(Array.from(same.indices), [0, 0, 0, 0, 0, 0]);
});

/** The tiny transformer on the t2va 2-step case, ready to sample: its packed sequence, encoded text and audio noise. */
async function openT2vaCase() {
  const e = await testEngine();
  const c = await GoldenCase.open(goldenCaseFiles('minimax_h3', 'trajectory').find((f) => f.endsWith('t2va_2_steps.safetensors'))!);
  const model = await MiniMaxH3Transformer.load(e, c.ckpt, parseH3Config(c.config), { prefix: WEIGHT_PREFIX });
  const { packed } = await caseSequence(c);
  const sequence = model.prepare(packed);
  const textIn = await c.input('encoder_hidden_states');
  const text32 = e.upload(textIn.data, textIn.shape, 'f32');
  const text = model.encodeText(text32);
  const an = await c.input('audio_noise');
  const close = async () => {
    for (const t of [text32, text]) t.free();
    sequence.free();
    model.free();
    await c.close();
  };
  return { e, c, model, packed, sequence, text, an, close };
}

test('after two warm-up steps a sampling step creates no GPU buffer', async () => {
  const { e, c, model, packed, sequence, text, an, close } = await openT2vaCase();
  const video = e.upload((await c.output('video_rows')).data, [packed.videoIndices.length, 16], 'f32');
  const audio = e.upload(an.data, an.shape, 'f32');
  const created: number[] = [];
  try {
    await sampleH3(e, model, sequence, text, video, audio, {
      steps: 6,
      onStep: (k) => {
        created.push(e.pool.stats().buffersCreated);
        if (k === 2) e.pool.frozen = true;
      },
    });
    assert.equal(created.length, 5);
    assert.equal(created[4], created[1], `buffers created per step: ${created.join(', ')}`);
  } finally {
    e.pool.frozen = false;
    for (const t of [video, audio]) t.free();
    await close();
  }
});

test('tableGroups: consecutive steps share a table build up to the timestep bound', () => {
  const plan = (...t: number[]) => ({ timesteps: Float32Array.from(t), indices: new Int32Array(0) });
  const plans = [plan(0, 0.5), plan(0.25, 0.5), plan(0.5, 0.75), plan(0.75, 0.9)];
  const g = tableGroups(plans, 3);
  assert.deepEqual(g.map((x) => [Array.from(x.timesteps), x.end]), [[[0, 0.25, 0.5], 2], [[0.5, 0.75, Math.fround(0.9)], 4]]);
  assert.deepEqual(tableGroups(plans, 1).map((x) => x.end), [1, 2, 3, 4], 'a step over the bound is its own group');
  assert.deepEqual(tableGroups(plans, 32).map((x) => x.end), [4]);
});

test('AdaLN tables: one build for a distilled job, the same latents as a build per step', async () => {
  const { e, c, model, packed, sequence, text, an, close } = await openT2vaCase();
  const builds: number[] = [];
  const adaln = model.adaln.bind(model);
  model.adaln = (ts) => {
    builds.push(ts.length);
    return adaln(ts);
  };
  const run = async (tableTimesteps?: number) => {
    const video = e.upload((await c.output('video_rows')).data, [packed.videoIndices.length, 16], 'f32');
    const audio = e.upload(an.data, an.shape, 'f32');
    builds.length = 0;
    await sampleH3(e, model, sequence, text, video, audio, { steps: 6, tableTimesteps });
    const out = { video: await e.read(video), audio: await e.read(audio), builds: [...builds] };
    video.free();
    audio.free();
    return out;
  };
  try {
    const grouped = await run();
    const perStep = await run(1);
    assert.equal(grouped.builds.length, 1, `table builds: ${grouped.builds.join(', ')}`);
    assert.equal(perStep.builds.length, 5);
    expectClose(grouped.video, { data: Float64Array.from(perStep.video), shape: [perStep.video.length] }, { atol: 1e-6, rtol: 1e-5 }, 'video latents');
    expectClose(grouped.audio, { data: Float64Array.from(perStep.audio), shape: [perStep.audio.length] }, { atol: 1e-6, rtol: 1e-5 }, 'audio latents');
  } finally {
    await close();
  }
});
