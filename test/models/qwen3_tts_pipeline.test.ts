// The Qwen3-TTS pipeline end to end on the demo checkpoint (the components themselves are golden-tested in the
// other qwen3_tts_* files): the demo holds exactly the keys the loaders read and loads from disk through the real
// Checkpoint; a request writes a 24 kHz mono 16-bit wav whose length is whole codec frames; the same seed gives the
// same samples and another seed other ones; ICL (with ref_text) and long texts (several chunks) run; cancel stops
// between frames and leaves no file; bad input is a BadInputError; unload gives the GPU memory back. Also the
// sentence splitter for the ten languages.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BadInputError, CancelledError } from '../../src/common/errors';
import { Checkpoint } from '../../src/engine/safetensors';
import type { Stage } from '../../src/catalog';
import { STAGE } from '../../src/catalog';
import { planDemoQwen3Tts, type DemoPlan } from '../../src/models/qwen3_tts/demo';
import { loadQwen3TtsParts, maxNewTokensFor, Qwen3TtsPipeline, readQwen3TtsConfigs, type Qwen3TtsTask } from '../../src/models/qwen3_tts/pipeline';
import { splitForSpeech, splitSentences, textUnits } from '../../src/models/qwen3_tts/text-split';
import { wavBytes } from '../api/inputs';
import { testEngine } from '../engine/helpers';
import { recordingContext } from './run-context';

describe('text-split: sentences in the ten languages', () => {
  test('Latin and Cyrillic scripts: . ! ? … with closers, not inside numbers or dotted abbreviations', () => {
    assert.deepEqual(splitSentences('Hello there. How are you? Fine!  It costs 3.50 at example.com... "Really?!" she asked.'), [
      'Hello there.', 'How are you?', 'Fine!', 'It costs 3.50 at example.com...', '"Really?!"', 'she asked.',
    ]);
    assert.deepEqual(splitSentences('Привет, как дела? Всё хорошо. „Ja.“ Und du?'), ['Привет, как дела?', 'Всё хорошо.', '„Ja.“', 'Und du?']);
    assert.deepEqual(splitSentences('« Bonjour ! » dit-il. Ça va ?'), ['« Bonjour ! »', 'dit-il.', 'Ça va ?']);
    assert.deepEqual(splitSentences('¿Dónde está? ¡Aquí! Olá, tudo bem? Sì, grazie.'), ['¿Dónde está?', '¡Aquí!', 'Olá, tudo bem?', 'Sì, grazie.']);
    assert.deepEqual(splitSentences('안녕하세요. 반갑습니다!'), ['안녕하세요.', '반갑습니다!']);
  });

  test('Chinese and Japanese: 。！？ end a sentence with no space, 」』 stay attached; newlines always break', () => {
    assert.deepEqual(splitSentences('你好。今天天气很好！你呢？'), ['你好。', '今天天气很好！', '你呢？']);
    assert.deepEqual(splitSentences('「こんにちは。」と言った。元気ですか？'), ['「こんにちは。」', 'と言った。', '元気ですか？']);
    assert.deepEqual(splitSentences('line one\nline two\r\n\r\nline three'), ['line one', 'line two', 'line three']);
    assert.deepEqual(splitSentences('  \n '), []);
  });

  test('units: 3 per ideograph, kana or hangul syllable, 1 otherwise', () => {
    assert.equal(textUnits('abc'), 3);
    assert.equal(textUnits('你好'), 6);
    assert.equal(textUnits('こんにちは'), 15);
    assert.equal(textUnits('안녕'), 6);
    assert.equal(textUnits('Да.'), 3);
  });

  test('chunks: sentences packed up to the limit, long ones cut at clauses, then spaces, then anywhere', () => {
    assert.deepEqual(splitForSpeech('One. Two. Three.'), ['One. Two. Three.']);
    assert.deepEqual(splitForSpeech('One two. Three four. Five six.', 12), ['One two.', 'Three four.', 'Five six.']);
    assert.deepEqual(splitForSpeech('One two. Three four. Five.', 20), ['One two. Three four.', 'Five.']);
    assert.deepEqual(splitForSpeech('你好。今天天气很好！', 30), ['你好。今天天气很好！']);
    assert.deepEqual(splitForSpeech('你好。今天天气很好！', 19), ['你好。', '今天天气很好！'], 'full-width punctuation counts 1');
    assert.deepEqual(splitForSpeech('first part, second part, third part', 14), ['first part,', 'second part,', 'third part']);
    assert.deepEqual(splitForSpeech('alpha beta gamma delta', 11), ['alpha beta', 'gamma delta']);
    assert.deepEqual(splitForSpeech('一二三四五六七', 9), ['一二三', '四五六', '七']);
    assert.deepEqual(splitForSpeech('第一部分，第二部分', 15), ['第一部分，', '第二部分']);
    for (const limit of [5, 17, 40]) {
      const text = 'The quick brown fox jumps over the lazy dog. 今天天气很好，我们去公园吧！ Ça va? Très bien, merci beaucoup.';
      for (const c of splitForSpeech(text, limit)) assert.ok(textUnits(c) <= limit, `${JSON.stringify(c)} over ${limit}`);
    }
    assert.deepEqual(splitForSpeech(' \n\t'), []);
  });

  test('frame budget: bounded by the text and by max_new_tokens', () => {
    assert.equal(maxNewTokensFor(10, { maxNewTokens: 8192 }), Math.ceil(12.5 * 6) + 1);
    assert.equal(maxNewTokensFor(10000, { maxNewTokens: 8192 }), 8192);
    assert.equal(maxNewTokensFor(0, { maxNewTokens: 1 }), 2);
  });
});

