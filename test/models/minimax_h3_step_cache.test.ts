// basevid50_sol's step cache (step-cache.ts + sampleH3's stepCache) on the tiny golden transformer, sampled from the
// t2va trajectory case's noise over the full 50-point grid: the reuse rule is obeyed, a zero threshold changes
// nothing (bit for bit), and the profile's policy saves forwards while the final latents stay close to the
// uncached run -- closer than spending the same number of forwards on a shorter grid. The figures printed as
// diagnostics are the ones in docs/models/minimax-h3.md ("Profiles"); rerun: npm test -- minimax_h3_step_cache
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { copyInto } from '../../src/engine/ops/layout';
import { parseH3Config } from '../../src/models/minimax_h3/transformer/config';
import { patchify } from '../../src/models/minimax_h3/transformer/patchify';
import { H3_VARIANTS } from '../../src/models/minimax_h3/variants';
import { sampleH3, type H3SampleResult } from '../../src/models/minimax_h3/sampler/sampler';
import { relativeL1, StepCache, type StepCachePolicy } from '../../src/models/minimax_h3/sampler/step-cache';
import { MiniMaxH3Transformer } from '../../src/models/minimax_h3/transformer/transformer';
import { testEngine } from '../engine/helpers';
import { goldenCaseFiles, GoldenCase, WEIGHT_PREFIX } from './golden';
import { caseSequence } from './minimax_h3-golden';

const STEPS = H3_VARIANTS.basevid50_sol.steps;

/** Samples the t2va trajectory case's noise with `steps` grid points; final video + audio latents on the host. */
async function sampler() {
  const e = await testEngine();
  const c = await GoldenCase.open(goldenCaseFiles('minimax_h3', 'trajectory').find((f) => f.includes('t2va'))!);
  const cfg = parseH3Config(c.config, c.path);
  const model = await MiniMaxH3Transformer.load(e, c.ckpt, cfg, { dtype: 'f32', prefix: WEIGHT_PREFIX });
  const { packed } = await caseSequence(c);
  assert.equal(packed.numConditionVideoRows, 0);
  const noise = await c.input('noise');
  const an = await c.input('audio_noise');
  const textIn = await c.input('encoder_hidden_states');
  const text32 = e.upload(textIn.data, textIn.shape, 'f32');
  const text = model.encodeText(text32);
  text32.free();
  const sequence = model.prepare(packed);
  const run = async (steps: number, stepCache: StepCachePolicy | null) => {
    const noiseT = e.upload(noise.data, noise.shape, 'f32');
    const video = patchify(e, noiseT, cfg.patchSize);
    noiseT.free();
    const audio = e.upload(an.data, an.shape, 'f32');
    try {
      const r: H3SampleResult = await sampleH3(e, model, sequence, text, video, audio, { steps, stepCache });
      const [v, a] = [await e.read(video), await e.read(audio)];
      const all = new Float32Array(v.length + a.length);
      all.set(v);
      all.set(a, v.length);
      return { ...r, latents: all };
    } finally {
      video.free();
      audio.free();
    }
  };
  const close = async () => {
    text.free();
    sequence.free();
    model.free();
    await c.close();
  };
  return { run, close, copyInto };
}

/** Relative RMS of a against b. */
function relRms(a: Float32Array, b: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    num += (a[i]! - b[i]!) ** 2;
    den += b[i]! ** 2;
  }
  return Math.sqrt(num / den);
}

test('step cache: the rule (warmup, tail, consecutive reuses, threshold)', () => {
  const c = new StepCache({ warmup: 2, tail: 1, threshold: 0.5, maxConsecutive: 1 }, 6);
  assert.equal(c.reuse(0), false, 'nothing cached yet');
  assert.equal(c.reuse(1), false, 'warmup');
  assert.throws(() => new StepCache({ warmup: 0, tail: 0, threshold: 1, maxConsecutive: 1 }, 4), /bad policy/);
  assert.equal(relativeL1([1, 2], [1, 2]), 0);
  assert.equal(relativeL1([2, 2], [1, 2]), 1 / 3);
});

test('step cache on the tiny transformer: 50 grid points, reuse pattern, bit-identity at threshold 0, quality', async (t: TestContext) => {
  const s = await sampler();
  try {
    const full = await s.run(STEPS, null);
    assert.equal(full.forwards, STEPS - 1);
    assert.deepEqual(full.reused, []);

    const never = await s.run(STEPS, { warmup: 1, tail: 0, threshold: 0, maxConsecutive: 3 });
    assert.deepEqual(never.reused, []);
    assert.deepEqual(never.latents, full.latents, 'a cache that never reuses changes nothing');
    const ch = never.changes;
    const fmt = (i: number) => `step ${i + 1}: ${ch[i]!.toExponential(2)}`;
    t.diagnostic(`per-step relative L1 change of the velocity: ${[0, 4, 9, 19, 29, 39, 44, 47].filter((i) => i < ch.length).map(fmt).join(', ')}; max ${Math.max(...ch).toExponential(2)}`);

    const policies: [string, StepCachePolicy][] = [
      ['basevid50_sol', H3_VARIANTS.basevid50_sol.stepCache!],
      ['threshold 0.005', { ...H3_VARIANTS.basevid50_sol.stepCache!, threshold: 0.005 }],
      ['threshold 0.2, 2 in a row', { ...H3_VARIANTS.basevid50_sol.stepCache!, threshold: 0.2, maxConsecutive: 2 }],
    ];
    for (const [name, p] of policies) {
      const r = await s.run(STEPS, p);
      // the rule: never in warmup or tail, never more than maxConsecutive in a row
      const n = STEPS - 1;
      let run = 0;
      for (let i = 0; i < n; i++) {
        const hit = r.reused.includes(i);
        if (hit) assert.ok(i >= p.warmup && i < n - p.tail, `${name}: step ${i} reused outside [warmup, n - tail)`);
        run = hit ? run + 1 : 0;
        assert.ok(run <= p.maxConsecutive, `${name}: ${run} reuses in a row`);
      }
      assert.equal(r.forwards, n - r.reused.length);
      const err = relRms(r.latents, full.latents);
      // the same number of forwards spent on a shorter grid instead
      const short = await s.run(r.forwards + 1, null);
      const errShort = relRms(short.latents, full.latents);
      t.diagnostic(`${name}: ${r.forwards}/${n} forwards (${r.reused.length} reused: ${r.reused.join(' ')}), speed-up x${(n / r.forwards).toFixed(2)}, final latents rel RMS vs uncached ${err.toExponential(2)}; ${r.forwards + 1}-point grid: ${errShort.toExponential(2)}`);
      if (name === 'basevid50_sol') {
        assert.ok(r.reused.length >= 5, `the profile's policy saves forwards on this model (${r.reused.length})`);
        assert.ok(err < 0.02, `the profile's policy keeps the final latents within 2% RMS (${err})`);
        assert.ok(err < errShort, `caching beats a shorter grid at equal forwards (${err} vs ${errShort})`);
      }
    }
  } finally {
    await s.close();
  }
});
