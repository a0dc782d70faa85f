// Qwen3-TTS generation against upstream's own generate() (test/fixtures/golden/qwen3_tts/generate/): the prompt
// embeddings (prompt.ts layout + embedPrompt), then a greedy run (do_sample false, repetition penalty 1.05,
// min_new_tokens 2, max_new_tokens 6) that must pick the same codebook-0 tokens and the same 15 codes per frame,
// with the raw talker and code-predictor logits within the fixture's tolerance. Then, on the same tiny weights:
// seeded sampling is reproducible and seed-dependent, a frame after warm-up creates no GPU buffer, and an abort
// between frames stops the loop and frees what it held.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Engine } from '../../src/engine/engine';
import { parseQwen3TtsConfig } from '../../src/models/qwen3_tts/config';
import { embedPrompt, freePromptEmbeds, generateCodes, type GenerateOptions, type PromptEmbeds } from '../../src/models/qwen3_tts/generate';
import { codecLanguageId } from '../../src/models/qwen3_tts/languages';
import { buildTalkerPrompt } from '../../src/models/qwen3_tts/prompt';
import { SPECIAL_BAND, TalkerSampler } from '../../src/models/qwen3_tts/sampling';
import { Qwen3TtsTalker } from '../../src/models/qwen3_tts/talker';
import { testEngine } from '../engine/helpers';
import { expectClose, goldenTests, WEIGHT_PREFIX, type GoldenCase } from './golden';

interface Notes {
  request: { language: string; mode: 'xvec' | 'icl'; non_streaming_mode: boolean };
  generate: { max_new_tokens: number; do_sample: boolean; subtalker_dosample: boolean; repetition_penalty: number; min_new_tokens: number };
}

async function setup(c: GoldenCase, dtype: 'f32' | 'f16'): Promise<{ e: Engine; talker: Qwen3TtsTalker; prompt: PromptEmbeds; notes: Notes }> {
  const e = await testEngine();
  const config = parseQwen3TtsConfig(c.config, c.path);
  const notes = JSON.parse(c.ckpt.metadata.notes ?? '{}') as Notes;
  const talker = await Qwen3TtsTalker.load(e, c.ckpt, config, { dtype, prefix: WEIGHT_PREFIX });
  try {
    const layout = buildTalkerPrompt(config, {
      inputIds: (await c.ints('input_ids')).data,
      languageId: codecLanguageId(config, notes.request.language),
      mode: notes.request.mode,
      nonStreaming: notes.request.non_streaming_mode,
      refIds: c.has('input', 'ref_ids') ? (await c.ints('ref_ids')).data : undefined,
      refCodes: c.has('input', 'ref_code') ? rows(await c.ints('ref_code')) : undefined,
    });
    const prompt = embedPrompt(talker, layout, (await c.input('speaker_embedding')).data);
    return { e, talker, prompt, notes };
  } catch (err) {
    talker.free();
    throw err;
  }
}

function rows(t: { data: number[]; shape: number[] }): number[][] {
  const w = t.shape[t.shape.length - 1]!;
  return Array.from({ length: t.data.length / w }, (_, i) => t.data.slice(i * w, (i + 1) * w));
}

const greedy = (n: Notes): GenerateOptions => ({
  maxNewTokens: n.generate.max_new_tokens,
  minNewTokens: n.generate.min_new_tokens,
  talker: { doSample: n.generate.do_sample, repetitionPenalty: n.generate.repetition_penalty },
  subtalker: { doSample: n.generate.subtalker_dosample },
});

for (const dtype of ['f32', 'f16'] as const) {
  goldenTests('qwen3_tts', 'generate', async (c) => {
    const { e, talker, prompt, notes } = await setup(c, dtype);
    const tol = c.tol(dtype);
    try {
      expectClose(await e.read(prompt.embeds), await c.output('prompt_embeds'), tol, `prompt_embeds (${dtype})`);
      const trailing = await c.output('trailing_text_hidden');
      expectClose(await e.read(prompt.trailingText), { data: trailing.data, shape: trailing.shape.slice(1) }, tol, `trailing_text_hidden (${dtype})`);
      const pad = await c.output('tts_pad_embed');
      expectClose(await e.read(prompt.ttsPad), { data: pad.data, shape: [1, pad.shape[2]!] }, tol, `tts_pad_embed (${dtype})`);

      const talkerLogits: number[] = [];
      const codeLogits: number[] = [];
      const seen: number[][] = [];
      const r = await generateCodes(talker, prompt, {
        ...greedy(notes),
        onFrame: (codes, i) => seen.push([i, ...codes]),
        inspect: {
          talkerLogits: async (_step, l) => void talkerLogits.push(...(await e.read(l))),
          codeLogits: async (_frame, _group, l) => void codeLogits.push(...(await e.read(l))),
        },
      });
      const wantTokens = Array.from((await c.output('talker_tokens')).data);
      const wantCodes = await c.output('codes');
      assert.deepEqual(r.tokens, wantTokens, `codebook-0 tokens (${dtype})`);
      assert.deepEqual(r.frames, rows({ data: Array.from(wantCodes.data), shape: wantCodes.shape }), `codes (${dtype})`);
      assert.equal(r.stop, wantTokens.includes(talker.config.talker.codec.eos) ? 'eos' : 'max_new_tokens');
      assert.deepEqual(seen, r.frames.map((f, i) => [i, ...f]), 'onFrame saw every frame in order');
      expectClose(talkerLogits, await c.output('talker_logits'), tol, `talker_logits (${dtype})`);
      expectClose(codeLogits, await c.output('code_predictor_logits'), tol, `code_predictor_logits (${dtype})`);
    } finally {
      freePromptEmbeds(prompt);
      talker.free();
    }
  }, dtype);
}

