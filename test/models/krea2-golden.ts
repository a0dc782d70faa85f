// The Krea 2 golden cases that run the model on a batch (tools/golden/krea2.py): shared by krea2.test.ts and the
// harness's own test (golden.test.ts), which feeds them fixtures they must refuse.
// Upstream's forward takes a sigma and a text mask per sample; Kiln's takes a batch sharing both (the pipeline's
// case, with the pads dropped). So a case's samples are run in groups that share them (one group when all do; the
// generator's b2_two_prompts_two_sigmas and b2_two_prompts cases have one per sample) and each group is compared
// with its own rows of every output: any batch, any mask and any sigma a case holds is checked, none is taken for
// granted.
import assert from 'node:assert/strict';
import type { Engine } from '../../src/engine/engine';
import type { Tensor } from '../../src/engine/tensor';
import {
  krea2Patchify, krea2Sigmas, krea2StepSize, krea2Unpatchify, Krea2TextFusion, Krea2Transformer, parseKrea2Config,
  type Krea2Config, type TextFusionTrace,
} from '../../src/models/krea2';
import type { WeightLoader } from '../../src/models/common/weights';
import { eulerStep } from '../../src/models/qwen_image21';
import { testEngine, type HostTensor } from '../engine/helpers';
import { expectClose, readShaped, WEIGHT_PREFIX, type GoldenCase } from './golden';
import { variantKey, type Variant } from './qwen3-golden';

export const caseConfig = (c: GoldenCase): Krea2Config => parseKrea2Config(c.config, `${c.path} config`);

/** Rows `rows` along dim 1 of a (B, L, ...) host tensor, whose dim 1 must be L (the case's text or sequence length). */
export function pick(t: HostTensor, rows: number[], L: number, name: string): HostTensor {
  const B = t.shape[0]!;
  if (t.shape.length < 2 || t.shape[1] !== L) throw new Error(`${name}: shape [${t.shape.join(', ')}], the case has ${L} rows along dim 1`);
  const w = t.data.length / (B * L);
  const out = new Float64Array(B * rows.length * w);
  for (let b = 0; b < B; b++) rows.forEach((r, i) => out.set(t.data.subarray((b * L + r) * w, (b * L + r + 1) * w), (b * rows.length + i) * w));
  return { data: out, shape: [B, rows.length, ...t.shape.slice(2)] };
}

export function upload(e: Engine, temps: Tensor[], h: HostTensor, dtype: Variant['dtype']): Tensor {
  const t = e.upload(h.data, h.shape, dtype);
  temps.push(t);
  return t;
}

/** Samples `sel` (indices along dim 0) of a (B, ...) host tensor; its dim 0 must be B (a case's batch). */
export function samples(t: HostTensor, B: number, sel: readonly number[], name: string): HostTensor {
  if (t.shape[0] !== B) throw new Error(`${name}: shape [${t.shape.join(', ')}] is not per sample for batch ${B}`);
  const w = t.data.length / B;
  const out = new Float64Array(sel.length * w);
  sel.forEach((b, i) => out.set(t.data.subarray(b * w, (b + 1) * w), i * w));
  return { data: out, shape: [sel.length, ...t.shape.slice(1)] };
}

/** The samples of a case grouped by what Kiln's forward shares across a batch: the text mask (and `also`, per sample). */
export async function sampleGroups(c: GoldenCase, also: (b: number) => string = () => ''): Promise<{ B: number; L: number; groups: { sel: number[]; rows: number[]; who: string }[] }> {
  const mask = await c.ints('mask');
  const [B, L] = mask.shape as [number, number];
  const byKey = new Map<string, number[]>();
  for (let b = 0; b < B; b++) {
    const key = `${mask.data.slice(b * L, (b + 1) * L).join('')}|${also(b)}`;
    byKey.set(key, [...(byKey.get(key) ?? []), b]);
  }
  const groups = [...byKey.values()].map((sel) => ({
    sel,
    rows: mask.data.slice(sel[0]! * L, (sel[0]! + 1) * L).flatMap((k, i) => (k ? [i] : [])),
    who: sel.length === B ? '' : sel.length === 1 ? ` sample ${sel[0]}` : ` samples ${sel.join(',')}`,
  }));
  return { B, L, groups };
}

