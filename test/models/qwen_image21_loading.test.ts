// Loading Qwen-Image-2.1 from the published diffusers format. The real repo's files were not reachable
// (shared/upstream/README.md "qwen-image-2.1"), so the key names are checked against what is:
//   transformer/   upstream's own state_dict: the golden transformer/t2i fixture holds every parameter of diffusers'
//                  QwenImage21Transformer2DModel (9827e152) at a tiny config; our loader must read exactly those.
//   text_encoder/  the Qwen3-VL index of MiniMax H3's Qwen3-VL-32B (a byte copy in the minimax_h3 configs fixtures:
//                  the same class as the 8B, so the same key names) and the golden text-encoder fixture.
// Then the demo checkpoint (folder structure, Hugging Face shard names, index files) is loaded through the same
// Checkpoint.open path as a real download, and every tensor its index lists is consumed.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Engine } from '../../src/engine/engine';
import { Checkpoint, type TensorEntry } from '../../src/engine/safetensors';
import { parseQwen3Config } from '../../src/models/qwen3/config';
import { QWEN3_VL_IMAGE_PROCESSOR } from '../../src/models/qwen3_vl_vision';
import { QWEN_IMAGE21_SCHEDULER, parseFlowMatchConfig, parseQwenImage21Config } from '../../src/models/qwen_image21';
import { planDemoQwenImage21, recordQwenImage21Keys, type QwenImage21DemoPlan } from '../../src/models/qwen_image21/demo';
import { loadQwenImage21Parts, readQwenImage21Configs, type QwenImage21Configs } from '../../src/models/qwen_image21/checkpoint';
import { testEngine } from '../engine/helpers';
import { GoldenCase, goldenCaseFiles, goldenDir } from './golden';

/** Every key a loader reads from `ckpt` (Checkpoint.entry is where loadTensor and RowTable start). */
function recording(ckpt: Checkpoint): { ckpt: Checkpoint; read: Set<string> } {
  const read = new Set<string>();
  const entry = ckpt.entry.bind(ckpt);
  (ckpt as { entry: (name: string, shape?: readonly number[]) => TensorEntry }).entry = (name, shape) => {
    read.add(name);
    return entry(name, shape);
  };
  return { ckpt, read };
}

/** Layer-indexed keys folded to `layers.*`, so checkpoints of different depths compare by structure. */
const byStructure = (keys: Iterable<string>) =>
  new Set([...keys].map((k) => k.replace(/\.(layers|blocks|deepstack_merger_list)\.\d+\./, '.$1.*.').replace(/^transformer_blocks\.\d+\./, 'transformer_blocks.*.')));
const under = (keys: Iterable<string>, prefix: string) => [...keys].filter((k) => k.startsWith(prefix));

describe('Qwen-Image-2.1 key names against upstream', () => {
  let e: Engine;
  before(async () => (e = await testEngine()));

  test('transformer: the loader reads exactly the parameters of upstream\'s state_dict (golden transformer/t2i)', async (t) => {
    const file = goldenCaseFiles('qwen_image21', 'transformer').find((f) => f.endsWith('t2i.safetensors'));
    if (!file) return t.skip('no golden transformer fixture');
    const c = await GoldenCase.open(file);
    try {
      const cfg: QwenImage21Configs = {
        transformer: parseQwenImage21Config(c.config),
        textEncoder: parseQwen3Config({ model_type: 'qwen3', vocab_size: 8, hidden_size: c.config.context_in_dim, intermediate_size: 8, num_hidden_layers: 1, num_attention_heads: 1 }),
        scheduler: parseFlowMatchConfig(QWEN_IMAGE21_SCHEDULER),
        vision: null,
        processor: QWEN3_VL_IMAGE_PROCESSOR,
      };
      const keys = await recordQwenImage21Keys(e, cfg);
      const upstream = c.names('weight').sort();
      assert.deepEqual([...keys.transformer.keys()].sort(), upstream);
      for (const k of upstream) assert.deepEqual(keys.transformer.get(k), c.shape('weight', k), `shape of ${k}`);
    } finally {
      await c.close();
    }
  });

  test('text encoder: every decoder key of the real Qwen3-VL index is read, but the final norm; vision keys are the index\'s', async () => {
    const plan = await planDemoQwenImage21(e);
    const mine = [...plan.keys.textEncoder.keys()];
    assert.deepEqual(mine.filter((k) => !k.startsWith('model.language_model.') && !k.startsWith('model.visual.')), [], 'only the decoder and the vision tower');
    const ours = byStructure(under(mine, 'model.language_model.'));
    const golden = goldenCaseFiles('qwen_image21', 'text_encoder').find((f) => f.endsWith('t2i.safetensors'));
    if (golden) {
      const c = await GoldenCase.open(golden);
      try {
        const theirs = byStructure(c.names('weight').filter((k) => k !== 'model.language_model.norm.weight'));
        assert.deepEqual([...ours].sort(), [...theirs].sort(), 'golden fixture (upstream Qwen3VLForConditionalGeneration state_dict)');
      } finally {
        await c.close();
      }
    }
    // a byte copy of MiniMax H3's text_encoder/model.safetensors.index.json (configs/README.md)
    const index = join(goldenDir('minimax_h3', 'configs'), 'text-encoder-index.json');
    const real = Object.keys((JSON.parse(readFileSync(index, 'utf8')) as { weight_map: Record<string, string> }).weight_map);
    const decoder = byStructure(real.filter((k) => k.startsWith('model.language_model.') && k !== 'model.language_model.norm.weight'));
    assert.deepEqual([...ours].sort(), [...decoder].sort(), 'Qwen3-VL index (model.language_model.*)');
    // the rest is the LM head (never used) and the vision tower (reference images), read when it is loaded
    const rest = real.filter((k) => !k.startsWith('model.language_model.'));
    assert.ok(rest.every((k) => k === 'lm_head.weight' || k.startsWith('model.visual.')), rest.filter((k) => k !== 'lm_head.weight' && !k.startsWith('model.visual.')).join(', '));
    const vision = under(mine, 'model.visual.');
    if (vision.length) assert.deepEqual([...byStructure(vision)].sort(), [...byStructure(under(real, 'model.visual.'))].sort(), 'Qwen3-VL index (model.visual.*)');
  });
});

