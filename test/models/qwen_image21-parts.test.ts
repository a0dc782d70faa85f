// Qwen-Image-2.1 pieces without upstream fixtures of their own: the config parser (the reported config.json
// variants), the joint sequence's checks, the tanh-gate kernel against a float64 reference, the timestep sinusoid,
// and loading the transformer from a diffusers-format folder (sharded bf16 safetensors with an index).
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { writeSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import type { Tensor } from '../../src/engine/tensor';
import {
  imageMaskWithTarget,
  jointSequence,
  parseQwenImage21Config,
  QWEN_IMAGE21_DEFAULTS,
  QwenImage21Transformer,
  tanhGates,
  timestepSinusoid,
} from '../../src/models/qwen_image21';
import { assertClose, poisoned, randomHost, seeded, testEngine, type HostTensor } from '../engine/helpers';
import { goldenCaseFiles, GoldenCase, WEIGHT_PREFIX } from './golden';
import { caseSequence, loadCaseModel, rows, uploader, VARIANTS } from './qwen_image21-golden';

test('config: both reported transformer/config.json variants give the real model', () => {
  const minimal = {
    _class_name: 'QwenImage21Transformer2DModel', _diffusers_version: '0.37.0.dev0', attention_head_dim: 128, axes_dims_rope: [16, 56, 56],
    in_channels: 64, out_channels: 64, num_attention_heads: 32, num_layers: 32, patch_size: 1,
  };
  const full = { ...minimal, context_in_dim: 4096, mlp_ratio: 3, eps: 1e-6, causal_condition: true };
  const want = {
    inChannels: 64, outChannels: 64, numLayers: 32, numHeads: 32, headDim: 128, dim: 4096, contextInDim: 4096, mlpRatio: 3,
    axesDimsRope: [16, 56, 56], ropeTheta: 10000, eps: 1e-6, causalCondition: true,
  };
  assert.deepEqual(parseQwenImage21Config(minimal), want);
  assert.deepEqual(parseQwenImage21Config(full), want);
  assert.deepEqual(parseQwenImage21Config({}), want, 'the class defaults are the real model');
  assert.equal(parseQwenImage21Config({ ...QWEN_IMAGE21_DEFAULTS, out_channels: null, in_channels: 16 }).outChannels, 16, 'out_channels null falls back to in_channels');
});

test('config: what the implementation cannot build is refused, naming the key', () => {
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ patch_size: 2 }, /patch_size 2/],
    [{ axes_dims_rope: [16, 56, 54] }, /rotate 126 dims, attention_head_dim is 128/],
    [{ axes_dims_rope: [16, 56] }, /axes_dims_rope/],
    [{ axes_dims_rope: [15, 57, 56] }, /even/],
    [{ num_layers: 0 }, /num_layers = 0/],
    [{ eps: -1 }, /eps/],
    [{ causal_condition: 'yes' }, /causal_condition/],
    [{ guidance_embeds: true }, /unknown keys guidance_embeds/],
    [{ _class_name: 'QwenImageTransformer2DModel' }, /not QwenImage21Transformer2DModel/],
  ];
  for (const [c, re] of bad) assert.throws(() => parseQwenImage21Config(c), re, JSON.stringify(c));
  assert.throws(() => parseQwenImage21Config(null), /not a JSON object/);
});

test('joint sequence: text-to-image, references, and the checks on img_mask / img_shapes', () => {
  // 3 text tokens, a 2x4 reference (2 slots), 1 text token, then a 4x4 target (4 slots)
  const mask = imageMaskWithTarget([0, 0, 0, 1, 1, 0], { height: 4, width: 4 });
  const l = jointSequence(mask, [[1, 2, 4], [1, 4, 4]]);
  assert.equal(l.length, 3 + 8 + 1 + 16);
  assert.deepEqual([l.prefixLength, l.targetLength, l.encoderLength, l.referenceTokens], [12, 16, 6, 8]);
  assert.deepEqual(l.runs, [
    { kind: 'text', start: 0, end: 3, encoderStart: 0 },
    { kind: 'image', start: 3, end: 11, image: 0, latentStart: 0 },
    { kind: 'text', start: 11, end: 12, encoderStart: 5 },
  ]);
  // text advances 0, 1, 2; the reference sits at frame 3 on a centred 2x4 grid; the counter moves on by max(h, w)
  assert.deepEqual(Array.from(l.frame.slice(0, 12)), [0, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 7]);
  assert.deepEqual(Array.from(l.height.slice(3, 11)), [-1, -1, -1, -1, 0, 0, 0, 0]);
  assert.deepEqual(Array.from(l.width.slice(3, 11)), [-2, -1, 0, 1, -2, -1, 0, 1]);
  assert.deepEqual(Array.from(l.blockIds), [0, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 4]);
  assert.equal(l.frame[12], 8, 'the target block starts after the text');

  assert.throws(() => jointSequence(mask, [[1, 4, 4]]), /account for 16 image tokens but img_mask marks 24/);
  assert.throws(() => jointSequence(mask, [[1, 2, 4], [2, 2, 4]]), /2 frames/);
  assert.throws(() => jointSequence([0, 1, 1, 0], [[1, 2, 4]]), /follow the target/);
  assert.throws(() => jointSequence([1, 0, 1], [[1, 2, 4]]), /consecutive image tokens/);
  assert.throws(() => jointSequence([0, 1], [[1, 3, 3]]), /whole number of 2x2 slots/);
  assert.throws(() => imageMaskWithTarget([0], { height: 3, width: 2 }), /2x2 slots/);
});

