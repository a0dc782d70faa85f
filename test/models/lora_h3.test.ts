// LoRAs on MiniMax H3, the video profiles' DiT (issue 46): the module table and the community names (diffusers keys,
// the native / ComfyUI names with the fused qkv_proj and the [gate; value] fc1, kohya underscores), refusals, and
// on the golden transformer case's tiny weights (2 blocks, 1 refiner block): a LoRA on every linear (the blocks'
// adaln_proj too, streamed from host memory through the staging buffer or resident) attached beside
// the loaded model equals the same model loaded with the host-merged weights W + sum s (alpha / r) B A; scale 0 is
// the plain model bit for bit; the same LoRAs give the same output; block offload (the blocks in host memory,
// uploaded in turn) gives the resident result bit for bit with the terms on; the int8 build takes them too.
// No upstream MiniMax H3 PEFT loader is at hand (diffusers has no LoRA loader for MiniMaxH3Transformer3DModel in the
// fetchable snapshot), so the check is against Kiln's own merge, as for Qwen-Image-2.1 (lora_apply.test.ts).
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { krea2LoraModules, planLora, qwenImage21LoraModules } from '../../src/catalog/loras';
import type { Engine } from '../../src/engine/engine';
import { Checkpoint } from '../../src/engine/safetensors';
import { writeSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { LoraError, readLora, type LoraFile } from '../../src/models/common/lora';
import { attachLoras, loraTermsOn, withLoras } from '../../src/models/common/lora-linear';
import { h3LoraNames, h3LoraWeights } from '../../src/models/common/lora-models';
import { rowTimestepPlan } from '../../src/models/minimax_h3/sampler/sampler';
import { parseH3Config, type H3Config } from '../../src/models/minimax_h3/transformer/config';
import { MiniMaxH3Transformer } from '../../src/models/minimax_h3/transformer/transformer';
import { makeRng, testEngine } from '../engine/helpers';
import { goldenCaseFiles, GoldenCase, oneSample, WEIGHT_PREFIX } from './golden';
import { caseSequence } from './minimax_h3-golden';

const CASE = goldenCaseFiles('minimax_h3', 'transformer').find((f) => f.endsWith('t2va.safetensors'))!;

let dir = '';
let n = 0;
after(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});
async function file(tensors: Record<string, WriteTensor>): Promise<string> {
  dir ||= await mkdtemp(join(tmpdir(), 'kiln-lora-h3-'));
  const p = join(dir, `l${n++}.safetensors`);
  await writeSafetensors(p, tensors);
  return p;
}

type Pair = { down: Float32Array; up: Float32Array; r: number; K: number; N: number };
function randPair(rng: ReturnType<typeof makeRng>, N: number, K: number, r: number): Pair {
  return {
    down: Float32Array.from({ length: r * K }, () => (rng.next() - 0.5) / Math.sqrt(K)),
    up: Float32Array.from({ length: N * r }, () => (rng.next() - 0.5) / Math.sqrt(r)),
    r, K, N,
  };
}
const F32 = (shape: number[], data: Float32Array | number[]): WriteTensor => ({ dtype: 'F32', shape, data });

