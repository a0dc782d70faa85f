// Qwen-Image-2.1 transformer against golden vectors from diffusers (tools/golden/qwen_image21.py): the joint sequence
// and RoPE tables, one block, the whole forward (temb, shared modulation, every block, the target's output) in f32,
// f16 and int8 weight-only, and a 2-step sampling trajectory through the prefix KV cache.
import assert from 'node:assert/strict';
import type { Engine } from '../../src/engine/engine';
import type { WeightLoader } from '../../src/models/common/weights';
import { eulerDt, eulerStep, flowMatchSchedule, modelTimestep, modRow, parseFlowMatchConfig, QwenImage21Block, ropeRows, tanhGates } from '../../src/models/qwen_image21';
import type { Tensor } from '../../src/engine/tensor';
import { testEngine } from '../engine/helpers';
import { expectClose, goldenTests, WEIGHT_PREFIX, type GoldenCase } from './golden';
import { caseConfig, caseSequence, concatRows, loadCaseModel, pickRows, rows, uploader, VARIANTS, type Variant } from './qwen_image21-golden';
import { variantKey } from './qwen3-golden';

const MODEL = 'qwen_image21';

goldenTests(MODEL, 'rope', async (c) => {
  const sequence = await caseSequence(c);
  const axes = c.config.axes_dims_rope as number[];
  for (const [name, got] of [['frame', sequence.frame], ['height', sequence.height], ['width', sequence.width]] as const) {
    assert.deepEqual(Array.from(got), Array.from((await c.output(name)).data), `${name} positions`);
  }
  assert.deepEqual(Array.from(sequence.imageIds), Array.from((await c.output('image_ids')).data), 'image ids');
  const target = (await c.output('target_mask')).data;
  assert.equal(sequence.prefixLength, target.indexOf(1), 'the target starts where upstream marks it');
  assert.equal(sequence.targetLength, target.reduce((a, v) => a + v, 0));
  // the block ids give upstream's mask: k visible to q  <=>  k <= q or same image block
  const ids = sequence.imageIds;
  for (let q = 0; q < sequence.prefixLength; q++) {
    for (let k = 0; k < sequence.prefixLength; k++) {
      const want = k <= q || (ids[q]! >= 0 && ids[q] === ids[k]);
      assert.equal(sequence.blockIds[k]! <= sequence.blockIds[q]!, want, `mask at q ${q}, k ${k}`);
    }
  }
  const table = ropeRows(sequence, axes, c.config.theta as number);
  expectClose(table.cos, await c.output('cos'), c.tol('f32'), 'cos');
  expectClose(table.sin, await c.output('sin'), c.tol('f32'), 'sin');
});

/** Uploads the fixture's (B + 1, 4D) modulation rows [t..., t = 0] as our two rows [t, 0] with tanh'd gates. */
async function caseModulation(e: Engine, c: GoldenCase, dtype: Variant['dtype']): Promise<Tensor> {
  const m = await c.input('modulation');
  const R = m.shape[0]!;
  for (let r = 1; r < R - 1; r++) assert.deepEqual(pickRows(m, [r]).data, pickRows(m, [0]).data, 'samples share the timestep');
  const raw = e.upload(pickRows(m, [0, R - 1]).data, [2, m.shape[1]!], dtype);
  const mod = tanhGates(e, raw);
  raw.free();
  return mod;
}

