// LoRAs per request through the real app on the demo checkpoints (issue 46, docs/loras.md): files made here in both key
// styles with the models' own module names at the demo sizes, in LORA_DIR. /api/config lists them with the profiles
// they fit; a LoRA changes the picture and the same seed and LoRA give the same bytes; scale 0 gives exactly the
// picture without it; two at once run; JSON, multipart and the OpenAI face carry the field; the job shows the LoRAs
// and keeps them across a restart; every bad input is a 400 that names the problem, and nothing is queued.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { writeSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { krea2LoraNames, qwenImage21LoraNames } from '../../src/models/common/lora-models';
import { parseKrea2Config } from '../../src/models/krea2';
import { DEMO_KREA2_DIT } from '../../src/models/krea2/demo';
import { parseQwenImage21Config } from '../../src/models/qwen_image21';
import { projectRoot } from '../../src/paths';
import { makeRng } from '../engine/helpers';
import { auth, startApp, startAppOnDemoWeights, TestApp, configOnceServed, jobCount } from './harness';

const krea = krea2LoraNames(parseKrea2Config(DEMO_KREA2_DIT));
const qwen = qwenImage21LoraNames(parseQwenImage21Config(JSON.parse(readFileSync(join(projectRoot(), 'assets/demo/qwen-image-2.1/transformer/config.json'), 'utf8'))));

const rnd = makeRng(4646);
const mat = (rows: number, cols: number, amp: number): WriteTensor => ({ dtype: 'F32', shape: [rows, cols], data: Float32Array.from({ length: rows * cols }, () => (rnd.next() - 0.5) * amp) });
/** A rank-r pair for `stem` fitting Kiln module `module` of `names`, diffusers/PEFT (lora_A/B) or kohya (lora_down/up). */
function pair(t: Record<string, WriteTensor>, names: typeof krea, stem: string, module: string, r: number, kohya = false, alpha?: number): void {
  const [N, K] = names.modules.get(module)!;
  t[`${stem}.${kohya ? 'lora_down' : 'lora_A'}.weight`] = mat(r, K, 1);
  t[`${stem}.${kohya ? 'lora_up' : 'lora_B'}.weight`] = mat(N, r, 1);
  if (alpha !== undefined) t[`${stem}.alpha`] = { dtype: 'F32', shape: [], data: [alpha] };
}

