// Qwen3-TTS generation against upstream's own generate() (test/fixtures/golden/qwen3_tts/generate/): the prompt
// embeddings (prompt.ts rows + embedPrompt), then a greedy run (do_sample false, repetition penalty 1.05,
// min_new_tokens 2, max_new_tokens 6) that must pick the same codebook-0 tokens and the same 15 codes per frame,
// with the raw talker and code-predictor logits within the f32 / f16 rules (docs/models/README.md). Then, on the same
// tiny weights: seeded sampling is reproducible and seed-dependent and draws exactly what a CPU replay of upstream's
// logit processors with the same keys draws from the same logits (so it holds for any case), a frame after warm-up
// creates no GPU buffer, and an abort between frames stops the loop and frees what it held.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Engine } from '../../src/engine/engine';
import { parseQwen3TtsConfig } from '../../src/models/qwen3_tts/config';
import { embedPrompt, freePromptEmbeds, generateCodes, type GenerateOptions, type PromptEmbeds } from '../../src/models/qwen3_tts/generate';
import { codecLanguageId } from '../../src/models/qwen3_tts/languages';
import { buildTalkerPrompt } from '../../src/models/qwen3_tts/prompt';
import { SPECIAL_BAND, TalkerSampler, UPSTREAM_SAMPLING } from '../../src/models/qwen3_tts/sampling';
import { Qwen3TtsTalker } from '../../src/models/qwen3_tts/talker';
import { testEngine } from '../engine/helpers';
import { sampleRef, uniformRef } from '../engine/reference/sampling';
import { goldenTests, WEIGHT_PREFIX, type GoldenCase } from './golden';

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
    const talkerPrompt = buildTalkerPrompt(config, {
      inputIds: (await c.ints('input_ids')).data,
      languageId: codecLanguageId(config, notes.request.language),
      mode: notes.request.mode,
      nonStreaming: notes.request.non_streaming_mode,
      refIds: c.has('input', 'ref_ids') ? (await c.ints('ref_ids')).data : undefined,
      refCodes: c.has('input', 'ref_code') ? rows(await c.ints('ref_code')) : undefined,
    });
    const prompt = embedPrompt(talker, talkerPrompt, (await c.input('speaker_embedding')).data);
    return { e, talker, prompt, notes };
  } catch (err) {
    talker.free();
    throw err;
  }
}

/** Top-1 minus top-2 of d[at, at + n). */
function margin(d: ArrayLike<number>, at: number, n: number): number {
  let a = -Infinity;
  let b = -Infinity;
  for (let i = at; i < at + n; i++) {
    const v = d[i]!;
    if (v > a) [a, b] = [v, a];
    else if (v > b) b = v;
  }
  return a - b;
}

/** Largest |got - want| over [at, at + n) (Infinity where `got` has no values there). */
function deviation(got: ArrayLike<number>, want: ArrayLike<number>, at: number, n: number): number {
  if (got.length < at + n) return Infinity;
  let m = 0;
  for (let i = at; i < at + n; i++) m = Math.max(m, Math.abs(got[i]! - want[i]!));
  return m;
}

/** Leading frames whose every greedy pick wins by more than twice (x 1.05) Kiln's deviation on the logits it was
 * drawn from: codebook 0 from the talker's step (margin on the processed scores), codebooks 1..15 from the predictor. */
