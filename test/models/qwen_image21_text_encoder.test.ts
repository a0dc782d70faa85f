// QwenImage21TextEncoder against the diffusers pipeline's prompt encoding (tools/golden/qwen_image21_text.py):
// template string, dropped system turn, pre-final-norm hidden state, and a right-padded batch of two prompts
// (each prompt encoded alone must give upstream's rows). Also the tokenizer side of the drop count.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseQwen3Config } from '../../src/models/qwen3';
import type { ComputeDType } from '../../src/models/qwen3/weights';
import {
  qwenImage21PromptText,
  qwenImage21PromptTokens,
  qwenImage21SystemTurn,
  QwenImage21TextEncoder,
} from '../../src/models/qwen_image21/text-encoder';
import { TextTokenizer, writeDemoTokenizer } from '../../src/models/tokenizer';
import { testEngine } from '../engine/helpers';
import { expectClose, goldenTests, WEIGHT_PREFIX } from './golden';

const fromCodepoints = (cps: number[]): string => String.fromCodePoint(...cps);

for (const dtype of ['f32', 'f16'] as ComputeDType[]) {
  goldenTests(
    'qwen_image21',
    'text_encoder',
    async (c) => {
      const e = await testEngine();
      const config = parseQwen3Config(c.config, undefined, `${c.path} config`);
      assert.equal(config.keyPrefix, 'model.language_model.');
      const enc = await QwenImage21TextEncoder.load(e, c.ckpt, config, { dtype, prefix: WEIGHT_PREFIX + config.keyPrefix });
      try {
        const prompt = fromCodepoints((await c.ints('prompt_codepoints')).data);
        assert.equal(qwenImage21PromptText(prompt), fromCodepoints((await c.ints('template_codepoints')).data), 'template string');
        const ids = await c.ints('ids');
        const mask = await c.ints('attention_mask');
        const drop = (await c.ints('drop_idx')).data[0]!;
        const want = await c.output('prompt_embeds'); // (B, Lout, H), zero-padded
        const wantMask = await c.output('encoder_attention_mask');
        const [B, L] = ids.shape as [number, number];
        const [, Lout, H] = want.shape as [number, number, number];
        assert.equal(H, enc.hiddenSize);
        for (let b = 0; b < B; b++) {
          const real = ids.data.slice(b * L, (b + 1) * L).filter((_, l) => mask.data[b * L + l] !== 0);
          const n = real.length - drop;
          assert.equal(wantMask.data.slice(b * Lout, (b + 1) * Lout).reduce((s, v) => s + v, 0), n, `prompt ${b}: conditioning length`);
          const out = enc.encodeIds(real, drop);
          try {
            assert.deepEqual(out.shape, [n, H]);
            const got = await e.read(out);
            const rows = { data: want.data.slice(b * Lout * H, (b * Lout + n) * H), shape: [n, H] };
            expectClose(got, rows, c.tol(dtype), `${dtype} prompt ${b} embeds`);
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

test('encodeIds refuses a drop that leaves no token', async () => {
  const e = await testEngine();
  // the range check comes before the model is touched, so a config-only stand-in is enough
  const enc = new QwenImage21TextEncoder(e, { config: { numLayers: 1, hiddenSize: 4 } } as never);
  assert.throws(() => enc.encodeIds([1, 2, 3], 3), RangeError);
  assert.throws(() => enc.encodeIds([1, 2, 3], -1), RangeError);
});
