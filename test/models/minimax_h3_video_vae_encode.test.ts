// MiniMax H3 video VAE encoder against diffusers golden vectors (minimax_h3/video_vae_encode, tools/golden/
// minimax_h3_video_vae_encode.py) in f32 and f16: the intermediates of the first encoder call (whichever the case
// holds: conv_in, down_block.<i>, encoder), the moments of the whole clip (clips concatenated, the 3 trailing
// tokens dropped, tiles stitched) and encode_vae_condition's posterior sample and conditioning latents from the
// case's noise (upstream's seed-42 draw, taken as given).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Engine } from '../../src/engine/engine';
import { copy } from '../../src/engine/ops/layout';
import type { Tensor } from '../../src/engine/tensor';
import { conditionNoise, normalizePixels, normalizeSample, posteriorSample, roundF16 } from '../../src/models/minimax_h3/vae/video/condition';
import { parseVideoVaeEncoderConfig } from '../../src/models/minimax_h3/vae/video/config';
import { VideoVaeEncoder, type HostVideo } from '../../src/models/minimax_h3/vae/video/encoder';
import { testEngine, type HostTensor } from '../engine/helpers';
import { SyntheticCheckpoint, zeroFill } from '../../src/models/common/synthetic-checkpoint';
import { F32_RULE, f16Allowance, goldenDir, goldenTests, type GoldenCase, oneSample, WEIGHT_PREFIX } from './golden';

/** upstream [1, C, T, H, W] -> [1, T, H, W, C] (the engine's layout). */
function channelsLast(x: HostTensor): HostTensor {
  const [, C, T, H, W] = x.shape as [number, number, number, number, number];
  const n = T * H * W;
  const out = new Float64Array(n * C);
  for (let ch = 0; ch < C; ch++) for (let i = 0; i < n; i++) out[i * C + ch] = x.data[ch * n + i]!;
  return { data: out, shape: [1, T, H, W, C] };
}

/** A [1, C, T, h, w] fixture tensor as a host video [C, T, h, w] (another batch is refused). */
const host = (x: HostTensor, name = 'input'): HostVideo => {
  const v = oneSample(x, name);
  return { data: Float32Array.from(v.data), shape: v.shape as unknown as [number, number, number, number] };
};

/** One float16 step at |x| (the spacing of float16 values there). */
function f16Step(x: number): number {
  const a = Math.abs(roundF16(x));
  if (a < 2 ** -14) return 2 ** -24;
  return 2 ** (Math.floor(Math.log2(a)) - 10);
}

async function tilingOf(c: GoldenCase) {
  const [on, th, tw, oh, ow] = Array.from((await c.input('tiling')).data);
  return on ? { tileHeight: th!, tileWidth: tw!, minOverlapHeight: oh!, minOverlapWidth: ow! } : (false as const);
}

