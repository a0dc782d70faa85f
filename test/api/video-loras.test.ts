// LoRAs per request on the video profiles through the real app on the random demo MiniMax H3 checkpoint (issue 46,
// docs/loras.md): files made here at the demo DiT's sizes in LORA_DIR, in the diffusers names, the native / ComfyUI
// names (fused qkv_proj, fc1) and kohya's underscored names. /api/config lists them with the video profiles they fit;
// a LoRA changes the video, the same seed and LoRA give the same bytes, scale 0 gives exactly the video without it,
// three compose (multipart /api/jobs, one on the blocks' adaln_proj); the job shows its LoRAs; every bad input (unknown
// name, keys matching no module, an image model's LoRA on a video profile and a video LoRA on an image profile, a scale
// out of range) is a 400 naming the problem, and nothing is queued.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { writeSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { h3LoraNames, krea2LoraNames } from '../../src/models/common/lora-models';
import { parseKrea2Config } from '../../src/models/krea2';
import { DEMO_KREA2_DIT } from '../../src/models/krea2/demo';
import { DEMO_TRANSFORMER_CONFIG } from '../../src/models/minimax_h3/demo';
import { parseH3Config } from '../../src/models/minimax_h3/transformer/config';
import { makeRng } from '../engine/helpers';
import OpenAI from 'openai';
import { auth, startAppOnDemoWeights, TestApp, TOKEN, configOnceServed, jobCount } from './harness';

const cfg = parseH3Config(DEMO_TRANSFORMER_CONFIG, 'demo');
const h3 = h3LoraNames(cfg);
const krea = krea2LoraNames(parseKrea2Config(DEMO_KREA2_DIT));
const VIDEO_PROFILES = ['basevid50', 'basevid50_sol', 'fastvid', 'turbo_int8', 'fastvid_4step_int8', 'fastvid_fast'];

const rnd = makeRng(4647);
const mat = (rows: number, cols: number, amp: number): WriteTensor => ({ dtype: 'F32', shape: [rows, cols], data: Float32Array.from({ length: rows * cols }, () => (rnd.next() - 0.5) * amp) });
function pair(t: Record<string, WriteTensor>, stem: string, N: number, K: number, r: number, kohya = false, alpha?: number): void {
  t[`${stem}.${kohya ? 'lora_down' : 'lora_A'}.weight`] = mat(r, K, 1);
  t[`${stem}.${kohya ? 'lora_up' : 'lora_B'}.weight`] = mat(N, r, 1);
  if (alpha !== undefined) t[`${stem}.alpha`] = { dtype: 'F32', shape: [], data: [alpha] };
}
const shape = (m: string) => h3.modules.get(m)!;