describe('Qwen-Image-2.1 demo checkpoint: the real format, loaded like a download', () => {
  let e: Engine;
  let scratch: string;
  let dir: string;
  let plan: QwenImage21DemoPlan;
  before(async () => {
    e = await testEngine();
    scratch = mkdtempSync(join(tmpdir(), 'kiln-qi21-load-'));
    dir = join(scratch, 'Qwen-Image-2.1');
    plan = await planDemoQwenImage21(e);
    await plan.write(dir);
  });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  test('folders, config files and Hugging Face shard names with index files', () => {
    for (const f of ['model_index.json', 'transformer/config.json', 'text_encoder/config.json', 'scheduler/scheduler_config.json', 'processor/vocab.json', 'processor/merges.txt', 'processor/tokenizer_config.json', 'processor/preprocessor_config.json']) {
      assert.ok(existsSync(join(dir, f)), f);
    }
    const shards = (sub: string, base: string) => {
      const files = readdirSync(join(dir, sub)).filter((f) => f.endsWith('.safetensors')).sort();
      const n = String(files.length).padStart(5, '0');
      assert.ok(files.length >= 2, `${sub} is sharded`);
      assert.deepEqual(files, files.map((_, i) => `${base}-${String(i + 1).padStart(5, '0')}-of-${n}.safetensors`));
      const index = JSON.parse(readFileSync(join(dir, sub, `${base}.safetensors.index.json`), 'utf8')) as { metadata: { total_size: number }; weight_map: Record<string, string> };
      assert.deepEqual([...new Set(Object.values(index.weight_map))].sort(), files, 'every shard holds tensors');
      // total_size is the tensors' bytes: each file is 8 + header + data
      const data = files.reduce((a, f) => {
        const buf = readFileSync(join(dir, sub, f));
        return a + statSync(join(dir, sub, f)).size - 8 - Number(buf.readBigUInt64LE(0));
      }, 0);
      assert.equal(index.metadata.total_size, data);
      return index.weight_map;
    };
    assert.deepEqual(Object.keys(shards('transformer', 'diffusion_pytorch_model')).sort(), [...plan.keys.transformer.keys()].sort());
    assert.deepEqual(Object.keys(shards('text_encoder', 'model')).sort(), [...plan.keys.textEncoder.keys()].sort());
  });

  test('loads through Checkpoint.open on the index files; every indexed tensor is consumed; int8 too', async () => {
    const cfg = await readQwenImage21Configs(dir);
    assert.deepEqual(cfg, plan.configs);
    for (const int8 of [false, true]) {
      const tr = recording(await Checkpoint.open(join(dir, 'transformer', 'diffusion_pytorch_model.safetensors.index.json')));
      const te = recording(await Checkpoint.open(join(dir, 'text_encoder')));
      try {
        const before = e.pool.stats().inUseBytes;
        const parts = await loadQwenImage21Parts(e, { transformer: tr.ckpt, textEncoder: te.ckpt }, cfg, { dtype: 'f32', int8 }, null);
        assert.ok(e.pool.stats().inUseBytes > before);
        parts.free();
        assert.equal(e.pool.stats().inUseBytes, before, 'free gives everything back');
        assert.deepEqual([...tr.read].sort(), tr.ckpt.keys().sort(), `transformer (int8 ${int8})`);
        assert.deepEqual([...te.read].sort(), te.ckpt.keys().sort(), `text encoder (int8 ${int8})`);
      } finally {
        await tr.ckpt.close();
        await te.ckpt.close();
      }
    }
  });

  test('a checkpoint of another pipeline class is refused naming the file', async () => {
    const other = join(scratch, 'other');
    await plan.write(other);
    const idx = join(other, 'model_index.json');
    writeFileSync(idx, JSON.stringify({ ...JSON.parse(readFileSync(idx, 'utf8')), _class_name: 'QwenImagePipeline' }));
    await assert.rejects(readQwenImage21Configs(other), /model_index\.json: _class_name "QwenImagePipeline" is not QwenImage21Pipeline/);
  });
});
