// Krea 2's VAE decode (the Qwen-Image VAE, 16 channels, 8x) against krea-ai/krea-2 autoencoder.py's decode on a tiny
// diffusers AutoencoderKLQwenImage (krea2/vae_decode, tools/golden/krea2_vae.py) in f32 and f16: the folded
// de-normalisation + post_quant_conv, every decoder stage, the clamped pixels. Plus the config parser and the level
// widths the decoder builds for the released configuration.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { copy } from '../../src/engine/ops/layout';
import type { Tensor } from '../../src/engine/tensor';
import { decoderDims, Krea2Vae, krea2VaeHaloRows, parseQwenImageVaeConfig, QWEN_IMAGE_VAE_DEFAULTS, qwenImageDecoderLevels, qwenImageDecoderRowElements } from '../../src/models/krea2';
import { testEngine, type HostTensor } from '../engine/helpers';
import { goldenTests, WEIGHT_PREFIX } from './golden';

/** [N, C, (1,) H, W] (upstream) -> [N, H, W, C] (ours). */
function channelsLast(x: HostTensor): HostTensor {
  const [N, C] = x.shape as [number, number];
  const [H, W] = x.shape.slice(-2) as [number, number];
  const plane = H * W;
  const out = new Float64Array(N * plane * C);
  for (let n = 0; n < N; n++) for (let c = 0; c < C; c++) for (let i = 0; i < plane; i++) out[(n * plane + i) * C + c] = x.data[(n * C + c) * plane + i]!;
  return { data: out, shape: [N, H, W, C] };
}

for (const dtype of ['f32', 'f16'] as const) {
  goldenTests('krea2', 'vae_decode', async (c) => {
    const e = await testEngine();
    const config = parseQwenImageVaeConfig(c.config, `${c.path} config`);
    const vae = await Krea2Vae.load(e, c.ckpt, config, { dtype, prefix: WEIGHT_PREFIX });
    const seen = new Map<string, Tensor>();
    const zin = channelsLast(await c.input('latents'));
    const z = e.upload(zin.data, zin.shape, dtype);
    try {
      const want = channelsLast(await c.output('decoded'));
      const out = vae.decode(z, (name, t) => seen.set(name, copy(e, t)));
      assert.deepEqual(out.shape, want.shape, 'decoded [N, 8h, 8w, 3]');
      for (const name of c.names('output').filter((n) => n !== 'decoded')) {
        const t = seen.get(name);
        assert.ok(t, `nothing captured as ${name}`);
        c.expect(dtype, await e.read(t), channelsLast(await c.output(name)), name, `${name} (${dtype})`);
      }
      const got = await e.read(out);
      out.free();
      c.expect(dtype, got, want, 'decoded', `decoded (${dtype})`);
      assert.ok(got.every((v) => v >= -1 && v <= 1), 'pixels are clamped to [-1, 1]');
    } finally {
      z.free();
      for (const t of seen.values()) t.free();
      vae.free();
    }
  }, dtype);
}

// Row strips: a latent tall enough for strips cut on both sides decodes to the one-piece pixels (same computation per
// pixel; the halo covers the tail's reach), with a case's weights and a random latent.
goldenTests('krea2', 'vae_decode', async (c) => {
  if (c.name !== 'b1_4x6') return;
  const e = await testEngine();
  const config = parseQwenImageVaeConfig(c.config, `${c.path} config`);
  const vae = await Krea2Vae.load(e, c.ckpt, config, { dtype: 'f32', prefix: WEIGHT_PREFIX });
  const h = 2 * krea2VaeHaloRows(config) + 6;
  const z = e.upload(Float32Array.from({ length: h * 3 * 16 }, (_, i) => Math.sin(i * 12.9898) * 2), [1, h, 3, 16], 'f32');
  try {
    const whole = vae.decode(z);
    const striped = vae.decode(z, undefined, { stripRows: 4 });
    const a = await e.read(whole);
    const b = await e.read(striped);
    whole.free();
    striped.free();
    assert.equal(b.length, a.length);
    let worst = 0;
    for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
    assert.ok(worst <= 1e-5, `strips of 4 rows (halo ${krea2VaeHaloRows(config)}) differ from one piece by ${worst}`);
  } finally {
    z.free();
    vae.free();
  }
}, 'row strips');

test('the released Qwen-Image VAE decoder: widths 384 -> 384, 192 -> 384, 192 -> 192, 96 -> 96, 8x', () => {
  const cfg = parseQwenImageVaeConfig({ _class_name: 'AutoencoderKLQwenImage', ...QWEN_IMAGE_VAE_DEFAULTS });
  assert.equal(cfg.spatialRatio, 8);
  assert.deepEqual(decoderDims(cfg.baseDim, cfg.dimMult), [384, 384, 384, 192, 96]);
  assert.deepEqual(qwenImageDecoderLevels(cfg), [
    { inDim: 384, outDim: 384, up: true },
    { inDim: 192, outDim: 384, up: true },
    { inDim: 192, outDim: 192, up: true },
    { inDim: 96, outDim: 96, up: false },
  ]);
  assert.throws(() => parseQwenImageVaeConfig({ _class_name: 'AutoencoderKLQwenImage21' }), /not AutoencoderKLQwenImage/);
  // the tail's reach is 98 output rows (13 latent rows); its biggest tensor the last upsample, 192 x 64 per latent pixel
  assert.equal(krea2VaeHaloRows(cfg), 13);
  assert.equal(qwenImageDecoderRowElements(cfg, 1), 192 * 64);
  assert.throws(() => parseQwenImageVaeConfig({ z_dim: 64 }), /latents_(mean|std) must be 64 numbers/);
});
