// LoRA files at the model level (issue 46): reading both key styles and mapping them onto Krea 2's and
// Qwen-Image-2.1's linears (src/models/common/lora.ts, lora-models.ts), the alpha rule, the refusals, and the
// loaded-LoRA cache. Applying them: lora_apply.test.ts.
import assert from 'node:assert/strict';
import { mkdtemp, rm, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { writeSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { LoraCache, LoraError, readLora, resolveModule } from '../../src/models/common/lora';
import { krea2LoraNames, qwenImage21LoraNames } from '../../src/models/common/lora-models';
import { parseKrea2Config } from '../../src/models/krea2';
import { parseQwenImage21Config } from '../../src/models/qwen_image21';
import { makeRng } from '../engine/helpers';

const KREA = parseKrea2Config({ features: 32, tdim: 16, txtdim: 16, heads: 2, kvheads: 1, multiplier: 4, layers: 2, patch: 2, channels: 4,
  theta: 1000, txtlayers: 3, txtheads: 1, txtkvheads: 1, bias: false });
const QWEN = parseQwenImage21Config({ num_layers: 2, num_attention_heads: 2, attention_head_dim: 16, in_channels: 8, out_channels: 8,
  context_in_dim: 24, mlp_ratio: 3, axes_dims_rope: [4, 6, 6] });
const krea = krea2LoraNames(KREA);
const qwen = qwenImage21LoraNames(QWEN);
const MODELS = [krea, qwen];

let dir = '';
const tmp = async () => (dir ||= await mkdtemp(join(tmpdir(), 'kiln-lora-')));
after(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

let n = 0;
const rnd = makeRng(46);
const mat = (rows: number, cols: number): WriteTensor => ({ dtype: 'F32', shape: [rows, cols], data: Float32Array.from({ length: rows * cols }, () => rnd.next() - 0.5) });
async function file(tensors: Record<string, WriteTensor>, metadata?: Record<string, string>): Promise<string> {
  const p = join(await tmp(), `l${n++}.safetensors`);
  await writeSafetensors(p, tensors, metadata);
  return p;
}
/** A pair for `stem` with `suffixes` [down, up] fitting [N, K]. */
function pair(t: Record<string, WriteTensor>, stem: string, [N, K]: readonly [number, number], r: number, kohya = false, alpha?: number): void {
  t[`${stem}.${kohya ? 'lora_down' : 'lora_A'}.weight`] = mat(r, K);
  t[`${stem}.${kohya ? 'lora_up' : 'lora_B'}.weight`] = mat(N, r);
  if (alpha !== undefined) t[`${stem}.alpha`] = { dtype: 'F32', shape: [], data: [alpha] };
}
const shape = (names: typeof krea, m: string) => names.modules.get(m)!;

describe('LoRA files: key styles, module names, the alpha rule', () => {
  test('Krea 2: diffusers names behind transformer., native names behind diffusion_model. / base_model.model., kohya underscores', async () => {
    const t: Record<string, WriteTensor> = {};
    pair(t, 'transformer.transformer_blocks.1.attn.to_out.0', shape(krea, 'blocks.1.attn.wo'), 3);
    pair(t, 'transformer.transformer_blocks.0.ff.down', shape(krea, 'blocks.0.mlp.down'), 3);
    pair(t, 'transformer.text_fusion.refiner_blocks.1.attn.to_gate', shape(krea, 'txtfusion.refiner_blocks.1.attn.gate'), 3);
    pair(t, 'transformer.time_mod_proj', shape(krea, 'tproj.1'), 3);
    const d = await readLora(await file(t), krea);
    assert.equal(d.style, 'peft');
    assert.deepEqual([...d.pairs.keys()].sort(), ['blocks.0.mlp.down', 'blocks.1.attn.wo', 'tproj.1', 'txtfusion.refiner_blocks.1.attn.gate']);
    for (const p of d.pairs.values()) assert.equal(p.factor, 1, 'no alpha: alpha = rank');

    const u: Record<string, WriteTensor> = {};
    pair(u, 'diffusion_model.blocks.0.attn.wq', shape(krea, 'blocks.0.attn.wq'), 2, false, 1);
    pair(u, 'base_model.model.last.linear', shape(krea, 'last.linear'), 2);
    const nat = await readLora(await file(u), krea);
    assert.equal(nat.pairs.get('blocks.0.attn.wq')!.factor, 0.5, 'alpha 1 at rank 2');
    assert.equal(nat.pairs.get('last.linear')!.factor, 1);

    const k: Record<string, WriteTensor> = {};
    pair(k, 'lora_unet_blocks_1_mlp_gate', shape(krea, 'blocks.1.mlp.gate'), 4, true, 8);
    pair(k, 'lora_unet_txtfusion_layerwise_blocks_0_attn_wk', shape(krea, 'txtfusion.layerwise_blocks.0.attn.wk'), 4, true, 2);
    pair(k, 'lora_transformer_transformer_blocks_0_attn_to_v', shape(krea, 'blocks.0.attn.wv'), 4, true);
    const ko = await readLora(await file(k), krea);
    assert.equal(ko.style, 'kohya');
    assert.equal(ko.pairs.get('blocks.1.mlp.gate')!.factor, 2);
    assert.equal(ko.pairs.get('txtfusion.layerwise_blocks.0.attn.wk')!.factor, 0.5);
    assert.equal(ko.pairs.get('blocks.0.attn.wv')!.factor, 1);
    assert.equal(ko.pairs.get('blocks.0.attn.wv')!.source, 'lora_transformer_transformer_blocks_0_attn_to_v');
  });

  test('Qwen-Image-2.1: Kiln\'s names are diffusers\'; kohya and ComfyUI\'s prefix resolve onto them', async () => {
    assert.equal(resolveModule(qwen, 'transformer.transformer_blocks.1.img_mlp.gate_layer'), 'transformer_blocks.1.img_mlp.gate_layer');
    assert.equal(resolveModule(qwen, 'diffusion_model.transformer_blocks.0.attn.to_out.0'), 'transformer_blocks.0.attn.to_out.0');
    assert.equal(resolveModule(qwen, 'lora_unet_transformer_blocks_1_attn_to_q'), 'transformer_blocks.1.attn.to_q');
    assert.equal(resolveModule(qwen, 'lora_unet_time_text_embed_timestep_embedder_linear_2'), 'time_text_embed.timestep_embedder.linear_2');
    assert.equal(resolveModule(qwen, 'transformer_blocks.2.attn.to_q'), undefined, 'a block the config does not have');
    const t: Record<string, WriteTensor> = {};
    pair(t, 'lora_unet_transformer_blocks_0_img_mlp_proj', shape(qwen, 'transformer_blocks.0.img_mlp.proj'), 2, true, 4);
    pair(t, 'lora_unet_proj_out', shape(qwen, 'proj_out'), 2, true, 4);
    const f = await readLora(await file(t), qwen);
    assert.deepEqual([...f.pairs.keys()].sort(), ['proj_out', 'transformer_blocks.0.img_mlp.proj']);
    assert.equal(f.pairs.get('proj_out')!.factor, 2);
  });

  test('a diffusers file\'s adapter metadata carries lora_alpha and alpha_pattern', async () => {
    const t: Record<string, WriteTensor> = {};
    pair(t, 'transformer.transformer_blocks.0.attn.to_q', shape(qwen, 'transformer_blocks.0.attn.to_q'), 4);
    pair(t, 'transformer.transformer_blocks.1.attn.to_k', shape(qwen, 'transformer_blocks.1.attn.to_k'), 4);
    const meta = { lora_adapter_metadata: JSON.stringify({ 'transformer.r': 4, 'transformer.lora_alpha': 8, 'transformer.alpha_pattern': { 'transformer_blocks.1.attn.to_k': 2 } }) };
    const f = await readLora(await file(t, meta), qwen);
    assert.equal(f.pairs.get('transformer_blocks.0.attn.to_q')!.factor, 2);
    assert.equal(f.pairs.get('transformer_blocks.1.attn.to_k')!.factor, 0.5);
  });

  test('refused by name: no module of the model, another model\'s LoRA, a wrong shape, non-LoRA tensors, text encoder, half a pair', async () => {
    const none: Record<string, WriteTensor> = {};
    pair(none, 'transformer.down_blocks.0.resnets.0.conv1', [8, 8], 2);
    pair(none, 'transformer.mid_block.attn.to_q', [8, 8], 2);
    await assert.rejects(readLora(await file(none), krea), (e: Error) => e instanceof LoraError &&
      /none of its 2 modules is a Krea 2 linear \(transformer\.down_blocks\.0\.resnets\.0\.conv1, transformer\.mid_block\.attn\.to_q\)/.test(e.message));

    const q: Record<string, WriteTensor> = {};
    pair(q, 'transformer.transformer_blocks.0.img_mlp.proj', shape(qwen, 'transformer_blocks.0.img_mlp.proj'), 2);
    pair(q, 'transformer.transformer_blocks.0.attn.to_q', shape(qwen, 'transformer_blocks.0.attn.to_q'), 2);
    await assert.rejects(readLora(await file(q), krea, MODELS), /1 of its 2 modules are not a Krea 2 linear \(transformer\.transformer_blocks\.0\.img_mlp\.proj\): they are Qwen-Image-2\.1 modules, a LoRA for another model/);

    const k: Record<string, WriteTensor> = {};
    pair(k, 'lora_unet_blocks_0_attn_wq', shape(krea, 'blocks.0.attn.wq'), 2, true, 2);
    pair(k, 'lora_unet_blocks_0_mlp_up', shape(krea, 'blocks.0.mlp.up'), 2, true, 2);
    await assert.rejects(readLora(await file(k), qwen, MODELS), /none of its 2 modules is a Qwen-Image-2\.1 linear .*: they are Krea 2 modules/);

    const big: Record<string, WriteTensor> = {};
    pair(big, 'diffusion_model.blocks.0.attn.wq', [64, 64], 2);
    await assert.rejects(readLora(await file(big), krea), /blocks\.0\.attn\.wq: the pair is \[64, 64\] \(out, in\), Krea 2's blocks\.0\.attn\.wq is \[32, 32\]/);

    const dora: Record<string, WriteTensor> = {};
    pair(dora, 'transformer.img_in', shape(krea, 'first'), 2);
    dora['transformer.img_in.lora_magnitude_vector'] = { dtype: 'F32', shape: [32], data: new Float32Array(32) };
    await assert.rejects(readLora(await file(dora), krea), /1 tensors are not low-rank LoRA pairs \(transformer\.img_in\.lora_magnitude_vector\)/);

    const te: Record<string, WriteTensor> = {};
    pair(te, 'transformer.img_in', shape(krea, 'first'), 2);
    pair(te, 'lora_te1_text_model_encoder_layers_0_mlp_fc1', [8, 8], 2, true);
    await assert.rejects(readLora(await file(te), krea), /text-encoder tensors \(lora_te1_text_model_encoder_layers_0_mlp_fc1\.lora_down\.weight/);

    const half: Record<string, WriteTensor> = { 'transformer.img_in.lora_A.weight': mat(2, 16) };
    await assert.rejects(readLora(await file(half), krea), /transformer\.img_in has no up \(lora_B \/ lora_up\) matrix/);
  });

  test('the cache keeps loaded files under its byte bound, least recently used out first, and re-reads a changed file', async () => {
    const paths: string[] = [];
    for (let i = 0; i < 3; i++) {
      const t: Record<string, WriteTensor> = {};
      pair(t, 'transformer.transformer_blocks.0.ff.up', shape(krea, 'blocks.0.mlp.up'), 4); // (4 x 32 + 128 x 4) x 4 bytes
      paths.push(await file(t));
    }
    const one = (4 * 32 + 128 * 4) * 4;
    const cache = new LoraCache(2 * one);
    const a = await cache.load(paths[0]!, krea);
    assert.equal(await cache.load(paths[0]!, krea), a, 'a hit is the same object');
    await cache.load(paths[1]!, krea);
    await cache.load(paths[0]!, krea); // 0 is now more recent than 1
    await cache.load(paths[2]!, krea);
    assert.equal(cache.bytes, 2 * one);
    assert.ok(cache.has(paths[0]!, 'krea2') && cache.has(paths[2]!, 'krea2') && !cache.has(paths[1]!, 'krea2'), 'the least recently used one went');
    const later = new Date(Date.now() + 5000);
    await utimes(paths[0]!, later, later);
    assert.notEqual(await cache.load(paths[0]!, krea), a, 'a changed file is read again');
    assert.equal(cache.size, 2);
    assert.throws(() => new LoraCache(0), RangeError);
  });
});
