// Krea 2's prompt encoder against krea-ai/krea-2 encoder.py (Qwen3VLConditioner.forward, tools/golden/krea2_text.py)
// with the real Qwen3-VL-4B tokenizer (test/fixtures/tokenizer) and a tiny Qwen3-VL text model: the template's ids
// (prefix + prompt cut at max_length + 29, the suffix apart), the selected hidden states stacked per token, the
// 34 prefix rows dropped; upstream's padded run against our unpadded one, compared on its real rows. And the style
// references' path (krea2/style_conditioner, tools/golden/krea2_style.py): the images through transformers' Qwen3-VL
// image prompt (tower, spliced tokens, deepstack, 3-D positions) and the taps of the rows from the prompt on.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import type { ComputeDType } from '../../src/models/common/weights';
import { Krea2Conditioner, krea2PromptTokens, KREA2_PREFIX_TOKENS, KREA2_SELECT_LAYERS, KREA2_TEMPLATE_PREFIX } from '../../src/models/krea2';
import { parseQwen3Config } from '../../src/models/qwen3';
import { imagePatches, parseQwen3VlVisionConfig, qwen3VlRopeIndex } from '../../src/models/qwen3_vl_vision';
import { goldenImages, goldenProcessor } from './qwen3_vl_vision-golden';
import { TextTokenizer, type TokenizerConfigJson } from '../../src/models/tokenizer';
import { testEngine } from '../engine/helpers';
import { goldenTests, repoRoot, selectRows, WEIGHT_PREFIX } from './golden';

let tokenizer: TextTokenizer | null = null;
/** Qwen3-VL-4B-Instruct's tokenizer (the shared Qwen BPE files with its tokenizer_config.json). */
function qwen3VlTokenizer(): TextTokenizer {
  const dir = join(repoRoot(), 'test', 'fixtures', 'tokenizer');
  tokenizer ??= TextTokenizer.fromSources({
    vocab: JSON.parse(gunzipSync(readFileSync(join(dir, 'qwen-vocab.json.gz'))).toString('utf8')),
    merges: gunzipSync(readFileSync(join(dir, 'qwen-merges.txt.gz'))).toString('utf8'),
    config: JSON.parse(readFileSync(join(dir, 'qwen3-vl.tokenizer_config.json'), 'utf8')) as TokenizerConfigJson,
  });
  return tokenizer;
}

const fromCodepoints = (cps: number[]): string => String.fromCodePoint(...cps);

for (const dtype of ['f32', 'f16'] as ComputeDType[]) {
  goldenTests('krea2', 'conditioner', async (c) => {
    const e = await testEngine();
    const config = parseQwen3Config(c.config, undefined, `${c.path} config`);
    const selectLayers = (await c.ints('select_layers')).data;
    const maxLength = (await c.ints('max_length')).data[0]!;
    const vocab = (await c.ints('vocab_mod')).data[0]!;
    const prompt = fromCodepoints((await c.ints('prompt_codepoints')).data);
    // the template's tokens: upstream's input_ids without the pads
    const upIds = (await c.output('input_ids')).data;
    const upMask = (await c.output('attention_mask')).data;
    const real = Array.from(upIds).filter((_, i) => upMask[i] !== 0);
    const tokens = krea2PromptTokens(qwen3VlTokenizer(), prompt, maxLength);
    assert.deepEqual(tokens.ids, real, 'template ids');
    assert.equal(tokens.drop, KREA2_PREFIX_TOKENS);
    const enc = await Krea2Conditioner.load(e, c.ckpt, config, { dtype, prefix: WEIGHT_PREFIX + config.keyPrefix, selectLayers, maxLength });
    try {
      // the tiny model has `vocab` embeddings: the generator folded every id into them, so do we
      const taps = enc.encodeIds(tokens.ids.map((id) => id % vocab), tokens.drop);
      try {
        const want = await c.output('hiddens'); // (1, max_length, n, H), pad rows undefined
        const mask = (await c.output('mask')).data;
        const kept = mask.reduce((a, v) => a + v, 0);
        assert.deepEqual(taps.shape, [1, kept, selectLayers.length, config.hiddenSize]);
        const rows = selectRows(want.data, want.shape, mask);
        c.expect(dtype, await e.read(taps), { data: rows.data, shape: [1, kept, selectLayers.length, config.hiddenSize] }, 'hiddens', `taps (${dtype})`);
      } finally {
        taps.free();
      }
    } finally {
      enc.free();
    }
  }, dtype);
}