describe('Qwen3-TTS pipeline on the demo checkpoint', () => {
  let dir: string;
  let scratch: string;
  let plan: DemoPlan;
  let pipeline: Qwen3TtsPipeline;
  let loadedBytes = 0;
  const clip = () => {
    const p = join(scratch, `clip-${Math.random().toString(36).slice(2)}.wav`);
    writeFileSync(p, wavBytes(3, 16000)); // 3 s of 440 Hz at 16 kHz: resampled to 24 kHz on the way in
    return p;
  };
  const ctx = recordingContext;
  const task = (o: Partial<Qwen3TtsTask> = {}): Qwen3TtsTask => ({
    text: 'Hi.', language: 'English', refText: '', refAudioPath: clip(), outputPath: join(scratch, `out-${Math.random().toString(36).slice(2)}.wav`), seed: 7, ...o,
  });

  before(async () => {
    const e = await testEngine();
    scratch = mkdtempSync(join(tmpdir(), 'kiln-tts-pipe-'));
    dir = join(scratch, 'demo');
    plan = await planDemoQwen3Tts(e);
    await plan.write(dir);
    pipeline = new Qwen3TtsPipeline({ engine: testEngine, checkpoint: async () => dir, onLoaded: (b) => (loadedBytes = b), chunkUnits: 20 });
  });
  after(async () => {
    await pipeline?.unload();
    rmSync(scratch, { recursive: true, force: true });
  });

  test('the demo checkpoint holds exactly the keys the loaders read, in the published format', async () => {
    for (const f of ['config.json', 'generation_config.json', 'preprocessor_config.json', 'vocab.json', 'merges.txt', 'tokenizer_config.json',
      'model.safetensors', 'speech_tokenizer/config.json', 'speech_tokenizer/preprocessor_config.json', 'speech_tokenizer/model.safetensors']) {
      assert.ok(existsSync(join(dir, f)), f);
    }
    const model = await Checkpoint.open(join(dir, 'model.safetensors'));
    const speech = await Checkpoint.open(join(dir, 'speech_tokenizer/model.safetensors'));
    try {
      assert.deepEqual(new Set(model.keys()), new Set(plan.keys.model.keys()));
      assert.deepEqual(new Set(speech.keys()), new Set(plan.keys.speech.keys()));
      assert.ok(model.keys().every((k) => /^(talker|speaker_encoder)\./.test(k)), 'model.safetensors: talker.* and speaker_encoder.* only');
      assert.ok(speech.keys().every((k) => /^(decoder|encoder)\./.test(k)), 'speech tokenizer: decoder.* and encoder.* only');
      assert.equal(model.entry('talker.codec_head.weight').dtype, 'BF16');
      assert.equal(speech.entry('decoder.pre_conv.conv.weight').dtype, 'F32');
      const cfg = await readQwen3TtsConfigs(dir);
      const t = cfg.model.talker;
      assert.deepEqual(model.entry('talker.model.text_embedding.weight').shape, [t.textVocabSize, t.textHiddenSize]);
      for (let g = 0; g < t.numCodeGroups - 1; g++) assert.ok(model.has(`talker.code_predictor.lm_head.${g}.weight`), `lm_head.${g}`);
      assert.ok(model.has('talker.code_predictor.small_to_mtp_projection.weight'), 'predictor narrower than the talker: the projection exists (as in 1.7B)');
      // Loading from the files (real Checkpoint, bf16 -> f16/f32 conversion) succeeds and reads every key.
      const e = await testEngine();
      const parts = await loadQwen3TtsParts(e, model, speech, cfg, { dtype: 'f16' });
      parts.free();
    } finally {
      await model.close();
      await speech.close();
    }
  });

  test('a request writes a 24 kHz mono 16-bit wav of whole codec frames, with stages and per-frame progress', async () => {
    const stages: Stage[] = [];
    const progress: [number, number][] = [];
    const t = task();
    const started = Date.now();
    await pipeline.run(t, ctx({ stages, progress }));
    const ms = Date.now() - started;
    const wav = readFileSync(t.outputPath);
    assert.equal(wav.subarray(0, 4).toString(), 'RIFF');
    assert.equal(wav.readUInt16LE(20), 1, 'PCM');
    assert.equal(wav.readUInt16LE(22), 1, 'mono');
    assert.equal(wav.readUInt32LE(24), 24000);
    assert.equal(wav.readUInt16LE(34), 16);
    const samples = wav.readUInt32LE(40) / 2;
    assert.equal(wav.length, 44 + samples * 2);
    const frames = samples / 1920;
    assert.ok(Number.isInteger(frames) && frames >= 2, `${samples} samples is not whole frames`);
    assert.ok(frames < maxNewTokensFor(textUnits('Hi.'), { maxNewTokens: 8192 }));
    assert.deepEqual(progress.map(([v]) => v), Array.from({ length: frames }, (_, i) => i + 1), 'one progress call per frame');
    assert.ok(progress.every(([v, m]) => v <= m));
    for (const s of [STAGE.encode, STAGE.sample, STAGE.audioDecode, STAGE.save]) assert.ok(stages.includes(s), s);
    const pcm = new Int16Array(wav.buffer, wav.byteOffset + 44, samples);
    assert.ok(pcm.some((v) => v !== 0), 'not silence');
    assert.ok(pipeline.residentBytes > 0 && pipeline.residentBytes === loadedBytes);
    console.log(`# demo request: ${frames} frames (${(samples / 24000).toFixed(2)} s of audio) in ${ms} ms`);
  });

  test('the same seed reproduces the samples; another seed changes them', async () => {
    const a = task({ seed: 1234, text: 'Hello.' });
    const b = task({ seed: 1234, text: 'Hello.' });
    const c = task({ seed: 1235, text: 'Hello.' });
    for (const x of [a, b, c]) await pipeline.run(x, ctx());
    assert.ok(readFileSync(a.outputPath).equals(readFileSync(b.outputPath)), 'same seed, same bytes');
    assert.ok(!readFileSync(a.outputPath).equals(readFileSync(c.outputPath)), 'another seed, other samples');
  });

  test('with ref_text: in-context cloning from the clip codes; the reference part is cut from the output', async () => {
    const t = task({ refText: 'A tone.', language: 'Auto' });
    await pipeline.run(t, ctx());
    const samples = readFileSync(t.outputPath).readUInt32LE(40) / 2;
    // int(ref / total * samples) in float64 may land one sample short of the frame boundary
    assert.ok(samples >= 2 * 1920 && [0, 1].includes(samples % 1920), `${samples} samples`);
  });

  test('a long text is spoken in sentence chunks joined with a pause', async () => {
    const progress: [number, number][] = [];
    const t = task({ text: 'First sentence here. Second one follows.', seed: 3 });
    await pipeline.run(t, ctx({ progress }));
    const samples = readFileSync(t.outputPath).readUInt32LE(40) / 2;
    const pause = Math.round(0.12 * 24000);
    assert.equal((samples - pause) % 1920, 0, 'two chunks of whole frames and one pause');
    const max = progress[0]![1];
    assert.equal(max, maxNewTokensFor(textUnits('First sentence here.'), { maxNewTokens: 8192 }) - 1 + maxNewTokensFor(textUnits('Second one follows.'), { maxNewTokens: 8192 }) - 1);
  });

  test('cancel between frames: the run stops after the frame that saw the abort, no output file', async () => {
    const abort = new AbortController();
    const t = task({ text: 'This one is cancelled.' });
    const progress: [number, number][] = [];
    const run = pipeline.run(t, ctx({ signal: abort.signal, progress, onProgress: () => abort.abort('interrupted') }));
    await assert.rejects(run, (err: unknown) => err === 'interrupted' || err instanceof CancelledError);
    assert.equal(progress.length, 1, 'no frame after the abort');
    assert.equal(existsSync(t.outputPath), false);
  });

  test('bad input: unknown language, empty text, undecodable or too short clip', async () => {
    const bad = async (t: Qwen3TtsTask, reason: RegExp) => {
      await assert.rejects(pipeline.run(t, ctx()), (err: unknown) => err instanceof BadInputError && reason.test(err.message));
      assert.equal(existsSync(t.outputPath), false);
    };
    await bad(task({ language: 'Klingon' }), /^language: .*Klingon/);
    await bad(task({ text: ' \n ' }), /^text is empty/);
    const junk = join(scratch, 'junk.wav');
    writeFileSync(junk, 'not audio at all');
    await bad(task({ refAudioPath: junk }), /^ref_audio/);
    const short = join(scratch, 'short.wav');
    writeFileSync(short, wavBytes(1.5));
    await bad(task({ refAudioPath: short }), /^ref_audio: clip is 1.50 s long; clips must be 3 to 30 s/);
  });

  test('unload returns the GPU memory the load took', async () => {
    const e = await testEngine();
    await pipeline.unload();
    const before = e.pool.stats().inUseBytes;
    await pipeline.load(ctx());
    assert.ok(e.pool.stats().inUseBytes - before === loadedBytes && loadedBytes > 0);
    await pipeline.unload();
    assert.equal(e.pool.stats().inUseBytes, before);
    assert.equal(pipeline.residentBytes, 0);
  });
});
