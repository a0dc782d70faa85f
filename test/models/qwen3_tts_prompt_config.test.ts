// Qwen3-TTS configs: the real 0.6B / 1.7B files (copied from shared/upstream into test/fixtures/qwen3_tts_configs,
// since CI has no ../shared) and the tiny configs the golden fixtures were generated with.
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  DEFAULT_SAMPLING,
  parseGenerationConfig,
  parseQwen3TtsConfig,
  parseSpeechTokenizerConfig,
  Qwen3TtsConfigError,
} from '../../src/models/qwen3_tts/config';
import { GoldenCase, goldenCaseFiles, repoRoot } from './golden';

const configDir = (size: string) => join(repoRoot(), 'test', 'fixtures', 'qwen3_tts_configs', `Qwen3-TTS-12Hz-${size}-Base`);
const readJson = (path: string): unknown => JSON.parse(readFileSync(path, 'utf8'));
const clone = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;

test('config.json of 1.7B and 0.6B: talker, code predictor, ids, speaker encoder', () => {
  const big = parseQwen3TtsConfig(readJson(join(configDir('1.7B'), 'config.json')));
  const small = parseQwen3TtsConfig(readJson(join(configDir('0.6B'), 'config.json')));
  assert.equal(big.modelSize, '1b7');
  assert.equal(small.modelSize, '0b6');
  assert.equal(big.modelType, 'base');
  assert.deepEqual(big.text, { imStart: 151644, imEnd: 151645, assistant: 77091, ttsPad: 151671, ttsBos: 151672, ttsEos: 151673 });
  assert.deepEqual(big.talker.codec, { pad: 2148, bos: 2149, eos: 2150, think: 2154, nothink: 2155, thinkBos: 2156, thinkEos: 2157 });
  assert.equal(big.talker.languageIds.english, 2050);
  assert.equal(big.talker.languageIds.portuguese, 2071);
  assert.equal(Object.keys(big.talker.languageIds).length, 10);
  assert.equal(big.codebookSize, 2048);
  for (const [cfg, hidden, ffn] of [[big, 2048, 6144], [small, 1024, 3072]] as const) {
    assert.equal(cfg.talker.hiddenSize, hidden);
    assert.equal(cfg.talker.intermediateSize, ffn);
    assert.equal(cfg.talker.numLayers, 28);
    assert.equal(cfg.talker.numHeads, 16);
    assert.equal(cfg.talker.numKvHeads, 8);
    assert.equal(cfg.talker.headDim, 128, 'head_dim 128 in both (0.6B: 16 x 128 != hidden 1024)');
    assert.equal(cfg.talker.vocabSize, 3072);
    assert.equal(cfg.talker.textVocabSize, 151936);
    assert.equal(cfg.talker.textHiddenSize, 2048);
    assert.equal(cfg.talker.numCodeGroups, 16);
    assert.equal(cfg.talker.keyPrefix, 'talker.model.');
    assert.deepEqual(cfg.talker.rope, { kind: 'mrope', theta: 1000000, section: [24, 20, 20], mode: 'interleaved' });
    assert.equal(cfg.codePredictor.hiddenSize, 1024);
    assert.equal(cfg.codePredictor.numLayers, 5);
    assert.equal(cfg.codePredictor.vocabSize, 2048);
    assert.equal(cfg.codePredictor.keyPrefix, 'talker.code_predictor.model.');
    assert.equal(cfg.codePredictor.rope.kind, '1d');
    assert.equal(cfg.speakerEncoder.encDim, hidden);
    assert.deepEqual(cfg.speakerEncoder.channels, [512, 512, 512, 512, 1536]);
    assert.equal(cfg.speakerEncoder.melDim, 128);
  }
});