/** A LoRA with a pair on every LoRA-able linear of `cfg`, named in one community style. */
function lora(cfg: H3Config, style: 'diffusers' | 'native' | 'kohya', seed: number, r: number, alpha?: number): Record<string, WriteTensor> {
  const names = h3LoraNames(cfg);
  const rng = makeRng(seed);
  const t: Record<string, WriteTensor> = {};
  const put = (stem: string, p: Pair) => {
    const [d, u] = style === 'kohya' ? ['lora_down.weight', 'lora_up.weight'] : ['lora_A.weight', 'lora_B.weight'];
    t[`${stem}.${d}`] = F32([p.r, p.K], p.down);
    t[`${stem}.${u}`] = F32([p.N, p.r], p.up);
    if (alpha !== undefined) t[`${stem}.alpha`] = F32([], [alpha]);
  };
  const inner = cfg.numHeads * cfg.headDim;
  const native: Record<string, string> = {
    proj_in: 'video_patch_proj', audio_proj_in: 'audio_patch_proj', context_embedder: 'condition_proj',
    'time_embedder.linear_1': 'time_embedder.proj_in', 'time_embedder.linear_2': 'time_embedder.proj_out',
    'norm_out.linear': 'final_layer.adaln_proj.linear', proj_out: 'final_layer.video_out', audio_proj_out: 'final_layer.audio_out',
  };
  for (const [m, [N, K]] of names.modules) {
    const blk = /^(transformer_blocks|token_refiner\.refiner_blocks)\.(\d+)\.(.+)$/.exec(m);
    if (style === 'native' && blk) {
      const theirs = `${blk[1] === 'transformer_blocks' ? 'blocks' : 'token_refiner.blocks'}.${blk[2]}`;
      const tail = blk[3]!;
      if (tail === 'attn.to_q') put(`diffusion_model.${theirs}.attn.qkv_proj`, randPair(rng, 3 * inner, K, r));
      else if (tail === 'ff.net.0.proj') put(`diffusion_model.${theirs}.mlp.fc1`, randPair(rng, N, K, r));
      else if (tail === 'attn.to_out.0') put(`diffusion_model.${theirs}.attn.out_proj`, randPair(rng, N, K, r));
      else if (tail === 'ff.net.2') put(`diffusion_model.${theirs}.mlp.fc2`, randPair(rng, N, K, r));
      else if (tail === 'adaln_proj.linear') put(`diffusion_model.${theirs}.adaln_proj.linear`, randPair(rng, N, K, r));
      continue; // to_k / to_v: in qkv_proj
    }
    if (style === 'native') put(`diffusion_model.${native[m]!}`, randPair(rng, N, K, r));
    else if (style === 'kohya') put(`lora_unet_${m.replace(/\./g, '_')}`, randPair(rng, N, K, r));
    else put(`transformer.${m}`, randPair(rng, N, K, r));
  }
  return t;
}

async function withCase<T>(body: (c: GoldenCase, cfg: H3Config) => Promise<T>): Promise<T> {
  const c = await GoldenCase.open(CASE);
  try {
    return await body(c, parseH3Config(c.config, `${c.path} config`));
  } finally {
    await c.close();
  }
}

/** One forward of the case's inputs: [video velocity, audio velocity]. */
async function forward(e: Engine, c: GoldenCase, model: MiniMaxH3Transformer): Promise<Float32Array[]> {
  const { packed } = await caseSequence(c);
  const plan = rowTimestepPlan(packed, (await c.input('video_t')).data[0]!, (await c.input('audio_t')).data[0]!);
  const rows = async (name: string) => {
    const h = oneSample(await c.input(name), `input.${name}`);
    return e.upload(h.data, h.shape, 'f32');
  };
  const video = await rows('hidden_states');
  const audio = await rows('audio_hidden_states');
  const textIn = await c.input('encoder_hidden_states');
  const text32 = e.upload(textIn.data, textIn.shape, 'f32');
  const sequence = model.prepare(packed);
  try {
    const text = model.encodeText(text32);
    const adaln = model.adaln(plan.timesteps);
    const out = model.forward({ video, audio, text, sequence, adaln, timestepIndices: plan.indices });
    adaln.free();
    text.free();
    const got = [await e.read(out.video), await e.read(out.audio)];
    out.video.free();
    out.audio.free();
    return got;
  } finally {
    for (const t of [video, audio, text32]) t.free();
    sequence.free();
  }
}

const same = (a: Float32Array[], b: Float32Array[], what: string) => a.forEach((x, i) => assert.deepEqual(x, b[i], what));
const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);
const maxAbs = (a: Float32Array) => a.reduce((m, v) => Math.max(m, Math.abs(v)), 0);

