// Krea 2 against golden vectors from the official code (tools/golden/krea2.py, krea-ai/krea-2 mmdit.py and
// sampling.py): the RoPE tables, one single-stream block (GQA, sigmoid output gate, shared + per-block modulation),
// the text fusion from the selected encoder layers, the whole DiT (timestep path, text path, every block, the final
// layer) in f32, f16 and int8 weight-only, the sigma schedule, and sampling trajectories. Fixtures with text pads
// are run on the real tokens only (what the pipeline does), and compared on those rows.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Engine } from '../../src/engine/engine';
import type { Tensor } from '../../src/engine/tensor';
import type { WeightLoader } from '../../src/models/common/weights';
import {
  KREA2_LARGE_WIDE, krea2Patchify, krea2Positions, krea2RopeTable, krea2Sigmas, krea2StepSize, krea2Unpatchify,
  Krea2SingleStreamBlock, Krea2TextFusion, Krea2Transformer, parseKrea2Config, swigluWidth, type Krea2Config, type TextFusionTrace,
} from '../../src/models/krea2';
import { eulerStep } from '../../src/models/qwen_image21';
import { testEngine, type HostTensor } from '../engine/helpers';
import { expectClose, goldenTests, selectRows, WEIGHT_PREFIX, type GoldenCase } from './golden';
import { variantKey, VARIANTS, type Variant } from './qwen3-golden';

const MODEL = 'krea2';

const caseConfig = (c: GoldenCase): Krea2Config => parseKrea2Config(c.config, `${c.path} config`);

/** The text mask (B, L) of a case: the rows of the real tokens, shared by the batch (the pipeline's case). */
async function textRows(c: GoldenCase): Promise<{ keep: number[]; rows: number[]; B: number; L: number }> {
  const m = await c.ints('mask');
  const [B, L] = m.shape as [number, number];
  const row = m.data.slice(0, L);
  for (let b = 1; b < B; b++) assert.deepEqual(m.data.slice(b * L, (b + 1) * L), row, 'samples share the text mask');
  return { keep: m.data, rows: row.flatMap((v, i) => (v ? [i] : [])), B, L };
}

/** Rows `rows` along dim 1 of a (B, L, ...) host tensor. */
function pick(t: HostTensor, rows: number[]): HostTensor {
  const [B, L] = t.shape as [number, number];
  const w = t.data.length / (B * L);
  const out = new Float64Array(B * rows.length * w);
  for (let b = 0; b < B; b++) rows.forEach((r, i) => out.set(t.data.subarray((b * L + r) * w, (b * L + r + 1) * w), (b * rows.length + i) * w));
  return { data: out, shape: [B, rows.length, ...t.shape.slice(2)] };
}

function upload(e: Engine, temps: Tensor[], h: HostTensor, dtype: Variant['dtype']): Tensor {
  const t = e.upload(h.data, h.shape, dtype);
  temps.push(t);
  return t;
}

goldenTests(MODEL, 'rope', async (c) => {
  const pos = await c.input('pos');
  const axes = c.config.axes as number[];
  const table = krea2RopeTable(pos.data, axes, c.config.theta as number);
  expectClose(table.cos, await c.output('cos'), { atol: 1e-6, rtol: 0 }, 'cos');
  expectClose(table.sin, await c.output('sin'), { atol: 1e-6, rtol: 0 }, 'sin');
});

test('krea2 positions are sampling.prepare\'s: text at the origin, image rows (0, r, c) row-major', () => {
  assert.deepEqual(Array.from(krea2Positions(2, 2, 3)), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 1, 0, 0, 1, 1, 0, 1, 2]);
});