test('config.json: a special id outside the top-1024 band, a vocab that is not codebook + 1024, a wrong type', () => {
  const real = readJson(join(configDir('1.7B'), 'config.json')) as Record<string, any>;
  const badId = clone(real);
  badId.talker_config.codec_pad_id = 100;
  assert.throws(() => parseQwen3TtsConfig(badId), /codec id pad = 100 is outside the special band \[2048, 3072\)/);
  const badVocab = clone(real);
  badVocab.talker_config.vocab_size = 4096;
  assert.throws(() => parseQwen3TtsConfig(badVocab), /vocab_size 4096 must be the code predictor's 2048 \+ 1024/);
  const badLang = clone(real);
  badLang.talker_config.codec_language_id.klingon = 9999;
  assert.throws(() => parseQwen3TtsConfig(badLang), /klingon = 9999 is outside/);
  const badSpk = clone(real);
  badSpk.speaker_encoder_config.enc_dim = 1024;
  assert.throws(() => parseQwen3TtsConfig(badSpk), /enc_dim 1024 must equal the talker hidden size 2048/);
  assert.throws(() => parseQwen3TtsConfig({ model_type: 'qwen3' }), Qwen3TtsConfigError);
});

test('generation_config.json: sampling defaults of both checkpoints; missing fields fall back to upstream hard defaults', () => {
  for (const size of ['0.6B', '1.7B']) {
    const g = parseGenerationConfig(readJson(join(configDir(size), 'generation_config.json')));
    assert.deepEqual(g, { ...DEFAULT_SAMPLING, maxNewTokens: 8192 });
  }
  assert.deepEqual(parseGenerationConfig({}), DEFAULT_SAMPLING);
  assert.equal(parseGenerationConfig({ top_k: 7, subtalker_temperature: 0.5 }).topK, 7);
  assert.throws(() => parseGenerationConfig({ top_p: 1.5 }), /top_p = 1.5 is out of range/);
  assert.throws(() => parseGenerationConfig({ do_sample: 'yes' }), /not a boolean/);
});

test('speech_tokenizer/config.json: 12.5 Hz codec, 16 of 32 encoder codebooks, decoder stages', () => {
  const t = parseSpeechTokenizerConfig(readJson(join(configDir('1.7B'), 'speech_tokenizer', 'config.json')));
  const same = parseSpeechTokenizerConfig(readJson(join(configDir('0.6B'), 'speech_tokenizer', 'config.json')));
  assert.deepEqual(same, t);
  assert.equal(t.decodeUpsampleRate, 1920);
  assert.equal(t.encoderValidNumQuantizers, 16);
  assert.equal(t.encoder.numQuantizers, 32);
  assert.equal(t.encoder.frameRate, 12.5);
  assert.deepEqual(t.decoder.upsampleRates, [8, 5, 4, 3]);
  assert.deepEqual(t.decoder.upsamplingRatios, [2, 2]);
  assert.equal(t.decoder.codebookDim, 512);
  assert.equal(t.decoder.latentDim, 1024);
  assert.equal(t.decoder.decoderDim, 1536);
  assert.equal(t.decoder.slidingWindow, 72);
  assert.equal(t.decoder.headDim, 64);
  const bad = readJson(join(configDir('1.7B'), 'speech_tokenizer', 'config.json')) as Record<string, any>;
  bad.decoder_config.upsample_rates = [8, 5, 4, 4];
  assert.throws(() => parseSpeechTokenizerConfig(bad), /decoder rates multiply to 2560/);
});

test('the tiny configs of every golden fixture parse (a config the implementation cannot build fails loudly)', async () => {
  let tts = 0;
  let codec = 0;
  for (const component of ['talker', 'code_predictor', 'speaker_encoder', 'generate', 'codec_decoder', 'codec_encoder']) {
    const files = goldenCaseFiles('qwen3_tts', component);
    assert.ok(files.length > 0, `no golden cases for ${component}`);
    for (const f of files) {
      const c = await GoldenCase.open(f);
      try {
        if (component.startsWith('codec_')) {
          const t = parseSpeechTokenizerConfig(c.config, f);
          assert.equal(t.decodeUpsampleRate, 1920);
          codec++;
        } else {
          const m = parseQwen3TtsConfig(c.config, f);
          assert.equal(m.talker.vocabSize, m.codebookSize + 1024);
          assert.ok(m.codePredictor.hiddenSize !== m.talker.hiddenSize, 'the tiny config keeps small_to_mtp_projection');
          tts++;
        }
      } finally {
        await c.close();
      }
    }
  }
  assert.ok(tts >= 5 && codec >= 2);
});
