// The LoRA library (src/loras/lora-library.ts) without a GPU: where files are found (LORA_DIR first, then ComfyUI's
// models/loras from COMFYUI_MODELS_DIR), their names (path below the folder, no .safetensors), the header read once per
// path, size and mtime, and the fit against the models the workers report (here a scheduler stand-in's summaries).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { loadSettings } from '../../src/config/settings';
import { writeSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { LoraLibrary, readSafetensorsShapes } from '../../src/loras/lora-library';
import { parseKrea2Config } from '../../src/models/krea2';
import { DEMO_KREA2_DIT } from '../../src/models/krea2/demo';
import type { Scheduler } from '../../src/scheduler/scheduler';
import { krea2LoraModel } from '../../src/worker/profiles/loras';
import type { ServedSummary } from '../../src/worker/protocol';

const root = mkdtempSync(join(tmpdir(), 'kiln-lora-lib-'));
after(() => rmSync(root, { recursive: true, force: true }));

const model = krea2LoraModel(parseKrea2Config(DEMO_KREA2_DIT));
const D = DEMO_KREA2_DIT.features;
const pair = (stem: string, r: number, n = D, k = D): Record<string, WriteTensor> => ({
  [`${stem}.lora_A.weight`]: { dtype: 'F32', shape: [r, k], data: new Float32Array(r * k) },
  [`${stem}.lora_B.weight`]: { dtype: 'F32', shape: [n, r], data: new Float32Array(n * r) },
});
const summary = (profile: string, lora = true): ServedSummary => ({
  kind: 'image', profile, interactive: false, weights: 'demo', note: '', accepts: { steps: { min: 1, max: 50 }, images: 0, audios: 0 }, ...(lora ? { lora: model } : {}),
});
const scheduler = (served: ServedSummary[] | undefined) => ({
  profiles: () => served ?? [],
  served: (_kind: string, p: string) => (served === undefined ? undefined : served.find((s) => s.profile === p) ?? null),
}) as unknown as Scheduler;

test('LORA_DIR, then ComfyUI models/loras: names are paths without .safetensors; the first folder wins a name', async () => {
  const loraDir = join(root, 'loras');
  const comfy = join(root, 'comfy', 'models');
  await writeSafetensors(join(loraDir, 'style', 'ink.safetensors'), pair('diffusion_model.blocks.0.attn.wq', 2));
  await writeSafetensors(join(loraDir, 'same.safetensors'), pair('diffusion_model.blocks.0.attn.wk', 2, DEMO_KREA2_DIT.features / 2));
  await writeSafetensors(join(comfy, 'loras', 'same.safetensors'), pair('nothing.here', 2));
  await writeSafetensors(join(comfy, 'loras', 'a', 'b', 'deep.safetensors'), pair('transformer.transformer_blocks.1.attn.to_q', 3));
  writeFileSync(join(comfy, 'loras', 'notes.txt'), 'x');
  mkdirSync(join(comfy, 'loras', '.hidden'));
  writeFileSync(join(comfy, 'loras', '.hidden', 'x.safetensors'), 'x');
  const settings = loadSettings({ LORA_DIR: loraDir, COMFYUI_MODELS_DIR: comfy });
  const lib = new LoraLibrary(settings, scheduler([summary('imgart_turbo'), summary('other', false)]));
  assert.deepEqual(lib.folders(), [loraDir, join(comfy, 'loras')]);
  const files = await lib.files();
  assert.deepEqual(files.map((f) => f.name), ['a/b/deep', 'same', 'style/ink']);
  assert.equal(files.find((f) => f.name === 'same')!.path, join(loraDir, 'same.safetensors'), 'LORA_DIR first');
  const listing = await lib.listing();
  assert.deepEqual(listing.map((l) => [l.name, l.profiles]), [['a/b/deep', ['imgart_turbo']], ['same', ['imgart_turbo']], ['style/ink', ['imgart_turbo']]]);
  // a job's LoRAs: found, checked, carried by path
  assert.deepEqual(await lib.resolve('imgart_turbo', [{ name: 'style/ink', scale: 0.5 }]), [{ name: 'style/ink', scale: 0.5, path: join(loraDir, 'style', 'ink.safetensors') }]);
  await assert.rejects(lib.resolve('imgart_turbo', [{ name: 'ink', scale: 1 }]), /no LoRA named "ink"; known: style\/ink, a\/b\/deep, same \(looked in /);
  await assert.rejects(lib.resolve('other', [{ name: 'style/ink', scale: 1 }]), /profile other takes no LoRAs/);
  // no worker has said what it serves: found by name, matched by the worker when it reads the file
  const early = new LoraLibrary(settings, scheduler(undefined));
  assert.equal((await early.resolve('imgart_turbo', [{ name: 'same', scale: 1 }]))[0]!.path, join(loraDir, 'same.safetensors'));
});

test('a file is judged by its header, read again only when its size or modification time changes', async () => {
  const dir = join(root, 'cache');
  const p = join(dir, 'x.safetensors');
  await writeSafetensors(p, pair('diffusion_model.blocks.0.attn.wq', 2));
  const lib = new LoraLibrary(loadSettings({ LORA_DIR: dir }), scheduler([summary('imgart_turbo')]));
  assert.deepEqual((await lib.listing())[0]!.profiles, ['imgart_turbo']);
  // replaced by a file for another size: the new header is read
  await writeSafetensors(p, pair('diffusion_model.blocks.0.attn.wq', 2, D + 8, D));
  await utimes(p, new Date(), new Date(Date.now() + 5000));
  assert.deepEqual((await lib.listing())[0]!.profiles, []);
  await assert.rejects(lib.resolve('imgart_turbo', [{ name: 'x', scale: 1 }]), /loras\[0\]: LoRA x: diffusion_model\.blocks\.0\.attn\.wq: the pair is \[72, 64\] \(out, in\), Krea 2's blocks\.0\.attn\.wq is \[64, 64\]: a LoRA for another size or model \(profile imgart_turbo\)/);
  writeFileSync(join(dir, 'broken.safetensors'), Buffer.from([1, 2, 3]));
  assert.match((await lib.listing()).find((l) => l.name === 'broken')!.error!, /shorter than a safetensors header/);
  assert.deepEqual([...(await readSafetensorsShapes(p)).entries()], [['diffusion_model.blocks.0.attn.wq.lora_A.weight', [2, D]], ['diffusion_model.blocks.0.attn.wq.lora_B.weight', [D + 8, 2]]]);
});

test('the Hugging Face cache: LoRA files of each repo\'s main snapshot, by repo (one file) or repo/file; model weights left out', async () => {
  const hub = join(root, 'hub');
  const snap = async (repo: string, commit: string, files: Record<string, Record<string, WriteTensor>>) => {
    const folder = join(hub, `models--${repo.replace('/', '--')}`);
    mkdirSync(join(folder, 'refs'), { recursive: true });
    writeFileSync(join(folder, 'refs', 'main'), commit);
    for (const [rel, t] of Object.entries(files)) await writeSafetensors(join(folder, 'snapshots', commit, rel), t);
  };
  await snap('alice/ink-lora', 'c1'.repeat(20), { 'pytorch_lora_weights.safetensors': pair('transformer.transformer_blocks.0.attn.to_q', 2) });
  await snap('bob/two', 'c2'.repeat(20), { 'a.safetensors': pair('diffusion_model.blocks.1.attn.wq', 2), 'sub/b.safetensors': pair('diffusion_model.blocks.0.attn.wq', 4) });
  await snap('carol/model', 'c3'.repeat(20), { 'model.safetensors': { 'blocks.0.attn.wq.weight': { dtype: 'F32', shape: [D, D], data: new Float32Array(D * D) } } });
  mkdirSync(join(hub, 'models--dave--nothing-yet', 'snapshots'), { recursive: true }); // no refs/main
  const lib = new LoraLibrary(loadSettings({ HF_HUB_CACHE: hub }), scheduler([summary('imgart_turbo')]));
  assert.deepEqual((await lib.listing()).map((l) => [l.name, l.profiles]), [['alice/ink-lora', ['imgart_turbo']], ['bob/two/a', ['imgart_turbo']], ['bob/two/sub/b', ['imgart_turbo']]]);
  const [r] = await lib.resolve('imgart_turbo', [{ name: 'alice/ink-lora', scale: 1 }]);
  assert.equal(r!.path, join(hub, 'models--alice--ink-lora', 'snapshots', 'c1'.repeat(20), 'pytorch_lora_weights.safetensors'));
  await assert.rejects(lib.resolve('imgart_turbo', [{ name: 'carol/model/model', scale: 1 }]), /no LoRA named .*the Hugging Face cache/);
});
