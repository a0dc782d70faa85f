// QwenImage21TextEncoder against the diffusers pipeline's prompt encoding (tools/golden/qwen_image21_text.py):
// template string, dropped system turn, pre-final-norm hidden state, and a left-padded batch of two prompts
// (each prompt encoded alone must give upstream's rows); with one and two reference images (cases refs*): the
// placeholder expansion, get_rope_index's 3D positions, the image-row mask and the conditioning through the vision
// tower, spliced embeds and deepstack. Also the tokenizer side of the drop count and the reference template.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseQwen3Config } from '../../src/models/qwen3';
import { parseQwen3VlVisionConfig, qwen3VlRopeIndex } from '../../src/models/qwen3_vl_vision';
import type { ComputeDType } from '../../src/models/common/weights';
import {
  expandImagePads,
  qwenImage21PromptText,
  qwenImage21PromptTokens,
  qwenImage21SystemTurn,
  QwenImage21TextEncoder,
} from '../../src/models/qwen_image21/text-encoder';
import { DEMO_SPECIAL_TOKENS, TextTokenizer, writeDemoTokenizer } from '../../src/models/tokenizer';
import { testEngine } from '../engine/helpers';
import { writeShardedSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { expectClose, GoldenCase, goldenCaseFiles, goldenTests, WEIGHT_PREFIX } from './golden';
import { goldenImages, goldenProcessor } from './qwen3_vl_vision-golden';

const fromCodepoints = (cps: number[]): string => String.fromCodePoint(...cps);

for (const dtype of ['f32', 'f16'] as ComputeDType[]) {
  goldenTests(
    'qwen_image21',
    'text_encoder',
    async (c) => {
      const e = await testEngine();
      const config = parseQwen3Config(c.config, undefined, `${c.path} config`);
      assert.equal(config.keyPrefix, 'model.language_model.');
      const images = await goldenImages(c);
      const vcfg = images.length > 0 ? parseQwen3VlVisionConfig(c.config, `${c.path} config`) : null;
      const vision = vcfg ? { config: vcfg, prefix: WEIGHT_PREFIX + vcfg.keyPrefix, processor: await goldenProcessor(c) } : undefined;
      const enc = await QwenImage21TextEncoder.load(e, c.ckpt, config, { dtype, prefix: WEIGHT_PREFIX + config.keyPrefix, vision });
      try {
        const prompt = fromCodepoints((await c.ints('prompt_codepoints')).data);
        assert.equal(qwenImage21PromptText(prompt, images.length), fromCodepoints((await c.ints('template_codepoints')).data), 'template string');
        const ids = await c.ints('ids');
        const mask = await c.ints('attention_mask');
        const drop = (await c.ints('drop_idx')).data[0]!;
        const want = await c.output('prompt_embeds'); // (B, Lout, H), zero-padded
        const wantMask = await c.output('encoder_attention_mask');
        const [B, L] = ids.shape as [number, number];
        const [, Lout, H] = want.shape as [number, number, number];
        assert.equal(H, enc.hiddenSize);
        const refs = images.map((im, i) => enc.referenceInput(im, `image ${i}`));
        if (vcfg) {
          // the processor's grids, the placeholder expansion, get_rope_index and the image-row mask
          assert.equal(B, 1);
          assert.deepEqual(refs.flatMap((r) => r.grid), (await c.ints('grid_thw')).data, 'grid_thw');
          const counts = refs.map((r) => (r.grid[1] * r.grid[2]) / vcfg.spatialMergeSize ** 2);
          assert.deepEqual(expandImagePads(collapseRuns(ids.data, vcfg.imageTokenId), vcfg.imageTokenId, counts), ids.data, 'expanded ids');
          const pos = qwen3VlRopeIndex(ids.data, vcfg.imageTokenId, refs.map((r) => r.grid), vcfg.spatialMergeSize);
          assert.deepEqual(pos.flatMap((row) => Array.from(row)), Array.from((await c.output('position_ids')).data), 'MRoPE positions');
          const pads = Array.from((await c.output('image_pad_mask')).data, (v) => v !== 0);
          assert.deepEqual(ids.data.slice(drop).map((id) => id === vcfg.imageTokenId), pads, 'image_pad_mask');
          // encodePrompt's wiring (template -> tokens -> mask and latent shapes) with a tokenizer that knows only
          // this template: the fixture's ids stand in for the real tokenizer's (tested on the demo BPE below)
          const template = collapseRuns(ids.data, vcfg.imageTokenId);
          const text = qwenImage21PromptText(prompt, images.length);
          const tok = {
            encode: (t: string) => (t === qwenImage21SystemTurn() ? template.slice(0, drop) : t === text ? template : assert.fail(`unexpected text ${t}`)),
            hasToken: (t: string) => t === '<|image_pad|>',
            tokenId: () => vcfg.imageTokenId,
          } as unknown as TextTokenizer;
          const cond = new QwenImage21TextEncoder(e, enc.model, tok, enc.vision).encodePrompt(prompt, images);
          try {
            assert.deepEqual(cond.imagePadMask, pads, 'encodePrompt imagePadMask');
            assert.deepEqual(cond.referenceShapes, images.map((im) => [1, im.shape[1] / 16, im.shape[2] / 16]));
            c.expect(dtype === 'f16' ? 'f16' : 'f32', await e.read(cond.embeds), { data: want.data, shape: [Lout, H] }, 'prompt_embeds', `${dtype} encodePrompt embeds`);
          } finally {
            cond.embeds.free();
          }
        }
        for (let b = 0; b < B; b++) {
          const real = ids.data.slice(b * L, (b + 1) * L).filter((_, l) => mask.data[b * L + l] !== 0);
          const n = real.length - drop;
          assert.equal(wantMask.data.slice(b * Lout, (b + 1) * Lout).reduce((s, v) => s + v, 0), n, `prompt ${b}: conditioning length`);
          const template = vcfg ? collapseRuns(real, vcfg.imageTokenId) : real;
          const out = enc.encodeIds(template, drop, refs);
          try {
            assert.deepEqual(out.shape, [n, H]);
            const got = await e.read(out);
            const rows = { data: want.data.slice(b * Lout * H, (b * Lout + n) * H), shape: [n, H] };
            c.expect(dtype === 'f16' ? 'f16' : 'f32', got, rows, 'prompt_embeds', `${dtype} prompt ${b} embeds`);
          } finally {
            out.free();
          }
        }
      } finally {
        enc.free();
      }
    },
    dtype,
  );
}

/** The template's ids: each run of image tokens back to one <|image_pad|>. */
function collapseRuns(ids: readonly number[], token: number): number[] {
  return ids.filter((id, i) => id !== token || ids[i - 1] !== token);
}

test('prompt tokens: the system turn is a token prefix and is what gets dropped', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'qi21-tok-'));
  try {
    const info = await writeDemoTokenizer(dir);
    const tok = await TextTokenizer.fromDir(dir);
    const { ids, drop } = qwenImage21PromptTokens(tok, 'The quick brown fox');
    assert.deepEqual(ids, tok.encode(qwenImage21PromptText('The quick brown fox')));
    assert.equal(drop, tok.encode(qwenImage21SystemTurn()).length);
    const { '<|im_start|>': imStart, '<|im_end|>': imEnd } = info.specialTokens;
    assert.equal(ids[0], imStart);
    assert.equal(ids[drop - 2], imEnd, 'the dropped part ends with <|im_end|>\\n');
    assert.equal(ids[drop], imStart, 'the kept part starts with the user turn');
    assert.equal(ids.filter((id) => id === imStart).length, 3);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('reference template: one vision block per image, labelled <imageN>, prompt verbatim after them; empty prompt is " "', async () => {
  assert.equal(
    qwenImage21PromptText('Put Picture 1 on Picture 2', 2),
    `${qwenImage21SystemTurn()}<|im_start|>user\n<image1><|vision_start|><|image_pad|><|vision_end|> <image2><|vision_start|><|image_pad|><|vision_end|>Put Picture 1 on Picture 2<|im_end|>\n<|im_start|>assistant\n`,
  );
  assert.equal(qwenImage21PromptText('x', 0), qwenImage21PromptText('x'));
  assert.equal(qwenImage21PromptText(''), qwenImage21PromptText(' '));
  const dir = await mkdtemp(join(tmpdir(), 'qi21-tok-'));
  try {
    const info = await writeDemoTokenizer(dir, { specialTokens: [...DEMO_SPECIAL_TOKENS, '<|vision_start|>', '<|image_pad|>', '<|vision_end|>'] });
    const tok = await TextTokenizer.fromDir(dir);
    const { ids, drop } = qwenImage21PromptTokens(tok, 'Picture 2 wears the hat of Picture 1', 2);
    const pad = info.specialTokens['<|image_pad|>']!;
    assert.equal(drop, tok.encode(qwenImage21SystemTurn()).length);
    assert.equal(ids.filter((id) => id === pad).length, 2, 'one <|image_pad|> token per reference');
    for (const i of ids.flatMap((id, k) => (id === pad ? [k] : []))) {
      assert.equal(ids[i - 1], info.specialTokens['<|vision_start|>']);
      assert.equal(ids[i + 1], info.specialTokens['<|vision_end|>']);
    }
    assert.deepEqual(expandImagePads(ids, pad, [3, 1]).filter((id) => id === pad).length, 4);
    assert.throws(() => expandImagePads(ids, pad, [3]), /more <\|image_pad\|> tokens in the prompt than the 1 reference images/);
    assert.throws(() => expandImagePads(ids, pad, [3, 1, 2]), /3 reference images but 2/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('fromDir with references: a sharded folder in the repo format (text_encoder/ + processor/) gives the golden conditioning', async () => {
  const file = goldenCaseFiles('qwen_image21', 'text_encoder').find((f) => f.endsWith('refs2.safetensors'));
  assert.ok(file, 'the refs2 golden case');
  const c = await GoldenCase.open(file);
  const dir = await mkdtemp(join(tmpdir(), 'qi21-te-'));
  const e = await testEngine();
  try {
    const tensors: Record<string, WriteTensor> = {};
    for (const n of c.names('weight')) tensors[n] = { dtype: 'F32', shape: c.shape('weight', n), data: (await c.weight(n)).data };
    await writeShardedSafetensors(join(dir, 'text_encoder'), tensors, 150_000);
    await writeFile(join(dir, 'text_encoder', 'config.json'), JSON.stringify(c.config));
    const proc = await goldenProcessor(c);
    await mkdir(join(dir, 'processor'));
    const procJson = { size: { shortest_edge: proc.minPixels, longest_edge: proc.maxPixels }, image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5] };
    await writeFile(join(dir, 'processor', 'preprocessor_config.json'), JSON.stringify(procJson));
    const enc = await QwenImage21TextEncoder.fromDir(e, join(dir, 'text_encoder'), { dtype: 'f32', references: true, processorDir: join(dir, 'processor') });
    try {
      assert.deepEqual(enc.vision?.processor, proc);
      const ids = (await c.ints('ids')).data;
      const drop = (await c.ints('drop_idx')).data[0]!;
      const refs = (await goldenImages(c)).map((im) => enc.referenceInput(im));
      const out = enc.encodeIds(collapseRuns(ids, enc.vision!.model.config.imageTokenId), drop, refs);
      try {
        expectClose(await e.read(out), await c.output('prompt_embeds'), c.tol('f32'), 'fromDir embeds');
      } finally {
        out.free();
      }
      assert.throws(() => enc.encodeIds(collapseRuns(ids, enc.vision!.model.config.imageTokenId), drop), /<\|image_pad\|> tokens but no reference images/);
    } finally {
      enc.free();
    }
    const textOnly = await QwenImage21TextEncoder.fromDir(e, join(dir, 'text_encoder'), { dtype: 'f32' });
    const [image] = await goldenImages(c);
    try {
      assert.equal(textOnly.vision, null, 'no tower without references: true');
      assert.throws(() => textOnly.referenceInput(image!), /without the vision tower/);
    } finally {
      textOnly.free();
    }
  } finally {
    await c.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('encodeIds refuses a drop that leaves no token', async () => {
  const e = await testEngine();
  // the range check comes before the model is touched, so a config-only stand-in is enough
  const enc = new QwenImage21TextEncoder(e, { config: { numLayers: 1, hiddenSize: 4 } } as never);
  assert.throws(() => enc.encodeIds([1, 2, 3], 3), RangeError);
  assert.throws(() => enc.encodeIds([1, 2, 3], -1), RangeError);
});