function comparedFrames(talker: Float32Array, want: { data: Float64Array; shape: number[] }, scores: { data: Float64Array; shape: number[] },
  code: Float32Array, cpl: { data: Float64Array; shape: number[] }): number {
  const [frames, groups, codebook] = cpl.shape as [number, number, number];
  const V = want.shape[2]!;
  for (let f = 0; f < frames; f++) {
    if (!(margin(scores.data, f * V, V) > 2.1 * deviation(talker, want.data, f * V, V))) return f;
    for (let g = 0; g < groups; g++) {
      const at = (f * groups + g) * codebook;
      if (!(margin(cpl.data, at, codebook) > 2 * deviation(code, cpl.data, at, codebook))) return f;
    }
  }
  return frames;
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
  goldenTests('qwen3_tts', 'generate', async (c, t) => {
    const { e, talker, prompt, notes } = await setup(c, dtype);
    try {
      c.expect(dtype, await e.read(prompt.embeds), await c.output('prompt_embeds'), 'prompt_embeds');
      const trailing = await c.output('trailing_text_hidden');
      c.expect(dtype, await e.read(prompt.trailingText), { data: trailing.data, shape: trailing.shape.slice(1) }, 'trailing_text_hidden');
      const pad = await c.output('tts_pad_embed');
      c.expect(dtype, await e.read(prompt.ttsPad), { data: pad.data, shape: [1, pad.shape[2]!] }, 'tts_pad_embed');

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
      const wantFrames = rows({ data: Array.from(wantCodes.data), shape: wantCodes.shape });
      assert.deepEqual(seen, r.frames.map((f, i) => [i, ...f]), 'onFrame saw every frame in order');
      // Greedy picks are exact wherever the logit error Kiln actually makes cannot flip them: frame by frame, a pick
      // whose top-2 margin (upstream's processed scores) exceeds twice Kiln's largest deviation on that step's logits
      // (x 1.05, the repetition penalty) must equal upstream's; the first pick within that is a near tie the dtype may
      // break either way (f16 on the tiny random models), and the runs are compared up to it. In f32 every pick is
      // compared (the generator keeps margins >= 0.02, far above f32's error).
      const scores = await c.output('talker_scores');
      const cpl = await c.output('code_predictor_logits');
      const tl = await c.output('talker_logits');
      const safe = comparedFrames(Float32Array.from(talkerLogits), tl, scores, Float32Array.from(codeLogits), cpl);
      if (dtype === 'f32') assert.equal(safe, wantFrames.length, 'f32: every pick is far from a tie');
      t.diagnostic(`${dtype}: ${safe} of ${wantFrames.length} frames compared pick by pick`);
      assert.deepEqual(r.frames.slice(0, safe), wantFrames.slice(0, safe), `codes of the ${safe} frames compared (${dtype})`);
      assert.deepEqual(r.tokens.slice(0, safe), wantTokens.slice(0, safe), `codebook-0 tokens (${dtype})`);
      if (safe === wantFrames.length) {
        assert.deepEqual(r.tokens, wantTokens, `codebook-0 tokens (${dtype})`);
        assert.deepEqual(r.frames, wantFrames, `codes (${dtype})`);
        assert.equal(r.stop, wantTokens.includes(talker.config.talker.codec.eos) ? 'eos' : 'max_new_tokens');
      }
      // the logits of the compared steps by the dtype's rule (the talker's step `safe` still had the same inputs)
      const V = tl.shape[2]!;
      const G = cpl.shape[1]! * cpl.shape[2]!;
      const steps = Math.min(safe + 1, tl.shape[1]!);
      c.expect(dtype, talkerLogits.slice(0, steps * V), { data: tl.data.subarray(0, steps * V), shape: [steps, V] }, 'talker_logits');
      if (safe > 0) c.expect(dtype, codeLogits.slice(0, safe * G), { data: cpl.data.subarray(0, safe * G), shape: [safe, G] }, 'code_predictor_logits');
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


/**
 * What upstream's generate() draws from given logits (transformers 4.57's processors, our RNG keys): per step f the
 * talker's codebook-0 token (special band but eos suppressed, eos too while f < minNewTokens, HF repetition penalty
 * over the tokens so far, temperature, top-k capped at the vocabulary) from uniformRef(seed, f * groups, 0), then codebooks 1..15 from
 * uniformRef(seed, f * groups + g, 0) (temperature, top-k). Replayed on the CPU in float64 from the logits the GPU
 * produced, so the check holds for any case; `close` counts draws within 1e-5 of a boundary (float32 vs float64
 * sums may pick the neighbour there: the frames after such a draw are not compared).
 */
function replayDraws(vocab: number, eos: number, groups: number, codebook: number, seed: number, minNewTokens: number,
  talkerLogits: Float32Array[], codeLogits: Map<string, Float32Array>): { frames: number[][]; close: number } {
  const { talker: t, subtalker: st } = UPSTREAM_SAMPLING;
  const frames: number[][] = [];
  const history: number[] = [];
  let close = 0;
  for (let f = 0; f < talkerLogits.length && close === 0; f++) {
    const row = Float64Array.from(talkerLogits[f]!);
    for (let i = Math.max(0, vocab - SPECIAL_BAND); i < vocab; i++) if (i !== eos || f < minNewTokens) row[i] = -Infinity;
    const c0 = sampleRef({ data: row, shape: [1, vocab] }, [uniformRef(seed, f * groups, 0)], { temperature: t.temperature, topK: Math.min(t.topK, vocab), repetitionPenalty: t.repetitionPenalty, prev: [[...history]] });
    if (c0.margins[0]! < 1e-5) close++;
    history.push(c0.tokens[0]!);
    if (c0.tokens[0] === eos) break;
    const frame = [c0.tokens[0]!];
    for (let g = 1; g < groups; g++) {
      const l = codeLogits.get(`${f}/${g}`);
      if (!l) break;
      const r = sampleRef({ data: Float64Array.from(l), shape: [1, codebook] }, [uniformRef(seed, f * groups + g, 0)], { temperature: st.temperature, topK: Math.min(st.topK, codebook) });
      if (r.margins[0]! < 1e-5) close++;
      frame.push(r.tokens[0]!);
    }
    if (frame.length === groups) frames.push(frame);
  }
  return { frames, close };
}

// One GPU->CPU wait per frame: the talker's and the code predictor's picks stay on the GPU as int32 ids and the
// frame's 16 codes are read together (plus one read for the token that ends generation). e.read is counted.
goldenTests('qwen3_tts', 'generate', async (c) => {
  const { e, talker, prompt } = await setup(c, 'f32');
  const read = e.read.bind(e);
  let reads = 0;
  e.read = (t) => (reads++, read(t));
  try {
    const perFrame: number[] = [];
    const r = await generateCodes(talker, prompt, { maxNewTokens: 8, minNewTokens: 8, seed: 7, onFrame: (_codes, i) => perFrame.push(reads - i) });
    assert.equal(r.stop, 'max_new_tokens');
    assert.deepEqual(perFrame, [1, 1, 1, 1, 1, 1, 1], 'reads up to and including frame i: i + 1');
    assert.equal(reads, r.frames.length + 1, 'the frames, then the last token alone');

    // the int32-id path draws what upstream's processors draw from the same logits with the same keys: the same
    // generation again with its logits read out (reads no longer counted), replayed on the CPU
    e.read = read;
    const talkerLogits: Float32Array[] = [];
    const codeLogits = new Map<string, Float32Array>();
    const inspected = await generateCodes(talker, prompt, {
      maxNewTokens: 8,
      minNewTokens: 8,
      seed: 7,
      inspect: {
        talkerLogits: async (step, l) => void talkerLogits.push(await e.read(l)),
        codeLogits: async (frame, group, l) => void codeLogits.set(`${frame}/${group}`, await e.read(l)),
      },
    });
    assert.deepEqual(inspected, r, 'reading the logits out changes no draw');
    const cfg = talker.config;
    const replay = replayDraws(cfg.talker.vocabSize, cfg.talker.codec.eos, cfg.talker.numCodeGroups, cfg.codebookSize, 7, 8, talkerLogits, codeLogits);
    assert.deepEqual(r.frames.slice(0, replay.frames.length), replay.frames, `the draws of a CPU replay of the same logits (${replay.close} draws on a boundary)`);
    assert.ok(replay.close > 0 || replay.frames.length === r.frames.length, 'every frame replayed');
    e.read = (t) => (reads++, read(t));

    // codec eos forced at token 4 (its logit raised in the talker's logits): the predictor has already run on it
    // speculatively; that frame is dropped, the four before are the same as unforced, and eos cost one read
    const eos = talker.config.talker.codec.eos;
    reads = 0;
    const forced = await generateCodes(talker, prompt, {
      maxNewTokens: 8,
      seed: 7,
      inspect: { talkerLogits: (step, l) => void (step === 4 && e.writeBytes(l, eos * 4, new Uint8Array(Float32Array.of(1e4).buffer))) },
    });
    assert.equal(forced.stop, 'eos');
    assert.deepEqual(forced.tokens, [...r.tokens.slice(0, 4), eos]);
    assert.deepEqual(forced.frames, r.frames.slice(0, 4));
    assert.equal(reads, 5);
  } finally {
    e.read = read;
    freePromptEmbeds(prompt);
    talker.free();
  }
}, 'one readback per frame, draws as a CPU replay of upstream\'s processors');


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
