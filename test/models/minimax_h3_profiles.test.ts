// The six H3 profiles' model table (profiles.ts) against its sources -- the catalog's steps, weights/minimax-h3.json
// variants -- and loadH3Transformer for every profile on the golden case's tiny weights: int8 where the table says
// int8, the adapter merged where it names one, steps as each profile's weights count them (grid points for the base
// release, model evaluations for distilled weights: docs/models/minimax-h3.md "Steps per profile").
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { VIDEO_PROFILES } from '../../src/catalog';
import { writeDemoAdapter } from '../../src/models/minimax_h3/transformer/adapter';
import { parseH3Config } from '../../src/models/minimax_h3/transformer/config';
import { h3Variant, h3VariantSteps, H3_PROFILE_NAMES, H3_VARIANTS, loadH3Transformer } from '../../src/models/minimax_h3/variants';
import { h3TransformerFiles, referenceWeights } from '../../src/worker/profiles/video';
import { AUDIO_SHIFT, FlowSchedule, h3StepPlan, VIDEO_SHIFT } from '../../src/models/minimax_h3/sampler/sigmas';
import { defaultCatalog } from '../../src/weights/manifest';
import type { ProfileWeights } from '../../src/weights/state';
import { testEngine } from '../engine/helpers';
import { goldenCaseFiles, GoldenCase } from './golden';
import { caseWeights, runCase, tmpDir, writeDiffusers } from './minimax_h3_profiles-fixture';

test('profiles: the six video profiles of the catalog, steps from the catalog, DiT and adapter as the manifest', () => {
  assert.deepEqual([...H3_PROFILE_NAMES].sort(), VIDEO_PROFILES.map((p) => p.profile).sort());
  const catalog = defaultCatalog();
  for (const name of H3_PROFILE_NAMES) {
    const p = H3_VARIANTS[name];
    assert.equal(p.steps, VIDEO_PROFILES.find((v) => v.profile === name)!.default_steps, `${name} steps`);
    // the base release counts grid points (50 -> 49 forwards), distilled weights evaluations (8 -> 8 forwards); the
    // shifts never merge grid points at these counts, so both schedules run exactly the planned forwards
    const plan = h3VariantSteps(p, p.steps);
    assert.equal(p.stepCount, name.startsWith('basevid') ? 'grid-points' : 'evaluations', `${name}: step count`);
    assert.equal(plan.forwards, p.stepCount === 'evaluations' ? p.steps : p.steps - 1, `${name}: forwards`);
    for (const shift of [VIDEO_SHIFT, AUDIO_SHIFT]) assert.equal(new FlowSchedule(plan.gridPoints, shift).length, plan.forwards, `${name}: forwards at shift ${shift}`);
    assert.equal(plan.progressOffset + plan.forwards, p.steps, `${name}: progress ends at the steps asked for`);
    const first = catalog.profile(name).variants[0]!;
    const uses = (component: string) => first.uses.find((u) => u.components.includes(component))?.checkpoint;
    assert.equal(uses('transformer'), p.transformerCheckpoint, `${name}: the manifest's preferred DiT`);
    if (p.adapter) assert.equal(uses(p.adapter), 'minimax-h3-turbo', `${name}: the manifest's adapter`);
    else assert.ok(!first.uses.some((u) => u.checkpoint === 'minimax-h3-turbo' && u.components.some((c) => c.startsWith('adapter_'))), `${name}: no turbo adapter in the manifest`);
    assert.equal(p.weights === 'int8', name.includes('int8'), `${name}: int8 as its name says`);
    assert.equal(p.stepCache !== null, name === 'basevid50_sol', `${name}: step cache only for _sol`);
    // references run on every profile on the base release's Ref2VA DiT, which pull fetches with the first variant, the
    // distilled and turbo ones with their Ref2VA adapter (8-step at shift 6, the 4-step v0.1 at 12)
    assert.equal(uses('transformer_ref'), 'minimax-h3', `${name}: transformer_ref in the first variant`);
    assert.ok(catalog.profile(name).variants.some((v) => !v.uses.some((u) => u.components.includes('transformer_ref'))), `${name}: a variant without transformer_ref stays real`);
    const refAdapter = name.startsWith('basevid50') ? null : name === 'fastvid_4step_int8' ? 'ref_adapter_4step' : 'ref_adapter_8step';
    assert.equal(p.references.adapter, refAdapter, `${name}: its Ref2VA adapter`);
    if (refAdapter) assert.equal(uses(refAdapter), 'minimax-h3-turbo', `${name}: the Ref2VA adapter in the first variant`);
    assert.equal(p.references.videoShift, refAdapter === 'ref_adapter_8step' ? 6 : VIDEO_SHIFT, `${name}: the references' video shift`);
  }
  assert.equal(H3_VARIANTS.fastvid_fast.transformerCheckpoint, H3_VARIANTS.fastvid.transformerCheckpoint, 'fastvid_fast = fastvid weights');
  assert.ok(H3_VARIANTS.fastvid_fast.steps < H3_VARIANTS.fastvid.steps);
  assert.throws(() => h3Variant('imgmain'), /unknown MiniMax H3 profile/);
});