for (const dtype of ['f32', 'f16'] as ComputeDType[]) {
  goldenTests('krea2', 'style_conditioner', async (c) => {
    const e = await testEngine();
    const config = parseQwen3Config(c.config, undefined, `${c.path} config`);
    const vcfg = parseQwen3VlVisionConfig(c.config, `${c.path} config`);
    const selectLayers = (await c.ints('select_layers')).data;
    const enc = await Krea2Conditioner.load(e, c.ckpt, config, {
      dtype, prefix: WEIGHT_PREFIX + config.keyPrefix, selectLayers, vision: { config: vcfg, prefix: WEIGHT_PREFIX + vcfg.keyPrefix, processor: await goldenProcessor(c) },
    });
    try {
      const ids = (await c.ints('ids')).data;
      const keepFrom = (await c.ints('keep_from')).data[0]!;
      const images = await goldenImages(c);
      const inputs = images.map((im, i) => imagePatches(im, vcfg, enc.vision!.processor, `image ${i}`));
      assert.deepEqual(inputs.flatMap((r) => r.grid), (await c.ints('grid_thw')).data, 'grid_thw');
      const pos = qwen3VlRopeIndex(ids, vcfg.imageTokenId, inputs.map((r) => r.grid), vcfg.spatialMergeSize);
      assert.deepEqual(pos.flatMap((row) => Array.from(row)), Array.from((await c.output('position_ids')).data), 'MRoPE positions');
      // the template as the conditioner gets it: one <|image_pad|> per image, the kept rows from the prompt on
      const collapsed = ids.filter((id, i) => id !== vcfg.imageTokenId || ids[i - 1] !== vcfg.imageTokenId);
      const keep = keepFrom - (ids.filter((id) => id === vcfg.imageTokenId).length - images.length);
      const taps = enc.encodeWithImages(collapsed, keep, inputs);
      try {
        const want = await c.output('taps');
        assert.deepEqual(taps.shape, want.shape);
        c.expect(dtype, await e.read(taps), want, 'taps', `style taps (${dtype})`);
      } finally {
        taps.free();
      }
    } finally {
      enc.free();
    }
  }, dtype);
}

test('the template: 34 prefix tokens on the real tokenizer, a 5-token suffix, prompts cut at 507 tokens', () => {
  const tok = qwen3VlTokenizer();
  // the user turn ends at the 34th token, so the dropped rows are exactly the system and user headers
  assert.equal(tok.encode(KREA2_TEMPLATE_PREFIX).length, KREA2_PREFIX_TOKENS);
  const short = krea2PromptTokens(tok, 'a cat');
  assert.equal(short.ids.length, KREA2_PREFIX_TOKENS + tok.encode('a cat').length + 5);
  assert.equal(short.truncated, 0);
  const long = krea2PromptTokens(tok, 'word '.repeat(600));
  assert.equal(long.ids.length, 512 + KREA2_PREFIX_TOKENS, '541 + 5 tokens: the prompt keeps 507');
  assert.ok(long.truncated > 0);
  assert.deepEqual(long.ids.slice(-5), tok.encode('<|im_end|>\n<|im_start|>assistant\n'));
  assert.deepEqual(KREA2_SELECT_LAYERS, [2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35]);
});

test('the Qwen3-VL-4B-Instruct config parses to the text model the conditioner loads 35 layers of', () => {
  const json = JSON.parse(readFileSync(join(repoRoot(), 'test', 'fixtures', 'golden', 'qwen3', 'configs', 'qwen3-vl-4b-instruct.json'), 'utf8'));
  const cfg = parseQwen3Config(json, 'text');
  assert.equal(cfg.numLayers, 36);
  assert.equal(cfg.hiddenSize, 2560);
  assert.equal(cfg.keyPrefix, 'model.language_model.');
  assert.ok(Math.max(...KREA2_SELECT_LAYERS) < cfg.numLayers, 'every tap is a pre-norm state');
});
