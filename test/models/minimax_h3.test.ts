// MiniMax H3 transformer against diffusers golden vectors (minimax_h3/{adaln,block,transformer}) in f32, f16 and
// int8 weight-only: AdaLN tables from the timestep, one block with its intermediates (segmented and per-row
// modulation), and the whole forward on a packed sequence (token refiner, every block, norm_out, both heads).
import assert from 'node:assert/strict';
import type { Engine } from '../../src/engine/engine';
import { silu } from '../../src/engine/ops/activation';
import { cast, copy } from '../../src/engine/ops/layout';
import type { Tensor } from '../../src/engine/tensor';
import { computeAdaLN } from '../../src/models/minimax_h3/transformer/adaln';
import { applyLinear, freeLinearModule, H3TransformerBlock, loadLinearModule } from '../../src/models/minimax_h3/transformer/blocks';
import { parseH3Config, type H3Config } from '../../src/models/minimax_h3/transformer/config';
import { RowModulation } from '../../src/models/minimax_h3/transformer/modulation';
import { timestepEmbedding } from '../../src/models/minimax_h3/transformer/rope';
import { rowTimestepPlan } from '../../src/models/minimax_h3/sampler/sampler';
import { MiniMaxH3Transformer } from '../../src/models/minimax_h3/transformer/transformer';
import type { WeightLoader } from '../../src/models/common/weights';
import { testEngine, type HostTensor } from '../engine/helpers';
import { expectClose, goldenTests, oneSample, WEIGHT_PREFIX, type GoldenCase } from './golden';
import { caseSequence, VARIANTS, type Variant } from './minimax_h3-golden';

const cfgOf = (c: GoldenCase): H3Config => parseH3Config(c.config, `${c.path} config`);
const key = (v: Variant) => (v.int8 ? 'int8' : v.dtype);

/** Captures tensors by copy (the forward frees its intermediates), read after the call. */
function recorder(e: Engine) {
  const seen = new Map<string, Tensor>();
  return {
    capture: (name: string, t: Tensor) => seen.set(name, copy(e, t)),
    async compare(c: GoldenCase, v: Variant, names: [mine: string, theirs: string][]) {
      for (const [mine, theirs] of names) {
        const t = seen.get(mine);
        assert.ok(t, `nothing captured as ${mine}`);
        const got = await e.read(t);
        c.expect(key(v), got, await c.output(theirs), theirs, `${theirs} (${v.name})`);
      }
    },
    free: () => seen.forEach((t) => t.free()),
  };
}

