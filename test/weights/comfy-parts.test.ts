// ComfyUI's text encoder and VAE files (issue 44): the key maps onto the names Kiln's loaders read, and the refusals of
// a file that fits no known layout, by name with what was expected. A job on such files: test/models/krea2_worker.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { comfyQwenVlRename, comfyWanVaeRename, ComfyKeysError } from '../../src/engine/comfy-keys';
import type { Engine } from '../../src/engine/engine';
import { f8e4m3ToF32 } from '../../src/engine/dtype';
import { Checkpoint } from '../../src/engine/safetensors';
import { writeSafetensors } from '../../src/engine/safetensors-writer';
import { krea2VaeFromFile } from '../../src/models/krea2/comfy-parts';

test('a Qwen-VL text encoder: ComfyUI\'s model. / visual. onto transformers\' model.language_model. / model.visual.; transformers\' own kept; anything else refused', () => {
  const comfy = comfyQwenVlRename(['model.embed_tokens.weight', 'model.layers.0.self_attn.q_proj.weight', 'visual.blocks.0.attn.qkv.weight'], 'te.safetensors');
  assert.equal(comfy('model.embed_tokens.weight'), 'model.language_model.embed_tokens.weight');
  assert.equal(comfy('model.layers.3.mlp.gate_proj.weight'), 'model.language_model.layers.3.mlp.gate_proj.weight');
  assert.equal(comfy('model.norm.weight'), 'model.language_model.norm.weight');
  assert.equal(comfy('visual.deepstack_merger_list.1.linear_fc2.bias'), 'model.visual.deepstack_merger_list.1.linear_fc2.bias');
  assert.equal(comfy('model.visual.merger.norm.weight'), 'model.visual.merger.norm.weight');
  assert.equal(comfy('lm_head.weight'), 'lm_head.weight');
  const hf = comfyQwenVlRename(['model.language_model.layers.0.mlp.up_proj.weight'], 'te.safetensors');
  assert.equal(hf('model.language_model.layers.0.mlp.up_proj.weight'), 'model.language_model.layers.0.mlp.up_proj.weight');
  assert.throws(() => comfyQwenVlRename(['encoder.block.0.layer.0.SelfAttention.k.weight'], 't5.safetensors'),
    (e: Error) => e instanceof ComfyKeysError && /t5\.safetensors: not a Qwen-VL text encoder.*expected ComfyUI's keys \(model\.embed_tokens\.weight.*found "encoder\.block/.test(e.message));
});

test('a Wan 2.1 VAE (ComfyUI\'s qwen_image_vae): Wan\'s names onto diffusers\' AutoencoderKLQwenImage, levels of num_res_blocks + 1 resnets and a Resample', () => {
  const keys = ['conv1.weight', 'conv2.weight', 'decoder.conv1.weight', 'decoder.upsamples.3.resample.1.weight', 'decoder.upsamples.0.residual.0.gamma', 'encoder.downsamples.2.resample.1.weight'];
  const r = comfyWanVaeRename(keys, 'vae.safetensors');
  const cases: [string, string | null][] = [
    ['conv2.bias', 'post_quant_conv.bias'], ['conv1.weight', 'quant_conv.weight'], ['decoder.conv1.weight', 'decoder.conv_in.weight'],
    ['decoder.middle.0.residual.0.gamma', 'decoder.mid_block.resnets.0.norm1.gamma'], ['decoder.middle.1.to_qkv.weight', 'decoder.mid_block.attentions.0.to_qkv.weight'],
    ['decoder.middle.2.residual.6.bias', 'decoder.mid_block.resnets.1.conv2.bias'], ['decoder.upsamples.0.residual.2.weight', 'decoder.up_blocks.0.resnets.0.conv1.weight'],
    ['decoder.upsamples.3.resample.1.weight', 'decoder.up_blocks.0.upsamplers.0.resample.1.weight'], ['decoder.upsamples.7.time_conv.bias', 'decoder.up_blocks.1.upsamplers.0.time_conv.bias'],
    ['decoder.upsamples.4.shortcut.weight', 'decoder.up_blocks.1.resnets.0.conv_shortcut.weight'], ['decoder.upsamples.14.residual.3.gamma', 'decoder.up_blocks.3.resnets.2.norm2.gamma'],
    ['decoder.head.0.gamma', 'decoder.norm_out.gamma'], ['decoder.head.2.weight', 'decoder.conv_out.weight'],
    ['encoder.downsamples.1.residual.0.gamma', 'encoder.down_blocks.1.norm1.gamma'], ['encoder.head.2.bias', 'encoder.conv_out.bias'],
  ];
  for (const [from, to] of cases) assert.equal(r(from), to, from);
  assert.throws(() => r('decoder.upsamples.3.bogus.weight'), /"decoder\.upsamples\.3\.bogus\.weight" is no part of a Wan 2\.1 VAE decoder/);
  // diffusers' own names kept; a whole checkpoint's first_stage_model. prefix dropped, its other parts left out
  const d = comfyWanVaeRename(['first_stage_model.decoder.up_blocks.0.resnets.0.norm1.gamma', 'model.diffusion_model.x'], 'ck.safetensors');
  assert.equal(d('first_stage_model.decoder.up_blocks.0.resnets.0.norm1.gamma'), 'decoder.up_blocks.0.resnets.0.norm1.gamma');
  assert.equal(d('model.diffusion_model.x'), null);
  assert.throws(() => comfyWanVaeRename(['decoder.up.0.block.0.conv1.weight', 'decoder.conv_in.weight'], 'sdxl_vae.safetensors'),
    (e: Error) => e instanceof ComfyKeysError && /sdxl_vae\.safetensors: not a Qwen-Image \(Wan 2\.1\) VAE.*expected ComfyUI's keys \(decoder\.conv1/.test(e.message));
});

test('a Wan-keyed VAE of sizes no known layout has is refused naming decoder.conv_in\'s shape and the expected ones, before anything loads', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-comfy-vae-'));
  try {
    const f = join(dir, 'qwen_image_vae.safetensors');
    await writeSafetensors(f, {
      'decoder.conv1.weight': { dtype: 'F32', shape: [40, 16, 3, 3, 3], data: new Float32Array(40 * 16 * 27) },
      'decoder.upsamples.3.resample.1.weight': { dtype: 'F32', shape: [1], data: [0] },
    });
    await assert.rejects(krea2VaeFromFile(undefined as unknown as Engine, f), (e: Error) => e instanceof ComfyKeysError && /decoder\.conv_in is \[40, 16, 3, 3, 3\]; expected the Qwen-Image VAE's \[384, 16, \.\.\.\] or Kiln's demo VAE's \[16, 16, \.\.\.\]/.test(e.message));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an fp8 scaled ComfyUI text encoder (scaled_fp8 marker, <layer>.scale_weight): read under transformers\' names with its scales applied', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-comfy-te-fp8-'));
  try {
    const f = join(dir, 'qwen_3_vl_4b_fp8_scaled.safetensors');
    const bytes = Uint8Array.from({ length: 8 }, (_, i) => (i * 29 + 3) & 0x77);
    await writeSafetensors(f, {
      scaled_fp8: { dtype: 'F8_E4M3', shape: [0], data: new Uint8Array(0) },
      'model.embed_tokens.weight': { dtype: 'F32', shape: [2, 2], data: [1, 2, 3, 4] },
      'model.layers.0.self_attn.q_proj.weight': { dtype: 'F8_E4M3', shape: [2, 4], data: bytes },
      'model.layers.0.self_attn.q_proj.scale_weight': { dtype: 'F32', shape: [1], data: [0.25] },
      'visual.blocks.0.attn.qkv.weight': { dtype: 'F8_E4M3', shape: [2, 4], data: bytes },
      'visual.blocks.0.attn.qkv.scale_weight': { dtype: 'F32', shape: [2], data: [2, 4] },
    });
    const opened = await Checkpoint.open(f);
    const ck = opened.renamed(comfyQwenVlRename(opened.keys(), f));
    try {
      assert.deepEqual(await ck.readFloat32('model.language_model.layers.0.self_attn.q_proj.weight'), Float32Array.from(bytes, (b) => f8e4m3ToF32(b) * 0.25));
      assert.deepEqual(await ck.readFloat32('model.visual.blocks.0.attn.qkv.weight'), Float32Array.from(bytes, (b, i) => f8e4m3ToF32(b) * (i < 4 ? 2 : 4)));
      assert.deepEqual(await ck.readFloat32('model.language_model.embed_tokens.weight'), Float32Array.from([1, 2, 3, 4]));
    } finally {
      await ck.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
