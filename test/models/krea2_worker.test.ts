// The worker's imgart_turbo entry on weights in the real layout (weights/krea-2.json): WEIGHTS_DIR with the DiT placed
// by hand in Krea-2-Turbo/transformer/, Qwen3-VL-4B-Instruct/ (config, sharded weights with an index, the real Qwen
// tokenizer files whose size and sha256 the manifest pins, the processor config) and Qwen-Image/vae/, holding the
// demo checkpoint's tensors (the text model's embeddings tiled to the real 151936-row vocabulary, the real special
// token ids in its config). The weights check says real, and a job runs through the entry's real branch to a png:
// the component roots and sub-folders the entry resolves are the ones the manifest describes, and the real tokenizer's
// ids (template, vision tokens) reach the model. The same files in a Hugging Face cache (written by @huggingface/hub's
// snapshotDownload from the local hub stand-in) with an empty WEIGHTS_DIR: real too, read in place, and a job runs.
// The DiT as a ComfyUI install keeps it (models/unet/, ComfyUI's model.diffusion_model. key prefix), found through
// COMFYUI_MODELS_DIR and through an extra_model_paths.yaml, beside the other parts in WEIGHTS_DIR: the same picture;
// and as a city96-style Q8_0 GGUF there: found, dequantised on the GPU at load, a job runs.
import assert from 'node:assert/strict';
import { copyFileSync, cpSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { snapshotDownload } from '@huggingface/hub';
import { quantizeQ8 } from './gguf-q8';
import type { EngineHolder } from '../../src/engine/engine';
import { ggufBytes, type GgufWriteTensor } from '../../src/engine/gguf';
import { comfyQwenVlRename, comfyWanVaeRename } from '../../src/engine/comfy-keys';
import { Checkpoint } from '../../src/engine/safetensors';
import { writeSafetensors, writeShardedSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { planDemoKrea2 } from '../../src/models/krea2';
import { checkProfile, comfyFoldersOf } from '../../src/weights';
import { krea2ProfileEntry } from '../../src/worker/profiles/krea2';
import type { ImageTask } from '../../src/worker/protocol';
import { pngBytes, pngSize } from '../api/inputs';
import { testEngine } from '../engine/helpers';
import { startHub } from '../weights/hub-server';
import { repoRoot } from './golden';
import { recordingContext } from './run-context';

const VOCAB = 151936;

describe('imgart_turbo on weights in the real layout', () => {
  let dir: string;
  let weightsDir: string;
  before(async () => {
    const e = await testEngine();
    dir = mkdtempSync(join(tmpdir(), 'krea2-real-'));
    const demo = join(dir, 'demo');
    await (await planDemoKrea2(e)).write(demo);
    weightsDir = join(dir, 'weights');
    // the DiT, placed by hand
    const dit = join(weightsDir, 'Krea-2-Turbo', 'transformer');
    mkdirSync(dit, { recursive: true });
    copyFileSync(join(demo, 'transformer', readdirSync(join(demo, 'transformer'))[0]!), join(dit, 'krea-2-turbo.safetensors'));
    // the VAE folder of Qwen/Qwen-Image
    const vae = join(weightsDir, 'Qwen-Image', 'vae');
    mkdirSync(vae, { recursive: true });
    for (const f of readdirSync(join(demo, 'vae'))) copyFileSync(join(demo, 'vae', f), join(vae, f));
    // Qwen3-VL-4B-Instruct: the real tokenizer files, the demo model with the real vocabulary size and special ids
    const te = join(weightsDir, 'Qwen3-VL-4B-Instruct');
    mkdirSync(te, { recursive: true });
    const fixtures = join(repoRoot(), 'test', 'fixtures', 'tokenizer');
    writeFileSync(join(te, 'vocab.json'), gunzipSync(readFileSync(join(fixtures, 'qwen-vocab.json.gz'))));
    writeFileSync(join(te, 'merges.txt'), gunzipSync(readFileSync(join(fixtures, 'qwen-merges.txt.gz'))));
    copyFileSync(join(fixtures, 'qwen3-vl.tokenizer_config.json'), join(te, 'tokenizer_config.json'));
    copyFileSync(join(demo, 'text_encoder', 'preprocessor_config.json'), join(te, 'preprocessor_config.json'));
    const cfg = JSON.parse(readFileSync(join(demo, 'text_encoder', 'config.json'), 'utf8'));
    Object.assign(cfg, { image_token_id: 151655, video_token_id: 151656, vision_start_token_id: 151652, vision_end_token_id: 151653 });
    Object.assign(cfg.text_config, { vocab_size: VOCAB, bos_token_id: 151643, eos_token_id: 151645 });
    writeFileSync(join(te, 'config.json'), JSON.stringify(cfg));
    const src = await Checkpoint.open(join(demo, 'text_encoder'));
    const tensors: Record<string, WriteTensor> = {};
    try {
      for (const k of src.keys()) {
        const v = await src.readFloat32(k);
        const shape = [...src.entry(k).shape];
        if (k.endsWith('embed_tokens.weight')) {
          const [rows, width] = shape as [number, number];
          const tiled = new Float32Array(VOCAB * width);
          for (let r = 0; r < VOCAB; r++) tiled.set(v.subarray((r % rows) * width, (r % rows + 1) * width), r * width);
          tensors[k] = { dtype: 'F32', shape: [VOCAB, width], data: tiled };
        } else tensors[k] = { dtype: 'F32', shape, data: v };
      }
    } finally {
      await src.close();
    }
    await writeShardedSafetensors(te, tensors, 16 * 2 ** 20, { format: 'pt' }, 'model');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('the weights check says real, and a job with a style reference runs through the real layout to a png', async () => {
    const w = checkProfile('imgart_turbo', weightsDir);
    assert.equal(w.state, 'real', JSON.stringify(w, null, 1).slice(0, 2000));
    const e = await testEngine();
    const holder = { get: async () => e } as unknown as EngineHolder;
    const entry = krea2ProfileEntry('imgart_turbo', { weightsDir, demoWeightsDir: join(dir, 'no-demo') }, holder);
    assert.equal(entry.weights(), 'real');
    assert.match(entry.note!(), /^Krea 2 Turbo, 16-bit weights, /);
    const ref = join(dir, 'ref.png');
    writeFileSync(ref, await pngBytes(96, 64));
    const pipe = entry.create();
    try {
      for (const images of [[], [ref]]) {
        const output = join(dir, `out-${images.length}.png`);
        const task: ImageTask = {
          kind: 'image', id: `t${images.length}`, profile: 'imgart_turbo', images, audios: [], output,
          params: { prompt: 'a lighthouse at dusk', negative: '', seed: 1, steps: 2, cfg: 1, width: 64, height: 48, res: 'custom', mode: 't2i' },
        };
        await pipe.run(task, recordingContext());
        assert.deepEqual(pngSize(readFileSync(output)), { width: 64, height: 48 });
      }
      assert.ok(!readFileSync(join(dir, 'out-0.png')).equals(readFileSync(join(dir, 'out-1.png'))), 'the reference changes the picture');
    } finally {
      await pipe.unload();
    }
  });
  test('the same files in the Hugging Face cache, WEIGHTS_DIR empty: real, read in place, a job runs', async () => {
    // the three repos as the hub serves them, downloaded by the hub's own JS library into a fresh cache
    const hub = await startHub();
    const cache = join(dir, 'hf-hub');
    const repos = { 'Krea-2-Turbo': 'krea/Krea-2-Turbo', 'Qwen3-VL-4B-Instruct': 'Qwen/Qwen3-VL-4B-Instruct', 'Qwen-Image': 'Qwen/Qwen-Image' };
    try {
      for (const [folder, repo] of Object.entries(repos)) {
        const walk = (d: string): string[] => readdirSync(d).flatMap((n) => (statSync(join(d, n)).isDirectory() ? walk(join(d, n)) : [join(d, n)]));
        for (const f of walk(join(weightsDir, folder))) hub.files.set(`${repo}/${relative(join(weightsDir, folder), f)}`, { data: readFileSync(f) });
        await snapshotDownload({ repo, cacheDir: cache, hubUrl: hub.endpoint });
      }
    } finally {
      await hub.close();
    }
    const sizes = () => readdirSync(cache, { recursive: true }).map(String).sort().map((p) => `${p} ${lstatSync(join(cache, p)).mtimeMs}`);
    const before = sizes();
    const emptyWeights = join(dir, 'no-weights');
    mkdirSync(emptyWeights);
    const w = checkProfile('imgart_turbo', { weightsDir: emptyWeights, hubCacheDir: cache });
    assert.equal(w.state, 'real', w.variant.problems.join('; '));
    for (const c of Object.values(w.variant.components)) assert.ok(c.place === 'hub-cache' && c.root.startsWith(join(cache, 'models--')), c.root);
    const e = await testEngine();
    const holder = { get: async () => e } as unknown as EngineHolder;
    const entry = krea2ProfileEntry('imgart_turbo', { weightsDir: emptyWeights, hubCacheDir: cache, demoWeightsDir: join(dir, 'no-demo-2') }, holder);
    assert.equal(entry.weights(), 'real');
    const png = await lighthouse(entry, join(dir, 'out-cache.png'), 'tc');
    assert.ok(png.equals(readFileSync(join(dir, 'out-0.png'))), 'the same picture as from WEIGHTS_DIR');
    assert.deepEqual(sizes(), before, 'nothing written into the cache');
    assert.deepEqual(readdirSync(emptyWeights), [], 'nothing copied into WEIGHTS_DIR');
  });
  test('the DiT in ComfyUI folders with ComfyUI key names (models/ and extra_model_paths.yaml), the rest in WEIGHTS_DIR: read in place, the same picture', async () => {
    // the same bf16 tensors under ComfyUI's model.diffusion_model. prefix, as ComfyUI saves a diffusion_models/ file
    const comfy = join(dir, 'ComfyUI', 'models');
    const ditSrc = await Checkpoint.open(join(weightsDir, 'Krea-2-Turbo', 'transformer', 'krea-2-turbo.safetensors'));
    const keyed: Record<string, WriteTensor> = {};
    try {
      for (const k of ditSrc.keys()) {
        const en = ditSrc.entry(k);
        const bytes = new Uint8Array(en.byteLength);
        await ditSrc.readChunks(k, 1 << 20, (b, off) => void bytes.set(b, off));
        keyed[`model.diffusion_model.${k}`] = { dtype: en.dtype, shape: [...en.shape], data: bytes };
      }
    } finally {
      await ditSrc.close();
    }
    await writeSafetensors(join(comfy, 'unet', 'krea2', 'krea2_turbo_bf16.safetensors'), keyed); // unet/ is diffusion_models/ to ComfyUI
    // WEIGHTS_DIR with the text encoder and the VAE only
    const partial = join(dir, 'weights-no-dit');
    for (const f of ['Qwen3-VL-4B-Instruct', 'Qwen-Image']) cpSync(join(weightsDir, f), join(partial, f), { recursive: true });
    const listing = () => readdirSync(join(dir, 'ComfyUI'), { recursive: true }).map(String).sort().map((p) => `${p} ${lstatSync(join(dir, 'ComfyUI', p)).mtimeMs}`);
    const before = listing();
    const yaml = join(dir, 'extra_model_paths.yaml');
    writeFileSync(yaml, 'comfyui:\n  base_path: ComfyUI/\n  is_default: true\n  diffusion_models: |\n    models/diffusion_models\n    models/unet\n  vae: models/vae/\n');
    for (const env of [{ COMFYUI_MODELS_DIR: comfy }, { COMFYUI_EXTRA_MODEL_PATHS: yaml }]) {
      const comfyFolders = comfyFoldersOf(env)!;
      const w = checkProfile('imgart_turbo', { weightsDir: partial, comfyFolders });
      assert.equal(w.state, 'real', w.variant.problems.join('; '));
      const t = w.variant.components.transformer!;
      assert.equal(t.place, 'comfyui');
      assert.equal(t.file, join(comfy, 'unet', 'krea2', 'krea2_turbo_bf16.safetensors'));
      assert.equal(w.variant.components.vae!.place, 'weights-dir');
      const e = await testEngine();
      const holder = { get: async () => e } as unknown as EngineHolder;
      const entry = krea2ProfileEntry('imgart_turbo', { weightsDir: partial, comfyFolders, demoWeightsDir: join(dir, 'no-demo-3') }, holder);
      assert.equal(entry.weights(), 'real');
      assert.match(entry.note!(), /krea2_turbo_bf16\.safetensors \(ComfyUI\)/);
      const png = await lighthouse(entry, join(dir, 'out-comfy.png'), 'tcu');
      assert.ok(png.equals(readFileSync(join(dir, 'out-0.png'))), 'the same picture as from WEIGHTS_DIR');
    }
    assert.deepEqual(listing(), before, 'nothing written into the ComfyUI folders');
    assert.deepEqual(readdirSync(partial).sort(), ['Qwen-Image', 'Qwen3-VL-4B-Instruct'], 'nothing copied into WEIGHTS_DIR');
  });
  test('a city96-style GGUF of the DiT (Q8_0 matrices, F32 vectors, its own key names) in ComfyUI\'s diffusion_models/: found, dequantised at load, a job runs', async () => {
    const src = await Checkpoint.open(join(weightsDir, 'Krea-2-Turbo', 'transformer', 'krea-2-turbo.safetensors'));
    const tensors: Record<string, GgufWriteTensor> = {};
    try {
      for (const k of src.keys()) {
        const shape = [...src.entry(k).shape];
        const v = await src.readFloat32(k);
        // as convert.py: 1-D and small tensors stay F32, the rest quantised (rows of whole 32-value blocks)
        if (shape.length < 2 || v.length < 1024 || shape[shape.length - 1]! % 32 !== 0) tensors[k] = { type: 'F32', shape, data: new Uint8Array(v.buffer) };
        else tensors[k] = { type: 'Q8_0', shape, data: quantizeQ8(v) };
      }
    } finally {
      await src.close();
    }
    const comfy = join(dir, 'ComfyUI-gguf', 'models');
    mkdirSync(join(comfy, 'diffusion_models'), { recursive: true });
    writeFileSync(join(comfy, 'diffusion_models', 'krea2_turbo_bf16-Q8_0.gguf'), ggufBytes(tensors, { 'general.architecture': 'krea2' }));
    const partial = join(dir, 'weights-no-dit-gguf');
    for (const f of ['Qwen3-VL-4B-Instruct', 'Qwen-Image']) cpSync(join(weightsDir, f), join(partial, f), { recursive: true });
    const comfyFolders = comfyFoldersOf({ COMFYUI_MODELS_DIR: comfy })!;
    const w = checkProfile('imgart_turbo', { weightsDir: partial, comfyFolders });
    assert.equal(w.state, 'real', w.variant.problems.join('; '));
    assert.equal(w.variant.components.transformer!.file, join(comfy, 'diffusion_models', 'krea2_turbo_bf16-Q8_0.gguf'));
    const e = await testEngine();
    const holder = { get: async () => e } as unknown as EngineHolder;
    const entry = krea2ProfileEntry('imgart_turbo', { weightsDir: partial, comfyFolders, demoWeightsDir: join(dir, 'no-demo-4') }, holder);
    const png = await lighthouse(entry, join(dir, 'out-gguf.png'), 'tgg');
    assert.deepEqual(pngSize(png), { width: 64, height: 48 });
  });
  test('the text encoder and the VAE as ComfyUI keeps them (text_encoders/, vae/: one file each, ComfyUI\'s key names, no config or tokenizer), the DiT in WEIGHTS_DIR: the same tensors, the same picture', async () => {
    const comfy = join(dir, 'ComfyUI-parts', 'models');
    // transformers' Qwen3-VL names -> ComfyUI's (model.language_model.X -> model.X, model.visual.X -> visual.X)
    const teFile = join(comfy, 'text_encoders', 'qwen_3_vl_4b_bf16.safetensors');
    const toComfyTe = (k: string) => k.replace(/^model\.language_model\./, 'model.').replace(/^model\.visual\./, 'visual.');
    // diffusers' AutoencoderKLQwenImage names -> the Wan 2.1 VAE's, as ComfyUI keeps qwen_image_vae.safetensors
    const vaeFile = join(comfy, 'vae', 'qwen_image_vae.safetensors');
    const sub = (s: string) => s.replace(/^norm1\./, 'residual.0.').replace(/^conv1\./, 'residual.2.').replace(/^norm2\./, 'residual.3.').replace(/^conv2\./, 'residual.6.').replace(/^conv_shortcut\./, 'shortcut.');
    const toWan = (k: string): string => {
      let m = /^decoder\.up_blocks\.(\d+)\.resnets\.(\d+)\.(.*)$/.exec(k);
      if (m) return `decoder.upsamples.${Number(m[1]) * 4 + Number(m[2])}.${sub(m[3]!)}`;
      m = /^decoder\.up_blocks\.(\d+)\.upsamplers\.0\.(.*)$/.exec(k);
      if (m) return `decoder.upsamples.${Number(m[1]) * 4 + 3}.${m[2]}`;
      m = /^decoder\.mid_block\.(resnets|attentions)\.(\d)\.(.*)$/.exec(k);
      if (m) return m[1] === 'attentions' ? `decoder.middle.1.${m[3]}` : `decoder.middle.${m[2] === '0' ? 0 : 2}.${sub(m[3]!)}`;
      return k.replace(/^decoder\.conv_in\./, 'decoder.conv1.').replace(/^decoder\.norm_out\./, 'decoder.head.0.').replace(/^decoder\.conv_out\./, 'decoder.head.2.')
        .replace(/^post_quant_conv\./, 'conv2.').replace(/^quant_conv\./, 'conv1.');
    };
    const rewrite = async (from: string, to: string, rename: (k: string) => string) => {
      const src = await Checkpoint.open(from);
      const out: Record<string, WriteTensor> = {};
      try {
        for (const k of src.keys()) {
          const en = src.entry(k);
          const bytes = new Uint8Array(en.byteLength);
          await src.readChunks(k, 1 << 20, (b, off) => void bytes.set(b, off));
          out[rename(k)] = { dtype: en.dtype, shape: [...en.shape], data: bytes };
        }
      } finally {
        await src.close();
      }
      await writeSafetensors(to, out);
    };
    const teDir = join(weightsDir, 'Qwen3-VL-4B-Instruct');
    const vaeSrc = join(weightsDir, 'Qwen-Image', 'vae', 'diffusion_pytorch_model.safetensors');
    await rewrite(teDir, teFile, toComfyTe);
    await rewrite(vaeSrc, vaeFile, toWan);
    const wan = await Checkpoint.open(vaeFile);
    const vaeKeys = wan.keys();
    await wan.close();
    for (const k of ['decoder.upsamples.3.resample.1.weight', 'decoder.middle.0.residual.0.gamma', 'decoder.conv1.weight', 'conv2.weight']) assert.ok(vaeKeys.includes(k), `${k} in ${vaeKeys.join(', ')}`);
    // read back under Kiln's names: every tensor the same as in the WEIGHTS_DIR files
    for (const [file, ref, rename] of [[teFile, teDir, comfyQwenVlRename], [vaeFile, vaeSrc, comfyWanVaeRename]] as const) {
      const opened = await Checkpoint.open(file);
      const ck = opened.renamed(rename(opened.keys(), file));
      const want = await Checkpoint.open(ref);
      try {
        assert.deepEqual(ck.keys().sort(), want.keys().sort(), file);
        for (const k of want.keys()) assert.deepEqual(await ck.readFloat32(k), await want.readFloat32(k), k);
      } finally {
        await ck.close();
        await want.close();
      }
    }
    // WEIGHTS_DIR with the DiT only
    const ditOnly = join(dir, 'weights-dit-only');
    cpSync(join(weightsDir, 'Krea-2-Turbo'), join(ditOnly, 'Krea-2-Turbo'), { recursive: true });
    const listing = () => readdirSync(join(dir, 'ComfyUI-parts'), { recursive: true }).map(String).sort().map((p) => `${p} ${lstatSync(join(dir, 'ComfyUI-parts', p)).mtimeMs}`);
    const before = listing();
    const comfyFolders = comfyFoldersOf({ COMFYUI_MODELS_DIR: comfy })!;
    const w = checkProfile('imgart_turbo', { weightsDir: ditOnly, comfyFolders });
    assert.equal(w.state, 'real', w.variant.problems.join('; '));
    assert.equal(w.variant.components.text_encoder!.file, teFile);
    assert.equal(w.variant.components.vae!.file, vaeFile);
    assert.equal(w.variant.components.transformer!.place, 'weights-dir');
    const e = await testEngine();
    const holder = { get: async () => e } as unknown as EngineHolder;
    const entry = krea2ProfileEntry('imgart_turbo', { weightsDir: ditOnly, comfyFolders, demoWeightsDir: join(dir, 'no-demo-5') }, holder);
    assert.equal(entry.weights(), 'real');
    assert.match(entry.note!(), /qwen_3_vl_4b_bf16\.safetensors \(ComfyUI\), .*qwen_image_vae\.safetensors \(ComfyUI\)/);
    const png = await lighthouse(entry, join(dir, 'out-comfy-parts.png'), 'tcp');
    assert.ok(png.equals(readFileSync(join(dir, 'out-0.png'))), 'the same picture as from WEIGHTS_DIR');
    assert.deepEqual(listing(), before, 'nothing written into the ComfyUI folders');
    assert.deepEqual(readdirSync(ditOnly), ['Krea-2-Turbo'], 'nothing copied into WEIGHTS_DIR');
  });
});

/** The fixed job of these cases (a 64x48 lighthouse, seed 1, 2 steps) on a fresh pipeline of `entry`, written to
 * `output` and read back; the pipeline unloaded after. */
async function lighthouse(entry: ReturnType<typeof krea2ProfileEntry>, output: string, id: string): Promise<Buffer> {
  const pipe = entry.create();
  try {
    const task: ImageTask = {
      kind: 'image', id, profile: 'imgart_turbo', images: [], audios: [], output,
      params: { prompt: 'a lighthouse at dusk', negative: '', seed: 1, steps: 2, cfg: 1, width: 64, height: 48, res: 'custom', mode: 't2i' },
    };
    await pipe.run(task, recordingContext());
    return readFileSync(output);
  } finally {
    await pipe.unload();
  }
}