/** float64 reference of tanhGates: tanh in quarters 1 and 3 of each (4D) row. */
function tanhGatesRef(x: HostTensor): HostTensor {
  const D = x.shape[1]! / 4;
  return { data: x.data.map((v, i) => (Math.floor((i % (4 * D)) / D) % 2 === 1 ? Math.tanh(v) : v)), shape: x.shape };
}

for (const dtype of ['f32', 'f16'] as const) {
  test(`tanhGates (${dtype}): tanh on the gate quarters only, rows at an offset, odd widths, large values`, seeded(async (rng) => {
    const e = await testEngine();
    for (const [R, D] of [[1, 1], [2, 13], [3, 64], [2, 257]] as const) {
      const big = randomHost(rng, [R + 2, 4 * D], dtype, -20, 20); // beyond the +-15 clamp too
      const base = e.upload(big.data, big.shape, dtype);
      const view = base.slice(0, 1, R + 1); // contiguous rows at an offset
      const out = tanhGates(e, view);
      const want = tanhGatesRef({ data: rows({ data: big.data, shape: [1, R + 2, 4 * D] }, 1, R + 1).data, shape: [R, 4 * D] });
      assertClose(await e.read(out), want, dtype, `tanhGates ${R}x${4 * D}`);
      out.free();
      base.free();
    }
    const p = poisoned(e, [2, 8], dtype);
    assert.throws(() => tanhGates(e, p.transpose()), /contiguous \(R, 4D\)/);
    assert.throws(() => tanhGates(e, p.slice(1, 0, 6)), /contiguous \(R, 4D\)/);
    p.free();
  }));
}

test('timestep sinusoid: [cos | sin] of 1000 t times exp(-ln(1e4) k / 128), the f32 steps within an ulp of float64', () => {
  const ts = [0, 0.02, 0.5, 1];
  const got = timestepSinusoid(ts);
  const want = new Float64Array(ts.length * 256);
  ts.forEach((t, r) => {
    for (let k = 0; k < 128; k++) {
      const a = 1000 * t * Math.exp((-Math.log(10000) * k) / 128);
      want[r * 256 + k] = Math.cos(a);
      want[r * 256 + 128 + k] = Math.sin(a);
    }
  });
  // arguments reach 1000 rad, where one f32 ulp of the argument is 6e-5
  assertClose(got, { data: want, shape: [4, 256] }, { atol: 3e-4, rtol: 0 }, 'sinusoid');
  assert.equal(got[0], 1);
  assert.equal(got[128], 0);
});

// The real format: transformer/config.json + diffusion_pytorch_model-0000i-of-0000n.safetensors (bf16) + the index,
// keys exactly as the checkpoint's. Loaded through fromDir, it gives what the fixture's f32 weights give, to bf16
// rounding of the weights.
test('loading: a sharded bf16 diffusers folder loads through fromDir and matches the golden output', async () => {
  const e = await testEngine();
  const file = goldenCaseFiles('qwen_image21', 'transformer').find((f) => f.endsWith('/refs.safetensors'));
  assert.ok(file, 'transformer/refs fixture');
  const c = await GoldenCase.open(file);
  const dir = await mkdtemp(join(tmpdir(), 'kiln-qi21-'));
  const temps: Tensor[] = [];
  try {
    const names = c.names('weight');
    const shards: Record<string, WriteTensor>[] = [{}, {}, {}];
    for (const [i, k] of names.entries()) shards[i % 3]![k] = { dtype: 'BF16', shape: c.shape('weight', k), data: await c.ckpt.readFloat32(WEIGHT_PREFIX + k) };
    const map: Record<string, string> = {};
    for (const [i, s] of shards.entries()) {
      const f = `diffusion_pytorch_model-0000${i + 1}-of-00003.safetensors`;
      await writeSafetensors(join(dir, f), s);
      for (const k of Object.keys(s)) map[k] = f;
    }
    await writeFile(join(dir, 'diffusion_pytorch_model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: 0 }, weight_map: map }));
    await writeFile(join(dir, 'config.json'), JSON.stringify({ _class_name: 'QwenImage21Transformer2DModel', _diffusers_version: '0.37.0.dev0', ...c.config }));
    const loaded = await QwenImage21Transformer.fromDir(e, dir, { dtype: 'f32' });
    const exact = await loadCaseModel(e, c, VARIANTS[0]!);
    const sequence = await caseSequence(c);
    const x = await c.input('hidden_states');
    const up = uploader(e, 'f32', temps);
    const input = {
      sequence,
      encoderHiddenStates: up(await c.input('encoder_hidden_states')),
      referenceLatents: up(rows(x, 0, sequence.referenceTokens)),
      latents: up(rows(x, sequence.referenceTokens, x.shape[1]!)),
      timestep: (await c.input('timestep')).data[0]!,
    };
    const a = loaded.forward(input).sample;
    const b = exact.forward(input).sample;
    temps.push(a, b);
    const ga = await e.read(a);
    const gb = await e.read(b);
    const scale = Math.max(...gb.map(Math.abs));
    const worst = Math.max(...ga.map((v, i) => Math.abs(v - gb[i]!)));
    assert.ok(worst / scale < 3e-2, `bf16 weights differ from f32 ones by ${worst} (largest value ${scale})`);
    assert.ok(worst > 0, 'bf16 rounding should show: the weights were not converted');
    loaded.free();
    exact.free();
  } finally {
    for (const t of temps) t.free();
    await c.close();
    await rm(dir, { recursive: true, force: true });
  }
});
