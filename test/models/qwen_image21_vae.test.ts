// Qwen-Image-2.1 VAE against diffusers golden vectors (qwen_image21/vae_decode, vae_encode; tools/golden/
// qwen_image21_vae.py) in f32 and f16: decode of normalised latents (intermediates per upstream module, the
// clamped pixels; the tall case also in row strips with the real halo, which must give the same pixels), encode of
// RGBA pixels to the normalised mode the pipeline hands the transformer. Also: the demo writer's keys are the
// fixtures' (upstream state dict) keys, and a demo folder loads through QwenImage21Vae.load.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Engine } from '../../src/engine/engine';
import { copy } from '../../src/engine/ops/layout';
import type { Tensor } from '../../src/engine/tensor';
import {
  decoderHaloRows, decoderLevels, DEFAULT_STRIP_BYTES, encoderLevels, parseQwenImage21VaeConfig, planStrips, QWEN_IMAGE21_VAE_DEFAULTS, QwenImage21Vae, QwenImage21VaeConfigError,
  vaeCheckpointShapes, writeDemoVae, DEMO_VAE_CONFIG, QWEN_IMAGE21_LATENTS_MEAN, QWEN_IMAGE21_LATENTS_STD,
} from '../../src/models/qwen_image21/vae';
import { avgDownWeights, DupUpShortcut } from '../../src/models/qwen_image21/vae/modules';
import { testEngine, type HostTensor } from '../engine/helpers';
import { expectClose, goldenCaseFiles, goldenTests, GoldenCase, WEIGHT_PREFIX } from './golden';

/** [N, C, 1, H, W] (upstream) -> [N, H, W, C] (ours). */
function channelsLast(x: HostTensor): HostTensor {
  const [N, C, , H, W] = x.shape as [number, number, number, number, number];
  const plane = H * W;
  const out = new Float64Array(N * plane * C);
  for (let n = 0; n < N; n++) for (let c = 0; c < C; c++) for (let i = 0; i < plane; i++) out[(n * plane + i) * C + c] = x.data[(n * C + c) * plane + i]!;
  return { data: out, shape: [N, H, W, C] };
}

/**
 * f32: the float32 rule (the stated 1e-4 + 1e-4 |want|, or 4x upstream's own float32 error against float64 where that
 * is larger: the deep stack's values reach ~50, and on vae_decode/other_config upstream's f32 pixels are themselves
 * 1.2e-4 off float64). f16: the float16 rule. At the tiny config the last levels RMS-normalise 2 to 4 channels, and
 * where such a pixel vector is small the f16 rounding of its inputs turns its direction (a handful of pixels off by
 * 0.1): upstream's own f16 run does the same (its recorded max error on vae_decode/tall is 0.33), so the rule's
 * elementwise bound follows it.
 */
function check(c: GoldenCase, name: string, got: ArrayLike<number>, want: HostTensor, dtype: 'f32' | 'f16', label: string): void {
  c.expect(dtype, got, want, name, label);
}

function upload(e: Engine, x: HostTensor, dtype: 'f32' | 'f16'): Tensor {
  const cl = channelsLast(x);
  return e.upload(Float32Array.from(cl.data), cl.shape, dtype);
}

