// Qwen-Image-2.1's transformer and text encoder as a ComfyUI install keeps them (models/qwen_image21/comfy-parts.ts):
// the random demo checkpoint's transformer written as one diffusion_models/ file in ComfyUI's names
// (model.diffusion_model. prefix, each block's SwiGLU as the fused img_mlp.gate_up = [gate_layer; proj]) and its text
// encoder as one clip/ file (ComfyUI's model./visual. names) load to the same tensors as the diffusers folder's shards,
// with the configs read off their shapes; an fp8 scaled file with per-row scales on the fused weight reads each half
// with its own rows' scales; keys or sizes of no Qwen-Image-2.1 part are refused by name; and the worker's imgmain_bf16
// entry finds both files in place beside the rest in WEIGHTS_DIR and gives the same png as from WEIGHTS_DIR alone, the
// ComfyUI folder unchanged.
import assert from 'node:assert/strict';
import { cpSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ComfyKeysError } from '../../src/engine/comfy-keys';
import { f8e4m3ToF32 } from '../../src/engine/dtype';
import { quantizeQ8 } from './gguf-q8';
import type { EngineHolder } from '../../src/engine/engine';
import { ggufBytes, type GgufWriteTensor } from '../../src/engine/gguf';
import { Checkpoint } from '../../src/engine/safetensors';
import { writeSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { parseQwenImage21Config } from '../../src/models/qwen_image21/config';
import {
  openQwenImage21TextEncoder, openQwenImage21Transformer, qwenImage21TextEncoderConfigOfFile, qwenImage21TransformerConfigOfFile, qwenImage21TransformerConfigOfFileSync,
} from '../../src/models/qwen_image21/comfy-parts';
import { readQwenImage21Configs } from '../../src/models/qwen_image21/checkpoint';
import { TextTokenizer } from '../../src/models/tokenizer';
import { planDemoQwenImage21 } from '../../src/models/qwen_image21/demo';
import { checkProfile, comfyFoldersOf } from '../../src/weights';
import { runCli } from '../../src/weights/cli';
import { imageProfileEntry } from '../../src/worker/profiles/image';
import type { ImageTask } from '../../src/worker/protocol';
import { testEngine } from '../engine/helpers';
import { recordingContext } from './run-context';

const P = 'model.diffusion_model.';

/** Every tensor of a checkpoint as its stored bytes. */
async function rawTensors(ck: Checkpoint): Promise<Record<string, WriteTensor>> {
  const out: Record<string, WriteTensor> = {};
  for (const k of ck.keys()) {
    const en = ck.entry(k);
    const bytes = new Uint8Array(en.byteLength);
    await ck.readChunks(k, 1 << 20, (b, off) => void bytes.set(b, off));
    out[k] = { dtype: en.dtype, shape: [...en.shape], data: bytes };
  }
  return out;
}

/** The transformer's tensors in ComfyUI's layout: prefixed, gate_layer and proj fused into gate_up (rows stacked). */
function comfyLayout(t: Record<string, WriteTensor>): Record<string, WriteTensor> {
  const out: Record<string, WriteTensor> = {};
  for (const [k, v] of Object.entries(t)) {
    const m = /^(transformer_blocks\.\d+\.img_mlp\.)(gate_layer|proj)\.weight$/.exec(k);
    if (!m) out[P + k] = v;
    else if (m[2] === 'gate_layer') {
      const [gate, up] = [v.data as Uint8Array, t[`${m[1]}proj.weight`]!.data as Uint8Array]; // rawTensors' bytes
      const data = new Uint8Array(gate.byteLength + up.byteLength);
      data.set(gate, 0);
      data.set(up, gate.byteLength);
      out[`${P}${m[1]}gate_up.weight`] = { dtype: v.dtype, shape: [v.shape[0]! * 2, ...v.shape.slice(1)], data };
    }
  }
  return out;
}

function task(id: string, output: string): ImageTask {
  return {
    kind: 'image', id, profile: 'imgmain_bf16', images: [], audios: [], output,
    params: { prompt: 'a red circle', negative: '', seed: 3, steps: 2, cfg: 1, width: 64, height: 64, res: 'custom', mode: 't2i' },
  };
}

describe('Qwen-Image-2.1 transformer from a ComfyUI diffusion_models file', () => {
  let dir: string;
  let weightsDir: string;
  let comfyFile: string;
  let comfyText: string;
  before(async () => {
    const e = await testEngine();
    dir = mkdtempSync(join(tmpdir(), 'qi21-comfy-'));
    weightsDir = join(dir, 'weights');
    await (await planDemoQwenImage21(e)).write(join(weightsDir, 'Qwen-Image-2.1'));
    const src = await Checkpoint.open(join(weightsDir, 'Qwen-Image-2.1', 'transformer', 'diffusion_pytorch_model.safetensors.index.json'));
    try {
      comfyFile = join(dir, 'ComfyUI', 'models', 'diffusion_models', 'qwen_image_2.1_bf16.safetensors');
      await writeSafetensors(comfyFile, comfyLayout(await rawTensors(src)));
    } finally {
      await src.close();
    }
    // the text encoder as ComfyUI saves a Qwen3-VL: the decoder under model., the vision tower under visual.
    const te = await Checkpoint.open(join(weightsDir, 'Qwen-Image-2.1', 'text_encoder'));
    try {
      const t = await rawTensors(te);
      const comfyNames: Record<string, WriteTensor> = {};
      for (const [k, v] of Object.entries(t)) comfyNames[k.replace(/^model\.language_model\./, 'model.').replace(/^model\.visual\./, 'visual.')] = v;
      assert.ok(Object.keys(comfyNames).some((k) => k.startsWith('visual.')) && Object.keys(comfyNames).some((k) => k.startsWith('model.layers.')));
      comfyText = join(dir, 'ComfyUI', 'models', 'clip', 'qwen_3_vl_8b_bf16.safetensors'); // clip/ is text_encoders/ to ComfyUI
      await writeSafetensors(comfyText, comfyNames);
    } finally {
      await te.close();
    }
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('loads to the same tensors as the diffusers shards, the config read off the shapes', async () => {
    const folder = join(weightsDir, 'Qwen-Image-2.1', 'transformer');
    const a = await openQwenImage21Transformer(folder);
    const b = await openQwenImage21Transformer(comfyFile);
    try {
      assert.deepEqual(b.keys().sort(), a.keys().sort());
      for (const k of a.keys()) {
        assert.deepEqual(b.entry(k).shape, a.entry(k).shape, k);
        assert.deepEqual(await b.readFloat32(k), await a.readFloat32(k), k);
      }
    } finally {
      await a.close();
      await b.close();
    }
    const want = parseQwenImage21Config(JSON.parse(readFileSync(join(folder, 'config.json'), 'utf8')));
    assert.deepEqual(await qwenImage21TransformerConfigOfFile(comfyFile), want);
    assert.deepEqual(qwenImage21TransformerConfigOfFileSync(comfyFile), want);
  });

  test('the text encoder file loads to the same tensors, the config the known layout its shapes show with the tokenizer\'s ids', async () => {
    const folder = join(weightsDir, 'Qwen-Image-2.1', 'text_encoder');
    const a = await openQwenImage21TextEncoder(folder);
    const b = await openQwenImage21TextEncoder(comfyText);
    try {
      assert.deepEqual(b.keys().sort(), a.keys().sort());
      for (const k of a.keys()) assert.deepEqual(await b.readFloat32(k), await a.readFloat32(k), k);
    } finally {
      await a.close();
      await b.close();
    }
    const want = await readQwenImage21Configs(join(weightsDir, 'Qwen-Image-2.1'));
    const tok = await TextTokenizer.fromDir(join(weightsDir, 'Qwen-Image-2.1', 'processor'));
    const got = await qwenImage21TextEncoderConfigOfFile(comfyText, tok);
    assert.deepEqual(got.textEncoder, want.textEncoder);
    assert.deepEqual(got.vision, want.vision);
    // one layer fewer than any known layout: refused, naming the sizes found and expected
    const short = join(dir, 'bad', 'qwen_3_vl_8b_short.safetensors');
    const src = await Checkpoint.open(comfyText);
    try {
      const t = await rawTensors(src);
      await writeSafetensors(short, Object.fromEntries(Object.entries(t).filter(([k]) => !k.startsWith('model.layers.1.'))));
    } finally {
      await src.close();
    }
    await assert.rejects(qwenImage21TextEncoderConfigOfFile(short, tok), (err: Error) => err instanceof ComfyKeysError && /num_hidden_layers 1, .*expected Qwen3-VL-8B .*num_hidden_layers 36.* or Kiln's demo Qwen3-VL \(.*num_hidden_layers 2/.test(err.message));
  });

  test('fp8 scaled: the fused gate_up with per-row scales reads as gate_layer and proj, each row times its own scale', async () => {
    const bytes = Uint8Array.from({ length: 8 * 4 }, (_, i) => (i * 37 + 11) % 120); // finite e4m3 codes
    const scale = Float32Array.from({ length: 8 }, (_, r) => 0.5 + r);
    const file = join(dir, 'fp8', 'qwen_image_2.1_fp8_scaled.safetensors');
    const f32 = (shape: number[], n = shape.reduce((x, y) => x * y, 1)) => ({ dtype: 'F32' as const, shape, data: new Float32Array(n).fill(0.25) });
    await writeSafetensors(file, {
      [`${P}scaled_fp8`]: { dtype: 'F8_E4M3', shape: [0], data: new Uint8Array(0) },
      [`${P}img_in.weight`]: f32([2, 64]),
      [`${P}transformer_blocks.0.attn.to_q.weight`]: f32([2, 2]),
      [`${P}transformer_blocks.0.img_mlp.gate_up.weight`]: { dtype: 'F8_E4M3', shape: [8, 4], data: bytes },
      [`${P}transformer_blocks.0.img_mlp.gate_up.scale_weight`]: { dtype: 'F32', shape: [8], data: scale },
    });
    const ck = await openQwenImage21Transformer(file);
    try {
      assert.ok(!ck.keys().some((k) => k.includes('scale') || k.includes('gate_up')), ck.keys().join(', '));
      const want = (r0: number) => Float32Array.from({ length: 16 }, (_, i) => f8e4m3ToF32(bytes[r0 * 4 + i]!) * scale[r0 + Math.floor(i / 4)]!);
      assert.deepEqual(await ck.readFloat32('transformer_blocks.0.img_mlp.gate_layer.weight'), want(0));
      assert.deepEqual(await ck.readFloat32('transformer_blocks.0.img_mlp.proj.weight'), want(4));
      assert.deepEqual(ck.entry('transformer_blocks.0.img_mlp.proj.weight').shape, [4, 4]);
    } finally {
      await ck.close();
    }
  });

  test('a city96-style Q8_0 GGUF (no prefix, fused gate_up): each half is its rows of the fused tensor, the rest as the file holds it', async () => {
    const src = await Checkpoint.open(comfyFile);
    const tensors: Record<string, GgufWriteTensor> = {};
    try {
      for (const k of src.keys()) {
        const shape = [...src.entry(k).shape];
        const v = await src.readFloat32(k);
        const name = k.slice(P.length);
        if (shape.length < 2 || shape[shape.length - 1]! % 32 !== 0) tensors[name] = { type: 'F32', shape, data: new Uint8Array(v.buffer) };
        else tensors[name] = { type: 'Q8_0', shape, data: quantizeQ8(v) };
      }
    } finally {
      await src.close();
    }
    const file = join(dir, 'gguf', 'qwen_image_2.1-Q8_0.gguf');
    mkdirSync(join(dir, 'gguf'), { recursive: true });
    writeFileSync(file, ggufBytes(tensors, { 'general.architecture': 'qwen_image21' }));
    const raw = await Checkpoint.open(file);
    const ck = await openQwenImage21Transformer(file);
    try {
      const fused = 'transformer_blocks.1.img_mlp.gate_up.weight';
      const whole = await raw.readFloat32(fused);
      const half = whole.length / 2;
      assert.deepEqual(await ck.readFloat32('transformer_blocks.1.img_mlp.gate_layer.weight'), whole.subarray(0, half));
      assert.deepEqual(await ck.readFloat32('transformer_blocks.1.img_mlp.proj.weight'), whole.subarray(half));
      for (const k of raw.keys().filter((n) => !n.includes('gate_up'))) assert.deepEqual(await ck.readFloat32(k), await raw.readFloat32(k), k);
    } finally {
      await raw.close();
      await ck.close();
    }
    assert.deepEqual(await qwenImage21TransformerConfigOfFile(file), await qwenImage21TransformerConfigOfFile(comfyFile));
  });

  test('a file of other keys or sizes is refused naming what was found and what was expected', async () => {
    const src = await Checkpoint.open(comfyFile);
    let tensors: Record<string, WriteTensor>;
    try {
      tensors = await rawTensors(src);
    } finally {
      await src.close();
    }
    const refused = async (name: string, t: Record<string, WriteTensor>, re: RegExp) => {
      const f = join(dir, 'bad', name);
      await writeSafetensors(f, t);
      await assert.rejects(qwenImage21TransformerConfigOfFile(f), (err: Error) => err instanceof ComfyKeysError && re.test(err.message));
    };
    const ctl = { ...tensors, [`${P}control_blocks.0.after_proj.weight`]: tensors[`${P}img_in.weight`]! };
    await refused('control.safetensors', ctl, /control_blocks\.0\.after_proj\.weight/);
    const norm = tensors[`${P}transformer_blocks.0.attn.norm_q.weight`]!;
    await refused('heads.safetensors', { ...tensors, [`${P}transformer_blocks.0.attn.norm_q.weight`]: { ...norm, shape: [16], data: (norm.data as Uint8Array).slice(0, 32) } }, /head dim 16 .*expected 128 \(the released Qwen-Image-2\.1\) or 32/);
    await refused('krea.safetensors', { [`${P}blocks.0.attn.wq.weight`]: tensors[`${P}img_in.weight`]! }, /not a Qwen-Image-2\.1 transformer: expected img_in\.weight/);
  });

  test('the worker finds both files in ComfyUI\'s folders beside the rest in WEIGHTS_DIR: the same png, nothing written', async () => {
    const e = await testEngine();
    const holder = { get: async () => e } as unknown as EngineHolder;
    const full = imageProfileEntry('imgmain_bf16', { weightsDir, demoWeightsDir: join(dir, 'no-demo') }, holder);
    assert.equal(full.weights(), 'real', full.note!());
    const pipe = full.create();
    try {
      await pipe.run(task('a', join(dir, 'out-weights.png')), recordingContext());
    } finally {
      await pipe.unload();
    }
    // WEIGHTS_DIR without transformer/ and text_encoder/
    const partial = join(dir, 'weights-no-dit');
    cpSync(join(weightsDir, 'Qwen-Image-2.1'), join(partial, 'Qwen-Image-2.1'), { recursive: true, filter: (p) => !p.includes('transformer') && !p.includes('text_encoder') });
    const comfyRoot = join(dir, 'ComfyUI');
    const listing = () => readdirSync(comfyRoot, { recursive: true }).map(String).sort().map((p) => `${p} ${lstatSync(join(comfyRoot, p)).mtimeMs}`);
    const before = listing();
    const comfyFolders = comfyFoldersOf({ COMFYUI_MODELS_DIR: join(comfyRoot, 'models') })!;
    const w = checkProfile('imgmain_bf16', { weightsDir: partial, comfyFolders });
    assert.equal(w.state, 'real', w.variant.problems.join('; '));
    assert.equal(w.variant.components.transformer!.place, 'comfyui');
    assert.equal(w.variant.components.transformer!.file, comfyFile);
    assert.equal(w.variant.components.text_encoder!.file, comfyText);
    assert.equal(w.variant.components.vae!.place, 'weights-dir');
    // `weights list` names where each part is: with the rest, each file (ComfyUI); without it, the parts found there
    for (const [wd, want] of [[partial, /imgmain_bf16 +real +diffusers: .*qwen_image_2\.1_bf16\.safetensors \(ComfyUI\)/], [join(dir, 'no-weights'), /imgmain_bf16 +missing [^\n]*\n(?: {30}[^\n]*\n)* {30}found: transformer \S+qwen_image_2\.1_bf16\.safetensors \(ComfyUI\), text_encoder \S+qwen_3_vl_8b_bf16\.safetensors \(ComfyUI\)\n/]] as const) {
      const out: string[] = [];
      const io = { write: (t: string) => void out.push(t) };
      assert.equal(await runCli(['list'], { env: { WEIGHTS_DIR: wd, DATA_DIR: join(dir, 'data'), COMFYUI_MODELS_DIR: join(comfyRoot, 'models'), HF_HUB_CACHE: join(dir, 'no-hub') }, stdout: io, stderr: io }), 0, out.join(''));
      assert.match(out.join(''), want);
    }
    const entry = imageProfileEntry('imgmain_bf16', { weightsDir: partial, comfyFolders, demoWeightsDir: join(dir, 'no-demo-2') }, holder);
    assert.equal(entry.weights(), 'real');
    assert.match(entry.note!(), /qwen_image_2\.1_bf16\.safetensors \(ComfyUI\).*qwen_3_vl_8b_bf16\.safetensors \(ComfyUI\)/);
    assert.ok(entry.lora!(), 'the LoRA model of the file, from its header');
    const pipe2 = entry.create();
    try {
      await pipe2.run(task('b', join(dir, 'out-comfy.png')), recordingContext());
    } finally {
      await pipe2.unload();
    }
    assert.ok(readFileSync(join(dir, 'out-comfy.png')).equals(readFileSync(join(dir, 'out-weights.png'))), 'the same picture as from WEIGHTS_DIR');
    assert.deepEqual(listing(), before, 'nothing written into the ComfyUI folder');
    assert.deepEqual(readdirSync(join(partial, 'Qwen-Image-2.1')).sort(), ['model_index.json', 'processor', 'scheduler', 'vae'], 'nothing copied into WEIGHTS_DIR');
  });
});