describe('LoRAs per request (demo weights)', () => {
  let t: TestApp;
  let loraDir = '';
  before(async () => {
    loraDir = mkdtempSync(join(tmpdir(), 'kiln-loras-'));
    // Krea 2, diffusers' names behind transformer. (PEFT style)
    const peft: Record<string, WriteTensor> = {};
    pair(peft, krea, 'transformer.transformer_blocks.0.attn.to_q', 'blocks.0.attn.wq', 2);
    pair(peft, krea, 'transformer.transformer_blocks.1.ff.up', 'blocks.1.mlp.up', 2);
    pair(peft, krea, 'transformer.final_layer.linear', 'last.linear', 2);
    await writeSafetensors(join(loraDir, 'krea', 'ink.safetensors'), peft);
    // Krea 2, kohya's underscored native names with alpha
    const kohya: Record<string, WriteTensor> = {};
    pair(kohya, krea, 'lora_unet_blocks_0_mlp_down', 'blocks.0.mlp.down', 4, true, 2);
    pair(kohya, krea, 'lora_unet_txtfusion_layerwise_blocks_0_attn_wq', 'txtfusion.layerwise_blocks.0.attn.wq', 4, true, 2);
    pair(kohya, krea, 'lora_unet_first', 'first', 4, true, 8);
    await writeSafetensors(join(loraDir, 'krea_kohya.safetensors'), kohya);
    // Qwen-Image-2.1, kohya
    const q: Record<string, WriteTensor> = {};
    pair(q, qwen, 'lora_unet_transformer_blocks_0_attn_to_q', 'transformer_blocks.0.attn.to_q', 2, true, 1);
    pair(q, qwen, 'lora_unet_transformer_blocks_1_img_mlp_proj', 'transformer_blocks.1.img_mlp.proj', 2, true, 1);
    pair(q, qwen, 'lora_unet_proj_out', 'proj_out', 2, true, 1);
    await writeSafetensors(join(loraDir, 'qwen_kohya.safetensors'), q);
    // a DoRA-like file (a magnitude vector beside the pair): no profile takes it
    const dora: Record<string, WriteTensor> = {};
    pair(dora, krea, 'diffusion_model.blocks.0.attn.wq', 'blocks.0.attn.wq', 2);
    dora['diffusion_model.blocks.0.attn.wq.lora_magnitude_vector'] = { dtype: 'F32', shape: [64], data: new Float32Array(64) };
    await writeSafetensors(join(loraDir, 'dora.safetensors'), dora);
    mkdirSync(join(loraDir, 'notes'));
    writeFileSync(join(loraDir, 'notes', 'readme.txt'), 'not a LoRA');
    t = await startAppOnDemoWeights({ env: { LORA_DIR: loraDir } });
  });
  after(async () => {
    await t?.close(true);
    rmSync(loraDir, { recursive: true, force: true });
  });

  const image = async (id: string) => {
    const res = await t.http.get(`/api/jobs/${id}/image`).set(auth).buffer(true);
    assert.equal(res.status, 200);
    return res.body as Buffer;
  };
  const job = async (body: object) => {
    const r = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a red circle on a blue background', size: '256x256', steps: 2, seed: 11, wait: true, timeout: 600, ...body });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.status, 'done', JSON.stringify(r.body));
    return r.body;
  };
  const total = () => jobCount(t);
  const config = () => configOnceServed(t, 'imgart_turbo');

  test('/api/config lists every LoRA file by name with the image profiles it fits', async () => {
    const cfg = await config();
    const by = Object.fromEntries(cfg.loras.map((l: { name: string }) => [l.name, l]));
    assert.deepEqual(Object.keys(by), ['dora', 'krea/ink', 'krea_kohya', 'qwen_kohya']);
    assert.deepEqual(by['krea/ink'].profiles, ['imgart_turbo', 'imgart_turbo_int8']);
    assert.deepEqual(by.krea_kohya.profiles, ['imgart_turbo', 'imgart_turbo_int8']);
    assert.deepEqual(by.qwen_kohya.profiles, ['imgmain', 'imgmain_bf16']);
    assert.deepEqual(by.dora.profiles, []);
    assert.ok(by['krea/ink'].bytes > 0);
    assert.deepEqual(cfg.image.lora_limits, { max: 6, scale: { min: -4, max: 4, default: 1 } });
  });

  test('a LoRA changes the picture; the same seed and LoRA give the same bytes; scale 0 is the picture without it', async () => {
    const plain = await image((await job({ profile: 'imgart_turbo' })).id);
    const withInk = await job({ profile: 'imgart_turbo', loras: [{ name: 'krea/ink' }] });
    assert.deepEqual(withInk.loras, [{ name: 'krea/ink', scale: 1 }], 'the job shows its LoRAs, the scale defaulted');
    const a = await image(withInk.id);
    assert.ok(!a.equals(plain), 'the LoRA changes the picture');
    assert.ok((await image((await job({ profile: 'imgart_turbo', loras: [{ name: 'krea/ink', scale: 1 }] })).id)).equals(a), 'same seed and LoRA, same bytes');
    const zero = await job({ profile: 'imgart_turbo', loras: [{ name: 'krea/ink', scale: 0 }] });
    assert.deepEqual(zero.loras, [{ name: 'krea/ink', scale: 0 }]);
    assert.ok((await image(zero.id)).equals(plain), 'scale 0: bit-identical to no LoRA');
    // the LoRAs are off again after the job: the next job without them is the plain picture
    assert.ok((await image((await job({ profile: 'imgart_turbo' })).id)).equals(plain), 'a job after a LoRA job runs the model as loaded');
    // two at once (PEFT and kohya with alpha), also on the int8 profile
    const two = await job({ profile: 'imgart_turbo', loras: [{ name: 'krea/ink', scale: 0.5 }, { name: 'krea_kohya', scale: -1 }] });
    assert.deepEqual(two.loras, [{ name: 'krea/ink', scale: 0.5 }, { name: 'krea_kohya', scale: -1 }]);
    const b = await image(two.id);
    assert.ok(!b.equals(plain) && !b.equals(a));
    const int8 = await job({ profile: 'imgart_turbo_int8', loras: [{ name: 'krea_kohya', scale: 0.7 }] });
    assert.equal(int8.status, 'done');
  });

  test('Qwen-Image-2.1 (imgmain) takes a kohya LoRA; multipart carries the field as JSON text', async () => {
    const plain = await image((await job({ profile: 'imgmain' })).id);
    const r = await t.http.post('/api/images').set(auth).field('prompt', 'a red circle on a blue background').field('profile', 'imgmain')
      .field('size', '256x256').field('steps', '2').field('seed', '11').field('loras', JSON.stringify([{ name: 'qwen_kohya', scale: 1.5 }]));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.loras, [{ name: 'qwen_kohya', scale: 1.5 }]);
    const done = (await t.http.get(`/api/jobs/${r.body.id}?wait=true&timeout=600`).set(auth)).body;
    assert.equal(done.status, 'done', JSON.stringify(done));
    assert.ok(!(await image(r.body.id)).equals(plain), 'the LoRA changes the picture');
  });

  test('bad LoRAs are 400s naming the problem, and nothing is queued', async () => {
    const before = await total();
    const bad = async (body: object, re: RegExp, path = '/api/v1/image') => {
      const r = await t.http.post(path).set(auth).send({ prompt: 'a red circle', size: '256x256', steps: 2, ...body });
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.status} ${JSON.stringify(r.body)}`);
      assert.match(JSON.stringify(r.body), re, JSON.stringify(body));
    };
    await bad({ profile: 'imgart_turbo', loras: [{ name: 'nope' }] }, /no LoRA named \\"nope\\"; known: dora, krea\/ink, krea_kohya, qwen_kohya/);
    await bad({ profile: 'imgart_turbo', loras: [{ name: 'qwen_kohya' }] }, /LoRA qwen_kohya: .*are not a Krea 2 linear.*Qwen-Image-2.1 modules, a LoRA for another model/);
    await bad({ profile: 'imgmain', loras: [{ name: 'krea_kohya' }] }, /LoRA krea_kohya: .*Qwen-Image-2.1 linear.*a LoRA for another model/);
    await bad({ profile: 'imgart_turbo', loras: [{ name: 'dora' }] }, /not low-rank LoRA pairs \(diffusion_model\.blocks\.0\.attn\.wq\.lora_magnitude_vector\)/);
    await bad({ profile: 'imgart_turbo', loras: [{ name: 'krea/ink', scale: 5 }] }, /loras\[0\]\.scale: 5 is outside -4 to 4/);
    await bad({ profile: 'imgart_turbo', loras: [{ name: 'krea/ink', scale: 'x' }] }, /loras\[0\]\.scale/);
    await bad({ profile: 'imgart_turbo', loras: Array.from({ length: 7 }, (_, i) => ({ name: `l${i}` })) }, /loras: 7 given, profile imgart_turbo takes at most 6/);
    await bad({ profile: 'imgart_turbo', loras: [{ name: 'krea/ink' }, { name: 'krea/ink' }] }, /named twice/);
    await bad({ profile: 'imgart_turbo', loras: [{ file: 'krea/ink' }] }, /unknown field file/);
    await bad({ profile: 'fastvid', seconds: 1, loras: [{ name: 'krea/ink' }] }, /LoRA krea\/ink: .*MiniMax H3 linear.*Krea 2 modules, a LoRA for another model \(profile fastvid\)/, '/api/v1/generate');
    const form = await t.http.post('/api/images').set(auth).field('prompt', 'x').field('profile', 'imgart_turbo').field('loras', '[{"name": ');
    assert.equal(form.status, 400);
    assert.match(form.body.detail ?? JSON.stringify(form.body), /loras: expected a JSON array/);
    const video = await t.http.post('/api/jobs').set(auth).field('prompt', 'x').field('profile', 'fastvid').field('loras', '[{"name": "krea/ink"}]');
    assert.equal(video.status, 400);
    assert.match(JSON.stringify(video.body), /a LoRA for another model/);
    const openai = await t.http.post('/v1/images/generations').set(auth).send({ prompt: 'x', model: 'imgart_turbo', loras: [{ name: 'nope' }] });
    assert.equal(openai.status, 400, JSON.stringify(openai.body));
    assert.match(JSON.stringify(openai.body), /no LoRA named/);
    assert.equal(await total(), before, 'nothing was queued');
  });

  test('the OpenAI face takes loras as an extension; a restart keeps a job\'s LoRAs', async () => {
    const r = await t.http.post('/v1/images/generations').set(auth).send({ prompt: 'a red circle', model: 'imgart_turbo', size: '256x256', steps: 2, seed: 3, loras: [{ name: 'krea_kohya', scale: 0.25 }] });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const listed = (await t.http.get('/api/jobs?limit=1').set(auth)).body[0];
    assert.deepEqual(listed.loras, [{ name: 'krea_kohya', scale: 0.25 }]);
    const dataDir = t.dataDir;
    await t.close();
    const again = await startApp({ dataDir, builtinPipelines: false, env: { LORA_DIR: loraDir } });
    try {
      assert.deepEqual((await again.http.get(`/api/jobs/${listed.id}`).set(auth)).body.loras, [{ name: 'krea_kohya', scale: 0.25 }]);
    } finally {
      await again.close();
      t = await startApp({ dataDir, builtinPipelines: false });
    }
  });
});