for (const dtype of ['f32', 'f16'] as const) {
  goldenTests(
    'qwen_image21',
    'vae_decode',
    async (c) => {
      const e = await testEngine();
      const vae = await QwenImage21Vae.fromCheckpoint(e, c.ckpt, c.config, { dtype, prefix: WEIGHT_PREFIX, encoder: false });
      const seen = new Map<string, Tensor>();
      const z = upload(e, await c.input('latents'), dtype);
      try {
        const want = channelsLast(await c.output('decoded'));
        const out = vae.decode(z, { capture: (name, t) => seen.set(name, copy(e, t)) });
        assert.deepEqual(out.shape, want.shape, 'decoded [N, H, W, 4]');
        for (const name of c.names('output').filter((n) => n !== 'decoded')) {
          const t = seen.get(name);
          assert.ok(t, `nothing captured as ${name}`);
          check(c, name, await e.read(t), channelsLast(await c.output(name)), dtype, `${name} (${dtype})`);
        }
        const got = await e.read(out);
        check(c, 'decoded', got, want, dtype, `decoded (${dtype})`);
        assert.ok(got.every((v) => v >= -1 && v <= 1), 'decoded pixels are clamped to [-1, 1]');
        out.free();
        const [, h] = z.shape as [number, number];
        if (h > 2 * decoderHaloRows(vae.config)) {
          // row strips with the real halo (8 rows each, one cut on both sides) give the whole decode's pixels
          const halo = decoderHaloRows(vae.config);
          const strips = planStrips(vae.config, 1, h, 1, 4, { stripRows: 8, stripBytes: 0 });
          assert.ok(strips.some(([s0, s1]) => s0 - halo > 0 && s1 + halo < h), 'a strip cut on both sides');
          const striped = vae.decode(z, { stripRows: 8 });
          const sgot = await e.read(striped);
          striped.free();
          check(c, 'decoded', sgot, want, dtype, `decoded in strips (${dtype})`);
          // same computation per pixel: equal to the one-piece decode up to the GEMM's summation order
          expectClose(sgot, { data: Float64Array.from(got), shape: want.shape }, { atol: 1e-6, rtol: 1e-6 }, `strips vs one piece (${dtype})`);
        }
      } finally {
        seen.forEach((t) => t.free());
        z.free();
        vae.free();
      }
    },
    dtype,
  );

  goldenTests(
    'qwen_image21',
    'vae_encode',
    async (c) => {
      const e = await testEngine();
      const vae = await QwenImage21Vae.fromCheckpoint(e, c.ckpt, c.config, { dtype, prefix: WEIGHT_PREFIX, decoder: false });
      const seen = new Map<string, Tensor>();
      const x = upload(e, await c.input('pixels'), dtype);
      try {
        const out = vae.encode(x, { capture: (name, t) => seen.set(name, copy(e, t)) });
        // every stage the case holds (as many down blocks as its config has); quant_conv and mode are folded into the
        // normalised latents here (quant_conv carries (z - mean) / std), so the latents check them
        for (const name of c.names('output').filter((n) => !['quant_conv', 'mode', 'latents'].includes(n))) {
          const t = seen.get(name);
          assert.ok(t, `nothing captured as ${name}`);
          check(c, name, await e.read(t), channelsLast(await c.output(name)), dtype, `${name} (${dtype})`);
        }
        const want = channelsLast(await c.output('latents'));
        assert.deepEqual(out.shape, want.shape, 'latents [N, h, w, 64]');
        check(c, 'latents', await e.read(out), want, dtype, `latents (${dtype})`);
        out.free();
      } finally {
        seen.forEach((t) => t.free());
        x.free();
        vae.free();
      }
    },
    dtype,
  );
}

test('VAE config: the released defaults (16x, 64 channels, halo 13 latent rows) and refusals', () => {
  const real = { ...QWEN_IMAGE21_VAE_DEFAULTS, latents_mean: QWEN_IMAGE21_LATENTS_MEAN, latents_std: QWEN_IMAGE21_LATENTS_STD };
  const c = parseQwenImage21VaeConfig(real);
  assert.deepEqual([c.spatialRatio, c.zDim, c.inChannels, c.outChannels, c.baseDim, c.decoderBaseDim], [16, 64, 4, 4, 96, 144]);
  assert.equal(decoderHaloRows(c), 13);
  // the biggest tensor after the mid block: the last level's input, 288 channels at 16x (per latent row of a 2K
  // image, f16: 288 * 256 * 128 * 2 = 18.9 MB). 2K f16 in 2 GiB: 2 strips of 64 rows; 1K: one piece; 2K f32: 5 of 26
  assert.deepEqual(planStrips(c, 1, 128, 128, 2, { stripBytes: DEFAULT_STRIP_BYTES }), [[0, 64], [64, 128]]);
  assert.deepEqual(planStrips(c, 1, 64, 64, 2, { stripBytes: DEFAULT_STRIP_BYTES }), [[0, 64]]);
  assert.equal(planStrips(c, 1, 128, 128, 4, { stripBytes: DEFAULT_STRIP_BYTES }).length, 5);
  assert.throws(() => planStrips(c, 1, 128, 128, 4, { stripBytes: 2 ** 28 }), /halo/);
  // the released levels' parameter-free shortcuts: every DupUp3D is a strided view; AvgDown3D with a temporal
  // factor averages the real frame into every other channel (the padded zero frame fills the rest)
  for (const l of decoderLevels(c)) if (l.up) assert.doesNotThrow(() => new DupUpShortcut(l.inDim, l.outDim, l.temporal), JSON.stringify(l));
  const sums = encoderLevels(c).map((l) => {
    const { weight } = avgDownWeights(l.inDim, l.outDim, l.temporal, l.down);
    const per = weight.length / l.outDim;
    return [0, 1].map((o) => weight.slice(o * per, (o + 1) * per).reduce((a, b) => a + b, 0));
  });
  assert.deepEqual(sums, [[1, 1], [0, 1], [0, 1], [0, 1], [1, 1]]);
  for (const bad of [{ patch_size: 2 }, { is_residual: false }, { attn_scales: [0.5] }, { latents_std: [1] }, { scale_factor_spatial: 8 }, { surprise: 1 }]) {
    assert.throws(() => parseQwenImage21VaeConfig({ ...real, ...bad }), QwenImage21VaeConfigError, JSON.stringify(bad));
  }
});