// Sampling on the same tiny checkpoint: upstream's defaults (T 0.9, top-k 50, penalty 1.05) with our seeded draws.
goldenTests('qwen3_tts', 'generate', async (c) => {
  const { e, talker, prompt } = await setup(c, 'f32');
  const run = (seed: number, extra: Partial<GenerateOptions> = {}) => generateCodes(talker, prompt, { maxNewTokens: 8, seed, ...extra });
  try {
    const a = await run(7);
    const b = await run(7);
    assert.deepEqual(b, a, 'the same seed gives the same codes');
    const others = await Promise.all([8, 9, 10].map((s) => run(s).then((x) => JSON.stringify(x.frames))));
    assert.ok(others.some((f) => f !== JSON.stringify(a.frames)), 'different seeds give different codes');
    for (const f of a.frames) {
      assert.equal(f.length, talker.config.talker.numCodeGroups);
      assert.ok(f[0]! < talker.config.codebookSize, `codebook-0 token ${f[0]} is a code, not a special id`);
      for (const code of f) assert.ok(Number.isInteger(code) && code >= 0 && code < talker.config.codebookSize);
    }

    // after the prefill, one talker decode step and two code-predictor frames (warm-up), nothing may create a GPU
    // buffer; eos is held off (min_new_tokens) so that every run has 7 frames whatever the random weights say
    const steady = { minNewTokens: 8 };
    const unfrozen = await run(7, steady);
    let created = -1;
    const frozen = await run(7, {
      ...steady,
      onFrame: (_codes, i) => {
        if (i === 1) {
          e.pool.frozen = true;
          created = e.pool.stats().buffersCreated;
        }
      },
    });
    assert.equal(frozen.frames.length, 7);
    assert.equal(e.pool.stats().buffersCreated, created, 'a frame after warm-up created GPU buffers');
    e.pool.frozen = false;
    assert.deepEqual(frozen, unfrozen, 'freezing the pool changes nothing');

    // cancel between frames: the loop rejects with the signal's reason and frees its caches and buffers
    const inUse = e.pool.stats().inUseBytes;
    const ctl = new AbortController();
    const reason = new Error('interrupted');
    const frames: number[] = [];
    await assert.rejects(run(7, { ...steady, signal: ctl.signal, onFrame: (_c, i) => (frames.push(i), i === 1 && ctl.abort(reason)) }), (err) => err === reason);
    assert.deepEqual(frames, [0, 1], 'no frame after the abort');
    assert.equal(e.pool.stats().inUseBytes, inUse, 'an aborted generation left GPU buffers in use');
    const early = new AbortController();
    early.abort(reason);
    await assert.rejects(run(7, { signal: early.signal }), (err) => err === reason);
    assert.equal(e.pool.stats().inUseBytes, inUse);

    // greedy ignores the seed; bad options fail before any GPU work
    const g1 = await run(1, { talker: { doSample: false }, subtalker: { doSample: false } });
    const g2 = await run(2, { talker: { doSample: false }, subtalker: { doSample: false } });
    assert.deepEqual(g1, g2);
    await assert.rejects(run(1, { maxNewTokens: 0 }), /maxNewTokens 0/);
    await assert.rejects(run(1, { talker: { topK: 65 } }), /top_k 65/);
    await assert.rejects(run(1, { subtalker: { temperature: 0 } }), /temperature 0/);
    assert.equal(e.pool.stats().inUseBytes, inUse);
  } finally {
    e.pool.frozen = false;
    freePromptEmbeds(prompt);
    talker.free();
  }
}, 'sampling, pool, cancel');


// The talker's logit processors on hand-made logits: vocab 8 + 1024, i.e. codes 0..7 under the special band
// 8..1031 (eos 10 in it), greedy, repetition penalty 2 so that its effect is plain.
test('talker sampler: eos masked for min_new_tokens, special band suppressed, HF repetition penalty', async () => {
  const e = await testEngine();
  const vocab = SPECIAL_BAND + 8;
  const eos = 10;
  const sampler = new TalkerSampler(e, 'f32', vocab, eos, { doSample: false, temperature: 1, topK: 1, repetitionPenalty: 2, seed: 0, groups: 16, minNewTokens: 2, maxNewTokens: 8 });
  const pick = async (values: Record<number, number>) => {
    const l = new Float32Array(vocab).fill(-5);
    for (const [i, v] of Object.entries(values)) l[Number(i)] = v;
    const t = e.upload(l, [1, vocab], 'f32');
    try {
      return await sampler.pick(t);
    } finally {
      t.free();
    }
  };
  try {
    // a special id (not eos) never wins; eos loses while fewer than 2 tokens exist
    assert.equal(await pick({ 20: 9, [eos]: 8, 3: 1 }), 3);
    // token 3 was generated: 1.5 / 2 = 0.75 < 1, so 5 wins; eos still masked (1 token so far)
    assert.equal(await pick({ [eos]: 8, 3: 1.5, 5: 1 }), 5);
    // two tokens exist: eos may win now
    assert.equal(await pick({ [eos]: 8, 3: 1.5 }), eos);
    // negative logits of generated tokens are multiplied: -0.4 * 2 = -0.8 < -0.7
    assert.equal(await pick({ 3: -0.4, 6: -0.7 }), 6);
    assert.equal(sampler.count, 4);
  } finally {
    sampler.free();
  }
});