/** TextFusionTransformer on the real rows of each group: every layerwise block, the projection, every refiner, the output. */
export async function textFusionCase(c: GoldenCase, v: Variant): Promise<void> {
  const e = await testEngine();
  const cfg = caseConfig(c);
  const dt = variantKey(v);
  const w: WeightLoader = { e, ckpt: c.ckpt, dtype: v.dtype, int8: v.int8, loaded: [] };
  const fusion = await Krea2TextFusion.load(w, cfg, `${WEIGHT_PREFIX}txtfusion.`);
  const { B, L, groups } = await sampleGroups(c);
  try {
    for (const { sel, rows, who } of groups) {
      const temps: Tensor[] = [];
      const trace: TextFusionTrace = { layerwise: [], projected: null as unknown as Tensor, refiner: [] };
      try {
        const taps = upload(e, temps, pick(samples(await c.input('taps'), B, sel, 'input.taps'), rows, L, 'input.taps'), v.dtype);
        const out = fusion.forward(e, taps, trace);
        temps.push(...trace.layerwise, trace.projected, ...trace.refiner, out);
        const check = async (got: Tensor, name: string) =>
          c.expect(dt, await readShaped(e, got), pick(samples(await c.output(name), B, sel, `output.${name}`), rows, L, `output.${name}`), name, `${name}${who} (${v.name})`);
        const count = (prefix: string) => c.names('output').filter((n) => n.startsWith(prefix)).length;
        assert.equal(trace.layerwise.length, count('layerwise.'), 'output.layerwise.*');
        assert.equal(trace.refiner.length, count('refiner.'), 'output.refiner.*');
        for (const [i, t] of trace.layerwise.entries()) await check(t, `layerwise.${i}`);
        await check(trace.projected, 'projected');
        for (const [i, t] of trace.refiner.entries()) await check(t, `refiner.${i}`);
        await check(out, 'out');
      } finally {
        for (const t of temps) t.free();
      }
    }
  } finally {
    fusion.free();
  }
}

/** The Euler loop of sampling.sample (guidance off) on each group: every step's velocity and tokens, the latents. */
export async function trajectoryCase(c: GoldenCase, v: Variant): Promise<void> {
  const e = await testEngine();
  const cfg = caseConfig(c);
  const dt = variantKey(v);
  const noiseAll = await c.input('noise');
  const [B, C, H, W] = noiseAll.shape as [number, number, number, number];
  const { L, groups } = await sampleGroups(c);
  const steps = (await c.ints('steps')).data[0]!;
  const sigmas = krea2Sigmas(steps, { mu: (await c.input('mu')).data[0]! });
  expectClose(sigmas, await c.output('sigmas'), { atol: 0, rtol: 0 }, 'sigmas');
  const m = await Krea2Transformer.load(e, c.ckpt, cfg, { dtype: v.dtype, int8: v.int8, prefix: WEIGHT_PREFIX });
  try {
    for (const { sel, rows, who } of groups) {
      const G = sel.length;
      const shape = { batch: G, channels: C, height: H, width: W };
      const geometry = m.geometry(rows.length, H / cfg.patch, W / cfg.patch);
      const temps: Tensor[] = [];
      const mine = async (name: string) => samples(await c.output(name), B, sel, `output.${name}`);
      try {
        const context = m.context(upload(e, temps, pick(samples(await c.input('context'), B, sel, 'input.context'), rows, L, 'input.context'), v.dtype));
        temps.push(context);
        const tokens = krea2Patchify(samples(noiseAll, B, sel, 'input.noise').data, shape, cfg.patch);
        let x = upload(e, temps, { data: Float64Array.from(tokens), shape: [G, tokens.length / G / cfg.tokenDim, cfg.tokenDim] }, v.dtype);
        for (let i = 0; i < steps; i++) {
          const out = m.forward({ img: x, context, sigma: sigmas[i]!, geometry });
          temps.push(out.sample);
          c.expect(dt, await readShaped(e, out.sample), await mine(`v.${i}`), `v.${i}`, `v.${i}${who} (${v.name})`);
          x = eulerStep(e, x, out.sample, krea2StepSize(sigmas, i));
          temps.push(x);
          c.expect(dt, await readShaped(e, x), await mine(`img.${i}`), `img.${i}`, `img.${i}${who} (${v.name})`);
        }
        assert.ok(!c.has('output', `v.${steps}`), `output.v.${steps}: the case has more steps than input.steps ${steps}`);
        const latents = krea2Unpatchify(await e.read(x), shape, cfg.patch);
        c.expect(dt, { data: latents, shape: [G, C, H, W] }, await mine('latents'), 'latents', `latents${who} (${v.name})`);
      } finally {
        geometry.free();
        for (const t of temps) t.free();
      }
    }
  } finally {
    m.free();
  }
}