for (const v of VARIANTS) {
  goldenTests('minimax_h3', 'adaln', async (c) => {
    const e = await testEngine();
    const cfg = cfgOf(c);
    const t = await c.input('timestep');
    // the sinusoidal embedding is CPU code: compare it in f32 whatever the variant
    expectClose(timestepEmbedding(t.data, cfg.freqDim), await c.output('timestep_proj'), c.tol('f32'), 'timestep_proj');
    const w: WeightLoader = { e, ckpt: c.ckpt, dtype: v.dtype, int8: v.int8, loaded: [] };
    const f32: WeightLoader = { ...w, dtype: 'f32', int8: false };
    const p = WEIGHT_PREFIX;
    const H = cfg.hiddenSize;
    const m = {
      time_embedder: {
        linear_1: await loadLinearModule(f32, `${p}time_embedder.linear_1.`, cfg.timeEmbedHiddenDim, cfg.freqDim, true),
        linear_2: await loadLinearModule(f32, `${p}time_embedder.linear_2.`, cfg.timeEmbedDim, cfg.timeEmbedHiddenDim, true),
      },
      transformer_blocks: [] as { adaln_proj: { linear: Awaited<ReturnType<typeof loadLinearModule>> } }[],
      norm_out: { linear: await loadLinearModule(w, `${p}norm_out.linear.`, 2 * H, cfg.timeEmbedDim, true) },
    };
    for (let n = 0; n < cfg.numLayers; n++) m.transformer_blocks.push({ adaln_proj: { linear: await loadLinearModule(w, `${p}transformer_blocks.${n}.adaln_proj.linear.`, 18 * H, cfg.timeEmbedDim, true) } });
    const tables = computeAdaLN(e, cfg, m, t.data, v.dtype);
    try {
      c.expect('f32', await e.read(tables.temb), await c.output('temb'), 'temb', 'temb (f32 in every variant, as upstream keeps time_embedder)');
      for (let n = 0; n < cfg.numLayers; n++) {
        assert.deepEqual(tables.blocks[n]!.shape, [3 * t.data.length, 6 * H]);
        c.expect(key(v), await e.read(tables.blocks[n]!), await c.output(`adaln.${n}`), `adaln.${n}`, `adaln.${n} (${v.name})`);
      }
      const got = await e.read(tables.normOut);
      const half = (k: number) => Float64Array.from({ length: got.length / 2 }, (_, i) => got[Math.floor(i / H) * 2 * H + k * H + (i % H)]!);
      c.expect(key(v), half(0), await c.output('norm_out.shift'), 'norm_out.shift', `norm_out.shift (${v.name})`);
      c.expect(key(v), half(1), await c.output('norm_out.scale'), 'norm_out.scale', `norm_out.scale (${v.name})`);
    } finally {
      tables.free();
      for (const l of [m.time_embedder.linear_1, m.time_embedder.linear_2, m.norm_out.linear, ...m.transformer_blocks.map((b) => b.adaln_proj.linear)]) freeLinearModule(l);
    }
  }, v.name);

  for (const perRow of v.name === 'f32' ? [false, true] : [false]) {
    goldenTests('minimax_h3', 'block', async (c) => {
      const e = await testEngine();
      const cfg = cfgOf(c);
      const w: WeightLoader = { e, ckpt: c.ckpt, dtype: v.dtype, int8: v.int8, loaded: [] };
      const block = await H3TransformerBlock.load(w, cfg, `${WEIGHT_PREFIX}transformer_blocks.0.`);
      const up = (h: HostTensor, dtype = v.dtype) => e.upload(h.data, h.shape, dtype);
      const x = up(await c.input('hidden_states'));
      const temb = up(await c.input('temb'), 'f32');
      const act32 = silu(e, temb);
      const act = v.dtype === 'f32' ? act32 : cast(e, act32, v.dtype);
      const T = temb.shape[0]!;
      const table = applyLinear(e, block.adaln_proj.linear, act).reshape([3 * T, 6 * cfg.hiddenSize]);
      const rot = { cos: await halfTable(e, c, 'cos'), sin: await halfTable(e, c, 'sin') };
      const mod = RowModulation.create(e, (await c.ints('adaln_indices')).data, { perRow });
      if (!perRow) assert.equal(mod.segmented, c.name !== 'many_runs', 'many_runs has more runs than the norm kernel takes');
      const rec = recorder(e);
      try {
        const out = block.forward(e, cfg, x, table, { rot, mod, capture: rec.capture });
        rec.capture('out', out);
        out.free();
        await rec.compare(c, v, [['norm1', 'norm1'], ['attn', 'attn'], ['after_attn', 'after_attn'], ['ff', 'ff'], ['out', 'out']]);
      } finally {
        rec.free();
        for (const t of [x, temb, act32, table, rot.cos, rot.sin]) t.free();
        if (act !== act32) act.free();
        mod.free();
        block.free();
      }
    }, `${v.name}${perRow ? ', per-row modulation' : ''}`);
  }

  goldenTests('minimax_h3', 'transformer', async (c) => {
    const e = await testEngine();
    const cfg = cfgOf(c);
    const model = await MiniMaxH3Transformer.load(e, c.ckpt, cfg, { dtype: v.dtype, int8: v.int8, prefix: WEIGHT_PREFIX });
    const { packed } = await caseSequence(c);
    const ints = async (name: string) => Array.from((await c.output(name)).data);
    assert.deepEqual(Array.from(packed.videoIndices), await ints('video_indices'));
    assert.deepEqual(Array.from(packed.tags), await ints('token_tags'));
    // our row plan from the two schedule timesteps = the one the fixture ran with
    const plan = rowTimestepPlan(packed, (await c.input('video_t')).data[0]!, (await c.input('audio_t')).data[0]!);
    assert.deepEqual(Array.from(plan.timesteps), Array.from((await c.input('timestep')).data));
    assert.deepEqual(Array.from(plan.indices), Array.from((await c.input('timestep_indices')).data));

    const rows = async (name: string) => {
      const h = oneSample(await c.input(name), `input.${name}`); // [1, N, C] -> [N, C]
      return e.upload(h.data, h.shape, 'f32');
    };
    const video = await rows('hidden_states');
    const audio = await rows('audio_hidden_states');
    const textIn = await c.input('encoder_hidden_states');
    const text32 = e.upload(textIn.data, textIn.shape, 'f32');
    const sequence = model.prepare(packed);
    const rec = recorder(e);
    try {
      const text = model.encodeText(text32);
      rec.capture('refiner', text);
      const adaln = model.adaln(plan.timesteps);
      const out = model.forward({ video, audio, text, sequence, adaln, timestepIndices: plan.indices, capture: rec.capture });
      adaln.free();
      text.free();
      rec.capture('sample', out.video);
      rec.capture('audio_sample', out.audio);
      out.video.free();
      out.audio.free();
      const blocks = Array.from({ length: cfg.numLayers }, (_, n): [string, string] => [`block.${n}`, `block.${n}`]);
      await rec.compare(c, v, [['refiner', 'refiner'], ['packed', 'packed'], ...blocks, ['norm_out', 'norm_out'], ['sample', 'sample'], ['audio_sample', 'audio_sample']]);
    } finally {
      rec.free();
      for (const t of [video, audio, text32]) t.free();
      sequence.free();
      model.free();
    }
  }, v.name);
}

/** input.cos/sin [L, 6F] (the 3F angles twice) -> our f32 table [L, 3F]. */
async function halfTable(e: Engine, c: GoldenCase, name: string): Promise<Tensor> {
  const t = await c.input(name);
  const [L, W] = t.shape as [number, number];
  const P = W / 2;
  const out = new Float32Array(L * P);
  for (let l = 0; l < L; l++) for (let j = 0; j < P; j++) out[l * P + j] = t.data[l * W + j]!;
  return e.upload(out, [L, P], 'f32');
}