test('VAE demo writer: the fixtures\' keys (upstream state dict) and a folder that loads and runs', async () => {
  // every decoder / encoder key of the upstream fixtures, with its shape, is in the writer's checkpoint and vice versa
  for (const component of ['vae_decode', 'vae_encode']) {
    const file = goldenCaseFiles('qwen_image21', component)[0];
    assert.ok(file, `a ${component} case`);
    const c = await GoldenCase.open(file);
    try {
      const shapes = vaeCheckpointShapes(c.config);
      const side = component === 'vae_decode' ? /^(decoder|post_quant_conv)\./ : /^(encoder|quant_conv)\./;
      const mine = [...shapes.keys()].filter((k) => side.test(k)).sort();
      assert.deepEqual(c.names('weight').sort(), mine, `${component} keys`);
      for (const k of mine) assert.deepEqual(c.shape('weight', k), shapes.get(k), k);
    } finally {
      await c.close();
    }
  }
  const dir = mkdtempSync(join(tmpdir(), 'kiln-qi21-vae-'));
  const e = await testEngine();
  try {
    const cfg = await writeDemoVae(dir, { dtype: 'BF16' });
    assert.equal(cfg.base_dim, DEMO_VAE_CONFIG.base_dim);
    const vae = await QwenImage21Vae.load(e, dir, { dtype: 'f32' });
    try {
      const z = e.upload(Float32Array.from({ length: 2 * 3 * 64 }, (_, i) => Math.sin(i)), [1, 2, 3, 64], 'f32');
      const px = vae.decode(z);
      assert.deepEqual(px.shape, [1, 32, 48, 4]);
      const back = vae.encode(px);
      assert.deepEqual(back.shape, [1, 2, 3, 64]);
      const [p, b] = [await e.read(px), await e.read(back)];
      assert.ok(p.every((v) => v >= -1 && v <= 1) && b.every(Number.isFinite), 'finite output in range');
      assert.ok(new Set(Array.from(p, (v) => v.toFixed(3))).size > 10, 'not a constant image');
      // a batch of two decodes (in 1-row strips) and encodes as each image alone
      const z2 = e.upload(Float32Array.from({ length: 2 * 2 * 3 * 64 }, (_, i) => Math.cos(i * 0.37)), [2, 2, 3, 64], 'f32');
      const pxB = vae.decode(z2, { stripRows: 1 });
      const backBatch = vae.encode(pxB);
      for (let n = 0; n < 2; n++) {
        const zn = e.upload(await e.read(z2.slice(0, n, n + 1)), [1, 2, 3, 64], 'f32');
        const one = vae.decode(zn);
        const pb = await e.read(pxB.slice(0, n, n + 1));
        expectClose(pb, { data: Float64Array.from(await e.read(one)), shape: [...one.shape] }, { atol: 1e-5, rtol: 1e-5 }, `batch image ${n} decode`);
        const enc = vae.encode(one);
        expectClose(await e.read(backBatch.slice(0, n, n + 1)), { data: Float64Array.from(await e.read(enc)), shape: [...enc.shape] }, { atol: 1e-4, rtol: 1e-4 }, `batch image ${n} encode`);
        for (const t of [zn, one, enc]) t.free();
      }
      for (const t of [z, px, back, z2, pxB, backBatch]) t.free();
    } finally {
      vae.free();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