test('the released configuration parses to the stated sizes (krea2.md §1)', () => {
  const cfg = parseKrea2Config(KREA2_LARGE_WIDE);
  assert.equal(cfg.headDim, 128);
  assert.deepEqual(cfg.axes, [32, 48, 48]);
  assert.equal(cfg.mlpDim, 16384);
  assert.equal(cfg.txtMlpDim, 6912);
  assert.equal(cfg.txtHeadDim, 128);
  assert.equal(cfg.tokenDim, 64);
  assert.equal(cfg.theta, 1000);
  assert.equal(swigluWidth(6144, 4), 16384);
  assert.throws(() => parseKrea2Config({ ...KREA2_LARGE_WIDE, bias: true }), /bias/);
  assert.throws(() => parseKrea2Config({ ...KREA2_LARGE_WIDE, heads: 7 }), /multiple/);
  assert.throws(() => parseKrea2Config({ ...KREA2_LARGE_WIDE, depth: 3 }), /unknown keys depth/);
});

test('patchify and unpatchify are inverse, with feature c p^2 + ph p + pw', () => {
  const s = { batch: 2, channels: 3, height: 4, width: 6 };
  const latent = Float32Array.from({ length: 2 * 3 * 4 * 6 }, (_, i) => i);
  const tokens = krea2Patchify(latent, s, 2);
  // token (b 0, grid row 1, col 2), feature (c 1, ph 1, pw 0) = latent[0, 1, 3, 4]
  assert.equal(tokens[(1 * 3 + 2) * 12 + 1 * 4 + 1 * 2 + 0], latent[(1 * 4 + 3) * 6 + 4]);
  assert.deepEqual(krea2Unpatchify(tokens, s, 2), latent);
  assert.throws(() => krea2Patchify(latent, { ...s, width: 5 }, 2), /multiple of patch/);
});

goldenTests(MODEL, 'sigmas', async (c) => {
  const steps = (await c.ints('steps')).data[0]!;
  const mu = (await c.input('mu')).data[0]!;
  const o = Number.isNaN(mu)
    ? { seqLen: (await c.ints('seq_len')).data[0]!, x1: (await c.ints('x1')).data[0]!, x2: (await c.ints('x2')).data[0]!, y1: c.config.y1 as number, y2: c.config.y2 as number }
    : { mu };
  const s = krea2Sigmas(steps, o);
  expectClose(s, await c.output('sigmas'), c.tol('f32'), 'sigmas');
  assert.equal(s[0], 1);
  assert.equal(s[steps], 0);
});

test('Turbo\'s 8-step schedule at mu 1.15 (krea2.md §4)', () => {
  const want = [1.0, 0.956724, 0.904531, 0.840349, 0.759511, 0.654567, 0.512844, 0.310901, 0];
  krea2Sigmas(8, { mu: 1.15 }).forEach((s, i) => assert.ok(Math.abs(s - want[i]!) < 1e-6, `sigma ${i}: ${s} vs ${want[i]}`));
});

