// The Qwen3-TTS talker (decoder with interleaved 3-axis RoPE + codec head) against upstream golden vectors
// (test/fixtures/golden/qwen3_tts/talker/): every hidden state, the final norm and the codec-head logits, in f32
// and f16; then the same prompt fed through the KV cache (a prefill and one-token decode steps) with a frozen
// pool from the third step on.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseQwen3TtsConfig } from '../../src/models/qwen3_tts/config';
import { Qwen3TtsTalker } from '../../src/models/qwen3_tts/talker';
import { testEngine } from '../engine/helpers';
import { goldenTests, WEIGHT_PREFIX, type GoldenCase } from './golden';
import { casePositions } from './qwen3-golden';

const DTYPES = ['f32', 'f16'] as const;

async function loadTalker(c: GoldenCase, dtype: 'f32' | 'f16') {
  const e = await testEngine();
  const config = parseQwen3TtsConfig(c.config, c.path);
  const talker = await Qwen3TtsTalker.load(e, c.ckpt, config, { dtype, prefix: WEIGHT_PREFIX, codecEmbedding: false, text: false, codePredictor: false });
  return { e, talker, config };
}

for (const dtype of DTYPES) {
  goldenTests('qwen3_tts', 'talker', async (c) => {
    const { e, talker, config } = await loadTalker(c, dtype);
    const x = await c.input('inputs_embeds');
    const embeds = e.upload(x.data, x.shape, dtype);
    try {
      const layers = config.talker.numLayers;
      const out = talker.forward({ embeds, positions: await casePositions(c), hiddenStates: Array.from({ length: layers }, (_, i) => i) });
      for (const [i, t] of out.states) {
        c.expect(dtype, await e.read(t), await c.output(`hidden.${i}`), `hidden.${i}`);
        t.free();
      }
      assert.equal(out.states.size, layers);
      c.expect(dtype, await e.read(out.hidden), await c.output('last_hidden_state'), 'last_hidden_state');
      c.expect(dtype, await e.read(out.logits), await c.output('logits'), 'logits');
      out.hidden.free();
      out.logits.free();
    } finally {
      embeds.free();
      talker.free();
    }
  }, dtype);

  goldenTests('qwen3_tts', 'talker', async (c) => {
    const { e, talker } = await loadTalker(c, dtype);
    const x = await c.input('inputs_embeds');
    const [, L, H] = x.shape as [number, number, number];
    const embeds = e.upload(x.data, x.shape, dtype);
    const prefill = 4;
    const cache = talker.createCache(L);
    const got: number[] = [];
    try {
      for (let step = 0, a = 0; a < L; step++) {
        const b = step === 0 ? prefill : a + 1;
        // the prefill, then one warm-up step; from the third call on, no GPU buffer may be created
        if (step === 2) e.pool.frozen = true;
        const created = e.pool.stats().buffersCreated;
        const out = talker.forward({ embeds: embeds.slice(1, a, b), cache, positions: await casePositions(c, a, b) });
        got.push(...(await e.read(out.logits)));
        out.logits.free();
        out.hidden.free();
        if (step >= 2) assert.equal(e.pool.stats().buffersCreated, created, `decode step ${step} created GPU buffers`);
        a = b;
      }
      assert.equal(cache.length, L);
      assert.equal(H, talker.config.talker.hiddenSize);
      c.expect(dtype, got, await c.output('logits'), 'logits', `logits through the KV cache (${dtype})`);
    } finally {
      e.pool.frozen = false;
      cache.free();
      embeds.free();
      talker.free();
    }
  }, `${dtype}, KV cache`);
}

test('talker: a missing part fails loudly with the key it needs', async () => {
  const [file] = (await import('./golden')).goldenCaseFiles('qwen3_tts', 'talker');
  const c = await (await import('./golden')).GoldenCase.open(file!);
  try {
    const e = await testEngine();
    const config = parseQwen3TtsConfig(c.config, c.path);
    // the talker fixture holds no text embedding
    await assert.rejects(Qwen3TtsTalker.load(e, c.ckpt, config, { dtype: 'f32', prefix: WEIGHT_PREFIX, codecEmbedding: false, codePredictor: false }), /talker\.model\.text_embedding\.weight/);
    const t = await Qwen3TtsTalker.load(e, c.ckpt, config, { dtype: 'f32', prefix: WEIGHT_PREFIX, codecEmbedding: false, text: false, codePredictor: false });
    assert.throws(() => t.embedText([1]), /text embedding was not loaded/);
    assert.throws(() => t.embedCodec([1]), /codec_embedding was not loaded/);
    t.free();
  } finally {
    await c.close();
  }
});
