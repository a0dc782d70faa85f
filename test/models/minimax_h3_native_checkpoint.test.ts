// The native MiniMaxH3DiTModel checkpoint format (native-checkpoint.ts): the golden cases' tiny weights re-written the way the
// released FL2VA/ shards store them (fused per-head-interleaved qkv_proj, fc1 as [gate; value], native names,
// rope.inv_freq) must load to the same forward as the diffusers format, bit for bit in f32; an int8 single file
// (diffusion_model. prefix, I8 weights + per-row weight_scale, no config.json) must load to the same int8 model
// as quantising the diffusers weights at load. Unknown tensors are refused.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { quantizeInt8PerChannel } from '../../src/engine/quantize';
import { type TensorEntry } from '../../src/engine/safetensors';
import { writeSafetensors, writeShardedSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { parseH3Config, type H3Config } from '../../src/models/minimax_h3/transformer/config';
import { nativeView, openH3Weights, splitQkv, type CheckpointLike, type QkvRows } from '../../src/models/minimax_h3/transformer/native-checkpoint';
import { loadH3Transformer } from '../../src/models/minimax_h3/variants';
import { h3InvFreq } from '../../src/models/minimax_h3/transformer/rope';
import { MiniMaxH3Transformer } from '../../src/models/minimax_h3/transformer/transformer';
import { testEngine } from '../engine/helpers';
import { expectClose, GoldenCase, goldenCaseFiles, goldenDir, goldenTests, WEIGHT_PREFIX } from './golden';
import { caseWeights, runCase, tmpDir, type HostWeight } from './minimax_h3_profiles-fixture';

/** diffusers config JSON -> the native config.json naming (FL2VA/transformer/config.json). */
function nativeConfig(d: Record<string, unknown>): Record<string, unknown> {
  const H = d.hidden_size as number;
  return {
    _class_name: 'MiniMaxH3DiTModel', hidden_size: H, num_layers: d.num_layers, token_refiner_num_layers: d.num_refiner_layers,
    num_attention_heads: d.num_attention_heads, attention_head_dim: d.attention_head_dim, ffn_hidden_size: d.ffn_dim,
    latents_dim: d.in_channels, audio_latents_dim: d.audio_in_channels, patch_size: d.patch_size, text_dim: d.text_dim,
    timestep_input_dim: d.freq_dim, time_embed_hidden_size: d.time_embed_hidden_dim, time_embed_dim: d.time_embed_dim,
    adaln_out_features: 18 * H, final_adaln_out_features: 2 * H, rope_inv_freq_len: d.rope_freq_dim, rope_theta: d.rope_theta,
    norm_eps: d.norm_eps, qk_norm_eps: d.qk_norm_eps, final_norm_eps: d.final_norm_eps,
  };
}

/** Our diffusers weights -> native keys and storage (the inverse of the diffusers conversion script's transforms). */
function toNative(w: Map<string, HostWeight>, c: H3Config, qkvRows: QkvRows = 'interleaved'): Map<string, HostWeight> {
  const out = new Map<string, HostWeight>();
  const get = (k: string) => {
    const v = w.get(k);
    assert.ok(v, `fixture lacks ${k}`);
    return v;
  };
  const put = (native: string, ours: string) => out.set(native, get(ours));
  const d = c.headDim;
  const H = c.hiddenSize;
  const block = (ours: string, theirs: string, adaln: boolean) => {
    put(`${theirs}.norm1.weight`, `${ours}.norm1.weight`);
    put(`${theirs}.norm2.weight`, `${ours}.norm2.weight`);
    const [q, k, v] = ['to_q', 'to_k', 'to_v'].map((n) => get(`${ours}.attn.${n}.weight`).data);
    const qkv = new Float32Array(3 * c.numHeads * d * H);
    const n = c.numHeads * d * H;
    if (qkvRows === 'stacked') [q!, k!, v!].forEach((m, part) => qkv.set(m, part * n));
    else for (let h = 0; h < c.numHeads; h++) [q!, k!, v!].forEach((m, part) => qkv.set(m.subarray(h * d * H, (h + 1) * d * H), (h * 3 + part) * d * H));
    out.set(`${theirs}.attn.qkv_proj.weight`, { shape: [3 * c.numHeads * d, H], data: qkv });
    put(`${theirs}.attn.out_proj.weight`, `${ours}.attn.to_out.0.weight`);
    put(`${theirs}.attn.q_norm.weight`, `${ours}.attn.norm_q.weight`);
    put(`${theirs}.attn.k_norm.weight`, `${ours}.attn.norm_k.weight`);
    const fc1 = get(`${ours}.ff.net.0.proj.weight`);
    const half = fc1.data.length / 2;
    const swapped = new Float32Array(fc1.data.length);
    swapped.set(fc1.data.subarray(half), 0); // gate first, as the reference stores it
    swapped.set(fc1.data.subarray(0, half), half);
    out.set(`${theirs}.mlp.fc1.weight`, { shape: fc1.shape, data: swapped });
    put(`${theirs}.mlp.fc2.weight`, `${ours}.ff.net.2.weight`);
    if (adaln) for (const s of ['weight', 'bias']) put(`${theirs}.adaln_proj.linear.${s}`, `${ours}.adaln_proj.linear.${s}`);
  };
  const lin = (theirs: string, ours: string) => ['weight', 'bias'].forEach((s) => put(`${theirs}.${s}`, `${ours}.${s}`));
  lin('video_patch_proj', 'proj_in');
  lin('audio_patch_proj', 'audio_proj_in');
  lin('condition_proj', 'context_embedder');
  lin('time_embedder.proj_in', 'time_embedder.linear_1');
  lin('time_embedder.proj_out', 'time_embedder.linear_2');
  for (let i = 0; i < c.numRefinerLayers; i++) block(`token_refiner.refiner_blocks.${i}`, `token_refiner.blocks.${i}`, false);
  put('token_refiner.final_norm.weight', 'token_refiner.final_norm.weight');
  for (let i = 0; i < c.numLayers; i++) block(`transformer_blocks.${i}`, `blocks.${i}`, true);
  put('final_layer.norm.weight', 'norm_out.norm.weight');
  lin('final_layer.adaln_proj.linear', 'norm_out.linear');
  lin('final_layer.video_out', 'proj_out');
  lin('final_layer.audio_out', 'audio_proj_out');
  out.set('rope.inv_freq', { shape: [c.ropeFreqDim], data: h3InvFreq(c.ropeFreqDim, c.ropeTheta) });
  assert.equal(out.size - 1 + 2 * (c.numLayers + c.numRefinerLayers), w.size, 'every diffusers tensor mapped (qkv fuses three)');
  return out;
}

const f32Tensors = (w: Map<string, HostWeight>, prefix = ''): Record<string, WriteTensor> =>
  Object.fromEntries([...w].map(([k, v]) => [prefix + k, { dtype: 'F32', shape: v.shape, data: v.data } as WriteTensor]));

goldenTests('minimax_h3', 'transformer', async (c: GoldenCase) => {
  const e = await testEngine();
  const cfg = parseH3Config(c.config, c.path);
  const native = toNative(await caseWeights(c), cfg);
  const dir = tmpDir('native');
  await writeShardedSafetensors(dir, f32Tensors(native), 4096); // several shards + model.safetensors.index.json
  await writeFile(join(dir, 'config.json'), JSON.stringify(nativeConfig(c.config)));

  const ref = await MiniMaxH3Transformer.load(e, c.ckpt, cfg, { dtype: 'f32', prefix: WEIGHT_PREFIX });
  const want = await runCase(e, ref, c);
  ref.free();
  const model = await loadH3Transformer(e, 'basevid50', { transformer: dir }, { dtype: 'f32' });
  const got = await runCase(e, model, c);
  model.free();
  assert.deepEqual(got.video, want.video, 'native f32 = diffusers f32 (video)');
  assert.deepEqual(got.audio, want.audio, 'native f32 = diffusers f32 (audio)');
  expectClose(got.video, await c.output('sample'), c.tol('f32'), 'native format vs upstream sample');
  // the Ref2VA partition in its native layout (Ref2VA/transformer/: the same config and tensor names) loads the same way
  const refModel = await loadH3Transformer(e, 'basevid50', { transformer: join(dir, 'absent'), transformerRef: dir }, { dtype: 'f32', partition: 'ref2va' });
  const gotRef = await runCase(e, refModel, c);
  refModel.free();
  assert.deepEqual(gotRef.video, want.video, 'Ref2VA from a native folder = the diffusers forward');
}, 'native folder');

goldenTests('minimax_h3', 'transformer', async (c: GoldenCase) => {
  const e = await testEngine();
  const cfg = parseH3Config(c.config, c.path);
  const native = toNative(await caseWeights(c), cfg, 'stacked');
  // the int8 single file (ComfyUI-keyed: stacked qkv rows): every 2-D weight of the block stack / refiner / adaln / context as I8 + per-row scale
  const tensors: Record<string, WriteTensor> = {};
  for (const [k, v] of native) {
    const quantised = v.shape.length === 2 && (k.startsWith('blocks.') || k.startsWith('token_refiner.') || k.startsWith('condition_proj') || k.startsWith('final_layer.adaln_proj'));
    if (!quantised) {
      tensors[`diffusion_model.${k}`] = { dtype: 'F32', shape: v.shape, data: v.data };
      continue;
    }
    const q = quantizeInt8PerChannel(v.data, v.shape[0]!, v.shape[1]!);
    tensors[`diffusion_model.${k}`] = { dtype: 'I8', shape: v.shape, data: q.q };
    tensors[`diffusion_model.${k.replace(/\.weight$/, '.weight_scale')}`] = { dtype: 'F32', shape: [v.shape[0]!], data: q.scales };
  }
  const file = join(tmpDir('int8'), 'minimax_h3_int8.safetensors');
  await writeSafetensors(file, tensors);

  const ref = await MiniMaxH3Transformer.load(e, c.ckpt, cfg, { dtype: 'f32', int8: true, prefix: WEIGHT_PREFIX });
  const want = await runCase(e, ref, c);
  ref.free();
  const model = await loadH3Transformer(e, 'basevid50', { transformer: file }, { dtype: 'f32', config: cfg, int8: true });
  const got = await runCase(e, model, c);
  model.free();
  // per-row max |q| is 127, so dequantise -> quantise per channel returns the same q and scales up to an ulp of
  // the scale (the fused qkv is quantised per row before the split: its rows are the same rows)
  const same = { atol: 1e-5, rtol: 1e-5 };
  expectClose(got.video, { data: Float64Array.from(want.video), shape: [want.video.length] }, same, 'int8 file = int8 at load (video)');
  expectClose(got.audio, { data: Float64Array.from(want.audio), shape: [want.audio.length] }, same, 'int8 file = int8 at load (audio)');
  expectClose(got.video, await c.output('sample'), c.tol('int8'), 'int8 file vs upstream sample');
}, 'int8 single file');

test('native format: the interleaved qkv split and the refusal of unknown tensors', async () => {
  // rows [h0: q q, k k, v v, h1: ...] with d = 2, H = 1
  const w = Float32Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  assert.deepEqual(Array.from(splitQkv(w, 2, 2, 1, 0, 'interleaved')), [1, 2, 7, 8]);
  assert.deepEqual(Array.from(splitQkv(w, 2, 2, 1, 1, 'interleaved')), [3, 4, 9, 10]);
  assert.deepEqual(Array.from(splitQkv(w, 2, 2, 1, 2, 'interleaved')), [5, 6, 11, 12]);
  assert.deepEqual(Array.from(splitQkv(w, 2, 2, 1, 1, 'stacked')), [5, 6, 7, 8]);

  const c = await GoldenCase.open(goldenCaseFiles('minimax_h3', 'transformer')[0]!);
  const cfg = parseH3Config(c.config, c.path);
  const native = toNative(await caseWeights(c), cfg);
  await c.close();
  native.set('blocks.0.attn.qkv_proj.rotation', { shape: [2, 2], data: new Float32Array(4) });
  const file = join(tmpDir('extra'), 'x.safetensors');
  await writeSafetensors(file, f32Tensors(native));
  await assert.rejects(openH3Weights(file, { config: cfg }), /native tensors this loader does not know \(blocks\.0\.attn\.qkv_proj\.rotation\)/);
  native.delete('blocks.0.attn.qkv_proj.rotation');
  native.set('rope.inv_freq', { shape: [cfg.ropeFreqDim], data: new Float32Array(cfg.ropeFreqDim).fill(1) });
  await writeSafetensors(file, f32Tensors(native));
  const src = await openH3Weights(file, { config: cfg });
  try {
    assert.equal(src.format, 'native');
    await assert.rejects(src.view.readFloat32('rope.inv_freq'), /rope.inv_freq differs/);
    assert.ok(src.view.has('transformer_blocks.0.attn.to_q.weight'));
  } finally {
    await src.close();
  }
});

test('native format: the real FL2VA index is consumed whole and presents exactly the released diffusers keys', () => {
  const read = (f: string) => JSON.parse(readFileSync(join(goldenDir('minimax_h3', 'configs'), f), 'utf8')) as { weight_map: Record<string, string> };
  const nativeKeys = Object.keys(read('fl2va-transformer-index.json').weight_map);
  const released = Object.keys(read('transformer-index.json').weight_map).sort();
  assert.equal(nativeKeys.length, 535);
  // the released layer counts at tiny widths (only the counts decide which keys exist); shapes by key pattern
  const real = parseH3Config(JSON.parse(readFileSync(join(goldenDir('minimax_h3', 'configs'), 'fl2va-transformer.json'), 'utf8')));
  const c: H3Config = { ...real, hiddenSize: 4, numHeads: 2, headDim: 6, ropeFreqDim: 1, ffnDim: 3, textDim: 5, freqDim: 4, timeEmbedHiddenDim: 4, timeEmbedDim: 2 };
  const shapeOf = (k: string): number[] =>
    k.endsWith('qkv_proj.weight') ? [3 * c.numHeads * c.headDim, c.hiddenSize] : k.endsWith('fc1.weight') ? [2 * c.ffnDim, c.hiddenSize] : k === 'rope.inv_freq' ? [c.ropeFreqDim] : [1];
  const stub: CheckpointLike = {
    path: 'FL2VA index',
    has: (k) => nativeKeys.includes(k),
    keys: () => nativeKeys,
    entry: (k): TensorEntry => ({ name: k, dtype: 'BF16', shape: shapeOf(k), file: 'stub', start: 0, byteLength: 0 }),
    readChunks: async () => {},
    readFloat32: async () => new Float32Array(0),
  };
  const view = nativeView(stub, c, '', '', 'interleaved'); // throws if any native key is left over
  assert.deepEqual(view.keys().filter((k) => k !== 'rope.inv_freq').sort(), released);
});