/**
 * The whole DiT on one case: upstream's forward takes a sigma and a text mask per sample, Kiln's a batch sharing
 * both (the pipeline's case), so the samples are run in groups that share them (one group when all do), each
 * compared with its own rows of every output: the patch tokens, t and tvec (one row per sample upstream, one
 * vector per group here), the text path on the real rows, every block's output and the velocity.
 */
export async function transformerCase(c: GoldenCase, v: Variant): Promise<void> {
  const e = await testEngine();
  const cfg = caseConfig(c);
  const dt = variantKey(v);
  const latents = await c.input('latents');
  const [B, C, H, W] = latents.shape as [number, number, number, number];
  const ts = (await c.input('t')).data;
  if (ts.length !== B) throw new Error(`input.t has ${ts.length} values for ${B} samples`);
  const { L, groups } = await sampleGroups(c, (b) => String(ts[b]));
  const tokensAll = krea2Patchify(latents.data, { batch: B, channels: C, height: H, width: W }, cfg.patch);
  expectClose({ data: tokensAll, shape: [B, tokensAll.length / B / cfg.tokenDim, cfg.tokenDim] }, await c.output('img'), { atol: 0, rtol: 0 }, 'patch tokens');
  const m = await Krea2Transformer.load(e, c.ckpt, cfg, { dtype: v.dtype, int8: v.int8, prefix: WEIGHT_PREFIX });
  try {
    for (const { sel, rows, who } of groups) {
      const G = sel.length;
      const gridH = H / cfg.patch;
      const gridW = W / cfg.patch;
      const N = gridH * gridW;
      const geometry = m.geometry(rows.length, gridH, gridW);
      const temps: Tensor[] = [];
      try {
        const sigma = ts[sel[0]!]!;
        const time = m.timeVectors(sigma);
        temps.push(time.t, time.tvec);
        const t = { data: await e.read(time.t), shape: time.t.shape };
        const tvec = { data: await e.read(time.tvec), shape: time.tvec.shape };
        for (const b of sel) {
          c.expect(dt, t, samples(await c.output('t'), B, [b], 'output.t'), 't', `t = tmlp(temb) sample ${b} (${v.name})`);
          c.expect(dt, tvec, samples(await c.output('tvec'), B, [b], 'output.tvec'), 'tvec', `tvec = tproj(t) sample ${b} (${v.name})`);
        }
        const context = m.context(upload(e, temps, pick(samples(await c.input('context'), B, sel, 'input.context'), rows, L, 'input.context'), v.dtype));
        temps.push(context);
        c.expect(dt, await readShaped(e, context), pick(samples(await c.output('context'), B, sel, 'output.context'), rows, L, 'output.context'), 'context', `context${who} (${v.name})`);
        const tokens = krea2Patchify(samples(latents, B, sel, 'input.latents').data, { batch: G, channels: C, height: H, width: W }, cfg.patch);
        const img = upload(e, temps, { data: Float64Array.from(tokens), shape: [G, N, cfg.tokenDim] }, v.dtype);
        const out = m.forward({ img, context, sigma, geometry, blockOutputs: true });
        temps.push(out.sample, ...out.blocks!);
        // block outputs over [real text rows | image rows]
        const seqRows = [...rows, ...Array.from({ length: N }, (_, i) => L + i)];
        const blocks = c.names('output').filter((n) => /^block\.\d+$/.test(n));
        assert.equal(blocks.length, out.blocks!.length, `output.block.* of ${cfg.layers} blocks`);
        for (const [i, blk] of out.blocks!.entries()) {
          const want = samples(await c.output(`block.${i}`), B, sel, `output.block.${i}`);
          c.expect(dt, await readShaped(e, blk), pick(want, seqRows, L + N, `output.block.${i}`), `block.${i}`, `block.${i}${who} (${v.name})`);
        }
        c.expect(dt, await readShaped(e, out.sample), samples(await c.output('sample'), B, sel, 'output.sample'), 'sample', `sample${who} (${v.name})`);
      } finally {
        geometry.free();
        for (const t of temps) t.free();
      }
    }
  } finally {
    m.free();
  }
}