for (const v of VARIANTS) {
  goldenTests(MODEL, 'block', async (c) => {
    const e = await testEngine();
    const cfg = caseConfig(c);
    const sequence = await caseSequence(c);
    const w: WeightLoader = { e, ckpt: c.ckpt, dtype: v.dtype, int8: v.int8, loaded: [] };
    const block = await QwenImage21Block.load(w, cfg, `${WEIGHT_PREFIX}transformer_blocks.0.`);
    const x = await c.input('hidden_states');
    const B = x.shape[0]!;
    const { prefixLength: Lp, length: L } = sequence;
    const kvShape = [B, cfg.numHeads, L, cfg.headDim];
    const temps: Tensor[] = [e.empty(kvShape, v.dtype), e.empty(kvShape, v.dtype), await caseModulation(e, c, v.dtype)];
    const [k, val, mod] = temps as [Tensor, Tensor, Tensor];
    const part = (a: number, b: number, row: number, blockIds?: Float32Array) => {
      const r = ropeRows(sequence, cfg.axesDimsRope, cfg.ropeTheta, a, b);
      const t = {
        cos: e.upload(r.cos, [r.rows, r.pairs], 'f32'),
        sin: e.upload(r.sin, [r.rows, r.pairs], 'f32'),
        blockIds: blockIds ? e.upload(blockIds, [blockIds.length], 'f32') : undefined,
      };
      temps.push(t.cos, t.sin, ...(t.blockIds ? [t.blockIds] : []));
      return { mod: modRow(mod, row), start: a, ...t };
    };
    try {
      const xp = e.upload(rows(x, 0, Lp).data, [B, Lp, cfg.dim], v.dtype);
      const xt = e.upload(rows(x, Lp, L).data, [B, L - Lp, cfg.dim], v.dtype);
      temps.push(xp, xt);
      const yp = block.forward(e, cfg, xp, part(0, Lp, 1, sequence.blockIds), { k, v: val });
      const yt = block.forward(e, cfg, xt, part(Lp, L, 0), { k, v: val });
      temps.push(yp, yt);
      c.expect(variantKey(v), concatRows(await e.read(yp), await e.read(yt), B), await c.output('hidden_states'), 'hidden_states', `block (${v.name})`);
    } finally {
      for (const t of temps) t.free();
      block.free();
    }
  }, v.name);

  goldenTests(MODEL, 'transformer', async (c) => {
    const e = await testEngine();
    const cfg = caseConfig(c);
    const sequence = await caseSequence(c);
    const m = await loadCaseModel(e, c, v);
    const temps: Tensor[] = [];
    const up = uploader(e, v.dtype, temps);
    try {
      const x = await c.input('hidden_states');
      const B = x.shape[0]!;
      const ts = (await c.input('timestep')).data;
      assert.ok(ts.every((t) => t === ts[0]), 'samples share the timestep');
      const Lr = sequence.referenceTokens;
      const out = m.forward({
        sequence,
        encoderHiddenStates: up(await c.input('encoder_hidden_states')),
        referenceLatents: Lr > 0 ? up(rows(x, 0, Lr)) : undefined,
        latents: up(rows(x, Lr, Lr + sequence.targetLength)),
        timestep: ts[0]!,
        blockOutputs: true,
      });
      temps.push(out.sample, ...out.blocks!.flatMap((b) => [b.prefix!, b.target]));
      // the timestep path: our row 0 (t) against each of upstream's B sample rows, and under causal conditioning our
      // row 1 (t = 0) against its row B
      const time = m.timeEmbedding(ts[0]!);
      const R = B + (cfg.causalCondition ? 1 : 0);
      const ours = async (t: Tensor) => ({ data: Float64Array.from(await e.read(t)), shape: [...t.shape] });
      const upTemb = await c.output('temb');
      const upMod = await c.output('modulation');
      const D = cfg.dim;
      upMod.data.forEach((val, i) => {
        if (Math.floor((i % (4 * D)) / D) % 2 === 1) upMod.data[i] = Math.tanh(val);
      });
      for (const [name, want] of [['temb', upTemb], ['modulation', upMod]] as const) {
        if (want.shape[0] !== R) throw new Error(`output.${name}: shape [${want.shape}], ${R} rows for batch ${B}${cfg.causalCondition ? ' and the t = 0 row' : ''}`);
      }
      const temb = await ours(time.temb);
      const mod = await ours(time.modulation);
      for (let b = 0; b < R; b++) {
        const row = b < B ? 0 : 1;
        const who = b < B ? `sample ${b}` : 't = 0';
        c.expect(variantKey(v), pickRows(temb, [row]), pickRows(upTemb, [b]), 'temb', `temb ${who} (${v.name})`);
        c.expect(variantKey(v), pickRows(mod, [row]), pickRows(upMod, [b]), 'modulation', `modulation, tanh(gates), ${who} (${v.name})`);
      }
      time.free();
      for (const [i, b] of out.blocks!.entries()) {
        c.expect(variantKey(v), concatRows(await e.read(b.prefix!), await e.read(b.target), B), await c.output(`block.${i}`), `block.${i}`, `block.${i} (${v.name})`);
      }
      const sample = await c.output('sample');
      c.expect(variantKey(v), await e.read(out.sample), rows(sample, sequence.prefixLength, sequence.length), 'sample', `sample, target rows (${v.name})`);
    } finally {
      for (const t of temps) t.free();
      m.free();
    }
  }, v.name);

  goldenTests(MODEL, 'trajectory', async (c) => {
    const e = await testEngine();
    const sequence = await caseSequence(c);
    const m = await loadCaseModel(e, c, v);
    const sched = parseFlowMatchConfig(c.config.scheduler);
    const steps = (await c.ints('steps')).data[0]!;
    const s = flowMatchSchedule(sched, steps, sequence.targetLength);
    expectClose(s.sigmas, await c.output('sigmas'), { atol: 1e-6, rtol: 1e-6 }, 'sigmas');
    expectClose(s.timesteps, await c.output('timesteps'), { atol: 1e-4, rtol: 1e-6 }, 'timesteps');
    assert.ok(!c.has('output', `noise_pred.${steps}`), `output.noise_pred.${steps}: the case has more steps than input.steps ${steps}`);
    const temps: Tensor[] = [];
    const up = uploader(e, v.dtype, temps);
    const cache = m.createCache(sequence);
    try {
      const enc = up(await c.input('encoder_hidden_states'));
      const refs = c.has('input', 'reference_latents') ? up(await c.input('reference_latents')) : undefined;
      let x = up(await c.input('latents'));
      for (let i = 0; i < steps; i++) {
        const out = m.forward({ sequence, encoderHiddenStates: enc, referenceLatents: refs, latents: x, timestep: modelTimestep(s, i), cache });
        assert.equal(cache.filled, true, 'the first step fills the prefix cache');
        c.expect(variantKey(v), await e.read(out.sample), await c.output(`noise_pred.${i}`), `noise_pred.${i}`, `noise_pred.${i} (${v.name})`);
        const next = eulerStep(e, x, out.sample, eulerDt(s, i));
        out.sample.free();
        temps.push(next);
        x = next;
        c.expect(variantKey(v), await e.read(x), await c.output(`latents.${i}`), `latents.${i}`, `latents.${i} (${v.name})`);
      }
    } finally {
      cache.free();
      for (const t of temps) t.free();
      m.free();
    }
  }, v.name);
}