test('step plans: grid points (base) and model evaluations (distilled), at every count a job may ask', () => {
  assert.deepEqual(h3StepPlan('grid-points', 50), { gridPoints: 50, forwards: 49, progressOffset: 1 });
  assert.deepEqual(h3StepPlan('grid-points', 1), { gridPoints: 2, forwards: 1, progressOffset: 0 }, 'the smallest grid [1, 0]');
  assert.deepEqual(h3StepPlan('evaluations', 8), { gridPoints: 9, forwards: 8, progressOffset: 0 });
  assert.deepEqual(h3StepPlan('evaluations', 1), { gridPoints: 2, forwards: 1, progressOffset: 0 });
  for (let steps = 1; steps <= 200; steps++) {
    for (const count of ['grid-points', 'evaluations'] as const) {
      const p = h3StepPlan(count, steps);
      assert.equal(p.progressOffset + p.forwards, steps, `${count} ${steps}: progress ends at ${steps}`);
      for (const shift of [VIDEO_SHIFT, AUDIO_SHIFT]) assert.equal(new FlowSchedule(p.gridPoints, shift).length, p.forwards, `${count} ${steps} shift ${shift}`);
    }
  }
  // the LightX2V Turbo card's 4-NFE lists: video [1, .9730, .9231, .8000] -> 0, audio [1, .9000, .7500, .5000] -> 0
  const four = h3StepPlan('evaluations', 4).gridPoints;
  assert.deepEqual(Array.from(new FlowSchedule(four, VIDEO_SHIFT).sigmas, (s) => +s.toFixed(4)), [1, 0.973, 0.9231, 0.8, 0]);
  assert.deepEqual(Array.from(new FlowSchedule(four, AUDIO_SHIFT).sigmas, (s) => +s.toFixed(4)), [1, 0.9, 0.75, 0.5, 0]);
  assert.throws(() => h3StepPlan('evaluations', 0), /steps 0/);
});

test('profiles: the transformer and adapter paths of a resolved variant', () => {
  const file = (path: string, root: string) => ({ path, abs: join(root, path), state: 'ok' as const, optional: false });
  const comp = (name: string, checkpoint: string, root: string, files: string[]) => ({ name, checkpoint, root, place: 'weights-dir' as const, complete: true, files: files.map((f) => file(f, root)), problems: [] });
  const w: ProfileWeights = {
    profile: 'turbo_int8',
    state: 'real',
    demo: 'minimax-h3',
    variants: [],
    variant: {
      name: 'int8-file+adapter',
      complete: true,
      problems: [],
      components: {
        transformer: comp('transformer', 'minimax-h3-int8', '/w/MiniMax-H3-int8', ['transformer/minimax_h3_fl2va_int8.safetensors']),
        adapter_8step: comp('adapter_8step', 'minimax-h3-turbo', '/w/Minimax-h3-Turbo', ['8step/turbo_8step.safetensors']),
      },
    },
  };
  assert.deepEqual(h3TransformerFiles(H3_VARIANTS.turbo_int8, w), { transformer: '/w/MiniMax-H3-int8/transformer/minimax_h3_fl2va_int8.safetensors', adapter: '/w/Minimax-h3-Turbo/8step/turbo_8step.safetensors' });
  w.variant.components.transformer = comp('transformer', 'minimax-h3', '/w/MiniMax-H3', ['transformer/config.json', 'transformer/diffusion_pytorch_model-00001-of-00014.safetensors']);
  assert.deepEqual(h3TransformerFiles(H3_VARIANTS.basevid50, w), { transformer: '/w/MiniMax-H3/transformer' });
  w.variant.components.transformer_ref = comp('transformer_ref', 'minimax-h3', '/w/MiniMax-H3', ['transformer_ref/config.json']);
  assert.deepEqual(h3TransformerFiles(H3_VARIANTS.basevid50, w), { transformer: '/w/MiniMax-H3/transformer', transformerRef: '/w/MiniMax-H3/transformer_ref' });
  assert.equal(referenceWeights(H3_VARIANTS.basevid50, w), true);
  assert.match((referenceWeights(H3_VARIANTS.turbo_int8, w) as { missing: string }).missing, /^which these weights lack: the Ref2VA adapter ref_adapter_8step \(a \.safetensors file in Minimax-h3-Turbo\/ref2va-8step\/ of lightx2v\/Minimax-h3-Turbo\); npm run weights -- pull turbo_int8/);
  w.variant.components.ref_adapter_8step = comp('ref_adapter_8step', 'minimax-h3-turbo', '/w/Minimax-h3-Turbo', ['ref2va-8step/ref.safetensors']);
  assert.deepEqual(h3TransformerFiles(H3_VARIANTS.turbo_int8, w), { transformer: '/w/MiniMax-H3/transformer', transformerRef: '/w/MiniMax-H3/transformer_ref', refAdapter: '/w/Minimax-h3-Turbo/ref2va-8step/ref.safetensors', adapter: '/w/Minimax-h3-Turbo/8step/turbo_8step.safetensors' });
  assert.equal(referenceWeights(H3_VARIANTS.turbo_int8, w), true);
  delete w.variant.components.transformer_ref;
  assert.match((referenceWeights(H3_VARIANTS.basevid50, w) as { missing: string }).missing, /lack: transformer_ref\/ of MiniMaxAI\/MiniMax-H3;/);
  assert.throws(() => h3TransformerFiles(H3_VARIANTS.fastvid_4step_int8, w), /no adapter_4step/);
});