describe('LoRAs per request on the video profiles (random demo weights)', () => {
  let t: TestApp;
  let loraDir = '';
  before(async () => {
    loraDir = mkdtempSync(join(tmpdir(), 'kiln-video-loras-'));
    const inner = cfg.numHeads * cfg.headDim;
    const H = cfg.hiddenSize;
    // diffusers names behind transformer. (PEFT)
    const peft: Record<string, WriteTensor> = {};
    for (const m of ['transformer_blocks.0.attn.to_q', 'transformer_blocks.1.ff.net.2', 'token_refiner.refiner_blocks.0.attn.to_v', 'proj_out', 'context_embedder']) pair(peft, `transformer.${m}`, ...shape(m), 2);
    await writeSafetensors(join(loraDir, 'h3', 'motion.safetensors'), peft);
    // the native / ComfyUI names: fused qkv_proj and fc1, final_layer.video_out
    const native: Record<string, WriteTensor> = {};
    pair(native, 'diffusion_model.blocks.0.attn.qkv_proj', 3 * inner, H, 2);
    pair(native, 'diffusion_model.blocks.1.mlp.fc1', 2 * cfg.ffnDim, H, 2);
    pair(native, 'diffusion_model.final_layer.video_out', ...shape('proj_out'), 2);
    await writeSafetensors(join(loraDir, 'h3_native.safetensors'), native);
    // kohya underscores with alpha
    const kohya: Record<string, WriteTensor> = {};
    pair(kohya, 'lora_unet_blocks_1_attn_qkv_proj', 3 * inner, H, 4, true, 2);
    pair(kohya, 'lora_unet_transformer_blocks_0_ff_net_0_proj', ...shape('transformer_blocks.0.ff.net.0.proj'), 4, true, 2);
    await writeSafetensors(join(loraDir, 'h3_kohya.safetensors'), kohya);
    // one on the blocks' adaln_proj (streamed from host memory to build the AdaLN tables), one with stems no model has
    const adaln: Record<string, WriteTensor> = {};
    pair(adaln, 'diffusion_model.blocks.0.adaln_proj.linear', ...shape('transformer_blocks.0.adaln_proj.linear'), 2);
    await writeSafetensors(join(loraDir, 'h3_adaln.safetensors'), adaln);
    const nowhere: Record<string, WriteTensor> = {};
    pair(nowhere, 'diffusion_model.blocks.0.attn.qkv', 3 * inner, H, 2);
    await writeSafetensors(join(loraDir, 'nowhere.safetensors'), nowhere);
    // Krea 2 (an image model's LoRA)
    const k: Record<string, WriteTensor> = {};
    pair(k, 'diffusion_model.blocks.0.attn.wq', ...krea.modules.get('blocks.0.attn.wq')!, 2);
    await writeSafetensors(join(loraDir, 'krea.safetensors'), k);
    t = await startAppOnDemoWeights({ env: { LORA_DIR: loraDir } });
  });
  after(async () => {
    await t?.close(true);
    rmSync(loraDir, { recursive: true, force: true });
  });

  const video = async (id: string) => {
    const res = await t.http.get(`/api/jobs/${id}/video`).set(auth).buffer(true);
    assert.equal(res.status, 200);
    return res.body as Buffer;
  };
  const job = async (body: object) => {
    const r = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'a red ball', profile: 'fastvid', seconds: 1, res: '352p', steps: 1, seed: 5, wait: true, timeout: 600, ...body });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.status, 'done', JSON.stringify(r.body));
    return r.body;
  };
  const total = () => jobCount(t);
  const config = () => configOnceServed(t, 'fastvid');

  test('/api/config lists the video LoRAs with the video profiles they fit', async () => {
    const c = await config();
    const by = Object.fromEntries(c.loras.map((l: { name: string }) => [l.name, l]));
    for (const n of ['h3/motion', 'h3_native', 'h3_kohya', 'h3_adaln']) assert.deepEqual(by[n].profiles, VIDEO_PROFILES, n);
    assert.deepEqual(by.nowhere.profiles, []);
    assert.ok(!by.krea.profiles.some((p: string) => VIDEO_PROFILES.includes(p)), 'an image LoRA fits no video profile');
    assert.deepEqual(c.video.lora_limits, { max: 6, scale: { min: -4, max: 4, default: 1 } });
  });

  test('a LoRA changes the video; same seed and LoRA, same bytes; scale 0 is the video without it; two compose by multipart', async () => {
    const plain = await video((await job({})).id);
    const withLora = await job({ loras: [{ name: 'h3/motion', scale: 0.8 }] });
    assert.deepEqual(withLora.loras, [{ name: 'h3/motion', scale: 0.8 }], 'the job shows its LoRAs');
    const a = await video(withLora.id);
    assert.ok(!a.equals(plain), 'the LoRA changes the video');
    assert.ok((await video((await job({ loras: [{ name: 'h3/motion', scale: 0.8 }] })).id)).equals(a), 'same seed and LoRA, same bytes');
    const zero = await job({ loras: [{ name: 'h3_native', scale: 0 }] });
    assert.ok((await video(zero.id)).equals(plain), 'scale 0: bit-identical to no LoRA');
    const r = await t.http.post('/api/jobs').set(auth).field('prompt', 'a red ball').field('profile', 'fastvid').field('seconds', '1').field('res', '352p')
      .field('steps', '1').field('seed', '5').field('loras', JSON.stringify([{ name: 'h3_native', scale: 1 }, { name: 'h3_kohya', scale: -0.5 }, { name: 'h3_adaln', scale: 0.3 }]));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.loras, [{ name: 'h3_native', scale: 1 }, { name: 'h3_kohya', scale: -0.5 }, { name: 'h3_adaln', scale: 0.3 }]);
    const done = (await t.http.get(`/api/jobs/${r.body.id}?wait=true&timeout=600`).set(auth)).body;
    assert.equal(done.status, 'done', JSON.stringify(done));
    const two = await video(r.body.id);
    assert.ok(!two.equals(plain) && !two.equals(a), 'three LoRAs (one on the streamed adaln_proj): another video');
    // off again after the jobs: the next job without LoRAs is the plain video
    assert.ok((await video((await job({})).id)).equals(plain), 'a job after LoRA jobs runs the model as loaded');
  });

  test('bad video LoRAs are 400s naming the problem, and nothing is queued', async () => {
    await config();
    const before = await total();
    const bad = async (body: object, re: RegExp, path = '/api/v1/generate') => {
      const base = path === '/api/v1/image' ? { prompt: 'a red ball', size: '256x256' } : { prompt: 'a red ball', seconds: 1, res: '352p' };
      const r = await t.http.post(path).set(auth).send({ ...base, ...body });
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.status} ${JSON.stringify(r.body)}`);
      assert.match(JSON.stringify(r.body), re, JSON.stringify(body));
    };
    await bad({ profile: 'fastvid', loras: [{ name: 'nope' }] }, /no LoRA named \\"nope\\"; known: /);
    await bad({ profile: 'fastvid', loras: [{ name: 'nowhere' }] }, /LoRA nowhere: none of its 1 modules is a MiniMax H3 linear \(diffusion_model\.blocks\.0\.attn\.qkv\)/);
    await bad({ profile: 'fastvid', loras: [{ name: 'krea' }] }, /LoRA krea: .*MiniMax H3 linear.*Krea 2 modules, a LoRA for another model \(profile fastvid\)/);
    await bad({ profile: 'fastvid', loras: [{ name: 'h3/motion', scale: 4.5 }] }, /loras\[0\]\.scale: 4.5 is outside -4 to 4/);
    await bad({ profile: 'fastvid', loras: Array.from({ length: 7 }, (_, i) => ({ name: `l${i}` })) }, /loras: 7 given, profile fastvid takes at most 6/);
    await bad({ profile: 'imgart_turbo', loras: [{ name: 'h3_native' }] }, /LoRA h3_native: .*Krea 2 linear.*MiniMax H3 modules, a LoRA for another model/, '/api/v1/image');
    const form = await t.http.post('/api/jobs').set(auth).field('prompt', 'x').field('profile', 'fastvid').field('loras', '[{"name": ');
    assert.equal(form.status, 400);
    assert.match(JSON.stringify(form.body), /loras: expected a JSON array/);
    const wrong = await t.http.post('/api/jobs').set(auth).field('prompt', 'x').field('profile', 'fastvid').field('loras', '[{"name": "krea"}]');
    assert.equal(wrong.status, 400);
    assert.match(JSON.stringify(wrong.body), /a LoRA for another model/);
    assert.equal(await total(), before, 'nothing was queued');
  });

  test('the OpenAI face takes loras too (an extension, as JSON text in the SDK\'s form); a remix keeps them; a bad one is OpenAI\'s 400', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: `${t.url}/v1`, maxRetries: 0 });
    const create = (p: Record<string, unknown>) => client.videos.create(p as unknown as OpenAI.Videos.VideoCreateParams);
    const v = await create({ prompt: 'a red ball', model: 'fastvid', seconds: '1', size: '608x352', steps: 1, loras: JSON.stringify([{ name: 'h3/motion', scale: 0.5 }]) });
    const job = (await t.http.get(`/api/jobs/${v.id}`).set(auth)).body as { loras?: unknown };
    assert.deepEqual(job.loras, [{ name: 'h3/motion', scale: 0.5 }]);
    const remix = await client.videos.remix(v.id, { prompt: 'a blue ball' });
    assert.deepEqual(((await t.http.get(`/api/jobs/${remix.id}`).set(auth)).body as { loras?: unknown }).loras, [{ name: 'h3/motion', scale: 0.5 }], 'the remix runs with the same LoRAs');
    for (const id of [remix.id, v.id]) await client.videos.delete(id);
    await assert.rejects(create({ prompt: 'x', model: 'fastvid', seconds: '1', loras: JSON.stringify([{ name: 'krea' }]) }), (e: unknown) => e instanceof OpenAI.BadRequestError && /a LoRA for another model/.test(e.message));
  });
});