for (const dtype of ['f32', 'f16'] as const) {
  goldenTests(
    'minimax_h3',
    'video_vae_encode',
    async (c) => {
      const e: Engine = await testEngine();
      const cfg = parseVideoVaeEncoderConfig(c.config, c.name);
      const vae = await VideoVaeEncoder.load(e, c.ckpt, cfg, { dtype, prefix: WEIGHT_PREFIX });
      const seen = new Map<string, Tensor>();
      try {
        const pixels = normalizePixels(host(await c.input('pixels')));
        const moments = await vae.encode(pixels, { tiling: await tilingOf(c), capture: (name, t) => seen.set(name, copy(e, t)) });
        const want = await c.output('moments');
        assert.deepEqual(moments.shape, want.shape.slice(1), 'moments [2C, T, h, w]');
        assert.equal(vae.latentFrames(pixels.shape[1]), want.shape[2], 'latentFrames');
        const intermediates = c.names('output').filter((n) => n === 'conv_in' || n === 'encoder' || n.startsWith('down_block.'));
        assert.ok(intermediates.length > 0, 'the case holds intermediates');
        for (const name of intermediates) {
          const t = seen.get(name);
          assert.ok(t, `nothing captured as ${name}`);
          const w = channelsLast(await c.output(name));
          assert.deepEqual(t.shape, w.shape, `${name} shape`);
          c.expect(dtype, await e.read(t), w, name);
        }
        c.expect(dtype, moments.data, want, 'moments');

        // encode_vae_condition from here on: the sample from our own seed-42 draw (within a few float32 ulps of the
        // case's, torch's), then float16 rounding and normalising
        const upstreamNoise = (await c.input('posterior_noise')).data;
        const noise = conditionNoise(upstreamNoise.length);
        for (let i = 0; i < noise.length; i++) {
          const d = Math.abs(noise[i]! - upstreamNoise[i]!);
          if (!(d <= 8 * 2 ** -23 * Math.max(1, Math.abs(upstreamNoise[i]!)))) assert.fail(`seed-42 noise [${i}]: ${noise[i]} vs torch ${upstreamNoise[i]}`);
        }
        const sample = posteriorSample(cfg, moments, noise);
        const wantSample = await c.output('posterior_sample');
        c.expect(dtype, sample.data, wantSample, 'posterior_sample');
        // the last step alone, on upstream's own sample: bit for bit
        const wantLatents = await c.output('condition_latents');
        assert.deepEqual(Array.from(normalizeSample(cfg, host(wantSample)).data), Array.from(wantLatents.data, Math.fround), 'normalizeSample(upstream sample)');
        // the whole chain: within the sample's allowance, plus one float16 step where the rounding went the other way
        const got = normalizeSample(cfg, sample).data;
        const n = got.length / cfg.latentChannels;
        const sampleTol = (i: number) => {
          if (dtype === 'f16') return f16Allowance(c.f16Error('posterior_sample')).atol;
          const t = c.tol('f32');
          return Math.max(t.atol + t.rtol * Math.abs(wantSample.data[i]!), F32_RULE.max * (c.f32Error('posterior_sample')?.max ?? 0));
        };
        for (let i = 0; i < got.length; i++) {
          const std = cfg.latentsStd[Math.floor(i / n)]!;
          const bound = (sampleTol(i) + f16Step(wantSample.data[i]!)) / std;
          const d = Math.abs(got[i]! - wantLatents.data[i]!);
          if (!(d <= bound)) assert.fail(`condition_latents (${dtype})[${i}]: got ${got[i]}, want ${wantLatents.data[i]} (|d| ${d} > ${bound})`);
        }
      } finally {
        seen.forEach((t) => t.free());
        vae.free();
      }
    },
    dtype,
  );
}

test('video VAE encoder: the released config (6 levels 128..1024, x16 spatial, x4 temporal, 17-frame clips)', () => {
  const raw = JSON.parse(readFileSync(join(goldenDir('minimax_h3', 'video_vae'), 'real-config.json'), 'utf8')) as Record<string, unknown>;
  const c = parseVideoVaeEncoderConfig(raw);
  assert.deepEqual([c.ratio, c.blockOutChannels, c.layersPerBlock, c.groups, c.latentChannels, c.clipLength, c.tokenDrop], [16, [128, 256, 256, 512, 512, 1024], 2, 32, 24, 17, 3]);
  assert.throws(() => parseVideoVaeEncoderConfig({ ...raw, spatial_padding_mode: 'zeros' }), /reflect/);
  assert.throws(() => parseVideoVaeEncoderConfig({ ...raw, norm_num_groups: 7 }), /groups/);
});

test('video VAE encoder: reads exactly the released index\'s encoder.* and quant_conv.* keys (real structure, narrow widths)', async () => {
  const e = await testEngine();
  const index = JSON.parse(readFileSync(join(goldenDir('minimax_h3', 'configs'), 'vae-index.json'), 'utf8')) as { weight_map: Record<string, string> };
  const released = Object.keys(index.weight_map).filter((k) => k.startsWith('encoder.') || k.startsWith('quant_conv.')).sort();
  const synth = new SyntheticCheckpoint({ label: 'released keys', dtype: 'F32', fill: zeroFill });
  const raw = JSON.parse(readFileSync(join(goldenDir('minimax_h3', 'video_vae'), 'real-config.json'), 'utf8')) as Record<string, unknown>;
  // the released structure (6 levels, 2 resnets each, shortcuts where the width changes), 1/32 of its widths
  const vae = await VideoVaeEncoder.load(e, synth.checkpoint, { ...raw, block_out_channels: [4, 8, 8, 16, 16, 32], norm_num_groups: 4 });
  vae.free();
  assert.deepEqual(synth.keys().sort(), released);
});
