// MiniMax H3 audio VAE encoder against diffusers golden vectors (minimax_h3/audio_vae_encode, tools/golden/
// minimax_h3_audio_vae_encode.py) in f32 and f16: the DAC encoder's stages (whichever the case holds), its output,
// the attention projection and its causal attention branch, the posterior's mean and log std, and the reference
// soundtrack's normalised channel-major rows.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Engine } from '../../src/engine/engine';
import { copy } from '../../src/engine/ops/layout';
import type { Tensor } from '../../src/engine/tensor';
import { adaptivePoolWindows } from '../../src/models/minimax_h3/vae/audio/attn-projection';
import { parseAudioVaeEncoderConfig } from '../../src/models/minimax_h3/vae/audio/config';
import { AudioVaeEncoder, audioConditionRows } from '../../src/models/minimax_h3/vae/audio/encoder';
import { DEMO_AUDIO_VAE_CONFIG } from '../../src/models/minimax_h3/demo';
import { testEngine, type HostTensor } from '../engine/helpers';
import { goldenTests, WEIGHT_PREFIX } from './golden';

/** upstream [N, C, L] -> [N, L, C]. */
function channelsLast(x: HostTensor): HostTensor {
  const [N, C, L] = x.shape as [number, number, number];
  const out = new Float64Array(x.data.length);
  for (let n = 0; n < N; n++) for (let c = 0; c < C; c++) for (let l = 0; l < L; l++) out[(n * L + l) * C + c] = x.data[(n * C + c) * L + l]!;
  return { data: out, shape: [N, L, C] };
}

const flat = (xs: Float32Array[]) => Float64Array.from(xs.flatMap((x) => Array.from(x)));

for (const dtype of ['f32', 'f16'] as const) {
  goldenTests(
    'minimax_h3',
    'audio_vae_encode',
    async (c) => {
      const e: Engine = await testEngine();
      const cfg = parseAudioVaeEncoderConfig(c.config, c.name);
      const vae = await AudioVaeEncoder.load(e, c.ckpt, cfg, { dtype, prefix: WEIGHT_PREFIX });
      const seen = new Map<string, Tensor>();
      try {
        const wav = await c.input('waveform'); // [N, 1, S]
        const [N, , S] = wav.shape as [number, number, number];
        const channels = Array.from({ length: N }, (_, n) => Float32Array.from(wav.data.subarray(n * S, (n + 1) * S)));
        const post = await vae.encode(channels, (name, t) => seen.set(name, copy(e, t)));
        const mean = await c.output('mean');
        assert.deepEqual([post.channels, cfg.latentChannels, post.frames], mean.shape, 'mean [N, C, T]');
        assert.equal(vae.latentFrames(S), mean.shape[2]);
        const stages = c.names('output').filter((n) => n === 'encoder' || n.startsWith('encoder.block.'));
        assert.ok(stages.length > 1, 'the case holds encoder stages');
        for (const name of stages) {
          const t = seen.get(name);
          assert.ok(t, `nothing captured as ${name}`);
          const w = channelsLast(await c.output(name));
          assert.deepEqual(t.shape, w.shape, `${name} shape`);
          c.expect(dtype, await e.read(t), w, name);
        }
        for (const name of ['attn', 'pre_block']) { // channels-last upstream too (pre_block runs on [N, T, D])
          const t = seen.get(name);
          assert.ok(t, `nothing captured as ${name}`);
          c.expect(dtype, await e.read(t), await c.output(name), name);
        }
        c.expect(dtype, flat(post.mean), mean, 'mean');
        c.expect(dtype, flat(post.logs), await c.output('logs'), 'logs');
        c.expect(dtype, audioConditionRows(cfg, post), await c.output('condition_rows'), 'condition_rows');
      } finally {
        seen.forEach((t) => t.free());
        vae.free();
      }
    },
    dtype,
  );
}

test('audio VAE encoder: adaptive_avg_pool1d windows (exact, overlapping)', () => {
  assert.deepEqual(adaptivePoolWindows(256, 32)[31], [248, 256]); // the released 2048 / 8 heads -> 32 channels: 8 each
  assert.deepEqual(adaptivePoolWindows(12, 8).slice(0, 4), [[0, 2], [1, 3], [3, 5], [4, 6]]);
});

test('audio VAE encoder: the released config (hop 800, 2048 wide, 8 heads of 256 pooled to 32) and refusals', () => {
  const c = parseAudioVaeEncoderConfig(DEMO_AUDIO_VAE_CONFIG);
  assert.deepEqual(c.encoderRates, [2, 4, 4, 5, 5]);
  assert.throws(() => parseAudioVaeEncoderConfig({ ...DEMO_AUDIO_VAE_CONFIG, num_attention_heads: 3 }), /num_attention_heads/);
  assert.throws(() => parseAudioVaeEncoderConfig({ ...DEMO_AUDIO_VAE_CONFIG, encoder_rates: [] }), /encoder_rates/);
});