describe('MiniMax H3 LoRA names', () => {
  test('each key style maps onto Kiln\'s modules: fused qkv_proj split, fc1 halves swapped, kohya underscores; refusals', async () => {
    await withCase(async (_c, cfg) => {
      const names = h3LoraNames(cfg);
      const inner = cfg.numHeads * cfg.headDim;
      const F = cfg.ffnDim;
      const linears = names.modules.size;
      assert.equal(linears, 8 + 6 * (cfg.numLayers + cfg.numRefinerLayers) + cfg.numLayers);
      for (const style of ['diffusers', 'native', 'kohya'] as const) {
        const f = await readLora(await file(lora(cfg, style, 1, 2, style === 'kohya' ? 1 : undefined)), names);
        assert.equal(f.pairs.size, linears, style);
        assert.equal(f.style, style === 'kohya' ? 'kohya' : 'peft');
        if (style === 'kohya') for (const p of f.pairs.values()) assert.equal(p.factor, 0.5);
      }
      // the fused native pairs: to_q / to_k / to_v share qkv_proj's down and take its stacked row thirds; fc1's up
      // [gate; value] becomes ff.net.0.proj's [value; gate]
      const raw = lora(cfg, 'native', 2, 3);
      const f = await readLora(await file(raw), names);
      const qkvUp = raw['diffusion_model.blocks.1.attn.qkv_proj.lora_B.weight']!.data as Float32Array;
      const qkvDown = raw['diffusion_model.blocks.1.attn.qkv_proj.lora_A.weight']!.data as Float32Array;
      ['to_q', 'to_k', 'to_v'].forEach((m, i) => {
        const p = f.pairs.get(`transformer_blocks.1.attn.${m}`)!;
        assert.deepEqual(p.up, qkvUp.slice(i * inner * 3, (i + 1) * inner * 3), m);
        assert.deepEqual(p.down, qkvDown, m);
      });
      const fc1 = raw['diffusion_model.token_refiner.blocks.0.mlp.fc1.lora_B.weight']!.data as Float32Array;
      const proj = f.pairs.get('token_refiner.refiner_blocks.0.ff.net.0.proj')!;
      assert.deepEqual(proj.up.slice(0, F * 3), fc1.slice(F * 3), 'value half first');
      assert.deepEqual(proj.up.slice(F * 3), fc1.slice(0, F * 3), 'gate half second');
      assert.equal(f.pairs.get('context_embedder')!.source, 'diffusion_model.condition_proj');
      // kohya names of the native and fused stems resolve too
      const k = await readLora(await file({
        'lora_unet_blocks_0_attn_qkv_proj.lora_down.weight': F32([2, cfg.hiddenSize], new Float32Array(2 * cfg.hiddenSize)),
        'lora_unet_blocks_0_attn_qkv_proj.lora_up.weight': F32([3 * inner, 2], new Float32Array(6 * inner)),
        'lora_transformer_final_layer_video_out.lora_down.weight': F32([2, cfg.hiddenSize], new Float32Array(2 * cfg.hiddenSize)),
        'lora_transformer_final_layer_video_out.lora_up.weight': F32([names.modules.get('proj_out')![0], 2], new Float32Array(2 * names.modules.get('proj_out')![0])),
      }), names);
      assert.deepEqual([...k.pairs.keys()].sort(), ['proj_out', 'transformer_blocks.0.attn.to_k', 'transformer_blocks.0.attn.to_q', 'transformer_blocks.0.attn.to_v']);
      // refused, by name
      const refused = async (t: Record<string, WriteTensor>, re: RegExp) => {
        const p = await file(t);
        await assert.rejects(readLora(p, names, [krea2LoraModules(KREA2_DIMS), qwenImage21LoraModules(QWEN_DIMS)]), (err: Error) => err instanceof LoraError && re.test(err.message));
      };
      const pair = (stem: string, N: number, K: number) => ({ [`${stem}.lora_A.weight`]: F32([1, K], new Float32Array(K)), [`${stem}.lora_B.weight`]: F32([N, 1], new Float32Array(N)) });
      await refused(pair('transformer.transformer_blocks.0.attn.to_q', inner + 1, cfg.hiddenSize), /a LoRA for another size or model/);
      await refused(pair(`blocks.${cfg.numLayers}.attn.qkv_proj`, 3 * inner, cfg.hiddenSize), /none of its 1 modules is a MiniMax H3 linear/);
      await refused(pair('diffusion_model.blocks.0.attn.wq', 8, 8), /they are Krea 2 modules, a LoRA for another model/);
      await refused({ ...pair('blocks.0.attn.qkv_proj', 3 * inner, cfg.hiddenSize), ...pair('transformer_blocks.0.attn.to_k', inner, cfg.hiddenSize) }, /two pairs for MiniMax H3's transformer_blocks.0.attn.to_k/);
      // an H3 LoRA on an image model: refused by the same rules
      const h3File = lora(cfg, 'native', 3, 2);
      const shapes = new Map(Object.entries(h3File).map(([k, v]) => [k, v.shape]));
      const onKrea = planLora('x', shapes, krea2LoraModules(KREA2_DIMS), [names]);
      assert.ok('problem' in onKrea && /they are MiniMax H3 modules, a LoRA for another model/.test(onKrea.problem), JSON.stringify(onKrea));
      const onQwen = planLora('x', shapes, qwenImage21LoraModules(QWEN_DIMS), [names]);
      assert.ok('problem' in onQwen && /MiniMax H3 modules, a LoRA for another model/.test(onQwen.problem), JSON.stringify(onQwen));
    });
  });
});

const KREA2_DIMS = { features: 64, headDim: 16, tokenDim: 64, tdim: 32, txtdim: 32, txtlayers: 2, layers: 2, heads: 4, kvheads: 2, mlpDim: 128, txtheads: 2, txtkvheads: 1, txtHeadDim: 16, txtMlpDim: 64, fusionBlocks: 1 };
const QWEN_DIMS = { dim: 64, mlpRatio: 4, contextInDim: 32, inChannels: 64, outChannels: 64, numLayers: 2 };

describe('MiniMax H3 with LoRAs attached (golden transformer case)', () => {
  test('f32: every linear in three key styles equals the host-merged model; scale 0 and detach give the plain model bit for bit', async () => {
    const e = await testEngine();
    await withCase(async (c, cfg) => {
      const names = h3LoraNames(cfg);
      const a = await readLora(await file(lora(cfg, 'diffusers', 11, 2)), names);
      const b = await readLora(await file(lora(cfg, 'native', 12, 3)), names);
      const k = await readLora(await file(lora(cfg, 'kohya', 13, 4, 2)), names);
      const uses = [{ file: a, scale: 0.8 }, { file: b, scale: -0.6 }, { file: k, scale: 1.5 }];
      const model = await MiniMaxH3Transformer.load(e, c.ckpt, cfg, { dtype: 'f32', prefix: WEIGHT_PREFIX });
      let hooked: Float32Array[];
      let plain: Float32Array[];
      try {
        plain = await forward(e, c, model);
        const weights = h3LoraWeights(model);
        hooked = await withLoras(e, weights, uses, 'f32', () => forward(e, c, model));
        assert.equal([...weights.values()].reduce((s, w) => s + loraTermsOn(w), 0), 0, 'detached after');
        same(await forward(e, c, model), plain, 'the model after detach');
        same(await withLoras(e, weights, uses.map((u) => ({ ...u, scale: 0 })), 'f32', () => forward(e, c, model)), plain, 'every LoRA at scale 0');
        same(await withLoras(e, weights, uses, 'f32', () => forward(e, c, model)), hooked, 'the same LoRAs again');
        const one = await withLoras(e, weights, [uses[0]!], 'f32', () => forward(e, c, model));
        assert.ok(maxDiff(one[0]!, plain[0]!) > 1e-3, 'one LoRA changes the video velocity');
        assert.ok(maxDiff(one[0]!, hooked[0]!) > 1e-3, 'three LoRAs differ from one');
        // a failing run still detaches
        await assert.rejects(withLoras(e, weights, uses, 'f32', async () => { throw new Error('job failed'); }), /job failed/);
        assert.equal([...weights.values()].reduce((s, w) => s + loraTermsOn(w), 0), 0, 'detached after a failure');
      } finally {
        model.free();
      }
      // the same model with W + sum s (alpha / r) B A merged on the host
      const merged: Record<string, WriteTensor> = {};
      for (const key of c.ckpt.keys()) {
        const data = await c.ckpt.readFloat32(key);
        const module = key.startsWith(WEIGHT_PREFIX) && key.endsWith('.weight') ? key.slice(WEIGHT_PREFIX.length, -'.weight'.length) : '';
        for (const { file: f, scale } of uses) {
          const p = f.pairs.get(module);
          if (!p) continue;
          const K = p.down.length / p.rank;
          for (let i = 0; i < data.length / K; i++) for (let j = 0; j < p.rank; j++) {
            const s = p.up[i * p.rank + j]! * scale * p.factor;
            for (let q = 0; q < K; q++) data[i * K + q]! += s * p.down[j * K + q]!;
          }
        }
        merged[key] = F32([...c.ckpt.entry(key).shape], data);
      }
      const ckpt = await Checkpoint.open(await file(merged));
      const mm = await MiniMaxH3Transformer.load(e, ckpt, cfg, { dtype: 'f32', prefix: WEIGHT_PREFIX });
      try {
        const want = await forward(e, c, mm);
        want.forEach((w, i) => {
          const d = maxDiff(hooked[i]!, w);
          const scale = maxAbs(w);
          assert.ok(d <= 2e-4 * Math.max(1, scale), `${i ? 'audio' : 'video'}: hooked vs merged max |diff| ${d} (max |merged| ${scale})`);
          assert.ok(maxDiff(w, plain[i]!) > 100 * d, `${i ? 'audio' : 'video'}: the LoRAs move the output well beyond the hook's rounding`);
        });
      } finally {
        mm.free();
        await ckpt.close();
      }
    });
  });

  test('f16 with block offload gives the resident result bit for bit with the terms on; int8 keeps its GEMM and takes f16 terms; adaln_proj resident or streamed', async () => {
    const e = await testEngine();
    await withCase(async (c, cfg) => {
      const names = h3LoraNames(cfg);
      const uses = [{ file: await readLora(await file(lora(cfg, 'native', 21, 2)), names), scale: 1 }, { file: await readLora(await file(lora(cfg, 'kohya', 22, 2, 1)), names), scale: -0.5 }];
      for (const int8 of [false, true]) {
        // the blocks' adaln_proj resident on the GPU (f16) or streamed from host memory (int8, the default)
        const model = await MiniMaxH3Transformer.load(e, c.ckpt, cfg, { dtype: 'f16', int8, prefix: WEIGHT_PREFIX, adalnWeights: int8 ? 'host' : 'gpu' });
        try {
          const weights = h3LoraWeights(model);
          const plain = await forward(e, c, model);
          const resident = await withLoras(e, weights, uses, 'f16', () => forward(e, c, model));
          assert.ok(maxDiff(resident[0]!, plain[0]!) > 1e-3, `int8 ${int8}: the LoRAs change the output`);
          await model.offloadBlocks();
          const on = attachLoras(e, weights, uses, 'f16');
          let streamed: Float32Array[];
          try {
            streamed = await forward(e, c, model);
          } finally {
            on.detach();
          }
          assert.ok(model.blockOffload!.uploadedBytes > 0, 'the blocks were streamed');
          same(streamed, resident, `int8 ${int8}: offloaded blocks with LoRA terms`);
          same(await withLoras(e, weights, uses.map((u) => ({ ...u, scale: 0 })), 'f16', () => forward(e, c, model)), plain, `int8 ${int8}: scale 0`);
          model.residentBlocks();
        } finally {
          model.free();
        }
      }
    });
  });
});

export type { LoraFile };
