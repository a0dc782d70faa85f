// Qwen3Model (transformers Qwen3Model) and the Qwen3-VL text model against golden vectors from transformers:
// every hidden state and the final norm, in f32, f16 and int8 weight-only (tolerances in each fixture), and
// prefill + single-token decode through the KV cache with a frozen pool (no buffer created per step).
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Checkpoint } from '../../src/engine/safetensors';
import { writeShardedSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import type { Tensor } from '../../src/engine/tensor';
import { Qwen3Model } from '../../src/models/qwen3';
import { testEngine } from '../engine/helpers';
import { goldenTests, WEIGHT_PREFIX } from './golden';
import { caseConfig, casePositions, compareOutput, decoderInput, loadCaseModel, VARIANTS } from './qwen3-golden';

for (const model of ['qwen3', 'qwen3_vl_text']) {
  for (const v of VARIANTS) {
    goldenTests(model, 'decoder', async (c) => {
      const e = await testEngine();
      const m = await loadCaseModel(e, c, v);
      const temps: { free(): void }[] = [];
      try {
        const out = m.forward(await decoderInput(e, c, m, temps));
        for (const [i, t] of out.hidden) {
          await compareOutput(e, c, await e.read(t), `hidden_states.${i}`, v);
          t.free();
        }
        await compareOutput(e, c, await e.read(out.final!), 'last_hidden_state', v);
        out.final!.free();
      } finally {
        for (const t of temps) t.free();
        m.free();
      }
    }, v.name);

    goldenTests(model, 'decode', async (c) => {
      const e = await testEngine();
      const m = await loadCaseModel(e, c, v);
      const ids = (await c.ints('ids')).data;
      const prefill = (await c.ints('prefill_length')).data[0]!;
      const mask = c.has('input', 'attention_mask') ? (await c.ints('attention_mask')).data : undefined;
      const cache = m.createCache({ capacity: ids.length + 3 });
      const got: number[] = [];
      try {
        const bounds: [number, number][] = [[0, prefill]];
        for (let t = prefill; t < ids.length; t++) bounds.push([t, t + 1]);
        for (const [step, [a, b]] of bounds.entries()) {
          // step 0 is the prefill, step 1 warms the pool up; from step 2 on no GPU buffer may be created
          if (step === 2) e.pool.frozen = true;
          const created = e.pool.stats().buffersCreated;
          const { final } = m.forward({ ids: ids.slice(a, b), cache, positions: await casePositions(c, a, b), padMask: mask?.slice(a, b) });
          got.push(...(await e.read(final!)));
          final!.free();
          if (step >= 2) assert.equal(e.pool.stats().buffersCreated, created, `decode step ${step} created GPU buffers`);
        }
        assert.equal(cache.length, ids.length);
        await compareOutput(e, c, Float32Array.from(got), 'last_hidden_state', v);
      } finally {
        e.pool.frozen = false;
        cache.free();
        m.free();
      }
    }, v.name);
  }
}

// Truncation (MiniMax H3 reads layer 50 of 64): a sharded checkpoint with the real key names that lacks every
// later layer and the final norm still loads with `layers`, and gives the same hidden state.
goldenTests('qwen3', 'decoder', async (c) => {
  const e = await testEngine();
  const cfg = caseConfig(c);
  const keep = cfg.numLayers - 1;
  const dir = await mkdtemp(join(tmpdir(), 'kiln-qwen3-'));
  const tensors: Record<string, WriteTensor> = {};
  for (const k of c.names('weight')) {
    const layer = /\.layers\.(\d+)\./.exec(k);
    if ((layer && Number(layer[1]) >= keep) || k.endsWith('.norm.weight') && !k.includes('layers.')) continue;
    tensors[k] = { dtype: 'BF16', shape: c.shape('weight', k), data: await c.ckpt.readFloat32(WEIGHT_PREFIX + k) };
  }
  await writeShardedSafetensors(dir, tensors, 64 * 1024);
  const ckpt = await Checkpoint.open(dir);
  const loaded: Tensor[] = [];
  try {
    assert.ok(!ckpt.has(`${cfg.keyPrefix}layers.${keep}.mlp.up_proj.weight`) && !ckpt.has(`${cfg.keyPrefix}norm.weight`));
    const full = await loadCaseModel(e, c, VARIANTS[0]!);
    const cut = await Qwen3Model.load(e, ckpt, cfg, { dtype: 'f32', layers: keep });
    assert.equal(cut.layers.length, keep);
    assert.equal(cut.norm, null);
    assert.throws(() => cut.forward({ ids: [1, 2] }), new RegExp(`needs ${cfg.numLayers} layers, ${keep} loaded`));
    assert.throws(() => cut.forward({ ids: [1, 2], hiddenStates: [keep + 1], final: false }), /needs \d+ layers/);
    const temps: { free(): void }[] = [];
    const input = await decoderInput(e, c, cut, temps);
    const a = cut.forward({ ...input, hiddenStates: [keep], final: false }).hidden.get(keep)!;
    const b = full.forward({ ...input, hiddenStates: [keep], final: false }).hidden.get(keep)!;
    loaded.push(a, b);
    // bf16 weights here vs the fixture's f32 in `full`: compare the truncated model with the golden output instead
    await compareOutput(e, c, await e.read(b), `hidden_states.${keep}`, VARIANTS[0]!);
    const ga = await e.read(a);
    const gb = await e.read(b);
    const rel = Math.max(...ga.map((x, i) => Math.abs(x - gb[i]!))) / Math.max(...gb.map(Math.abs));
    assert.ok(rel < 2e-2, `truncated bf16 model differs from the full f32 one by ${rel} of the largest value`);
    for (const t of temps) t.free();
    full.free();
    cut.free();
  } finally {
    for (const t of loaded) t.free();
    await ckpt.close();
    await rm(dir, { recursive: true, force: true });
  }
}, 'truncated, sharded, bf16');
