// Krea 2 against golden vectors from the official code (tools/golden/krea2.py, krea-ai/krea-2 mmdit.py and
// sampling.py): the RoPE tables, one single-stream block (GQA, sigmoid output gate, shared + per-block modulation),
// the text fusion from the selected encoder layers, the whole DiT (timestep path, text path, every block, the final
// layer) in f32, f16 and int8 weight-only, the sigma schedule, and sampling trajectories. Fixtures with text pads
// are run on the real tokens only (what the pipeline does), and compared on those rows.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Checkpoint } from '../../src/engine/safetensors';
import { writeSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import type { Tensor } from '../../src/engine/tensor';
import type { WeightLoader } from '../../src/models/common/weights';
import {
  KREA2_LARGE_WIDE, krea2Patchify, krea2Positions, krea2RopeTable, krea2Sigmas, krea2Unpatchify, Krea2SingleStreamBlock,
  parseKrea2Config, swigluWidth,
} from '../../src/models/krea2';
import { testEngine } from '../engine/helpers';
import { expectClose, goldenCaseFiles, GoldenCase, goldenTests, readShaped, WEIGHT_PREFIX } from './golden';
import { caseConfig, textFusionCase, trajectoryCase, transformerCase, upload } from './krea2-golden';
import { variantKey, VARIANTS } from './qwen3-golden';

const MODEL = 'krea2';

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
      c.expect(variantKey(v), await readShaped(e, y), await c.output('x'), 'x', `block (${v.name})`);
    } finally {
      for (const t of temps) t.free();
      block.free();
    }
  }, v.name);

  // The SwiGLU in row chunks (what a 4096 x 4096 picture needs at the real width) gives the one-piece result. Row
  // chunks are for batch 1 and the MLP is per row, so a case's samples are one row run of B x L.
  goldenTests(MODEL, 'block', async (c) => {
    const e = await testEngine();
    const cfg = caseConfig(c);
    const w: WeightLoader = { e, ckpt: c.ckpt, dtype: v.dtype, int8: v.int8, loaded: [] };
    const block = await Krea2SingleStreamBlock.load(w, `${WEIGHT_PREFIX}blocks.0.`, cfg.features, cfg.heads, cfg.kvheads, cfg.mlpDim);
    const temps: Tensor[] = [];
    try {
      const x = await c.input('x');
      const [B, L, F] = x.shape as [number, number, number];
      const h = upload(e, temps, { data: x.data, shape: [1, B * L, F] }, v.dtype);
      const whole = block.mlp.forward(e, h, h);
      const chunk = Math.max(1, Math.min(5, Math.ceil((B * L) / 2)));
      const chunked = block.mlp.forward(e, h, h, undefined, chunk);
      temps.push(whole, chunked);
      const a = await e.read(whole);
      const b = await e.read(chunked);
      assert.ok(B * L === 1 || B * L > chunk, 'the case has more rows than a chunk');
      a.forEach((val, i) => assert.ok(Math.abs(val - b[i]!) <= 1e-6 * Math.max(1, Math.abs(val)), `row-chunked SwiGLU at ${i}: ${b[i]} vs ${val}`));
    } finally {
      for (const t of temps) t.free();
      block.free();
    }
  }, `${v.name}, SwiGLU in row chunks`);

  goldenTests(MODEL, 'text_fusion', async (c) => textFusionCase(c, v), v.name);

  goldenTests(MODEL, 'transformer', async (c) => transformerCase(c, v), v.name);

  goldenTests(MODEL, 'trajectory', async (c) => trajectoryCase(c, v), v.name);
}

/**
 * A copy of a committed case with one output grown by one row of zeros along `dim` (so its first rows still match
 * Kiln's result exactly: a comparison over a prefix would pass it).
 */
async function withLongerOutput(src: string, name: string, dim: number, fn: (c: GoldenCase) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-krea2-longer-'));
  const ckpt = await Checkpoint.open(src);
  try {
    const tensors: Record<string, WriteTensor> = {};
    for (const k of ckpt.keys()) {
      const shape = [...ckpt.entry(k).shape];
      let data: ArrayLike<number> = await ckpt.readFloat32(k);
      if (k === `output.${name}`) {
        const outer = shape.slice(0, dim).reduce((a, n) => a * n, 1);
        const block = data.length / outer; // elements per outer index, along dim and after it
        const row = block / shape[dim]!;
        const grown = new Float32Array(outer * (block + row));
        for (let o = 0; o < outer; o++) grown.set((data as Float32Array).subarray(o * block, (o + 1) * block), o * (block + row));
        shape[dim]! += 1;
        data = grown;
      }
      tensors[k] = { dtype: 'F32', shape, data };
    }
    const path = join(dir, 'longer.safetensors');
    await writeSafetensors(path, tensors, ckpt.metadata as Record<string, string>);
    const c = await GoldenCase.open(path);
    try {
      await fn(c);
    } finally {
      await c.close();
    }
  } finally {
    await ckpt.close();
    await rm(dir, { recursive: true, force: true });
  }
}

test('a transformer case whose output has one row more than Kiln computes fails in every dtype, naming the tensor', async () => {
  const src = goldenCaseFiles(MODEL, 'transformer').find((f) => f.endsWith('b2_pads.safetensors'));
  assert.ok(src, 'the batch-2 case');
  // one more image row per sample in the velocity: every dtype
  await withLongerOutput(src, 'sample', 1, async (c) => {
    for (const v of VARIANTS) await assert.rejects(transformerCase(c, v), /^Error: sample \(.*shape \[2, 6, 16\], reference has \[2, 7, 16\]/, v.name);
  });
  // one more sample row of t, one more sequence row after a block, one more text row: named before any comparison
  await withLongerOutput(src, 't', 0, async (c) => {
    await assert.rejects(transformerCase(c, VARIANTS[0]!), /output\.t: shape \[3, 1, 32\] is not per sample for batch 2/);
  });
  await withLongerOutput(src, 'block.1', 1, async (c) => {
    await assert.rejects(transformerCase(c, VARIANTS[0]!), /output\.block\.1: shape \[2, 17, 32\], the case has 16 rows along dim 1/);
  });
  await withLongerOutput(src, 'context', 1, async (c) => {
    await assert.rejects(transformerCase(c, VARIANTS[0]!), /output\.context: shape \[2, 11, 32\], the case has 10 rows along dim 1/);
  });
});