test('profiles: loadH3Transformer loads every profile from one diffusers folder (int8 and adapters as the table)', async () => {
  const e = await testEngine();
  const c = await GoldenCase.open(goldenCaseFiles('minimax_h3', 'transformer')[0]!);
  const cfg = parseH3Config(c.config, c.path);
  const dir = tmpDir('profiles');
  await writeDiffusers(join(dir, 'transformer'), c.config, await caseWeights(c));
  const adapter = join(dir, 'turbo.safetensors');
  await writeDemoAdapter(adapter, cfg, { rank: 2, seed: 3 });
  const outs = new Map<string, Float32Array>();
  try {
    for (const name of H3_PROFILE_NAMES) {
      const p = H3_VARIANTS[name];
      const files = { transformer: join(dir, 'transformer'), adapter: p.adapter ? adapter : undefined };
      const m = await loadH3Transformer(e, name, files, { dtype: 'f32' });
      try {
        assert.equal('q' in m.transformer_blocks[0]!.attn.to_q, p.weights === 'int8', `${name}: int8 linears`);
        assert.equal(m.stepCount, p.stepCount, `${name}: the loaded weights count steps as the profile`);
        const out = await runCase(e, m, c);
        assert.ok(out.video.every(Number.isFinite), `${name}: finite velocities`);
        outs.set(name, out.video);
      } finally {
        m.free();
      }
      if (p.adapter) await assert.rejects(loadH3Transformer(e, name, { transformer: join(dir, 'transformer') }), /no adapter file given/);
    }
    // same weights, same model; the adapter and int8 change it
    assert.deepEqual(outs.get('basevid50'), outs.get('fastvid'));
    assert.notDeepEqual(outs.get('turbo_int8'), outs.get('basevid50'));
  } finally {
    await c.close();
  }
});

test('profiles: the Ref2VA partition on every profile, with its Ref2VA adapter and shift; refused where the weights lack them', async () => {
  const e = await testEngine();
  await assert.rejects(loadH3Transformer(e, 'fastvid', { transformer: '/absent', transformerRef: '/absent' }, { partition: 'ref2va' }), /profile fastvid merges ref_adapter_8step for reference jobs: no adapter file given/);
  await assert.rejects(loadH3Transformer(e, 'basevid50', { transformer: '/absent' }, { partition: 'ref2va' }), /profile basevid50: no Ref2VA transformer \(transformer_ref\/\)/);
  const c = await GoldenCase.open(goldenCaseFiles('minimax_h3', 'transformer')[0]!);
  const cfg = parseH3Config(c.config, c.path);
  const dir = tmpDir('profiles-ref');
  await writeDiffusers(join(dir, 'transformer_ref'), c.config, await caseWeights(c));
  const ref8 = join(dir, 'ref8.safetensors');
  const ref4 = join(dir, 'ref4.safetensors');
  await writeDemoAdapter(ref8, cfg, { rank: 2, seed: 5 });
  await writeDemoAdapter(ref4, cfg, { rank: 2, seed: 6 });
  const outs = new Map<string, Float32Array>();
  try {
    for (const name of H3_PROFILE_NAMES) {
      const p = H3_VARIANTS[name];
      // the FL2VA side's turbo adapter is not needed for a reference job: only transformer_ref and the Ref2VA adapter
      const refAdapter = p.references.adapter === 'ref_adapter_8step' ? ref8 : p.references.adapter ? ref4 : undefined;
      const m = await loadH3Transformer(e, name, { transformer: '/absent', transformerRef: join(dir, 'transformer_ref'), refAdapter }, { dtype: 'f32', partition: 'ref2va' });
      try {
        assert.deepEqual([m.stepCount, m.videoShift, 'q' in m.transformer_blocks[0]!.attn.to_q], [p.stepCount, p.references.videoShift, p.weights === 'int8'], `${name}: steps, shift, int8`);
        outs.set(name, (await runCase(e, m, c)).video);
      } finally {
        m.free();
      }
    }
    // the base release runs transformer_ref as published; the adapter changes it; the 8-step profiles share theirs
    assert.deepEqual(outs.get('basevid50'), outs.get('basevid50_sol'));
    assert.notDeepEqual(outs.get('fastvid'), outs.get('basevid50'));
    assert.deepEqual(outs.get('fastvid'), outs.get('fastvid_fast'));
    assert.notDeepEqual(outs.get('fastvid_4step_int8'), outs.get('turbo_int8'));
  } finally {
    await c.close();
  }
});
