// The demo MiniMax H3 checkpoint carries both VAE encoders in the published layout (issue 15): vae/ holds encoder.* and
// quant_conv.* in its F16 shards beside the decoder, audio_vae/ the DAC encoder's weight-norm pairs, pre_block,
// mean_proj and logs_proj in its F32 file (zero_k_bias zeros, as the released buffer); both encoders load from the
// written folders and encode.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Checkpoint } from '../../src/engine/safetensors';
import { AudioVaeEncoder } from '../../src/models/minimax_h3/vae/audio';
import { planDemoH3 } from '../../src/models/minimax_h3/demo';
import { normalizePixels, openVideoVaeCheckpoint, VideoVaeEncoder } from '../../src/models/minimax_h3/vae/video';
import { testEngine } from '../engine/helpers';

test('demo checkpoint: both VAE encoders in the published layout, loadable and encoding', async () => {
  const e = await testEngine();
  const dir = mkdtempSync(join(tmpdir(), 'kiln-h3-demo-enc-'));
  try {
    const plan = await planDemoH3(e);
    const vaeKeys = [...plan.keys.vae.keys()];
    assert.ok(vaeKeys.some((k) => k.startsWith('encoder.down_blocks.')) && vaeKeys.includes('quant_conv.weight'), 'vae/ has the encoder');
    const audioKeys = [...plan.keys.audioVae.keys()];
    for (const k of ['encoder.block.0.weight_g', 'encoder.block.0.weight_v', 'pre_block.attn.qkv.weight', 'pre_block.attn.zero_k_bias', 'mean_proj.weight', 'logs_proj.weight']) {
      assert.ok(audioKeys.includes(k), `audio_vae/ has ${k}`);
    }
    await plan.write(dir);

    const vcfg = JSON.parse(readFileSync(join(dir, 'vae', 'config.json'), 'utf8')) as Record<string, unknown>;
    const vck = await openVideoVaeCheckpoint(join(dir, 'vae'));
    const venc = await VideoVaeEncoder.load(e, vck, vcfg);
    try {
      assert.equal(vck.entry('encoder.conv_in.weight').dtype, 'F16');
      const px = Float32Array.from({ length: 3 * 32 * 48 }, (_, i) => (i * 37) % 256);
      const m = await venc.encode(normalizePixels({ data: px, shape: [3, 1, 32, 48] }));
      assert.deepEqual(m.shape, [48, 1, 2, 3]);
      assert.ok(m.data.every(Number.isFinite));
    } finally {
      venc.free();
      await vck.close();
    }

    const acfg = JSON.parse(readFileSync(join(dir, 'audio_vae', 'config.json'), 'utf8')) as unknown;
    const ack = await Checkpoint.open(join(dir, 'audio_vae', 'diffusion_pytorch_model.safetensors'));
    const aenc = await AudioVaeEncoder.load(e, ack, acfg);
    try {
      assert.ok((await ack.readFloat32('pre_block.attn.zero_k_bias')).every((v) => v === 0), 'zero_k_bias is zeros');
      const wave = Float32Array.from({ length: 1700 }, (_, i) => 0.3 * Math.sin(i / 7));
      const p = await aenc.encode([wave, wave]);
      assert.equal(p.frames, 3); // 1700 samples, right-padded to 3 x 800
      assert.equal(p.mean[0]!.length, 32 * 3);
      assert.ok(p.mean.every((ch) => ch.every(Number.isFinite)));
      assert.deepEqual(p.mean[0], p.mean[1], 'the same waveform on both channels gives the same latents');
    } finally {
      aenc.free();
      await ack.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