// The prefix cache: a later step that reuses the cached prefix K/V (encoder states not even passed) gives what a
// fresh forward at that step gives, and once warm such a step creates no GPU buffer.
goldenTests(MODEL, 'trajectory', async (c) => {
  const e = await testEngine();
  const sequence = await caseSequence(c);
  const v = VARIANTS[0]!;
  const m = await loadCaseModel(e, c, v);
  const temps: Tensor[] = [];
  const up = uploader(e, v.dtype, temps);
  const cache = m.createCache(sequence);
  try {
    const enc = up(await c.input('encoder_hidden_states'));
    const refs = c.has('input', 'reference_latents') ? up(await c.input('reference_latents')) : undefined;
    const x = up(await c.input('latents'));
    const first = m.forward({ sequence, encoderHiddenStates: enc, referenceLatents: refs, latents: x, timestep: 0.9, cache });
    first.sample.free();
    const ts = [0.7, 0.5, 0.3];
    for (const [i, t] of ts.entries()) {
      if (i === 2) e.pool.frozen = true;
      const created = e.pool.stats().buffersCreated;
      const cached = m.forward({ sequence, latents: x, timestep: t, cache });
      if (i === 2) assert.equal(e.pool.stats().buffersCreated, created, 'a cached step created GPU buffers');
      e.pool.frozen = false;
      const fresh = m.forward({ sequence, encoderHiddenStates: enc, referenceLatents: refs, latents: x, timestep: t });
      const want = await e.read(fresh.sample);
      const got = await e.read(cached.sample);
      expectClose(got, { data: Float64Array.from(want), shape: fresh.sample.shape as number[] }, { atol: 1e-6, rtol: 1e-6 }, `cached vs fresh at t = ${t}`);
      cached.sample.free();
      fresh.sample.free();
    }
    // the cache really is read: corrupting its prefix part changes the next cached step
    const before = m.forward({ sequence, latents: x, timestep: 0.5, cache });
    e.fill(cache.layers[0]!.k, 0.25);
    const after = m.forward({ sequence, latents: x, timestep: 0.5, cache });
    const a = await e.read(before.sample);
    const b = await e.read(after.sample);
    assert.ok(a.some((val, j) => Math.abs(val - b[j]!) > 1e-3), 'output ignores the cached prefix keys');
    before.sample.free();
    after.sample.free();
  } finally {
    e.pool.frozen = false;
    cache.free();
    for (const t of temps) t.free();
    m.free();
  }
}, 'prefix cache');
