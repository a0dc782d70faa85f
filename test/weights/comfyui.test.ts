// ComfyUI's model folders read in place (issue 44): COMFYUI_MODELS_DIR (a ComfyUI models/ folder) and ComfyUI's own
// extra_model_paths.yaml (COMFYUI_EXTRA_MODEL_PATHS), found after WEIGHTS_DIR and the hub cache; a manifest part with
// a `comfyui` entry is then one file of that kind's folders, read with ComfyUI's key names (the model.diffusion_model.
// prefix, fp8 scaled weights with their prefixed scales and marker). Nothing is written into the ComfyUI folders.
// The job itself on a ComfyUI-keyed Krea 2 DiT: test/models/krea2_worker.test.ts.
import assert from 'node:assert/strict';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { comfyDiffusionPrefix } from '../../src/engine/comfy-keys';
import { f8e4m3ToF32 } from '../../src/engine/dtype';
import { Checkpoint, CheckpointError } from '../../src/engine/safetensors';
import { writeSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { runCli } from '../../src/weights/cli';
import { ComfyConfigError, comfyFoldersOf, findComfyFile, parseExtraModelPaths } from '../../src/weights/comfyui';
import { loadCatalog, manifestsDir, parseManifest, WeightsCatalog } from '../../src/weights/manifest';
import { checkProfile, componentPath, weightsNote } from '../../src/weights/state';

test('extra_model_paths.yaml as ComfyUI reads it: sections, base_path, one folder per line, legacy kinds, ~ and $VARS', () => {
  const yaml = [
    '# from ComfyUI\'s extra_model_paths.yaml.example',
    'comfyui:',
    '    base_path: ../ComfyUI/',
    '    is_default: true',
    '    checkpoints: models/checkpoints/',
    '    text_encoders: |',
    '         models/text_encoders/',
    '         models/clip/  ',
    '    diffusion_models: |',
    '                  models/unet',
    '                  models/diffusion_models',
    '    vae: /abs/vae',
    'a111:',
    '    base_path: ~/stable-diffusion-webui/',
    '    vae: models/VAE',
    '    unet: $MODELS/unet',
    'other_ui:',
    'no_base:',
    '    clip: clip-here',
  ].join('\n');
  const f = parseExtraModelPaths(yaml, '/srv/conf/extra_model_paths.yaml', { MODELS: '/data/models' });
  assert.deepEqual(f.text_encoders, ['/srv/ComfyUI/models/text_encoders', '/srv/ComfyUI/models/clip', '/srv/conf/clip-here']);
  assert.deepEqual(f.diffusion_models, ['/srv/ComfyUI/models/unet', '/srv/ComfyUI/models/diffusion_models', '/data/models/unet']);
  assert.deepEqual(f.vae, ['/abs/vae', join(homedir(), 'stable-diffusion-webui/models/VAE')]);
  assert.deepEqual(f.checkpoints, ['/srv/ComfyUI/models/checkpoints']);
  assert.equal(f.unet, undefined, 'unet is diffusion_models');
  assert.equal(f.clip, undefined, 'clip is text_encoders');
  assert.throws(() => parseExtraModelPaths('comfyui: [a, b]', '/x.yaml'), (e: Error) => e instanceof ComfyConfigError && /\/x\.yaml: comfyui: expected base_path/.test(e.message));
  assert.throws(() => parseExtraModelPaths('a:\n  vae: [1]', '/x.yaml'), /\/x\.yaml: a\.vae: expected a folder/);
  assert.throws(() => parseExtraModelPaths('a: b: c', '/x.yaml'), /\/x\.yaml: not valid YAML/);
  assert.deepEqual(parseExtraModelPaths('', '/x.yaml'), {});
});

test('COMFYUI_MODELS_DIR: its kinds, diffusion_models/ before unet/ and text_encoders/ before clip/, subfolders searched', () => {
  const root = mkdtempSync(join(tmpdir(), 'kiln-comfy-dirs-'));
  try {
    for (const d of ['unet', 'diffusion_models', 'clip', 'upscale_models']) mkdirSync(join(root, d));
    const f = comfyFoldersOf({ COMFYUI_MODELS_DIR: root })!;
    assert.deepEqual(f.diffusion_models, [join(root, 'diffusion_models'), join(root, 'unet')]);
    assert.deepEqual(f.text_encoders, [join(root, 'text_encoders'), join(root, 'clip')]);
    assert.deepEqual(f.upscale_models, [join(root, 'upscale_models')]);
    assert.equal(comfyFoldersOf({}), undefined);
    assert.throws(() => comfyFoldersOf({ COMFYUI_EXTRA_MODEL_PATHS: join(root, 'none.yaml') }), /COMFYUI_EXTRA_MODEL_PATHS=.*none\.yaml: cannot read it/);
    mkdirSync(join(root, 'unet', 'krea', 'deeper', 'too-deep'), { recursive: true });
    writeFileSync(join(root, 'unet', 'krea', 'Krea2-Turbo-bf16.safetensors'), 'x');
    writeFileSync(join(root, 'unet', 'krea', 'deeper', 'too-deep', 'krea2_turbo.safetensors'), 'x');
    writeFileSync(join(root, 'unet', '.krea2_turbo_hidden.safetensors'), 'x');
    const found = findComfyFile(f, 'unet', [/(^|\/)[Kk]rea[-_]?2[^/]*[Tt]urbo[^/]*\.safetensors$/]);
    assert.deepEqual(found, { folder: join(root, 'unet'), name: 'krea/Krea2-Turbo-bf16.safetensors', abs: join(root, 'unet', 'krea', 'Krea2-Turbo-bf16.safetensors') });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('the shipped manifests: the Krea 2 DiT and the H3 int8 DiT are found by the names Comfy-Org publishes, nothing else', () => {
  const cat = loadCatalog(manifestsDir());
  const names = (ck: string) => cat.checkpoint(ck).components.transformer!.comfyui!.names.map((r) => new RegExp(r));
  const krea = names('krea-2-turbo');
  assert.equal(cat.checkpoint('krea-2-turbo').components.transformer!.comfyui!.kind, 'diffusion_models');
  for (const n of ['krea2_turbo_fp8_scaled.safetensors', 'krea2_turbo_bf16.safetensors', 'Krea-2-Turbo.safetensors', 'k/krea2_turbo.safetensors', 'krea2_turbo_bf16-Q5_1.gguf']) assert.ok(krea.some((re) => re.test(n)), n);
  for (const n of ['krea2_base.safetensors', 'krea2_raw_bf16-Q8_0.gguf', 'qwen_image_vae.safetensors', 'krea2_turbo.gguf.part', 'krea2_turbo.safetensors/x']) assert.ok(!krea.some((re) => re.test(n)), n);
  const h3 = names('minimax-h3-int8');
  for (const n of ['minimax_h3_fl2va_int8_convrot.safetensors', 'minimax_h3_fl2va_pruned_int8_convrot.safetensors']) assert.ok(h3.some((re) => re.test(n)), n);
  for (const n of ['minimax_h3_fl2va_bf16.safetensors', 'krea2_turbo_int8.safetensors']) assert.ok(!h3.some((re) => re.test(n)), n);
  assert.throws(() => parseManifest('t.json', JSON.stringify({
    model: 'm', checkpoints: { ck: { repo: null, revision: null, revisionNote: 'n', folder: 'F', components: { x: { files: [{ path: 'a' }], comfyui: { kind: 'vae', names: ['(bad'] } } } } },
    profiles: { p: { demo: 'd', variants: [{ name: 'v', uses: [{ checkpoint: 'ck', components: ['x'] }] }] } },
  })), /components\.x\.comfyui\.names\[0\]: not a regular expression/);
});

function catalog(): WeightsCatalog {
  return new WeightsCatalog([parseManifest('test.json', JSON.stringify({
    model: 'tiny test model',
    checkpoints: {
      tiny: {
        repo: 'acme/tiny', revision: 'main', revisionNote: 'test', folder: 'Tiny',
        components: {
          transformer: { files: [], byHand: { dir: 'transformer', suffix: '.safetensors' }, comfyui: { kind: 'diffusion_models', names: ['(^|/)tiny[^/]*\\.safetensors$'] } },
          vae: { files: [{ path: 'vae/config.json' }, { path: 'vae/diffusion_pytorch_model.safetensors' }] },
        },
      },
    },
    profiles: { tiny: { demo: 'tiny-demo', variants: [{ name: 'main', uses: [{ checkpoint: 'tiny', components: ['transformer', 'vae'] }] }] } },
  }))]);
}

describe('a part in ComfyUI\'s folders, the rest in WEIGHTS_DIR', () => {
  let root: string;
  let weightsDir: string;
  let models: string;
  const W = Float32Array.from({ length: 32 }, (_, i) => Math.sin(i) * 3);
  const tensors = (prefix: string): Record<string, WriteTensor> => ({
    [`${prefix}blocks.0.weight`]: { dtype: 'F32', shape: [4, 8], data: W },
    [`${prefix}blocks.0.bias`]: { dtype: 'F32', shape: [4], data: [1, 2, 3, 4] },
    [`${prefix}first.weight`]: { dtype: 'F32', shape: [2, 2], data: [5, 6, 7, 8] },
  });

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'kiln-comfy-'));
    weightsDir = join(root, 'weights');
    models = join(root, 'ComfyUI', 'models');
    mkdirSync(join(weightsDir, 'Tiny', 'vae'), { recursive: true });
    writeFileSync(join(weightsDir, 'Tiny', 'vae', 'config.json'), '{}');
    await writeSafetensors(join(weightsDir, 'Tiny', 'vae', 'diffusion_pytorch_model.safetensors'), { 'decoder.w': { dtype: 'F32', shape: [2], data: [1, 2] } });
    await writeSafetensors(join(weightsDir, 'Tiny', 'transformer', 'own.safetensors'), tensors(''));
    await writeSafetensors(join(models, 'diffusion_models', 'tiny_bf16.safetensors'), tensors('model.diffusion_model.'));
    mkdirSync(join(models, 'vae'));
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  const listing = () => readdirSync(join(root, 'ComfyUI'), { recursive: true }).map(String).sort().map((p) => `${p} ${lstatSync(join(root, 'ComfyUI', p)).mtimeMs}`);

  test('WEIGHTS_DIR first; without its DiT, the ComfyUI file: place, path, note, `weights list`; nothing written there', async () => {
    const before = listing();
    const comfyFolders = comfyFoldersOf({ COMFYUI_MODELS_DIR: models })!;
    const cat = catalog();
    const own = checkProfile('tiny', { weightsDir, comfyFolders }, cat);
    assert.equal(own.variant.components.transformer!.place, 'weights-dir', 'WEIGHTS_DIR comes first');
    rmSync(join(weightsDir, 'Tiny', 'transformer'), { recursive: true });
    const w = checkProfile('tiny', { weightsDir, comfyFolders }, cat);
    assert.equal(w.state, 'real', w.variant.problems.join('; '));
    const t = w.variant.components.transformer!;
    assert.equal(t.place, 'comfyui');
    const file = join(models, 'diffusion_models', 'tiny_bf16.safetensors');
    assert.equal(componentPath(w, 'transformer', 'transformer'), file);
    assert.equal(componentPath(w, 'vae', 'vae'), join(weightsDir, 'Tiny', 'vae'));
    assert.equal(weightsNote(w), `main: ${file} (ComfyUI), ${join(weightsDir, 'Tiny')}`);
    assert.equal(checkProfile('tiny', { weightsDir }, cat).state, 'missing', 'no ComfyUI folders: not looked at');

    const out: string[] = [];
    const code = await runCli(['list'], { env: { WEIGHTS_DIR: weightsDir, DATA_DIR: join(root, 'data'), COMFYUI_MODELS_DIR: models, HF_HUB_CACHE: join(root, 'no-hub') }, stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => out.push(s) }, catalog: cat });
    assert.equal(code, 0, out.join(''));
    assert.match(out.join(''), new RegExp(`ComfyUI folders \\(read in place\\): diffusion_models ${join(models, 'diffusion_models')}, ${join(models, 'unet')}; text_encoders .*; vae ${join(models, 'vae')}`));
    assert.match(out.join(''), new RegExp(`tiny +real +main: ${file} \\(ComfyUI\\), `));
    const bad: string[] = [];
    const badYaml = join(root, 'bad.yaml');
    writeFileSync(badYaml, 'comfyui: [1]');
    assert.equal(await runCli(['list'], { env: { WEIGHTS_DIR: weightsDir, DATA_DIR: join(root, 'data'), COMFYUI_EXTRA_MODEL_PATHS: badYaml }, stdout: { write: (s: string) => bad.push(s) }, stderr: { write: (s: string) => bad.push(s) }, catalog: cat }), 1);
    assert.match(bad.join(''), /bad\.yaml: comfyui: expected base_path and model kinds/);
    const checked: string[] = [];
    const verified = await runCli(['verify', 'tiny'], { env: { WEIGHTS_DIR: weightsDir, DATA_DIR: join(root, 'data'), COMFYUI_MODELS_DIR: models, HF_HUB_CACHE: join(root, 'no-hub') }, stdout: { write: (s: string) => checked.push(s) }, stderr: { write: (s: string) => checked.push(s) }, catalog: cat, intervalMs: 0 });
    assert.equal(verified, 0, checked.join(''));
    assert.match(checked.join(''), new RegExp(`ComfyUI ${file}: size ok \\(by its own header; ComfyUI keeps no hashes\\), no sha256 known \\(now [0-9a-f]{64}\\)`));
    assert.deepEqual(listing(), before, 'nothing written into the ComfyUI folders');
  });

  test('a truncated ComfyUI file is named, not passed over; the loader reads the same tensors under ComfyUI\'s prefix', async () => {
    const comfyFolders = comfyFoldersOf({ COMFYUI_MODELS_DIR: models })!;
    const full = join(models, 'diffusion_models', 'tiny_bf16.safetensors');
    await writeSafetensors(join(root, 'ref.safetensors'), tensors('')); // the same tensors under the loader's own names
    const ck = await Checkpoint.open(full);
    const ref = await Checkpoint.open(join(root, 'ref.safetensors'));
    try {
      const prefix = comfyDiffusionPrefix(ck.keys());
      assert.equal(prefix, 'model.diffusion_model.');
      assert.equal(comfyDiffusionPrefix(ref.keys()), '');
      for (const k of ref.keys()) assert.deepEqual(await ck.readFloat32(prefix + k), await ref.readFloat32(k), k);
    } finally {
      await ck.close();
      await ref.close();
    }
    const cut = join(models, 'unet', 'tiny_cut.safetensors');
    mkdirSync(join(models, 'unet'), { recursive: true });
    writeFileSync(cut, readFileSync(full).subarray(0, 100));
    rmSync(full);
    const w = checkProfile('tiny', { weightsDir, comfyFolders }, catalog());
    assert.equal(w.state, 'missing');
    assert.equal(w.variant.components.transformer!.place, 'comfyui');
    assert.match(w.variant.problems.join('\n'), /ComfyUI diffusion_models\/tiny_cut\.safetensors: 100 bytes, expected \d+/);
  });
});

test('ComfyUI prefixes: the one most keys carry (model.diffusion_model. or diffusion_model.), none for a whole-checkpoint mix', () => {
  assert.equal(comfyDiffusionPrefix(['diffusion_model.a', 'diffusion_model.b', 'x']), 'diffusion_model.');
  assert.equal(comfyDiffusionPrefix(['model.diffusion_model.a', 'model.diffusion_model.b']), 'model.diffusion_model.');
  assert.equal(comfyDiffusionPrefix(['model.diffusion_model.a', 'first_stage_model.b', 'cond_stage_model.c']), '');
  assert.equal(comfyDiffusionPrefix([]), '');
});

test('a ComfyUI fp8 scaled file: scales under the prefix applied, and its prefixed scaled_fp8 marker makes a missing scale an error', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-comfy-fp8-'));
  try {
    const bytes = Uint8Array.from({ length: 12 }, (_, i) => (i * 37 + 5) & 0x77);
    const p = 'model.diffusion_model.';
    await writeSafetensors(join(dir, 'ok.safetensors'), {
      [`${p}scaled_fp8`]: { dtype: 'F8_E4M3', shape: [0], data: new Uint8Array(0) },
      [`${p}blocks.0.attn.wq.weight`]: { dtype: 'F8_E4M3', shape: [3, 4], data: bytes },
      [`${p}blocks.0.attn.wq.scale_weight`]: { dtype: 'F32', shape: [1], data: [0.5] },
    });
    const ck = await Checkpoint.open(join(dir, 'ok.safetensors'));
    try {
      assert.deepEqual(await ck.readFloat32(`${p}blocks.0.attn.wq.weight`), Float32Array.from(bytes, (b) => f8e4m3ToF32(b) * 0.5));
    } finally {
      await ck.close();
    }
    await writeSafetensors(join(dir, 'bad.safetensors'), {
      [`${p}scaled_fp8`]: { dtype: 'F8_E4M3', shape: [0], data: new Uint8Array(0) },
      [`${p}blocks.0.attn.wq.weight`]: { dtype: 'F8_E4M3', shape: [3, 4], data: bytes },
    });
    await assert.rejects(Checkpoint.open(join(dir, 'bad.safetensors')), (e: Error) => e instanceof CheckpointError && /wq\.weight" is F8_E4M3 in a scaled_fp8 file but has no scale/.test(e.message));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