for (const v of VARIANTS) {
  goldenTests(MODEL, 'block', async (c) => {
    const e = await testEngine();
    const cfg = caseConfig(c);
    const w: WeightLoader = { e, ckpt: c.ckpt, dtype: v.dtype, int8: v.int8, loaded: [] };
    const block = await Krea2SingleStreamBlock.load(w, `${WEIGHT_PREFIX}blocks.0.`, cfg.features, cfg.heads, cfg.kvheads, cfg.mlpDim);
    const temps: Tensor[] = [];
    try {
      const r = krea2RopeTable((await c.input('pos')).data, cfg.axes, cfg.theta);
      const rope = { cos: e.upload(r.cos, [r.rows, r.pairs], 'f32'), sin: e.upload(r.sin, [r.rows, r.pairs], 'f32') };
      temps.push(rope.cos, rope.sin);
      const x = upload(e, temps, await c.input('x'), v.dtype);
      const mod = block.modulation(e, upload(e, temps, await c.input('vec'), v.dtype));
      temps.push(mod);
      const y = block.forward(e, x, mod, rope);
      temps.push(y);
      c.expect(variantKey(v), await e.read(y), await c.output('x'), 'x', `block (${v.name})`);
    } finally {
      for (const t of temps) t.free();
      block.free();
    }
  }, v.name);

  // The SwiGLU in row chunks (what a 4096 x 4096 picture needs at the real width) gives the one-piece result.
  goldenTests(MODEL, 'block', async (c) => {
    const e = await testEngine();
    const cfg = caseConfig(c);
    const w: WeightLoader = { e, ckpt: c.ckpt, dtype: v.dtype, int8: v.int8, loaded: [] };
    const block = await Krea2SingleStreamBlock.load(w, `${WEIGHT_PREFIX}blocks.0.`, cfg.features, cfg.heads, cfg.kvheads, cfg.mlpDim);
    const temps: Tensor[] = [];
    try {
      const x = await c.input('x');
      if (x.shape[0] !== 1) return; // row chunks are for batch 1
      const h = upload(e, temps, x, v.dtype);
      const whole = block.mlp.forward(e, h, h);
      const chunked = block.mlp.forward(e, h, h, undefined, 5);
      temps.push(whole, chunked);
      const a = await e.read(whole);
      const b = await e.read(chunked);
      assert.ok(x.shape[1]! > 5, 'the case has more rows than a chunk');
      a.forEach((val, i) => assert.ok(Math.abs(val - b[i]!) <= 1e-6 * Math.max(1, Math.abs(val)), `row-chunked SwiGLU at ${i}: ${b[i]} vs ${val}`));
    } finally {
      for (const t of temps) t.free();
      block.free();
    }
  }, `${v.name}, SwiGLU in row chunks`);

  goldenTests(MODEL, 'text_fusion', async (c) => {
    const e = await testEngine();
    const cfg = caseConfig(c);
    const w: WeightLoader = { e, ckpt: c.ckpt, dtype: v.dtype, int8: v.int8, loaded: [] };
    const fusion = await Krea2TextFusion.load(w, cfg, `${WEIGHT_PREFIX}txtfusion.`);
    const { rows } = await textRows(c);
    const temps: Tensor[] = [];
    const trace: TextFusionTrace = { layerwise: [], projected: null as unknown as Tensor, refiner: [] };
    try {
      const taps = upload(e, temps, pick(await c.input('taps'), rows), v.dtype);
      const out = fusion.forward(e, taps, trace);
      temps.push(...trace.layerwise, trace.projected, ...trace.refiner, out);
      const check = async (got: Tensor, name: string) => c.expect(variantKey(v), await e.read(got), pick(await c.output(name), rows), name, `${name} (${v.name})`);
      for (const [i, t] of trace.layerwise.entries()) await check(t, `layerwise.${i}`);
      await check(trace.projected, 'projected');
      for (const [i, t] of trace.refiner.entries()) await check(t, `refiner.${i}`);
      await check(out, 'out');
    } finally {
      for (const t of temps) t.free();
      fusion.free();
    }
  }, v.name);

  goldenTests(MODEL, 'transformer', async (c) => {
    const e = await testEngine();
    const cfg = caseConfig(c);
    const m = await Krea2Transformer.load(e, c.ckpt, cfg, { dtype: v.dtype, int8: v.int8, prefix: WEIGHT_PREFIX });
    const { rows, keep, B, L } = await textRows(c);
    const temps: Tensor[] = [];
    const latents = await c.input('latents');
    const [, C, H, W] = latents.shape as [number, number, number, number];
    const gridH = H / cfg.patch;
    const gridW = W / cfg.patch;
    const N = gridH * gridW;
    const geometry = m.geometry(rows.length, gridH, gridW);
    try {
      const tokens = krea2Patchify(latents.data, { batch: B, channels: C, height: H, width: W }, cfg.patch);
      expectClose(tokens, await c.output('img'), { atol: 0, rtol: 0 }, 'patch tokens');
      const ts = (await c.input('t')).data;
      assert.ok(ts.every((t) => t === ts[0]), 'samples share sigma');
      const time = m.timeVectors(ts[0]!);
      temps.push(time.t, time.tvec);
      c.expect(variantKey(v), await e.read(time.t), await c.output('t'), 't', `t = tmlp(temb) (${v.name})`);
      c.expect(variantKey(v), await e.read(time.tvec), await c.output('tvec'), 'tvec', `tvec = tproj(t) (${v.name})`);
      const context = m.context(upload(e, temps, pick(await c.input('context'), rows), v.dtype));
      temps.push(context);
      c.expect(variantKey(v), await e.read(context), pick(await c.output('context'), rows), 'context', `context (${v.name})`);
      const img = upload(e, temps, { data: Float64Array.from(tokens), shape: [B, N, cfg.tokenDim] }, v.dtype);
      const out = m.forward({ img, context, sigma: ts[0]!, geometry, blockOutputs: true });
      temps.push(out.sample, ...out.blocks!);
      // block outputs over [real text rows | image rows]
      const seqKeep = Array.from({ length: B }, (_, b) => [...keep.slice(b * L, (b + 1) * L), ...new Array<number>(N).fill(1)]).flat();
      for (const [i, blk] of out.blocks!.entries()) {
        const want = await c.output(`block.${i}`);
        c.expect(variantKey(v), await e.read(blk), selectRows(want.data, want.shape, seqKeep), `block.${i}`, `block.${i} (${v.name})`);
      }
      c.expect(variantKey(v), await e.read(out.sample), await c.output('sample'), 'sample', `sample (${v.name})`);
    } finally {
      geometry.free();
      for (const t of temps) t.free();
      m.free();
    }
  }, v.name);

  goldenTests(MODEL, 'trajectory', async (c) => {
    const e = await testEngine();
    const cfg = caseConfig(c);
    const m = await Krea2Transformer.load(e, c.ckpt, cfg, { dtype: v.dtype, int8: v.int8, prefix: WEIGHT_PREFIX });
    const { rows } = await textRows(c);
    const temps: Tensor[] = [];
    const noise = await c.input('noise');
    const [B, C, H, W] = noise.shape as [number, number, number, number];
    const shape = { batch: B, channels: C, height: H, width: W };
    const geometry = m.geometry(rows.length, H / cfg.patch, W / cfg.patch);
    try {
      const steps = (await c.ints('steps')).data[0]!;
      const sigmas = krea2Sigmas(steps, { mu: (await c.input('mu')).data[0]! });
      expectClose(sigmas, await c.output('sigmas'), { atol: 0, rtol: 0 }, 'sigmas');
      const context = m.context(upload(e, temps, pick(await c.input('context'), rows), v.dtype));
      temps.push(context);
      const tokens = krea2Patchify(noise.data, shape, cfg.patch);
      let x = upload(e, temps, { data: Float64Array.from(tokens), shape: [B, tokens.length / B / cfg.tokenDim, cfg.tokenDim] }, v.dtype);
      for (let i = 0; i < steps; i++) {
        const out = m.forward({ img: x, context, sigma: sigmas[i]!, geometry });
        temps.push(out.sample);
        c.expect(variantKey(v), await e.read(out.sample), await c.output(`v.${i}`), `v.${i}`, `v.${i} (${v.name})`);
        x = eulerStep(e, x, out.sample, krea2StepSize(sigmas, i));
        temps.push(x);
        c.expect(variantKey(v), await e.read(x), await c.output(`img.${i}`), `img.${i}`, `img.${i} (${v.name})`);
      }
      const latents = krea2Unpatchify(await e.read(x), shape, cfg.patch);
      c.expect(variantKey(v), latents, await c.output('latents'), 'latents', `latents (${v.name})`);
    } finally {
      geometry.free();
      for (const t of temps) t.free();
      m.free();
    }
  }, v.name);
}
